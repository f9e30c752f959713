package atproto

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// Test credentials: obviously fake, and distinct so a leak is recognisable.
const (
	testIdentifier  = "meridian-sample.example.com"
	testAppPassword = "abcd-efgh-ijkl-mnop"
)

var testSecrets = map[string]string{IdentifierVar: testIdentifier, AppPasswordVar: testAppPassword}

// routes runs a test against each provider, behind the replay upstream.
func routes(t *testing.T, test func(t *testing.T, u *adaptertest.Upstream)) {
	for _, p := range []*upstream.Provider{Public(), Session()} {
		t.Run(p.Name, func(t *testing.T) {
			var secrets map[string]string
			if p.Name == SessionName {
				secrets = testSecrets
			}
			test(t, adaptertest.Start(t, p, secrets))
		})
	}
}

// fresh starts the provider under test again with a new runner, so that
// the route's cooldown after repeated faults does not carry over.
func fresh(t *testing.T, u *adaptertest.Upstream) *adaptertest.Upstream {
	t.Helper()
	if u.Provider.Name == SessionName {
		return adaptertest.Start(t, Session(), testSecrets)
	}
	return adaptertest.Start(t, Public(), nil)
}

// fixtureAccessJwt is the access token of the session fixture.
func fixtureAccessJwt(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(adaptertest.FixturesDir(t), SessionName, "create_session.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Response struct {
			Body struct {
				AccessJwt string `json:"accessJwt"`
			} `json:"body"`
		} `json:"response"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil || fx.Response.Body.AccessJwt == "" {
		t.Fatalf("session fixture: %v", err)
	}
	return fx.Response.Body.AccessJwt
}

// checkAuth asserts how the last request authenticated: no credentials on
// the public route, the session's Bearer token on the session route.
func checkAuth(t *testing.T, u *adaptertest.Upstream) {
	t.Helper()
	got := u.LastRequest(t).Header.Get("Authorization")
	switch u.Provider.Name {
	case PublicName:
		if got != "" {
			t.Errorf("the public route sent Authorization %q", got)
		}
	case SessionName:
		if want := "Bearer " + fixtureAccessJwt(t); got != want {
			t.Errorf("Authorization = %q, want the session's Bearer token", got)
		}
	}
}

func query(t *testing.T, r replay.Request, name string) (string, bool) {
	t.Helper()
	v, ok := r.Query[name]
	if !ok {
		return "", false
	}
	if len(v) != 1 {
		t.Fatalf("query %s = %v, want one value", name, v)
	}
	return v[0], true
}

func wantQuery(t *testing.T, r replay.Request, want map[string]string, absent ...string) {
	t.Helper()
	for k, v := range want {
		if got, ok := query(t, r, k); !ok || got != v {
			t.Errorf("upstream query %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	for _, k := range absent {
		if got, ok := query(t, r, k); ok {
			t.Errorf("upstream query has %s=%q; want it absent", k, got)
		}
	}
}

func warnings(d map[string]any) []string {
	raw, _ := d["_warnings"].([]any)
	out := make([]string, len(raw))
	for i, w := range raw {
		out[i], _ = w.(string)
	}
	return out
}

func hasWarning(d map[string]any, part string) bool {
	for _, w := range warnings(d) {
		if strings.Contains(w, part) {
			return true
		}
	}
	return false
}

func TestProviders(t *testing.T) {
	ps := Providers()
	if len(ps) != 2 || ps[0].Name != PublicName || ps[1].Name != SessionName {
		t.Fatalf("providers = %v, want the public route then the session route", ps)
	}
	if ps[0].BaseURL != "https://public.api.bsky.app" || len(ps[0].Secrets) != 0 {
		t.Errorf("public: base %s, secrets %v", ps[0].BaseURL, ps[0].Secrets)
	}
	if ps[1].BaseURL != "https://bsky.social" {
		t.Errorf("session base = %s", ps[1].BaseURL)
	}
	names := map[string]bool{}
	for _, s := range ps[1].Secrets {
		names[s.Name] = s.Required && s.Doc != ""
	}
	if !names[IdentifierVar] || !names[AppPasswordVar] || len(names) != 2 {
		t.Errorf("session secrets = %v, want both credentials required and documented", ps[1].Secrets)
	}
	for _, p := range ps {
		for _, e := range []string{searchEndpoint, profileEndpoint} {
			if p.Endpoints[e] == nil {
				t.Errorf("%s does not serve %s", p.Name, e)
			}
		}
	}
}

func TestSearchDefault(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, searchEndpoint, "query=golang", "search_default")

		req := u.LastRequest(t)
		if req.Path != searchPath {
			t.Errorf("path = %s", req.Path)
		}
		// No limit from the caller: none sent, the upstream's 25 applies.
		wantQuery(t, req, map[string]string{"q": "golang"}, "limit", "sort", "cursor")
		checkAuth(t, u)

		it := adaptertest.Items(t, d)
		if len(it) != 3 || d["count"] != 3.0 {
			t.Fatalf("count = %v, items = %d", d["count"], len(it))
		}
		first := it[0]
		want := map[string]any{
			"id":         "at://did:plc:sample2alice4aaaaaaaaaaa/app.bsky.feed.post/3lsample2aaa2",
			"rkey":       "3lsample2aaa2",
			"url":        "https://bsky.app/profile/alice.example.com/post/3lsample2aaa2",
			"created_at": "2026-09-20T14:03:11.482Z",
			"indexed_at": "2026-09-20T14:03:12.117Z",
			"likes":      128.0, "reposts": 17.0, "replies": 9.0, "quotes": 3.0,
			"is_reply": false, "is_repost": false,
		}
		for k, v := range want {
			if first[k] != v {
				t.Errorf("items[0].%s = %v, want %v", k, first[k], v)
			}
		}
		author := first["author"].(map[string]any)
		if author["id"] != "did:plc:sample2alice4aaaaaaaaaaa" || author["handle"] != "alice.example.com" ||
			author["name"] != "Alice Example" || author["url"] != "https://bsky.app/profile/alice.example.com" {
			t.Errorf("author = %v", author)
		}
		if it[1]["is_reply"] != true {
			t.Errorf("items[1].is_reply = %v; its record has a reply reference", it[1]["is_reply"])
		}
		if d["cursor"] != "3" || d["has_more"] != true {
			t.Errorf("cursor, has_more = %v, %v", d["cursor"], d["has_more"])
		}
		if !hasWarning(d, "3 posts returned for a page size of 25 although more follow") {
			t.Errorf("_warnings = %v, want the short-page note", warnings(d))
		}
	})
}

func TestSearchParameters(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		u.Data(t, searchEndpoint, "query=golang+generics&limit=50&sort=top", "search_params")
		wantQuery(t, u.LastRequest(t), map[string]string{"q": "golang generics", "limit": "50", "sort": "top"}, "cursor", "query")
		checkAuth(t, u)
	})
}

func TestSearchEmpty(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, searchEndpoint, "query=nothing-matches-this-sample", "search_empty")
		if it := adaptertest.Items(t, d); len(it) != 0 || d["count"] != 0.0 {
			t.Errorf("items = %v, count = %v", it, d["count"])
		}
		if d["cursor"] != nil || d["has_more"] != false {
			t.Errorf("cursor, has_more = %v, %v", d["cursor"], d["has_more"])
		}
	})
}

func TestSearchMissingCounters(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, searchEndpoint, "query=sample-missing-counters", "search_missing_counters")
		it := adaptertest.Items(t, d)
		if len(it) != 2 {
			t.Fatalf("items = %d", len(it))
		}
		for _, k := range []string{"likes", "reposts", "replies", "quotes"} {
			if v, ok := it[0][k]; !ok || v != nil {
				t.Errorf("items[0].%s = %v (present %v), want null: a missing counter is unknown, not 0", k, v, ok)
			}
		}
		if it[1]["likes"] != 5.0 || it[1]["reposts"] != nil {
			t.Errorf("items[1] likes, reposts = %v, %v", it[1]["likes"], it[1]["reposts"])
		}
		a := it[0]["author"].(map[string]any)
		if a["handle"] != nil || a["name"] != nil || a["id"] != "did:plc:sample2sparse4ssssssssss" ||
			a["url"] != "https://bsky.app/profile/did:plc:sample2sparse4ssssssssss" {
			t.Errorf("author with an unverified handle and no name = %v", a)
		}
		if it[0]["url"] != "https://bsky.app/profile/did:plc:sample2sparse4ssssssssss/post/3lsample2ddd2" {
			t.Errorf("url = %v, want the DID form", it[0]["url"])
		}
		if name := it[1]["author"].(map[string]any)["name"]; name != nil {
			t.Errorf("an empty display name maps to %v, want null", name)
		}
		if it[1]["created_at"] != nil {
			t.Errorf("created_at = %v for an invalid record time, want null", it[1]["created_at"])
		}
		if !hasWarning(d, "counters are null") || !hasWarning(d, "not a valid date-time") {
			t.Errorf("_warnings = %v", warnings(d))
		}
	})
}

func TestSearchLargeIDs(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, searchEndpoint, "query=sample-large-ids", "search_large_ids")
		// The golden file holds the exact digits; here, that ids and the
		// cursor are strings preserved as sent.
		it := adaptertest.Items(t, d)
		if it[0]["id"] != "at://did:web:very-long-self-hosted-identity.subdomain.example.com/app.bsky.feed.post/3zzzzzzzzzzzz" {
			t.Errorf("id = %v", it[0]["id"])
		}
		if d["cursor"] != "9007199254740993" {
			t.Errorf("cursor = %v", d["cursor"])
		}
		if !hasWarning(d, "estimates 12345678901234567890 matching posts") {
			t.Errorf("_warnings = %v, want the hitsTotal estimate with its exact digits", warnings(d))
		}
	})
	// The counters beyond 2^53 keep every digit in the golden files.
	for _, name := range []string{PublicName, SessionName} {
		raw, err := os.ReadFile(filepath.Join(adaptertest.FixturesDir(t), name, "golden", "search_large_ids.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, digits := range []string{`"likes": 9007199254740993`, `"reposts": 18446744073709551615`} {
			if !strings.Contains(string(raw), digits) {
				t.Errorf("%s golden lacks %s", name, digits)
			}
		}
	}
}

func TestSearchPagination(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		first := u.Data(t, searchEndpoint, "query=golang+modules&limit=2", "search_page1")
		cursor, _ := first["cursor"].(string)
		if cursor == "" || first["has_more"] != true || first["count"] != 2.0 {
			t.Fatalf("page 1: cursor %v, has_more %v, count %v", first["cursor"], first["has_more"], first["count"])
		}
		last := u.Data(t, searchEndpoint, "query=golang+modules&limit=2&cursor="+cursor, "search_page2")
		wantQuery(t, u.LastRequest(t), map[string]string{"q": "golang modules", "limit": "2", "cursor": cursor})
		checkAuth(t, u)
		if v, ok := last["cursor"]; !ok || v != nil || last["has_more"] != false || last["count"] != 1.0 {
			t.Errorf("last page: cursor %v (present %v), has_more %v, count %v", v, ok, last["has_more"], last["count"])
		}
	})
}

func TestSearchFaults(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		out := u.Fault(t, searchEndpoint, "query=sample-rate-limited", upstream.RateLimited)
		if out.Fault.RetryAfter != 7*time.Second {
			t.Errorf("RetryAfter = %v, want the Retry-After of 7s", out.Fault.RetryAfter)
		}
		if !strings.Contains(out.Fault.Reason, "RateLimitExceeded") {
			t.Errorf("reason = %q, want the XRPC error name", out.Fault.Reason)
		}

		out = fresh(t, u).Fault(t, searchEndpoint, "query=sample-rate-limited-reset", upstream.RateLimited)
		if out.Fault.RetryAfter <= 0 {
			t.Errorf("RetryAfter = %v, want the wait until RateLimit-Reset", out.Fault.RetryAfter)
		}

		out = fresh(t, u).Fault(t, searchEndpoint, "query=sample-server-error", upstream.ServerError)
		if out.Trace.Attempts != 3 {
			t.Errorf("attempts = %d, want 3 (5xx is retried)", out.Trace.Attempts)
		}

		fresh(t, u).Fault(t, searchEndpoint, "query=sample-malformed", upstream.Malformed)

		out = fresh(t, u).Fault(t, searchEndpoint, "query=(sample-bad-query", upstream.Rejected)
		if out.Fault.Status != http.StatusBadRequest || !strings.Contains(out.Fault.Reason, "BadQueryString") {
			t.Errorf("fault = %v", out.Fault)
		}
		if out.Trace.Attempts != 1 {
			t.Errorf("attempts = %d; a refused query is not retried", out.Trace.Attempts)
		}
	})
}

func TestPublicRefusesAnonymousSearch(t *testing.T) {
	u := adaptertest.Start(t, Public(), nil)
	out := u.Fault(t, searchEndpoint, "query=sample-anonymous-refused", upstream.Rejected)
	if out.Fault.Status != http.StatusForbidden || !strings.Contains(out.Fault.Reason, "AuthMissing") {
		t.Errorf("fault = %v", out.Fault)
	}
	// The AppView's proxy refuses anonymous cursors with an HTML page.
	out = u.Fault(t, searchEndpoint, "query=golang&cursor=3", upstream.Rejected)
	if out.Fault.Status != http.StatusForbidden {
		t.Errorf("fault = %v", out.Fault)
	}
}

func TestProfileDefault(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, profileEndpoint, "handle=alice.example.com", "profile_default")
		req := u.LastRequest(t)
		if req.Path != profilePath {
			t.Errorf("path = %s", req.Path)
		}
		wantQuery(t, req, map[string]string{"actor": "alice.example.com"}, "handle")
		checkAuth(t, u)

		want := map[string]any{
			"id": "did:plc:sample2alice4aaaaaaaaaaa", "handle": "alice.example.com", "name": "Alice Example",
			"url":       "https://bsky.app/profile/alice.example.com",
			"followers": 1532.0, "following": 311.0, "posts_count": 2048.0,
			"created_at": "2024-02-06T18:22:41.903Z",
		}
		for k, v := range want {
			if d[k] != v {
				t.Errorf("%s = %v, want %v", k, d[k], v)
			}
		}
		for _, k := range []string{"bio", "avatar_url", "cover_url"} {
			if s, _ := d[k].(string); s == "" {
				t.Errorf("%s is empty", k)
			}
		}
		if _, ok := d["_warnings"]; ok {
			t.Errorf("_warnings = %v for a complete profile", d["_warnings"])
		}
	})
}

func TestProfileByDID(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		big := "did:web:very-long-self-hosted-identity.subdomain.example.com"
		d := u.Data(t, profileEndpoint, "handle="+big, "profile_large_ids")
		wantQuery(t, u.LastRequest(t), map[string]string{"actor": big})
		if d["id"] != big {
			t.Errorf("id = %v", d["id"])
		}
	})
	for _, name := range []string{PublicName, SessionName} {
		raw, err := os.ReadFile(filepath.Join(adaptertest.FixturesDir(t), name, "golden", "profile_large_ids.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, digits := range []string{`"followers": 9007199254740993`, `"posts_count": 18446744073709551615`} {
			if !strings.Contains(string(raw), digits) {
				t.Errorf("%s golden lacks %s", name, digits)
			}
		}
	}
}

func TestProfileSparse(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, profileEndpoint, "handle=sparse.example.com", "profile_sparse")
		for _, k := range []string{"handle", "name", "bio", "avatar_url", "cover_url", "followers", "following", "posts_count", "created_at"} {
			if v, ok := d[k]; !ok || v != nil {
				t.Errorf("%s = %v (present %v), want null", k, v, ok)
			}
		}
		if d["url"] != "https://bsky.app/profile/did:plc:sample2sparse4ssssssssss" {
			t.Errorf("url = %v, want the DID form", d["url"])
		}
		if len(warnings(d)) != 3 {
			t.Errorf("_warnings = %v, want handle, counters and creation time notes", warnings(d))
		}
	})
}

func TestProfileFaults(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		for _, handle := range []string{"nobody.example.com", "deactivated.example.com"} {
			out := u.Fault(t, profileEndpoint, "handle="+handle, upstream.NotFound)
			if out.Trace.Attempts != 1 {
				t.Errorf("%s: attempts = %d, want 1", handle, out.Trace.Attempts)
			}
		}

		out := u.Fault(t, profileEndpoint, "handle=-sample-invalid-", upstream.Rejected)
		if !strings.Contains(out.Fault.Reason, "InvalidRequest") {
			t.Errorf("reason = %q", out.Fault.Reason)
		}

		out = fresh(t, u).Fault(t, profileEndpoint, "handle=rate-limited.example.com", upstream.RateLimited)
		if out.Fault.RetryAfter != 7*time.Second {
			t.Errorf("RetryAfter = %v", out.Fault.RetryAfter)
		}

		out = fresh(t, u).Fault(t, profileEndpoint, "handle=server-error.example.com", upstream.ServerError)
		if out.Trace.Attempts != 3 {
			t.Errorf("attempts = %d, want 3", out.Trace.Attempts)
		}

		fresh(t, u).Fault(t, profileEndpoint, "handle=malformed.example.com", upstream.Malformed)
	})
}

// TestFailoverToSession: the public AppView refuses anonymous search with
// 403 and the session route answers.
func TestFailoverToSession(t *testing.T) {
	srv, err := replay.Load(adaptertest.FixturesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	runner := upstream.NewRunner(Providers(), upstream.Settings{
		ReplayURL: base,
		Lookup: func(name string) (string, bool) {
			v, ok := testSecrets[name]
			return v, ok
		},
		Options: adaptertest.Options,
	})

	for _, params := range []map[string]string{
		{"query": "sample-anonymous-refused"},
		{"query": "golang", "cursor": "3"}, // anonymous cursors are refused too
	} {
		out := runner.Serve(context.Background(), searchEndpoint, params)
		if out.Fault != nil {
			t.Fatalf("%v: %v", params, out.Fault)
		}
		if out.Trace.ServedBy != SessionName {
			t.Errorf("%v: served by %q, want %s", params, out.Trace.ServedBy, SessionName)
		}
		want := []upstream.Leg{
			{ServedBy: PublicName, Attempts: 1, OK: false, Status: http.StatusForbidden, Fault: upstream.Rejected},
			{ServedBy: SessionName, Attempts: 1, OK: true},
		}
		if len(out.Trace.Legs) != len(want) {
			t.Fatalf("%v: legs = %+v", params, out.Trace.Legs)
		}
		for i := range want {
			if out.Trace.Legs[i] != want[i] {
				t.Errorf("%v: leg %d = %+v, want %+v", params, i, out.Trace.Legs[i], want[i])
			}
		}
		if data, ok := out.Data.(searchData); !ok || data.Count != 3 {
			t.Errorf("%v: data = %#v", params, out.Data)
		}
	}

	// The session was created once for both calls, and only the session
	// route's requests carried it.
	sessions := 0
	for _, r := range srv.Requests() {
		if r.Path == createSessionPath {
			sessions++
			if r.Provider != SessionName || r.Method != http.MethodPost {
				t.Errorf("createSession went to %s with %s", r.Provider, r.Method)
			}
		}
		if auth := r.Header.Get("Authorization"); r.Provider == PublicName && auth != "" {
			t.Errorf("the public route sent Authorization %q", auth)
		}
	}
	if sessions != 1 {
		t.Errorf("createSession calls = %d, want 1", sessions)
	}

	// A "not found" profile is definitive: the session route is not asked.
	out := runner.Serve(context.Background(), profileEndpoint, map[string]string{"handle": "nobody.example.com"})
	if out.Fault == nil || out.Fault.Kind != upstream.NotFound || len(out.Trace.Legs) != 1 {
		t.Errorf("not found: fault %v, legs %+v", out.Fault, out.Trace.Legs)
	}
}

// TestSessionReused: the search carries the fixture session's access token
// and two calls sign in once.
func TestSessionReused(t *testing.T) {
	u := adaptertest.Start(t, Session(), testSecrets)
	u.Data(t, searchEndpoint, "query=golang", "search_default")
	u.Data(t, profileEndpoint, "handle=alice.example.com", "profile_default")

	reqs := u.Replay.Requests()
	var sessions, queries int
	want := "Bearer " + fixtureAccessJwt(t)
	for _, r := range reqs {
		switch r.Path {
		case createSessionPath:
			sessions++
			if r.Header.Get("Authorization") != "" {
				t.Error("createSession carried an Authorization header")
			}
		case searchPath, profilePath:
			queries++
			if got := r.Header.Get("Authorization"); got != want {
				t.Errorf("%s Authorization = %q, want %q", r.Path, got, want)
			}
		}
	}
	if sessions != 1 || queries != 2 {
		t.Errorf("createSession %d times for %d queries; want 1 for 2", sessions, queries)
	}
}

// TestSessionNotEligibleWithoutCredentials: outside replay mode the session
// route needs both secrets; the public route needs none.
func TestSessionNotEligibleWithoutCredentials(t *testing.T) {
	only := map[string]string{IdentifierVar: testIdentifier}
	r := upstream.NewRunner([]*upstream.Provider{Session()}, upstream.Settings{Lookup: func(n string) (string, bool) {
		v, ok := only[n]
		return v, ok
	}})
	if r.Eligible(searchEndpoint) || r.Eligible(profileEndpoint) {
		t.Error("the session route is eligible without an app password")
	}
	if r := upstream.NewRunner([]*upstream.Provider{Public()}, upstream.Settings{}); !r.Eligible(searchEndpoint) {
		t.Error("the public route is not eligible without credentials")
	}
}

// fakePDS is a programmable PDS for the session logic: it issues the next
// token on each createSession and refuses the tokens listed as expired.
type fakePDS struct {
	t        *testing.T
	mu       sync.Mutex
	tokens   []string // issued in turn
	expired  map[string]bool
	sessions atomic.Int32
	queries  atomic.Int32
	// signIn, when set, answers createSession instead.
	signIn func(w http.ResponseWriter)
}

func (p *fakePDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("content-type", "application/json")
	switch r.URL.Path {
	case createSessionPath:
		n := p.sessions.Add(1)
		var in map[string]any
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &in); err != nil || r.Method != http.MethodPost ||
			!strings.HasPrefix(r.Header.Get("content-type"), "application/json") ||
			in["identifier"] != testIdentifier || in["password"] != testAppPassword || len(in) != 2 {
			p.t.Errorf("createSession: %s %s %s", r.Method, r.Header.Get("content-type"), body)
		}
		if p.signIn != nil {
			p.signIn(w)
			return
		}
		p.mu.Lock()
		token := p.tokens[min(int(n)-1, len(p.tokens)-1)]
		p.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{
			"accessJwt": token, "refreshJwt": "sample-refresh", "handle": testIdentifier, "did": "did:plc:sample2meridian4mmmmmmmm", "active": true,
		})
	case searchPath:
		p.queries.Add(1)
		token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		p.mu.Lock()
		expired := p.expired[token]
		p.mu.Unlock()
		if expired {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"ExpiredToken","message":"Token has expired"}`)
			return
		}
		_, _ = io.WriteString(w, `{"posts":[]}`)
	default:
		http.NotFound(w, r)
	}
}

func (p *fakePDS) runner(t *testing.T) *upstream.Runner {
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	vars := map[string]string{IdentifierVar: testIdentifier, AppPasswordVar: testAppPassword}
	s := Session()
	vars[s.BaseURLVar()] = srv.URL
	return upstream.NewRunner([]*upstream.Provider{s}, upstream.Settings{
		Lookup:  func(n string) (string, bool) { v, ok := vars[n]; return v, ok },
		Options: adaptertest.Options,
	})
}

// jwtExpiring is a token whose exp claim is at.
func jwtExpiring(name string, at time.Time) string {
	return "eyJhbGciOiJFUzI1NksifQ." + b64json(map[string]any{"sub": name, "exp": at.Unix()}) + ".c2ln"
}

func b64json(v any) string {
	raw, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestSessionRecreatedWhenTokenRefused(t *testing.T) {
	later := time.Now().Add(2 * time.Hour)
	first, second := jwtExpiring("first", later), jwtExpiring("second", later)
	pds := &fakePDS{t: t, tokens: []string{first, second}, expired: map[string]bool{first: true}}
	r := pds.runner(t)

	out := r.Serve(context.Background(), searchEndpoint, map[string]string{"query": "golang"})
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	// Refused with ExpiredToken: one new session and one more query, in
	// the same attempt.
	if pds.sessions.Load() != 2 || pds.queries.Load() != 2 || out.Trace.Attempts != 1 {
		t.Errorf("sessions %d, queries %d, attempts %d; want 2, 2, 1", pds.sessions.Load(), pds.queries.Load(), out.Trace.Attempts)
	}
	out = r.Serve(context.Background(), searchEndpoint, map[string]string{"query": "golang"})
	if out.Fault != nil || pds.sessions.Load() != 2 || pds.queries.Load() != 3 {
		t.Errorf("second call: fault %v, sessions %d, queries %d; want the new token reused", out.Fault, pds.sessions.Load(), pds.queries.Load())
	}
}

func TestSessionRecreatedBeforeExpiry(t *testing.T) {
	soon := jwtExpiring("soon", time.Now().Add(expiryMargin/2))
	pds := &fakePDS{t: t, tokens: []string{soon}}
	r := pds.runner(t)
	for range 2 {
		if out := r.Serve(context.Background(), searchEndpoint, map[string]string{"query": "golang"}); out.Fault != nil {
			t.Fatal(out.Fault)
		}
	}
	if pds.sessions.Load() != 2 {
		t.Errorf("sessions = %d; a token about to expire is replaced before use", pds.sessions.Load())
	}
}

func TestSessionShared(t *testing.T) {
	pds := &fakePDS{t: t, tokens: []string{jwtExpiring("shared", time.Now().Add(time.Hour))}}
	r := pds.runner(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if out := r.Serve(context.Background(), searchEndpoint, map[string]string{"query": "golang"}); out.Fault != nil {
				t.Error(out.Fault)
			}
		})
	}
	wg.Wait()
	if pds.sessions.Load() != 1 || pds.queries.Load() != 8 {
		t.Errorf("sessions %d, queries %d; want 1 session for 8 concurrent calls", pds.sessions.Load(), pds.queries.Load())
	}
}

func TestSessionRefused(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		reason     string
	}{
		{"bad password", `{"error":"AuthenticationRequired","message":"Invalid identifier or password"}`, http.StatusUnauthorized, "AuthenticationRequired"},
		{"second factor", `{"error":"AuthFactorTokenRequired","message":"A sign in code has been sent to your email address"}`, http.StatusBadRequest, "app password"},
		{"echoes credentials", `{"error":"AuthenticationRequired","message":"no account ` + testIdentifier + `"}`, http.StatusUnauthorized, "the session was refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pds := &fakePDS{t: t, signIn: func(w http.ResponseWriter) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}}
			out := pds.runner(t).Serve(context.Background(), searchEndpoint, map[string]string{"query": "golang"})
			var f *upstream.Fault
			if !errors.As(out.Fault, &f) || f.Kind != upstream.Rejected || f.Status != tc.status {
				t.Fatalf("fault = %v, want Rejected %d", out.Fault, tc.status)
			}
			if !strings.Contains(f.Reason, tc.reason) {
				t.Errorf("reason = %q, want it to mention %q", f.Reason, tc.reason)
			}
			if strings.Contains(f.Reason, testIdentifier) || strings.Contains(f.Reason, testAppPassword) {
				t.Errorf("reason %q repeats a credential", f.Reason)
			}
			if pds.queries.Load() != 0 {
				t.Error("a query was made without a session")
			}
		})
	}
}

func TestSessionInactiveAccount(t *testing.T) {
	pds := &fakePDS{t: t, signIn: func(w http.ResponseWriter) {
		_, _ = io.WriteString(w, `{"accessJwt":"narrow","refreshJwt":"r","handle":"h.example.com","did":"did:plc:sample2meridian4mmmmmmmm","active":false,"status":"takendown"}`)
	}}
	out := pds.runner(t).Serve(context.Background(), searchEndpoint, map[string]string{"query": "golang"})
	if out.Fault == nil || out.Fault.Kind != upstream.Rejected || !strings.Contains(out.Fault.Reason, "takendown") {
		t.Errorf("fault = %v", out.Fault)
	}
}

func TestTokenExpiry(t *testing.T) {
	at := time.Unix(4102444800, 0)
	if got := tokenExpiry(fixtureAccessJwt(t)); !got.Equal(at) {
		t.Errorf("fixture token expiry = %v, want %v", got, at)
	}
	for _, bad := range []string{"", "opaque-token", "a.%%%.c", "a." + b64json(map[string]any{"exp": "soon"}) + ".c"} {
		if got := tokenExpiry(bad); !got.IsZero() {
			t.Errorf("tokenExpiry(%q) = %v, want zero (unknown)", bad, got)
		}
	}
}

func TestEmptyPageEndsListing(t *testing.T) {
	cursor := "50"
	d := mapSearch(searchPostsOutput{Cursor: &cursor, Posts: &[]postView{}}, upstreamDefaultLimit)
	if d.Cursor != nil || d.HasMore == nil || *d.HasMore || d.Count != 0 || d.Items == nil {
		t.Errorf("cursor %v, has_more %v, count %d, items %v", d.Cursor, d.HasMore, d.Count, d.Items)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "empty page") {
		t.Errorf("_warnings = %v", d.Warnings)
	}
}
