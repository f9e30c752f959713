package upstream

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
)

// memAllowances is an in-memory Allowances that counts its calls and can
// be made to fail.
type memAllowances struct {
	mu    sync.Mutex
	used  map[string]int64
	takes int
	fail  error
}

func newMem() *memAllowances { return &memAllowances{used: map[string]int64{}} }

func (m *memAllowances) TakeAllowance(_ context.Context, name, month string, limit int64, _ time.Time) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.takes++
	if m.fail != nil {
		return 0, false, m.fail
	}
	k := name + "#" + month
	if m.used[k] >= limit {
		return m.used[k], false, nil
	}
	m.used[k]++
	return m.used[k], true, nil
}

func (m *memAllowances) AllowanceUsed(_ context.Context, name, month string, _ time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	return m.used[name+"#"+month], nil
}

func (m *memAllowances) get(name, month string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used[name+"#"+month]
}

func okAnswer(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name":"x"}`) }

// clock is a settable fixed clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

func limitedRunner(mem Allowances, clk *clock, lookup func(string) (string, bool), providers ...*Provider) *Runner {
	opts := quick
	opts.Now = clk.Now
	return NewRunner(providers, Settings{Options: opts, Allowances: mem, Lookup: lookup})
}

var nov20 = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

func TestAllowanceSpentRouteFailsOverToAnUnlimitedOne(t *testing.T) {
	scarce, open := &scripted{answer: okAnswer}, &scripted{answer: okAnswer}
	a := upstreamWith(t, "scarce", scarce)
	a.Allowance = 2
	b := upstreamWith(t, "open", open)
	mem, clk := newMem(), &clock{now: nov20}
	r := limitedRunner(mem, clk, nil, a, b)
	for i := 1; i <= 4; i++ {
		out := r.Serve(context.Background(), "test/thing", nil)
		want := "scarce"
		if i > 2 {
			want = "open"
		}
		if out.Fault != nil || out.Trace.ServedBy != want || len(out.Trace.Legs) != 1 || out.Trace.Attempts != 1 {
			t.Fatalf("call %d: %+v, want served by %s in one leg", i, out, want)
		}
		if !out.CapacityReset.IsZero() || out.AllowanceErr != nil {
			t.Errorf("call %d: a served call carries no refusal: %+v", i, out)
		}
	}
	if scarce.calls.Load() != 2 || open.calls.Load() != 2 {
		t.Errorf("upstream calls: scarce %d, open %d", scarce.calls.Load(), open.calls.Load())
	}
	if got := mem.get("scarce", "2026-11"); got != 2 {
		t.Errorf("used %d", got)
	}
	// The spent month is remembered: the fourth call did not ask the store.
	if mem.takes != 3 {
		t.Errorf("store takes %d, want 3", mem.takes)
	}
	// A new month: the scarce route answers again.
	clk.set(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	if out := r.Serve(context.Background(), "test/thing", nil); out.Trace.ServedBy != "scarce" {
		t.Errorf("December: served by %q", out.Trace.ServedBy)
	}
}

func TestAllowanceAllSpentIsATypedRefusalUntilNextMonth(t *testing.T) {
	up := &scripted{answer: okAnswer}
	p := upstreamWith(t, "scarce", up)
	p.Allowance = 1
	mem, clk := newMem(), &clock{now: nov20}
	r := limitedRunner(mem, clk, nil, p)
	if out := r.Serve(context.Background(), "test/thing", nil); out.Fault != nil {
		t.Fatalf("first call: %v", out.Fault)
	}
	out := r.Serve(context.Background(), "test/thing", nil)
	if out.Data != nil || out.Fault != nil || out.Trace.Attempts != 0 || len(out.Trace.Legs) != 0 {
		t.Fatalf("spent: %+v", out)
	}
	if up.calls.Load() != 1 {
		t.Errorf("the upstream was called %d times", up.calls.Load())
	}
	e := out.Error()
	if e.Type != envelope.UpstreamError || e.Status != http.StatusTooManyRequests {
		t.Fatalf("error %s %d", e.Type, e.Status)
	}
	if e.Details["reason"] != "capacity_exhausted" || e.Details["resets_at"] != "2026-12-01T00:00:00Z" {
		t.Errorf("details %v", e.Details)
	}
	// 10 days and 12 hours to the start of December.
	if got := e.Header.Get("retry-after"); got != "907200" {
		t.Errorf("retry-after %q", got)
	}
	if !strings.Contains(e.Message, "shared monthly capacity is used up") || !strings.Contains(e.Message, "2026-12-01T00:00:00Z") {
		t.Errorf("message %q", e.Message)
	}
}

func TestAllowanceIsTakenPerAttemptRetriesIncluded(t *testing.T) {
	up := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 500, `{}`) }}
	p := upstreamWith(t, "scarce", up)
	p.Allowance = 5
	mem, clk := newMem(), &clock{now: nov20}
	r := limitedRunner(mem, clk, nil, p)
	// Three attempts (MaxAttempts), three units.
	out := r.Serve(context.Background(), "test/thing", nil)
	if out.Trace.Attempts != 3 || mem.get("scarce", "2026-11") != 3 {
		t.Fatalf("attempts %d, used %d", out.Trace.Attempts, mem.get("scarce", "2026-11"))
	}
	// Two units left: two attempts, then the allowance stops the retries
	// and the call keeps the fault it had (the source was called).
	out = r.Serve(context.Background(), "test/thing", nil)
	if out.Trace.Attempts != 2 || out.Fault == nil || out.Fault.Kind != ServerError {
		t.Fatalf("second call: attempts %d, fault %v", out.Trace.Attempts, out.Fault)
	}
	if e := out.Error(); e.Status != http.StatusBadGateway {
		t.Errorf("a called route's fault stands: %d", e.Status)
	}
	if up.calls.Load() != 5 || mem.get("scarce", "2026-11") != 5 {
		t.Errorf("upstream calls %d, used %d", up.calls.Load(), mem.get("scarce", "2026-11"))
	}
	// Nothing left: no attempt, the capacity refusal.
	out = r.Serve(context.Background(), "test/thing", nil)
	if out.Trace.Attempts != 0 || out.Error().Status != http.StatusTooManyRequests {
		t.Errorf("third call: attempts %d, %d", out.Trace.Attempts, out.Error().Status)
	}
}

func TestAllowanceStoreErrorFailsClosed(t *testing.T) {
	scarce, open := &scripted{answer: okAnswer}, &scripted{answer: okAnswer}
	a := upstreamWith(t, "scarce", scarce)
	a.Allowance = 10
	mem, clk := newMem(), &clock{now: nov20}
	mem.fail = errors.New("table unavailable")
	out := limitedRunner(mem, clk, nil, a).Serve(context.Background(), "test/thing", nil)
	if scarce.calls.Load() != 0 || out.Trace.Attempts != 0 || out.AllowanceErr == nil {
		t.Fatalf("an uncounted attempt was made: %+v", out)
	}
	e := out.Error()
	if e.Type != envelope.UpstreamError || e.Status != http.StatusServiceUnavailable ||
		e.Header.Get("retry-after") != "30" || e.Details["reason"] != "capacity_unavailable" {
		t.Errorf("error %d %s %v %v", e.Status, e.Type, e.Header, e.Details)
	}
	// An unlimited route after it still serves.
	b := upstreamWith(t, "open", open)
	out = limitedRunner(mem, clk, nil, a, b).Serve(context.Background(), "test/thing", nil)
	if out.Fault != nil || out.Trace.ServedBy != "open" || scarce.calls.Load() != 0 {
		t.Errorf("failover past the unchecked route: %+v", out)
	}
}

func TestAllowanceWithoutAStoreIsNotEnforced(t *testing.T) {
	up := &scripted{answer: okAnswer}
	p := upstreamWith(t, "scarce", up)
	p.Allowance = 1
	r := limitedRunner(nil, &clock{now: nov20}, nil, p)
	for i := 0; i < 3; i++ {
		if out := r.Serve(context.Background(), "test/thing", nil); out.Fault != nil || !out.CapacityReset.IsZero() {
			t.Fatalf("call %d: %+v", i, out)
		}
	}
	if c, err := r.Capacity(context.Background(), "test/thing"); err != nil || c.Bounded {
		t.Errorf("capacity without a store: %+v %v", c, err)
	}
	// WithAllowances enforces it on the same routes.
	mem := newMem()
	lr := r.WithAllowances(mem)
	if out := lr.Serve(context.Background(), "test/thing", nil); out.Fault != nil {
		t.Fatal(out.Fault)
	}
	if out := lr.Serve(context.Background(), "test/thing", nil); out.Error().Status != http.StatusTooManyRequests {
		t.Errorf("WithAllowances: %+v", out)
	}
}

func TestAllowanceConfiguration(t *testing.T) {
	p := &Provider{Name: "scarce", Allowance: 100}
	if p.AllowanceVar() != "MERIDIAN_UPSTREAM_SCARCE_ALLOWANCE" {
		t.Fatal(p.AllowanceVar())
	}
	env := func(v string) func(string) (string, bool) {
		return func(name string) (string, bool) { return v, name == p.AllowanceVar() }
	}
	cases := []struct {
		value   string
		limit   int64
		limited bool
		bad     bool
	}{
		{"", 100, true, false},
		{"250", 250, true, false},
		{" 0 ", 0, true, false},
		{"unlimited", 0, false, false},
		{"-1", 100, true, true},
		{"lots", 100, true, true},
	}
	for _, tc := range cases {
		limit, limited, err := AllowanceOf(p, env(tc.value))
		if limit != tc.limit || limited != tc.limited || (err != nil) != tc.bad {
			t.Errorf("%q: %d %v %v", tc.value, limit, limited, err)
		}
	}
	if _, limited, _ := AllowanceOf(&Provider{Name: "open"}, nil); limited {
		t.Error("no allowance declared, none configured")
	}
	if limit, limited, _ := AllowanceOf(&Provider{Name: "open"}, func(n string) (string, bool) { return "7", true }); !limited || limit != 7 {
		t.Error("an operator may cap any provider")
	}

	// An allowance of 0 allows no attempt, without asking the store.
	up := &scripted{answer: okAnswer}
	sp := upstreamWith(t, "scarce", up)
	sp.Allowance = 100
	mem := newMem()
	out := limitedRunner(mem, &clock{now: nov20}, env("0"), sp).Serve(context.Background(), "test/thing", nil)
	if out.Error().Status != http.StatusTooManyRequests || up.calls.Load() != 0 || mem.takes != 0 {
		t.Errorf("allowance 0: %+v, upstream %d, takes %d", out, up.calls.Load(), mem.takes)
	}
}

func TestCapacity(t *testing.T) {
	a := &Provider{Name: "a", Allowance: 5, Endpoints: map[string]Adapter{"test/thing": echoAdapter, "test/other": echoAdapter}}
	b := &Provider{Name: "b", Allowance: 3, Endpoints: map[string]Adapter{"test/thing": echoAdapter}}
	c := &Provider{Name: "c", Endpoints: map[string]Adapter{"test/other": echoAdapter}}
	mem, clk := newMem(), &clock{now: nov20}
	r := limitedRunner(mem, clk, nil, a, b, c)
	mem.used["a#2026-11"], mem.used["b#2026-11"], mem.used["b#2026-10"] = 2, 4, 1
	got, err := r.Capacity(context.Background(), "test/thing")
	if err != nil || !got.Bounded || got.Remaining != 3 || !got.ResetsAt.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("test/thing: %+v %v (want 3 = a's 5-2 + b's none left)", got, err)
	}
	if got, _ := r.Capacity(context.Background(), "test/other"); got.Bounded {
		t.Errorf("an unlimited route leaves capacity unbounded: %+v", got)
	}
	if got, _ := r.Capacity(context.Background(), "test/none"); got.Bounded {
		t.Errorf("no route: %+v", got)
	}
	mem.fail = errors.New("down")
	if _, err := r.Capacity(context.Background(), "test/thing"); err == nil {
		t.Error("a store error is reported")
	}
	if NextMonth(time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)) != time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) ||
		Month(time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("x", -3600))) != "2027-01" {
		t.Error("months are UTC calendar months")
	}
}

// A request the adapter refuses before it fetches anything (a malformed
// id, say) spends no allowance: the unit is taken at the attempt's first
// upstream request, so callers cannot drain a shared allowance for free.
func TestAllowanceIsTakenAtTheFirstUpstreamRequest(t *testing.T) {
	scarce := &scripted{answer: okAnswer}
	p := upstreamWith(t, "scarce", scarce)
	p.Allowance = 1
	fetches := p.Endpoints["test/thing"]
	p.Endpoints["test/thing"] = func(ctx context.Context, c *Call) (any, error) {
		if c.Param("id") == "bad" {
			return nil, InvalidParameterFault("id", "not_a_product", "id is not a product")
		}
		return fetches(ctx, c)
	}
	mem, clk := newMem(), &clock{now: nov20}
	r := limitedRunner(mem, clk, nil, p)
	for i := 0; i < 3; i++ {
		if out := r.Serve(context.Background(), "test/thing", map[string]string{"id": "bad"}); out.Fault == nil || out.Fault.Kind != InvalidParameter {
			t.Fatalf("a refused request: %+v", out)
		}
	}
	if got := mem.get("scarce", "2026-11"); got != 0 || mem.takes != 0 {
		t.Fatalf("refusals before any fetch took %d units (%d takes)", got, mem.takes)
	}
	if out := r.Serve(context.Background(), "test/thing", map[string]string{"id": "good"}); out.Fault != nil || mem.get("scarce", "2026-11") != 1 {
		t.Fatalf("the allowance still serves one call: %+v, used %d", out, mem.get("scarce", "2026-11"))
	}
	out := r.Serve(context.Background(), "test/thing", map[string]string{"id": "good"})
	if out.CapacityReset.IsZero() || scarce.calls.Load() != 1 {
		t.Fatalf("spent after one fetch: %+v, upstream calls %d", out, scarce.calls.Load())
	}
}
