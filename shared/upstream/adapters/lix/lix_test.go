package lix_test

import (
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/lix"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const facetPath = "/v1/search/sales/facet"

// testKey must reach Lix as the Authorization header and never a fault's
// reason (the 401 fixture quotes it back).
const testKey = "sample-lix-key"

func start(t *testing.T, secrets map[string]string) *adaptertest.Upstream {
	t.Helper()
	all := map[string]string{lix.KeySecret: testKey}
	for k, v := range secrets {
		all[k] = v
	}
	opts := adaptertest.Options
	opts.Timeout = time.Minute // room for the retries of retryable faults
	return adaptertest.StartWith(t, lix.Provider(), all, opts)
}

func sent(t *testing.T, u *adaptertest.Upstream) map[string]string {
	t.Helper()
	r := u.LastRequest(t)
	if r.Path != facetPath {
		t.Fatalf("path %s", r.Path)
	}
	if got := r.Header.Get("Authorization"); got != testKey {
		t.Fatalf("Authorization = %q", got)
	}
	out := map[string]string{}
	for k, v := range r.Query {
		if len(v) != 1 {
			t.Fatalf("%s sent %d times", k, len(v))
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
			t.Errorf("sent %s=%q; want %q", k, got[k], v)
		}
	}
}

func TestLookups(t *testing.T) {
	u := start(t, nil)
	cases := []struct {
		endpoint, query, golden, kind string
		want                          int
		firstID, firstName            string
	}{
		{"professional_network/locations", "query=Berlin", "locations-berlin", "BING_GEO", 3, "106967730", "Berlin, Germany"},
		{"professional_network/schools", "query=Stanford", "schools-stanford", "SCHOOL", 4, "1792", "Stanford University"},
		{"professional_network/industries", "query=software", "industries-software", "INDUSTRY", 6, "4", "Software Development"},
	}
	for _, tc := range cases {
		t.Run(tc.endpoint, func(t *testing.T) {
			data := u.Data(t, tc.endpoint, tc.query, tc.golden)
			same(t, sent(t, u), map[string]string{"query": strings.TrimPrefix(tc.query, "query="), "type": tc.kind,
				"count": "10", "start": "0"})
			items := adaptertest.Items(t, data)
			if len(items) != tc.want || data["count"] != float64(tc.want) || data["has_more"] != false ||
				items[0]["id"] != tc.firstID || items[0]["name"] != tc.firstName {
				t.Errorf("%v", data)
			}
		})
	}
	// A numeric id keeps its digits, as a string.
	schools := u.Data(t, "professional_network/schools", "query=Stanford", "schools-stanford")
	if last := adaptertest.Items(t, schools)[3]; last["id"] != "57299170" {
		t.Errorf("numeric id: %v", last)
	}
}

func TestLimitAndPaging(t *testing.T) {
	u := start(t, nil)
	data := u.Data(t, "professional_network/industries", "query=software&limit=3", "industries-limit")
	if q := sent(t, u); q["count"] != "3" {
		t.Errorf("count %q", q["count"])
	}
	// A full page: the typeahead's total says whether more exist.
	if data["count"] != 3.0 || data["has_more"] != true {
		t.Errorf("%v", data)
	}
	empty := u.Data(t, "professional_network/schools", "query=zzqx+nothing", "schools-empty")
	if len(adaptertest.Items(t, empty)) != 0 || empty["has_more"] != false {
		t.Errorf("empty: %v", empty)
	}
}

func TestViewer(t *testing.T) {
	u := start(t, map[string]string{lix.ViewerSecret: "alfie-sample"})
	u.Serve(t, "professional_network/schools", "query=Stanford")
	if q := sent(t, u); q["viewer_id"] != "alfie-sample" {
		t.Errorf("viewer_id %q", q["viewer_id"])
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name, query string
		kind        upstream.FaultKind
		status      int
		retryAfter  time.Duration
		attempts    int
	}{
		{"bad key", "query=sample-401", upstream.Rejected, 401, 0, 1},
		{"over quota", "query=sample-402", upstream.RateLimited, 402, time.Hour, 1},
		{"no connected account", "query=sample-407", upstream.Rejected, 407, 0, 1},
		{"rate limited", "query=sample-429", upstream.RateLimited, 429, 20 * time.Second, 1},
		{"bad request", "query=sample-400", upstream.Rejected, 400, 0, 1},
		{"server error", "query=sample-500", upstream.ServerError, 500, 0, 3},
		{"queued", "query=sample-queued", upstream.ServerError, 0, 0, 3},
		{"cut short", "query=sample-malformed", upstream.Malformed, 0, 0, 1},
		{"changed shape", "query=sample-changed-shape", upstream.Malformed, 0, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := start(t, nil)
			out := u.Fault(t, "professional_network/schools", tc.query, tc.kind)
			if out.Fault.Status != tc.status || out.Fault.RetryAfter != tc.retryAfter || out.Trace.Attempts != tc.attempts {
				t.Errorf("status %d retry %v attempts %d; want %d %v %d (%v)", out.Fault.Status, out.Fault.RetryAfter,
					out.Trace.Attempts, tc.status, tc.retryAfter, tc.attempts, out.Fault)
			}
			if strings.Contains(out.Fault.Error(), testKey) {
				t.Errorf("the key leaked: %v", out.Fault)
			}
			if m := strings.ToLower(out.Error().Message); strings.Contains(m, "lix") || strings.Contains(m, "linkedin") {
				t.Errorf("caller's message names the source: %q", m)
			}
		})
	}
}
