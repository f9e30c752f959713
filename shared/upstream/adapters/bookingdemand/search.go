package bookingdemand

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingcom"
)

// pageSize is the search's rows (a multiple of 10, at most 100): 20
// results and their details per page.
const pageSize = 20

// tokenTTL keeps a next_page token well inside the three hours the
// source honours it.
const tokenTTL = 2 * time.Hour

// maxWalk bounds the search calls one request may make to reach a page
// whose token is not remembered (each earlier page costs one), and how
// far back it looks for a remembered one.
const maxWalk = 6

// maxCityLookups bounds the city names one search page looks up.
const maxCityLookups = 5

// Search is the data of travel_booking/search-hotels.
type Search struct {
	Items        []Result     `json:"items"`
	Count        int          `json:"count"`
	Cursor       *string      `json:"cursor"`
	HasMore      bool         `json:"has_more"`
	Page         int          `json:"page"`
	Total        *int64       `json:"total"`
	Destination  *Destination `json:"destination"`
	CheckinDate  string       `json:"checkin_date"`
	CheckoutDate string       `json:"checkout_date"`
	Currency     *string      `json:"currency"`
	Warnings     []string     `json:"_warnings,omitempty"`

	Nights int    `json:"nights"`
	Guests Guests `json:"guests"`
}

// Destination is the place searched.
type Destination struct {
	ID          string  `json:"id"`
	Type        string  `json:"type"`
	Name        *string `json:"name"`
	City        *string `json:"city"`
	Country     *string `json:"country"`
	CountryCode *string `json:"country_code"`
}

// Result is one property with an available stay: the summary fields of
// travel_booking/hotel, and its cheapest stay's price for every guest and
// room over the whole stay.
type Result struct {
	ID                string  `json:"id"`
	Name              *string `json:"name"`
	URL               *string `json:"url"`
	Platform          string  `json:"platform"`
	Type              string  `json:"type"`
	AccommodationType *string `json:"accommodation_type"`
	Place
	ImageURL          *string  `json:"image_url"`
	Price             *Price   `json:"price"`
	PriceAllInclusive *float64 `json:"price_all_inclusive"`
	PricePerNight     *float64 `json:"price_per_night"`
	Rating            *float64 `json:"rating"`
	ReviewCount       *int64   `json:"review_count"`
	Stars             *float64 `json:"stars"`
	FreeCancellation  *bool    `json:"free_cancellation"`
	BreakfastIncluded *bool    `json:"breakfast_included"`
	SoldOut           bool     `json:"sold_out"`
}

// Price is a price for the stay (every night, guest and room) as the
// source displays it, taxes the law requires shown included.
type Price struct {
	Amount   *float64 `json:"amount"`
	Currency *string  `json:"currency"`
}

// Warnings of travel_booking/search-hotels.
const (
	WarnSearchUnreported = "The source reports no district or distance to the centre for search results: those fields are null."
	WarnCitiesCapped     = "Some results' city names were not looked up: their city is null."
)

// searchResult is one AccommodationsSearchDataOutput.
type searchResult struct {
	ID       json.Number `json:"id"`
	Currency string      `json:"currency"`
	Price    *price      `json:"price"`
	Products []product   `json:"products"`
	URL      string      `json:"url"`
}

// sortBy is the search's sort object.
type sortBy struct{ By, Direction string }

// sorts maps the site's sort ids to the API's orders; nil is the source's
// default (popularity). Others (distance from a point) the API can sort
// by only around coordinates, which a destination search has not.
var sorts = map[string]*sortBy{
	"popularity": nil, "top_picks": nil,
	"price":        {"price", "ascending"},
	"review_score": {"review_score", "descending"}, "review_score_and_price": {"review_score", "descending"},
	"bayesian_review_score": {"review_score", "descending"},
	"class":                 {"stars", "descending"}, "stars": {"stars", "descending"}, "class_and_price": {"stars", "descending"},
	"class_asc": {"stars", "ascending"},
}

var errNoMore = errors.New("no further page")

// errStale is a remembered page token the source no longer takes.
var errStale = errors.New("page token refused")

// searcher walks the source's pages: page 1 is the search itself, page
// N+1 the next_page token page N returned, remembered per page.
type searcher struct {
	c      *upstream.Call
	first  map[string]any
	sig    string
	fields map[string]string
	fresh  bool // the remembered tokens failed: walk without them
	calls  int
}

type searchPage struct {
	results []searchResult
	next    string
	total   *int64
}

func (s *searcher) key(page int) string { return s.sig + "|" + strconv.Itoa(page) }

// fetch returns page (nil when an earlier page was the last); depth is
// how many pages back from the one asked for it is, bounded so a far page
// neither recurses nor reads the memory without end.
func (s *searcher) fetch(ctx context.Context, page, depth int) (*searchPage, error) {
	if depth > maxWalk {
		return nil, refused("the page is too far from the remembered pages to walk to")
	}
	if page == 1 {
		return s.request(ctx, s.first, false)
	}
	resolve := func(ctx context.Context) (string, error) {
		prev, err := s.fetch(ctx, page-1, depth+1)
		if err != nil {
			return "", err
		}
		if prev == nil || prev.next == "" {
			return "", errNoMore
		}
		return prev.next, nil
	}
	var tok string
	var err error
	if s.fresh {
		tok, err = resolve(ctx)
	} else {
		tok, err = remember(ctx, s.c, "page", s.key(page), tokenTTL, resolve)
	}
	if errors.Is(err, errNoMore) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// "page" must be sent alone: the token carries the search.
	return s.request(ctx, map[string]any{"page": tok}, true)
}

func (s *searcher) request(ctx context.Context, body map[string]any, byToken bool) (*searchPage, error) {
	if s.calls++; s.calls > maxWalk {
		return nil, refused("the page is too far from the remembered pages to walk to")
	}
	var list []searchResult
	env, err := post(ctx, s.c, searchPath, body, s.fields, &list)
	if err != nil {
		var f *upstream.Fault
		if byToken && errors.As(err, &f) && (f.Status == http.StatusBadRequest || f.Kind == upstream.InvalidParameter) {
			return nil, errStale
		}
		return nil, err
	}
	for _, r := range list {
		if r.ID == "" {
			return nil, upstream.MalformedFault("a search result has no id")
		}
	}
	return &searchPage{results: list, next: env.next(), total: env.total()}, nil
}

func searchHotels(ctx context.Context, c *upstream.Call) (any, error) {
	st, err := readStay(c)
	if err != nil {
		return nil, err
	}
	lang, err := bookingcom.Language(c)
	if err != nil {
		return nil, err
	}
	page := 1
	if v := c.Param("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 1 {
			return nil, upstream.InvalidParameterFault("page", "invalid_page", "page must be a whole number from 1.")
		}
	}
	var order *sortBy
	if v := c.Param("sort"); v != "" {
		o, ok := sorts[v]
		if !ok {
			return nil, refused("the source has no sort " + strconv.Quote(v))
		}
		order = o
	}

	var dest destination
	if id := c.Param("destination_id"); id != "" {
		d, ok := parseDestination(id)
		if !ok {
			return nil, refused("destination_id is not one this source reads")
		}
		dest = d
	} else if dest, err = resolveLocation(ctx, c, c.Param("location"), lang); err != nil {
		return nil, err
	}

	body := map[string]any{"booker": booker(c), "checkin": st.Checkin, "checkout": st.Checkout, "guests": st.guests(),
		"extras": []string{"extra_charges", "products"}, "rows": pageSize}
	field, value := dest.field()
	body[field] = value
	if cur := c.Param("currency"); cur != "" {
		body["currency"] = cur
	}
	if order != nil {
		body["sort"] = map[string]string{"by": order.By, "direction": order.Direction}
	}
	destField := "destination_id"
	if c.Param("destination_id") == "" {
		destField = "location"
	}
	s := &searcher{c: c, first: body, sig: digest(body),
		fields: withFields(map[string]string{field: destField, "page": "page", "sort": "sort", "sort.by": "sort"})}
	got, err := s.fetch(ctx, page, 1)
	if errors.Is(err, errStale) {
		s.fresh, s.calls = true, 0
		got, err = s.fetch(ctx, page, 1)
	}
	if errors.Is(err, errStale) {
		return nil, &upstream.Fault{Kind: upstream.Rejected, Status: http.StatusBadRequest, Reason: "the source refused its own page token"}
	}
	if err != nil {
		return nil, err
	}
	if got == nil {
		got = &searchPage{} // past the last page: nothing more
	}
	if got.next != "" {
		next := got.next
		_, _ = remember(ctx, c, "page", s.key(page+1), tokenTTL, func(context.Context) (string, error) { return next, nil })
	}

	out := Search{Items: []Result{}, Page: page, HasMore: got.next != "", Total: got.total, CheckinDate: st.Checkin,
		CheckoutDate: st.Checkout, Nights: st.Nights, Guests: Guests{Adults: st.Adults, ChildrenAges: append([]int{}, st.Children...), Rooms: st.Rooms},
		Warnings: []string{WarnSearchUnreported}}
	out.Destination = describeDestination(ctx, c, dest, lang)
	if cur := c.Param("currency"); cur != "" {
		out.Currency = text(cur)
	}
	if len(got.results) == 0 {
		return out, nil
	}

	ids := make([]int64, 0, len(got.results))
	for _, r := range got.results {
		if n, err := strconv.ParseInt(r.ID.String(), 10, 64); err == nil {
			ids = append(ids, n)
		}
	}
	var det []details
	if len(ids) > 0 {
		body := map[string]any{"accommodations": ids, "extras": []string{"photos"}, "languages": []string{lang}}
		if _, err := post(ctx, c, detailsPath, body, nil, &det); err != nil {
			return nil, err
		}
	}
	byID := make(map[string]*details, len(det))
	for i := range det {
		byID[det[i].ID.String()] = &det[i]
	}
	nm, nameErr := lookupNames(ctx, c, lang)
	if nameErr != nil {
		nm = nil
		out.Warnings = append(out.Warnings, WarnNamesFailed)
	}
	cities := cityNames{c: c, lang: lang, known: map[string]*string{}}
	if out.Destination != nil && dest.Type == "city" {
		cities.known[dest.ID] = out.Destination.City
	}
	for _, r := range got.results {
		item := result(r, byID[r.ID.String()], nm, lang, st.Nights)
		if item.DestinationID != nil {
			item.City = cities.name(ctx, *item.DestinationID)
		}
		out.Items = append(out.Items, item)
	}
	// A city looked up by id has no country: its results say which.
	if d := out.Destination; d != nil && d.CountryCode == nil && dest.Type == "city" {
		for _, it := range out.Items {
			if it.DestinationID != nil && *it.DestinationID == dest.ID && it.CountryCode != nil {
				d.CountryCode = it.CountryCode
				break
			}
		}
	}
	if cities.capped {
		out.Warnings = append(out.Warnings, WarnCitiesCapped)
	}
	out.Count = len(out.Items)
	if out.Currency == nil && out.Items[0].Price != nil {
		out.Currency = out.Items[0].Price.Currency
	}
	return out, nil
}

// describeDestination names the place searched: what the autocomplete
// said, or a city's remembered name.
func describeDestination(ctx context.Context, c *upstream.Call, d destination, lang string) *Destination {
	out := &Destination{ID: d.key(), Type: d.Type, Name: text(d.Name), City: text(d.City), Country: text(d.Country),
		CountryCode: text(d.CountryCode)}
	if d.Type == "country" && out.CountryCode == nil {
		out.CountryCode = upper(text(d.ID))
	}
	if d.Type == "city" && out.City == nil {
		if id, err := strconv.ParseInt(d.ID, 10, 64); err == nil {
			if p, err := cityName(ctx, c, id, lang); err == nil {
				out.City, out.Name = text(p.Name), text(p.Name)
				if out.CountryCode == nil {
					out.CountryCode = upper(text(p.Country))
				}
			}
		}
	}
	return out
}

// cityNames names the results' cities, a few lookups per page.
type cityNames struct {
	c       *upstream.Call
	lang    string
	known   map[string]*string
	lookups int
	capped  bool
}

func (n *cityNames) name(ctx context.Context, id string) *string {
	if v, ok := n.known[id]; ok {
		return v
	}
	cid, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil
	}
	if n.lookups == maxCityLookups {
		n.capped = true
		return nil
	}
	n.lookups++
	p, err := cityName(ctx, n.c, cid, n.lang)
	if err != nil {
		n.known[id] = nil
		return nil
	}
	n.known[id] = text(p.Name)
	return n.known[id]
}

func result(r searchResult, d *details, nm *names, lang string, nights int) Result {
	item := Result{ID: r.ID.String(), URL: text(r.URL), Platform: platformName, Type: "hotel"}
	if r.Price != nil {
		item.Price = &Price{Amount: r.Price.Book, Currency: text(r.Currency)}
		item.PriceAllInclusive = r.Price.Total
		if r.Price.Book != nil && nights > 0 {
			v := math.Round(*r.Price.Book/float64(nights)*100) / 100
			item.PricePerNight = &v
		}
	}
	item.FreeCancellation, item.BreakfastIncluded = allProducts(r.Products)
	if d == nil {
		return item
	}
	item.Name = d.Name.in(lang)
	if item.URL == nil {
		item.URL = text(d.URL)
	}
	if nm != nil {
		item.AccommodationType = name(nm.Types, d.AccommodationType)
	}
	item.Place.read(d.Location, lang)
	if rt := d.Rating; rt != nil {
		item.Rating, item.ReviewCount, item.Stars = rt.ReviewScore, rt.NumberOfReviews, rt.Stars
	}
	for _, p := range orderPhotos(d.Photos) {
		if u := p.URL.Standard; u != "" {
			item.ImageURL = &u
			break
		}
	}
	return item
}

// allProducts reads a result's products (the rooms of its cheapest stay):
// free cancellation and breakfast hold when they hold for every one.
func allProducts(list []product) (freeCancel, breakfastIncl *bool) {
	for _, p := range list {
		if p.Policies == nil {
			return nil, nil
		}
		if cp := p.Policies.Cancellation; cp != nil && cp.Type != "" {
			v := cp.Type == "free_cancellation" && (freeCancel == nil || *freeCancel)
			freeCancel = &v
		}
		if mp := p.Policies.MealPlan; mp != nil {
			if b := breakfast(mp.Plan, mp.Meals); b != nil {
				v := *b && (breakfastIncl == nil || *breakfastIncl)
				breakfastIncl = &v
			}
		}
	}
	return freeCancel, breakfastIncl
}
