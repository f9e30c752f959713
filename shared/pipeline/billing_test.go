package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/usage"
)

// billed is a pipeline over a real (embedded) store with an account, a key
// and a test-only adapter for marketplace_a/search (cost 3). The adapter is
// registered here, never in the production registry.
type billed struct {
	*harness
	store   billedStore
	account store.Account
	key     string
	keyRec  store.Key
	calls   atomic.Int64
	console string
	clock   *testClock
	gate    chan struct{} // query=gated waits for it to close
	events  *eventLog     // every message the pipeline emitted, applied by a worker
}

// eventLog is the harness's event sink: it keeps each message and applies
// it at once with the worker, as the queue would a moment later.
type eventLog struct {
	mu     sync.Mutex
	msgs   []usage.Body
	worker *usage.Worker
	apply  bool
}

func (l *eventLog) Emit(m queue.Message) {
	b, err := usage.Decode(m.Encoded())
	if err != nil {
		panic(err)
	}
	l.mu.Lock()
	l.msgs = append(l.msgs, b)
	apply := l.apply
	l.mu.Unlock()
	if apply {
		if err := l.worker.Handle(context.Background(), m.Encoded()); err != nil {
			panic(err)
		}
	}
}

// usage returns the usage events emitted for requestID.
func (l *eventLog) usage(requestID string) []usage.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []usage.Event
	for _, b := range l.msgs {
		if b.Kind == usage.KindUsage && b.Usage.RequestID == requestID {
			out = append(out, *b.Usage)
		}
	}
	return out
}

// count is how many messages of a kind were emitted.
func (l *eventLog) count(kind string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, b := range l.msgs {
		if b.Kind == kind {
			n++
		}
	}
	return n
}

// reconciliations returns the reconciliation messages emitted so far.
func (l *eventLog) reconciliations() []usage.Reconciliation {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []usage.Reconciliation
	for _, b := range l.msgs {
		if b.Kind == usage.KindReconcile {
			out = append(out, *b.Reconcile)
		}
	}
	return out
}

// testClock is the injectable clock of the cache tests.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type flakyRefunds struct{ store.Store }

// lostReserve writes the reservation, then loses the answer (a timeout
// after the commit).
type lostReserve struct{ store.Store }

func (l lostReserve) ReserveMany(ctx context.Context, charges []store.Charge) ([]store.Reserved, error) {
	_, _ = l.Store.ReserveMany(ctx, charges)
	return nil, context.DeadlineExceeded
}

func (flakyRefunds) Refund(context.Context, string, string) (int64, error) {
	return 0, errors.New("dynamodb: throughput exceeded")
}

// billedFactory builds the harness on one kind of store.
type billedFactory func(t *testing.T, credits int64, limit *int64, mutate ...func(*Config)) *billed

func newBilled(t *testing.T, credits int64, limit *int64, mutate ...func(*Config)) *billed {
	t.Helper()
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return newBilledOn(t, s, credits, limit, mutate...)
}

// billedStore is what the harness needs of a store.
type billedStore interface {
	store.Store
	store.Cache
	store.Idempotency
	store.Limits
	store.FairUse
	store.Outcomes
}

func newBilledOn(t *testing.T, s billedStore, credits int64, limit *int64, mutate ...func(*Config)) *billed {
	t.Helper()
	var err error
	b := &billed{store: s, clock: &testClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}, gate: make(chan struct{})}
	b.events = &eventLog{worker: &usage.Worker{Store: s, Outcomes: s}, apply: true}
	ctx := context.Background()
	b.account, b.console, err = auth.CreateAccount(ctx, s, credits, "req_test_opening")
	if err != nil {
		t.Fatal(err)
	}
	full, k := auth.NewKey(b.account.ID, "test", limit)
	if b.keyRec, err = s.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	b.key = full
	adapter := func(ctx context.Context, c *Call) (any, *envelope.Error) {
		b.calls.Add(1)
		switch c.Params.Values["query"] {
		case "fail":
			return nil, envelope.New(envelope.UpstreamError, http.StatusBadGateway, "The source answered 500.", nil)
		case "panic":
			panic("adapter bug")
		case "gated":
			<-b.gate
		case "huge", "huge-compressible":
			blob := make([]byte, 400<<10)
			if c.Params.Values["query"] == "huge" {
				_, _ = rand.Read(blob)
				return map[string]any{"blob": blob}, nil // base64 of random bytes: does not compress
			}
			return map[string]any{"text": strings.Repeat("a", 400<<10)}, nil
		case "deadline":
			if _, ok := ctx.Deadline(); !ok {
				return nil, envelope.New(envelope.InternalError, 500, "no deadline", nil)
			}
		case "nan":
			return map[string]any{"score": math.NaN()}, nil // cannot be encoded as JSON
		}
		return map[string]any{"items": []any{}, "count": 0, "query": c.Params.Values["query"]}, nil
	}
	b.harness = newHarness(t, append([]func(*Config){func(c *Config) {
		c.Keys = nil
		c.Store = s
		c.Handlers = map[string]Handler{"marketplace_a/search": adapter, "microblog_b/search-posts": adapter, "web/social-profiles": adapter}
		c.Cache = s
		c.Idempotency = s
		c.Events = b.events
		c.Now = b.clock.Now
	}}, mutate...)...)
	return b
}

func (b *billed) call(target string) response {
	return b.do("GET", target, "x-api-key", b.key)
}

func (b *billed) entries(t *testing.T, requestID string) []store.Entry {
	t.Helper()
	page, err := b.store.Ledger(context.Background(), b.account.ID, store.LedgerQuery{Limit: 100, RequestID: requestID})
	if err != nil {
		t.Fatal(err)
	}
	return page.Entries
}

func TestPaidCallSucceeds(t *testing.T) { testPaidCallSucceeds(t, newBilled) }

func testPaidCallSucceeds(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	r := b.call("/v1/marketplace_a/search?query=lamp")
	checkEnvelope(t, r)
	if r.code != 200 || r.body["credits_used"] != float64(3) || r.body["credits_remaining"] != float64(97) ||
		r.header.Get("x-credits-used") != "3" || r.header.Get("x-credits-remaining") != "97" {
		t.Fatalf("%d %v %s", r.code, r.header, r.raw)
	}
	id := r.body["request_id"].(string)
	e := b.entries(t, id)
	if len(e) != 1 || e[0].Type != store.EntryDebit || e[0].Amount != -3 || e[0].BalanceAfter != 97 ||
		e[0].Endpoint != "/v1/marketplace_a/search" || e[0].KeyPrefix != b.key[:7] || e[0].KeyID != b.keyRec.ID {
		t.Fatalf("ledger for %s: %+v", id, e)
	}
	if _, err := b.store.Refund(context.Background(), b.account.ID, id); !errors.Is(err, store.ErrSettled) {
		t.Errorf("a successful call is settled: %v", err)
	}
}

func TestFailedPaidCallsRefund(t *testing.T) { testFailedPaidCallsRefund(t, newBilled) }

func testFailedPaidCallsRefund(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, ptr64(50))
	for _, c := range []struct {
		query  string
		status int
		typ    string
	}{{"fail", 502, "UPSTREAM_ERROR"}, {"panic", 500, "INTERNAL_ERROR"}, {"nan", 500, "INTERNAL_ERROR"}} {
		r := b.call("/v1/marketplace_a/search?query=" + c.query)
		checkEnvelope(t, r)
		if r.code != c.status || r.errorType() != c.typ || r.body["credits_remaining"] != float64(100) {
			t.Fatalf("%s: %d %s", c.query, r.code, r.raw)
		}
		e := b.entries(t, r.body["request_id"].(string))
		if len(e) != 2 || e[0].Type != store.EntryRefund || e[1].Type != store.EntryDebit || e[0].Amount+e[1].Amount != 0 {
			t.Fatalf("%s: debit and refund expected: %+v", c.query, e)
		}
	}
	if k, _ := b.store.Key(context.Background(), b.account.ID, b.keyRec.ID); k.CreditsUsed != 0 {
		t.Errorf("the key's budget is returned: %d", k.CreditsUsed)
	}
}

func TestUncertainReservationIsTakenBack(t *testing.T) {
	b := newBilled(t, 100, nil, func(c *Config) { c.Store = lostReserve{c.Store} })
	r := b.call("/v1/marketplace_a/search?query=a")
	if r.code != 500 || r.body["credits_used"] != float64(0) || b.calls.Load() != 0 {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if e := b.entries(t, r.body["request_id"].(string)); len(e) != 2 || e[0].Amount+e[1].Amount != 0 {
		t.Errorf("the debit written before the error is refunded: %+v", e)
	}
}

func TestRefundThatCannotBeWrittenIsPending(t *testing.T) {
	b := newBilled(t, 100, nil, func(c *Config) { c.Store = flakyRefunds{c.Store} })
	r := b.call("/v1/marketplace_a/search?query=fail")
	if r.code != 502 || r.body["credits_used"] != nil || r.details()["billing_status"] != BillingRefundPending {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if v, ok := r.body["credits_used"]; !ok || v != nil {
		t.Error("credits_used is present and null")
	}
}

func TestPaymentRefusals(t *testing.T) { testPaymentRefusals(t, newBilled) }

func testPaymentRefusals(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 5, nil)
	r := b.call("/v1/marketplace_a/search?query=a")
	if r.code != 200 {
		t.Fatal(r.raw)
	}
	r = b.call("/v1/marketplace_a/search?query=b")
	checkEnvelope(t, r)
	if r.code != 402 || r.errorType() != "INSUFFICIENT_CREDITS" || r.details()["required"] != float64(3) ||
		r.details()["remaining"] != float64(2) || r.body["credits_remaining"] != float64(2) {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if len(b.entries(t, r.body["request_id"].(string))) != 0 || b.calls.Load() != 1 {
		t.Error("a refused call writes nothing and calls no upstream")
	}

	b = newBilled(t, 100, ptr64(5))
	b.call("/v1/marketplace_a/search?query=a")
	r = b.call("/v1/marketplace_a/search?query=b")
	checkEnvelope(t, r)
	if r.code != 402 || r.errorType() != "KEY_LIMIT_EXCEEDED" || r.details()["credit_limit"] != float64(5) || r.details()["credits_used"] != float64(3) {
		t.Fatalf("%d %s", r.code, r.raw)
	}
}

func TestDryRunChargesNothing(t *testing.T) { testDryRunChargesNothing(t, newBilled) }

func testDryRunChargesNothing(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	r := b.call("/v1/marketplace_a/search?query=a&dry_run=1")
	if r.code != 200 || r.body["credits_used"] != float64(0) || b.calls.Load() != 0 {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if d := r.body["data"].(map[string]any); d["credit_cost"] != float64(3) {
		t.Errorf("estimate %v", d)
	}
	if len(b.entries(t, r.body["request_id"].(string))) != 0 {
		t.Error("a dry run writes no ledger entry")
	}
}

func TestConcurrentPaidCallsNeverOverspend(t *testing.T) {
	testConcurrentPaidCallsNeverOverspend(t, newBilled)
}

func testConcurrentPaidCallsNeverOverspend(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 30, nil)
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := b.call(fmt.Sprintf("/v1/marketplace_a/search?query=q%d", i))
			switch {
			case r.code == 200:
				ok.Add(1)
			case r.code == 402 && r.errorType() == "INSUFFICIENT_CREDITS":
				refused.Add(1)
			default:
				t.Errorf("%d %s", r.code, r.raw)
			}
		}(i)
	}
	wg.Wait()
	if ok.Load() != 10 || refused.Load() != 50 {
		t.Fatalf("%d succeeded, %d refused", ok.Load(), refused.Load())
	}
	if a, _ := b.store.Account(context.Background(), b.account.ID); a.CreditsRemaining != 0 {
		t.Errorf("balance %d", a.CreditsRemaining)
	}
}

func TestKeysAreCheckedOnEveryRequest(t *testing.T) { testKeysAreCheckedOnEveryRequest(t, newBilled) }

func testKeysAreCheckedOnEveryRequest(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	ctx := context.Background()
	if r := b.call("/v1/credits/balance"); r.code != 200 {
		t.Fatal(r.raw)
	}
	for _, step := range []struct {
		to   store.KeyStatus
		want int
	}{{store.KeyRevoked, 401}, {store.KeyActive, 200}, {store.KeyDeleted, 401}} {
		if _, err := b.store.SetKeyStatus(ctx, b.account.ID, b.keyRec.ID, step.to); err != nil {
			t.Fatal(err)
		}
		r := b.call("/v1/credits/balance")
		if r.code != step.want || (step.want == 401 && r.details()["reason"] != "invalid_api_key") {
			t.Fatalf("after %s: %d %s", step.to, r.code, r.raw)
		}
	}
}

func TestCreditsEndpoints(t *testing.T) { testCreditsEndpoints(t, newBilled) }

func testCreditsEndpoints(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	var ids []string
	for _, q := range []string{"a", "fail", "b"} {
		ids = append(ids, b.call("/v1/marketplace_a/search?query=" + q).body["request_id"].(string))
	}
	r := b.call("/v1/credits/balance")
	d := r.body["data"].(map[string]any)
	if r.code != 200 || d["credits_remaining"] != float64(94) || d["credits_lifetime"] != float64(100) || d["balance_changed_at"] == nil ||
		r.body["credits_used"] != float64(0) || r.body["credits_remaining"] != float64(94) {
		t.Fatalf("balance: %s", r.raw)
	}
	r = b.call("/v1/credits/transactions?limit=2")
	d = r.body["data"].(map[string]any)
	items := d["items"].([]any)
	if r.code != 200 || len(items) != 2 || d["has_more"] != true || d["cursor"] == nil {
		t.Fatalf("page 1: %s", r.raw)
	}
	first := items[0].(map[string]any)
	for _, f := range []string{"id", "type", "amount", "balance_after", "request_id", "endpoint", "key_prefix", "created_at"} {
		if _, ok := first[f]; !ok {
			t.Errorf("entry lacks %s", f)
		}
	}
	if first["request_id"] != ids[2] || first["type"] != "debit" || first["balance_after"] != float64(94) {
		t.Errorf("newest first: %v", first)
	}
	var all []any
	cursor := ""
	for page := 0; page < 10; page++ {
		target := "/v1/credits/transactions?limit=2"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		d := b.call(target).body["data"].(map[string]any)
		all = append(all, d["items"].([]any)...)
		c, _ := d["cursor"].(string)
		if c == "" {
			break
		}
		cursor = c
	}
	if len(all) != 5 { // opening grant, 3 debits, 1 refund
		t.Errorf("%d entries through the cursor", len(all))
	}
	r = b.call("/v1/credits/transactions?request_id=" + ids[1])
	if items := r.body["data"].(map[string]any)["items"].([]any); len(items) != 2 {
		t.Errorf("the failed call's debit and refund: %s", r.raw)
	}
	if r = b.call("/v1/credits/transactions?cursor=garbage"); r.code != 422 || r.details()["field"] != "cursor" {
		t.Errorf("bad cursor: %d %s", r.code, r.raw)
	}
	if r = b.call("/v1/credits/transactions?limit=101"); r.code != 422 {
		t.Errorf("limit bound: %d", r.code)
	}
}

func TestInvalidKeyAttemptsAreThrottled(t *testing.T) {
	b := newBilled(t, 100, nil, func(c *Config) { c.Throttle = auth.NewThrottle(3) })
	bad := "mn_" + strings.Repeat("z", 43)
	for i := 0; i < 3; i++ {
		if r := b.do("GET", "/v1/credits/balance", "x-api-key", bad); r.code != 401 {
			t.Fatalf("attempt %d: %d", i, r.code)
		}
	}
	r := b.do("GET", "/v1/credits/balance", "x-api-key", bad)
	checkEnvelope(t, r)
	if r.code != 429 || r.errorType() != "RATE_LIMITED" || r.details()["reason"] != "invalid_key_attempts" ||
		r.details()["retry_after_seconds"] == nil || r.header.Get("retry-after") == "" {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if r := b.call("/v1/credits/balance"); r.code != 429 {
		t.Errorf("a throttled client is refused before any lookup, even with a valid key: %d", r.code)
	}
	req := httptest.NewRequest("GET", "http://api.test/v1/credits/balance", nil)
	req.RemoteAddr = "203.0.113.9:5555"
	req.Header.Set("x-api-key", b.key)
	rec := httptest.NewRecorder()
	b.p.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("another client is not throttled: %d", rec.Code)
	}
	if r := b.do("GET", "/v1/credits/balance"); r.code != 401 || r.details()["reason"] != "missing_api_key" {
		t.Errorf("no key is not an attempt: %d", r.code)
	}
}

func TestBearerWithARealKey(t *testing.T) {
	b := newBilled(t, 100, nil)
	if r := b.do("GET", "/v1", "authorization", "Bearer "+b.key); r.code != 200 {
		t.Errorf("/v1 with Bearer: %d %s", r.code, r.raw)
	}
	if r := b.do("GET", "/v1/credits/balance", "authorization", "Bearer "+b.key); r.code != 200 {
		t.Errorf("Bearer on a GET under /v1: %d", r.code)
	}
}

func ptr64(v int64) *int64 { return &v }

// decode is a small helper for console bodies.
func decode(t *testing.T, raw string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return m
}

func storeQuery(limit int) store.LedgerQuery { return store.LedgerQuery{Limit: limit} }
