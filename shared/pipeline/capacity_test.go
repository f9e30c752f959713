package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Limited capacity (spec 2.4): marketplace_a/similar served by a provider
// with a shared monthly allowance counted in the store.

const similar = "marketplace_a/similar"

// withScarce serves marketplace_a/similar through a runner whose one
// provider, a source on a local test server, has the given monthly
// allowance, counted in allow (the harness's store when nil), on the
// harness's clock; fair use meters it. fetches counts what reached the source.
func withScarce(t *testing.T, allowance int64, allow upstream.Allowances, fetches *atomic.Int64) func(*Config) {
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("content-type", "application/json")
		_, _ = w.Write([]byte(`{"items": []}`))
	}))
	t.Cleanup(src.Close)
	return func(c *Config) {
		p := &upstream.Provider{Name: "scarce", BaseURL: src.URL, Allowance: allowance, Endpoints: map[string]upstream.Adapter{
			similar: func(ctx context.Context, call *upstream.Call) (any, error) {
				if _, err := call.Get(ctx, "/similar", nil, nil); err != nil {
					return nil, err
				}
				return map[string]any{"items": []any{}, "count": 0, "query": call.Param("query")}, nil
			},
		}}
		if allow == nil {
			allow = c.Store.(upstream.Allowances)
		}
		c.Upstream = upstream.NewRunner([]*upstream.Provider{p}, upstream.Settings{
			Allowances: allow, Options: upstream.Options{Now: c.Now},
		})
		c.FairUse, _ = c.Store.(store.FairUse)
		c.FairUseLimits = map[string]int64{similar: 1000}
	}
}

// Now on the harness clock: 2026-11-22 12:00 UTC; December starts in 8.5 days.
const (
	wantResetsAt   = "2026-12-01T00:00:00Z"
	wantRetryAfter = "734400"
)

// capacityOf reads the endpoint's capacity from the catalogue entry.
func capacityOf(t *testing.T, b *billed) map[string]any {
	t.Helper()
	r := b.call("/v1/utility/endpoint?id=" + similar)
	if r.code != 200 {
		t.Fatalf("utility/endpoint: %d %s", r.code, r.raw)
	}
	entry := r.body["data"].(map[string]any)["endpoint"].(map[string]any)
	if entry["limited_capacity"] != true || entry["available"] != true {
		t.Errorf("entry: limited_capacity %v, available %v", entry["limited_capacity"], entry["available"])
	}
	c, ok := entry["capacity"].(map[string]any)
	if !ok || c["resets_at"] != wantResetsAt {
		t.Fatalf("capacity %v", entry["capacity"])
	}
	return c
}

func dryRunCapacity(t *testing.T, b *billed) map[string]any {
	t.Helper()
	r := b.call("/v1/" + similar + "?query=dry&dry_run=1")
	if r.code != 200 {
		t.Fatalf("dry run: %d %s", r.code, r.raw)
	}
	c, ok := r.body["data"].(map[string]any)["capacity"].(map[string]any)
	if !ok || c["resets_at"] != wantResetsAt {
		t.Fatalf("dry run capacity: %s", r.raw)
	}
	return c
}

func balanceOf(t *testing.T, b *billed) int64 {
	t.Helper()
	a, err := b.store.Account(context.Background(), b.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	return a.CreditsRemaining
}

// checkRefunded asserts a failed call's ledger: its debit and the refund.
func checkRefunded(t *testing.T, b *billed, r response) {
	t.Helper()
	id, _ := r.body["request_id"].(string)
	entries := b.entries(t, id)
	if len(entries) != 2 || entries[0].Type != store.EntryRefund || entries[0].Amount != 3 ||
		entries[1].Type != store.EntryDebit || entries[1].Amount != -3 {
		t.Errorf("%s: ledger %+v, want a debit of 3 and its refund", id, entries)
	}
}

func TestCapacityExhausted(t *testing.T) { testCapacityExhausted(t, newBilled) }

func testCapacityExhausted(t *testing.T, newBilled billedFactory) {
	var fetches atomic.Int64
	b := newBilled(t, 100, nil, withScarce(t, 2, nil, &fetches))
	if c := capacityOf(t, b); c["remaining"] != float64(2) || c["exhausted"] != false {
		t.Errorf("before: %v", c)
	}
	if c := dryRunCapacity(t, b); c["remaining"] != float64(2) || c["exhausted"] != false {
		t.Errorf("dry run before: %v", c)
	}
	for i := 1; i <= 2; i++ {
		r := b.call(fmt.Sprintf("/v1/%s?query=q%d", similar, i))
		checkEnvelope(t, r)
		if r.code != 200 || r.body["credits_used"] != float64(3) {
			t.Fatalf("call %d: %d %s", i, r.code, r.raw)
		}
	}
	if got := balanceOf(t, b); got != 94 {
		t.Fatalf("balance %d after two calls", got)
	}
	r := b.call("/v1/" + similar + "?query=q3")
	checkEnvelope(t, r)
	if r.code != http.StatusTooManyRequests || r.errorType() != "UPSTREAM_ERROR" {
		t.Fatalf("third call: %d %s", r.code, r.raw)
	}
	if d := r.details(); d["reason"] != "capacity_exhausted" || d["resets_at"] != wantResetsAt {
		t.Errorf("details %v", d)
	}
	if got := r.header.Get("retry-after"); got != wantRetryAfter {
		t.Errorf("retry-after %q, want %s (to the start of December)", got, wantRetryAfter)
	}
	checkRefunded(t, b, r)
	if got := balanceOf(t, b); got != 94 {
		t.Errorf("balance %d after the refusal, want 94", got)
	}
	if fetches.Load() != 2 {
		t.Errorf("the source was fetched %d times", fetches.Load())
	}
	// Fair use counts attempts: the refusal made none.
	if used, _ := b.store.FairUseUsed(context.Background(), b.account.ID, similar, b.clock.Now()); used != 2 {
		t.Errorf("fair use counted %d attempts, want 2", used)
	}
	if c := capacityOf(t, b); c["remaining"] != float64(0) || c["exhausted"] != true {
		t.Errorf("after: %v", c)
	}
	if c := dryRunCapacity(t, b); c["remaining"] != float64(0) || c["exhausted"] != true {
		t.Errorf("dry run after: %v", c)
	}
	// The estimate says what the live call would cost: nothing, refused.
	if r := b.call("/v1/" + similar + "?query=dry&dry_run=1"); r.body["data"].(map[string]any)["estimated_credits"] != float64(0) {
		t.Errorf("a dry run on spent capacity estimates a charge: %s", r.raw)
	}
	// A cached answer still serves, free.
	if r := b.call("/v1/" + similar + "?query=q1"); r.code != 200 || r.body["credits_used"] != float64(0) {
		t.Errorf("cache hit: %d %s", r.code, r.raw)
	}
	// The list shows capacity only on limited-capacity entries.
	list := b.call("/v1/utility/endpoints?platform=marketplace_a")
	for _, it := range list.body["data"].(map[string]any)["items"].([]any) {
		e := it.(map[string]any)
		_, has := e["capacity"]
		if has != (e["id"] == similar) {
			t.Errorf("%v: capacity %v", e["id"], e["capacity"])
		}
	}
	// December: the allowance is back.
	b.clock.Advance(9 * 24 * time.Hour)
	if r := b.call("/v1/" + similar + "?query=q4"); r.code != 200 {
		t.Errorf("next month: %d %s", r.code, r.raw)
	}
}

func TestCapacityUnderConcurrency(t *testing.T) { testCapacityUnderConcurrency(t, newBilled) }

// Many calls at once on an allowance of 5: exactly 5 are served and
// charged, the rest refused and refunded, and the balance is exact.
func testCapacityUnderConcurrency(t *testing.T, newBilled billedFactory) {
	const calls, allowance = 30, 5
	var fetches atomic.Int64
	b := newBilled(t, 1000, nil, withScarce(t, allowance, nil, &fetches))
	var ok, refused atomic.Int64
	var mu sync.Mutex
	var refusals []response
	var wg sync.WaitGroup
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := b.call(fmt.Sprintf("/v1/%s?query=c%d", similar, i))
			switch {
			case r.code == 200 && r.body["credits_used"] == float64(3):
				ok.Add(1)
			case r.code == 429 && r.details()["reason"] == "capacity_exhausted" && r.header.Get("retry-after") == wantRetryAfter:
				refused.Add(1)
				mu.Lock()
				refusals = append(refusals, r)
				mu.Unlock()
			default:
				t.Errorf("%d %s", r.code, r.raw)
			}
		}(i)
	}
	wg.Wait()
	if ok.Load() != allowance || refused.Load() != calls-allowance || fetches.Load() != allowance {
		t.Fatalf("%d served, %d refused, %d fetched; want %d, %d, %d", ok.Load(), refused.Load(), fetches.Load(),
			allowance, calls-allowance, allowance)
	}
	if got := balanceOf(t, b); got != 1000-3*allowance {
		t.Errorf("balance %d, want %d", got, 1000-3*allowance)
	}
	for _, r := range refusals {
		checkRefunded(t, b, r)
	}
	used, err := b.store.(store.Allowances).AllowanceUsed(context.Background(), "scarce", "2026-11", b.clock.Now())
	if err != nil || used != allowance {
		t.Errorf("allowance used %d %v", used, err)
	}
	if c := capacityOf(t, b); c["remaining"] != float64(0) {
		t.Errorf("capacity %v", c)
	}
}

// failingAllowances is an allowance store that is down.
type failingAllowances struct{}

func (failingAllowances) TakeAllowance(context.Context, string, string, int64, time.Time) (int64, bool, error) {
	return 0, false, errors.New("dynamodb: throughput exceeded")
}

func (failingAllowances) AllowanceUsed(context.Context, string, string, time.Time) (int64, error) {
	return 0, errors.New("dynamodb: throughput exceeded")
}

// A store that cannot count the allowance fails closed: 503 with
// retry-after, nothing fetched, the reservation refunded, the error logged;
// the catalogue's remaining is unknown (null).
func TestCapacityStoreDownFailsClosed(t *testing.T) {
	var fetches atomic.Int64
	b := newBilled(t, 100, nil, withScarce(t, 2, failingAllowances{}, &fetches))
	r := b.call("/v1/" + similar + "?query=x")
	checkEnvelope(t, r)
	if r.code != http.StatusServiceUnavailable || r.errorType() != "UPSTREAM_ERROR" ||
		r.header.Get("retry-after") != "30" || r.details()["reason"] != "capacity_unavailable" {
		t.Fatalf("%d %v %s", r.code, r.header, r.raw)
	}
	checkRefunded(t, b, r)
	if fetches.Load() != 0 || balanceOf(t, b) != 100 {
		t.Errorf("fetched %d, balance %d", fetches.Load(), balanceOf(t, b))
	}
	if c := capacityOf(t, b); c["remaining"] != nil || c["exhausted"] != false {
		t.Errorf("capacity %v", c)
	}
	if !strings.Contains(b.logs.String(), "upstream allowance not taken") {
		t.Error("the store error is not logged")
	}
}

// The same, proven on DynamoDB Local.
func TestCapacityOnDynamoDB(t *testing.T) {
	onDynamo := func(t *testing.T, credits int64, limit *int64, mutate ...func(*Config)) *billed {
		return newBilledOn(t, dynamotest.NewStore(t), credits, limit, mutate...)
	}
	for name, test := range map[string]func(*testing.T, billedFactory){
		"Exhausted":        testCapacityExhausted,
		"UnderConcurrency": testCapacityUnderConcurrency,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, onDynamo)
		})
	}
}
