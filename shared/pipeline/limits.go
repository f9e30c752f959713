package pipeline

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
)

// admit applies the per-key limits of spec 8 to an authenticated request,
// before validation, so every routed request counts. An admitted request
// gets the rate headers of spec 4.9; a refused one is 429 RATE_LIMITED
// with the wait: until the oldest entry ages out of the window, or one
// second for a full set of in-flight slots. A request with an
// Idempotency-Key takes its slot only once the key is claimed (takeSlot),
// so replays and 409s never wait for one. A limits store that cannot be
// reached admits the request (logged): an outage of the counter must not
// take the API down with it. A contended one is not an outage (the key's
// own flood, or the database throttling its hot record): it refuses with
// the concurrency wait, so nothing is admitted uncounted.
func (p *Pipeline) admit(x *exchange, who auth.Principal) *envelope.Error {
	if p.cfg.Limits == nil || who.KeyID == "" {
		return nil
	}
	slot := !hasIdempotencyKey(x)
	var a store.Admission
	if x.entered != nil {
		a = *x.entered // admitted with authentication
	} else {
		var err error
		a, err = p.cfg.Limits.Admit(x.r.Context(), who.LimitsID(), x.requestID, p.cfg.Now(), p.cfg.LimitRules, slot)
		if errors.Is(err, store.ErrContended) {
			return contended(p.cfg.LimitRules)
		}
		if err != nil {
			p.cfg.Logger.Warn("limits store unavailable; admitted unlimited", "request_id", x.requestID, "error", err.Error())
			// The write may have landed before the error: free what it may hold.
			x.admitted = slot
			return nil
		}
	}
	if refusal := limitRefusal(a); refusal != nil {
		return refusal
	}
	x.admitted, x.stale = slot, a.Stale
	h := x.w.Header()
	h.Set("X-Ratelimit-Limit", strconv.Itoa(a.RateLimit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(a.RateRemaining))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(a.RateReset.Unix(), 10))
	h.Set("X-Concurrency-Limit", strconv.Itoa(a.Concurrency))
	h.Set("X-Concurrency-Remaining", strconv.Itoa(a.SlotsFree))
	return nil
}

// startSlot starts taking the in-flight slot of a metered request admitted
// without one (it has an Idempotency-Key); the returned func waits for it
// (once; later calls repeat the answer) and answers a refusal.
func (p *Pipeline) startSlot(metered bool, x *exchange, who auth.Principal) (wait func() *envelope.Error) {
	if !metered || p.cfg.Limits == nil || who.KeyID == "" || x.admitted {
		return func() *envelope.Error { return nil }
	}
	var a store.Admission
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		a, err = p.cfg.Limits.TakeSlot(x.r.Context(), who.LimitsID(), x.requestID, p.cfg.Now(), p.cfg.LimitRules)
	}()
	return sync.OnceValue(func() *envelope.Error {
		<-done
		return p.tookSlot(x, a, err)
	})
}

// tookSlot applies the outcome of TakeSlot.
func (p *Pipeline) tookSlot(x *exchange, a store.Admission, err error) *envelope.Error {
	if errors.Is(err, store.ErrContended) {
		return contended(p.cfg.LimitRules) // no write landed
	}
	x.admitted = true // on other errors too: the slot may have been written
	if err != nil {
		p.cfg.Logger.Warn("limits store unavailable; admitted unlimited", "request_id", x.requestID, "error", err.Error())
		return nil
	}
	if refusal := limitRefusal(a); refusal != nil {
		x.admitted = false
		return refusal
	}
	x.stale = a.Stale
	x.w.Header().Set("X-Concurrency-Limit", strconv.Itoa(a.Concurrency))
	x.w.Header().Set("X-Concurrency-Remaining", strconv.Itoa(a.SlotsFree))
	return nil
}

// contended refuses a request the limits record could not count in time.
func contended(r store.LimitRules) *envelope.Error {
	return RateLimited("concurrency_limit", time.Second, "Too many requests at once for this key (at most "+strconv.Itoa(r.Concurrency)+" in flight); retry in a second.")
}

func limitRefusal(a store.Admission) *envelope.Error {
	switch a.Refused {
	case "rate":
		return RateLimited("rate_limit", a.RetryAfter, "More than "+strconv.Itoa(a.RateLimit)+" requests in the last minute for this key.")
	case "concurrency":
		return RateLimited("concurrency_limit", a.RetryAfter, "More than "+strconv.Itoa(a.Concurrency)+" requests in flight for this key.")
	}
	return nil
}

// releaseSlot frees the request's in-flight slot before its answer is
// sent (an effect), even if the caller has gone; if this fails the lease
// frees it. A batch item's slot is held until the batch's items are done
// and then freed with the other items' in one write, before the batch
// answers (batchGather.releaseHeld).
func (p *Pipeline) releaseSlot(x *exchange, who auth.Principal) {
	x.effect(func(ctx context.Context) {
		if ig := x.gather; ig != nil {
			if x.admitted {
				ig.g.holdSlot(who.LimitsID(), x.requestID, x.stale)
			}
			return
		}
		p.release(ctx, x, who)
	})
}

func (p *Pipeline) release(ctx context.Context, x *exchange, who auth.Principal) {
	if !x.admitted {
		return
	}
	if err := p.cfg.Limits.ReleaseSlots(ctx, who.LimitsID(), []string{x.requestID}, p.cfg.Now(), p.cfg.LimitRules, x.stale...); err != nil {
		p.cfg.Logger.Warn("slot release failed; its lease will free it", "request_id", x.requestID, "error", err.Error())
	}
}
