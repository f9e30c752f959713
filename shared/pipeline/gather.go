package pipeline

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// gatherWait bounds how long a batch item waits at a gathered step for
// the other items: a slow item never holds the rest for longer.
const gatherWait = 50 * time.Millisecond

// batchGather makes two steps of a batch's items one store write each:
// entering (authentication and admission: one EnterMany for the items)
// and reserving (one ReserveMany). An item at a step waits until every
// item has either reached it or finished without it (a refusal, a cache
// hit), then the items there are written together. Each item is still
// admitted, counted, reserved, settled or refunded, and ledgered on its
// own (spec 4.3).
type batchGather struct {
	enter   *gatherStep[enterAsk, entered]
	reserve *gatherStep[store.Charge, reserved]
	// held are the in-flight slots of finished items, by key: they are
	// freed together once the batch has answered (releaseHeld).
	mu   sync.Mutex
	held map[string]*heldSlots
}

type heldSlots struct {
	requestIDs []string
	stale      []string
}

type enterAsk struct {
	hash, requestID string
	now             time.Time
	rules           store.LimitRules
	slot            bool
}

type entered struct {
	key       store.Key
	admission store.Admission
	err       error
}

type reserved struct {
	res store.Reservation
	err error
}

func newBatchGather(p *Pipeline, items int) *batchGather {
	return &batchGather{
		enter:   &gatherStep[enterAsk, entered]{open: items, write: p.enterGroup},
		reserve: &gatherStep[store.Charge, reserved]{open: items, write: p.reserveGroup},
	}
}

// holdSlot keeps a finished item's slot for the batch's one release.
func (g *batchGather) holdSlot(id, requestID string, stale []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = map[string]*heldSlots{}
	}
	h := g.held[id]
	if h == nil {
		h = &heldSlots{}
		g.held[id] = h
	}
	h.requestIDs = append(h.requestIDs, requestID)
	for _, n := range stale {
		if !slices.Contains(h.stale, n) {
			h.stale = append(h.stale, n)
		}
	}
}

// releaseHeld frees every held slot: one write per key (a batch has one).
// If it fails, the slots' leases free them.
func (g *batchGather) releaseHeld(ctx context.Context, p *Pipeline) {
	g.mu.Lock()
	held := g.held
	g.held = nil
	g.mu.Unlock()
	for id, h := range held {
		if err := p.cfg.Limits.ReleaseSlots(ctx, id, h.requestIDs, p.cfg.Now(), p.cfg.LimitRules, h.stale...); err != nil {
			p.cfg.Logger.Warn("batch slot release failed; the leases will free them", "request_ids", h.requestIDs, "error", err.Error())
		}
	}
}

// itemGather is one batch item's place in its batch's gather (RunAs.gather).
type itemGather struct {
	g                *batchGather
	entered, charged bool // reached the step, or finished: no longer open there
}

func (g *batchGather) item() *itemGather { return &itemGather{g: g} }

// enter authenticates and admits the item's request with the others'.
func (ig *itemGather) enter(ctx context.Context, ask enterAsk) (store.Key, store.Admission, error) {
	r := ig.g.enter.join(ctx, &ig.entered, ask)
	return r.key, r.admission, r.err
}

// reserve reserves the item's charge with the others'.
func (ig *itemGather) reserve(ctx context.Context, c store.Charge) (store.Reservation, error) {
	r := ig.g.reserve.join(ctx, &ig.charged, c)
	return r.res, r.err
}

// gateFor is the gate of x's request: a batch item's enters with the others.
func (p *Pipeline) gateFor(x *exchange) store.Gate {
	if ig := x.gather; ig != nil {
		return gatheredGate{ig}
	}
	return p.gate
}

type gatheredGate struct{ ig *itemGather }

func (g gatheredGate) Enter(ctx context.Context, hash, requestID string, now time.Time, rules store.LimitRules, slot bool) (store.Key, store.Admission, error) {
	return g.ig.enter(ctx, enterAsk{hash: hash, requestID: requestID, now: now, rules: rules, slot: slot})
}

// finish ends the item: at a step it never reached it no longer holds the others.
func (ig *itemGather) finish() {
	ig.g.enter.leave(&ig.entered)
	ig.g.reserve.leave(&ig.charged)
}

// gatherStep is one gathered step of a batch.
type gatherStep[Ask, Result any] struct {
	mu      sync.Mutex
	open    int // items that may still reach the step
	waiting []*gatherSeat[Ask, Result]
	timer   *time.Timer
	expired bool // gatherWait passed: items go as they arrive
	write   func(context.Context, []Ask) []Result
}

type gatherSeat[Ask, Result any] struct {
	ask    Ask
	done   chan struct{}
	result Result
}

// join waits for the other items and returns this item's result. An item
// reaches a step once; counted says it has.
func (s *gatherStep[Ask, Result]) join(ctx context.Context, counted *bool, ask Ask) Result {
	seat := &gatherSeat[Ask, Result]{ask: ask, done: make(chan struct{})}
	s.mu.Lock()
	if *counted { // not the first time: it goes alone
		s.mu.Unlock()
		return s.write(ctx, []Ask{ask})[0]
	}
	*counted = true
	s.open--
	s.waiting = append(s.waiting, seat)
	var ready []*gatherSeat[Ask, Result]
	if s.open == 0 || s.expired {
		ready = s.take()
	} else if s.timer == nil {
		s.timer = time.AfterFunc(gatherWait, s.expire)
	}
	s.mu.Unlock()
	s.flush(ctx, ready)
	<-seat.done
	return seat.result
}

func (s *gatherStep[Ask, Result]) leave(counted *bool) {
	s.mu.Lock()
	var ready []*gatherSeat[Ask, Result]
	if !*counted {
		*counted = true
		if s.open--; s.open == 0 {
			ready = s.take()
		}
	}
	s.mu.Unlock()
	s.flushDetached(ready)
}

func (s *gatherStep[Ask, Result]) expire() {
	s.mu.Lock()
	s.expired = true
	ready := s.take()
	s.mu.Unlock()
	s.flushDetached(ready)
}

// take empties the waiting seats; the caller flushes them. Called with mu held.
func (s *gatherStep[Ask, Result]) take() []*gatherSeat[Ask, Result] {
	ready := s.waiting
	s.waiting = nil
	if s.timer != nil && s.open == 0 {
		s.timer.Stop()
	}
	return ready
}

// flushDetached flushes when no item's context is at hand.
func (s *gatherStep[Ask, Result]) flushDetached(seats []*gatherSeat[Ask, Result]) {
	if len(seats) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), BillingTimeout)
	defer cancel()
	s.flush(ctx, seats)
}

// flush writes the seats' asks together and wakes each seat with its result.
func (s *gatherStep[Ask, Result]) flush(ctx context.Context, seats []*gatherSeat[Ask, Result]) {
	if len(seats) == 0 {
		return
	}
	asks := make([]Ask, len(seats))
	for i, seat := range seats {
		asks[i] = seat.ask
	}
	results := s.write(ctx, asks)
	for i, seat := range seats {
		seat.result = results[i]
		close(seat.done)
	}
}

// enterGroup enters a batch's items: one EnterMany per key (a batch has
// one) when the gate can, else one Enter each.
func (p *Pipeline) enterGroup(ctx context.Context, asks []enterAsk) []entered {
	out := make([]entered, len(asks))
	group, many := p.gate.(store.GroupGate)
	byKey := map[string][]int{}
	for i, a := range asks {
		byKey[a.hash] = append(byKey[a.hash], i)
	}
	for _, idx := range byKey {
		first := asks[idx[0]]
		if !many || len(idx) == 1 {
			for _, i := range idx {
				a := asks[i]
				out[i].key, out[i].admission, out[i].err = p.gate.Enter(ctx, a.hash, a.requestID, a.now, a.rules, a.slot)
			}
			continue
		}
		ids := make([]string, len(idx))
		for j, i := range idx {
			ids[j] = asks[i].requestID
		}
		k, as, err := group.EnterMany(ctx, first.hash, ids, first.now, first.rules, first.slot)
		for j, i := range idx {
			out[i].key, out[i].err = k, err
			if err == nil {
				out[i].admission = as[j]
			}
		}
	}
	return out
}

// reserveGroup reserves a batch's charges through the wallet queue, per
// account (a batch has one), in groups the store takes.
func (p *Pipeline) reserveGroup(ctx context.Context, charges []store.Charge) []reserved {
	out := make([]reserved, len(charges))
	byAccount := map[string][]int{}
	for i, c := range charges {
		byAccount[c.AccountID] = append(byAccount[c.AccountID], i)
	}
	for _, idx := range byAccount {
		for len(idx) > 0 {
			part := idx[:min(len(idx), store.MaxReserveGroup)]
			idx = idx[len(part):]
			group := make([]store.Charge, len(part))
			for j, i := range part {
				group[j] = charges[i]
			}
			results, err := p.wallets.reserve(ctx, p.cfg.Store, group)
			for j, i := range part {
				if out[i].err = err; err == nil {
					out[i].res, out[i].err = results[j].Reservation, results[j].Err
				}
			}
		}
	}
	return out
}
