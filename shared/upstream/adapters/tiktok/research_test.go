package tiktok_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/tiktok"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// The research client's credentials: they must reach the token endpoint
// only, and never a fault's reason.
const (
	clientKey    = "sample-client-key-7f3a"
	clientSecret = "sample-client-secret-9c1e"
	fixtureToken = "clt.sample-research-token-0001"
)

// now is the runner's clock: 09:30:15 UTC on 3 November 2026, so the video
// query's windows are fixed (today is 20261103).
var now = time.Date(2026, 11, 3, 9, 30, 15, 0, time.UTC)

var secrets = map[string]string{tiktok.ClientKeySecret: clientKey, tiktok.ClientSecretSecret: clientSecret}

func options(clock func() time.Time) upstream.Options {
	o := adaptertest.Options
	// The route's own attempt timeout (15 s) leaves room for retries only
	// in a call longer than the harness's 5 s.
	o.Timeout = 40 * time.Second
	o.Now = clock
	return o
}

func research(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, tiktok.ResearchProvider(), secrets, options(func() time.Time { return now }))
}

func warningsOf(data map[string]any) string {
	var out []string
	for _, w := range data["_warnings"].([]any) {
		out = append(out, w.(string))
	}
	return strings.Join(out, " | ")
}

// calls lists the upstream requests as "METHOD /path".
func calls(u *adaptertest.Upstream) []string {
	var out []string
	for _, r := range u.Replay.Requests() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

const (
	tokenCall    = "POST /v2/oauth/token/"
	userCall     = "POST /v2/research/user/info/"
	queryCall    = "POST /v2/research/video/query/"
	commentsCall = "POST /v2/research/video/comment/list/"
)

func body(t *testing.T, r replay.Request) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(r.Body)))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("%s body %q: %v", r.Path, r.Body, err)
	}
	return m
}

func TestProfile(t *testing.T) {
	u := research(t)
	data := u.Data(t, tiktok.ProfileEndpoint, "handle=samplecreator", "profile-samplecreator")
	if got := strings.Join(calls(u), ", "); got != tokenCall+", "+userCall {
		t.Fatalf("calls %s", got)
	}
	reqs := u.Replay.Requests()
	tok := reqs[0]
	form, err := url.ParseQuery(string(tok.Body))
	if err != nil || form.Get("client_key") != clientKey || form.Get("client_secret") != clientSecret ||
		form.Get("grant_type") != "client_credentials" || len(form) != 3 {
		t.Errorf("token form %q", tok.Body)
	}
	if ct := tok.Header.Get("content-type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("token content-type %q", ct)
	}
	info := reqs[1]
	if info.Header.Get("authorization") != "Bearer "+fixtureToken || info.Header.Get("content-type") != "application/json" {
		t.Errorf("user info headers %v", info.Header)
	}
	if f := url.Values(info.Query).Get("fields"); f != "display_name,bio_description,avatar_url,is_verified,follower_count,following_count,likes_count,video_count,bio_url" {
		t.Errorf("fields %q", f)
	}
	if b := body(t, info); len(b) != 1 || b["username"] != "samplecreator" {
		t.Errorf("user info body %v", b)
	}
	want := map[string]any{
		"handle": "samplecreator", "name": "Sample Creator", "url": "https://www.tiktok.com/@samplecreator",
		"followers": 48291.0, "follower_source_field": "follower_count", "following": 182.0, "likes_count": 1204567.0,
		"posts_count": 7.0, "verified": true, "bio_link": "sample.example.com/links", "id": nil, "private": nil,
	}
	for k, v := range want {
		if got, ok := data[k]; !ok || got != v {
			t.Errorf("%s = %#v (present %v); want %#v", k, got, ok, v)
		}
	}
	if w := warningsOf(data); w != tiktok.WarnNoID {
		t.Errorf("_warnings %s", w)
	}
}

// The registry folds the username to lower case and refuses a leading @
// (and anything that is no username) before any request or charge.
func TestHandleValidation(t *testing.T) {
	u := research(t)
	u.Data(t, tiktok.ProfileEndpoint, "handle=SampleCreator", "profile-samplecreator")
	e, _ := registry.Default().Endpoint(tiktok.ProfileEndpoint)
	for _, h := range []string{"@samplecreator", "sample creator", "sample/creator", strings.Repeat("a", 25), "sample-creator"} {
		_, verr := params.Validate(e, url.Values{"handle": {h}}, nil)
		if verr == nil || verr.Status != http.StatusUnprocessableEntity || verr.Details["field"] != "handle" {
			t.Errorf("%q: %v", h, verr)
		}
	}
	// An adapter given a bad handle directly refuses it without a request.
	before := len(u.Replay.Requests())
	out := u.Runner.Serve(context.Background(), tiktok.ProfileEndpoint, map[string]string{"handle": "@x"})
	if out.Fault == nil || out.Fault.Kind != upstream.InvalidParameter || out.Fault.Field != "handle" || len(u.Replay.Requests()) != before {
		t.Errorf("fault %v", out.Fault)
	}
}

func TestProfileWithoutFollowers(t *testing.T) {
	data := research(t).Data(t, tiktok.ProfileEndpoint, "handle=samplenofollowers", "profile-samplenofollowers")
	if v, ok := data["followers"]; !ok || v != nil || data["follower_source_field"] != nil || data["posts_count"] != 5.0 {
		t.Errorf("data %v", data)
	}
	if !strings.Contains(warningsOf(data), tiktok.WarnNoFollowers) {
		t.Errorf("_warnings %s", warningsOf(data))
	}
}

// One token serves every call until it nears its expiry.
func TestTokenIsCachedUntilExpiry(t *testing.T) {
	var mu sync.Mutex
	clock := now
	u := adaptertest.StartWith(t, tiktok.ResearchProvider(), secrets, options(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	}))
	count := func() int {
		n := 0
		for _, c := range calls(u) {
			if c == tokenCall {
				n++
			}
		}
		return n
	}
	for _, h := range []string{"samplecreator", "samplequiet", "samplecreator"} {
		if out := u.Serve(t, tiktok.ProfileEndpoint, "handle="+h); out.Fault != nil {
			t.Fatal(out.Fault)
		}
	}
	if n := count(); n != 1 {
		t.Fatalf("%d token requests for three calls", n)
	}
	mu.Lock()
	clock = now.Add(2*time.Hour - 4*time.Minute) // inside the renewal margin
	mu.Unlock()
	if out := u.Serve(t, tiktok.ProfileEndpoint, "handle=samplecreator"); out.Fault != nil {
		t.Fatal(out.Fault)
	}
	if n := count(); n != 2 {
		t.Errorf("%d token requests after expiry; want 2", n)
	}
}

// midnight is how long the fixed clock is from the next 00:00 UTC.
const untilMidnight = 14*time.Hour + 29*time.Minute + 45*time.Second

func TestProfileFaults(t *testing.T) {
	cases := []struct {
		handle     string
		kind       upstream.FaultKind
		status     int
		retryAfter time.Duration
		calls      string
	}{
		{"samplenobody", upstream.NotFound, 400, 0, tokenCall + ", " + userCall},
		{"samplegone", upstream.NotFound, 0, 0, tokenCall + ", " + userCall},
		{"sample404", upstream.NotFound, 0, 0, tokenCall + ", " + userCall},
		// The daily quota: the route rests until midnight UTC unless the
		// source says how long.
		{"sampleratelimited", upstream.RateLimited, 429, untilMidnight, tokenCall + ", " + userCall},
		{"sampleslowdown", upstream.RateLimited, 429, 2 * time.Minute, tokenCall + ", " + userCall},
		{"samplebroken", upstream.ServerError, 500, 0, tokenCall + ", " + userCall + ", " + userCall + ", " + userCall},
		{"samplegarbled", upstream.Malformed, 0, 0, tokenCall + ", " + userCall},
		{"samplenodata", upstream.Malformed, 0, 0, tokenCall + ", " + userCall},
		// A refused token is renewed once; refused again, the route is refused.
		{"sampleexpired", upstream.Rejected, 401, 0, tokenCall + ", " + userCall + ", " + tokenCall + ", " + userCall},
		// A missing scope is no token problem: no renewal.
		{"samplescope", upstream.Rejected, 401, 0, tokenCall + ", " + userCall},
		{"sampleblocked", upstream.Rejected, 403, 0, tokenCall + ", " + userCall},
		{"samplebadparams", upstream.Rejected, 400, 0, tokenCall + ", " + userCall},
	}
	for _, tc := range cases {
		t.Run(tc.handle, func(t *testing.T) {
			u := research(t)
			out := u.Fault(t, tiktok.ProfileEndpoint, "handle="+tc.handle, tc.kind)
			if tc.status != 0 && out.Fault.Status != tc.status {
				t.Errorf("status %d; want %d", out.Fault.Status, tc.status)
			}
			if out.Fault.RetryAfter != tc.retryAfter {
				t.Errorf("retry after %v; want %v", out.Fault.RetryAfter, tc.retryAfter)
			}
			if got := strings.Join(calls(u), ", "); got != tc.calls {
				t.Errorf("calls %s; want %s", got, tc.calls)
			}
			if r := out.Fault.Error(); strings.Contains(r, clientSecret) || strings.Contains(r, fixtureToken) {
				t.Errorf("a credential leaked: %s", r)
			}
		})
	}
	// Spec 7: the caller sees 404, 429 with retry-after, 502.
	u := research(t)
	if e := u.Serve(t, tiktok.ProfileEndpoint, "handle=samplenobody").Error(); e.Status != 404 {
		t.Errorf("unknown account: %d", e.Status)
	}
	if e := u.Serve(t, tiktok.ProfileEndpoint, "handle=sampleratelimited").Error(); e.Status != 429 || e.Header.Get("retry-after") != "52185" {
		t.Errorf("rate limited: %d %q", e.Status, e.Header.Get("retry-after"))
	}
}

// tokenServer is the source behind a test server: the token endpoint
// answers token, the data endpoints data (both count their requests).
func tokenServer(t *testing.T, token func(n int) (int, string), data func(auth string) (int, string)) (*upstream.Runner, *int, *int) {
	t.Helper()
	var mu sync.Mutex
	tokens, datas := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("content-type", "application/json")
		if r.URL.Path == "/v2/oauth/token/" {
			tokens++
			status, b := token(tokens)
			w.WriteHeader(status)
			_, _ = w.Write([]byte(b))
			return
		}
		datas++
		status, b := data(r.Header.Get("authorization"))
		w.WriteHeader(status)
		_, _ = w.Write([]byte(b))
	}))
	t.Cleanup(srv.Close)
	p := tiktok.ResearchProvider()
	values := map[string]string{p.BaseURLVar(): srv.URL, tiktok.ClientKeySecret: clientKey, tiktok.ClientSecretSecret: clientSecret}
	runner := upstream.NewRunner([]*upstream.Provider{p}, upstream.Settings{
		Lookup:  func(n string) (string, bool) { v, ok := values[n]; return v, ok },
		Options: options(func() time.Time { return now }),
	})
	return runner, &tokens, &datas
}

const userOK = `{"data":{"display_name":"Sample","follower_count":3,"video_count":1},"error":{"code":"ok","message":"","log_id":"1"}}`

// A token refused before its time is replaced once, and the call succeeds.
func TestTokenRenewedWhenRefused(t *testing.T) {
	runner, tokens, datas := tokenServer(t, func(n int) (int, string) {
		return 200, `{"access_token":"clt.token-` + string(rune('0'+n)) + `","expires_in":7200,"token_type":"Bearer"}`
	}, func(auth string) (int, string) {
		if auth != "Bearer clt.token-2" {
			return 401, `{"error":{"code":"access_token_invalid","message":"The access token is invalid or not found in the request.","log_id":"2"}}`
		}
		return 200, userOK
	})
	out := runner.Serve(context.Background(), tiktok.ProfileEndpoint, map[string]string{"handle": "sample"})
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	if *tokens != 2 || *datas != 2 {
		t.Errorf("%d token and %d data requests; want 2 and 2", *tokens, *datas)
	}
	// The renewed token is the cached one now.
	if out := runner.Serve(context.Background(), tiktok.ProfileEndpoint, map[string]string{"handle": "sample"}); out.Fault != nil || *tokens != 2 {
		t.Errorf("fault %v, %d token requests", out.Fault, *tokens)
	}
}

// The token endpoint's refusals: OAuth errors (with or without a 4xx) are
// a refusal of the configured credentials, 401, which rests the route;
// its rate limit and failures are classified like the API's.
func TestTokenFaults(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		kind   upstream.FaultKind
		want   int
	}{
		{"invalid client, 400", 400, `{"error":"invalid_client","error_description":"Client key or secret is incorrect.","log_id":"3"}`, upstream.Rejected, 401},
		{"invalid client, 200", 200, `{"error":"invalid_client","error_description":"Client key or secret is incorrect.","log_id":"4"}`, upstream.Rejected, 401},
		{"no token", 200, `{"expires_in":7200,"token_type":"Bearer"}`, upstream.Malformed, 0},
		{"not json", 200, `<html>sample</html>`, upstream.Malformed, 0},
		{"rate limited", 429, `{"error":"rate_limit_exceeded","error_description":"slow down","log_id":"5"}`, upstream.RateLimited, 429},
		{"server error", 503, `{}`, upstream.ServerError, 503},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runner, _, datas := tokenServer(t, func(int) (int, string) { return tc.status, tc.body },
				func(string) (int, string) { return 200, userOK })
			out := runner.Serve(context.Background(), tiktok.ProfileEndpoint, map[string]string{"handle": "sample"})
			if out.Fault == nil || out.Fault.Kind != tc.kind || (tc.want != 0 && out.Fault.Status != tc.want) {
				t.Fatalf("fault %v; want %s %d", out.Fault, tc.kind, tc.want)
			}
			if *datas != 0 {
				t.Errorf("%d data requests without a token", *datas)
			}
			if strings.Contains(out.Fault.Error(), clientSecret) {
				t.Errorf("the secret leaked: %v", out.Fault)
			}
		})
	}
}

// Without both credentials the route is not eligible: 501, no request.
func TestRouteNeedsBothCredentials(t *testing.T) {
	p := tiktok.ResearchProvider()
	for _, values := range []map[string]string{{tiktok.ClientKeySecret: clientKey}, {tiktok.ClientSecretSecret: clientSecret}, {}} {
		runner := upstream.NewRunner([]*upstream.Provider{p}, upstream.Settings{Lookup: func(n string) (string, bool) { v, ok := values[n]; return v, ok }})
		for _, key := range []string{tiktok.ProfileEndpoint, tiktok.PostsEndpoint, tiktok.CommentsEndpoint} {
			if runner.Eligible(key) {
				t.Errorf("%v: %s is eligible", values, key)
			}
		}
	}
}
