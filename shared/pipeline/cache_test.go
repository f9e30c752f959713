package pipeline

import (
	"testing"

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
)

func TestCacheMissThenHitCostsNothing(t *testing.T) { testCacheMissThenHitCostsNothing(t, newBilled) }

func testCacheMissThenHitCostsNothing(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	first := b.call("/v1/marketplace_a/search?query=lamp")
	if first.code != 200 || first.header.Get("x-cache") != "MISS" || first.body["cached"] != false || first.body["credits_used"] != float64(3) {
		t.Fatalf("first: %d %v %s", first.code, first.header, first.raw)
	}
	second := b.call("/v1/marketplace_a/search?query=%20lamp&page=")
	checkEnvelope(t, second)
	if second.code != 200 || second.header.Get("x-cache") != "HIT" || second.body["cached"] != true ||
		second.body["credits_used"] != float64(0) || second.header.Get("x-credits-used") != "0" {
		t.Fatalf("second: %d %v %s", second.code, second.header, second.raw)
	}
	if b.calls.Load() != 1 {
		t.Errorf("a hit calls no upstream: %d calls", b.calls.Load())
	}
	if second.body["request_id"] == first.body["request_id"] || len(b.entries(t, second.body["request_id"].(string))) != 0 {
		t.Error("a hit is its own request and writes no ledger entry")
	}
	if a, _ := b.store.Account(t.Context(), b.account.ID); a.CreditsRemaining != 97 {
		t.Errorf("balance %d", a.CreditsRemaining)
	}
	d1, d2 := first.body["data"].(map[string]any), second.body["data"].(map[string]any)
	if d1["query"] != d2["query"] || d2["query"] != "lamp" {
		t.Errorf("the cached data is the original's: %v %v", d1, d2)
	}
}

func TestCacheSharesEquivalentSpellingsAndAccounts(t *testing.T) {
	testCacheSharesEquivalentSpellingsAndAccounts(t, newBilled)
}

func testCacheSharesEquivalentSpellingsAndAccounts(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	b.call("/v1/microblog_b/search-posts?query=go&mode=top")
	for _, q := range []string{"query=go&sort=top", "sort_by=top&query=go", "query=go&mode=top&judgments=on"} {
		if r := b.call("/v1/microblog_b/search-posts?" + q); r.header.Get("x-cache") != "HIT" {
			t.Errorf("%s: %s", q, r.header.Get("x-cache"))
		}
	}
	if r := b.call("/v1/microblog_b/search-posts?query=go&mode=latest"); r.header.Get("x-cache") != "MISS" {
		t.Error("another request is another entry")
	}
	if r := b.call("/v1/microblog_b/search-posts?query=go"); r.header.Get("x-cache") != "HIT" {
		t.Error("the default spelled out and omitted share an entry")
	}
	// Another account's identical request is answered from the same entry.
	other := newBilled(t, 100, nil, func(c *Config) { c.Cache = b.store.(store.Cache) })
	if r := other.call("/v1/microblog_b/search-posts?query=go&mode=top"); r.header.Get("x-cache") != "HIT" || r.body["credits_used"] != float64(0) {
		t.Errorf("the cache is shared across accounts: %s", r.raw)
	}
}

func TestFailuresAreNeverCached(t *testing.T) { testFailuresAreNeverCached(t, newBilled) }

func testFailuresAreNeverCached(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	for i := 0; i < 2; i++ {
		if r := b.call("/v1/marketplace_a/search?query=fail"); r.code != 502 || r.header.Get("x-cache") != "" {
			t.Fatalf("%d %v", r.code, r.header)
		}
	}
	if b.calls.Load() != 2 {
		t.Errorf("a failure leaves no entry: %d upstream calls", b.calls.Load())
	}
}

func TestCacheControlAndExpiry(t *testing.T) { testCacheControlAndExpiry(t, newBilled) }

func testCacheControlAndExpiry(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	b.call("/v1/marketplace_a/search?query=a")
	if r := b.do("GET", "/v1/marketplace_a/search?query=a", "x-api-key", b.key, "cache-control", "no-cache"); r.header.Get("x-cache") != "MISS" || b.calls.Load() != 2 {
		t.Errorf("no-cache fetches fresh: %v %d", r.header.Get("x-cache"), b.calls.Load())
	}
	if r := b.call("/v1/marketplace_a/search?query=a"); r.header.Get("x-cache") != "HIT" {
		t.Error("no-cache refreshed the entry")
	}
	b.do("GET", "/v1/marketplace_a/search?query=new", "x-api-key", b.key, "cache-control", "no-store")
	if r := b.call("/v1/marketplace_a/search?query=new"); r.header.Get("x-cache") != "MISS" {
		t.Error("no-store keeps nothing")
	}
	e, _ := registry.Default().Endpoint("marketplace_a/search")
	b.clock.Advance(e.CacheFor())
	if r := b.call("/v1/marketplace_a/search?query=a"); r.header.Get("x-cache") != "MISS" || r.body["credits_used"] != float64(3) {
		t.Errorf("an expired entry is a miss: %v", r.header.Get("x-cache"))
	}
}

func TestDryRunSnapshot(t *testing.T) { testDryRunSnapshot(t, newBilled) }

func testDryRunSnapshot(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 4, nil)
	ledger := func() int { return len(b.entries(t, "")) }
	before := ledger()
	r := b.call("/v1/marketplace_a/search?query=a&dry_run=1")
	d := r.body["data"].(map[string]any)
	if r.code != 200 || d["cache"] != "MISS" || d["estimated_credits"] != float64(3) || d["can_pay"] != true ||
		d["credits_remaining"] != float64(4) || d["refusal"] != nil || b.calls.Load() != 0 || ledger() != before {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if r := b.call("/v1/marketplace_a/search?query=a"); r.header.Get("x-cache") != "MISS" {
		t.Fatal("the dry run stored nothing in the cache")
	}
	d = b.call("/v1/marketplace_a/search?query=a&dry_run=true").body["data"].(map[string]any)
	if d["cache"] != "HIT" || d["estimated_credits"] != float64(0) || d["can_pay"] != true {
		t.Errorf("after the real call: %v", d)
	}
	d = b.call("/v1/marketplace_a/search?query=b&dry_run=1").body["data"].(map[string]any)
	if d["can_pay"] != false || d["refusal"] != "INSUFFICIENT_CREDITS" || d["credits_remaining"] != float64(1) {
		t.Errorf("a call the wallet cannot pay: %v", d)
	}
	if a, _ := b.store.Account(t.Context(), b.account.ID); a.CreditsRemaining != 1 || b.calls.Load() != 1 {
		t.Errorf("dry runs charged or fetched: %d %d", a.CreditsRemaining, b.calls.Load())
	}
	limited := newBilled(t, 100, ptr64(2))
	d = limited.call("/v1/marketplace_a/search?query=a&dry_run=1").body["data"].(map[string]any)
	if d["refusal"] != "KEY_LIMIT_EXCEEDED" || d["key_credit_limit"] != float64(2) {
		t.Errorf("a call the key cannot pay: %v", d)
	}
}

func TestOwnerBoundResultsAreNotShared(t *testing.T) {
	b := newBilled(t, 100, nil)
	for _, q := range []string{"exclude=engagement_bait", "fit=goal&goal=recipes"} {
		b.call("/v1/microblog_b/search-posts?query=go&" + q)
		if r := b.call("/v1/microblog_b/search-posts?query=go&" + q); r.header.Get("x-cache") != "MISS" {
			t.Errorf("%s: owner-bound results are never cached: %s", q, r.header.Get("x-cache"))
		}
	}
	if r := b.call("/v1/marketplace_a/search?query=a&dry_run=1"); r.header.Get("x-cache") != "" {
		t.Errorf("a dry run reports the cache in its body only: %q", r.header.Get("x-cache"))
	}
}
