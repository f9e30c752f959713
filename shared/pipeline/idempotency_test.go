package pipeline

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

func (b *billed) withKey(target, idemKey string, headers ...string) response {
	return b.do("GET", target, append([]string{"x-api-key", b.key, "idempotency-key", idemKey}, headers...)...)
}

func (b *billed) debits(t *testing.T) int {
	t.Helper()
	n := 0
	for _, e := range b.entries(t, "") {
		if e.Type == store.EntryDebit {
			n++
		}
	}
	return n
}

func TestIdempotentConcurrentRequestsRunOnce(t *testing.T) {
	testIdempotentConcurrentRequestsRunOnce(t, newBilled)
}

func testIdempotentConcurrentRequestsRunOnce(t *testing.T, newBilled billedFactory) {
	// Limits on, as in production: replays and 409s never wait for an
	// in-flight slot.
	b := newBilled(t, 100, nil, withLimits)
	const n = 50
	results := make(chan response, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- b.withKey("/v1/marketplace_a/search?query=gated", "order-42")
		}()
	}
	// Every request but the one holding the key answers at once; then the
	// upstream call may finish.
	var early []response
	for len(early) < n-1 {
		early = append(early, <-results)
	}
	close(b.gate)
	wg.Wait()
	close(results)
	first := <-results
	if first.code != 200 || first.header.Get("x-idempotent-replay") != "" {
		t.Fatalf("the claiming request: %d %v %s", first.code, first.header, first.raw)
	}
	for _, r := range early {
		inProgress := r.code == 409 && r.details()["reason"] == "idempotency_in_progress"
		if !inProgress {
			t.Errorf("%d %s", r.code, r.raw)
		}
	}
	if b.calls.Load() != 1 || b.debits(t) != 1 {
		t.Fatalf("%d upstream calls, %d charges", b.calls.Load(), b.debits(t))
	}
	replayed := b.withKey("/v1/marketplace_a/search?query=gated", "order-42")
	if replayed.code != 200 || replayed.raw != first.raw || replayed.header.Get("x-idempotent-replay") != "true" ||
		replayed.header.Get("x-request-id") != first.body["request_id"] {
		t.Fatalf("replay: %d %v\n%s\n%s", replayed.code, replayed.header, replayed.raw, first.raw)
	}
	if b.calls.Load() != 1 || b.debits(t) != 1 {
		t.Error("a replay calls no upstream and charges nothing")
	}
	if a, _ := b.store.Account(t.Context(), b.account.ID); a.CreditsRemaining != 97 {
		t.Errorf("balance %d", a.CreditsRemaining)
	}
}

func TestIdempotencyKeyRules(t *testing.T) { testIdempotencyKeyRules(t, newBilled) }

func testIdempotencyKeyRules(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	b.withKey("/v1/marketplace_a/search?query=a", "k1")
	if r := b.withKey("/v1/marketplace_a/search?query=b", "k1"); r.code != 422 || r.details()["reason"] != "idempotency_key_reused" {
		t.Errorf("the same key for another request: %d %s", r.code, r.raw)
	}
	if r := b.withKey("/v1/marketplace_a/search?query=%20a&page=", "k1"); r.header.Get("x-idempotent-replay") != "true" {
		t.Errorf("an equivalent spelling is the same request: %s", r.raw)
	}
	if r := b.withKey("/v1/marketplace_a/search?query=a", strings.Repeat("k", 256)); r.code != 422 || r.details()["field"] != "Idempotency-Key" {
		t.Errorf("a 256-character key: %d %s", r.code, r.raw)
	}
	if r := b.withKey("/v1/marketplace_a/search?query=c", strings.Repeat("k", 255)); r.code != 200 {
		t.Errorf("a 255-character key: %d", r.code)
	}
	// Keys are scoped to the account: another account's same key is its own.
	other := newBilled(t, 100, nil, func(c *Config) { c.Idempotency = b.store.(store.Idempotency) })
	if r := other.withKey("/v1/marketplace_a/search?query=zzz", "k1"); r.code != 200 || r.header.Get("x-idempotent-replay") != "" {
		t.Errorf("another account: %d %v", r.code, r.header)
	}
	// After 24 hours the key is free again.
	b.clock.Advance(IdempotencyRetention)
	calls := b.calls.Load()
	if r := b.withKey("/v1/marketplace_a/search?query=b", "k1"); r.code != 200 || r.header.Get("x-idempotent-replay") != "" || b.calls.Load() != calls+1 {
		t.Errorf("after 24 hours: %d %v", r.code, r.header)
	}
}

func TestRetryableOutcomesAreNotStored(t *testing.T) { testRetryableOutcomesAreNotStored(t, newBilled) }

func testRetryableOutcomesAreNotStored(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	for i := 0; i < 2; i++ {
		if r := b.withKey("/v1/marketplace_a/search?query=fail", "retry-me"); r.code != 502 || r.header.Get("x-idempotent-replay") != "" {
			t.Fatalf("%d %v", r.code, r.header)
		}
	}
	if b.calls.Load() != 2 {
		t.Errorf("an upstream failure is retried with the same key: %d calls", b.calls.Load())
	}
	// A definitive refusal is kept and replayed.
	b.withKey("/v1/marketplace_a/search?query=a&limit=5", "bad")
	if r := b.withKey("/v1/marketplace_a/search?query=a&limit=5", "bad"); r.code != 400 {
		t.Errorf("validation refusals happen before the key is claimed: %d", r.code)
	}
}

type brokenIdempotency struct{ store.Idempotency }

func (brokenIdempotency) ClaimIdempotency(context.Context, string, string, string, string, time.Time, time.Time, time.Time) (store.IdempotencyRecord, bool, error) {
	return store.IdempotencyRecord{}, false, errors.New("dynamodb: service unavailable")
}

func TestIdempotencyStoreUnavailable(t *testing.T) {
	b := newBilled(t, 100, nil, func(c *Config) { c.Idempotency = brokenIdempotency{} })
	r := b.withKey("/v1/marketplace_a/search?query=a", "k")
	if r.code != 200 || r.header.Get("x-idempotency-status") != "unavailable" || b.calls.Load() != 1 {
		t.Fatalf("%d %v", r.code, r.header)
	}
}

func TestIdempotencyKeepsLargeOutcomes(t *testing.T) {
	b := newBilled(t, 100, nil)
	first := b.withKey("/v1/marketplace_a/search?query=huge-compressible", "big")
	again := b.withKey("/v1/marketplace_a/search?query=huge-compressible", "big")
	if first.code != 200 || again.raw != first.raw || again.header.Get("x-idempotent-replay") != "true" {
		t.Fatalf("a large body that compresses replays: %d %v", again.code, again.header)
	}
	b.withKey("/v1/marketplace_a/search?query=huge", "bigger")
	r := b.withKey("/v1/marketplace_a/search?query=huge", "bigger")
	if r.code != 422 || r.details()["reason"] != "idempotency_result_not_kept" {
		t.Fatalf("an outcome too large to keep: %d %.300s", r.code, r.raw)
	}
	if b.calls.Load() != 2 || b.debits(t) != 2 {
		t.Errorf("neither large request ran twice: %d calls, %d charges", b.calls.Load(), b.debits(t))
	}
}

func TestCallsRunUnderADeadline(t *testing.T) {
	b := newBilled(t, 100, nil)
	if r := b.call("/v1/marketplace_a/search?query=deadline"); r.code != 200 {
		t.Errorf("the handler's context has a deadline shorter than the leases: %d %s", r.code, r.raw)
	}
}

func TestRefusalsFreeTheIdempotencyKey(t *testing.T) { testRefusalsFreeTheIdempotencyKey(t, newBilled) }

// testRefusalsFreeTheIdempotencyKey: every refusal a request with an
// Idempotency-Key can meet (spec 7 tells the client to retry it with the
// same key) leaves the key free, so the retry runs normally once the
// cause has passed.
func testRefusalsFreeTheIdempotencyKey(t *testing.T, newBilled billedFactory) {
	ctx := t.Context()
	const search = "/v1/marketplace_a/search?query=a"
	rules := store.LimitRules{Rate: 3, Window: time.Minute, Concurrency: 1, Lease: 2 * time.Minute}
	limited := func(c *Config) { withLimits(c); c.LimitRules = rules }
	runsNormally := func(b *billed, target, key, after string) {
		t.Helper()
		r := b.withKey(target, key)
		if r.code != 200 || r.header.Get("x-idempotent-replay") != "" || r.body["credits_used"] == float64(0) {
			t.Fatalf("the retry after %s: %d %v %s", after, r.code, r.header, r.raw)
		}
		if again := b.withKey(target, key); again.code != 200 || again.header.Get("x-idempotent-replay") != "true" {
			t.Fatalf("after %s the outcome is kept: %d %v", after, again.code, again.header)
		}
	}
	refused := func(r response, code int, errType, reason string) {
		t.Helper()
		if r.code != code || r.errorType() != errType || (reason != "" && r.details()["reason"] != reason) {
			t.Fatalf("want %d %s %s: %d %s", code, errType, reason, r.code, r.raw)
		}
	}

	b := newBilled(t, 100, nil, limited)
	for i := 0; i < rules.Rate; i++ {
		b.call("/v1/credits/balance")
	}
	refused(b.withKey(search, "after-rate"), 429, "RATE_LIMITED", "rate_limit")
	b.clock.Advance(rules.Window + time.Second)
	runsNormally(b, search, "after-rate", "a rate refusal")

	b = newBilled(t, 100, nil, limited)
	limits := b.store.(store.Limits)
	if _, err := limits.TakeSlot(ctx, b.keyRec.Hash, "req_in_flight", b.clock.Now(), rules); err != nil {
		t.Fatal(err)
	}
	refused(b.withKey(search, "after-concurrency"), 429, "RATE_LIMITED", "concurrency_limit")
	if err := limits.ReleaseSlots(ctx, b.keyRec.Hash, []string{"req_in_flight"}, b.clock.Now(), rules); err != nil {
		t.Fatal(err)
	}
	runsNormally(b, search, "after-concurrency", "a concurrency refusal")

	b = meteredHarness(t, newBilled)
	for i := 0; i < 4; i++ {
		b.call(profiles + "used" + strconv.Itoa(i))
	}
	refused(b.withKey(profiles+"x", "after-fair-use"), 429, "FAIR_USE_EXCEEDED", "")
	b.p.cfg.FairUseLimits["web/social-profiles"] = 10
	runsNormally(b, profiles+"x", "after-fair-use", "a fair-use refusal")

	b = newBilled(t, 2, nil)
	refused(b.withKey(search, "after-credits"), 402, "INSUFFICIENT_CREDITS", "")
	if _, err := b.store.Grant(ctx, b.account.ID, 10, "top-up", "req_test_topup"); err != nil {
		t.Fatal(err)
	}
	runsNormally(b, search, "after-credits", "an insufficient balance")

	b = newBilled(t, 100, ptr64(2))
	refused(b.withKey(search, "after-key-limit"), 402, "KEY_LIMIT_EXCEEDED", "")
	if _, err := b.store.UpdateKey(ctx, b.account.ID, b.keyRec.ID, store.KeyChange{SetLimit: true, CreditLimit: ptr64(10)}); err != nil {
		t.Fatal(err)
	}
	runsNormally(b, search, "after-key-limit", "the key's credit limit")

	// A call that dies on its way to a 500 is no outcome either.
	b = newBilled(t, 100, nil)
	for i := 0; i < 2; i++ {
		if r := b.withKey("/v1/marketplace_a/search?query=panic", "after-panic"); r.code != 500 {
			t.Fatalf("attempt %d after a panic: %d %s", i, r.code, r.raw)
		}
	}
}

func TestInProgressComesBeforeReuse(t *testing.T) { testInProgressComesBeforeReuse(t, newBilled) }

// testInProgressComesBeforeReuse: spec 3.2 answers any second request
// while the first is in progress with 409, even one asking for something
// else; once the first is stored, another request is 422.
func testInProgressComesBeforeReuse(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	first := make(chan response, 1)
	go func() { first <- b.withKey("/v1/marketplace_a/search?query=gated", "in-flight") }()
	deadline := time.Now().Add(10 * time.Second)
	for b.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for _, target := range []string{"/v1/marketplace_a/search?query=gated", "/v1/marketplace_a/search?query=other", "/v1/credits/balance"} {
		if r := b.withKey(target, "in-flight"); r.code != 409 || r.details()["reason"] != "idempotency_in_progress" {
			t.Errorf("%s while in progress: %d %s", target, r.code, r.raw)
		}
	}
	close(b.gate)
	if r := <-first; r.code != 200 {
		t.Fatalf("the first request: %d %s", r.code, r.raw)
	}
	if r := b.withKey("/v1/marketplace_a/search?query=other", "in-flight"); r.code != 422 || r.details()["reason"] != "idempotency_key_reused" {
		t.Errorf("another request once stored: %d %s", r.code, r.raw)
	}
}
