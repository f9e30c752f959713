package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// sdkLike is an adapter that, as an SDK would, builds its own requests and
// sends them through the attempt's Doer: two per attempt.
func sdkLike(gateRefusals *atomic.Int32) Adapter {
	return func(ctx context.Context, c *Call) (any, error) {
		doer := c.Doer()
		for range 2 {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/thing", nil)
			if err != nil {
				return nil, err
			}
			res, err := doer.Do(req)
			if err != nil {
				var f *Fault
				if errors.As(err, &f) {
					gateRefusals.Add(1)
				}
				return nil, err
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
		}
		return "answered", nil
	}
}

func TestDoerPassesTheAdmissionGateOncePerAttempt(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		serveJSON(w, 200, `{}`)
	}))
	t.Cleanup(srv.Close)
	var refusals atomic.Int32
	p := &Provider{Name: "sdk", BaseURL: srv.URL, Allowance: 1, Endpoints: map[string]Adapter{"test/sdk": sdkLike(&refusals)}}
	mem := newMem()
	r := NewRunner([]*Provider{p}, Settings{Options: quick, Allowances: mem})

	out := r.Serve(context.Background(), "test/sdk", nil)
	if out.Fault != nil || out.Data != "answered" {
		t.Fatalf("first call: %+v", out)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("requests that reached the upstream: %d; want both of the attempt's", n)
	}
	if mem.takes != 1 {
		t.Errorf("allowance takes: %d; want one for the attempt, not one per request", mem.takes)
	}

	// The allowance of 1 is spent: the gate refuses the next attempt's first
	// request before it leaves, and the adapter sees the gate's Fault.
	out = r.Serve(context.Background(), "test/sdk", nil)
	if out.CapacityReset.IsZero() || out.Trace.Attempts != 0 {
		t.Errorf("spent allowance: %+v; want no attempt and a capacity reset", out)
	}
	if hits.Load() != 2 {
		t.Errorf("a refused request reached the upstream (%d requests)", hits.Load())
	}
	if refusals.Load() != 1 {
		t.Errorf("gate refusals seen by the adapter: %d; want 1, as a *Fault", refusals.Load())
	}
}

func TestDoerCapsTheBody(t *testing.T) {
	exact := bytes.Repeat([]byte("a"), MaxBody)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := exact
		if r.URL.Path == "/over" {
			body = append(exact[:len(exact):len(exact)], 'b')
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	read := func(path string) (int, error) {
		var n int
		var readErr error
		p := &Provider{Name: "sdk", BaseURL: srv.URL, Endpoints: map[string]Adapter{"test/big": func(ctx context.Context, c *Call) (any, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
			if err != nil {
				return nil, err
			}
			res, err := c.Doer().Do(req)
			if err != nil {
				return nil, err
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			n, readErr = len(b), err
			return "read", nil
		}}}
		opts := quick
		opts.AttemptTimeout = 0 // 8 MiB over loopback, however busy the machine
		if out := NewRunner([]*Provider{p}, Settings{Options: opts}).Serve(context.Background(), "test/big", nil); out.Fault != nil {
			t.Fatalf("%s: %v", path, out.Fault)
		}
		return n, readErr
	}
	if n, err := read("/exact"); err != nil || n != MaxBody {
		t.Errorf("a body of exactly MaxBody: %d bytes, %v; want it whole", n, err)
	}
	if _, err := read("/over"); !errors.Is(err, errBodyTooLarge) {
		t.Errorf("a body over MaxBody: %v; want errBodyTooLarge", err)
	}
}

// roundTripFunc is a function serving as a transport.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRequestsCarryTheirRoute(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { serveJSON(w, 200, `{}`) }))
	t.Cleanup(srv.Close)
	var seen []RouteInfo
	client := NewAPIClient()
	next := client.Transport
	client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if info, ok := RouteOf(r.Context()); ok {
			seen = append(seen, info)
		}
		return next.RoundTrip(r)
	})
	var unused atomic.Int32
	p := &Provider{Name: "sdk", BaseURL: srv.URL + "/base", Endpoints: map[string]Adapter{"test/sdk": sdkLike(&unused)}}
	out := NewRunner([]*Provider{p}, Settings{Options: quick, Client: client}).Serve(context.Background(), "test/sdk", nil)
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	want := RouteInfo{Provider: "sdk", BaseURL: srv.URL + "/base"}
	if len(seen) != 2 || seen[0] != want || seen[1] != want {
		t.Errorf("routes seen by the transport: %+v, want %+v twice", seen, want)
	}
	if _, ok := RouteOf(context.Background()); ok {
		t.Error("a context outside an attempt names a route")
	}
}
