package booking_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/booking"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// now is the tests' clock: the fixtures' stays (2026-12-01 to 12-03) are
// in its future.
var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func options() upstream.Options {
	o := adaptertest.Options
	o.Now = func() time.Time { return now }
	return o
}

const stay = "checkin=2026-12-01&checkout=2026-12-03"

func direct(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.Direct(booking.Site()), nil, options())
}

// requests are the replay upstream's requests for path, in order.
func requests(u *adaptertest.Upstream, path string) []replay.Request {
	var out []replay.Request
	for _, r := range u.Replay.Requests() {
		if r.Provider == booking.Name && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func warnings(data map[string]any) []string {
	var out []string
	if list, ok := data["_warnings"].([]any); ok {
		for _, w := range list {
			out = append(out, w.(string))
		}
	}
	return out
}

func wantWarnings(t *testing.T, data map[string]any, want ...string) {
	t.Helper()
	got := warnings(data)
	if len(got) != len(want) {
		t.Fatalf("_warnings %q; want %d containing %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Fatalf("_warnings[%d] = %q; want it to contain %q", i, got[i], w)
		}
	}
}

func TestLocations(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.LocationsEndpoint, "query=Lisbon", "locations-lisbon")
	req := u.LastRequest(t)
	if req.Method != http.MethodPost || req.Path != "/autocomplete.json" {
		t.Fatalf("request %s %s", req.Method, req.Path)
	}
	// The base URL is moved (a test server): the autocomplete's host travels in a header.
	if h := req.Header.Get(pages.ForwardedHostHeader); h != booking.AutocompleteHost {
		t.Fatalf("X-Forwarded-Host %q", h)
	}
	var body map[string]any
	if err := json.Unmarshal(req.Body, &body); err != nil || body["query"] != "Lisbon" || body["language"] != "en-gb" || body["size"] != 10.0 || len(body) != 3 {
		t.Fatalf("body %s (%v): want query, language and size only", req.Body, err)
	}
	if req.Header.Get("cookie") != "" || strings.Contains(string(req.Body), "aid") {
		t.Fatalf("a cookie or affiliate id was sent: %v %s", req.Header, req.Body)
	}
	if data["count"] != 5.0 || data["query"] != "Lisbon" || data["has_more"] != false {
		t.Fatalf("list fields %v", data)
	}
	items := adaptertest.Items(t, data)
	wantIDs := []string{"-2167973", "region:2286", "landmark:900040497", "airport:1450", "hotel:123456"}
	for i, id := range wantIDs {
		if items[i]["id"] != id || items[i]["destination_id"] != id {
			t.Fatalf("item %d: id %v, destination_id %v; want %s", i, items[i]["id"], items[i]["destination_id"], id)
		}
	}
	city := items[0]
	if city["name"] != "Lisbon" || city["type"] != "city" || city["city"] != "Lisbon" || city["country"] != "Portugal" ||
		city["country_code"] != "PT" || city["latitude"] != 38.7072 || city["hotels"] != 4125.0 || city["platform"] != "travel_booking" ||
		city["label"] != "Lisbon, Lisbon Region, Portugal" {
		t.Fatalf("city %v", city)
	}
	if region := items[1]; region["city"] != nil || region["region"] != "Lisbon Region" {
		t.Fatalf("region %v: a region has no city", region)
	}
}

func TestLocationsLimit(t *testing.T) {
	u := direct(t)
	out := u.Serve(t, booking.LocationsEndpoint, "query=Lisbon&limit=2")
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	l := out.Data.(booking.Locations)
	if l.Count != 2 || len(l.Items) != 2 || l.HasMore != nil {
		t.Fatalf("count %d, has_more %v: want 2 and unknown", l.Count, l.HasMore)
	}
	var body map[string]any
	_ = json.Unmarshal(u.LastRequest(t).Body, &body)
	if body["size"] != 2.0 {
		t.Fatalf("size %v", body["size"])
	}
}

func TestLocationsEmpty(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.LocationsEndpoint, "query=Zzyzx+nowhere", "locations-empty")
	if items, ok := data["items"].([]any); !ok || len(items) != 0 || data["count"] != 0.0 || data["has_more"] != false {
		t.Fatalf("empty lookup %v", data)
	}
}

func TestLocationsFaults(t *testing.T) {
	u := direct(t)
	out := u.Fault(t, booking.LocationsEndpoint, "query=blocked+lookup", upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "AWS WAF") || out.Fault.Status != 202 {
		t.Fatalf("blocked: %v", out.Fault)
	}
	u.Fault(t, booking.LocationsEndpoint, "query=server+error", upstream.ServerError)
	u.Fault(t, booking.LocationsEndpoint, "query=malformed", upstream.Malformed)
	out = u.Fault(t, booking.LocationsEndpoint, "query=changed+shape", upstream.Malformed)
	if !strings.Contains(out.Fault.Reason, "no results list") || strings.Contains(out.Fault.Reason, "Lisbon") {
		t.Fatalf("changed shape: %q", out.Fault.Reason)
	}
	// Last: the site's wait rests the route.
	out = u.Fault(t, booking.LocationsEndpoint, "query=rate+limited", upstream.RateLimited)
	if out.Fault.RetryAfter != 30*time.Second {
		t.Fatalf("retry-after %v", out.Fault.RetryAfter)
	}
	if again := u.Serve(t, booking.LocationsEndpoint, "query=Lisbon"); again.Fault != nil || again.Skipped <= 0 {
		t.Fatalf("the route was not rested: fault %v, skipped %v", again.Fault, again.Skipped)
	}
}

// A location is resolved once through the autocomplete and remembered: the
// second search of the same text (in another case) asks none.
func TestAttractionsLocationRemembered(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.AttractionsEndpoint, "location=Lisbon", "attractions-lisbon")
	if n := len(requests(u, "/autocomplete.json")); n != 1 {
		t.Fatalf("%d autocomplete requests", n)
	}
	again := u.Serve(t, booking.AttractionsEndpoint, "location=lisbon+")
	if again.Fault != nil {
		t.Fatal(again.Fault)
	}
	if n := len(requests(u, "/autocomplete.json")); n != 1 {
		t.Fatalf("the second search asked the autocomplete again (%d requests)", n)
	}
	if n := len(requests(u, "/dml/graphql")); n != 2 {
		t.Fatalf("%d GraphQL requests", n)
	}
	if u.Memory.Kept != 1 {
		t.Fatalf("%d values kept", u.Memory.Kept)
	}

	req := requests(u, "/dml/graphql")[0]
	var body struct {
		OperationName string `json:"operationName"`
		Query         string `json:"query"`
		Variables     struct {
			Input map[string]any `json:"input"`
		} `json:"variables"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.OperationName != "SearchProducts" || !strings.Contains(body.Query, "searchProducts(input: $input") ||
		body.Variables.Input["ufi"] != -2167973.0 || body.Variables.Input["page"] != 1.0 || url.Values(req.Query).Get("lang") != "en-gb" ||
		req.Header.Get("Content-Type") != "application/json" || req.Header.Get("Origin") != booking.Origin {
		t.Fatalf("GraphQL request %s ?%v %v", req.Body, req.Query, req.Header)
	}
	if _, ok := body.Variables.Input["sortBy"]; ok {
		t.Fatalf("a sort was sent unasked: %v", body.Variables.Input)
	}

	if data["count"] != 4.0 || data["total"] != 1234.0 || data["has_more"] != true || data["page"] != 1.0 || data["cursor"] != nil {
		t.Fatalf("list fields %v", data)
	}
	if d := data["destination"].(map[string]any); d["id"] != "-2167973" || d["city"] != "Lisbon" || d["country"] != "Portugal" {
		t.Fatalf("destination %v", d)
	}
	items := adaptertest.Items(t, data)
	tower := items[0]
	if tower["id"] != "PRk4Jv2mXqTz" || tower["type"] != "attraction" || tower["platform"] != "travel_booking" ||
		tower["url"] != "https://www.booking.com/attractions/pt/prk4jv2mxqtz-lisbon-belem-tower-skip-the-line-ticket.html" ||
		tower["rating"] != 4.6 || tower["ratings_count"] != 12980.0 || tower["reviews_count"] != 1840.0 || tower["positive_share"] != "94%" ||
		tower["free_cancellation"] != true || tower["offers"] != 1.0 || tower["destination_id"] != "-2167973" || tower["country_code"] != "PT" ||
		tower["category"] != "Museums, arts & culture" {
		t.Fatalf("first item %v", tower)
	}
	if p := tower["price"].(map[string]any); p["amount"] != 12.0 || p["currency"] != "EUR" {
		t.Fatalf("price %v", p)
	}
	// Unreviewed: the site's "0" share and 0 average are unknown, not zero.
	if cruise := items[2]; cruise["positive_share"] != nil || cruise["rating"] != nil || cruise["ratings_count"] != 0.0 || cruise["reviews_count"] != 0.0 {
		t.Fatalf("unreviewed item %v", cruise)
	}
	if noStats := items[3]; noStats["rating"] != nil || noStats["reviews_count"] != nil || noStats["city"] != "Almada" {
		t.Fatalf("item without stats %v", noStats)
	}
	filters := data["filters"].(map[string]any)
	if types := filters["types"].([]any); len(types) != 4 || types[0].(map[string]any)["id"] != "tours" {
		t.Fatalf("type filters %v", types)
	}
	if areas := filters["areas"].([]any); areas[1].(map[string]any)["id"] != "-2163481" {
		t.Fatalf("area filters %v", areas)
	}
	if sorts := data["sorts"].([]any); len(sorts) != 4 || sorts[0].(map[string]any)["active"] != true {
		t.Fatalf("sorts %v", sorts)
	}
	wantWarnings(t, data)
}

// Each parameter reaches the GraphQL in its own field.
func TestAttractionsParameters(t *testing.T) {
	u := direct(t)
	q := "destination_id=-2167973&page=2&start_date=2026-12-01&end_date=2026-12-03&sort=lowest_price&types=tours,museums-arts-culture" +
		"&labels=free_cancellation&prices=0-25&areas=-2167973&currency=usd&language=pt-PT"
	data := u.Data(t, booking.AttractionsEndpoint, q, "attractions-lisbon-filtered")
	if n := len(requests(u, "/autocomplete.json")); n != 0 {
		t.Fatalf("a destination_id needs no autocomplete (%d requests)", n)
	}
	req := u.LastRequest(t)
	if url.Values(req.Query).Get("lang") != "pt-pt" || url.Values(req.Query).Get("selected_currency") != "USD" {
		t.Fatalf("query %v", req.Query)
	}
	if data["page"] != 2.0 || data["count"] != 2.0 || data["total"] != 27.0 || data["has_more"] != false {
		t.Fatalf("page 2 of 27: %v", data)
	}
	if p := adaptertest.Items(t, data)[1]["price"].(map[string]any); p["amount"] != 73.87 || p["currency"] != "USD" {
		t.Fatalf("price %v", p)
	}
	for _, s := range data["sorts"].([]any) {
		s := s.(map[string]any)
		if (s["id"] == "lowest_price") != (s["active"] == true) {
			t.Fatalf("sort %v: only lowest_price is active", s)
		}
	}
	wantWarnings(t, data)
}

// A location that is not a city is searched in the first city the site
// suggests for it, and the answer says so; a non-city destination_id is
// the caller's to fix.
func TestAttractionsOutsideACity(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.AttractionsEndpoint, "location=Algarve", "attractions-algarve")
	if d := data["destination"].(map[string]any); d["id"] != "-2156968" || d["city"] != "Albufeira" {
		t.Fatalf("destination %v", d)
	}
	wantWarnings(t, data, "not a city")
	out := u.Fault(t, booking.AttractionsEndpoint, "destination_id=region:2286", upstream.InvalidParameter)
	if out.Fault.Field != "destination_id" || out.Fault.Code != "not_a_city" {
		t.Fatalf("fault %+v", out.Fault)
	}
	out = u.Fault(t, booking.AttractionsEndpoint, "destination_id=lisbon", upstream.InvalidParameter)
	if out.Fault.Field != "destination_id" {
		t.Fatalf("fault %+v", out.Fault)
	}
}

func TestAttractionsFaults(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.AttractionsEndpoint, "destination_id=-1000001", "attractions-empty")
	if items := data["items"].([]any); len(items) != 0 || data["total"] != 0.0 || data["has_more"] != false {
		t.Fatalf("empty search %v", data)
	}
	out := u.Fault(t, booking.AttractionsEndpoint, "destination_id=-1000002", upstream.Rejected)
	if out.Fault.Status != 403 || !strings.Contains(out.Fault.Reason, "AWS WAF") {
		t.Fatalf("blocked GraphQL: %v", out.Fault)
	}
	out = u.Fault(t, booking.AttractionsEndpoint, "destination_id=-1000003", upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "GraphQL refused") {
		t.Fatalf("GraphQL errors: %v", out.Fault)
	}
	out = u.Fault(t, booking.AttractionsEndpoint, "destination_id=-1000004", upstream.Malformed)
	if !strings.Contains(out.Fault.Reason, "no products list") {
		t.Fatalf("changed shape: %v", out.Fault)
	}
	u.Fault(t, booking.AttractionsEndpoint, "destination_id=-1000005", upstream.NotFound)
	u.Fault(t, booking.AttractionsEndpoint, "location=Zzyzx+nowhere", upstream.NotFound)
}

func TestSearchHotels(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.SearchHotelsEndpoint, "location=Lisbon&"+stay, "search-hotels-lisbon")
	req := requests(u, "/searchresults.html")[0]
	want := map[string]string{"dest_id": "-2167973", "dest_type": "city", "ss": "Lisbon", "checkin": "2026-12-01", "checkout": "2026-12-03",
		"group_adults": "2", "no_rooms": "1", "group_children": "0", "lang": "en-gb"}
	for k, v := range want {
		if url.Values(req.Query).Get(k) != v {
			t.Fatalf("query %s = %q; want %q (%v)", k, url.Values(req.Query).Get(k), v, req.Query)
		}
	}
	for _, k := range []string{"offset", "order", "selected_currency", "age"} {
		if _, ok := req.Query[k]; ok {
			t.Fatalf("query has %s unasked: %v", k, req.Query)
		}
	}
	if !strings.Contains(req.Header.Get("accept"), "text/html") || req.Header.Get("accept-language") != "en-GB,en;q=0.9" {
		t.Fatalf("not a browser's navigation: %v", req.Header)
	}
	if data["count"] != 4.0 || data["total"] != 1532.0 || data["has_more"] != true || data["page"] != 1.0 ||
		data["checkin_date"] != "2026-12-01" || data["checkout_date"] != "2026-12-03" || data["currency"] != "EUR" {
		t.Fatalf("list fields %v", data)
	}
	if d := data["destination"].(map[string]any); d["id"] != "-2167973" || d["city"] != "Lisbon" || d["country"] != "Portugal" {
		t.Fatalf("destination %v", d)
	}
	items := adaptertest.Items(t, data)
	// basicPropertyData as an Apollo reference, resolved from the cache.
	avenida := items[0]
	if avenida["id"] != "123456" || avenida["name"] != "Avenida Palace" || avenida["url"] != "https://www.booking.com/hotel/pt/avenida-palace.html" ||
		avenida["accommodation_type"] != "Hotel" || avenida["rating"] != 8.9 || avenida["review_count"] != 2431.0 ||
		avenida["free_cancellation"] != true || avenida["breakfast_included"] != true || avenida["sold_out"] != false ||
		avenida["distance_to_centre_km"] != 0.41 || avenida["country_code"] != "PT" || avenida["destination_id"] != "-2167973" ||
		avenida["image_url"] != "https://cf.bstatic.com/xdata/images/hotel/square600/1111111.webp?k=c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3&o=" ||
		avenida["price_label"] != "€ 412" || avenida["type"] != "hotel" {
		t.Fatalf("first item %v", avenida)
	}
	if p := avenida["price"].(map[string]any); p["amount"] != 412.0 || p["currency"] != "EUR" {
		t.Fatalf("price per stay %v", p)
	}
	// A large id stays exact.
	if items[1]["id"] != "8811223344" || items[1]["breakfast_included"] != false {
		t.Fatalf("second item %v", items[1])
	}
	// No reviews: the 0 score is unknown.
	if items[2]["rating"] != nil || items[2]["review_count"] != 0.0 {
		t.Fatalf("unreviewed %v", items[2])
	}
	if sold := items[3]; sold["sold_out"] != true || sold["price"] != nil || sold["breakfast_included"] != nil {
		t.Fatalf("sold out %v", sold)
	}
	if sorts := data["sorts"].([]any); len(sorts) != 4 || sorts[0].(map[string]any)["id"] != "popularity" || sorts[0].(map[string]any)["active"] != true {
		t.Fatalf("sorts %v", sorts)
	}
	wantWarnings(t, data)
}

// The site sends its orders as a list of Sorter objects, one option each
// (the format of a FullSearch answer captured in 2024, see ARCHITECTURE.md
// "Format provenance"), with its results' reviewScore alias, no distance
// and no rates when the page shows none: all of it is read.
func TestSearchHotelsSorterList(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.SearchHotelsEndpoint, "destination_id=-2173088&"+stay, "search-hotels-porto-sorter-list")
	if data["count"] != 2.0 || data["total"] != 2.0 || data["has_more"] != false {
		t.Fatalf("list fields %v", data)
	}
	sorts := data["sorts"].([]any)
	if len(sorts) != 3 {
		t.Fatalf("sorts %v", sorts)
	}
	if first := sorts[0].(map[string]any); first["id"] != "popularity" || first["name"] != "Our top picks" || first["active"] != true {
		t.Fatalf("first sort %v", first)
	}
	if second := sorts[1].(map[string]any); second["id"] != "price" || second["active"] != false {
		t.Fatalf("second sort %v", second)
	}
	items := adaptertest.Items(t, data)
	if casa := items[0]; casa["id"] != "7700101" || casa["rating"] != 8.6 || casa["review_count"] != 731.0 ||
		casa["url"] != "https://www.booking.com/hotel/pt/casa-da-ribeira-porto.html" || casa["distance_to_centre_km"] != nil ||
		casa["price"] != nil || casa["breakfast_included"] != nil || casa["accommodation_type"] != "Hotel" {
		t.Fatalf("first item %v", casa)
	}
	if unreviewed := items[1]; unreviewed["rating"] != nil || unreviewed["review_count"] != 0.0 || unreviewed["accommodation_type"] != "Bed and breakfast" {
		t.Fatalf("second item %v", unreviewed)
	}
	wantWarnings(t, data)
}

func TestSearchHotelsParameters(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.SearchHotelsEndpoint, "destination_id=-2167973&"+stay+"&page=2&sort=price&currency=USD&children_ages=4", "search-hotels-page2")
	req := u.LastRequest(t)
	if url.Values(req.Query).Get("offset") != "25" || url.Values(req.Query).Get("order") != "price" || url.Values(req.Query).Get("selected_currency") != "USD" ||
		url.Values(req.Query).Get("age") != "4" || url.Values(req.Query).Get("group_children") != "1" || req.Query["ss"] != nil {
		t.Fatalf("query %v", req.Query)
	}
	if data["page"] != 2.0 || data["count"] != 2.0 || data["total"] != 27.0 || data["has_more"] != false || data["currency"] != "USD" {
		t.Fatalf("page 2: %v", data)
	}
	wantWarnings(t, data)
}

// A region's results measure distances from the region, not a city's
// centre; a sort the site did not apply is said.
func TestSearchHotelsRegion(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.SearchHotelsEndpoint, "destination_id=region:2286&"+stay+"&sort=class", "search-hotels-region")
	if url.Values(u.LastRequest(t).Query).Get("dest_type") != "region" {
		t.Fatalf("query %v", u.LastRequest(t).Query)
	}
	if it := adaptertest.Items(t, data)[0]; it["distance_to_centre_km"] != nil || it["city"] != "Cascais" {
		t.Fatalf("item %v", it)
	}
	if d := data["destination"].(map[string]any); d["id"] != "region:2286" {
		t.Fatalf("destination %v", d)
	}
	wantWarnings(t, data, "did not apply the requested sort")
}

func TestSearchHotelsFaults(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.SearchHotelsEndpoint, "destination_id=-1000001&"+stay, "search-hotels-empty")
	if items := data["items"].([]any); len(items) != 0 || data["total"] != 0.0 || data["has_more"] != false {
		t.Fatalf("empty search %v", data)
	}
	u.Fault(t, booking.SearchHotelsEndpoint, "destination_id=-1000002&"+stay, upstream.Rejected)
	out := u.Fault(t, booking.SearchHotelsEndpoint, "destination_id=-1000004&"+stay, upstream.Malformed)
	if !strings.Contains(out.Fault.Reason, "no Apollo data") || !strings.Contains(out.Fault.Reason, "-byte results page") {
		t.Fatalf("changed shape: %q", out.Fault.Reason)
	}
	u.Fault(t, booking.SearchHotelsEndpoint, "destination_id=-1000006&"+stay, upstream.ServerError)
	out = u.Fault(t, booking.SearchHotelsEndpoint, "destination_id=-2167973&checkin=2026-11-20&checkout=2026-11-22", upstream.InvalidParameter)
	if out.Fault.Field != "checkin" || out.Fault.Code != "date_in_past" {
		t.Fatalf("past stay: %+v", out.Fault)
	}
	u.Fault(t, booking.SearchHotelsEndpoint, "location=Zzyzx+nowhere&"+stay, upstream.NotFound)
}

// A hotel number is looked up once on the results page for that property;
// its page path is remembered, so the next call fetches the page only.
func TestHotel(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.HotelEndpoint, "id=123456&"+stay+"&adults=2&rooms=1&currency=EUR", "hotel-123456")
	lookups := requests(u, "/searchresults.html")
	if len(lookups) != 1 || url.Values(lookups[0].Query).Get("dest_id") != "123456" || url.Values(lookups[0].Query).Get("dest_type") != "hotel" {
		t.Fatalf("lookups %v", lookups)
	}
	page := u.LastRequest(t)
	if page.Path != "/hotel/pt/avenida-palace.html" || url.Values(page.Query).Get("checkin") != "2026-12-01" || url.Values(page.Query).Get("group_adults") != "2" ||
		url.Values(page.Query).Get("no_rooms") != "1" || url.Values(page.Query).Get("selected_currency") != "EUR" || url.Values(page.Query).Get("lang") != "en-gb" {
		t.Fatalf("page request %s ?%v", page.Path, page.Query)
	}
	if out := u.Serve(t, booking.HotelEndpoint, "id=123456&checkin=2026-12-02&checkout=2026-12-04"); out.Fault != nil {
		t.Fatal(out.Fault)
	}
	if n := len(requests(u, "/searchresults.html")); n != 1 {
		t.Fatalf("the page path was looked up again (%d lookups)", n)
	}

	if data["id"] != "123456" || data["name"] != "Avenida Palace" || data["url"] != "https://www.booking.com/hotel/pt/avenida-palace.html" ||
		data["city"] != "Lisbon" || data["country_code"] != "PT" || data["postcode"] != "1200-359" || data["address"] != "Rua 1º de Dezembro 123, Santa Maria Maior, 1200-359 Lisbon, Portugal" ||
		data["latitude"] != 38.71556 || data["longitude"] != -9.14152 || data["review_count"] != 2431.0 || data["currency"] != "EUR" ||
		data["destination_id"] != "-2167973" || data["available_rooms"] != 2.0 || data["sold_out"] != false || data["breakfast_included"] != true ||
		data["checkin_date"] != "2026-12-01" || data["checkout_date"] != "2026-12-03" || data["type"] != "hotel" || data["platform"] != "travel_booking" ||
		data["facilities"] != nil || data["wifi_score"] != nil {
		t.Fatalf("hotel %v", data)
	}
	if r := data["rating"].(map[string]any); r["value"] != 8.9 || r["max"] != 10.0 {
		t.Fatalf("rating %v", r)
	}
	rooms := data["rooms"].([]any)
	if len(rooms) != 3 {
		t.Fatalf("rooms %v", rooms)
	}
	if r := rooms[0].(map[string]any); r["id"] != "12345601" || r["name"] != "Classic Double Room" || r["available"] != true || r["offers_count"] != 2.0 || r["max_persons"] != 2.0 {
		t.Fatalf("room %v", r)
	}
	if r := rooms[2].(map[string]any); r["available"] != false || r["offers_count"] != 0.0 {
		t.Fatalf("sold-out room %v", r)
	}
	offers := data["offers"].([]any)
	if len(offers) != 3 {
		t.Fatalf("offers %v", offers)
	}
	flexible := offers[0].(map[string]any)
	if flexible["id"] != "12345601_91234567_2_2_0" || flexible["room_id"] != "12345601" || flexible["meal_plan"] != "breakfast" ||
		flexible["breakfast_included"] != true || flexible["cancellation_type"] != "free_cancellation" || flexible["free_cancellation"] != true ||
		flexible["pay_later"] != true || flexible["price_label"] != "€ 412" {
		t.Fatalf("flexible offer %v", flexible)
	}
	if p := flexible["price"].(map[string]any); p["amount"] != 412.0 || p["currency"] != "EUR" {
		t.Fatalf("offer price %v", p)
	}
	if nr := offers[1].(map[string]any); nr["free_cancellation"] != false || nr["pay_later"] != false || nr["meal_plan"] != nil || nr["breakfast_included"] != false {
		t.Fatalf("non-refundable offer %v", nr)
	}
	if suite := offers[2].(map[string]any); suite["breakfast_included"] != true || suite["cancellation_type"] != "special_conditions" || suite["pay_later"] != false || suite["max_persons"] != 3.0 {
		t.Fatalf("suite offer %v", suite)
	}
	wantWarnings(t, data, "not read")
}

func TestHotelSoldOutAndNoRoomTable(t *testing.T) {
	u := direct(t)
	data := u.Data(t, booking.HotelEndpoint, "id=234567&"+stay, "hotel-234567-sold-out")
	if data["sold_out"] != true || data["available_rooms"] != 0.0 || data["breakfast_included"] != nil ||
		len(data["rooms"].([]any)) != 0 || len(data["offers"].([]any)) != 0 {
		t.Fatalf("sold out %v", data)
	}
	// Coordinates from the JSON-LD map when the page sets no map centre.
	if data["latitude"] != 38.7139 || data["image_url"] != "https://cf.bstatic.com/xdata/images/hotel/max500/8888888.jpg?k=d4d4&o=&hp=1" {
		t.Fatalf("position and image %v", data)
	}
	data = u.Data(t, booking.HotelEndpoint, "id=345678&"+stay, "hotel-345678-no-room-table")
	if data["rooms"] != nil || data["offers"] != nil || data["sold_out"] != nil || data["rating"] != nil || data["review_count"] != nil {
		t.Fatalf("no room table %v", data)
	}
	wantWarnings(t, data, "not read", "no room table")
}

func TestHotelFaults(t *testing.T) {
	u := direct(t)
	u.Fault(t, booking.HotelEndpoint, "id=999999999&"+stay, upstream.NotFound) // not on the results page
	u.Fault(t, booking.HotelEndpoint, "id=456789&"+stay, upstream.NotFound)    // its page answers 404
	out := u.Fault(t, booking.HotelEndpoint, "id=567890&"+stay, upstream.Malformed)
	if !strings.Contains(out.Fault.Reason, "JSON-LD") || !strings.Contains(out.Fault.Reason, "-byte page") {
		t.Fatalf("changed shape: %q", out.Fault.Reason)
	}
	out = u.Fault(t, booking.HotelEndpoint, "id=123456&checkin=2026-11-01&checkout=2026-11-03", upstream.InvalidParameter)
	if out.Fault.Field != "checkin" {
		t.Fatalf("past stay: %+v", out.Fault)
	}
	// The default page is another property's: never passed off as this one.
	u.Fault(t, booking.HotelEndpoint, "id=234568&"+stay, upstream.NotFound)
}

// services are test doubles of Zyte API and ScraperAPI that fetch the
// target from the replay upstream's booking fixtures, recording what they
// were asked; fail, when it answers a status for a target, refuses it.
type services struct {
	mu       sync.Mutex
	rep      *replay.Server
	zyte     []map[string]any
	scraper  []*http.Request
	zyteFail func(target string) int
}

func (s *services) fetch(method, target string, body []byte) *httptest.ResponseRecorder {
	u, _ := url.Parse(target)
	req := httptest.NewRequest(method, "/"+booking.Name+u.RequestURI(), bytes.NewReader(body))
	rec := httptest.NewRecorder()
	s.rep.ServeHTTP(rec, req)
	return rec
}

func (s *services) zyteHandler(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.zyte = append(s.zyte, body)
	s.mu.Unlock()
	if !strings.HasPrefix(r.Header.Get("authorization"), "Basic ") || r.URL.Path != "/v1/extract" || body["httpResponseBody"] != true {
		http.Error(w, `{"type":"/request/invalid"}`, http.StatusBadRequest)
		return
	}
	target, _ := body["url"].(string)
	if s.zyteFail != nil {
		if code := s.zyteFail(target); code != 0 {
			w.Header().Set("content-type", "application/problem+json")
			w.WriteHeader(code)
			_, _ = w.Write([]byte(`{"type":"/download/temporary-error","title":"Temporary Downloading Error","status":520}`))
			return
		}
	}
	method, _ := body["httpRequestMethod"].(string)
	if method == "" {
		method = http.MethodGet
	}
	text, _ := body["httpRequestText"].(string)
	rec := s.fetch(method, target, []byte(text))
	var headers []map[string]string
	for k, vs := range rec.Header() {
		headers = append(headers, map[string]string{"name": k, "value": strings.Join(vs, ",")})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"url": target, "statusCode": rec.Code,
		"httpResponseBody": base64.StdEncoding.EncodeToString(rec.Body.Bytes()), "httpResponseHeaders": headers})
}

func (s *services) scraperHandler(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.scraper = append(s.scraper, r)
	s.mu.Unlock()
	if r.URL.Query().Get("api_key") == "" {
		http.Error(w, "missing api_key", http.StatusUnauthorized)
		return
	}
	rec := s.fetch(r.Method, r.URL.Query().Get("url"), raw)
	w.Header().Set("content-type", rec.Header().Get("content-type"))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// startRoutes runs the three routes in the integrator's order, the services
// behind the doubles; directURL, when set, stands in for the site itself.
func startRoutes(t *testing.T, s *services, directURL string, providers ...*upstream.Provider) *adaptertest.Upstream {
	t.Helper()
	zyteSrv := httptest.NewServer(http.HandlerFunc(s.zyteHandler))
	t.Cleanup(zyteSrv.Close)
	scraperSrv := httptest.NewServer(http.HandlerFunc(s.scraperHandler))
	t.Cleanup(scraperSrv.Close)
	settings := map[string]string{
		"MERIDIAN_UPSTREAM_ZYTE_API_URL":   zyteSrv.URL,
		"MERIDIAN_UPSTREAM_SCRAPERAPI_URL": scraperSrv.URL,
	}
	if directURL != "" {
		settings["MERIDIAN_UPSTREAM_BOOKING_URL"] = directURL
	}
	if len(providers) == 0 {
		providers = []*upstream.Provider{pages.Direct(booking.Site()), pages.Zyte(booking.Site()), pages.ScraperAPI(booking.Site())}
	}
	u := adaptertest.StartRoutes(t, providers, settings, options())
	s.rep = u.Replay
	return u
}

// The services fetch the same public URLs and post the same bodies, and
// every operation maps their answers to the same data.
func TestServiceRoutes(t *testing.T) {
	for _, route := range []string{pages.ZyteName, pages.ScraperAPIName} {
		t.Run(route, func(t *testing.T) {
			s := &services{}
			p := pages.Zyte(booking.Site())
			if route == pages.ScraperAPIName {
				p = pages.ScraperAPI(booking.Site())
			}
			u := startRoutes(t, s, "", p)
			for _, c := range []struct{ endpoint, query, golden string }{
				{booking.LocationsEndpoint, "query=Lisbon", "locations-lisbon"},
				{booking.AttractionsEndpoint, "location=Lisbon", "attractions-lisbon"},
				{booking.SearchHotelsEndpoint, "location=Lisbon&" + stay, "search-hotels-lisbon"},
				{booking.HotelEndpoint, "id=123456&" + stay + "&adults=2&rooms=1&currency=EUR", "hotel-123456"},
			} {
				out := u.Serve(t, c.endpoint, c.query)
				if out.Trace.ServedBy != route {
					t.Fatalf("%s served by %q", c.endpoint, out.Trace.ServedBy)
				}
				adaptertest.MatchesGolden(t, c.endpoint, out, booking.Name, c.golden)
			}
		})
	}
}

// Zyte API is asked for the public URLs, the JSON ones as POSTs with
// their bodies as text.
func TestZyteRequests(t *testing.T) {
	s := &services{}
	u := startRoutes(t, s, "", pages.Zyte(booking.Site()))
	if out := u.Serve(t, booking.AttractionsEndpoint, "location=Lisbon&currency=EUR"); out.Fault != nil {
		t.Fatal(out.Fault)
	}
	if len(s.zyte) != 2 {
		t.Fatalf("%d Zyte API requests", len(s.zyte))
	}
	ac, gql := s.zyte[0], s.zyte[1]
	if ac["url"] != "https://accommodations.booking.com/autocomplete.json" || ac["httpRequestMethod"] != "POST" ||
		!strings.Contains(ac["httpRequestText"].(string), `"query":"Lisbon"`) || ac["httpResponseHeaders"] != true {
		t.Fatalf("autocomplete through Zyte API: %v", ac)
	}
	if gql["url"] != "https://www.booking.com/dml/graphql?lang=en-gb&selected_currency=EUR" || gql["httpRequestMethod"] != "POST" {
		t.Fatalf("GraphQL through Zyte API: %v", gql)
	}
	headers := map[string]string{}
	for _, h := range gql["customHttpRequestHeaders"].([]any) {
		h := h.(map[string]any)
		headers[h["name"].(string)] = h["value"].(string)
	}
	if headers["Content-Type"] != "application/json" || headers["X-Booking-Topic"] == "" {
		t.Fatalf("GraphQL headers %v", headers)
	}
	if out := u.Serve(t, booking.SearchHotelsEndpoint, "destination_id=-2167973&"+stay); out.Fault != nil {
		t.Fatal(out.Fault)
	}
	page := s.zyte[2]
	if _, ok := page["httpRequestMethod"]; ok || !strings.HasPrefix(page["url"].(string), "https://www.booking.com/searchresults.html?") {
		t.Fatalf("results page through Zyte API: %v", page)
	}
}

// The routes in the integrator's order: the site's AWS WAF challenge fails
// over to Zyte API, a Zyte ban to ScraperAPI.
func TestFailover(t *testing.T) {
	walled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-waf-action", "challenge")
		w.Header().Set("content-type", "text/html; charset=UTF-8")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`<!DOCTYPE html><html><head><title></title><script>window.awsWafCookieDomainList = ['booking.com'];</script></head><body></body></html>`))
	}))
	t.Cleanup(walled.Close)
	s := &services{}
	u := startRoutes(t, s, walled.URL)

	out := u.Serve(t, booking.HotelEndpoint, "id=123456&"+stay)
	if out.Fault != nil || out.Trace.ServedBy != pages.ZyteName {
		t.Fatalf("walled site: served by %q, fault %v", out.Trace.ServedBy, out.Fault)
	}
	if l := out.Trace.Legs[0]; l.ServedBy != booking.Name || l.Fault != upstream.Rejected || l.Status != http.StatusAccepted {
		t.Fatalf("direct leg %+v", l)
	}

	s.zyteFail = func(string) int { return 520 }
	out = u.Serve(t, booking.LocationsEndpoint, "query=Lisbon")
	if out.Fault != nil || out.Trace.ServedBy != pages.ScraperAPIName {
		t.Fatalf("Zyte ban: served by %q, fault %v", out.Trace.ServedBy, out.Fault)
	}
	if l := out.Trace.Legs[1]; l.ServedBy != pages.ZyteName || l.Fault != upstream.Rejected {
		t.Fatalf("Zyte leg %+v", l)
	}
	adaptertest.MatchesGolden(t, booking.LocationsEndpoint, out, booking.Name, "locations-lisbon")
}

func TestProviders(t *testing.T) {
	d := pages.Direct(booking.Site())
	if d.Name != booking.Name || d.BaseURL != booking.Origin || len(d.Secrets) != 0 || len(d.Endpoints) != 4 {
		t.Fatalf("direct provider %+v", d)
	}
	z := pages.Zyte(booking.Site())
	if z.Name != pages.ZyteName || len(z.Endpoints) != 4 {
		t.Fatalf("zyte provider %s with %d endpoints", z.Name, len(z.Endpoints))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("serving the endpoints twice did not panic")
		}
	}()
	pages.Zyte(booking.Site(), booking.Site())
}
