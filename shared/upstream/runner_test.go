package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
)

// quick keeps retries and timeouts short.
var quick = Options{
	AttemptTimeout: 300 * time.Millisecond,
	Timeout:        2 * time.Second,
	BackoffBase:    2 * time.Millisecond,
	BackoffMax:     10 * time.Millisecond,
}

// scripted is an upstream whose answers are chosen per request number.
type scripted struct {
	calls  atomic.Int32
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.answer(int(s.calls.Add(1)), w, r)
}

func serveJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// echoAdapter fetches /thing and returns its "name".
func echoAdapter(ctx context.Context, c *Call) (any, error) {
	var out struct {
		Name *string `json:"name"`
	}
	if _, err := c.GetJSON(ctx, "/thing", nil, nil, &out); err != nil {
		return nil, err
	}
	if out.Name == nil {
		return nil, MalformedFault("no name")
	}
	return map[string]any{"name": *out.Name}, nil
}

// upstreamWith starts s and a provider named name pointing at it.
func upstreamWith(t *testing.T, name string, s *scripted) *Provider {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &Provider{Name: name, BaseURL: srv.URL, Endpoints: map[string]Adapter{"test/thing": echoAdapter}}
}

func runner(opts Options, providers ...*Provider) *Runner {
	return NewRunner(providers, Settings{Options: opts})
}

func TestFaultMatrix(t *testing.T) {
	cases := []struct {
		name         string
		answer       func(n int, w http.ResponseWriter, r *http.Request)
		wantKind     FaultKind
		wantStatus   int
		wantType     envelope.Type
		wantAttempts int
		retryAfter   string
	}{
		{"5xx is retried then 502", func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 500, `{}`) },
			ServerError, 502, envelope.UpstreamError, 3, ""},
		{"rate limit is 429 with retry-after, not retried", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("retry-after", "7")
			serveJSON(w, 429, `{}`)
		}, RateLimited, 429, envelope.UpstreamError, 1, "7"},
		{"malformed body is 502, not retried", func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name": `) },
			Malformed, 502, envelope.UpstreamError, 1, ""},
		{"unmappable body is 502", func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"other": 1}`) },
			Malformed, 502, envelope.UpstreamError, 1, ""},
		{"not found is 404, definitive", func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 404, `{}`) },
			NotFound, 404, envelope.ResourceNotFound, 1, ""},
		{"refusal is 502, not retried", func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 401, `{}`) },
			Rejected, 502, envelope.UpstreamError, 1, ""},
		{"per-attempt timeout is retried then 504", func(_ int, w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, Timeout, 504, envelope.UpstreamTimeout, 3, ""},
		{"connection reset is retried then 502", func(_ int, w http.ResponseWriter, _ *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}, Transport, 502, envelope.UpstreamError, 3, ""},
		{"truncated body is retried then 502", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("content-length", "100")
			w.WriteHeader(200)
			_, _ = w.Write([]byte(`{"name":`))
		}, Transport, 502, envelope.UpstreamError, 3, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := &scripted{answer: tc.answer}
			r := runner(quick, upstreamWith(t, "one", up))
			out := r.Serve(context.Background(), "test/thing", nil)
			if out.Fault == nil || out.Fault.Kind != tc.wantKind {
				t.Fatalf("fault = %v; want %s", out.Fault, tc.wantKind)
			}
			if out.Trace.Attempts != tc.wantAttempts || int(up.calls.Load()) != tc.wantAttempts {
				t.Fatalf("attempts = %d (upstream saw %d); want %d", out.Trace.Attempts, up.calls.Load(), tc.wantAttempts)
			}
			e := out.Error()
			if e.Status != tc.wantStatus || e.Type != tc.wantType {
				t.Fatalf("error = %d %s; want %d %s", e.Status, e.Type, tc.wantStatus, tc.wantType)
			}
			if got := e.Header.Get("retry-after"); got != tc.retryAfter {
				t.Fatalf("retry-after = %q; want %q", got, tc.retryAfter)
			}
		})
	}
}

func TestRetrySucceeds(t *testing.T) {
	up := &scripted{answer: func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < 3 {
			serveJSON(w, 503, `{}`)
			return
		}
		serveJSON(w, 200, `{"name":"ok"}`)
	}}
	out := runner(quick, upstreamWith(t, "one", up)).Serve(context.Background(), "test/thing", nil)
	if out.Fault != nil || out.Trace.Attempts != 3 || out.Trace.ServedBy != "one" {
		t.Fatalf("outcome = %+v", out)
	}
	if len(out.Trace.Legs) != 1 || !out.Trace.Legs[0].OK || out.Trace.Legs[0].Attempts != 3 {
		t.Fatalf("legs = %+v", out.Trace.Legs)
	}
}

func TestRetryAfterBeyondBudgetStopsRetries(t *testing.T) {
	up := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("retry-after", "60")
		serveJSON(w, 503, `{}`)
	}}
	out := runner(quick, upstreamWith(t, "one", up)).Serve(context.Background(), "test/thing", nil)
	if out.Fault == nil || out.Trace.Attempts != 1 {
		t.Fatalf("a 503 asking for 60 s was retried: %+v", out.Trace)
	}
}

func TestOverallTimeout(t *testing.T) {
	slow := &scripted{answer: func(_ int, w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }}
	opts := quick
	opts.AttemptTimeout, opts.Timeout = time.Second, 150*time.Millisecond
	start := time.Now()
	out := runner(opts, upstreamWith(t, "one", slow), upstreamWith(t, "two", slow)).Serve(context.Background(), "test/thing", nil)
	if time.Since(start) > time.Second {
		t.Fatalf("the overall timeout did not bound the call: %v", time.Since(start))
	}
	if out.Fault == nil || out.Fault.Kind != Timeout || out.Error().Status != http.StatusGatewayTimeout {
		t.Fatalf("outcome = %+v", out)
	}
}

func TestFailoverToNextRoute(t *testing.T) {
	bad := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 500, `{}`) }}
	good := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name":"b"}`) }}
	out := runner(quick, upstreamWith(t, "a", bad), upstreamWith(t, "b", good)).Serve(context.Background(), "test/thing", nil)
	if out.Fault != nil || out.Trace.ServedBy != "b" || out.Trace.Attempts != 4 {
		t.Fatalf("outcome = %+v", out)
	}
	legs, _ := json.Marshal(out.Trace.Legs)
	if string(legs) != `[{"served_by":"a","attempts":3,"ok":false,"status":500,"fault":"server_error"},{"served_by":"b","attempts":1,"ok":true}]` {
		t.Fatalf("legs = %s", legs)
	}
}

func TestNotFoundIsNotAskedOfAnotherRoute(t *testing.T) {
	missing := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 404, `{}`) }}
	other := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name":"b"}`) }}
	out := runner(quick, upstreamWith(t, "a", missing), upstreamWith(t, "b", other)).Serve(context.Background(), "test/thing", nil)
	if out.Fault == nil || out.Fault.Kind != NotFound || other.calls.Load() != 0 {
		t.Fatalf("outcome = %+v; second route called %d times", out, other.calls.Load())
	}
}

func TestCooldown(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	opts := quick
	opts.CooldownAfter, opts.Cooldown = 2, 30*time.Second
	opts.Now = func() time.Time { return now }
	bad := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 502, `{}`) }}
	r := runner(opts, upstreamWith(t, "a", bad))
	for i := 0; i < 2; i++ {
		if out := r.Serve(context.Background(), "test/thing", nil); out.Fault == nil || out.Trace.Attempts != 3 {
			t.Fatalf("call %d: %+v", i+1, out)
		}
	}
	// Two unhealthy calls in a row: the route rests and is not called.
	out := r.Serve(context.Background(), "test/thing", nil)
	if bad.calls.Load() != 6 || out.Trace.Attempts != 0 {
		t.Fatalf("a cooling route was called: upstream saw %d", bad.calls.Load())
	}
	e := out.Error()
	if e.Status != http.StatusServiceUnavailable || e.Type != envelope.UpstreamError || e.Header.Get("retry-after") != "30" {
		t.Fatalf("cooling error = %d %s retry-after %q", e.Status, e.Type, e.Header.Get("retry-after"))
	}
	now = now.Add(20 * time.Second)
	if got := r.Serve(context.Background(), "test/thing", nil).Error().Header.Get("retry-after"); got != "10" {
		t.Fatalf("retry-after 20 s into the cooldown = %q; want 10", got)
	}
	now = now.Add(11 * time.Second)
	r.Serve(context.Background(), "test/thing", nil)
	if bad.calls.Load() == 6 {
		t.Fatal("the route was not called again after its cooldown")
	}
}

func TestCoolingRouteFailsOver(t *testing.T) {
	opts := quick
	opts.CooldownAfter = 1
	bad := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 500, `{}`) }}
	good := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name":"b"}`) }}
	r := runner(opts, upstreamWith(t, "a", bad), upstreamWith(t, "b", good))
	r.Serve(context.Background(), "test/thing", nil)
	out := r.Serve(context.Background(), "test/thing", nil)
	if out.Fault != nil || out.Trace.ServedBy != "b" || len(out.Trace.Legs) != 1 {
		t.Fatalf("outcome = %+v", out)
	}
	if bad.calls.Load() != 3 {
		t.Fatalf("cooling route called %d times; want 3 (the first call's attempts, then rest)", bad.calls.Load())
	}
}

func TestEligibility(t *testing.T) {
	p := &Provider{
		Name: "keyed", BaseURL: "https://api.example.test",
		Secrets:   []Secret{{Name: "MERIDIAN_KEYED_KEY", Required: true}, {Name: "MERIDIAN_KEYED_OPTIONAL"}},
		Endpoints: map[string]Adapter{"test/thing": echoAdapter},
	}
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if NewRunner([]*Provider{p}, Settings{Lookup: lookup}).Eligible("test/thing") {
		t.Fatal("eligible without its required secret")
	}
	env["MERIDIAN_KEYED_KEY"] = "k"
	env["MERIDIAN_UPSTREAM_KEYED_URL"] = "http://proxy.internal:8080"
	r := NewRunner([]*Provider{p}, Settings{Lookup: lookup})
	rt := r.routes["test/thing"][0]
	if !r.Eligible("test/thing") || rt.baseURL != "http://proxy.internal:8080" || rt.secrets["MERIDIAN_KEYED_KEY"] != "k" {
		t.Fatalf("route = %+v", rt)
	}
	if _, set := rt.secrets["MERIDIAN_KEYED_OPTIONAL"]; set {
		t.Fatal("an unset optional secret was given a value")
	}
	// Replay mode: eligible with placeholders, pointed at the replay upstream.
	delete(env, "MERIDIAN_KEYED_KEY")
	r = NewRunner([]*Provider{p}, Settings{Lookup: lookup, ReplayURL: "http://127.0.0.1:9"})
	rt = r.routes["test/thing"][0]
	if rt.baseURL != "http://127.0.0.1:9/keyed" || rt.secrets["MERIDIAN_KEYED_KEY"] != ReplaySecret {
		t.Fatalf("replay route = %+v", rt)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"5":                             5 * time.Second,
		"-1":                            0,
		"soon":                          0,
		"Sun, 22 Nov 2026 12:00:30 GMT": 30 * time.Second,
		"Sun, 22 Nov 2026 11:00:00 GMT": 0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v; want %v", in, got, want)
		}
	}
}

func TestInvalidParameterIsDefinitive(t *testing.T) {
	calls := 0
	refuse := &Provider{Name: "a", BaseURL: "http://unused", Endpoints: map[string]Adapter{"test/thing": func(context.Context, *Call) (any, error) {
		calls++
		return nil, InvalidParameterFault("cursor", "invalid_cursor", "cursor was changed; pass back the value a response gave.")
	}}}
	other := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name":"b"}`) }}
	out := runner(quick, refuse, upstreamWith(t, "b", other)).Serve(context.Background(), "test/thing", nil)
	if calls != 1 || other.calls.Load() != 0 || out.Fault == nil || out.Fault.Kind != InvalidParameter {
		t.Fatalf("outcome = %+v; attempts %d, second route %d", out, calls, other.calls.Load())
	}
	e := out.Error()
	if e.Status != http.StatusUnprocessableEntity || e.Type != envelope.InvalidParameters ||
		e.Details["field"] != "cursor" || e.Details["reason"] != "invalid_cursor" {
		t.Fatalf("error = %+v", e)
	}
}

func TestSecretsNeverReachAFaultReason(t *testing.T) {
	echo := &Provider{Name: "echo", BaseURL: "http://unused",
		Secrets: []Secret{{Name: "MERIDIAN_ECHO_KEY", Required: true}},
		Endpoints: map[string]Adapter{"test/thing": func(_ context.Context, c *Call) (any, error) {
			return nil, &Fault{Kind: Rejected, Reason: "bad key " + c.Secret("MERIDIAN_ECHO_KEY")}
		}}}
	lookup := func(string) (string, bool) { return "sk_live_hunter2", true }
	out := NewRunner([]*Provider{echo}, Settings{Lookup: lookup, Options: quick}).Serve(context.Background(), "test/thing", nil)
	if out.Fault == nil || out.Fault.Reason != "bad key [redacted]" {
		t.Fatalf("fault = %v", out.Fault)
	}
}

func TestRetriesLeaveTimeForFailover(t *testing.T) {
	slow := &scripted{answer: func(_ int, w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }}
	good := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name":"b"}`) }}
	opts := quick
	opts.AttemptTimeout, opts.Timeout = 300*time.Millisecond, 800*time.Millisecond
	out := runner(opts, upstreamWith(t, "slow", slow), upstreamWith(t, "good", good)).Serve(context.Background(), "test/thing", nil)
	if out.Fault != nil || out.Trace.ServedBy != "good" {
		t.Fatalf("retries of the slow route starved the failover: %+v", out.Trace)
	}
}

func TestUpstreamAnswersClassify(t *testing.T) {
	for status, want := range map[int]FaultKind{504: ServerError, 408: ServerError, 503: ServerError, 400: Rejected, 401: Rejected, 410: NotFound} {
		if got := StatusFault(status, http.Header{}).Kind; got != want {
			t.Errorf("HTTP %d = %s; want %s", status, got, want)
		}
	}
	if e := (Outcome{Fault: StatusFault(504, http.Header{})}).Error(); e.Status != 502 {
		t.Errorf("an upstream 504 answers %d; want 502 (spec 7: upstream 5xx becomes 502)", e.Status)
	}
	empty := &Provider{Name: "empty", BaseURL: "http://unused", Endpoints: map[string]Adapter{
		"test/thing": func(context.Context, *Call) (any, error) { return nil, nil },
	}}
	if out := runner(quick, empty).Serve(context.Background(), "test/thing", nil); out.Fault == nil || out.Fault.Kind != Malformed {
		t.Errorf("an adapter that maps nothing: %+v", out)
	}
}

func TestOnlyRouteWideRefusalsRestARoute(t *testing.T) {
	opts := quick
	opts.CooldownAfter = 1
	for status, rests := range map[int]bool{401: true, 403: true, 400: false, 404: false} {
		up := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, status, `{}`) }}
		r := runner(opts, upstreamWith(t, "a", up))
		r.Serve(context.Background(), "test/thing", nil)
		if got := r.routes["test/thing"][0].cooldownLeft(time.Now()) > 0; got != rests {
			t.Errorf("HTTP %d: resting = %v; want %v", status, got, rests)
		}
	}
}

func TestFaultBesideARestingRouteIs503(t *testing.T) {
	opts := quick
	opts.CooldownAfter = 1
	bad := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 500, `{}`) }}
	worse := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 502, `{}`) }}
	r := runner(opts, upstreamWith(t, "a", bad), upstreamWith(t, "b", worse))
	r.Serve(context.Background(), "test/thing", nil) // both fail: both rest
	r.routes["test/thing"][0].until = time.Time{}    // the first is back, still failing; the second rests
	e := r.Serve(context.Background(), "test/thing", nil).Error()
	if e.Status != http.StatusServiceUnavailable || e.Header.Get("retry-after") == "" {
		t.Fatalf("error = %d %v; want 503 with retry-after (a route that could answer is resting)", e.Status, e.Header)
	}
}

func TestRedirectLoopIsTheCallersURL(t *testing.T) {
	loop := listen(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path+"x", http.StatusFound)
	}))
	policy := &URLPolicy{Resolver: &fakeResolver{}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	err := getPublic(policy, "http://"+loop.addr+"/a")
	var f *Fault
	if !errors.As(err, &f) || f.Kind != InvalidParameter || f.Field != "url" {
		t.Fatalf("err = %v; want an InvalidParameter fault naming url", err)
	}
}

// A trace becomes public legs: neutral labels, the charge on the leg that
// answered, the status of each failed leg or null without an answer.
func TestPublicLegs(t *testing.T) {
	direct := &Provider{Name: "site", Endpoints: map[string]Adapter{"p/e": nil}}
	service := &Provider{Name: "vendor", Label: "web_unblocker_a", Endpoints: map[string]Adapter{"p/e": nil}}
	r := NewRunner([]*Provider{direct, service}, Settings{ReplayURL: "http://replay.invalid"})
	trace := Trace{ServedBy: "vendor", Attempts: 4, Legs: []Leg{
		{ServedBy: "site", Attempts: 3, Status: 403, Fault: Rejected},
		{ServedBy: "vendor", Attempts: 1, OK: true},
	}}
	legs := r.PublicLegs("p/e", trace, "/v1/p/e", 5)
	if len(legs) != 2 || legs[0].ServedBy != "direct" || legs[0].OK || *legs[0].Status != 403 || legs[0].Credits != 0 || legs[0].Attempts != 3 ||
		legs[1].ServedBy != "web_unblocker_a" || !legs[1].OK || *legs[1].Status != 200 || legs[1].Credits != 5 || legs[1].Endpoint != "/v1/p/e" {
		t.Fatalf("%+v", legs)
	}
	timedOut := r.PublicLegs("p/e", Trace{Legs: []Leg{{ServedBy: "site", Attempts: 1, Fault: Timeout}}}, "/v1/p/e", 5)
	if timedOut[0].Status != nil {
		t.Errorf("no answer, no status: %v", *timedOut[0].Status)
	}
}
