package pipeline

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/store"
)

// countingCache counts response-cache lookups, to show a refusal came first.
type countingCache struct {
	store.Cache
	gets atomic.Int64
}

func (c *countingCache) CacheGet(ctx context.Context, key string, now time.Time) (store.CacheEntry, error) {
	c.gets.Add(1)
	return c.Cache.CacheGet(ctx, key, now)
}

// hostsHarness serves craft_market/reviews (cost 4) and the metered
// marketplace_b/shop (cost 14) with handlers that record what they got.
type hostsHarness struct {
	*billed
	cache *countingCache
	mu    sync.Mutex
	seen  []string // the id or url each handler call received
}

func newHostsHarness(t *testing.T) *hostsHarness {
	h := &hostsHarness{}
	h.billed = newBilled(t, 100, nil, func(c *Config) {
		h.cache = &countingCache{Cache: c.Cache}
		c.Cache = h.cache
		c.FairUse = c.Store.(store.FairUse)
		c.DataSchemas = schemas.For
		record := func(name string) Handler {
			return func(_ context.Context, c *Call) (any, *envelope.Error) {
				h.mu.Lock()
				h.seen = append(h.seen, c.Params.Values[name])
				h.mu.Unlock()
				return map[string]any{"items": []any{}, "count": 0}, nil
			}
		}
		c.Handlers["craft_market/reviews"] = record("id")
		c.Handlers["marketplace_b/shop"] = record("url")
	})
	return h
}

func (h *hostsHarness) handled() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// A URL of another site is refused in validation: 422 naming the field,
// with no cache lookup, no handler call, no fair-use count and no charge.
func TestForeignURLIsRefusedBeforeDispatch(t *testing.T) {
	h := newHostsHarness(t)
	for _, target := range []string{
		"/v1/craft_market/reviews?id=" + url.QueryEscape("https://evil.example/listing/1234567890"),
		"/v1/craft_market/reviews?id=" + url.QueryEscape("https://www.etsy.com.evil.example/listing/1"),
		"/v1/craft_market/reviews?id=" + url.QueryEscape("evil.example/listing/1"),
		"/v1/craft_market/reviews?id=" + url.QueryEscape("https://evil.example/listing/1") + "&dry_run=1",
		"/v1/marketplace_b/shop?url=" + url.QueryEscape("https://www.amazon.evil.example/shop/x"),
		"/v1/marketplace_b/shop?url=" + url.QueryEscape("https://www.amazon.com@evil.example/shop/x"),
	} {
		r := h.call(target)
		checkEnvelope(t, r)
		field := "id"
		if strings.Contains(target, "marketplace_b") {
			field = "url"
		}
		if r.code != http.StatusUnprocessableEntity || r.errorType() != "INVALID_PARAMETERS" || r.details()["field"] != field {
			t.Fatalf("%s: %d %s", target, r.code, r.raw)
		}
		if reason := r.details()["reason"]; reason != "wrong_host" && reason != "invalid_url" {
			t.Fatalf("%s: reason %v", target, reason)
		}
		if e := h.entries(t, r.body["request_id"].(string)); len(e) != 0 {
			t.Fatalf("%s: refused before any charge, yet the ledger has %+v", target, e)
		}
		if r.header.Get("x-fairuse-limit") != "" {
			t.Errorf("%s: a refused call counts no fair use: %v", target, r.header)
		}
	}
	if n := h.cache.gets.Load(); n != 0 {
		t.Errorf("%d cache lookups for refused calls", n)
	}
	if seen := h.handled(); len(seen) != 0 {
		t.Errorf("handlers ran for %v", seen)
	}
	if used, _ := h.store.(store.FairUse).FairUseUsed(t.Context(), h.account.ID, "marketplace_b/shop", h.clock.Now()); used != 0 {
		t.Errorf("fair use counted %d attempts", used)
	}
	if a, _ := h.store.Account(t.Context(), h.account.ID); a.CreditsRemaining != 100 {
		t.Errorf("balance %d, want 100", a.CreditsRemaining)
	}
}

// The platform's own pages and plain ids run and are charged; the
// scheme-less spelling reaches the handler as an https URL and shares the
// cache entry of the spelled-out one.
func TestPlatformURLRunsWithItsCanonicalValue(t *testing.T) {
	h := newHostsHarness(t)
	full := "https://www.etsy.com/listing/1234567890"
	for i, c := range []struct{ value, cache string }{
		{"1234567890", "MISS"},
		{full, "MISS"},
		{"www.etsy.com/listing/1234567890", "HIT"},
		{"//www.etsy.com/listing/1234567890", "HIT"},
	} {
		r := h.call("/v1/craft_market/reviews?id=" + url.QueryEscape(c.value))
		if r.code != 200 || r.header.Get("x-cache") != c.cache {
			t.Fatalf("%d %s: %d %s %s", i, c.value, r.code, r.header.Get("x-cache"), r.raw)
		}
	}
	if seen := h.handled(); len(seen) != 2 || seen[0] != "1234567890" || seen[1] != full {
		t.Errorf("handlers saw %v", seen)
	}
	if a, _ := h.store.Account(t.Context(), h.account.ID); a.CreditsRemaining != 100-2*4 {
		t.Errorf("balance %d: two paid calls of 4", a.CreditsRemaining)
	}
	if r := h.call("/v1/marketplace_b/shop?url=" + url.QueryEscape("https://www.amazon.de/shop/example-shop")); r.code != 200 {
		t.Errorf("another marketplace of the platform: %d %s", r.code, r.raw)
	}
}

// The sandbox and batch items validate exactly as /v1 does; so does a
// deployment with no source for the endpoint (422 before its 501).
func TestForeignURLIsRefusedEverywhere(t *testing.T) {
	h := newHostsHarness(t)
	foreign := url.QueryEscape("https://evil.example/listing/1")
	if r := h.call("/sandbox/craft_market/reviews?id=" + foreign); r.code != 422 || r.details()["reason"] != "wrong_host" {
		t.Errorf("sandbox: %d %s", r.code, r.raw)
	}
	if r := h.call("/sandbox/craft_market/reviews?id=" + url.QueryEscape("https://www.etsy.com/listing/1")); r.code != 200 {
		t.Errorf("sandbox, the platform's page: %d %.300s", r.code, r.raw)
	}
	r, w := h.batch(items(
		`{"platform":"craft_market","endpoint":"reviews","params":{"id":"https://evil.example/listing/1"}}`,
		`{"platform":"craft_market","endpoint":"reviews","params":{"id":"1234567890"}}`,
	))
	if r.code != 200 || len(w.Results) != 2 || w.Results[0].Status != 422 || w.Results[0].Error == nil ||
		w.Results[0].Error.Details["reason"] != "wrong_host" || w.Results[1].Status != 200 {
		t.Errorf("batch: %d %s", r.code, r.raw)
	}
	if seen := h.handled(); len(seen) != 1 || seen[0] != "1234567890" {
		t.Errorf("handlers saw %v", seen)
	}
	bare := newHarness(t)
	if r := bare.get("/v1/craft_market/reviews?id=" + foreign); r.code != 422 || r.details()["reason"] != "wrong_host" {
		t.Errorf("without a source: %d %s", r.code, r.raw)
	}
	if r := bare.get("/v1/craft_market/reviews?id=1234567890"); r.code != http.StatusNotImplemented {
		t.Errorf("an id without a source: %d %s", r.code, r.raw)
	}
}
