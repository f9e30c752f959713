package booking

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingcom"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// resultsPath is the search results page.
const resultsPath = "/searchresults.html"

// resultsPageSize is how many properties a results page holds; offset
// counts them.
const resultsPageSize = 25

// photoOrigin serves the relative photo URLs of the Apollo data.
const photoOrigin = "https://cf.bstatic.com"

// accommodationTypes names the site's accommodation type ids (its ht_id
// filter values).
var accommodationTypes = map[string]string{
	"201": "Apartment", "203": "Hostel", "204": "Hotel", "205": "Motel", "206": "Villa", "208": "Guest house",
	"213": "Lodge", "216": "Bed and breakfast", "220": "Holiday home", "222": "Country house", "224": "Aparthotel", "226": "Resort",
}

// srOutput is the FullSearch output the results page caches
// (ROOT_QUERY.searchQueries["search({…})"]). Apollo keeps fields under
// their schema names; a GraphQL answer would use the query's aliases
// (reviewScore, score, reviewCount), which are read too.
type srOutput struct {
	Results    *[]srProperty `json:"results"`
	Pagination *struct {
		NbResultsTotal   flexNumber `json:"nbResultsTotal"`
		NbResultsPerPage flexNumber `json:"nbResultsPerPage"`
	} `json:"pagination"`
	DestinationLocation *struct {
		Name *struct {
			Text string `json:"text"`
		} `json:"name"`
		CountryCode string          `json:"countryCode"`
		UFI         json.RawMessage `json:"ufi"`
	} `json:"destinationLocation"`
	Sorters srSorters `json:"sorters"`
}

// srSorterOption is one order the results page offers.
type srSorterOption struct {
	Name                  string `json:"name"`
	Type                  string `json:"type"`
	Selected              *bool  `json:"selected"`
	IsSelected            *bool  `json:"isSelected"`
	CaptionTranslationTag *struct {
		Translation string `json:"translation"`
	} `json:"captionTranslationTag"`
}

// srSorters are the page's orders. The site sends a list of Sorter
// objects, one option each ([{"option": {"type", "isSelected", …}}], as
// captured from a FullSearch answer in 2024); an object holding a list of
// options ({"option": [ … ]}) is read too. A shape neither reads leaves the
// orders empty rather than failing the results they come with.
type srSorters []srSorterOption

func (s *srSorters) UnmarshalJSON(b []byte) error {
	var list []struct {
		Option *srSorterOption `json:"option"`
	}
	if json.Unmarshal(b, &list) == nil {
		for _, l := range list {
			if l.Option != nil {
				*s = append(*s, *l.Option)
			}
		}
		return nil
	}
	var grouped struct {
		Option []srSorterOption `json:"option"`
	}
	if json.Unmarshal(b, &grouped) == nil {
		*s = grouped.Option
	}
	return nil
}

type srReviews struct {
	TotalScore   flexNumber `json:"totalScore"`
	Score        flexNumber `json:"score"`
	ReviewsCount flexNumber `json:"reviewsCount"`
	ReviewCount  flexNumber `json:"reviewCount"`
}

type srPhotoURL struct {
	RelativeURL string `json:"relativeUrl"`
	AbsoluteURL string `json:"absoluteUrl"`
}

type srProperty struct {
	BasicPropertyData *struct {
		ID                  json.RawMessage `json:"id"`
		PageName            string          `json:"pageName"`
		AccommodationTypeID json.RawMessage `json:"accommodationTypeId"`
		UFI                 json.RawMessage `json:"ufi"`
		Location            *struct {
			Address     string     `json:"address"`
			City        string     `json:"city"`
			CountryCode string     `json:"countryCode"`
			Latitude    flexNumber `json:"latitude"`
			Longitude   flexNumber `json:"longitude"`
		} `json:"location"`
		Photos *struct {
			Main *struct {
				HighResURL     *srPhotoURL `json:"highResUrl"`
				HighResJpegURL *srPhotoURL `json:"highResJpegUrl"`
				LowResURL      *srPhotoURL `json:"lowResUrl"`
			} `json:"main"`
		} `json:"photos"`
		Reviews     *srReviews `json:"reviews"`
		ReviewScore *srReviews `json:"reviewScore"`
		IsClosed    *bool      `json:"isClosed"`
	} `json:"basicPropertyData"`
	DisplayName *struct {
		Text string `json:"text"`
	} `json:"displayName"`
	Location *struct {
		GeoDistanceMeters flexNumber `json:"geoDistanceMeters"`
	} `json:"location"`
	MealPlanIncluded *struct {
		MealPlanType string `json:"mealPlanType"`
	} `json:"mealPlanIncluded"`
	Policies *struct {
		ShowFreeCancellation *bool `json:"showFreeCancellation"`
	} `json:"policies"`
	SoldOutInfo *struct {
		IsSoldOut *bool `json:"isSoldOut"`
	} `json:"soldOutInfo"`
	Blocks []struct {
		FinalPrice *struct {
			Amount   flexNumber `json:"amount"`
			Currency string     `json:"currency"`
		} `json:"finalPrice"`
	} `json:"blocks"`
	PriceDisplayInfoIrene *struct {
		DisplayPrice *struct {
			AmountPerStay *struct {
				Amount            string     `json:"amount"`
				AmountUnformatted flexNumber `json:"amountUnformatted"`
				Currency          string     `json:"currency"`
			} `json:"amountPerStay"`
		} `json:"displayPrice"`
	} `json:"priceDisplayInfoIrene"`
}

// resultsQuery is the results page's query for a destination and stay.
func resultsQuery(d destination, s stay, lang, cur string, offset int, order string) url.Values {
	q := url.Values{}
	if d.Name != "" {
		// The search box's text; dest_id and dest_type decide the search.
		q.Set("ss", d.Name)
	}
	q.Set("dest_id", d.ID)
	q.Set("dest_type", d.Type)
	s.query(q, lang, cur)
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	if order != "" {
		q.Set("order", order)
	}
	return q
}

// searchResults fetches a results page and reads its cached search.
func (f fetcher) searchResults(ctx context.Context, q url.Values, lang string) (srOutput, *pages.Page, error) {
	p, err := f.get(ctx, resultsPath, q, lang)
	if err != nil {
		return srOutput{}, nil, err
	}
	out, err := parseResults(p.Body)
	return out, p, err
}

// parseResults reads the FullSearch output from the page's Apollo cache.
func parseResults(page []byte) (srOutput, error) {
	store, ok := apolloStore(page)
	if !ok {
		return srOutput{}, upstream.MalformedFault("no Apollo data (ROOT_QUERY) in a %d-byte results page", len(page))
	}
	var root struct {
		SearchQueries map[string]json.RawMessage `json:"searchQueries"`
	}
	if err := json.Unmarshal(inline(store, store["ROOT_QUERY"], 0), &root); err != nil {
		return srOutput{}, upstream.MalformedFault("unreadable ROOT_QUERY in a %d-byte results page", len(page))
	}
	for key, raw := range root.SearchQueries {
		if !strings.HasPrefix(key, "search(") {
			continue
		}
		var out srOutput
		if json.Unmarshal(raw, &out) == nil && out.Results != nil {
			return out, nil
		}
	}
	return srOutput{}, upstream.MalformedFault("no search results in the Apollo data of a %d-byte results page", len(page))
}

// HotelSearch is the data of travel_booking/search-hotels.
type HotelSearch struct {
	Count        int             `json:"count"`
	Cursor       *string         `json:"cursor"`
	Destination  AttractionPlace `json:"destination"`
	HasMore      *bool           `json:"has_more"`
	Page         int             `json:"page"`
	Total        *float64        `json:"total"`
	CheckinDate  string          `json:"checkin_date"`
	CheckoutDate string          `json:"checkout_date"`
	Currency     *string         `json:"currency"`
	Items        []HotelSummary  `json:"items"`
	Sorts        []Sort          `json:"sorts"`
	Warnings     []string        `json:"_warnings,omitempty"`
}

// HotelSummary is one property of the results; price is for the whole
// stay, in the rooms asked for.
type HotelSummary struct {
	ID                 string   `json:"id"`
	Name               *string  `json:"name"`
	URL                *string  `json:"url"`
	Platform           string   `json:"platform"`
	Type               string   `json:"type"`
	AccommodationType  *string  `json:"accommodation_type"`
	Address            *string  `json:"address"`
	City               *string  `json:"city"`
	District           *string  `json:"district"`
	CountryCode        *string  `json:"country_code"`
	DestinationID      *string  `json:"destination_id"`
	Latitude           *float64 `json:"latitude"`
	Longitude          *float64 `json:"longitude"`
	DistanceToCentreKm *float64 `json:"distance_to_centre_km"`
	ImageURL           *string  `json:"image_url"`
	Price              *Price   `json:"price"`
	PriceLabel         *string  `json:"price_label"`
	Rating             *float64 `json:"rating"`
	ReviewCount        *float64 `json:"review_count"`
	FreeCancellation   *bool    `json:"free_cancellation"`
	BreakfastIncluded  *bool    `json:"breakfast_included"`
	SoldOut            *bool    `json:"sold_out"`
}

// searchHotels serves travel_booking/search-hotels from the results page.
func (f fetcher) searchHotels(ctx context.Context, c *upstream.Call) (any, error) {
	lang, err := bookingcom.Language(c)
	if err != nil {
		return nil, err
	}
	s, err := stayOf(c)
	if err != nil {
		return nil, err
	}
	d, err := f.destinationOf(ctx, c, lang)
	if err != nil {
		return nil, err
	}
	pg := page(c)
	cur := currency(c)
	order := strings.TrimSpace(c.Param("sort"))
	res, _, err := f.searchResults(ctx, resultsQuery(d, s, lang, cur, (pg-1)*resultsPageSize, order), lang)
	if err != nil {
		return nil, err
	}
	out := HotelSearch{Items: []HotelSummary{}, Page: pg, CheckinDate: s.checkin, CheckoutDate: s.checkout,
		Destination: AttractionPlace{ID: d.key(), City: trimmed(d.City), Country: trimmed(d.Country)}}
	if cur != "" {
		out.Currency = &cur
	}
	var warnings []string
	for _, r := range *res.Results {
		it, ok := summary(r)
		if !ok {
			continue
		}
		if d.Type != "city" {
			// The site measures from the searched place, a city's centre only for a city.
			it.DistanceToCentreKm = nil
		}
		if it.Price != nil && it.Price.Currency != nil {
			if out.Currency == nil {
				out.Currency = it.Price.Currency
			}
			if cur != "" && !strings.EqualFold(*it.Price.Currency, cur) && !contains(warnings, warnCurrency) {
				warnings = append(warnings, warnCurrency)
			}
		}
		out.Items = append(out.Items, it)
	}
	out.Count = len(out.Items)
	perPage := resultsPageSize
	if res.Pagination != nil {
		out.Total = res.Pagination.NbResultsTotal.ptr()
		if n := res.Pagination.NbResultsPerPage.ptr(); n != nil && *n >= 1 {
			perPage = int(*n)
		}
	}
	switch {
	case out.Total != nil:
		more := float64((pg-1)*resultsPageSize+out.Count) < *out.Total
		out.HasMore = &more
	case out.Count < perPage:
		no := false
		out.HasMore = &no
	}
	if dl := res.DestinationLocation; dl != nil && out.Destination.City == nil && d.Type == "city" && dl.Name != nil {
		out.Destination.City = trimmed(dl.Name.Text)
	}
	if len(res.Sorters) > 0 {
		applied := order == ""
		for _, o := range res.Sorters {
			id := o.Name
			if id == "" {
				id = o.Type
			}
			if id == "" {
				continue
			}
			active := o.Selected
			if active == nil {
				active = o.IsSelected
			}
			if active != nil && *active && id == order {
				applied = true
			}
			var name *string
			if o.CaptionTranslationTag != nil {
				name = trimmed(o.CaptionTranslationTag.Translation)
			}
			out.Sorts = append(out.Sorts, Sort{ID: id, Name: name, Active: active})
		}
		if !applied && len(out.Sorts) > 0 {
			warnings = append(warnings, warnSort)
		}
	}
	out.Warnings = warnings
	return out, nil
}

// summary maps one result; ok is false for a result without an id.
func summary(r srProperty) (HotelSummary, bool) {
	b := r.BasicPropertyData
	if b == nil {
		return HotelSummary{}, false
	}
	it := HotelSummary{ID: rawID(b.ID), Platform: platform, Type: "hotel"}
	if it.ID == "" {
		return it, false
	}
	if r.DisplayName != nil {
		it.Name = trimmed(r.DisplayName.Text)
	}
	if name, ok := accommodationTypes[rawID(b.AccommodationTypeID)]; ok {
		it.AccommodationType = &name
	}
	if id := rawID(b.UFI); id != "" {
		it.DestinationID = &id
	}
	if l := b.Location; l != nil {
		it.Address, it.City, it.CountryCode = trimmed(l.Address), trimmed(l.City), upperPtr(l.CountryCode)
		it.Latitude, it.Longitude = l.Latitude.ptr(), l.Longitude.ptr()
		if cc := strings.ToLower(strings.TrimSpace(l.CountryCode)); cc != "" && strings.TrimSpace(b.PageName) != "" {
			link := hotelURL(cc, b.PageName)
			it.URL = &link
		}
	}
	if r.Location != nil {
		if m := r.Location.GeoDistanceMeters.ptr(); m != nil {
			km := *m / 1000
			it.DistanceToCentreKm = &km
		}
	}
	if ph := b.Photos; ph != nil && ph.Main != nil {
		for _, u := range []*srPhotoURL{ph.Main.HighResURL, ph.Main.HighResJpegURL, ph.Main.LowResURL} {
			if link := photoURL(u); link != nil {
				it.ImageURL = link
				break
			}
		}
	}
	rv := b.Reviews
	if rv == nil {
		rv = b.ReviewScore
	}
	if rv != nil {
		it.ReviewCount = rv.ReviewsCount.ptr()
		if it.ReviewCount == nil {
			it.ReviewCount = rv.ReviewCount.ptr()
		}
		score := rv.TotalScore.ptr()
		if score == nil {
			score = rv.Score.ptr()
		}
		// A property without reviews shows a score of 0: unknown.
		if it.ReviewCount != nil && *it.ReviewCount > 0 {
			it.Rating = score
		}
	}
	if pd := r.PriceDisplayInfoIrene; pd != nil && pd.DisplayPrice != nil && pd.DisplayPrice.AmountPerStay != nil {
		ps := pd.DisplayPrice.AmountPerStay
		it.Price = &Price{Amount: ps.AmountUnformatted.ptr(), Currency: upperPtr(ps.Currency)}
		it.PriceLabel = trimmed(ps.Amount)
	}
	if it.Price == nil || it.Price.Amount == nil {
		for _, bl := range r.Blocks {
			if bl.FinalPrice != nil && bl.FinalPrice.Amount.ok {
				it.Price = &Price{Amount: bl.FinalPrice.Amount.ptr(), Currency: upperPtr(bl.FinalPrice.Currency)}
				break
			}
		}
	}
	if r.Policies != nil {
		it.FreeCancellation = r.Policies.ShowFreeCancellation
	}
	if r.SoldOutInfo != nil {
		it.SoldOut = r.SoldOutInfo.IsSoldOut
	}
	switch {
	case r.MealPlanIncluded != nil && r.MealPlanIncluded.MealPlanType != "":
		v := includesBreakfast(r.MealPlanIncluded.MealPlanType)
		it.BreakfastIncluded = &v
	case it.Price != nil && it.Price.Amount != nil:
		// A priced stay whose rate names no meal plan includes none.
		no := false
		it.BreakfastIncluded = &no
	}
	return it, true
}

// includesBreakfast tells whether a meal plan (the search's mealPlanType,
// the hotel page's b_mealplan_included_name) includes breakfast.
func includesBreakfast(plan string) bool {
	p := strings.ToLower(plan)
	for _, w := range []string{"breakfast", "half_board", "full_board", "all_inclusive"} {
		if strings.Contains(p, w) {
			return true
		}
	}
	return false
}

// hotelURL is a property's canonical page.
func hotelURL(cc, pageName string) string {
	return Origin + "/hotel/" + url.PathEscape(strings.ToLower(cc)) + "/" + url.PathEscape(strings.TrimSpace(pageName)) + ".html"
}

func photoURL(u *srPhotoURL) *string {
	if u == nil {
		return nil
	}
	if a := strings.TrimSpace(u.AbsoluteURL); strings.HasPrefix(a, "https://") {
		return &a
	}
	if r := strings.TrimSpace(u.RelativeURL); strings.HasPrefix(r, "/") {
		link := photoOrigin + r
		return &link
	}
	return nil
}
