package pipeline

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
)

const profiles = "/v1/web/social-profiles?platform=microblog_b&handle="

func meteredHarness(t *testing.T, newBilled billedFactory, mutate ...func(*Config)) *billed {
	b := newBilled(t, 1000, nil, append([]func(*Config){func(c *Config) {
		c.FairUse = c.Store.(store.FairUse)
		c.FairUseLimits = map[string]int64{"web/social-profiles": 4}
		c.Handlers["web/social-profiles"] = func(_ context.Context, c *Call) (any, *envelope.Error) {
			switch c.Params.Values["handle"] {
			case "retried":
				c.Upstream.Attempts = 2
			case "fail":
				c.Upstream.Attempts = 3
				return nil, envelope.New(envelope.UpstreamError, http.StatusBadGateway, "The source failed.", nil)
			}
			return map[string]any{"items": []any{}}, nil
		}
	}}, mutate...)...)
	return b
}

func TestFairUseCeiling(t *testing.T) { testFairUseCeiling(t, newBilled) }

func testFairUseCeiling(t *testing.T, newBilled billedFactory) {
	b := meteredHarness(t, newBilled)
	r := b.call(profiles + "a")
	if r.code != 200 || r.header.Get("x-fairuse-limit") != "4" || r.header.Get("x-fairuse-remaining") != "3" || r.header.Get("x-fairuse-degraded") != "false" {
		t.Fatalf("%d %v", r.code, r.header)
	}
	// Retries count: an upstream failure after 3 attempts uses 3 (and is refunded).
	r = b.call(profiles + "fail")
	if r.code != 502 || r.header.Get("x-fairuse-remaining") != "0" || r.body["credits_used"] != float64(0) {
		t.Fatalf("%d %v %s", r.code, r.header, r.raw)
	}
	r = b.call(profiles + "b")
	checkEnvelope(t, r)
	if r.code != 429 || r.errorType() != "FAIR_USE_EXCEEDED" || r.details()["limit"] != float64(4) ||
		r.details()["used"] != float64(4) || r.details()["degraded"] != false || r.header.Get("x-fairuse-remaining") != "0" {
		t.Fatalf("%d %v %s", r.code, r.header, r.raw)
	}
	if a, _ := b.store.Account(t.Context(), b.account.ID); a.CreditsRemaining != 1000-15 {
		t.Errorf("a fair-use refusal charges nothing: %d", a.CreditsRemaining)
	}
	// The window rolls: 30 days later the ceiling has room again.
	b.clock.Advance(store.FairUseWindow)
	if r := b.call(profiles + "c"); r.code != 429 {
		t.Errorf("an attempt counts for at least 30 days: %d", r.code)
	}
	b.clock.Advance(24 * time.Hour)
	if r := b.call(profiles + "c"); r.code != 200 {
		t.Errorf("after 31 days: %d", r.code)
	}
	// Unmetered endpoints carry no fair-use headers.
	if r := b.call("/v1/microblog_b/search-posts?query=a"); r.header.Get("x-fairuse-limit") != "" {
		t.Error("an unmetered endpoint")
	}
}

func TestFairUseCountsAttemptsNotCacheHits(t *testing.T) {
	testFairUseCountsAttemptsNotCacheHits(t, newBilled)
}

func testFairUseCountsAttemptsNotCacheHits(t *testing.T, newBilled billedFactory) {
	b := meteredHarness(t, newBilled)
	if r := b.call(profiles + "retried"); r.header.Get("x-fairuse-remaining") != "2" {
		t.Fatalf("two attempts: %v", r.header)
	}
	if r := b.call(profiles + "retried"); r.header.Get("x-cache") != "HIT" {
		t.Fatalf("a hit: %v", r.header)
	}
	if used, _ := b.store.(store.FairUse).FairUseUsed(t.Context(), b.account.ID, "web/social-profiles", b.clock.Now()); used != 2 {
		t.Errorf("a cache hit reaches no upstream and counts nothing: %d", used)
	}
	if r := b.call(profiles + "new&dry_run=1"); r.header.Get("x-fairuse-limit") != "" {
		t.Error("a dry run counts nothing")
	}
}

type brokenFairUse struct{ store.FairUse }

func (brokenFairUse) FairUseUsed(context.Context, string, string, time.Time) (int64, error) {
	return 0, errors.New("dynamodb: service unavailable")
}

func TestFairUseDegraded(t *testing.T) {
	b := meteredHarness(t, newBilled, func(c *Config) { c.FairUse = brokenFairUse{} })
	r := b.call(profiles + "a")
	checkEnvelope(t, r)
	if r.code != 503 || r.errorType() != "FAIR_USE_EXCEEDED" || r.details()["degraded"] != true ||
		r.header.Get("retry-after") == "" || r.header.Get("x-fairuse-degraded") != "true" || b.calls.Load() != 0 {
		t.Fatalf("%d %v %s", r.code, r.header, r.raw)
	}
	if r := b.call("/v1/microblog_b/search-posts?query=a"); r.code != 200 {
		t.Errorf("unmetered endpoints are unaffected: %d", r.code)
	}
}

func TestFairUseCountsACallerWhoHangsUp(t *testing.T) {
	b := meteredHarness(t, newBilled, func(c *Config) {
		c.Handlers["web/social-profiles"] = func(_ context.Context, c *Call) (any, *envelope.Error) {
			c.Request.Context().Value(cancelKey{}).(context.CancelFunc)() // the caller goes away mid-call
			return map[string]any{}, nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	ctx = context.WithValue(ctx, cancelKey{}, cancel)
	req := httptest.NewRequest("GET", "http://api.test"+profiles+"gone", nil).WithContext(ctx)
	req.Header.Set("x-api-key", b.key)
	b.p.ServeHTTP(httptest.NewRecorder(), req)
	if used, _ := b.store.FairUseUsed(t.Context(), b.account.ID, "web/social-profiles", b.clock.Now()); used != 1 {
		t.Errorf("the attempt is counted: %d", used)
	}
}

type cancelKey struct{}
