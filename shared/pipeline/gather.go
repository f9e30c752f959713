package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// gatherWait bounds how long a batch item's reserve waits for the other
// items to reach theirs: a slow item never holds the rest for longer.
const gatherWait = 50 * time.Millisecond

// batchGather makes a batch's reserves one group: each item's reserve
// waits until every item has either reached its reserve or finished
// without one (a cache hit, a refusal), then all go to the wallet queue
// together, one store transaction for the batch instead of one per item.
// Each item is still reserved, settled or refunded, and ledgered on its
// own (spec 4.3).
type batchGather struct {
	p       *Pipeline
	mu      sync.Mutex
	open    int // items that may still reserve
	waiting []*gatherSeat
	timer   *time.Timer
	expired bool // gatherWait passed: reserves go as they arrive
}

type gatherSeat struct {
	charge store.Charge
	done   chan struct{}
	res    store.Reservation
	err    error
}

// itemGather is one batch item's place in its batch's gather, carried in
// the item request's context.
type itemGather struct {
	g       *batchGather
	counted bool // reserved, or finished: no longer open
}

type gatherKey struct{}

func newBatchGather(p *Pipeline, items int) *batchGather { return &batchGather{p: p, open: items} }

func (g *batchGather) item() *itemGather { return &itemGather{g: g} }

func withGather(ctx context.Context, ig *itemGather) context.Context {
	return context.WithValue(ctx, gatherKey{}, ig)
}

func gatherOf(ctx context.Context) *itemGather {
	ig, _ := ctx.Value(gatherKey{}).(*itemGather)
	return ig
}

// reserve waits for the batch's other reserves and returns this charge's outcome.
func (ig *itemGather) reserve(ctx context.Context, c store.Charge) (store.Reservation, error) {
	g := ig.g
	seat := &gatherSeat{charge: c, done: make(chan struct{})}
	g.mu.Lock()
	if ig.counted { // an item is one call, reserved once; anything else goes alone
		g.mu.Unlock()
		return g.p.wallets.reserveOne(ctx, g.p.cfg.Store, c)
	}
	ig.counted = true
	g.open--
	g.waiting = append(g.waiting, seat)
	var ready []*gatherSeat
	if g.open == 0 || g.expired {
		ready = g.take()
	} else if g.timer == nil {
		g.timer = time.AfterFunc(gatherWait, g.expire)
	}
	g.mu.Unlock()
	g.write(ctx, ready)
	<-seat.done
	return seat.res, seat.err
}

// finish ends the item: one that never reserved no longer holds the others.
func (ig *itemGather) finish() {
	g := ig.g
	g.mu.Lock()
	var ready []*gatherSeat
	if !ig.counted {
		ig.counted = true
		if g.open--; g.open == 0 {
			ready = g.take()
		}
	}
	g.mu.Unlock()
	g.writeDetached(ready)
}

func (g *batchGather) expire() {
	g.mu.Lock()
	g.expired = true
	ready := g.take()
	g.mu.Unlock()
	g.writeDetached(ready)
}

// take empties the waiting seats; the caller writes them. Called with mu held.
func (g *batchGather) take() []*gatherSeat {
	ready := g.waiting
	g.waiting = nil
	if g.timer != nil && g.open == 0 {
		g.timer.Stop()
	}
	return ready
}

// writeDetached writes seats when no item's billing context is at hand.
func (g *batchGather) writeDetached(seats []*gatherSeat) {
	if len(seats) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), billingTimeout)
	defer cancel()
	g.write(ctx, seats)
}

// write reserves the seats through the wallet queue, per account (a batch
// has one) in groups the store takes, and wakes each seat with its outcome.
func (g *batchGather) write(ctx context.Context, seats []*gatherSeat) {
	byAccount := map[string][]*gatherSeat{}
	for _, s := range seats {
		byAccount[s.charge.AccountID] = append(byAccount[s.charge.AccountID], s)
	}
	for _, seats := range byAccount {
		for len(seats) > 0 {
			group := seats[:min(len(seats), store.MaxReserveGroup)]
			seats = seats[len(group):]
			charges := make([]store.Charge, len(group))
			for i, s := range group {
				charges[i] = s.charge
			}
			out, err := g.p.wallets.reserve(ctx, g.p.cfg.Store, charges)
			for i, s := range group {
				if s.err = err; err == nil {
					s.res, s.err = out[i].Reservation, out[i].Err
				}
				close(s.done)
			}
		}
	}
}
