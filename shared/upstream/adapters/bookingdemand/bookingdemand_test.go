package bookingdemand_test

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingdemand"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const (
	hotelEndpoint     = "travel_booking/hotel"
	searchEndpoint    = "travel_booking/search-hotels"
	locationsEndpoint = "travel_booking/locations"

	detailsPath      = "/3.1/accommodations/details"
	availabilityPath = "/3.1/accommodations/availability"
	searchPath       = "/3.1/accommodations/search"
	scoresPath       = "/3.1/accommodations/reviews/scores"
	constantsPath    = "/3.1/accommodations/constants"
	citiesPath       = "/3.1/common/locations/cities"
	autocompletePath = "/3.2/common/autocomplete"

	stay = "&checkin=2026-12-01&checkout=2026-12-03"
	// token2 is the next_page token the Amsterdam search's first page gives.
	token2 = "eyJhbGciOiJIUzI1NiJ9.eyJzYW1wbGUiOiJwYWdlLTIifQ.c2FtcGxlLXNpZ25hdHVyZQ"
)

// testToken and testAffiliate must reach the source as headers, never a
// fault's reason.
const (
	testToken     = "sample-demand-key-7Hq2vX9"
	testAffiliate = "1234567"
)

// fixedNow is 2026-11-24T12:00:00Z: the fixtures' stay (1-3 December) is a
// week ahead.
var fixedNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func options() upstream.Options {
	opts := adaptertest.Options
	opts.Now = func() time.Time { return fixedNow }
	return opts
}

func secrets(extra ...string) map[string]string {
	s := map[string]string{bookingdemand.TokenSecret: testToken, bookingdemand.AffiliateSecret: testAffiliate}
	for i := 0; i+1 < len(extra); i += 2 {
		s[extra[i]] = extra[i+1]
	}
	return s
}

func start(t *testing.T, extra ...string) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, bookingdemand.Provider(), secrets(extra...), options())
}

// withAutocomplete is a partner granted the 3.2-Beta autocomplete.
func withAutocomplete(t *testing.T) *adaptertest.Upstream {
	return start(t, bookingdemand.AutocompleteSetting, "true")
}

// sent lists the requests made to path, each body decoded, checking that
// every one carried the credentials as headers.
func sent(t *testing.T, u *adaptertest.Upstream, path string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range u.Replay.Requests() {
		if r.Header.Get("Authorization") != "Bearer "+testToken || r.Header.Get("X-Affiliate-Id") != testAffiliate {
			t.Errorf("%s sent headers %v", r.Path, r.Header)
		}
		if r.Method != "POST" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s with content type %q", r.Method, r.Path, r.Header.Get("Content-Type"))
		}
		if r.Path != path {
			continue
		}
		var body map[string]any
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("%s body: %v", path, err)
		}
		out = append(out, body)
	}
	return out
}

// only is the single request made to path.
func only(t *testing.T, u *adaptertest.Upstream, path string) map[string]any {
	t.Helper()
	got := sent(t, u, path)
	if len(got) != 1 {
		t.Fatalf("%d requests to %s; want 1", len(got), path)
	}
	return got[0]
}

// check serves a request that must succeed with schema-valid data, and
// returns the data as plain JSON values (no golden file).
func check(t *testing.T, u *adaptertest.Upstream, endpoint, query string) map[string]any {
	t.Helper()
	out := u.Serve(t, endpoint, query)
	if out.Fault != nil {
		t.Fatalf("%s?%s: %v", endpoint, query, out.Fault)
	}
	if err := schemas.Validate(endpoint, out.Data); err != nil {
		t.Fatalf("%s?%s: %v", endpoint, query, err)
	}
	var plain map[string]any
	if err := json.Unmarshal([]byte(asJSON(t, out.Data)), &plain); err != nil {
		t.Fatal(err)
	}
	return plain
}

// asJSON re-encodes v for comparing with a literal.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestProvider(t *testing.T) {
	p := bookingdemand.Provider()
	if p.Name != "booking_demand" || p.BaseURLVar() != "MERIDIAN_UPSTREAM_BOOKING_DEMAND_URL" || p.BaseURL != "https://demandapi.booking.com" {
		t.Errorf("provider %s %s %s", p.Name, p.BaseURLVar(), p.BaseURL)
	}
	required := map[string]bool{}
	for _, s := range p.Secrets {
		required[s.Name] = s.Required
	}
	want := map[string]bool{bookingdemand.TokenSecret: true, bookingdemand.AffiliateSecret: true,
		bookingdemand.BookerCountrySetting: false, bookingdemand.AutocompleteSetting: false}
	if !reflect.DeepEqual(required, want) {
		t.Errorf("secrets %v; want %v", required, want)
	}
	for _, e := range []string{hotelEndpoint, searchEndpoint, locationsEndpoint} {
		if p.Endpoints[e] == nil {
			t.Errorf("%s is not served", e)
		}
	}
}

func TestHotel(t *testing.T) {
	u := start(t)
	data := u.Data(t, hotelEndpoint, "id=1852006"+stay, "hotel")

	if got := asJSON(t, only(t, u, detailsPath)); got != `{"accommodations":[1852006],"extras":["description","facilities","photos","rooms"],"languages":["en-gb"]}` {
		t.Errorf("details body %s", got)
	}
	if got := asJSON(t, only(t, u, availabilityPath)); got != `{"accommodation":1852006,"booker":{"country":"gb","platform":"desktop"},`+
		`"checkin":"2026-12-01","checkout":"2026-12-03","extras":["extra_charges"],"guests":{"number_of_adults":2,"number_of_rooms":1}}` {
		t.Errorf("availability body %s", got)
	}
	if got := asJSON(t, only(t, u, scoresPath)); got != `{"accommodations":[1852006]}` {
		t.Errorf("scores body %s", got)
	}
	if got := asJSON(t, only(t, u, constantsPath)); got != `{"constants":["accommodation_facilities","accommodation_types","bed_types","room_facilities","room_types"],"languages":["en-gb"]}` {
		t.Errorf("constants body %s", got)
	}
	if got := asJSON(t, only(t, u, citiesPath)); got != `{"city":-2140479,"languages":["en-gb"]}` {
		t.Errorf("cities body %s", got)
	}

	if data["id"] != "1852006" || data["name"] != "Sample Canal House Hotel" || data["city"] != "Amsterdam" ||
		data["destination_id"] != "-2140479" || data["country_code"] != "NL" || data["accommodation_type"] != "Hotel" ||
		data["currency"] != "EUR" || data["wifi_score"] != 8.4 || data["review_count"] != 1873.0 ||
		data["sold_out"] != false || data["available_rooms"] != 4.0 || data["breakfast_included"] != true ||
		data["checkin_date"] != "2026-12-01" || data["nights"] != 2.0 || data["breakfast_score"] != nil {
		t.Errorf("hotel: %v", data)
	}
	// An id the constants do not name is left out, never guessed.
	if f := data["facilities"].([]any); !reflect.DeepEqual(f, []any{"Restaurant", "Free WiFi", "Parking"}) {
		t.Errorf("facilities %v", f)
	}
	if info := data["important_information"].([]any); len(info) != 2 ||
		info[1] != "The property has no lift; rooms are on the first to third floors. Please tell the property your arrival time in advance." {
		t.Errorf("important_information %q", info)
	}
	offers := data["offers"].([]any)
	if len(offers) != 3 {
		t.Fatalf("%d offers", len(offers))
	}
	free, nonref, special := offers[0].(map[string]any), offers[1].(map[string]any), offers[2].(map[string]any)
	if free["price"] != 412.6 || free["price_all_inclusive"] != 431.1 || free["price_per_night"] != 206.3 || free["currency"] != "EUR" ||
		free["free_cancellation"] != true || free["breakfast_included"] != true || free["recommended"] != false ||
		free["room_name"] != "Deluxe Double Room with Canal View" || free["available_count"] != 3.0 {
		t.Errorf("free offer %v", free)
	}
	canc := free["cancellation"].(map[string]any)
	if canc["type"] != "free_cancellation" || canc["free_cancellation_until"] != "2026-11-29T23:59:59+01:00" || len(canc["schedule"].([]any)) != 2 {
		t.Errorf("free cancellation %v", canc)
	}
	if pre := nonref["prepayment"].(map[string]any); pre["required"] != true || nonref["free_cancellation"] != false ||
		nonref["recommended"] != true || nonref["public_price"] != 396.0 || nonref["discount_percentage"] != 10.0 {
		t.Errorf("non-refundable offer %v", nonref)
	}
	if special["cancellation"].(map[string]any)["type"] != "special_conditions" || special["breakfast_included"] != true ||
		special["meal_plan"].(map[string]any)["plan"] != "half_board" {
		t.Errorf("special offer %v", special)
	}
	rooms := data["rooms"].([]any)
	if len(rooms) != 3 {
		t.Fatalf("%d rooms", len(rooms))
	}
	deluxe, attic := rooms[0].(map[string]any), rooms[2].(map[string]any)
	bed := deluxe["bed_options"].([]any)[0].(map[string]any)["configurations"].([]any)[0].([]any)[0].(map[string]any)
	if deluxe["available"] != true || deluxe["size"] != 22.0 || deluxe["size_unit"] != "m2" || deluxe["room_type"] != "Double" ||
		bed["type"] != "Double bed" || bed["width"] != "131-150 cm wide" || bed["count"] != 1.0 ||
		!reflect.DeepEqual(deluxe["facilities"], []any{"Coffee/tea maker", "Private bathroom", "Air conditioning"}) {
		t.Errorf("deluxe room %v", deluxe)
	}
	if attic["available"] != false || attic["name"] != "Single Attic Room" || attic["description"] != "Attic room under the roof beams." {
		t.Errorf("attic room %v", attic)
	}
	if w := data["_warnings"].([]any); len(w) != 1 || w[0] != bookingdemand.WarnUnreported {
		t.Errorf("warnings %v", w)
	}
}

func TestHotelOptionsAndRememberedNames(t *testing.T) {
	u := start(t, bookingdemand.BookerCountrySetting, "US")
	data := u.Data(t, hotelEndpoint, "id=1852006"+stay+"&adults=3&children_ages=4,9&rooms=2&currency=usd&language=en-US&units=imperial&temperature_unit=f", "hotel-imperial")
	avail := only(t, u, availabilityPath)
	if got := asJSON(t, avail["guests"]); got != `{"children":[4,9],"number_of_adults":3,"number_of_rooms":2}` {
		t.Errorf("guests %s", got)
	}
	if avail["currency"] != "USD" || asJSON(t, avail["booker"]) != `{"country":"us","platform":"desktop"}` {
		t.Errorf("availability body %v", avail)
	}
	if got := asJSON(t, only(t, u, detailsPath)["languages"]); got != `["en-us"]` {
		t.Errorf("languages %s", got)
	}
	room := data["rooms"].([]any)[0].(map[string]any)
	bed := room["bed_options"].([]any)[0].(map[string]any)["configurations"].([]any)[1].([]any)[0].(map[string]any)
	if room["size"] != 237.0 || room["size_unit"] != "sqft" || bed["width"] != "35-51 inches wide" || bed["count"] != 2.0 {
		t.Errorf("imperial room %v", room)
	}
	if w := data["_warnings"].([]any); len(w) != 2 || w[1] != bookingdemand.WarnNoTemperature {
		t.Errorf("warnings %v", w)
	}

	// Names and the city are remembered: a second hotel asks neither again.
	u.Serve(t, hotelEndpoint, "id=1852006"+stay+"&language=en-us")
	if n := len(sent(t, u, constantsPath)); n != 1 {
		t.Errorf("%d constants requests; want 1", n)
	}
	if n := len(sent(t, u, citiesPath)); n != 1 {
		t.Errorf("%d cities requests; want 1", n)
	}
	// Another language is another set of names.
	u.Serve(t, hotelEndpoint, "id=1852006"+stay+"&language=nl")
	if c := sent(t, u, constantsPath); len(c) != 2 || asJSON(t, c[1]["languages"]) != `["nl"]` {
		t.Errorf("constants requests %v", c)
	}
}

func TestHotelSoldOut(t *testing.T) {
	u := start(t)
	data := u.Data(t, hotelEndpoint, "id=2000111"+stay, "hotel-sold-out")
	if data["sold_out"] != true || len(data["offers"].([]any)) != 0 || data["available_rooms"] != 0.0 ||
		data["breakfast_included"] != nil || data["wifi_score"] != nil || data["review_score"] != nil {
		t.Errorf("sold out: %v", data)
	}
	// Review scores refused: the hotel is still served, and says so.
	if w := data["_warnings"].([]any); len(w) != 2 || w[0] != bookingdemand.WarnScoresFailed {
		t.Errorf("warnings %v", w)
	}
}

func TestHotelNotFound(t *testing.T) {
	u := start(t)
	u.Fault(t, hotelEndpoint, "id=999999999"+stay, upstream.NotFound)
	// Zero is no hotel: nothing is asked.
	u = start(t)
	u.Fault(t, hotelEndpoint, "id=0"+stay, upstream.NotFound)
	if n := len(u.Replay.Requests()); n != 0 {
		t.Errorf("id 0 made %d requests", n)
	}
}

// Rules of meaning are 422 naming the field, before any request.
func TestStayRefusedBeforeAnyRequest(t *testing.T) {
	cases := []struct{ query, field string }{
		{"checkin=2026-11-20&checkout=2026-11-22", "checkin"},
		{"checkin=2026-11-23&checkout=2026-11-25", "checkin"},  // yesterday everywhere on Earth
		{"checkin=2028-04-09&checkout=2028-04-10", "checkin"},  // beyond 500 days
		{"checkin=2026-12-01&checkout=2027-03-02", "checkout"}, // 91 nights
		{"checkin=2026-12-01&checkout=2026-12-03&adults=2&rooms=3", "rooms"},
		{"checkin=2026-12-01&checkout=2026-12-03&rooms=3", "rooms"}, // two adults by default
		{"checkin=2026-12-01&checkout=2026-12-03&language=ast", "language"},
	}
	for _, tc := range cases {
		for _, e := range []struct{ endpoint, query string }{
			{hotelEndpoint, "id=1852006&" + tc.query},
			{searchEndpoint, "destination_id=-2140479&" + tc.query},
		} {
			u := start(t)
			out := u.Fault(t, e.endpoint, e.query, upstream.InvalidParameter)
			if out.Fault.Field != tc.field || len(u.Replay.Requests()) != 0 {
				t.Errorf("%s?%s: field %q, %d requests; want %s, 0", e.endpoint, e.query, out.Fault.Field, len(u.Replay.Requests()), tc.field)
			}
		}
	}
	// Today is not the past, nor is the 500th day ahead, nor 90 nights.
	for _, q := range []string{"checkin=2026-11-24&checkout=2026-11-25", "checkin=2028-04-07&checkout=2028-04-08",
		"checkin=2026-12-01&checkout=2027-03-01", "checkin=2026-12-01&checkout=2026-12-03&adults=1"} {
		u := start(t)
		if out := u.Serve(t, hotelEndpoint, "id=123456&"+q); out.Fault != nil {
			t.Errorf("%s: %v", q, out.Fault)
		}
	}
}

func TestHotelErrors(t *testing.T) {
	cases := []struct {
		name, query string
		kind        upstream.FaultKind
		status      int
		retryAfter  time.Duration
		field       string
		attempts    int
	}{
		{"bad key", "id=40101", upstream.Rejected, 401, 0, "", 1},
		{"forbidden", "id=40301", upstream.Rejected, 403, 0, "", 1},
		{"rate limited", "id=42901", upstream.RateLimited, 429, 30 * time.Second, "", 1},
		{"rate limited for the documented minute", "id=42902", upstream.RateLimited, 429, time.Minute, "", 1},
		{"server error", "id=50001", upstream.ServerError, 500, 0, "", 3},
		{"unavailable", "id=50301", upstream.ServerError, 503, 0, "", 3},
		{"not JSON", "id=50201", upstream.Malformed, 0, 0, "", 1},
		{"changed shape", "id=50202", upstream.Malformed, 0, 0, "", 1},
		{"cut short", "id=50203", upstream.Transport, 0, 0, "", 3},
		{"connection reset", "id=50204", upstream.Transport, 0, 0, "", 3},
		{"currency refused", "id=1852006&currency=XXX", upstream.InvalidParameter, 0, 0, "currency", 1},
		{"language refused", "id=1852006&language=xx", upstream.InvalidParameter, 0, 0, "language", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := start(t)
			out := u.Fault(t, hotelEndpoint, tc.query+stay, tc.kind)
			if out.Fault.Status != tc.status || out.Fault.RetryAfter != tc.retryAfter || out.Fault.Field != tc.field {
				t.Errorf("status %d retry %v field %q; want %d %v %q", out.Fault.Status, out.Fault.RetryAfter, out.Fault.Field,
					tc.status, tc.retryAfter, tc.field)
			}
			if out.Trace.Attempts != tc.attempts {
				t.Errorf("attempts %d; want %d", out.Trace.Attempts, tc.attempts)
			}
			if msg := out.Fault.Error(); strings.Contains(msg, testToken) {
				t.Errorf("fault shows the key: %s", msg)
			}
		})
	}
}

func TestSearchPages(t *testing.T) {
	u := start(t)
	first := u.Data(t, searchEndpoint, "destination_id=-2140479"+stay, "search-p1")
	body := only(t, u, searchPath)
	if got := asJSON(t, body); got != `{"booker":{"country":"gb","platform":"desktop"},"checkin":"2026-12-01","checkout":"2026-12-03",`+
		`"city":-2140479,"extras":["extra_charges","products"],"guests":{"number_of_adults":2,"number_of_rooms":1},"rows":20}` {
		t.Errorf("search body %s", got)
	}
	if got := asJSON(t, only(t, u, detailsPath)); got != `{"accommodations":[1852006,3105229],"extras":["photos"],"languages":["en-gb"]}` {
		t.Errorf("details body %s", got)
	}
	items := adaptertest.Items(t, first)
	if first["count"] != 2.0 || first["has_more"] != true || first["page"] != 1.0 || first["cursor"] != nil || first["currency"] != "EUR" {
		t.Errorf("page 1: %v", first)
	}
	dest := first["destination"].(map[string]any)
	if dest["id"] != "-2140479" || dest["city"] != "Amsterdam" || dest["type"] != "city" {
		t.Errorf("destination %v", dest)
	}
	canal, museum := items[0], items[1]
	if canal["name"] != "Sample Canal House Hotel" || canal["city"] != "Amsterdam" || canal["rating"] != 8.7 ||
		canal["review_count"] != 1873.0 || canal["free_cancellation"] != false || canal["breakfast_included"] != false ||
		canal["accommodation_type"] != "Hotel" || canal["price_per_night"] != 178.2 ||
		canal["image_url"] != "https://cf.bstatic.com/xdata/images/hotel/max500/311000100.jpg?k=5a1e0c905&o=" {
		t.Errorf("canal house %v", canal)
	}
	if p := canal["price"].(map[string]any); p["amount"] != 356.4 || p["currency"] != "EUR" || canal["price_all_inclusive"] != 374.9 {
		t.Errorf("price %v", p)
	}
	if museum["free_cancellation"] != true || museum["breakfast_included"] != true || museum["stars"] != nil {
		t.Errorf("museum quarter %v", museum)
	}

	// Page 2 uses the token page 1 gave, sent alone: one search call.
	second := u.Data(t, searchEndpoint, "destination_id=-2140479"+stay+"&page=2", "search-p2")
	searches := sent(t, u, searchPath)
	if len(searches) != 2 || asJSON(t, searches[1]) != `{"page":"`+token2+`"}` {
		t.Fatalf("page 2 searches: %v", searches)
	}
	if second["has_more"] != false || second["count"] != 1.0 || second["page"] != 2.0 {
		t.Errorf("page 2: %v", second)
	}
	// Two rooms, one refundable and one with breakfast: neither holds for both.
	if it := adaptertest.Items(t, second)[0]; it["free_cancellation"] != false || it["breakfast_included"] != false || it["city"] != nil {
		t.Errorf("page 2 item %v", it)
	}
	// Past the last page: an empty page, not an error.
	third := u.Data(t, searchEndpoint, "destination_id=-2140479"+stay+"&page=3", "search-p3")
	if third["count"] != 0.0 || third["has_more"] != false || len(adaptertest.Items(t, third)) != 0 {
		t.Errorf("page 3: %v", third)
	}
}

// A page asked for first is reached by walking the earlier pages.
func TestSearchWalksToAPage(t *testing.T) {
	u := start(t)
	data := u.Data(t, searchEndpoint, "destination_id=-2140479"+stay+"&page=2", "search-p2")
	searches := sent(t, u, searchPath)
	if len(searches) != 2 || searches[0]["city"] != -2140479.0 || asJSON(t, searches[1]) != `{"page":"`+token2+`"}` {
		t.Errorf("walk: %v", searches)
	}
	if data["page"] != 2.0 {
		t.Errorf("page %v", data["page"])
	}
	// Six pages back is walked; further is left to the next route, which
	// may jump there, without a request.
	u = start(t)
	check(t, u, searchEndpoint, "destination_id=-2140777"+stay+"&page=6")
	if n := len(sent(t, u, searchPath)); n != 6 {
		t.Errorf("page 6 took %d searches", n)
	}
	out := u.Fault(t, searchEndpoint, "destination_id=-2140777"+stay+"&page=13", upstream.Rejected)
	if out.Fault.Status != 0 || len(sent(t, u, searchPath)) != 6 {
		t.Errorf("deep page: %v after %d searches", out.Fault, len(sent(t, u, searchPath)))
	}
	// From the remembered page 7 on, page 12 is five calls away.
	check(t, u, searchEndpoint, "destination_id=-2140777"+stay+"&page=12")
	if n := len(sent(t, u, searchPath)); n != 12 {
		t.Errorf("page 12 took %d more searches", n-6)
	}
}

// staleMemory stores a refused token instead of the one the source gave,
// as a token kept past its life would be.
type staleMemory struct{ *adaptertest.Memory }

func (m staleMemory) Keep(ctx context.Context, key, value string, now, until time.Time) error {
	if value == token2 {
		value = "stale.sample.token"
	}
	return m.Memory.Keep(ctx, key, value, now, until)
}

func TestSearchStaleTokenWalksAgain(t *testing.T) {
	u := start(t)
	u.Runner = u.Runner.WithMemory(staleMemory{u.Memory})
	u.Serve(t, searchEndpoint, "destination_id=-2140479"+stay)
	data := u.Data(t, searchEndpoint, "destination_id=-2140479"+stay+"&page=2", "search-p2")
	searches := sent(t, u, searchPath)
	if len(searches) != 4 || asJSON(t, searches[1]) != `{"page":"stale.sample.token"}` || asJSON(t, searches[3]) != `{"page":"`+token2+`"}` {
		t.Errorf("searches %v", searches)
	}
	if data["count"] != 1.0 {
		t.Errorf("page 2 %v", data)
	}
}

func TestSearchLocationRemembered(t *testing.T) {
	u := withAutocomplete(t)
	data := u.Data(t, searchEndpoint, "location=Amsterdam"+stay, "search-location")
	if got := asJSON(t, only(t, u, autocompletePath)); got != `{"country":"gb","filters":{"types":["city","region","district","landmark","airport","country"]},"language":"en-gb","query":"amsterdam"}` {
		t.Errorf("autocomplete body %s", got)
	}
	if got := only(t, u, searchPath)["city"]; got != -2140479.0 {
		t.Errorf("searched city %v", got)
	}
	dest := data["destination"].(map[string]any)
	if dest["id"] != "-2140479" || dest["city"] != "Amsterdam" || dest["country"] != "Netherlands" || dest["country_code"] != "NL" {
		t.Errorf("destination %v", dest)
	}
	// The same place in other spelling asks no autocomplete again.
	u.Serve(t, searchEndpoint, "location="+url.QueryEscape("  AMSTERDAM ")+stay)
	if n := len(sent(t, u, autocompletePath)); n != 1 {
		t.Errorf("%d autocomplete requests; want 1", n)
	}
	if u.Memory.Kept == 0 {
		t.Error("nothing was remembered")
	}
	// Unknown text is 404; text the autocomplete cannot take is left to the next route.
	u.Fault(t, searchEndpoint, "location=zzqxv"+stay, upstream.NotFound)
	u.Fault(t, searchEndpoint, "location=am"+stay, upstream.Rejected)
}

// Without the beta autocomplete, location text goes to the next route
// with no request made here.
func TestSearchLocationFailsOver(t *testing.T) {
	site := &upstream.Provider{Name: "travel_site_stub", Static: true, Endpoints: map[string]upstream.Adapter{
		searchEndpoint: func(context.Context, *upstream.Call) (any, error) {
			return map[string]any{"items": []any{}, "count": 0}, nil
		},
	}}
	u := adaptertest.StartRoutes(t, []*upstream.Provider{bookingdemand.Provider(), site}, secrets(), options())
	out := u.Serve(t, searchEndpoint, "location=Amsterdam"+stay)
	if out.Fault != nil || out.Trace.ServedBy != "travel_site_stub" || len(out.Trace.Legs) != 2 || out.Trace.Legs[0].OK {
		t.Fatalf("served %+v fault %v", out.Trace, out.Fault)
	}
	if n := len(u.Replay.Requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
	// So does a sort this source does not have, and an id it cannot read.
	for _, q := range []string{"destination_id=-2140479&sort=distance_from_search", "destination_id=hotel:1852006"} {
		if out := u.Serve(t, searchEndpoint, q+stay); out.Fault != nil || len(out.Trace.Legs) != 2 {
			t.Errorf("%s: %+v %v", q, out.Trace, out.Fault)
		}
	}
	if n := len(u.Replay.Requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
}

func TestSearchSortsAndDestinations(t *testing.T) {
	cases := []struct{ query, field, value, sort string }{
		{"destination_id=-2140479&sort=price", "city", "-2140479", `{"by":"price","direction":"ascending"}`},
		{"destination_id=-2140479&sort=review_score_and_price", "city", "-2140479", `{"by":"review_score","direction":"descending"}`},
		{"destination_id=-2140479&sort=class_asc", "city", "-2140479", `{"by":"stars","direction":"ascending"}`},
		{"destination_id=-2140479&sort=popularity", "city", "-2140479", ""},
		{"destination_id=region:1010", "region", "1010", ""},
		{"destination_id=district:145", "district", "145", ""},
		{"destination_id=airport:ams", "airport", `"AMS"`, ""},
		{"destination_id=country:NL", "country", `"nl"`, ""},
	}
	for _, tc := range cases {
		u := start(t)
		data := check(t, u, searchEndpoint, tc.query+stay)
		body := only(t, u, searchPath)
		if got := asJSON(t, body[tc.field]); got != tc.value {
			t.Errorf("%s: %s = %s; want %s", tc.query, tc.field, got, tc.value)
		}
		if got, ok := body["sort"]; (tc.sort == "") == ok || (ok && asJSON(t, got) != tc.sort) {
			t.Errorf("%s: sort %v", tc.query, got)
		}
		if d := data["destination"].(map[string]any); d["type"] != tc.field {
			t.Errorf("%s: destination %v", tc.query, d)
		}
	}
}

func TestSearchEmptyAndErrors(t *testing.T) {
	u := start(t)
	empty := u.Data(t, searchEndpoint, "destination_id=-2140999"+stay, "search-empty")
	if empty["count"] != 0.0 || empty["has_more"] != false || len(adaptertest.Items(t, empty)) != 0 {
		t.Errorf("empty: %v", empty)
	}
	if n := len(sent(t, u, detailsPath)); n != 0 {
		t.Errorf("an empty page asked for %d details", n)
	}
	cases := []struct {
		dest   string
		kind   upstream.FaultKind
		status int
		field  string
	}{
		{"-2140401", upstream.Rejected, 401, ""},
		{"-2140502", upstream.Malformed, 0, ""},
		{"-2140400", upstream.InvalidParameter, 0, "destination_id"},
	}
	for _, tc := range cases {
		u := start(t)
		out := u.Fault(t, searchEndpoint, "destination_id="+tc.dest+stay, tc.kind)
		if out.Fault.Status != tc.status || out.Fault.Field != tc.field {
			t.Errorf("%s: %v", tc.dest, out.Fault)
		}
	}
}

func TestLocations(t *testing.T) {
	u := withAutocomplete(t)
	data := u.Data(t, locationsEndpoint, "query=Amsterdam", "locations")
	if got := only(t, u, autocompletePath)["query"]; got != "Amsterdam" {
		t.Errorf("query sent %v", got)
	}
	items := adaptertest.Items(t, data)
	ids := []string{}
	for _, it := range items {
		ids = append(ids, it["id"].(string))
		if it["destination_id"] != it["id"] {
			t.Errorf("destination_id %v", it)
		}
	}
	if want := []string{"-2140479", "region:1010", "airport:AMS", "landmark:900048000"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids %v; want %v", ids, want)
	}
	if city := items[0]; city["name"] != "Amsterdam" || city["country"] != "Netherlands" || city["country_code"] != "NL" || city["type"] != "city" {
		t.Errorf("city %v", city)
	}
	short := check(t, u, locationsEndpoint, "query=Amsterdam&limit=2")
	if short["count"] != 2.0 || short["has_more"] != true {
		t.Errorf("limit 2: %v", short)
	}
	none := check(t, u, locationsEndpoint, "query=zzqxv")
	if none["count"] != 0.0 || len(adaptertest.Items(t, none)) != 0 {
		t.Errorf("no match: %v", none)
	}
	// No beta access (404) and a short text are not answers: the next route may have one.
	if out := u.Fault(t, locationsEndpoint, "query="+url.QueryEscape("no access"), upstream.Rejected); out.Fault.Status != 404 {
		t.Errorf("no access: %v", out.Fault)
	}
	before := len(u.Replay.Requests())
	u.Fault(t, locationsEndpoint, "query=am", upstream.Rejected)
	if len(u.Replay.Requests()) != before {
		t.Error("a two-letter text was sent")
	}
}

// Without the beta, 3.1 looks cities up by id only; text is not sent.
func TestLocationsWithoutAutocomplete(t *testing.T) {
	u := start(t)
	u.Fault(t, locationsEndpoint, "query=Amsterdam", upstream.Rejected)
	if n := len(u.Replay.Requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
	data := u.Data(t, locationsEndpoint, "query=-2140479", "locations-city-id")
	if got := asJSON(t, only(t, u, citiesPath)); got != `{"city":-2140479,"languages":["en-gb"]}` {
		t.Errorf("cities body %s", got)
	}
	if it := adaptertest.Items(t, data); len(it) != 1 || it[0]["id"] != "-2140479" || it[0]["name"] != "Amsterdam" || it[0]["latitude"] != 52.372898 {
		t.Errorf("city by id: %v", it)
	}
	if none := check(t, u, locationsEndpoint, "query=-1"); none["count"] != 0.0 {
		t.Errorf("unknown city id: %v", none)
	}
}

// Every default fixture answers the registry's example requests, which
// the canary and MERIDIAN_UPSTREAM=replay send: replay mode (its stand-in
// credentials) has the autocomplete.
func TestDefaultsAnswerExamples(t *testing.T) {
	u := adaptertest.StartWith(t, bookingdemand.Provider(), nil, options())
	for _, c := range []struct{ endpoint, query string }{
		{hotelEndpoint, "id=123456&checkin=2026-12-01&checkout=2026-12-03"},
		{searchEndpoint, "location=Lisbon&checkin=2026-12-01&checkout=2026-12-03"},
		{searchEndpoint, "destination_id=-2167973&checkin=2026-12-01&checkout=2026-12-03&page=1"},
		{locationsEndpoint, "query=Lisbon"},
	} {
		check(t, u, c.endpoint, c.query)
	}
}

// The replay fixtures load, each with a POST match.
func TestFixtures(t *testing.T) {
	srv, err := replay.Load(adaptertest.FixturesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range srv.Providers() {
		found = found || p == bookingdemand.Name
	}
	if !found {
		t.Fatal("no booking_demand fixtures")
	}
}
