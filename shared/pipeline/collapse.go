package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Request collapsing: while a fetch for a cache key is in flight, other
// requests for the same key wait for its entry instead of fetching too.
// In one process the first request leads and the others wait on it; across
// processes and instances the leader claims the key's fill marker in the
// store (store.Fills, a lease it renews while it fetches), and a leader
// that finds another process's live marker polls the cache entry. The
// join and the claim run beside authentication, after the cache lookup
// misses, so a paid call takes no extra round trip. A waiter answered from
// the entry is a cache HIT at 0 credits. A fill that fails is never
// shared: its marker is released, and one waiter takes the fill over; a
// waiter still unanswered after the adapter timeout fetches itself.

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
	// handedOff: the filler's cache write will end the flight (keep), so
	// the request's own end does not.
	handedOff bool
	once      sync.Once
	// release stops the store marker's renewal and, for a failed fill,
	// releases it; nil without a marker.
	release func(filled bool)
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

// join returns the key's flight, and whether this caller leads it (there
// was none).
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

// leave forgets the key's flight f (the next request starts a new one).
func (fs *flights) leave(key string, f *flight) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m[key] == f {
		delete(fs.m, key)
	}
}

// fillJoin is a request's part in its cache key's fill.
type fillJoin struct {
	key    string
	flight *flight // nil: the request does not take part
	// leader: it leads the in-process flight; filler: it fetches (it
	// holds the store marker, or there is none to hold).
	leader, filler bool
}

// collapsible says whether a request takes part: a data call that reads
// and fills the cache (no Cache-Control bypass; composite legs, whose
// answers never fill it, do not start lookups), not a dry run or a job.
func collapsible(e *registry.Endpoint, v params.Result, cu cacheUse) bool {
	return cu.lookup && cu.keep && e.Kind == registry.Data && !v.DryRun && !v.Async
}

// joinFill joins the key's in-process flight; its leader claims the
// key's marker in the store.
func (p *Pipeline) joinFill(ctx context.Context, owner, key string) fillJoin {
	f, leader := p.flights.join(key)
	j := fillJoin{key: key, flight: f, leader: leader}
	if !leader {
		return j
	}
	if p.cfg.Fills == nil {
		j.filler = true
		return j
	}
	claimed, err := p.cfg.Fills.ClaimFill(ctx, key, owner, time.Now(), p.fillLease)
	switch {
	case err != nil:
		// A store that cannot say is no reason to fail: fetch.
		p.cfg.Logger.Warn("fill marker not claimed", "request_id", owner, "error", err.Error())
		j.filler = true
	case claimed:
		f.release = p.holdFill(key, owner)
		j.filler = true
	}
	return j
}

// awaitFill runs once the request is admitted: a filler goes on to fetch
// (its cache write ends the flight); a waiter waits for the fill and is
// answered from its entry (cu.hit), takes the fill over when it failed, or
// fetches itself once the wait runs out.
func (p *Pipeline) awaitFill(x *exchange, cu *cacheUse, j *fillJoin) {
	if j.flight == nil {
		return
	}
	ctx := x.r.Context()
	deadline := time.NewTimer(fillWait)
	defer deadline.Stop()
	for {
		switch {
		case j.filler:
			cu.fill = j.flight
			return
		case j.leader:
			p.pollFill(ctx, x.requestID, cu, j, deadline.C)
			return
		}
		select {
		case <-j.flight.done:
		case <-deadline.C:
			j.flight = nil // fetch alone
			return
		case <-ctx.Done():
			j.flight = nil
			return
		}
		if e := j.flight.entry; e != nil {
			cu.hit, cu.status = e, cacheHit
			return
		}
		// The fill failed: one waiter takes it over, the others wait on.
		*j = p.joinFill(ctx, x.requestID, cu.key)
	}
}

// pollFill is the in-process leader's wait while another process holds
// the marker: it reads the entry every poll, and claims the marker once
// it lapses (the filler died) or is released (its fill failed). It ends
// as a HIT of the entry, or as the filler.
func (p *Pipeline) pollFill(ctx context.Context, owner string, cu *cacheUse, j *fillJoin, deadline <-chan time.Time) {
	become := func() {
		j.filler, cu.fill = true, j.flight
	}
	poll := time.NewTicker(p.fillPoll)
	defer poll.Stop()
	for {
		select {
		case <-poll.C:
		case <-deadline:
			become() // too long: fetch, and lead this process's waiters
			return
		case <-ctx.Done():
			become()
			return
		}
		if entry, err := p.cfg.Cache.CacheGet(ctx, cu.key, p.cfg.Now()); err == nil {
			p.endFlight(cu.key, j.flight, &entry)
			cu.hit, cu.status = &entry, cacheHit
			return
		}
		claimed, err := p.cfg.Fills.ClaimFill(ctx, cu.key, owner, time.Now(), p.fillLease)
		if err != nil || claimed {
			if claimed {
				j.flight.release = p.holdFill(cu.key, owner)
			}
			become()
			return
		}
	}
}

// holdFill renews the claimed marker while the fetch runs; the function it
// returns stops the renewal and, when the fill failed, releases the marker
// at once so another process takes over (a filled entry needs no release:
// the entry answers, and the lease lapses).
func (p *Pipeline) holdFill(key, owner string) func(filled bool) {
	stop, done := make(chan struct{}), make(chan struct{})
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
		ctx, cancel := context.WithTimeout(context.Background(), BillingTimeout)
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

// endOwnFill ends, when the request ends, a flight it leads whose end its
// cache write did not take over: it was refused before it fetched, its
// fetch failed, or its answer was not stored. Its waiters take over.
func (p *Pipeline) endOwnFill(x *exchange) {
	l := x.lookup
	if l == nil {
		return
	}
	<-l.done
	if j := l.join; j.flight != nil && j.leader && !j.flight.handedOff {
		p.endFlight(j.key, j.flight, nil)
	}
}
