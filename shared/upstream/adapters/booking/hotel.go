package booking

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/html"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingcom"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// Hotel is the data of travel_booking/hotel as the site's page gives it.
// Fields the page route does not read stay null (see warnPageFields).
type Hotel struct {
	Warnings           []string     `json:"_warnings,omitempty"`
	AccommodationType  *string      `json:"accommodation_type"`
	Address            *string      `json:"address"`
	AvailableRooms     *int         `json:"available_rooms"`
	BreakfastIncluded  *bool        `json:"breakfast_included"`
	BreakfastScore     *struct{}    `json:"breakfast_score"`
	CheckinDate        string       `json:"checkin_date"`
	CheckoutDate       string       `json:"checkout_date"`
	City               *string      `json:"city"`
	Closed             *bool        `json:"closed"`
	CountryCode        *string      `json:"country_code"`
	Currency           *string      `json:"currency"`
	Description        *string      `json:"description"`
	DestinationID      *string      `json:"destination_id"`
	DistanceToCentreKm *float64     `json:"distance_to_centre_km"`
	District           *string      `json:"district"`
	Facilities         []string     `json:"facilities"`
	FamilyFacilities   []string     `json:"family_facilities"`
	FamilyFriendly     *bool        `json:"family_friendly"`
	Highlights         []string     `json:"highlights"`
	ID                 string       `json:"id"`
	ImageURL           *string      `json:"image_url"`
	ImportantInfo      []string     `json:"important_information"`
	LanguagesSpoken    []string     `json:"languages_spoken"`
	Latitude           *float64     `json:"latitude"`
	Longitude          *float64     `json:"longitude"`
	MaxRoomsPerBooking *int         `json:"max_rooms_per_booking"`
	Name               *string      `json:"name"`
	Offers             []Offer      `json:"offers"`
	Platform           string       `json:"platform"`
	Postcode           *string      `json:"postcode"`
	Rating             *HotelRating `json:"rating"`
	ReviewCount        *float64     `json:"review_count"`
	Rooms              []Room       `json:"rooms"`
	SoldOut            *bool        `json:"sold_out"`
	Timezone           *string      `json:"timezone"`
	TopBenefits        []string     `json:"top_benefits"`
	Type               string       `json:"type"`
	URL                string       `json:"url"`
	WifiScore          *float64     `json:"wifi_score"`
}

// HotelRating is the guests' review score and its scale.
type HotelRating struct {
	Value *float64 `json:"value"`
	Max   *float64 `json:"max"`
}

// Room is one room type of the page's room table.
type Room struct {
	ID         string   `json:"id"`
	RoomTypeID *string  `json:"room_type_id"`
	Name       *string  `json:"name"`
	MaxPersons *float64 `json:"max_persons"`
	Available  bool     `json:"available"`
	Offers     int      `json:"offers_count"`
}

// Offer is one bookable rate (a block) of a room for the stay asked for:
// its price for the whole stay and one room, its meal plan, and its
// cancellation and payment terms as the site names them.
type Offer struct {
	ID                string   `json:"id"`
	RoomID            *string  `json:"room_id"`
	RoomName          *string  `json:"room_name"`
	Price             *Price   `json:"price"`
	PriceLabel        *string  `json:"price_label"`
	MaxPersons        *float64 `json:"max_persons"`
	MealPlan          *string  `json:"meal_plan"`
	BreakfastIncluded bool     `json:"breakfast_included"`
	CancellationType  *string  `json:"cancellation_type"`
	FreeCancellation  *bool    `json:"free_cancellation"`
	PayLater          *bool    `json:"pay_later"`
}

// warnPageFields says which hotel fields the page route leaves null.
const (
	warnPageFields = "The site's hotel page is read for its name, address, position, review score and room table; " +
		"facilities, review sub-scores (breakfast, Wi-Fi), highlights, languages, timezone and house rules are not read and are null."
	warnNoRoomTable = "The page carried no room table for these dates; rooms and offers are null."
)

// ldHotel is the page's JSON-LD Hotel.
type ldHotel struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Image       json.RawMessage `json:"image"`
	HasMap      string          `json:"hasMap"`
	Address     *struct {
		StreetAddress   string `json:"streetAddress"`
		AddressLocality string `json:"addressLocality"`
		PostalCode      string `json:"postalCode"`
	} `json:"address"`
	AggregateRating *struct {
		RatingValue flexNumber `json:"ratingValue"`
		BestRating  flexNumber `json:"bestRating"`
		ReviewCount flexNumber `json:"reviewCount"`
	} `json:"aggregateRating"`
}

// envRoom is one entry of booking.env.b_rooms_available_and_soldout.
type envRoom struct {
	ID         json.RawMessage `json:"b_id"`
	RoomTypeID json.RawMessage `json:"b_roomtype_id"`
	Name       string          `json:"b_name"`
	Blocks     []envBlock      `json:"b_blocks"`
}

type envBlock struct {
	BlockID          json.RawMessage `json:"b_block_id"`
	RawPrice         flexNumber      `json:"b_raw_price"`
	Price            string          `json:"b_price"`
	MaxPersons       flexNumber      `json:"b_max_persons"`
	MealPlan         *string         `json:"b_mealplan_included_name"`
	CancellationType string          `json:"b_cancellation_type"`
	BookNowPayLater  json.RawMessage `json:"b_book_now_pay_later"`
}

// hotel serves travel_booking/hotel from the hotel's page.
func (f fetcher) hotel(ctx context.Context, c *upstream.Call) (any, error) {
	id := strings.TrimSpace(c.Param("id"))
	lang, err := bookingcom.Language(c)
	if err != nil {
		return nil, err
	}
	s, err := stayOf(c)
	if err != nil {
		return nil, err
	}
	cur := currency(c)
	path, err := f.hotelPath(ctx, c, id, s, lang, cur)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	s.query(q, lang, cur)
	p, err := f.get(ctx, path, q, lang)
	if err != nil {
		return nil, err
	}
	return parseHotel(p.Body, id, path, s, cur)
}

// hotelPath is the page of hotel id, /hotel/<cc>/<pagename>.html: the
// number gives no page name, so the results page for that one property
// is asked once and its answer remembered.
func (f fetcher) hotelPath(ctx context.Context, c *upstream.Call, id string, s stay, lang, cur string) (string, error) {
	path, err := c.Remembered(ctx, "hotel-path|"+id, hotelPathTTL, func(ctx context.Context) (string, error) {
		res, _, err := f.searchResults(ctx, resultsQuery(destination{ID: id, Type: "hotel"}, s, lang, cur, 0, ""), lang)
		if err != nil {
			return "", err
		}
		for _, r := range *res.Results {
			b := r.BasicPropertyData
			if b == nil || rawID(b.ID) != id || b.Location == nil {
				continue
			}
			if cc := strings.TrimSpace(b.Location.CountryCode); cc != "" && strings.TrimSpace(b.PageName) != "" {
				return strings.TrimPrefix(hotelURL(cc, b.PageName), Origin), nil
			}
		}
		return "", upstream.NotFoundFault("the site lists no property with that number")
	})
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(path, "/hotel/") || !strings.HasSuffix(path, ".html") || strings.ContainsAny(path, "?# ") {
		return "", upstream.MalformedFault("a remembered hotel page path is unusable")
	}
	return path, nil
}

// parseHotel maps the hotel page: JSON-LD for the property, booking.env
// for the room table and the stay as the page applied it.
func parseHotel(page []byte, id, path string, s stay, cur string) (Hotel, error) {
	obj, err := lodging(page)
	if err != nil {
		return Hotel{}, err
	}
	var ld ldHotel
	if err := json.Unmarshal(obj, &ld); err != nil {
		return Hotel{}, upstream.MalformedFault("the JSON-LD Hotel of a %d-byte page is not the expected object", len(page))
	}
	if got, ok := literalMember(page, "b_hotel_id"); ok && strings.TrimSpace(got) != id {
		return Hotel{}, upstream.NotFoundFault("the site answered with another property's page")
	}
	h := Hotel{ID: id, Platform: platform, Type: "hotel", URL: Origin + path, Name: trimmed(ld.Name),
		Description: trimmed(ld.Description), CheckinDate: s.checkin, CheckoutDate: s.checkout, Warnings: []string{warnPageFields}}
	if v, ok := literalMember(page, "b_checkin_date"); ok && v != "" {
		h.CheckinDate = v
	}
	if v, ok := literalMember(page, "b_checkout_date"); ok && v != "" {
		h.CheckoutDate = v
	}
	if v, ok := literalMember(page, "b_selected_currency"); ok && strings.TrimSpace(v) != "" {
		h.Currency = upperPtr(v)
	} else if cur != "" {
		h.Currency = &cur
	}
	if h.Currency != nil && cur != "" && !strings.EqualFold(*h.Currency, cur) {
		h.Warnings = append(h.Warnings, warnCurrency)
	}
	if parts := strings.Split(strings.TrimPrefix(path, "/hotel/"), "/"); len(parts) == 2 {
		h.CountryCode = upperPtr(parts[0])
	}
	if a := ld.Address; a != nil {
		h.Address, h.Postcode = trimmed(a.StreetAddress), trimmed(a.PostalCode)
		h.City = trimmed(a.AddressLocality)
	}
	if v, ok := literalMember(page, "city_name"); ok && strings.TrimSpace(v) != "" {
		h.City = trimmed(v) // the analytics data names the city; addressLocality is sometimes the street
	}
	if v, ok := literalMember(page, "b_ufi"); ok {
		h.DestinationID = trimmed(v)
	}
	h.ImageURL = ldImage(ld.Image)
	if r := ld.AggregateRating; r != nil {
		h.ReviewCount = r.ReviewCount.ptr()
		if h.ReviewCount != nil && *h.ReviewCount > 0 {
			h.Rating = &HotelRating{Value: r.RatingValue.ptr(), Max: r.BestRating.ptr()}
		}
	}
	h.Latitude, h.Longitude = position(page, ld.HasMap)
	raw, ok := jsonMember(page, "b_rooms_available_and_soldout")
	if !ok {
		h.Warnings = append(h.Warnings, warnNoRoomTable)
		return h, nil
	}
	var rooms []envRoom
	if err := json.Unmarshal(raw, &rooms); err != nil {
		return Hotel{}, upstream.MalformedFault("b_rooms_available_and_soldout of a %d-byte page is not a list of rooms", len(page))
	}
	fillRooms(&h, rooms)
	return h, nil
}

// lodgingTypes are the schema.org types a property's JSON-LD may have:
// the site writes Hotel for every kind of property, and the subtypes of
// LodgingBusiness are read in case it names the kind.
var lodgingTypes = []string{"Hotel", "LodgingBusiness", "Hostel", "Motel", "Resort", "BedAndBreakfast", "Apartment", "House", "VacationRental"}

// lodging is the page's JSON-LD property object.
func lodging(page []byte) (json.RawMessage, error) {
	all, err := htmldata.JSONLD(page)
	if err != nil {
		return nil, err
	}
	for _, typ := range lodgingTypes {
		if objs, err := htmldata.JSONLDOfType(page, typ); err == nil {
			return objs[0], nil
		}
	}
	return nil, upstream.MalformedFault("no JSON-LD Hotel among %d objects of a %d-byte page", len(all), len(page))
}

// fillRooms fills rooms, offers and the availability they show.
func fillRooms(h *Hotel, rooms []envRoom) {
	h.Rooms, h.Offers = []Room{}, []Offer{}
	available := 0
	for _, r := range rooms {
		room := Room{ID: rawID(r.ID), Name: trimmed(r.Name), Available: len(r.Blocks) > 0, Offers: len(r.Blocks)}
		if t := rawID(r.RoomTypeID); t != "" {
			room.RoomTypeID = &t
		}
		if room.Available {
			available++
		}
		for _, b := range r.Blocks {
			o := Offer{ID: rawID(b.BlockID), RoomName: room.Name, PriceLabel: trimmed(b.Price), MaxPersons: b.MaxPersons.ptr(),
				CancellationType: trimmed(b.CancellationType)}
			if room.ID != "" {
				rid := room.ID
				o.RoomID = &rid
			}
			if amount := b.RawPrice.ptr(); amount != nil {
				o.Price = &Price{Amount: amount, Currency: h.Currency}
			} else if o.PriceLabel != nil {
				o.Price = &Price{Currency: h.Currency} // shown only as text: the label keeps it
			}
			if b.MealPlan != nil {
				o.MealPlan = trimmed(*b.MealPlan)
			}
			o.BreakfastIncluded = o.MealPlan != nil && includesBreakfast(*o.MealPlan)
			if o.CancellationType != nil {
				free := *o.CancellationType == "free_cancellation"
				o.FreeCancellation = &free
			}
			o.PayLater = flag(b.BookNowPayLater)
			if m := o.MaxPersons; m != nil && (room.MaxPersons == nil || *m > *room.MaxPersons) {
				v := *m
				room.MaxPersons = &v
			}
			h.Offers = append(h.Offers, o)
		}
		if room.ID != "" || room.Name != nil {
			h.Rooms = append(h.Rooms, room)
		}
	}
	h.AvailableRooms = &available
	soldOut := available == 0
	h.SoldOut = &soldOut
	if len(h.Offers) > 0 {
		breakfast := false
		for _, o := range h.Offers {
			breakfast = breakfast || o.BreakfastIncluded
		}
		h.BreakfastIncluded = &breakfast
	}
}

// flag reads a boolean the site writes as true/false, 1/0 or "1"/"0".
func flag(raw json.RawMessage) *bool {
	switch strings.Trim(strings.TrimSpace(string(raw)), `"`) {
	case "true", "1":
		v := true
		return &v
	case "false", "0":
		v := false
		return &v
	}
	return nil
}

// ldImage is the JSON-LD image: a URL, or the first of a list.
func ldImage(raw json.RawMessage) *string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return trimmed(one)
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return trimmed(many[0])
	}
	return nil
}

// position is the property's coordinates: booking.env's map centre, else
// the map link's data-atlas-latlng, else the JSON-LD map's center.
func position(page []byte, hasMap string) (*float64, *float64) {
	lat, ok1 := literalMember(page, "b_map_center_latitude")
	lng, ok2 := literalMember(page, "b_map_center_longitude")
	if ok1 && ok2 {
		if a, b := parseFloat(lat), parseFloat(lng); a != nil && b != nil {
			return a, b
		}
	}
	if pair := atlasLatLng(page); pair != "" {
		if a, b := latLng(pair); a != nil {
			return a, b
		}
	}
	if u, err := url.Parse(hasMap); err == nil && hasMap != "" {
		if a, b := latLng(u.Query().Get("center")); a != nil {
			return a, b
		}
	}
	return nil, nil
}

// atlasLatLng is the first data-atlas-latlng attribute of the page.
func atlasLatLng(page []byte) string {
	z := html.NewTokenizer(bytes.NewReader(page))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			_, hasAttr := z.TagName()
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				if string(k) == "data-atlas-latlng" {
					return string(v)
				}
			}
		}
	}
}

// latLng reads "lat,lng" within the Earth's ranges.
func latLng(s string) (*float64, *float64) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return nil, nil
	}
	lat, lng := parseFloat(a), parseFloat(b)
	if lat == nil || lng == nil || *lat < -90 || *lat > 90 || *lng < -180 || *lng > 180 {
		return nil, nil
	}
	return lat, lng
}

func parseFloat(s string) *float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return nil
	}
	return &v
}
