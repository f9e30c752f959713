package pipeline

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// registerAdapter answers company_registry/search from /search?q=, the
// shape of a simple register API.
func registerAdapter(ctx context.Context, c *upstream.Call) (any, error) {
	var body struct {
		Items []struct {
			Number string `json:"number"`
		} `json:"items"`
	}
	if _, err := c.GetJSON(ctx, "/search", map[string][]string{"q": {c.Param("query")}}, nil, &body); err != nil {
		return nil, err
	}
	if body.Items == nil {
		return nil, upstream.MalformedFault("no items")
	}
	items := []any{}
	for _, it := range body.Items {
		items = append(items, map[string]any{"company_number": it.Number})
	}
	return map[string]any{"items": items, "count": len(items)}, nil
}

// faultyUpstream is a replay upstream with one fixture per fault, behind
// two providers: "primary" answers by query, "secondary" always answers.
func faultyUpstream(t *testing.T) (*replay.Server, []*upstream.Provider) {
	t.Helper()
	srv := replay.New()
	add := func(provider, q string, status int, body, bodyText, fault string, delay int, headers map[string]string) {
		var fx replay.Fixture
		fx.Match.Path = "/search"
		if q == "" {
			fx.Default = true
		} else {
			fx.Match.Query = map[string]string{"q": q}
		}
		fx.Response.Status, fx.Response.DelayMS, fx.Response.Headers, fx.Fault = status, delay, headers, fault
		if body != "" {
			fx.Response.Body = json.RawMessage(body)
		}
		if bodyText != "" {
			fx.Response.BodyText = &bodyText
		}
		if err := srv.Add(provider, provider+"-"+q, fx); err != nil {
			t.Fatal(err)
		}
	}
	ok := `{"items":[{"number":"00000006"}]}`
	add("primary", "", 200, ok, "", "", 0, nil)
	add("primary", "server-error", 500, `{"error":"boom"}`, "", "", 0, nil)
	add("primary", "rate-limited", 429, `{"error":"slow down"}`, "", "", 0, map[string]string{"retry-after": "9"})
	add("primary", "slow", 200, ok, "", "", 2000, nil)
	add("primary", "reset", 200, ok, "", "reset", 0, nil)
	add("primary", "truncated", 200, ok, "", "truncate", 0, nil)
	add("primary", "malformed", 200, "", `{"items": [`, "", 0, nil)
	add("primary", "missing", 404, `{"error":"not found"}`, "", "", 0, nil)
	add("primary", "failover", 503, `{}`, "", "", 0, nil)
	add("secondary", "failover", 200, `{"items":[{"number":"SC000123"}]}`, "", "", 0, nil)
	add("secondary", "", 200, `{"items":[{"number":"SC000999"}]}`, "", "", 0, nil)
	providers := []*upstream.Provider{
		{Name: "primary", BaseURL: "http://unused", Endpoints: map[string]upstream.Adapter{"company_registry/search": registerAdapter}},
		{Name: "secondary", BaseURL: "http://unused", Endpoints: map[string]upstream.Adapter{"company_registry/search": registerAdapter}},
	}
	return srv, providers
}

var upstreamTestOptions = upstream.Options{
	AttemptTimeout: 150 * time.Millisecond,
	Timeout:        3 * time.Second,
	BackoffBase:    2 * time.Millisecond,
	BackoffMax:     10 * time.Millisecond,
	CooldownAfter:  1000, // cooldown has its own test
}

func withUpstream(t *testing.T, providers []*upstream.Provider, srv *replay.Server, opts upstream.Options) func(*Config) {
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	runner := upstream.NewRunner(providers, upstream.Settings{ReplayURL: base, Options: opts})
	return func(c *Config) {
		c.Upstream = runner
		c.FairUse, _ = c.Store.(store.FairUse)
		c.FairUseLimits = map[string]int64{"company_registry/search": 1000}
	}
}

func TestUpstreamFaultMatrix(t *testing.T) { testUpstreamFaultMatrix(t, newBilled) }

// Every upstream outcome through the whole pipeline, with the ledger
// checked after each: a success is one debit; a failure a debit and its
// refund (net 0); fair use counts every attempt.
func testUpstreamFaultMatrix(t *testing.T, newBilled billedFactory) {
	srv, providers := faultyUpstream(t)
	b := newBilled(t, 100, nil, withUpstream(t, providers[:1], srv, upstreamTestOptions))
	fairUseLeft := int64(1000)
	for _, c := range []struct {
		query      string
		status     int
		typ        string
		attempts   int64
		retryAfter string
	}{
		{"acme", 200, "", 1, ""},
		{"server-error", 502, "UPSTREAM_ERROR", 3, ""},
		{"slow", 504, "UPSTREAM_TIMEOUT", 3, ""},
		{"reset", 502, "UPSTREAM_ERROR", 3, ""},
		{"truncated", 502, "UPSTREAM_ERROR", 3, ""},
		{"malformed", 502, "UPSTREAM_ERROR", 1, ""},
		{"missing", 404, "RESOURCE_NOT_FOUND", 1, ""},
		{"failover", 502, "UPSTREAM_ERROR", 3, ""},      // 503 from the only route
		{"rate-limited", 429, "UPSTREAM_ERROR", 1, "9"}, // last: the route then rests 9 s
	} {
		before := len(srv.Requests())
		r := b.call("/v1/company_registry/search?query=" + c.query)
		checkEnvelope(t, r)
		if r.code != c.status || (c.typ != "" && r.errorType() != c.typ) {
			t.Fatalf("%s: %d %s", c.query, r.code, r.raw)
		}
		if got := r.header.Get("retry-after"); got != c.retryAfter {
			t.Errorf("%s: retry-after %q; want %q", c.query, got, c.retryAfter)
		}
		id := r.body["request_id"].(string)
		e := b.entries(t, id)
		if c.status == 200 {
			if len(e) != 1 || e[0].Type != store.EntryDebit || e[0].Amount != -1 || r.body["credits_used"] != float64(1) {
				t.Fatalf("%s: one debit expected: %+v", c.query, e)
			}
		} else if len(e) != 2 || e[0].Type != store.EntryRefund || e[1].Type != store.EntryDebit || e[0].Amount+e[1].Amount != 0 ||
			r.body["credits_used"] != float64(0) {
			t.Fatalf("%s: debit and refund expected: %+v %s", c.query, e, r.raw)
		}
		// An attempt the client gave up on (slow) may reach the server's
		// log a moment after the call ended, on a loaded machine.
		for deadline := time.Now().Add(2 * time.Second); int64(len(srv.Requests())-before) < c.attempts && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if sent := int64(len(srv.Requests()) - before); sent != c.attempts {
			t.Errorf("%s: the upstream saw %d attempts; want %d", c.query, sent, c.attempts)
		}
		fairUseLeft -= c.attempts
		if got := r.header.Get("x-fairuse-remaining"); got != strconv.FormatInt(fairUseLeft, 10) {
			t.Errorf("%s: x-fairuse-remaining %s; want %d (every attempt counts)", c.query, got, fairUseLeft)
		}
	}
	bal, err := b.store.Account(context.Background(), b.account.ID)
	if err != nil || bal.CreditsRemaining != 99 {
		t.Fatalf("balance %+v (%v); want 99 after one success", bal, err)
	}
}

func TestUpstreamFailover(t *testing.T) { testUpstreamFailover(t, newBilled) }

// A failing route hands over to the next; a "not found" does not.
func testUpstreamFailover(t *testing.T, newBilled billedFactory) {
	srv, providers := faultyUpstream(t)
	b := newBilled(t, 10, nil, withUpstream(t, providers, srv, upstreamTestOptions))
	r := b.call("/v1/company_registry/search?query=failover")
	if r.code != 200 || r.body["credits_used"] != float64(1) {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if items := r.body["data"].(map[string]any)["items"].([]any); items[0].(map[string]any)["company_number"] != "SC000123" {
		t.Fatalf("not served by the second route: %s", r.raw)
	}
	if e := b.entries(t, r.body["request_id"].(string)); len(e) != 1 || e[0].Amount != -1 {
		t.Fatalf("one debit expected: %+v", e)
	}
	if !strings.Contains(b.logs.String(), `"served_by":"secondary","upstream_attempts":4,"legs":[{"served_by":"primary","attempts":3,"ok":false,"status":503,"fault":"server_error"},{"served_by":"secondary","attempts":1,"ok":true}]`) {
		t.Errorf("the log line does not record the route and attempts:\n%s", b.logs.String())
	}
	before := len(srv.Requests())
	r = b.call("/v1/company_registry/search?query=missing")
	if r.code != 404 || r.errorType() != "RESOURCE_NOT_FOUND" || len(srv.Requests()) != before+1 {
		t.Fatalf("not found must end the call at the first route: %d %s, %d requests", r.code, r.raw, len(srv.Requests())-before)
	}
}

func TestUpstreamCooldownAnswers503(t *testing.T) {
	srv, providers := faultyUpstream(t)
	opts := upstreamTestOptions
	opts.CooldownAfter, opts.Cooldown = 1, time.Minute
	b := newBilled(t, 10, nil, withUpstream(t, providers[:1], srv, opts))
	if r := b.call("/v1/company_registry/search?query=server-error"); r.code != 502 {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	before := len(srv.Requests())
	r := b.call("/v1/company_registry/search?query=acme")
	if r.code != 503 || r.errorType() != "UPSTREAM_ERROR" || r.header.Get("retry-after") != "60" || r.body["credits_used"] != float64(0) {
		t.Fatalf("%d %v %s", r.code, r.header, r.raw)
	}
	if len(srv.Requests()) != before {
		t.Fatal("a cooling route was called")
	}
	if bal, _ := b.store.Account(context.Background(), b.account.ID); bal.CreditsRemaining != 10 {
		t.Fatalf("balance %d; want 10", bal.CreditsRemaining)
	}
}

// pinnedResolver answers every name with one address.
type pinnedResolver struct{ addr netip.Addr }

func (r pinnedResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{r.addr}, nil
}

func TestUnsafeURLIsRefusedBeforeAnyFetchOrCharge(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	fetched := atomic.Int32{}
	// An endpoint whose URL parameter may name any public page (one with
	// hosts would refuse these URLs as another site's first).
	reg, err := registry.New([]registry.Endpoint{{
		Platform: "qa_test", ID: "fetch", Family: registry.Knowledge, Kind: registry.Data, Cost: 1,
		Origin: registry.SpecListed, Name: "Fetch a page",
		Params: []registry.Param{registry.P("url", registry.URL, "Any public page.").Req()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	page := &upstream.Provider{Name: "pages", BaseURL: "http://unused", Endpoints: map[string]upstream.Adapter{
		"qa_test/fetch": func(ctx context.Context, c *upstream.Call) (any, error) {
			fetched.Add(1)
			if _, err := c.GetPublic(ctx, "url", c.Param("url"), nil); err != nil {
				return nil, err
			}
			return map[string]any{}, nil
		},
	}}
	policy := &upstream.URLPolicy{Resolver: pinnedResolver{netip.MustParseAddr("127.0.0.1")}}
	runner := upstream.NewRunner([]*upstream.Provider{page}, upstream.Settings{URLPolicy: policy, Options: upstreamTestOptions})
	b := newBilled(t, 10, nil, func(c *Config) { c.Upstream, c.URLPolicy, c.Registry = runner, policy, reg })
	for _, u := range []string{
		"http://127.0.0.1:" + port + "/q",
		"http://[::1]:" + port + "/q",
		"http://10.1.2.3/q",
		"http://169.254.169.254/latest/meta-data/",
		"http://resolves-to-loopback.example:" + port + "/q",
	} {
		r := b.call("/v1/qa_test/fetch?url=" + u)
		if r.code != 422 || r.errorType() != "INVALID_PARAMETERS" || r.details()["field"] != "url" || r.details()["reason"] != "unsafe_url" {
			t.Fatalf("%s: %d %s", u, r.code, r.raw)
		}
		if e := b.entries(t, r.body["request_id"].(string)); len(e) != 0 {
			t.Fatalf("%s: refused before any charge, yet the ledger has %+v", u, e)
		}
	}
	if fetched.Load() != 0 || accepted.Load() != 0 {
		t.Fatalf("adapter ran %d times, %d connections accepted", fetched.Load(), accepted.Load())
	}
}

// An endpoint with no eligible route keeps answering 501 with its sandbox.
func TestEndpointWithoutEligibleRoute(t *testing.T) {
	keyed := &upstream.Provider{Name: "keyed", BaseURL: "http://unused",
		Secrets:   []upstream.Secret{{Name: "MERIDIAN_TEST_KEY", Required: true}},
		Endpoints: map[string]upstream.Adapter{"company_registry/search": registerAdapter}}
	runner := upstream.NewRunner([]*upstream.Provider{keyed}, upstream.Settings{})
	b := newBilled(t, 10, nil, func(c *Config) { c.Upstream = runner })
	r := b.call("/v1/company_registry/search?query=acme")
	if r.code != http.StatusNotImplemented || r.details()["sandbox"] != "/sandbox/company_registry/search" {
		t.Fatalf("%d %s", r.code, r.raw)
	}
}

// An upstream rate limit with a known wait rests the route for that wait:
// the next call is 503 with the remaining wait, not another refused attempt.
func TestUpstreamRateLimitRestsTheRoute(t *testing.T) {
	srv, providers := faultyUpstream(t)
	b := newBilled(t, 10, nil, withUpstream(t, providers[:1], srv, upstreamTestOptions))
	if r := b.call("/v1/company_registry/search?query=rate-limited"); r.code != 429 || r.header.Get("retry-after") != "9" {
		t.Fatalf("%d %v %s", r.code, r.header, r.raw)
	}
	before := len(srv.Requests())
	r := b.call("/v1/company_registry/search?query=acme")
	if r.code != 503 || r.header.Get("retry-after") == "" || len(srv.Requests()) != before {
		t.Fatalf("%d %v %s", r.code, r.header, r.raw)
	}
	if got := r.header.Get("x-fairuse-remaining"); got != "999" {
		t.Errorf("a call no route served counts no attempt: x-fairuse-remaining %s", got)
	}
}
