package bookingdemand

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingcom"
)

// ---- the source's records ----

// The records below name only the fields read, so a field the source
// adds or retypes elsewhere cannot break the decoding.

type photo struct {
	MainPhoto bool `json:"main_photo"`
	URL       struct {
		Large          string `json:"large"`
		Standard       string `json:"standard"`
		Thumbnail      string `json:"thumbnail"`
		ThumbnailLarge string `json:"thumbnail_large"`
	} `json:"url"`
}

type detailRoom struct {
	ID         json.Number `json:"id"`
	Attributes []string    `json:"attributes"`
	BedOptions []struct {
		BedConfigurations []struct {
			Configuration []struct {
				BedType      json.Number `json:"bed_type"`
				NumberOfBeds *int        `json:"number_of_beds"`
			} `json:"configuration"`
		} `json:"bed_configurations"`
		HasBathroom *bool `json:"has_bathroom"`
		IsBedroom   *bool `json:"is_bedroom"`
	} `json:"bed_options"`
	Description      translated    `json:"description"`
	Facilities       []json.Number `json:"facilities"`
	MaximumOccupancy *struct {
		Adults   *int `json:"adults"`
		Children *int `json:"children"`
	} `json:"maximum_occupancy"`
	Name          translated `json:"name"`
	NumberOfRooms *struct {
		Bathrooms   *int `json:"bathrooms"`
		Bedrooms    *int `json:"bedrooms"`
		LivingRooms *int `json:"living_rooms"`
	} `json:"number_of_rooms"`
	Photos   []photo     `json:"photos"`
	RoomType json.Number `json:"room_type"`
	Size     *float64    `json:"size"`
}

// details is an AccommodationsDetailsDataOutput.
type details struct {
	ID                   json.Number `json:"id"`
	AccommodationType    json.Number `json:"accommodation_type"`
	CheckinCheckoutTimes *struct {
		CheckinFrom  *string `json:"checkin_from"`
		CheckinTo    *string `json:"checkin_to"`
		CheckoutFrom *string `json:"checkout_from"`
		CheckoutTo   *string `json:"checkout_to"`
	} `json:"checkin_checkout_times"`
	Currency    string `json:"currency"`
	Description *struct {
		ImportantInformation translated `json:"important_information"`
		Text                 translated `json:"text"`
	} `json:"description"`
	Facilities []struct {
		ID json.Number `json:"id"`
	} `json:"facilities"`
	Location      *location  `json:"location"`
	Name          translated `json:"name"`
	NumberOfRooms *int       `json:"number_of_rooms"`
	Photos        []photo    `json:"photos"`
	Rating        *struct {
		NumberOfReviews *int64   `json:"number_of_reviews"`
		ReviewScore     *float64 `json:"review_score"`
		Stars           *float64 `json:"stars"`
	} `json:"rating"`
	Rooms           []detailRoom `json:"rooms"`
	SpokenLanguages []string     `json:"spoken_languages"`
	URL             string       `json:"url"`
}

// price is a product's (or a search result's) price components.
// extra_charges differs in shape between them and is not read.
type price struct {
	Base             *float64 `json:"base"`
	Book             *float64 `json:"book"`
	ChargeableOnline *float64 `json:"chargeable_online"`
	Total            *float64 `json:"total"`
}

type policies struct {
	Cancellation *struct {
		FreeCancellationUntil *string `json:"free_cancellation_until"`
		Schedule              []struct {
			From  *string  `json:"from"`
			Price *float64 `json:"price"`
		} `json:"schedule"`
		Type string `json:"type"`
	} `json:"cancellation"`
	MealPlan *struct {
		Meals []string `json:"meals"`
		Plan  string   `json:"plan"`
	} `json:"meal_plan"`
	Payment *struct {
		PrepaymentRequired *bool    `json:"prepayment_required"`
		Timings            []string `json:"timings"`
	} `json:"payment"`
}

// product is one bookable product of availability (and of search with
// extras=products).
type product struct {
	ID   upstream.FlexID `json:"id"`
	Deal *struct {
		DiscountPercentage *int     `json:"discount_percentage"`
		PublicPrice        *float64 `json:"public_price"`
		Tags               []string `json:"tags"`
	} `json:"deal"`
	Inventory *struct {
		ThirdParty *bool `json:"third_party"`
	} `json:"inventory"`
	MaximumOccupancy *struct {
		Adults   *int `json:"adults"`
		Children []struct {
			Total    *int  `json:"total"`
			FromAge  *int  `json:"from_age"`
			ToAge    *int  `json:"to_age"`
			FreeStay *bool `json:"free_stay"`
		} `json:"children"`
		Total *int `json:"total"`
	} `json:"maximum_occupancy"`
	NumberAvailableAtThisPrice *int        `json:"number_available_at_this_price"`
	Policies                   *policies   `json:"policies"`
	Price                      *price      `json:"price"`
	Room                       json.Number `json:"room"`
	ThirdPartyInventory        *bool       `json:"third_party_inventory"`
}

type availability struct {
	ID             json.Number `json:"id"`
	Currency       string      `json:"currency"`
	Products       []product   `json:"products"`
	Recommendation *struct {
		Products []struct {
			ID upstream.FlexID `json:"id"`
		} `json:"products"`
	} `json:"recommendation"`
	URL string `json:"url"`
}

type scores struct {
	ID        json.Number `json:"id"`
	Breakdown map[string]struct {
		NumberOfReviews *int64   `json:"number_of_reviews"`
		Score           *float64 `json:"score"`
	} `json:"breakdown"`
	NumberOfReviews *int64   `json:"number_of_reviews"`
	Score           *float64 `json:"score"`
}

// location is where the details place a property.
type location struct {
	Address     translated  `json:"address"`
	City        json.Number `json:"city"`
	Coordinates *coords     `json:"coordinates"`
	Country     string      `json:"country"`
	PostalCode  string      `json:"postal_code"`
}

// Place is where a property is, as travel_booking/hotel and each
// search-hotels result both show it.
type Place struct {
	Address            *string  `json:"address"`
	City               *string  `json:"city"`
	District           *string  `json:"district"`
	Postcode           *string  `json:"postcode"`
	CountryCode        *string  `json:"country_code"`
	DestinationID      *string  `json:"destination_id"`
	Latitude           *float64 `json:"latitude"`
	Longitude          *float64 `json:"longitude"`
	DistanceToCentreKm *float64 `json:"distance_to_centre_km"`
}

// read fills the place from the details' location (the city's name comes
// later, from the cities lookup).
func (p *Place) read(loc *location, lang string) {
	if loc == nil {
		return
	}
	p.Address = loc.Address.in(lang)
	p.Postcode = text(loc.PostalCode)
	p.CountryCode = upper(text(loc.Country))
	p.DestinationID = idString(loc.City)
	if loc.Coordinates != nil {
		p.Latitude, p.Longitude = loc.Coordinates.Latitude, loc.Coordinates.Longitude
	}
}

// ---- travel_booking/hotel ----

// Hotel is the data of travel_booking/hotel. Fields after Warnings are the
// spec's unshown extras (stay, ratings, texts, photos, house times).
type Hotel struct {
	ID                string  `json:"id"`
	Name              *string `json:"name"`
	URL               *string `json:"url"`
	Platform          string  `json:"platform"`
	Type              string  `json:"type"`
	AccommodationType *string `json:"accommodation_type"`
	Place
	Timezone             *string         `json:"timezone"`
	CheckinDate          string          `json:"checkin_date"`
	CheckoutDate         string          `json:"checkout_date"`
	Currency             *string         `json:"currency"`
	ReviewCount          *int64          `json:"review_count"`
	BreakfastScore       *BreakfastScore `json:"breakfast_score"`
	WifiScore            *float64        `json:"wifi_score"`
	Facilities           []string        `json:"facilities"`
	FamilyFacilities     []string        `json:"family_facilities"`
	FamilyFriendly       *bool           `json:"family_friendly"`
	Highlights           []string        `json:"highlights"`
	TopBenefits          []string        `json:"top_benefits"`
	ImportantInformation []string        `json:"important_information"`
	LanguagesSpoken      []string        `json:"languages_spoken"`
	MaxRoomsPerBooking   *int            `json:"max_rooms_per_booking"`
	AvailableRooms       *int            `json:"available_rooms"`
	BreakfastIncluded    *bool           `json:"breakfast_included"`
	SoldOut              bool            `json:"sold_out"`
	Closed               *bool           `json:"closed"`
	Rooms                []Room          `json:"rooms"`
	Offers               []Offer         `json:"offers"`
	Warnings             []string        `json:"_warnings,omitempty"`

	Nights         int        `json:"nights"`
	Guests         Guests     `json:"guests"`
	ReviewScore    *float64   `json:"review_score"`
	Stars          *float64   `json:"stars"`
	Description    *string    `json:"description"`
	Photos         []string   `json:"photos"`
	HouseTimes     *HouseTime `json:"checkin_checkout_times"`
	TotalRoomCount *int       `json:"property_room_count"`
}

// BreakfastScore is the spec's breakfast rating; the source has none.
type BreakfastScore struct {
	Count  *int64   `json:"count"`
	Rating *float64 `json:"rating"`
	Word   *string  `json:"word"`
}

// Guests echoes the occupancy the offers are priced for.
type Guests struct {
	Adults       int   `json:"adults"`
	ChildrenAges []int `json:"children_ages"`
	Rooms        int   `json:"rooms"`
}

// HouseTime is the property's check-in and check-out hours.
type HouseTime struct {
	CheckinFrom  *string `json:"checkin_from"`
	CheckinTo    *string `json:"checkin_to"`
	CheckoutFrom *string `json:"checkout_from"`
	CheckoutTo   *string `json:"checkout_to"`
}

// Room is one room type of the property, with its beds, facilities and
// photos; available says whether it has an offer for the stay.
type Room struct {
	ID          string      `json:"id"`
	Name        *string     `json:"name"`
	Description *string     `json:"description"`
	RoomType    *string     `json:"room_type"`
	Size        *float64    `json:"size"`
	SizeUnit    string      `json:"size_unit"`
	MaxAdults   *int        `json:"max_adults"`
	MaxChildren *int        `json:"max_children"`
	Bedrooms    *int        `json:"bedrooms"`
	Bathrooms   *int        `json:"bathrooms"`
	LivingRooms *int        `json:"living_rooms"`
	BedOptions  []BedOption `json:"bed_options"`
	Facilities  []string    `json:"facilities"`
	Attributes  []string    `json:"attributes"`
	Photos      []string    `json:"photos"`
	Available   bool        `json:"available"`
}

// BedOption is one sleeping area and its alternative bed configurations.
type BedOption struct {
	IsBedroom      *bool   `json:"is_bedroom"`
	HasBathroom    *bool   `json:"has_bathroom"`
	Configurations [][]Bed `json:"configurations"`
}

// Bed is a number of beds of one type; width in the requested units.
type Bed struct {
	TypeID string  `json:"type_id"`
	Type   *string `json:"type"`
	Width  *string `json:"width"`
	Count  *int    `json:"count"`
}

// Offer is one bookable product: a room at a rate, priced for the whole
// stay and every guest, with its terms as the source gives them.
type Offer struct {
	ID                 string        `json:"id"`
	RoomID             *string       `json:"room_id"`
	RoomName           *string       `json:"room_name"`
	Currency           *string       `json:"currency"`
	Price              *float64      `json:"price"`
	PriceAllInclusive  *float64      `json:"price_all_inclusive"`
	PriceBase          *float64      `json:"price_base"`
	PricePerNight      *float64      `json:"price_per_night"`
	ChargeableOnline   *float64      `json:"chargeable_online"`
	PublicPrice        *float64      `json:"public_price"`
	DiscountPercentage *int          `json:"discount_percentage"`
	Deals              []string      `json:"deals"`
	FreeCancellation   *bool         `json:"free_cancellation"`
	Cancellation       *Cancellation `json:"cancellation"`
	Prepayment         *Prepayment   `json:"prepayment"`
	MealPlan           *MealPlan     `json:"meal_plan"`
	BreakfastIncluded  *bool         `json:"breakfast_included"`
	MaxOccupancy       *Occupancy    `json:"max_occupancy"`
	AvailableCount     *int          `json:"available_count"`
	ThirdParty         *bool         `json:"third_party"`
	Recommended        bool          `json:"recommended"`
}

// Cancellation is a product's cancellation policy: free_cancellation,
// non_refundable or special_conditions (partly refundable), the free
// period's end and the fee schedule ("now" means from booking).
type Cancellation struct {
	Type      *string `json:"type"`
	FreeUntil *string `json:"free_cancellation_until"`
	Schedule  []Fee   `json:"schedule"`
}

// Fee is the cancellation fee from a time on.
type Fee struct {
	From *string  `json:"from"`
	Fee  *float64 `json:"fee"`
}

// Prepayment says whether the stay is paid ahead and how it can be paid
// (pay_at_the_property, pay_online_now, pay_online_later).
type Prepayment struct {
	Required *bool    `json:"required"`
	Timings  []string `json:"timings"`
}

// MealPlan is the product's meal plan and the meals it includes.
type MealPlan struct {
	Plan  *string  `json:"plan"`
	Meals []string `json:"meals"`
}

// Occupancy is the most guests a product takes.
type Occupancy struct {
	Adults   *int            `json:"adults"`
	Children []ChildrenLimit `json:"children"`
	Total    *int            `json:"total"`
}

// ChildrenLimit is how many children of an age range a product takes.
type ChildrenLimit struct {
	Total    *int  `json:"total"`
	FromAge  *int  `json:"from_age"`
	ToAge    *int  `json:"to_age"`
	FreeStay *bool `json:"free_stay"`
}

// Warnings of travel_booking/hotel.
const (
	WarnUnreported = "The source reports no breakfast score, distance to the centre, time zone, highlights, top benefits, " +
		"family facilities, district name or rooms-per-booking limit: those fields are null."
	WarnNoTemperature = "The source reports no temperatures: temperature_unit has no effect."
	WarnNoWifiScore   = "The source reports no Wi-Fi score for this property: wifi_score is null."
	WarnScoresFailed  = "The review score breakdown could not be read: wifi_score is null."
	WarnNamesFailed   = "Facility, room type and bed names could not be read: facilities, accommodation_type and the rooms' " +
		"room_type, facilities and bed types are null."
	WarnCityFailed = "The city's name could not be read: city is null."
)

// detailsExtras are the details' optional parts a hotel needs.
var detailsExtras = []string{"description", "facilities", "photos", "rooms"}

func hotel(ctx context.Context, c *upstream.Call) (any, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return nil, upstream.NotFoundFault("no accommodation has id " + c.Param("id"))
	}
	st, err := readStay(c)
	if err != nil {
		return nil, err
	}
	lang, err := bookingcom.Language(c)
	if err != nil {
		return nil, err
	}
	idFields := withFields(map[string]string{"accommodation": "id", "accommodations": "id"})

	// The four reads are independent: make them at once.
	var (
		wg                         sync.WaitGroup
		det                        []details
		avail                      *availability
		sc                         []scores
		nm                         *names
		detErr, availErr, scErr, n error
	)
	wg.Add(4)
	go func() {
		defer wg.Done()
		body := map[string]any{"accommodations": []int64{id}, "extras": detailsExtras, "languages": []string{lang}}
		_, detErr = post(ctx, c, detailsPath, body, idFields, &det)
	}()
	go func() {
		defer wg.Done()
		body := map[string]any{"accommodation": id, "booker": booker(c), "checkin": st.Checkin, "checkout": st.Checkout,
			"guests": st.guests(), "extras": []string{"extra_charges"}}
		if cur := c.Param("currency"); cur != "" {
			body["currency"] = cur
		}
		var a availability
		if _, availErr = post(ctx, c, availabilityPath, body, idFields, &a); availErr == nil {
			avail = &a
		}
	}()
	go func() {
		defer wg.Done()
		_, scErr = post(ctx, c, scoresPath, map[string]any{"accommodations": []int64{id}}, idFields, &sc)
	}()
	go func() {
		defer wg.Done()
		nm, n = lookupNames(ctx, c, lang)
	}()
	wg.Wait()

	if detErr != nil {
		return nil, detErr
	}
	var d *details
	for i := range det {
		if det[i].ID.String() == itoa(id) {
			d = &det[i]
		}
	}
	if d == nil {
		// Details list only open properties: an unknown or closed id is absent.
		return nil, upstream.NotFoundFault("the source has no accommodation " + itoa(id))
	}
	if availErr != nil {
		return nil, availErr
	}

	h := baseHotel(d, lang, st)
	if n != nil {
		nm = nil
		h.Warnings = append(h.Warnings, WarnNamesFailed)
	}
	if nm != nil {
		h.AccommodationType = name(nm.Types, d.AccommodationType)
		h.Facilities = []string{}
		for _, f := range d.Facilities {
			if v := name(nm.Facilities, f.ID); v != nil {
				h.Facilities = append(h.Facilities, *v)
			}
		}
	}
	if d.Location != nil && d.Location.City != "" {
		if cid, err := strconv.ParseInt(d.Location.City.String(), 10, 64); err == nil {
			if p, err := cityName(ctx, c, cid, lang); err != nil {
				h.Warnings = append(h.Warnings, WarnCityFailed)
			} else {
				h.City = text(p.Name)
			}
		}
	}

	units := c.Param("units")
	offers, offered := mapOffers(avail, d, lang, st)
	h.Offers = offers
	h.Rooms = mapRooms(d.Rooms, nm, lang, units, offered)
	h.SoldOut = len(offers) == 0
	h.AvailableRooms = roomsLeft(avail)
	h.BreakfastIncluded = anyBreakfast(offers)
	if avail != nil && avail.Currency != "" {
		h.Currency = text(avail.Currency)
	} else if cur := c.Param("currency"); cur != "" {
		h.Currency = text(cur)
	}
	if avail != nil && avail.URL != "" {
		h.URL = text(avail.URL)
	}

	switch {
	case scErr != nil:
		h.Warnings = append(h.Warnings, WarnScoresFailed)
	default:
		for _, s := range sc {
			if s.ID.String() != itoa(id) {
				continue
			}
			if w, ok := s.Breakdown["free_wifi"]; ok && w.Score != nil {
				h.WifiScore = w.Score
			}
			if h.ReviewCount == nil {
				h.ReviewCount = s.NumberOfReviews
			}
			if h.ReviewScore == nil {
				h.ReviewScore = s.Score
			}
		}
		if h.WifiScore == nil {
			h.Warnings = append(h.Warnings, WarnNoWifiScore)
		}
	}
	h.Warnings = append(h.Warnings, WarnUnreported)
	if c.Param("temperature_unit") != "" {
		h.Warnings = append(h.Warnings, WarnNoTemperature)
	}
	return h, nil
}

// baseHotel maps the details' static content.
func baseHotel(d *details, lang string, st stay) Hotel {
	h := Hotel{ID: d.ID.String(), Name: d.Name.in(lang), URL: text(d.URL), Platform: platformName, Type: "hotel",
		CheckinDate: st.Checkin, CheckoutDate: st.Checkout, Nights: st.Nights, Currency: text(d.Currency),
		Guests:          Guests{Adults: st.Adults, ChildrenAges: append([]int{}, st.Children...), Rooms: st.Rooms},
		LanguagesSpoken: append([]string{}, d.SpokenLanguages...), TotalRoomCount: d.NumberOfRooms, Photos: []string{}}
	h.Place.read(d.Location, lang)
	if r := d.Rating; r != nil {
		h.ReviewCount, h.ReviewScore, h.Stars = r.NumberOfReviews, r.ReviewScore, r.Stars
	}
	if desc := d.Description; desc != nil {
		h.Description = desc.Text.in(lang)
		if info := desc.ImportantInformation.in(lang); info != nil {
			h.ImportantInformation = paragraphs(*info)
		}
	}
	if t := d.CheckinCheckoutTimes; t != nil {
		h.HouseTimes = &HouseTime{CheckinFrom: t.CheckinFrom, CheckinTo: t.CheckinTo, CheckoutFrom: t.CheckoutFrom, CheckoutTo: t.CheckoutTo}
	}
	for _, p := range orderPhotos(d.Photos) {
		if u := p.URL.Large; u != "" {
			h.Photos = append(h.Photos, u)
		}
	}
	return h
}

// orderPhotos puts the main photo first; the source returns them in no
// particular order, so the rest keep theirs.
func orderPhotos(list []photo) []photo {
	out := append([]photo(nil), list...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].MainPhoto && !out[j].MainPhoto })
	return out
}

// paragraphs splits a text at its blank lines, each paragraph's lines
// joined by a space.
func paragraphs(s string) []string {
	out := []string{}
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, line := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			flush()
		} else {
			cur = append(cur, line)
		}
	}
	flush()
	return out
}

// mapOffers maps the products, priced per stay; offered lists the rooms
// that have one.
func mapOffers(a *availability, d *details, lang string, st stay) ([]Offer, map[string]bool) {
	offers, offered := []Offer{}, map[string]bool{}
	if a == nil {
		return offers, offered
	}
	roomNames := map[string]*string{}
	for _, r := range d.Rooms {
		roomNames[r.ID.String()] = r.Name.in(lang)
	}
	recommended := map[upstream.FlexID]bool{}
	if a.Recommendation != nil {
		for _, p := range a.Recommendation.Products {
			recommended[p.ID] = true
		}
	}
	for _, p := range a.Products {
		o := offer(p, text(a.Currency), st.Nights)
		if o.RoomID != nil {
			o.RoomName = roomNames[*o.RoomID]
			offered[*o.RoomID] = true
		}
		o.Recommended = recommended[p.ID]
		offers = append(offers, o)
	}
	return offers, offered
}

func offer(p product, currency *string, nights int) Offer {
	o := Offer{ID: string(p.ID), RoomID: idString(p.Room), Currency: currency, AvailableCount: p.NumberAvailableAtThisPrice,
		ThirdParty: p.ThirdPartyInventory, Deals: []string{}}
	if o.ThirdParty == nil && p.Inventory != nil {
		o.ThirdParty = p.Inventory.ThirdParty
	}
	if pr := p.Price; pr != nil {
		o.Price, o.PriceAllInclusive, o.PriceBase, o.ChargeableOnline = pr.Book, pr.Total, pr.Base, pr.ChargeableOnline
		if pr.Book != nil && nights > 0 {
			v := math.Round(*pr.Book/float64(nights)*100) / 100
			o.PricePerNight = &v
		}
	}
	if deal := p.Deal; deal != nil {
		o.PublicPrice, o.DiscountPercentage = deal.PublicPrice, deal.DiscountPercentage
		o.Deals = append(o.Deals, deal.Tags...)
	}
	if pol := p.Policies; pol != nil {
		if cp := pol.Cancellation; cp != nil {
			o.Cancellation = &Cancellation{Type: text(cp.Type), FreeUntil: cp.FreeCancellationUntil, Schedule: []Fee{}}
			for _, s := range cp.Schedule {
				o.Cancellation.Schedule = append(o.Cancellation.Schedule, Fee{From: s.From, Fee: s.Price})
			}
			if cp.Type != "" {
				free := cp.Type == "free_cancellation"
				o.FreeCancellation = &free
			}
		}
		if pay := pol.Payment; pay != nil {
			o.Prepayment = &Prepayment{Required: pay.PrepaymentRequired, Timings: append([]string{}, pay.Timings...)}
		}
		if mp := pol.MealPlan; mp != nil {
			o.MealPlan = &MealPlan{Plan: text(mp.Plan), Meals: append([]string{}, mp.Meals...)}
			o.BreakfastIncluded = breakfast(mp.Plan, mp.Meals)
		}
	}
	if occ := p.MaximumOccupancy; occ != nil {
		o.MaxOccupancy = &Occupancy{Adults: occ.Adults, Total: occ.Total, Children: []ChildrenLimit{}}
		for _, ch := range occ.Children {
			o.MaxOccupancy.Children = append(o.MaxOccupancy.Children, ChildrenLimit(ch))
		}
	}
	return o
}

// breakfast reads a meal plan: every plan but no_plan includes breakfast,
// and the meals list names it.
func breakfast(plan string, meals []string) *bool {
	if plan == "" && meals == nil {
		return nil
	}
	yes := plan == "breakfast_included" || plan == "half_board" || plan == "full_board" || plan == "all_inclusive"
	for _, m := range meals {
		yes = yes || m == "breakfast"
	}
	return &yes
}

// anyBreakfast is whether some offer includes breakfast (null with none).
func anyBreakfast(offers []Offer) *bool {
	var out *bool
	for _, o := range offers {
		if o.BreakfastIncluded == nil {
			continue
		}
		if *o.BreakfastIncluded {
			yes := true
			return &yes
		}
		no := false
		out = &no
	}
	return out
}

// roomsLeft is the rooms the source says are left: per room type the most
// any of its rates has, summed; null when it says none.
func roomsLeft(a *availability) *int {
	if a == nil {
		return nil
	}
	most := map[string]int{}
	known := false
	for _, p := range a.Products {
		if p.NumberAvailableAtThisPrice == nil {
			continue
		}
		known = true
		if n := *p.NumberAvailableAtThisPrice; n > most[p.Room.String()] {
			most[p.Room.String()] = n
		}
	}
	if !known {
		if len(a.Products) == 0 {
			zero := 0
			return &zero
		}
		return nil
	}
	total := 0
	for _, n := range most {
		total += n
	}
	return &total
}

// sqftPerM2 converts the source's square metres for imperial units.
const sqftPerM2 = 10.7639

func mapRooms(list []detailRoom, nm *names, lang, units string, offered map[string]bool) []Room {
	rooms := []Room{}
	for _, r := range list {
		room := Room{ID: r.ID.String(), Name: r.Name.in(lang), Description: r.Description.in(lang), SizeUnit: "m2",
			Size: r.Size, Attributes: append([]string{}, r.Attributes...), Photos: []string{}, BedOptions: []BedOption{},
			Available: offered[r.ID.String()]}
		if units == "imperial" {
			room.SizeUnit = "sqft"
			if r.Size != nil {
				v := math.Round(*r.Size * sqftPerM2)
				room.Size = &v
			}
		}
		if occ := r.MaximumOccupancy; occ != nil {
			room.MaxAdults, room.MaxChildren = occ.Adults, occ.Children
		}
		if n := r.NumberOfRooms; n != nil {
			room.Bedrooms, room.Bathrooms, room.LivingRooms = n.Bedrooms, n.Bathrooms, n.LivingRooms
		}
		for _, p := range orderPhotos(r.Photos) {
			if p.URL.Large != "" {
				room.Photos = append(room.Photos, p.URL.Large)
			}
		}
		if nm != nil {
			room.RoomType = name(nm.RoomTypes, r.RoomType)
			room.Facilities = []string{}
			for _, f := range r.Facilities {
				if v := name(nm.RoomFacilities, f); v != nil {
					room.Facilities = append(room.Facilities, *v)
				}
			}
		}
		for _, opt := range r.BedOptions {
			bo := BedOption{IsBedroom: opt.IsBedroom, HasBathroom: opt.HasBathroom, Configurations: [][]Bed{}}
			for _, conf := range opt.BedConfigurations {
				beds := []Bed{}
				for _, b := range conf.Configuration {
					bed := Bed{TypeID: b.BedType.String(), Count: b.NumberOfBeds}
					if nm != nil {
						if v, ok := nm.Beds[b.BedType.String()]; ok {
							bed.Type = text(v[0])
							if units == "imperial" {
								bed.Width = text(v[2])
							} else {
								bed.Width = text(v[1])
							}
						}
					}
					beds = append(beds, bed)
				}
				bo.Configurations = append(bo.Configurations, beds)
			}
			room.BedOptions = append(room.BedOptions, bo)
		}
		rooms = append(rooms, room)
	}
	return rooms
}
