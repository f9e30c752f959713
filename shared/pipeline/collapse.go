package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Request collapsing: while a fetch for a cache key is in flight, other
// requests for the same key wait for its entry instead of fetching too.
// In one process the first request leads and the others wait on it; across
// processes and instances the leader claims the key's fill marker in the
// store (store.Fills, a lease it renews while it fetches), and a process
// that finds another's live marker polls the cache entry. A waiter answered
// from the entry is a cache HIT at 0 credits. A fill that fails is never
// shared: its marker is released, and one waiter takes the fill over; a
// waiter still unanswered after the endpoint's timeout fetches itself.

// Defaults of the fill marker's lease and of the cross-process poll.
const (
	DefaultFillLease = 5 * time.Second
	DefaultFillPoll  = 20 * time.Millisecond
	// fillWait bounds a waiter's wait: the adapter timeout, the longest a
	// filler's fetch may take.
	fillWait = upstream.DefaultTimeout
)

// flight is one in-process fill of a cache key.
type flight struct {
	done chan struct{}
	// entry is what the fill stored; nil when it failed (set before done
	// closes).
	entry *store.CacheEntry
	// handedOff: the answer's cache write will end the flight (keep),
	// so the request's own end does not.
	handedOff bool
	once      sync.Once
	release   func(filled bool) // the store marker's release and renewal stop
}

// end ends the flight once: waiters see entry (nil: the fill failed).
func (f *flight) end(entry *store.CacheEntry) {
	f.once.Do(func() {
		f.entry = entry
		if f.release != nil {
			f.release(entry != nil)
		}
		close(f.done)
	})
}

// flights are the fills in flight in this process, by cache key.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// join returns the key's flight, and whether this caller leads it (it was
// none, so the caller's request is the filler in this process).
func (fs *flights) join(key string) (*flight, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.m[key]; ok {
		return f, false
	}
	if fs.m == nil {
		fs.m = map[string]*flight{}
	}
	f := &flight{done: make(chan struct{})}
	fs.m[key] = f
	return f, true
}

// leave forgets the key's flight f (a later request starts a new one).
func (fs *flights) leave(key string, f *flight) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m[key] == f {
		delete(fs.m, key)
	}
}

// collapses says whether the call takes part: a direct data call that
// reads and fills the cache (no Cache-Control bypass, not a composite's
// leg, whose answers never fill it), not a dry run or an accepted job.
func (p *Pipeline) collapses(c *Call, cu cacheUse) bool {
	return cu.lookup && cu.keep && cu.hit == nil && c.Endpoint.Kind == registry.Data &&
		!c.Params.DryRun && !c.Params.Async
}

// awaitFill waits while another request fills the call's cache entry. It
// returns with cu.hit set when the wait ended in an entry; otherwise the
// call fetches itself, and when it is the key's filler the flight it
// leads is returned: the caller ends it when its answer is settled (or
// its cache write lands, keep).
func (p *Pipeline) awaitFill(x *exchange, c *Call, cu *cacheUse) *flight {
	ctx := x.r.Context()
	deadline := time.NewTimer(fillWait)
	defer deadline.Stop()
	for {
		f, leader := p.flights.join(cu.key)
		if leader {
			if p.leadFill(ctx, x.requestID, cu, f, deadline.C) {
				return f // the filler
			}
			return nil // answered from the entry another process filled
		}
		select {
		case <-f.done:
		case <-deadline.C:
			return nil // too long: fetch itself
		case <-ctx.Done():
			return nil
		}
		if f.entry != nil {
			cu.hit, cu.status = f.entry, cacheHit
			return nil
		}
		// The fill failed: one of the waiters takes it over.
	}
}

// leadFill is the in-process leader's part: claim the key's marker in the
// store, or, while another process holds it, poll the entry it fills.
// filler reports whether this request fetches (it claimed the marker, the
// store failed, or the wait ran out); otherwise cu.hit holds the entry and
// the flight is ended with it.
func (p *Pipeline) leadFill(ctx context.Context, owner string, cu *cacheUse, f *flight, deadline <-chan time.Time) (filler bool) {
	become := func() bool {
		cu.fill = f
		return true
	}
	fills := p.cfg.Fills
	if fills == nil {
		return become()
	}
	poll := time.NewTicker(p.fillPoll)
	defer poll.Stop()
	for {
		claimed, err := fills.ClaimFill(ctx, cu.key, owner, time.Now(), p.fillLease)
		if err != nil {
			// A store that cannot say is no reason to fail: fetch.
			p.cfg.Logger.Warn("fill marker not claimed", "request_id", owner, "error", err.Error())
			return become()
		}
		if claimed {
			f.release = p.holdFill(cu.key, owner)
			return become()
		}
		// Another process fills: its entry may be there already.
		if entry, err := p.cfg.Cache.CacheGet(ctx, cu.key, p.cfg.Now()); err == nil {
			p.endFlight(cu.key, f, &entry)
			cu.hit, cu.status = &entry, cacheHit
			return false
		}
		select {
		case <-poll.C:
		case <-deadline:
			return become()
		case <-ctx.Done():
			return become() // the call ends anyway; its waiters take over
		}
	}
}

// holdFill renews the claimed marker while the fetch runs; the function it
// returns stops the renewal and, when the fill failed, releases the marker
// at once so another process takes over (a filled entry needs no release:
// the entry answers, and the lease lapses).
func (p *Pipeline) holdFill(key, owner string) func(filled bool) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		renew := time.NewTicker(p.fillLease / 2)
		defer renew.Stop()
		for {
			select {
			case <-stop:
				return
			case <-renew.C:
				ctx, cancel := context.WithTimeout(context.Background(), p.fillLease/2)
				if _, err := p.cfg.Fills.ClaimFill(ctx, key, owner, time.Now(), p.fillLease); err != nil {
					p.cfg.Logger.Warn("fill marker not renewed", "request_id", owner, "error", err.Error())
				}
				cancel()
			}
		}
	}()
	return func(filled bool) {
		close(stop)
		<-done
		if filled {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), billingTimeout)
		defer cancel()
		if err := p.cfg.Fills.ReleaseFill(ctx, key, owner); err != nil {
			p.cfg.Logger.Warn("fill marker not released", "request_id", owner, "error", err.Error())
		}
	}
}

// endFlight ends the key's flight f with entry (nil: the fill failed); the
// next request for the key starts a new flight.
func (p *Pipeline) endFlight(key string, f *flight, entry *store.CacheEntry) {
	p.flights.leave(key, f)
	f.end(entry)
}

// endFill ends the call's flight when it leads one and its answer's cache
// write has not taken that over: the fill failed (or stored nothing).
func (p *Pipeline) endFill(key string, f *flight) {
	if f == nil || f.handedOff {
		return
	}
	p.endFlight(key, f, nil)
}
