package harvestapi_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/harvestapi"
	"github.com/meridian-data/meridian/shared/upstream/adapters/lix"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const (
	searchEndpoint    = "professional_network/search-people"
	locationsEndpoint = "professional_network/locations"
	searchPath        = "/linkedin/profile-search"
	geoPath           = "/linkedin/geo-id-search"
)

// testKey must reach the provider as X-API-Key and never a fault's reason
// (the 403 fixture quotes it back).
const testKey = "sample-key-123"

// fixedNow is 2026-03-10T12:20:00Z: the provider's hourly allowance resets
// 40 minutes later.
var fixedNow = time.Date(2026, 3, 10, 12, 20, 0, 0, time.UTC)

func start(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	opts := adaptertest.Options
	opts.Now = func() time.Time { return fixedNow }
	// The provider's attempts may take 20 s, and a retry is made only when
	// the call's budget still holds half of one: a budget like a
	// deployment's lets retryable faults be retried here too.
	opts.Timeout = time.Minute
	return adaptertest.StartWith(t, harvestapi.Provider(), map[string]string{harvestapi.KeySecret: testKey}, opts)
}

// sent is the last request's single value of each query parameter, after
// checking its path and key.
func sent(t *testing.T, u *adaptertest.Upstream, path string) map[string]string {
	t.Helper()
	r := u.LastRequest(t)
	if r.Path != path {
		t.Fatalf("path %s; want %s", r.Path, path)
	}
	if got := r.Header.Get("X-API-Key"); got != testKey {
		t.Fatalf("X-API-Key = %q", got)
	}
	out := map[string]string{}
	for k, v := range r.Query {
		if len(v) != 1 {
			t.Fatalf("%s sent %d times: %v", k, len(v), v)
		}
		out[k] = v[0]
	}
	return out
}

func same(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("sent %v; want %v", got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("sent %s=%q; want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func warnings(data map[string]any) []string {
	var out []string
	for _, w := range data["_warnings"].([]any) {
		out = append(out, w.(string))
	}
	return out
}

func hasWarning(data map[string]any, part string) bool {
	for _, w := range warnings(data) {
		if strings.Contains(w, part) {
			return true
		}
	}
	return false
}

func TestSearchByQuery(t *testing.T) {
	u := start(t)
	data := u.Data(t, searchEndpoint, "query=Jane+Doe", "search-query")
	same(t, sent(t, u, searchPath), map[string]string{"search": "Jane Doe", "page": "1"})
	items := adaptertest.Items(t, data)
	if len(items) != 4 || data["count"] != 4.0 || data["total"] != 115.0 || data["has_more"] != true ||
		data["page"] != 1.0 || data["cursor"] != nil || data["query"] != "Jane Doe" {
		t.Fatalf("page: %v", data)
	}
	first := items[0]
	if first["id"] != "ACoAAB1sAmPlE0000000000000000000000000001" || first["handle"] != "jane-doe-sample" ||
		first["name"] != "Jane Doe" || first["url"] != "https://www.linkedin.com/in/jane-doe-sample" ||
		first["headline"] != "Head of Data at Example Analytics" || first["location"] != "Berlin, Berlin, Germany" ||
		first["avatar_url"] == nil {
		t.Errorf("first: %v", first)
	}
	for _, item := range items {
		// The search carries neither: unknown, not zero or false.
		if v, ok := item["followers"]; !ok || v != nil {
			t.Errorf("followers = %v (present %v)", v, ok)
		}
		if v, ok := item["verified"]; !ok || v != nil {
			t.Errorf("verified = %v (present %v)", v, ok)
		}
	}
	if items[1]["avatar_url"] != nil {
		t.Errorf("a profile without a photo: %v", items[1])
	}
	hidden := items[2]
	if hidden["name"] != nil || hidden["handle"] != nil || hidden["url"] != nil ||
		hidden["id"] != "ACoAAB1sAmPlE0000000000000000000000000003" || hidden["headline"] != "Software Engineer at Example Corp" {
		t.Errorf("anonymous member: %v", hidden)
	}
	// A numeric id keeps every digit; first and last names make the name;
	// a location written as text and a headline field are read too.
	loose := items[3]
	if loose["id"] != "123456789012345678901" || loose["name"] != "Jane Doe-Smith" || loose["headline"] != "Product designer" ||
		loose["location"] != "Toronto, Ontario, Canada" || loose["url"] != "https://www.linkedin.com/in/j-doe-7/" {
		t.Errorf("loosely written profile: %v", loose)
	}
	if !hasWarning(data, "followers and verified are null") || !hasWarning(data, "1 of the results is a member outside") {
		t.Errorf("warnings: %v", warnings(data))
	}
	for _, w := range warnings(data) {
		if strings.Contains(strings.ToLower(w), "linkedin") || strings.Contains(strings.ToLower(w), "harvest") {
			t.Errorf("a warning names the site or the source: %q", w)
		}
	}
}

func TestSearchFilters(t *testing.T) {
	u := start(t)
	want := map[string]string{"search": "engineer", "title": "Engineering Manager", "geoId": "103644278", "currentCompany": "1441",
		"pastCompany": "1035", "school": "1792", "industryId": "4", "page": "2"}
	data := u.Data(t, searchEndpoint, "query=engineer&title=Engineering+Manager&location=103644278&current_company=1441"+
		"&past_company=1035&school=1792&industry=4&page=2", "search-filters")
	same(t, sent(t, u, searchPath), want)
	if data["page"] != 2.0 || data["has_more"] != true || data["total"] != 27.0 || len(warnings(data)) != 1 {
		t.Errorf("page 2: %v", data)
	}
	// geocode_location is location's alias, folded by the registry; the
	// canonical name wins when both come.
	for _, loc := range []string{"geocode_location=103644278", "location=103644278&geocode_location=999"} {
		u.Serve(t, searchEndpoint, "query=engineer&title=Engineering+Manager&current_company=1441&past_company=1035"+
			"&school=1792&industry=4&page=2&"+loc)
		same(t, sent(t, u, searchPath), want)
	}
	// Ids written as URNs, and company and school pages, are ids too.
	u.Serve(t, searchEndpoint, "query=engineer&location=urn:li:geo:103644278&current_company=urn:li:fsd_company:1441"+
		"&past_company="+url.QueryEscape("https://www.linkedin.com/company/example-corp/")+
		"&school="+url.QueryEscape("https://www.linkedin.com/school/stanford-university/")+"&industry=urn:li:industry:4")
	same(t, sent(t, u, searchPath), map[string]string{"search": "engineer", "geoId": "103644278", "currentCompany": "1441",
		"pastCompany": "https://www.linkedin.com/company/example-corp/", "school": "https://www.linkedin.com/school/stanford-university/",
		"industryId": "4", "page": "1"})
}

func TestSearchTextFilters(t *testing.T) {
	u := start(t)
	data := u.Data(t, searchEndpoint, "query=jane&location=Berlin&current_company=Example+Analytics&school=Example+University",
		"search-text-filters")
	same(t, sent(t, u, searchPath), map[string]string{"search": "jane", "location": "Berlin",
		"keywordsCompany": "Example Analytics", "keywordsSchool": "Example University", "page": "1"})
	if !hasWarning(data, "location is not a location id") {
		t.Errorf("warnings: %v", warnings(data))
	}
}

// A search_url is decomposed into the same parameters: its keywords, its
// one value per filter and its text fields; the site's bookkeeping
// parameters are dropped.
func TestSearchURL(t *testing.T) {
	u := start(t)
	search := "https://www.linkedin.com/search/results/people/?keywords=data%20scientist&geoUrn=%5B%22101165590%22%5D" +
		"&schoolFilter=%5B%221792%22%5D&firstName=Priya&company=Example%20Bank&origin=FACETED_SEARCH&sid=a%2Cb"
	data := u.Data(t, searchEndpoint, "search_url="+url.QueryEscape(search), "search-url")
	same(t, sent(t, u, searchPath), map[string]string{"search": "data scientist", "geoId": "101165590", "school": "1792",
		"firstName": "Priya", "keywordsCompany": "Example Bank", "page": "1"})
	if data["count"] != 1.0 || data["has_more"] != false || data["query"] != "data scientist" {
		t.Errorf("data: %v", data)
	}

	cases := []struct {
		name, query string
		want        map[string]string
		warn        string
	}{
		{"every filter", "search_url=" + url.QueryEscape("https://uk.linkedin.com/search/results/people/?keywords=cto&geoUrn=%5B%22103644278%22%5D"+
			"&currentCompany=%5B%221441%22%5D&pastCompany=%5B%221035%22%5D&schoolFilter=%5B%221792%22%5D&industry=%5B%224%22%5D"+
			"&titleFreeText=VP&lastName=Doe&schoolFreetext=MIT&page=3"),
			map[string]string{"search": "cto", "geoId": "103644278", "currentCompany": "1441", "pastCompany": "1035", "school": "1792",
				"industryId": "4", "title": "VP", "lastName": "Doe", "keywordsSchool": "MIT", "page": "3"}, ""},
		{"the language filter is reported, not applied", "search_url=" + url.QueryEscape(
			"https://www.linkedin.com/search/results/people/?keywords=cto&profileLanguage=%5B%22de%22%5D"),
			map[string]string{"search": "cto", "page": "1"}, "profile-language filter"},
		{"the caller's parameters win over the URL's", "query=jane&location=101165590&page=5&title=CEO&search_url=" + url.QueryEscape(
			"https://www.linkedin.com/search/results/people/?keywords=cto&geoUrn=%5B%22103644278%22%5D&titleFreeText=VP&page=3"),
			map[string]string{"search": "jane", "geoId": "101165590", "title": "CEO", "page": "5"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := u.Serve(t, searchEndpoint, tc.query)
			if out.Fault != nil {
				t.Fatalf("fault %v", out.Fault)
			}
			same(t, sent(t, u, searchPath), tc.want)
			ws := out.Data.(harvestapi.People).Warnings
			found := tc.warn == ""
			for _, w := range ws {
				found = found || strings.Contains(w, tc.warn)
			}
			if !found {
				t.Errorf("warnings %v lack %q", ws, tc.warn)
			}
		})
	}
}

// The adapter refuses a search_url spec 4.6 refuses even if validation
// never ran (the registry's rule refuses it first, before any charge),
// and sends nothing.
func TestSearchURLRefusedBeforeAnyRequest(t *testing.T) {
	for reason, search := range map[string]string{
		registry.ReasonMultipleValues:  "https://www.linkedin.com/search/results/people/?keywords=cto&geoUrn=%5B%221%22%2C%222%22%5D",
		registry.ReasonNetworkFilter:   "https://www.linkedin.com/search/results/people/?keywords=cto&network=%5B%22F%22%5D",
		registry.ReasonPremiumSearch:   "https://www.linkedin.com/sales/search/people?query=(keywords%3Acto)",
		registry.ReasonMissingKeywords: "https://www.linkedin.com/search/results/people/?geoUrn=%5B%22103644278%22%5D",
	} {
		u := start(t)
		out := u.Runner.Serve(context.Background(), searchEndpoint, map[string]string{"search_url": search})
		if out.Fault == nil || out.Fault.Kind != upstream.InvalidParameter || out.Fault.Field != "search_url" || out.Fault.Code != reason {
			t.Errorf("%s: %+v", reason, out.Fault)
		}
		if n := len(u.Replay.Requests()); n != 0 {
			t.Errorf("%s: %d requests", reason, n)
		}
	}
}

// Validation refuses such a URL with 422 naming the field and the reason,
// before any charge or source call, and a URL of another site as
// wrong_host. Until the catalogue attaches the rule and the hosts to
// search_url, the test attaches them itself (as the catalogue will:
// .OnHosts("linkedin.com").Checked(peopleSearchURLRule), the rule being
// ReadPeopleSearchURL's verdict).
func TestSearchURLRefusedByValidation(t *testing.T) {
	e, _ := registry.Default().Endpoint(searchEndpoint)
	p, ok := e.Lookup("search_url")
	if !ok {
		t.Fatal("search-people has no search_url")
	}
	if p.Check == nil || len(p.Hosts) == 0 {
		check, hosts := p.Check, p.Hosts
		t.Cleanup(func() { p.Check, p.Hosts = check, hosts })
		p.Hosts = []string{"linkedin.com"}
		p.Check = func(v string) (string, string) {
			_, reason, message := registry.ReadPeopleSearchURL(v)
			return reason, message
		}
	}
	for raw, reason := range map[string]string{
		"https://www.linkedin.com/search/results/people/?keywords=cto&industry=%5B%224%22%2C%2296%22%5D": registry.ReasonMultipleValues,
		"https://www.linkedin.com/search/results/people/?industry=%5B%224%22%5D":                         registry.ReasonMissingKeywords,
		"https://www.linkedin.com/sales/search/people?query=(keywords%3Acto)":                            registry.ReasonPremiumSearch,
		"https://www.linkedin.com/search/results/people/?keywords=cto&network=%5B%22F%22%5D":             registry.ReasonNetworkFilter,
		"https://www.example.com/search/results/people/?keywords=cto":                                    "wrong_host",
	} {
		_, verr := params.Validate(e, url.Values{"search_url": {raw}}, nil)
		if verr == nil || verr.Status != 422 || verr.Details["field"] != "search_url" || verr.Details["reason"] != reason {
			t.Errorf("%s: %+v; want 422 %s", raw, verr, reason)
		}
	}
	res, verr := params.Validate(e, url.Values{"search_url": {"https://www.linkedin.com/search/results/people/?keywords=cto"}}, nil)
	if verr != nil || res.Values["search_url"] == "" {
		t.Errorf("a valid search_url: %+v", verr)
	}
}

func TestIdsTheSourceCannotMatchAsText(t *testing.T) {
	for field, query := range map[string]string{
		"past_company": "query=jane&past_company=Example+Corp",
		"industry":     "query=jane&industry=software",
	} {
		u := start(t)
		out := u.Fault(t, searchEndpoint, query, upstream.InvalidParameter)
		if out.Fault.Field != field || len(u.Replay.Requests()) != 0 {
			t.Errorf("%s: field %q, %d requests", field, out.Fault.Field, len(u.Replay.Requests()))
		}
	}
}

func TestSearchEmptyAndLastPage(t *testing.T) {
	u := start(t)
	empty := u.Data(t, searchEndpoint, "query=zzqx+nobody+matches", "search-empty")
	if len(adaptertest.Items(t, empty)) != 0 || empty["count"] != 0.0 || empty["has_more"] != false || empty["total"] != 0.0 {
		t.Fatalf("empty: %v", empty)
	}
	last := u.Data(t, searchEndpoint, "query=Jane+Doe&page=12", "search-last-page")
	if last["has_more"] != false || last["page"] != 12.0 || last["count"] != 1.0 {
		t.Fatalf("last page: %v", last)
	}
}

func TestErrors(t *testing.T) {
	untilHour := 40 * time.Minute
	cases := []struct {
		name, endpoint, query string
		kind                  upstream.FaultKind
		status                int
		retryAfter            time.Duration
		attempts              int
	}{
		{"bad key", searchEndpoint, "query=sample-401", upstream.Rejected, 401, 0, 1},
		{"disabled key", searchEndpoint, "query=sample-403", upstream.Rejected, 403, 0, 1},
		{"credits spent", searchEndpoint, "query=sample-402", upstream.RateLimited, 402, time.Hour, 1},
		{"rate limited", searchEndpoint, "query=sample-429", upstream.RateLimited, 429, 30 * time.Second, 1},
		{"accounts out of their hourly allowance", searchEndpoint, "query=sample-no-resource", upstream.RateLimited, 429, untilHour, 1},
		{"the same, answered 200", searchEndpoint, "query=sample-no-resource-200", upstream.RateLimited, 429, untilHour, 1},
		{"server error", searchEndpoint, "query=sample-500", upstream.ServerError, 500, 0, 3},
		{"unavailable", searchEndpoint, "query=sample-503", upstream.ServerError, 503, 0, 3},
		{"404 to a search", searchEndpoint, "query=sample-404", upstream.Rejected, 404, 0, 1},
		{"bad request", searchEndpoint, "query=sample-400", upstream.Rejected, 400, 0, 1},
		{"cut short", searchEndpoint, "query=sample-malformed", upstream.Malformed, 0, 0, 1},
		{"no elements", searchEndpoint, "query=sample-no-elements", upstream.Malformed, 0, 0, 1},
		{"only an error", searchEndpoint, "query=sample-error-only", upstream.Malformed, 0, 0, 1},
		{"changed shape", searchEndpoint, "query=sample-changed-shape", upstream.Malformed, 0, 0, 1},
		{"an element that is not a profile", searchEndpoint, "query=sample-bad-element", upstream.Malformed, 0, 0, 1},
		{"connection reset", searchEndpoint, "query=sample-reset", upstream.Transport, 0, 0, 3},
		{"lookup bad key", locationsEndpoint, "query=sample-401", upstream.Rejected, 401, 0, 1},
		{"lookup changed shape", locationsEndpoint, "query=sample-malformed", upstream.Malformed, 0, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := start(t)
			out := u.Fault(t, tc.endpoint, tc.query, tc.kind)
			if out.Fault.Status != tc.status || out.Fault.RetryAfter != tc.retryAfter {
				t.Errorf("status %d retry %v; want %d %v (%v)", out.Fault.Status, out.Fault.RetryAfter, tc.status, tc.retryAfter, out.Fault)
			}
			if out.Trace.Attempts != tc.attempts {
				t.Errorf("attempts %d; want %d", out.Trace.Attempts, tc.attempts)
			}
			if strings.Contains(out.Fault.Error(), testKey) {
				t.Errorf("the key leaked into the fault: %v", out.Fault)
			}
			// The caller's error names neither the source nor the site.
			e := out.Error()
			if m := strings.ToLower(e.Message); strings.Contains(m, "harvest") || strings.Contains(m, "linkedin") {
				t.Errorf("caller's message names the source: %q", e.Message)
			}
		})
	}
}

func TestLocations(t *testing.T) {
	u := start(t)
	data := u.Data(t, locationsEndpoint, "query=Berlin", "locations-berlin")
	same(t, sent(t, u, geoPath), map[string]string{"search": "Berlin"})
	items := adaptertest.Items(t, data)
	if len(items) != 5 || data["count"] != 5.0 || data["has_more"] != false || data["query"] != "Berlin" {
		t.Fatalf("locations: %v", data)
	}
	// A suggestion without an id is left out; a numeric id stays a string
	// of its digits; an id written as a URN is its number.
	if items[0]["id"] != "106967730" || items[0]["name"] != "Berlin, Germany" || items[3]["id"] != "104367812" ||
		items[4]["id"] != "90009790" {
		t.Errorf("items: %v", items)
	}
	limited := u.Data(t, locationsEndpoint, "query=Berlin&limit=2", "locations-limit")
	if len(adaptertest.Items(t, limited)) != 2 || limited["has_more"] != true {
		t.Errorf("limit 2: %v", limited)
	}
	empty := u.Data(t, locationsEndpoint, "query=Nowhereville+Zzqx", "locations-empty")
	if len(adaptertest.Items(t, empty)) != 0 || empty["has_more"] != false {
		t.Errorf("empty: %v", empty)
	}
}

// Locations has a second route, the typeahead provider: when this one
// fails, the call fails over to it, as a deployment with both keys would.
func TestLocationsFailOver(t *testing.T) {
	opts := adaptertest.Options
	opts.Timeout = time.Minute
	u := adaptertest.StartRoutes(t, []*upstream.Provider{harvestapi.Provider(), lix.Provider()},
		map[string]string{harvestapi.KeySecret: testKey, lix.KeySecret: "sample-lix-key"}, opts)
	out := u.Serve(t, locationsEndpoint, "query=Munich")
	if out.Fault != nil || out.Trace.ServedBy != "lix_api" || len(out.Trace.Legs) != 2 ||
		out.Trace.Legs[0].Fault != upstream.ServerError || out.Trace.Legs[0].Attempts != 3 {
		t.Fatalf("outcome %+v, trace %+v", out.Fault, out.Trace)
	}
	if items := out.Data.(lix.Lookup).Items; len(items) == 0 || *items[0].ID == "" {
		t.Errorf("data %+v", out.Data)
	}
}
