package upstream

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
)

// twoFetches fetches /thing twice in one attempt.
func twoFetches(ctx context.Context, c *Call) (any, error) {
	if _, err := echoAdapter(ctx, c); err != nil {
		return nil, err
	}
	return echoAdapter(ctx, c)
}

// A meter sees every request of every attempt and route; a refused
// request never leaves, and an attempt whose first request it refused is
// no attempt.
func TestMeterAdmitsEveryRequest(t *testing.T) {
	failing := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 500, `{}`) }}
	ok := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name":"x"}`) }}
	a, b := upstreamWith(t, "a", failing), upstreamWith(t, "b", ok)
	b.Endpoints = map[string]Adapter{"test/thing": twoFetches}

	for _, budget := range []int64{0, 1, 2, 3, 4, 5, 10} {
		failing.calls.Store(0)
		ok.calls.Store(0)
		var asked, left atomic.Int64
		left.Store(budget)
		r := runner(quick, a, b).WithMeter(func(_ context.Context, provider string) bool {
			asked.Add(1)
			return left.Add(-1) >= 0
		})
		out := r.Serve(context.Background(), "test/thing", nil)
		sent := int64(failing.calls.Load() + ok.calls.Load())
		if sent > budget {
			t.Fatalf("budget %d: %d requests reached the sources", budget, sent)
		}
		if sent != min(budget, asked.Load()) {
			t.Errorf("budget %d: %d sent, %d asked", budget, sent, asked.Load())
		}
		// Route a takes three attempts (500s); route b two requests.
		wantData := budget >= 5
		if (out.Data != nil) != wantData || out.BudgetSpent == wantData {
			t.Errorf("budget %d: data %v, budget spent %v", budget, out.Data, out.BudgetSpent)
		}
		if got := int64(out.Trace.Attempts); got > sent {
			t.Errorf("budget %d: %d attempts counted for %d requests", budget, got, sent)
		}
	}
}

func TestServeRouteAndRoutes(t *testing.T) {
	first := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name":"first"}`) }}
	second := &scripted{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{"name":"second"}`) }}
	r := runner(quick, upstreamWith(t, "one", first), upstreamWith(t, "two", second))
	if got := r.Routes("test/thing"); len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("routes %v", got)
	}
	out := r.ServeRoute(context.Background(), "test/thing", "two", nil)
	if out.Trace.ServedBy != "two" || out.Data.(map[string]any)["name"] != "second" || first.calls.Load() != 0 {
		t.Fatalf("served by %q: %v (first called %d times)", out.Trace.ServedBy, out.Data, first.calls.Load())
	}
	if out := r.ServeRoute(context.Background(), "test/thing", "three", nil); out.Data != nil || out.Trace.Attempts != 0 {
		t.Fatalf("an unknown route served: %+v", out)
	}
}
