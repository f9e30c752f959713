package zoopla_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/zoopla"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const (
	locations = zoopla.LocationsEndpoint
	search    = zoopla.SearchEndpoint
)

// direct is the site's own route, as adapters.All() lists it.
func direct(t *testing.T, secrets map[string]string) *adaptertest.Upstream {
	t.Helper()
	p := pages.Direct(zoopla.Site())
	return adaptertest.StartRoutes(t, []*upstream.Provider{p}, secrets, adaptertest.Options)
}

// since returns the requests the replay upstream received after the first n.
func since(u *adaptertest.Upstream, n int) []replay.Request { return u.Replay.Requests()[n:] }

func TestLocations(t *testing.T) {
	u := direct(t, nil)
	data := u.Data(t, locations, "query=bath", "locations-bath")
	req := u.LastRequest(t)
	if req.Path != "/graphql" || req.Header.Get(pages.ForwardedHostHeader) != zoopla.GraphQLHost {
		t.Fatalf("typeahead request %s (host %q)", req.Path, req.Header.Get(pages.ForwardedHostHeader))
	}
	if first(req.Query, "operationName") != "getSearchSuggestions" || first(req.Query, "variables") != `{"locationPrefix":"bath"}` ||
		!strings.Contains(first(req.Query, "query"), "geoSuggestion(locationPrefix: $locationPrefix)") {
		t.Fatalf("typeahead query %v", req.Query)
	}
	if req.Header.Get("x-api-key") != "" || req.Header.Get("accept") != "application/json" || req.Header.Get("referer") != zoopla.Origin+"/" {
		t.Fatalf("typeahead headers %v", req.Header)
	}
	if data["count"] != 4.0 || data["has_more"] != false || data["query"] != "bath" {
		t.Fatalf("list fields %v", data)
	}
	items := adaptertest.Items(t, data)
	if items[0]["identifier"] != "bath" || items[0]["label"] != "Bath, Somerset" || items[0]["name"] != "Bath, Somerset" || items[0]["type"] != nil {
		t.Fatalf("first item %v", items[0])
	}
	if items[2]["identifier"] != "station/bath-spa" || items[2]["type"] != "station" || items[3]["type"] != "school" {
		t.Fatalf("kinds %v / %v", items[2], items[3])
	}
}

// The operator's own key goes with the typeahead when one is configured.
func TestLocationsSendOperatorKey(t *testing.T) {
	u := direct(t, map[string]string{zoopla.KeySecret: "operator-key-123"})
	u.Data(t, locations, "query=bath", "locations-bath")
	if got := u.LastRequest(t).Header.Get("x-api-key"); got != "operator-key-123" {
		t.Fatalf("x-api-key %q", got)
	}
}

func TestLocationsLimitAndEmpty(t *testing.T) {
	u := direct(t, nil)
	data := u.Data(t, locations, "query=greenwich&limit=2", "locations-greenwich-2")
	if data["count"] != 2.0 || data["has_more"] != true || len(adaptertest.Items(t, data)) != 2 {
		t.Fatalf("limited %v", data)
	}
	data = u.Data(t, locations, "query=zzqx+nowhere", "locations-empty")
	if items, ok := data["items"].([]any); !ok || len(items) != 0 || data["count"] != 0.0 || data["has_more"] != false {
		t.Fatalf("empty %v", data)
	}
}

func TestLocationsFaults(t *testing.T) {
	u := direct(t, nil)
	if f := u.Fault(t, locations, "query=refused", upstream.Rejected).Fault; f.Status != 403 {
		t.Fatalf("refused key: %+v", f)
	}
	if f := u.Fault(t, locations, "query=errors", upstream.Rejected).Fault; !strings.Contains(f.Reason, "GraphQL errors") {
		t.Fatalf("GraphQL errors: %+v", f)
	}
	if f := u.Fault(t, locations, "query=changed", upstream.Malformed).Fault; !strings.Contains(f.Reason, "geoSuggestion") {
		t.Fatalf("changed shape: %+v", f)
	}
	if f := u.Fault(t, locations, "query=busy", upstream.RateLimited).Fault; f.RetryAfter != 90*time.Second {
		t.Fatalf("rate limited: %+v", f)
	}
}

// Location text is resolved through the typeahead once; the second search
// of the same text (any case or spacing) asks only for the search page.
func TestSearchResolvesLocationOnce(t *testing.T) {
	u := direct(t, nil)
	data := u.Data(t, search, "location=Bath", "search-bath")
	reqs := u.Replay.Requests()
	if len(reqs) != 2 || reqs[0].Path != "/graphql" || first(reqs[0].Query, "variables") != `{"locationPrefix":"bath"}` {
		t.Fatalf("first call's requests %+v", paths(reqs))
	}
	s := reqs[1]
	if s.Path != "/for-sale/property/bath/" || first(s.Query, "q") != "Bath, Somerset" || s.Header.Get(pages.ForwardedHostHeader) != "" ||
		!strings.Contains(s.Header.Get("accept"), "text/html") || s.Header.Get("accept-language") != "en-GB,en;q=0.9" {
		t.Fatalf("search request %s %v %v", s.Path, s.Query, s.Header)
	}
	if loc := data["location"].(map[string]any); loc["identifier"] != "bath" || loc["name"] != "Bath, Somerset" {
		t.Fatalf("location %v", loc)
	}
	if u.Memory.Kept != 1 {
		t.Fatalf("kept %d resolutions", u.Memory.Kept)
	}

	n := len(u.Replay.Requests())
	again := u.Serve(t, search, "location=%20%20BATH%20")
	if again.Fault != nil {
		t.Fatal(again.Fault)
	}
	if got := since(u, n); len(got) != 1 || got[0].Path != "/for-sale/property/bath/" || first(got[0].Query, "q") != "Bath, Somerset" {
		t.Fatalf("second call's requests %v; want the search page only", paths(got))
	}
	adaptertest.MatchesGolden(t, search, again, zoopla.Name, "search-bath")
}

// An identifier from property_portal/locations skips the typeahead.
func TestSearchByIdentifier(t *testing.T) {
	u := direct(t, nil)
	out := u.Serve(t, search, "identifier=bath&label=Bath,+Somerset")
	adaptertest.MatchesGolden(t, search, out, zoopla.Name, "search-bath")
	if reqs := u.Replay.Requests(); len(reqs) != 1 || reqs[0].Path != "/for-sale/property/bath/" {
		t.Fatalf("requests %v", paths(reqs))
	}
	if u.Memory.Kept != 0 {
		t.Fatal("an identifier was remembered")
	}
}

func TestSearchMapping(t *testing.T) {
	u := direct(t, nil)
	data := u.Data(t, search, "identifier=bath&label=Bath,+Somerset", "search-bath")
	if data["count"] != 3.0 || data["total"] != 61.0 || data["page"] != 1.0 || data["pages"] != 3.0 || data["has_more"] != true ||
		data["cursor"] != nil || data["channel"] != "for-sale" {
		t.Fatalf("list fields %v", data)
	}
	wantWarnings(t, data, "outside the searched area")
	items := adaptertest.Items(t, data)
	a := items[0]
	if a["id"] != "67012345" || a["platform"] != "property_portal" || a["type"] != "listing" || a["currency"] != "GBP" ||
		a["price"] != 695000.0 || a["price_label"] != "£695,000" || a["price_qualifier"] != "Guide price" || a["short_price"] != "£695k" ||
		a["bedrooms"] != 4.0 || a["bathrooms"] != 2.0 || a["living_rooms"] != 2.0 || a["property_type"] != "semi_detached" ||
		a["listed_on"] != "2026-09-26" || a["premium"] != true || a["price_drop"] != false || a["under_offer"] != false ||
		a["flag"] != "Just added" || a["url"] != "https://www.zoopla.co.uk/for-sale/details/67012345/" ||
		a["image_url"] != "https://lid.zoocdn.com/645/430/3f1a0c2b9d.jpg" || a["image_count"] != 24.0 ||
		a["floorplan_count"] != 1.0 || a["video_count"] != 0.0 {
		t.Fatalf("first listing %v", a)
	}
	if fa := a["floor_area"].(map[string]any); fa["value"] != 1650.0 || fa["units"] != "sq_ft" || fa["label"] != "1,650 sq. ft" || fa["source"] != "agent" {
		t.Fatalf("floor area %v", fa)
	}
	if ag := a["agent"].(map[string]any); ag["id"] != "98765" || ag["name"] != "Avon Homes - Bath" || ag["phone"] != "01225 000 111" ||
		ag["url"] != "https://www.zoopla.co.uk/find-agents/branch/avon-homes-bath-98765/" || ag["logo_url"] == nil {
		t.Fatalf("agent %v", ag)
	}
	if tags := a["tags"].([]any); len(tags) != 2 || tags[0] != "Chain free" {
		t.Fatalf("tags %v", tags)
	}
	if imgs := a["images"].([]any); len(imgs) != 2 || len(a["highlights"].([]any)) != 2 || len(a["transports"].([]any)) != 1 {
		t.Fatalf("images %v, highlights %v, transports %v", imgs, a["highlights"], a["transports"])
	}
	// A price shown only as text keeps its text and a null number; a
	// numeric id stays its digits.
	b := items[1]
	if b["id"] != "67011111" || b["price"] != nil || b["price_label"] != "POA" || b["price_drop"] != true || b["under_offer"] != true ||
		b["living_rooms"] != nil || b["listed_on"] != "2026-07-02" {
		t.Fatalf("second listing %v", b)
	}
	if fa := b["floor_area"].(map[string]any); fa["value"] != 850.0 || fa["units"] != "sq_ft" || fa["source"] != "epc" || fa["label"] != nil {
		t.Fatalf("floor area from sizeSqft %v", fa)
	}
	c := items[2]
	if c["price"] != 325000.0 || c["price_qualifier"] != "Offers over" || c["agent"] != nil || c["floor_area"] != nil || c["price_drop"] != nil ||
		c["image_url"] != "https://lid.zoocdn.com/u/2400/1800/d00d0003.jpg" || len(c["images"].([]any)) != 1 {
		t.Fatalf("third listing %v", c)
	}
	featured := data["featured"].([]any)
	extended := data["extended"].([]any)
	if len(featured) != 1 || featured[0].(map[string]any)["id"] != "65550000" || featured[0].(map[string]any)["price_drop"] != false ||
		len(extended) != 1 || extended[0].(map[string]any)["id"] != "64440000" {
		t.Fatalf("featured %v, extended %v", featured, extended)
	}
}

// Every spec 4.7 parameter reaches the site in its own form.
func TestParameterMapping(t *testing.T) {
	u := direct(t, nil)
	q := "identifier=bath&label=Bath,+Somerset&page=3&radius=0.25&min_price=250000&max_price=700000&min_bedrooms=2&max_bedrooms=4" +
		"&min_bathrooms=1&max_bathrooms=3&property_type=semi_detached,flats,farms_land&sort=most_reduced&keywords=garden+room" +
		"&must_have=has_garden,has_parking_garage&features=has_balcony_terrace,has_garden&added=7&include_sold=true" +
		"&new_homes=exclude&retirement_homes=only&auction=exclude&shared_ownership=include&show_only=chainFree,reducedPriceOnly" +
		"&ownership=freehold,share_of_freehold"
	data := u.Data(t, search, q, "search-bath-page3")
	got := u.LastRequest(t).Query
	want := map[string][]string{
		"q": {"Bath, Somerset"}, "search_source": {"for-sale"}, "pn": {"3"}, "radius": {"0.25"},
		"price_min": {"250000"}, "price_max": {"700000"}, "beds_min": {"2"}, "beds_max": {"4"}, "baths_min": {"1"}, "baths_max": {"3"},
		"property_sub_type": {"semi_detached", "flats", "farms_land"}, "results_sort": {"most_reduced"}, "keywords": {"garden room"},
		"feature": {"has_garden", "has_parking_garage", "has_balcony_terrace"}, "added": {"7_days"}, "include_sold": {"true"},
		"new_homes": {"exclude"}, "is_retirement_home": {"true"}, "is_auction": {"false"},
		"chain_free": {"true"}, "reduced_price_only": {"true"}, "tenure": {"freehold", "share_of_freehold"},
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Errorf("%s = %q; want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("query %v has parameters beyond %v (shared_ownership=include is the default and not sent)", got, want)
	}
	if data["page"] != 3.0 || data["pages"] != 3.0 || data["has_more"] != false || data["count"] != 1.0 {
		t.Fatalf("last page %v", data)
	}
	wantWarnings(t, data, "No listing states a floor area")

	for _, sort := range [][2]string{{"newest", "newest_listings"}, {"highest_price", "highest_price"}, {"lowest_price", "lowest_price"}} {
		u.Serve(t, search, "identifier=bath&sort="+sort[0])
		if got := first(u.LastRequest(t).Query, "results_sort"); got != sort[1] {
			t.Errorf("sort %s sent %q", sort[0], got)
		}
	}
	for added, want := range map[string]string{"1": "24_hours", "3": "3_days", "14": "14_days", "30": "30_days"} {
		u.Serve(t, search, "identifier=bath&added="+added)
		if got := first(u.LastRequest(t).Query, "added"); got != want {
			t.Errorf("added %s sent %q", added, got)
		}
	}
	u.Serve(t, search, "identifier=bath&new_homes=only&include_sold=false&shared_ownership=only")
	if q := u.LastRequest(t).Query; first(q, "new_homes") != "only" || first(q, "include_sold") != "false" || first(q, "is_shared_ownership") != "true" {
		t.Errorf("flags %v", q)
	}
}

func TestPageBeyondTheLast(t *testing.T) {
	u := direct(t, nil)
	data := u.Data(t, search, "identifier=bath&page=9", "search-bath-beyond")
	if data["count"] != 0.0 || data["has_more"] != false || data["page"] != 9.0 {
		t.Fatalf("beyond %v", data)
	}
	wantWarnings(t, data, "beyond the last page")
}

// An older pages-router page (__NEXT_DATA__) reads the same; a search the
// portal caps says so.
func TestNextDataPageAndCap(t *testing.T) {
	u := direct(t, nil)
	data := u.Data(t, search, "identifier=london/ealing&label=Ealing,+London", "search-ealing")
	if u.LastRequest(t).Path != "/for-sale/property/london/ealing/" {
		t.Fatalf("path %s", u.LastRequest(t).Path)
	}
	if data["count"] != 1.0 || data["total"] != 1250.0 || data["pages"] != 40.0 || data["has_more"] != true {
		t.Fatalf("list fields %v", data)
	}
	if f, e := data["featured"].([]any), data["extended"].([]any); len(f) != 0 || len(e) != 0 {
		t.Fatalf("featured %v, extended %v", f, e)
	}
	wantWarnings(t, data, "only the first pages", "No listing states a floor area")
}

// Listings typed by GraphQL, as 2022 pages carried them, read the same in
// both page forms: every listing has a priceDrop object, and one of only
// __typename and empty fields is no drop; __typename never reaches the
// data; otherPropertyImages is the gallery, after the main image.
func TestTypedListings(t *testing.T) {
	for _, c := range []struct{ query, golden, path string }{
		{"identifier=glasgow&label=Glasgow", "search-glasgow-2022-next-data", "/for-sale/property/glasgow/"},
		{"identifier=glasgow/shawlands&label=Shawlands,+Glasgow", "search-shawlands-typed", "/for-sale/property/glasgow/shawlands/"},
	} {
		u := direct(t, nil)
		data := u.Data(t, search, c.query, c.golden)
		if u.LastRequest(t).Path != c.path {
			t.Fatalf("%s: path %s", c.golden, u.LastRequest(t).Path)
		}
		items := adaptertest.Items(t, data)
		if len(items) != 3 {
			t.Fatalf("%s: %d items", c.golden, len(items))
		}
		for i, want := range []bool{false, true, false} {
			if items[i]["price_drop"] != want {
				t.Errorf("%s: listing %v price_drop %v; want %v", c.golden, items[i]["id"], items[i]["price_drop"], want)
			}
		}
		a := items[0]
		if imgs, _ := a["images"].([]any); len(imgs) != 3 || imgs[0] != a["image_url"] || imgs[1] != "https://lid.zoocdn.com/645/430/a1c0ffee02.jpg" {
			t.Errorf("%s: images %v", c.golden, a["images"])
		}
		tr, _ := a["transports"].([]any)
		if len(tr) != 2 {
			t.Fatalf("%s: transports %v", c.golden, a["transports"])
		}
		first := tr[0].(map[string]any)
		if _, ok := first["__typename"]; ok || first["title"] != "Hillhead" {
			t.Errorf("%s: transport %v", c.golden, first)
		}
		if _, ok := first["features"].(map[string]any)["__typename"]; ok {
			t.Errorf("%s: transport features %v", c.golden, first["features"])
		}
	}
}

// Spec 4.7 requires no parameter: without an area the search is the
// site's nationwide one, which the portal caps.
func TestNationwideSearch(t *testing.T) {
	u := direct(t, nil)
	data := u.Data(t, search, "", "search-uk")
	req := u.LastRequest(t)
	if len(u.Replay.Requests()) != 1 || req.Path != "/for-sale/property/uk/" || first(req.Query, "q") != "UK" {
		t.Fatalf("requests %v, query %v", paths(u.Replay.Requests()), req.Query)
	}
	if loc := data["location"].(map[string]any); loc["identifier"] != "uk" || loc["name"] != "UK" {
		t.Fatalf("location %v", loc)
	}
	if data["total"] != 412345.0 || data["pages"] != 40.0 || data["has_more"] != true || data["count"] != 2.0 {
		t.Fatalf("list fields %v", data)
	}
	wantWarnings(t, data, "only the first pages")
}

func TestEmptySearch(t *testing.T) {
	u := direct(t, nil)
	data := u.Data(t, search, "identifier=little-nowhere", "search-empty")
	if items, ok := data["items"].([]any); !ok || len(items) != 0 || data["count"] != 0.0 || data["total"] != 0.0 || data["has_more"] != false {
		t.Fatalf("empty %v", data)
	}
	if loc := data["location"].(map[string]any); loc["identifier"] != "little-nowhere" || loc["name"] != nil {
		t.Fatalf("location %v", loc)
	}
	wantWarnings(t, data)
}

// The typeahead's first area that is not a school catchment is taken.
func TestResolutionSkipsSchools(t *testing.T) {
	u := direct(t, nil)
	out := u.Serve(t, search, "location=Old+Town")
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	if req := u.LastRequest(t); req.Path != "/for-sale/property/station/old-town/" || first(req.Query, "q") != "Old Town Station, Swindon" {
		t.Fatalf("search %s %v", req.Path, req.Query)
	}
}

// Text the typeahead does not know is the caller's to fix (422), and an
// identifier that is not one is refused before any request.
func TestUnusableLocations(t *testing.T) {
	u := direct(t, nil)
	f := u.Fault(t, search, "location=zzqx+nowhere", upstream.InvalidParameter).Fault
	if f.Field != "location" || f.Code != "unknown_location" {
		t.Fatalf("unknown text %+v", f)
	}
	if reqs := u.Replay.Requests(); len(reqs) != 1 || reqs[0].Path != "/graphql" {
		t.Fatalf("requests %v; want the typeahead only", paths(reqs))
	}
	if u.Memory.Kept != 0 {
		t.Fatal("an unknown location was remembered")
	}
	n := len(u.Replay.Requests())
	for _, id := range []string{"../admin", "bath%3Fx=1", "Bath Spa", "a//b"} {
		if f := u.Fault(t, search, "identifier="+id, upstream.InvalidParameter).Fault; f.Field != "identifier" {
			t.Fatalf("identifier %s: %+v", id, f)
		}
	}
	if got := since(u, n); len(got) != 0 {
		t.Fatalf("requests %v; want none", paths(got))
	}
}

func TestSearchFaults(t *testing.T) {
	u := direct(t, nil)
	u.Fault(t, search, "identifier=nowhere-at-all", upstream.NotFound)
	f := u.Fault(t, search, "identifier=changed-town", upstream.Malformed).Fault
	if !strings.Contains(f.Reason, "__NEXT_DATA__") || !strings.Contains(f.Reason, "-byte page") || strings.Contains(f.Reason, "4 bed") {
		t.Fatalf("changed shape %q", f.Reason)
	}
	if f := u.Fault(t, search, "identifier=blocked-town", upstream.Rejected).Fault; !strings.Contains(f.Reason, "block or challenge") {
		t.Fatalf("blocked %+v", f)
	}
	u.Fault(t, search, "identifier=down-town", upstream.ServerError)
	// The typeahead's own faults end a search by text the same way.
	u.Fault(t, search, "location=refused", upstream.Rejected)
	// Last: a 429 rests the route for the wait the site gives.
	if f := u.Fault(t, search, "identifier=busy-town", upstream.RateLimited).Fault; f.RetryAfter != 120*time.Second {
		t.Fatalf("rate limited %+v", f)
	}
	if out := u.Serve(t, search, "identifier=bath"); out.Fault != nil || out.Skipped < 110*time.Second {
		t.Fatalf("after a 429: fault %v, skipped %v; want the route resting", out.Fault, out.Skipped)
	}
}

// The routes in the integrator's order: a block on the site fails over to
// Zyte API, a Zyte ban to ScraperAPI, and a block everywhere fails typed.
func TestFailover(t *testing.T) {
	site := zoopla.Site()
	providers := []*upstream.Provider{pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}
	u := adaptertest.StartRoutes(t, providers, nil, adaptertest.Options)

	out := u.Serve(t, search, "identifier=blocked-town&label=Blocked+Town,+Kent")
	if out.Fault != nil || out.Trace.ServedBy != pages.ZyteName {
		t.Fatalf("blocked direct: served by %q, fault %v", out.Trace.ServedBy, out.Fault)
	}
	if l := out.Trace.Legs[0]; l.ServedBy != zoopla.Name || l.Fault != upstream.Rejected || l.Status != 403 {
		t.Fatalf("direct leg %+v", l)
	}
	if d := out.Data.(zoopla.Result); d.Count != 3 || d.Items[0].ID != "67012345" || d.Location.Identifier != "blocked-town" {
		t.Fatalf("Zyte data %+v", d)
	}
	var body map[string]any
	if err := json.Unmarshal(u.LastRequest(t).Body, &body); err != nil || body["geolocation"] != "GB" {
		t.Fatalf("Zyte API request %v (%v)", body, err)
	}

	out = u.Serve(t, search, "identifier=walled-town")
	if out.Fault != nil || out.Trace.ServedBy != pages.ScraperAPIName {
		t.Fatalf("Zyte ban: served by %q, fault %v", out.Trace.ServedBy, out.Fault)
	}
	if q := u.LastRequest(t).Query; first(q, "country_code") != "gb" {
		t.Fatalf("ScraperAPI request %v", q)
	}

	out = u.Serve(t, search, "identifier=fenced-town")
	if out.Fault == nil || out.Fault.Kind != upstream.Rejected || len(out.Trace.Legs) != 3 {
		t.Fatalf("blocked everywhere: fault %v, legs %+v", out.Fault, out.Trace.Legs)
	}
}

// On an unblocking service the typeahead goes through the service too
// (the API's host, as a URL), and its answer is remembered there.
func TestResolutionThroughZyte(t *testing.T) {
	p := pages.Zyte(zoopla.Site())
	u := adaptertest.StartRoutes(t, []*upstream.Provider{p}, nil, adaptertest.Options)
	out := u.Serve(t, search, "location=Blocked+Town")
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	reqs := u.Replay.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests %v", paths(reqs))
	}
	var ty, pg map[string]any
	_ = json.Unmarshal(reqs[0].Body, &ty)
	_ = json.Unmarshal(reqs[1].Body, &pg)
	if !strings.HasPrefix(ty["url"].(string), "https://"+zoopla.GraphQLHost+"/graphql?") ||
		pg["url"] != "https://www.zoopla.co.uk/for-sale/property/blocked-town/?q=Blocked+Town%2C+Kent&search_source=for-sale" {
		t.Fatalf("Zyte targets %v / %v", ty["url"], pg["url"])
	}
	n := len(u.Replay.Requests())
	if out := u.Serve(t, search, "location=blocked+town"); out.Fault != nil || len(since(u, n)) != 1 {
		t.Fatalf("second search: %v, requests %v", out.Fault, paths(since(u, n)))
	}
}

// A route as pages builds it resolves text itself (no wiring step), and
// an identifier needs no typeahead.
func TestPlainRoute(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(zoopla.Site()), nil)
	if out := u.Serve(t, search, "location=Bath"); out.Fault != nil {
		t.Fatal(out.Fault)
	}
	adaptertest.MatchesGolden(t, search, u.Serve(t, search, "identifier=bath&label=Bath,+Somerset"), zoopla.Name, "search-bath")
}

// The operator's key is the direct route's only, and optional.
func TestKeyOnTheDirectRouteOnly(t *testing.T) {
	p := pages.Direct(zoopla.Site())
	if len(p.Secrets) != 1 || p.Secrets[0].Name != zoopla.KeySecret || p.Secrets[0].Required {
		t.Fatalf("secrets: zoopla %v", p.Secrets)
	}
	for _, svc := range []*upstream.Provider{pages.Zyte(zoopla.Site()), pages.ScraperAPI(zoopla.Site())} {
		if slices.ContainsFunc(svc.Secrets, func(s upstream.Secret) bool { return s.Name == zoopla.KeySecret }) {
			t.Fatalf("a service route carries the site's key: %v", svc.Secrets)
		}
	}
}

func paths(reqs []replay.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Provider + " " + r.Method + " " + r.Path
	}
	return out
}

func first(q url.Values, k string) string {
	if len(q[k]) == 0 {
		return ""
	}
	return q[k][0]
}

// wantWarnings requires data's _warnings to hold one line per fragment,
// in order, each containing it; no fragments means no _warnings at all.
func wantWarnings(t *testing.T, data map[string]any, fragments ...string) {
	t.Helper()
	got, _ := data["_warnings"].([]any)
	if _, present := data["_warnings"]; present && len(fragments) == 0 {
		t.Fatalf("_warnings %v; want none", data["_warnings"])
	}
	if len(got) != len(fragments) {
		t.Fatalf("_warnings %v; want %d lines", got, len(fragments))
	}
	for i, f := range fragments {
		if line, _ := got[i].(string); !strings.Contains(line, f) {
			t.Errorf("_warnings[%d] = %q; want it to contain %q", i, got[i], f)
		}
	}
}
