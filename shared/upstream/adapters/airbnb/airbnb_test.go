package airbnb_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/airbnb"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

const endpoint = airbnb.Endpoint

// key is the operator's key in these tests: it must reach the site and
// never a fault's reason.
const key = "operator-test-key-5c1e"

func start(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.Start(t, airbnb.Provider(), map[string]string{airbnb.KeySecret: key})
}

func q(query string, extra ...string) string {
	v := url.Values{"query": {query}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v.Encode()
}

func TestLisbon(t *testing.T) {
	u := start(t)
	data := u.Data(t, endpoint, q("  Lisbon "), "autocomplete-lisbon")
	r := u.LastRequest(t)
	if r.Method != "GET" || r.Path != airbnb.AutocompletePath {
		t.Fatalf("request %s %s", r.Method, r.Path)
	}
	want := map[string]string{
		"user_input": "Lisbon", "num_results": "10", "locale": "en", "language": "en", "currency": "USD", "country": "US",
		"key": key, "api_version": "1.2.0", "vertical_refinement": "homes", "region": "-1",
		"options": "should_filter_by_vertical_refinement|hide_nav_results|should_show_stays|simple_search",
	}
	for k, v := range want {
		if got := url.Values(r.Query).Get(k); got != v {
			t.Errorf("query %s = %q, want %q", k, got, v)
		}
	}
	if r.Header.Get("X-Airbnb-API-Key") != key || !strings.Contains(r.Header.Get("accept"), "application/json") ||
		r.Header.Get("sec-fetch-mode") != "cors" || !strings.Contains(r.Header.Get("user-agent"), "Chrome/") {
		t.Errorf("headers %v", r.Header)
	}
	items := adaptertest.Items(t, data)
	if len(items) != 4 || data["count"] != 4.0 || data["dropped"] != 1.0 || data["query"] != "Lisbon" {
		t.Fatalf("data %v", data)
	}
	if items[0]["display_name"] != "Lisbon, Portugal" || items[0]["map_place_id"] != "ChIJsampleLisbonCity00001" ||
		items[0]["country_code"] != "PT" || items[0]["name"] != "Lisbon, Portugal" || items[0]["suggestion_type"] != "LOCATION" {
		t.Errorf("first %v", items[0])
	}
	// A lower-case country code is the ISO code all the same.
	if items[1]["country_code"] != "PT" {
		t.Errorf("second %v", items[1])
	}
	// A numeric id keeps its digits; an empty name is null; the place id
	// comes from the search parameters when the location has none.
	if items[2]["id"] != "1234567890123456789" || items[2]["name"] != nil || items[2]["map_place_id"] != "ChIJsampleLisbonMaine0001" ||
		items[2]["subtitle"] != nil {
		t.Errorf("third %v", items[2])
	}
	if w, _ := data["_warnings"].([]any); len(w) != 1 || w[0] != airbnb.WarnDropped {
		t.Errorf("warnings %v", data["_warnings"])
	}
	// Five terms answered ten asked for: the whole list.
	if data["has_more"] != false {
		t.Errorf("has_more %v", data["has_more"])
	}
}

// limit caps the rows; a full page may have more, which the source does
// not say.
func TestLimitAndLocale(t *testing.T) {
	u := start(t)
	out := u.Serve(t, endpoint, q("Lisbon", "limit", "2", "language", "pt_pt"))
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	if err := schemas.Validate(endpoint, out.Data); err != nil {
		t.Fatal(err)
	}
	d := out.Data.(*airbnb.Locations)
	if d.Count != 2 || len(d.Items) != 2 || d.HasMore != nil {
		t.Errorf("data %+v", d)
	}
	qv := url.Values(u.LastRequest(t).Query)
	if qv.Get("num_results") != "2" || qv.Get("locale") != "pt-PT" || qv.Get("language") != "pt" || qv.Get("country") != "PT" {
		t.Errorf("query %v", qv)
	}
}

func TestNoMatches(t *testing.T) {
	data := start(t).Data(t, endpoint, q("zzqxv  nowhere"), "autocomplete-empty")
	if items := data["items"].([]any); len(items) != 0 || data["count"] != 0.0 || data["has_more"] != false || data["dropped"] != 0.0 {
		t.Errorf("data %v", data)
	}
	if _, ok := data["_warnings"]; ok {
		t.Errorf("warnings %v", data["_warnings"])
	}
}

// Any other text is answered by the default fixture in replay mode.
func TestDefaultFixture(t *testing.T) {
	data := start(t).Data(t, endpoint, q("Porto"), "autocomplete-default")
	if items := adaptertest.Items(t, data); len(items) != 1 || items[0]["display_name"] != "Porto, Portugal" {
		t.Errorf("items %v", items)
	}
}

func TestFaults(t *testing.T) {
	for _, c := range []struct {
		query  string
		kind   upstream.FaultKind
		status int
		want   string
	}{
		{"sample-invalid-key", upstream.Rejected, 401, "API key"},
		{"sample-429", upstream.RateLimited, 429, ""},
		{"sample-503", upstream.ServerError, 503, ""},
		{"sample-420", upstream.Rejected, 420, "refused"},
		{"sample-404", upstream.Malformed, 0, "moved"},
		{"sample-blocked", upstream.Rejected, 403, "block or challenge"},
		{"sample-changed", upstream.Malformed, 0, "no autocomplete_terms"},
		{"sample-malformed", upstream.Malformed, 0, "not JSON"},
		{"sample-error-200", upstream.Rejected, 200, "error object"},
	} {
		// A fresh route each: a rate limit rests the route it hit.
		out := start(t).Fault(t, endpoint, q(c.query), c.kind)
		f := out.Fault
		if f.Status != c.status || !strings.Contains(f.Reason, c.want) || strings.Contains(f.Reason, key) {
			t.Errorf("%s: %+v", c.query, f)
		}
	}
	// The site's wait is kept: the caller sees it, and the route rests for
	// it, so the next call does not reach the site.
	u := start(t)
	out := u.Fault(t, endpoint, q("sample-429"), upstream.RateLimited)
	if e := out.Error(); out.Fault.RetryAfter.Seconds() != 3 || e.Status != 429 || e.Header.Get("retry-after") != "3" {
		t.Errorf("retry-after %v, caller's error %d %v", out.Fault.RetryAfter, e.Status, e.Header)
	}
	before := len(u.Replay.Requests())
	if next := u.Serve(t, endpoint, q("Lisbon")); next.Skipped == 0 || len(u.Replay.Requests()) != before {
		t.Errorf("the resting route was asked: %+v", next)
	}
}

// Without the operator's key the endpoint has no route: 501, nothing asked.
func TestNoKeyNoRoute(t *testing.T) {
	p := airbnb.Provider()
	if len(p.Secrets) != 1 || p.Secrets[0].Name != airbnb.KeySecret || !p.Secrets[0].Required {
		t.Fatalf("secrets %+v", p.Secrets)
	}
	runner := upstream.NewRunner([]*upstream.Provider{p}, upstream.Settings{Options: adaptertest.Options})
	out := runner.Serve(context.Background(), endpoint, map[string]string{"query": "Lisbon", "limit": "10"})
	if e := out.Error(); e.Status != 501 {
		t.Errorf("status %d", e.Status)
	}
	// A service route, which carries no site key, refuses before fetching.
	z := adaptertest.Start(t, pages.Zyte(airbnb.Site()), map[string]string{pages.ZyteKeySecret: "zk"})
	out = z.Fault(t, endpoint, q("Lisbon"), upstream.Rejected)
	if len(z.Replay.Requests()) != 0 {
		t.Errorf("the service was asked: %+v", out)
	}
}

func TestQuery(t *testing.T) {
	if got := airbnb.Query("  New \t York  City "); got != "New York City" {
		t.Errorf("%q", got)
	}
}
