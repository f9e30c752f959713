package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
)

// The legs of the test composite (search/all, list price 5): three
// searches whose outcome the query picks per platform.
var testLegKeys = []string{"marketplace_a/search", "retailer_a/search", "company_registry/search"}

// legProbe records how the legs ran.
type legProbe struct {
	running, peak atomic.Int64
	ran           atomic.Int64
	gate          chan struct{} // "slow" legs wait for it
	mu            sync.Mutex
	cancelled     int
}

// legHandler answers a leg by its query: "ok", "fail" (502 on
// retailer_a only), "failall" (502 everywhere), "slow" (waits for the gate
// except on marketplace_a), "wait" (every leg waits for the gate).
func (lp *legProbe) legHandler(key string) Handler {
	return func(ctx context.Context, c *Call) (any, *envelope.Error) {
		lp.ran.Add(1)
		n := lp.running.Add(1)
		defer lp.running.Add(-1)
		for {
			p := lp.peak.Load()
			if n <= p || lp.peak.CompareAndSwap(p, n) {
				break
			}
		}
		q := c.Params.Values["query"]
		if q == "wait" || (q == "slow" && key != "marketplace_a/search") {
			select {
			case <-lp.gate:
			case <-ctx.Done():
				lp.mu.Lock()
				lp.cancelled++
				lp.mu.Unlock()
				return nil, envelope.New(envelope.UpstreamTimeout, http.StatusGatewayTimeout, "cancelled", nil)
			}
		}
		if q == "failall" || (q == "fail" && key == "retailer_a/search") {
			return nil, envelope.New(envelope.UpstreamError, http.StatusBadGateway, "The source answered 500.", nil)
		}
		return map[string]any{"items": []any{map[string]any{"id": key}}, "count": 1}, nil
	}
}

// testComposite fans out to the three legs, one leg event each, and
// answers the legs' summaries, failing only when every leg failed.
func testComposite(keys []string) Composite {
	return Composite{Legs: keys, Serve: func(ctx context.Context, c *Call, legs LegRunner) (any, *envelope.Error) {
		var reqs []LegRequest
		for _, k := range keys {
			if legs.Available(k) {
				reqs = append(reqs, LegRequest{Key: k, Params: map[string]string{"query": c.Params.Values["query"]}})
			}
		}
		results := legs.RunAll(ctx, reqs, func(i int, r LegResult) {
			legs.Emit(EventLeg, map[string]any{"platform": r.Platform, "ok": r.OK(), "status": r.Status}, r.OK())
		})
		var out []LegSummary
		ok := 0
		for _, r := range results {
			out = append(out, r.Summary())
			if r.OK() {
				ok++
			}
		}
		if ok == 0 {
			return nil, envelope.New(envelope.UpstreamError, http.StatusBadGateway, "Every leg failed.", nil)
		}
		return map[string]any{"legs": out}, nil
	}}
}

func newComposed(t *testing.T, newBilled billedFactory, credits int64, mutate ...func(*Config)) (*billed, *legProbe) {
	t.Helper()
	lp := &legProbe{gate: make(chan struct{})}
	b := newBilled(t, credits, nil, append([]func(*Config){func(c *Config) {
		for _, k := range testLegKeys {
			c.Handlers[k] = lp.legHandler(k)
		}
		c.Composites = map[string]Composite{"search/all": testComposite(testLegKeys)}
		c.StreamKeepAlive = 20 * time.Millisecond
	}}, mutate...)...)
	return b, lp
}

// sseEvent is one parsed server-sent event (or comment).
type sseEvent struct {
	name, data string
	comment    bool
}

// readEvents parses a text/event-stream body line by line.
func readEvents(r io.Reader, each func(sseEvent) bool) []sseEvent {
	var out []sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" || len(data) > 0 {
				cur.data = strings.Join(data, "\n")
				out = append(out, cur)
				if each != nil && !each(cur) {
					return out
				}
			}
			cur, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
			c := sseEvent{comment: true, data: strings.TrimSpace(line[1:])}
			out = append(out, c)
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	return out
}

func resultOf(t *testing.T, events []sseEvent) map[string]any {
	t.Helper()
	var results []map[string]any
	for _, e := range events {
		if e.name == EventResult {
			var env map[string]any
			if err := json.Unmarshal([]byte(e.data), &env); err != nil {
				t.Fatalf("result event is not JSON: %v\n%s", err, e.data)
			}
			results = append(results, env)
		}
	}
	if len(results) != 1 {
		t.Fatalf("%d result events, want 1", len(results))
	}
	if last := events[len(events)-1]; last.name != EventResult {
		t.Fatalf("the stream goes on after its result: %+v", last)
	}
	return results[0]
}

// netCharge sums a request's ledger entries (debits negative).
func netCharge(t *testing.T, b *billed, requestID string) (net int64, kinds []string) {
	t.Helper()
	for _, e := range b.entries(t, requestID) {
		net += e.Amount
		kinds = append(kinds, string(e.Type))
	}
	return net, kinds
}

func TestCompositeChargesOnceAndLegsNothing(t *testing.T) {
	testCompositeChargesOnceAndLegsNothing(t, newBilled)
}

func testCompositeChargesOnceAndLegsNothing(t *testing.T, newBilled billedFactory) {
	b, _ := newComposed(t, newBilled, 100)
	for _, tc := range []struct {
		query  string
		status int
		charge int64
		okLegs int
	}{
		{"ok", 200, 5, 3},
		{"fail", 200, 5, 2}, // one leg failed: reported, not a failed call
		{"failall", 502, 0, 0},
	} {
		r := b.call("/v1/search/all?query=" + tc.query)
		if r.code != tc.status {
			t.Fatalf("%s: %d %s", tc.query, r.code, r.raw)
		}
		id := r.header.Get("x-request-id")
		if net, kinds := netCharge(t, b, id); net != -tc.charge {
			t.Errorf("%s: ledger nets %d (%v), want -%d", tc.query, net, kinds, tc.charge)
		}
		if got := r.body["credits_used"]; got != float64(tc.charge) {
			t.Errorf("%s: credits_used %v, want %d", tc.query, got, tc.charge)
		}
		if tc.status != 200 {
			continue
		}
		var data struct {
			Legs []LegSummary `json:"legs"`
		}
		raw, _ := json.Marshal(r.body["data"])
		_ = json.Unmarshal(raw, &data)
		ok := 0
		for _, l := range data.Legs {
			if l.OK {
				ok++
			}
			if l.Credits != 0 || l.RequestID == "" || l.RequestID == id {
				t.Errorf("%s: leg %+v: legs cost nothing and have their own request id", tc.query, l)
			}
			// A leg is never in the ledger, and its usage event names the composite.
			if entries := b.entries(t, l.RequestID); len(entries) != 0 {
				t.Errorf("%s: leg %s has ledger entries %+v", tc.query, l.RequestID, entries)
			}
			ev := b.events.usage(l.RequestID)
			if len(ev) != 1 || ev[0].ParentRequestID != id || ev[0].Credits == nil || *ev[0].Credits != 0 {
				t.Errorf("%s: leg usage events %+v", tc.query, ev)
			}
		}
		if ok != tc.okLegs || len(data.Legs) != 3 {
			t.Errorf("%s: %d of %d legs ok, want %d of 3", tc.query, ok, len(data.Legs), tc.okLegs)
		}
	}
	// A repeated composite is a cache hit: free, and no leg runs.
	r := b.call("/v1/search/all?query=ok")
	if r.header.Get("x-cache") != "HIT" || r.body["credits_used"] != float64(0) {
		t.Errorf("repeat: x-cache %q, credits_used %v", r.header.Get("x-cache"), r.body["credits_used"])
	}
}

func TestLegsNeverFillTheSharedCache(t *testing.T) { testLegsNeverFillTheSharedCache(t, newBilled) }

// A composite's legs read the shared response cache but never write it:
// a leg's data was not paid for at its own price, so a direct call after
// the composite fetches again and pays its list price (issue 40.2). A
// direct call's entry still serves a later composite's leg.
func testLegsNeverFillTheSharedCache(t *testing.T, newBilled billedFactory) {
	b, lp := newComposed(t, newBilled, 100)
	for _, stream := range []string{"", "&stream=1"} {
		query := "ok" + strings.TrimPrefix(stream, "&stream=")
		if r := b.call("/v1/search/all?query=" + query + stream); r.code != 200 {
			t.Fatalf("composite: %d %s", r.code, r.raw)
		}
		for _, key := range testLegKeys {
			ran := lp.ran.Load()
			r := b.call("/v1/" + key + "?query=" + query)
			e, _ := registry.Default().Endpoint(key)
			if r.code != 200 || r.header.Get("x-cache") != "MISS" || r.body["credits_used"] != float64(e.Cost) || lp.ran.Load() != ran+1 {
				t.Errorf("%s after the composite%s: %d x-cache %q credits_used %v (list price %d), handler ran %d times",
					key, stream, r.code, r.header.Get("x-cache"), r.body["credits_used"], e.Cost, lp.ran.Load()-ran)
			}
		}
	}
	// The direct calls filled the cache: a composite's legs now read it.
	ran := lp.ran.Load()
	r := b.call("/v1/search/all?query=ok&limit=5")
	if r.code != 200 || lp.ran.Load() != ran || r.body["credits_used"] != float64(5) {
		t.Errorf("composite after the direct calls: %d, %d legs ran, credits_used %v", r.code, lp.ran.Load()-ran, r.body["credits_used"])
	}
}

func TestCompositeStreams(t *testing.T) { testCompositeStreams(t, newBilled) }

func testCompositeStreams(t *testing.T, newBilled billedFactory) {
	b, _ := newComposed(t, newBilled, 100)
	for _, tc := range []struct {
		query   string
		ok      bool
		charge  int64
		okLegs  int
		errType string
	}{
		{"ok", true, 5, 3, ""},
		{"fail", true, 5, 2, ""},
		{"failall", false, 0, 0, "UPSTREAM_ERROR"},
	} {
		r := b.call("/v1/search/all?stream=1&query=" + tc.query)
		if r.code != 200 || !strings.HasPrefix(r.header.Get("content-type"), "text/event-stream") {
			t.Fatalf("%s: %d %q", tc.query, r.code, r.header.Get("content-type"))
		}
		events := readEvents(strings.NewReader(r.raw), nil)
		okLegs, legEvents := 0, 0
		for _, e := range events {
			if e.name == EventLeg {
				legEvents++
				var leg struct{ OK bool }
				_ = json.Unmarshal([]byte(e.data), &leg)
				if leg.OK {
					okLegs++
				}
			}
		}
		if legEvents != 3 || okLegs != tc.okLegs {
			t.Errorf("%s: %d leg events (%d ok), want 3 (%d ok)", tc.query, legEvents, okLegs, tc.okLegs)
		}
		env := resultOf(t, events)
		id := r.header.Get("x-request-id")
		if env["success"] != tc.ok || env["credits_used"] != float64(tc.charge) || env["request_id"] != id {
			t.Errorf("%s: result %v", tc.query, env)
		}
		if !tc.ok {
			if e, _ := env["error"].(map[string]any); e["type"] != tc.errType {
				t.Errorf("%s: error %v", tc.query, env["error"])
			}
		}
		if net, kinds := netCharge(t, b, id); net != -tc.charge {
			t.Errorf("%s: ledger nets %d (%v), want -%d", tc.query, net, kinds, tc.charge)
		}
		// The usage event says how the stream ended, not the 200 it opened with.
		if ev := b.events.usage(id); len(ev) != 1 || (tc.ok != (ev[0].Status == 200)) || *ev[0].Credits != tc.charge {
			t.Errorf("%s: usage %+v", tc.query, ev)
		}
	}
	// A streamed repeat of a cached answer: one result event, free.
	r := b.call("/v1/search/all?stream=true&query=ok")
	events := readEvents(strings.NewReader(r.raw), nil)
	env := resultOf(t, events)
	if len(events) != 1 || env["cached"] != true || env["credits_used"] != float64(0) {
		t.Errorf("cached stream: %d events, %v", len(events), env)
	}
}

// Refusals before the call runs are plain JSON with their own status.
func TestStreamRefusalsAreJSON(t *testing.T) {
	b, lp := newComposed(t, newBilled, 3)
	r := b.call("/v1/search/all?stream=1&query=ok")
	if r.code != http.StatusPaymentRequired || r.errorType() != "INSUFFICIENT_CREDITS" || !strings.HasPrefix(r.header.Get("content-type"), "application/json") {
		t.Fatalf("%d %q %s", r.code, r.header.Get("content-type"), r.raw)
	}
	if r := b.call("/v1/search/all?stream=1"); r.code != 422 {
		t.Fatalf("missing query: %d", r.code)
	}
	if lp.ran.Load() != 0 {
		t.Fatalf("%d legs ran for refused calls", lp.ran.Load())
	}
}

func TestQuietStreamKeepsAlive(t *testing.T) {
	b, lp := newComposed(t, newBilled, 100)
	go func() { time.Sleep(150 * time.Millisecond); close(lp.gate) }()
	r := b.call("/v1/search/all?stream=1&query=wait")
	comments := 0
	for _, e := range readEvents(strings.NewReader(r.raw), nil) {
		if e.comment && e.data == "keep-alive" {
			comments++
		}
	}
	if comments == 0 {
		t.Fatalf("no keep-alive on a quiet stream:\n%s", r.raw)
	}
}

// A caller who hangs up stops the remaining legs. It is charged when a
// successful leg's event reached it before, and refunded otherwise.
func TestStreamDisconnect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		query  string
		after  int // leg events read before hanging up
		charge int64
	}{
		{"after a delivered leg", "slow", 1, 5},
		{"before any leg", "wait", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, lp := newComposed(t, newBilled, 100)
			srv := httptest.NewServer(b.p)
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/search/all?stream=1&query="+tc.query, nil)
			req.Header.Set("x-api-key", b.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			id := resp.Header.Get("x-request-id")
			legs := 0
			if tc.after > 0 {
				readEvents(resp.Body, func(e sseEvent) bool {
					if e.name == EventLeg {
						legs++
					}
					return legs < tc.after
				})
			}
			cancel()
			resp.Body.Close()
			// The server notices, cancels the waiting legs and settles or refunds.
			deadline := time.Now().Add(5 * time.Second)
			for {
				net, kinds := netCharge(t, b, id)
				done := len(b.events.usage(id)) == 1
				if done {
					if net != -tc.charge {
						t.Fatalf("ledger nets %d (%v), want -%d", net, kinds, tc.charge)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the call did not end after the disconnect (ledger %v)", kinds)
				}
				time.Sleep(10 * time.Millisecond)
			}
			lp.mu.Lock()
			defer lp.mu.Unlock()
			if lp.cancelled == 0 {
				t.Error("no leg was stopped by the disconnect")
			}
		})
	}
}

// Legs run concurrently within the key's free in-flight slots: never more
// than the key has free, and every extra slot is released afterwards.
func TestLegsStayWithinFreeSlots(t *testing.T) { testLegsStayWithinFreeSlots(t, newBilled) }

func testLegsStayWithinFreeSlots(t *testing.T, newBilled billedFactory) {
	keys := make([]string, 0, 6)
	for _, k := range []string{"marketplace_a/search", "retailer_a/search", "company_registry/search", "microblog_a/search", "microblog_b/search-posts", "video_platform/search"} {
		keys = append(keys, k)
	}
	lp := &legProbe{gate: make(chan struct{})}
	b := newBilled(t, 1000, nil, withLimits, func(c *Config) {
		for _, k := range keys {
			c.Handlers[k] = lp.legHandler(k)
		}
		c.Composites = map[string]Composite{"search/all": testComposite(keys)}
		c.LimitRules = store.LimitRules{Concurrency: 4}
	})
	// Another request holds a slot: the composite has its own and two more.
	rules := b.p.cfg.LimitRules
	take := func(id string) string {
		a, err := b.store.Admit(t.Context(), b.keyRec.Hash, id, b.clock.Now(), rules, true)
		if err != nil {
			t.Fatal(err)
		}
		return a.Refused
	}
	if refused := take("req_holder"); refused != "" {
		t.Fatal(refused)
	}
	go func() {
		// Open the gate once three legs wait (the most that fit), or after
		// a while: a slow store must not make fewer legs look like the rule.
		for deadline := time.Now().Add(5 * time.Second); lp.running.Load() < 3 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // a fourth leg, wrongly let in, would show now
		close(lp.gate)
	}()
	r := b.call("/v1/search/all?query=wait")
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if peak := lp.peak.Load(); peak != 3 {
		t.Errorf("%d legs ran at once, want 3 (4 slots, 1 held elsewhere)", peak)
	}
	// Every slot the composite took is free again: three more fit.
	for i := 0; i < 3; i++ {
		if refused := take(fmt.Sprint("req_after", i)); refused != "" {
			t.Fatalf("slot %d after the composite: %s (a slot leaked)", i, refused)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Many composites at once on one wallet never overspend it: 20 calls of
// price 5 on a balance of 52 settle exactly 10.
func TestConcurrentCompositesNeverOverspend(t *testing.T) {
	testConcurrentCompositesNeverOverspend(t, newBilled)
}

func testConcurrentCompositesNeverOverspend(t *testing.T, newBilled billedFactory) {
	b, _ := newComposed(t, newBilled, 52)
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := ""
			if i%2 == 0 {
				stream = "&stream=1"
			}
			r := b.call(fmt.Sprintf("/v1/search/all?query=ok%d%s", i, stream))
			switch {
			case r.code == 200 && (stream == "" || strings.Contains(r.raw, `"success":true`)):
				ok.Add(1)
			case r.code == http.StatusPaymentRequired:
				refused.Add(1)
			default:
				t.Errorf("call %d: %d %s", i, r.code, r.raw)
			}
		}()
	}
	wg.Wait()
	acct, err := b.store.Account(t.Context(), b.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ok.Load() != 10 || refused.Load() != 10 || acct.CreditsRemaining != 2 {
		t.Fatalf("%d ok, %d refused, balance %d; want 10, 10, 2", ok.Load(), refused.Load(), acct.CreditsRemaining)
	}
}

// An Idempotency-Key on a stream keeps its result envelope: the retry
// replays it as JSON, and the call ran and was charged once.
func TestStreamIdempotentReplay(t *testing.T) {
	b, lp := newComposed(t, newBilled, 100)
	first := b.do("GET", "/v1/search/all?stream=1&query=ok", "x-api-key", b.key, "idempotency-key", "k1")
	second := b.do("GET", "/v1/search/all?stream=1&query=ok", "x-api-key", b.key, "idempotency-key", "k1")
	env := resultOf(t, readEvents(strings.NewReader(first.raw), nil))
	if second.code != 200 || second.header.Get("x-idempotent-replay") != "true" || second.body["request_id"] != env["request_id"] {
		t.Fatalf("replay: %d %v %s", second.code, second.header, second.raw)
	}
	if lp.ran.Load() != 3 {
		t.Errorf("%d legs ran, want 3", lp.ran.Load())
	}
	if net, _ := netCharge(t, b, first.header.Get("x-request-id")); net != -5 {
		t.Errorf("ledger nets %d", net)
	}
}

// A batch item cannot stream: refused before it runs, nothing charged.
func TestBatchItemCannotStream(t *testing.T) {
	b, lp := newComposed(t, newBilled, 100)
	_, w := b.batch(items(`{"platform":"search","endpoint":"all","params":{"query":"ok","stream":true}}`,
		`{"platform":"search","endpoint":"all","params":{"query":"ok"}}`))
	if len(w.Results) != 2 || w.Results[0].Status != 400 || w.Results[0].Error == nil || w.Results[0].Error.Details["reason"] != "not_batchable" {
		t.Fatalf("%+v", w.Results)
	}
	if w.Results[1].Status != 200 || w.CreditsUsed != 5 || lp.ran.Load() != 3 {
		t.Fatalf("second item %d, credits %v, %d legs", w.Results[1].Status, w.CreditsUsed, lp.ran.Load())
	}
	acct, _ := b.store.Account(t.Context(), b.account.ID)
	if acct.CreditsRemaining != 95 {
		t.Fatalf("balance %d, want 95", acct.CreditsRemaining)
	}
}
