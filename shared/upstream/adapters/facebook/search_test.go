package facebook_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/facebook"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

// rapidKey must reach RapidAPI as X-RapidAPI-Key and never a fault's reason.
const rapidKey = "9f3c0sampleRapidKeyd41e7msh"

func searchRoute(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, facebook.SearchProvider(), map[string]string{facebook.RapidAPIKeySecret: rapidKey}, options())
}

// sent checks the request's path and headers and returns its query.
func sent(t *testing.T, u *adaptertest.Upstream, path string) url.Values {
	t.Helper()
	r := u.LastRequest(t)
	if r.Path != path || r.Method != "GET" {
		t.Fatalf("request %s %s", r.Method, r.Path)
	}
	if r.Header.Get("X-RapidAPI-Key") != rapidKey || r.Header.Get("X-RapidAPI-Host") != "facebook-scraper3.p.rapidapi.com" {
		t.Fatalf("headers %v", r.Header)
	}
	return url.Values(r.Query)
}

func TestPeopleSearch(t *testing.T) {
	u := searchRoute(t)
	d := u.Data(t, facebook.PeopleSearchEndpoint, "query="+url.QueryEscape("Jane Doe"), "people-jane-doe")
	if qv := sent(t, u, "/search/people"); qv.Get("query") != "Jane Doe" || qv.Has("cursor") || len(qv) != 1 {
		t.Errorf("query %v", qv)
	}
	items := adaptertest.Items(t, d)
	// The result without an id is left out and counted.
	if len(items) != 4 || d["count"] != 4.0 || d["dropped"] != 1.0 || d["has_more"] != true || d["query"] != "Jane Doe" ||
		d["cursor"] != "AbpXk2cNQnJmZ3VzU2FtcGxlQ3Vyc29yMQ==" {
		t.Fatalf("page %v", d)
	}
	first := items[0]
	if first["id"] != "100012345678901" || first["name"] != "Jane Doe" || first["type"] != "person" || first["platform"] != "social_a" ||
		first["verified"] != false || first["url"] != "https://www.facebook.com/jane.doe.sample" ||
		!strings.HasPrefix(first["avatar_url"].(string), "https://scontent.xx.fbcdn.net/") {
		t.Errorf("first %v", first)
	}
	if items[1]["id"] != "pfbid02Xk9mPqR2vNwLtYhGfDcBaZsWxUvTsRqPoNmLkJiHgFeDcBal" || items[1]["verified"] != true {
		t.Errorf("second %v", items[1])
	}
	// A numeric id beyond 2^53 keeps its digits.
	if items[2]["id"] != "100098765432109876" {
		t.Errorf("third id %v", items[2]["id"])
	}
	// Unknown is null, never false or "".
	if v, ok := items[3]["verified"]; !ok || v != nil || items[3]["avatar_url"] != nil {
		t.Errorf("fourth %v", items[3])
	}
}

func TestPeopleSearchPages(t *testing.T) {
	u := searchRoute(t)
	d := u.Data(t, facebook.PeopleSearchEndpoint, "query="+url.QueryEscape("Jane Doe")+"&cursor="+url.QueryEscape("AbpXk2cNQnJmZ3VzU2FtcGxlQ3Vyc29yMQ=="), "people-jane-doe-page2")
	if qv := sent(t, u, "/search/people"); qv.Get("cursor") != "AbpXk2cNQnJmZ3VzU2FtcGxlQ3Vyc29yMQ==" {
		t.Errorf("cursor sent %v", qv)
	}
	if d["count"] != 1.0 || d["has_more"] != false || d["cursor"] != nil {
		t.Errorf("last page %v", d)
	}
	// No results is an empty page, not a fault.
	d = u.Data(t, facebook.PeopleSearchEndpoint, "query="+url.QueryEscape("zzqx sample nobody"), "people-empty")
	if items := d["items"].([]any); len(items) != 0 || d["count"] != 0.0 || d["has_more"] != false {
		t.Errorf("empty %v", d)
	}
}

func TestEventsSearch(t *testing.T) {
	u := searchRoute(t)
	d := u.Data(t, facebook.EventSearchEndpoint, "query="+url.QueryEscape("jazz festival"), "events-jazz-festival")
	if qv := sent(t, u, "/search/events"); qv.Get("query") != "jazz festival" || len(qv) != 1 {
		t.Errorf("query %v", qv)
	}
	items := adaptertest.Items(t, d)
	if len(items) != 3 || d["dropped"] != 1.0 || d["has_more"] != true || d["cursor"] != "AbqEventsSampleCursor2==" {
		t.Fatalf("page %v", d)
	}
	if w, _ := d["_warnings"].([]any); len(w) != 1 || w[0] != facebook.WarnSearchNoTiming {
		t.Errorf("warnings %v", d["_warnings"])
	}
	second := items[1]
	if second["id"] != "987654321098765" || second["name"] != "Summer Jazz Festival 2026" || second["type"] != "event" ||
		second["url"] != "https://www.facebook.com/events/987654321098765/" {
		t.Errorf("second %v", second)
	}
	// The search lists no timing, place or flags: null, as spec 2.7 says.
	for _, k := range []string{"starts_at", "location", "is_canceled", "is_online", "is_past", "when_text"} {
		if v, ok := second[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v); want null", k, v, ok)
		}
	}
	if items[2]["when_text"] != "Sun, Jul 12 at 3:00 PM" {
		t.Errorf("when_text %v", items[2]["when_text"])
	}

	d = u.Data(t, facebook.EventSearchEndpoint, "query="+url.QueryEscape("jazz festival")+"&cursor="+url.QueryEscape("AbqEventsSampleCursor2=="), "events-jazz-festival-page2")
	if d["count"] != 1.0 || d["has_more"] != false || d["cursor"] != nil {
		t.Errorf("last page %v", d)
	}
	// No results, as an empty list or a null one, is an empty page.
	for query, golden := range map[string]string{"zzqx sample nothing": "events-empty", "sample-null-results": "events-null-results"} {
		d = u.Data(t, facebook.EventSearchEndpoint, "query="+url.QueryEscape(query), golden)
		if items := d["items"].([]any); len(items) != 0 || d["count"] != 0.0 || d["has_more"] != false || d["query"] != query {
			t.Errorf("%s: empty %v", query, d)
		}
	}
}

func TestSearchErrors(t *testing.T) {
	people, events := facebook.PeopleSearchEndpoint, facebook.EventSearchEndpoint
	cases := []struct {
		name, endpoint, query string
		kind                  upstream.FaultKind
		status                int
		retryAfter            time.Duration
		field                 string
		attempts              int
	}{
		{"bad key", people, "query=sample-bad-key", upstream.Rejected, 401, 0, "", 1},
		{"not subscribed", people, "query=sample-not-subscribed", upstream.Rejected, 403, 0, "", 1},
		{"rate limited", people, "query=sample-rate-limited", upstream.RateLimited, 429, 42 * time.Second, "", 1},
		{"quota spent", people, "query=sample-quota", upstream.RateLimited, 429, 24 * time.Hour, "", 1},
		{"retry-after", events, "query=sample-rate-limited", upstream.RateLimited, 429, 7 * time.Second, "", 1},
		{"unavailable", people, "query=sample-unavailable", upstream.ServerError, 503, 0, "", 3},
		{"garbled", people, "query=sample-garbled", upstream.Malformed, 0, 0, "", 1},
		{"changed shape", people, "query=sample-changed", upstream.Malformed, 0, 0, "", 1},
		{"error body", people, "query=sample-error", upstream.Rejected, 200, 0, "", 1},
		{"stale cursor", people, "query=" + url.QueryEscape("Jane Doe") + "&cursor=stale-sample-cursor", upstream.InvalidParameter, 0, 0, "cursor", 1},
		// A search never answers "not found": a 404 is the route's fault.
		{"no endpoint", events, "query=sample-no-endpoint", upstream.Rejected, 404, 0, "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := searchRoute(t)
			out := u.Fault(t, tc.endpoint, tc.query, tc.kind)
			if out.Fault.Status != tc.status || out.Fault.RetryAfter != tc.retryAfter || out.Fault.Field != tc.field {
				t.Errorf("status %d retry %v field %q; want %d %v %q", out.Fault.Status, out.Fault.RetryAfter, out.Fault.Field,
					tc.status, tc.retryAfter, tc.field)
			}
			if out.Trace.Attempts != tc.attempts || len(u.Replay.Requests()) != tc.attempts {
				t.Errorf("attempts %d, requests %d; want %d", out.Trace.Attempts, len(u.Replay.Requests()), tc.attempts)
			}
			if strings.Contains(out.Fault.Error(), rapidKey) {
				t.Errorf("the key leaked into the fault: %v", out.Fault)
			}
			if e := out.Error(); tc.kind == upstream.NotFound || e.Status == 404 {
				t.Errorf("a search answered %d", e.Status)
			}
			if tc.name == "unavailable" && !strings.Contains(out.Fault.Reason, "unreachable") {
				t.Errorf("reason %q: the proxy's message is kept", out.Fault.Reason)
			}
		})
	}
}

// A rate limit rests the route for the wait it gives: the next call is
// not sent and answers 503 with retry-after.
func TestRateLimitRestsRoute(t *testing.T) {
	u := searchRoute(t)
	u.Fault(t, facebook.PeopleSearchEndpoint, "query=sample-rate-limited", upstream.RateLimited)
	before := len(u.Replay.Requests())
	out := u.Serve(t, facebook.PeopleSearchEndpoint, "query="+url.QueryEscape("Jane Doe"))
	if out.Fault != nil || out.Skipped <= 0 || len(u.Replay.Requests()) != before {
		t.Fatalf("fault %v skipped %v, %d requests", out.Fault, out.Skipped, len(u.Replay.Requests())-before)
	}
	if e := out.Error(); e.Status != 503 || e.Header.Get("retry-after") == "" {
		t.Errorf("status %d retry-after %q", e.Status, e.Header.Get("retry-after"))
	}
}

// Without the operator's key the route is not eligible: 501.
func TestSearchNeedsKey(t *testing.T) {
	r := upstream.NewRunner([]*upstream.Provider{facebook.SearchProvider()}, upstream.Settings{})
	out := r.Serve(t.Context(), facebook.PeopleSearchEndpoint, map[string]string{"query": "Jane Doe"})
	if e := out.Error(); e.Status != 501 {
		t.Errorf("status %d", e.Status)
	}
}
