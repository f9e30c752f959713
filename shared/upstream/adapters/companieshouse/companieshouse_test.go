package companieshouse

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const endpoint = "company_registry/search"

func queryValue(t *testing.T, u *adaptertest.Upstream, name string) string {
	t.Helper()
	got := u.LastRequest(t).Query[name]
	if len(got) != 1 {
		t.Fatalf("upstream query %s = %v, want one value", name, got)
	}
	return got[0]
}

func TestDefaultPage(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)
	d := u.Data(t, endpoint, "query=sample+widgets", "default")

	if d["count"] != 5.0 || d["total_results"] != 5.0 || d["dropped"] != 0.0 {
		t.Errorf("count, total_results, dropped = %v, %v, %v", d["count"], d["total_results"], d["dropped"])
	}
	if d["cursor"] != nil || d["has_more"] != false {
		t.Errorf("cursor, has_more = %v, %v; want null, false on a complete answer", d["cursor"], d["has_more"])
	}
	first := d["items"].([]any)[0].(map[string]any)
	want := map[string]any{
		"company_number":  "01234567",
		"name":            "SAMPLE WIDGETS LIMITED",
		"status":          "active",
		"type":            "ltd",
		"incorporated_on": "1976-02-10",
		"address":         "1 Sample Street, Sampletown, Sampleshire, AB1 2CD",
		"url":             "https://find-and-update.company-information.service.gov.uk/company/01234567",
	}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("items[0].%s = %v, want %v", k, first[k], v)
		}
	}

	// Parameters map to the API's names; the registry's default limit is 20.
	if r := u.LastRequest(t); r.Path != "/search/companies" {
		t.Errorf("path = %s", r.Path)
	}
	for name, v := range map[string]string{"q": "sample widgets", "items_per_page": "20", "start_index": "0"} {
		if got := queryValue(t, u, name); got != v {
			t.Errorf("upstream %s = %q, want %q", name, got, v)
		}
	}
}

func TestCredentials(t *testing.T) {
	u := adaptertest.Start(t, Provider(), map[string]string{APIKeySecret: "sample-key-123"})
	u.Data(t, endpoint, "query=sample+widgets&limit=7", "default")
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("sample-key-123:"))
	if got := u.LastRequest(t).Header.Get("authorization"); got != want {
		t.Errorf("authorization = %q, want the key as Basic user name with an empty password", got)
	}
	if got := queryValue(t, u, "items_per_page"); got != "7" {
		t.Errorf("items_per_page = %q, want 7", got)
	}
	if _, ok := u.LastRequest(t).Query["api_key"]; ok {
		t.Error("the key leaked into the query")
	}

	// Without the key (and outside replay) the route is not eligible at
	// all, so nothing is sent without credentials.
	r := upstream.NewRunner([]*upstream.Provider{Provider()}, upstream.Settings{
		Lookup: func(string) (string, bool) { return "", false },
	})
	if r.Eligible(endpoint) {
		t.Error("the search is eligible without an API key")
	}
}

func TestPagination(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)
	p1 := u.Data(t, endpoint, "query=sample+paging&limit=2", "page-1")
	cursor, _ := p1["cursor"].(string)
	if cursor != "2" || p1["has_more"] != true || p1["count"] != 2.0 {
		t.Fatalf("page 1 cursor, has_more, count = %v, %v, %v", p1["cursor"], p1["has_more"], p1["count"])
	}
	if got := queryValue(t, u, "start_index"); got != "0" {
		t.Errorf("page 1 start_index = %q", got)
	}

	p2 := u.Data(t, endpoint, "query=sample+paging&limit=2&cursor="+cursor, "page-2")
	if got := queryValue(t, u, "start_index"); got != "2" {
		t.Errorf("page 2 start_index = %q, want the cursor's offset 2", got)
	}
	if got := queryValue(t, u, "items_per_page"); got != "2" {
		t.Errorf("page 2 items_per_page = %q", got)
	}
	if v, ok := p2["cursor"]; !ok || v != nil || p2["has_more"] != false {
		t.Errorf("last page cursor, has_more = %v, %v; want null, false", p2["cursor"], p2["has_more"])
	}
}

func TestEdgeCases(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)

	empty := u.Data(t, endpoint, "query=sample+nothing", "empty")
	if items := empty["items"].([]any); len(items) != 0 || empty["count"] != 0.0 || empty["total_results"] != 0.0 {
		t.Errorf("empty = %v", empty)
	}
	if empty["cursor"] != nil || empty["has_more"] != false {
		t.Errorf("empty cursor, has_more = %v, %v", empty["cursor"], empty["has_more"])
	}

	missing := u.Data(t, endpoint, "query=sample+missing", "missing-counters")
	if missing["dropped"] != 1.0 || missing["count"] != 1.0 {
		t.Errorf("dropped, count = %v, %v; want the numberless item dropped", missing["dropped"], missing["count"])
	}
	if v, ok := missing["total_results"]; !ok || v != nil {
		t.Errorf("total_results = %v, want null when the source omits it", v)
	}
	sparse := missing["items"].([]any)[0].(map[string]any)
	for _, k := range []string{"status", "type", "incorporated_on", "address"} {
		if v, ok := sparse[k]; !ok || v != nil {
			t.Errorf("items[0].%s = %v, want null", k, v)
		}
	}
	if missing["cursor"] != nil || missing["has_more"] != false {
		t.Errorf("short page cursor, has_more = %v, %v", missing["cursor"], missing["has_more"])
	}

	open := u.Data(t, endpoint, "query=sample+unknown+total&limit=2", "unknown-total")
	if open["cursor"] != "2" || open["has_more"] != nil {
		t.Errorf("full page without total: cursor, has_more = %v, %v; want 2, null", open["cursor"], open["has_more"])
	}

	large := u.Data(t, endpoint, "query=sample+large", "large-ids")
	numbers := []string{"00000001", "SC000001", "OC000001"}
	for i, it := range large["items"].([]any) {
		if got := it.(map[string]any)["company_number"]; got != numbers[i] {
			t.Errorf("items[%d].company_number = %v, want %s", i, got, numbers[i])
		}
	}
}

// Each fault runs on a fresh runner: repeated unhealthy attempts would
// otherwise put the route into its cooldown and skip later cases.
func TestFaults(t *testing.T) {
	fault := func(t *testing.T, query string, kind upstream.FaultKind) upstream.Outcome {
		t.Helper()
		return adaptertest.Start(t, Provider(), nil).Fault(t, endpoint, query, kind)
	}
	t.Run("unauthorised", func(t *testing.T) {
		out := fault(t, "query=sample+unauthorised", upstream.Rejected)
		if out.Fault.Status != 401 || out.Fault.Reason != "Invalid Authorization" {
			t.Errorf("fault = %v", out.Fault)
		}
	})
	t.Run("rate limited", func(t *testing.T) {
		out := fault(t, "query=sample+rate+limited", upstream.RateLimited)
		if out.Fault.RetryAfter <= 0 || out.Fault.RetryAfter > 5*time.Minute {
			t.Errorf("RetryAfter = %v, want a wait within the five-minute window", out.Fault.RetryAfter)
		}
	})
	t.Run("server error", func(t *testing.T) {
		out := fault(t, "query=sample+server+error", upstream.ServerError)
		if out.Trace.Attempts != 3 {
			t.Errorf("attempts = %d, want 3 (5xx is retried)", out.Trace.Attempts)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		fault(t, "query=sample+malformed", upstream.Malformed)
	})
	t.Run("changed cursor", func(t *testing.T) {
		for _, cursor := range []string{"abc", "-20", "007", "%2B5", "1.5", "99999999999999999999999"} {
			u := adaptertest.Start(t, Provider(), nil)
			out := u.Fault(t, endpoint, "query=sample+widgets&cursor="+cursor, upstream.InvalidParameter)
			if e := out.Error(); e.Status != 422 || e.Details["field"] != "cursor" {
				t.Errorf("cursor %q: error %+v, want 422 naming cursor", cursor, e)
			}
			if out.Fault.Status != 0 {
				t.Errorf("cursor %q reached the upstream (status %d)", cursor, out.Fault.Status)
			}
			if n := len(u.Replay.Requests()); n != 0 {
				t.Errorf("cursor %q: %d upstream requests, want none", cursor, n)
			}
		}
	})
}

func TestResetWait(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cases := map[string]time.Duration{
		"1800000042": 42 * time.Second,
		"1800000000": 0,               // now: no wait known
		"1799999000": 0,               // past
		"1900000000": 5 * time.Minute, // capped at the window
		"soon":       0,               // unreadable
		"":           0,
	}
	for reset, want := range cases {
		if got := resetWait(reset, now); got != want {
			t.Errorf("resetWait(%q) = %v, want %v", reset, got, want)
		}
	}
}

// TestRealFormatVariants reads our fixtures in the formats real answers
// come in: an overseas company (FC number, external registration number,
// empty snippet) and an answer with a total but neither items_per_page
// nor start_index, whose short page ends the listing.
func TestRealFormatVariants(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)
	overseas := u.Data(t, endpoint, "query=FC051234", "overseas")
	items := adaptertest.Items(t, overseas)
	if len(items) != 1 || items[0]["company_number"] != "FC051234" || items[0]["type"] != "oversea-company" ||
		items[0]["url"] != "https://find-and-update.company-information.service.gov.uk/company/FC051234" {
		t.Errorf("overseas items = %v", items)
	}
	if overseas["total_results"] != 1.0 || overseas["has_more"] != false || overseas["cursor"] != nil {
		t.Errorf("overseas total, has_more, cursor = %v, %v, %v", overseas["total_results"], overseas["has_more"], overseas["cursor"])
	}

	bare := u.Data(t, endpoint, "query=sample+no+page+fields", "no-page-fields")
	items = adaptertest.Items(t, bare)
	if len(items) != 1 || items[0]["company_number"] != "07790012" || items[0]["status"] != "dissolved" {
		t.Errorf("items = %v; the leading zero must be kept", items)
	}
	if bare["total_results"] != 14.0 || bare["has_more"] != false || bare["cursor"] != nil || bare["dropped"] != 0.0 {
		t.Errorf("total, has_more, cursor, dropped = %v, %v, %v, %v", bare["total_results"], bare["has_more"], bare["cursor"], bare["dropped"])
	}
}
