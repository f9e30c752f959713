package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/usage"
)

// BillingRefundPending is error.details.billing_status when a failed call's
// refund could not be written: credits_used is null until reconciliation.
// It is the only value: every other failure reports credits_used 0 with no
// billing_status (BillingStatuses documents it).
const BillingRefundPending = "refund_pending"

// BillingStatuses documents every error.details.billing_status value (the
// errors reference lists them).
var BillingStatuses = map[string]string{
	BillingRefundPending: "The call failed and its refund could not be written at once: credits_used is null, and the " +
		"refund is applied by reconciliation within minutes (the ledger then shows the debit and its refund, net 0). " +
		"Keep the request_id, and the Idempotency-Key if you sent one; do not retry to get the credits back.",
}

// BillingTimeout bounds each store write of a paid call. The writes run
// detached from the caller, who may have gone: a refund must still land.
// It is generous because many calls of one account contend for its
// wallet item (each round of a conflict has one winner), and a slow store
// is better waited for than answered with a 500; it stays far inside
// RequestTimeout.
const BillingTimeout = 15 * time.Second

// dispatch hands the call to its endpoint's handler. A cached success is
// answered from the cache for 0 credits. A paid data call is reserved
// before the handler runs and settled or refunded after it (spec 7): its
// net charge is its cost on success and 0 on failure.
func (p *Pipeline) dispatch(x *exchange, c *Call) {
	e := c.Endpoint
	if c.Sandbox {
		p.serveSandbox(x, c)
		return
	}
	h, ok := p.cfg.Handlers[e.Key()]
	if !ok {
		x.fail(notAvailable(e, false))
		return
	}
	if refusal := p.checkURLs(x, c); refusal != nil {
		x.fail(refusal)
		return
	}
	cu := p.cacheUse(x, c)
	// A paid, uncached call waits for its slot after its reserve, which
	// runs beside it; every other answer waits for it now.
	slotted := func() bool {
		if c.slot == nil {
			return true
		}
		if refusal := c.slot(); refusal != nil {
			x.fail(refusal)
			return false
		}
		return true
	}
	if (cu.hit != nil || !p.billed(c) || wantsStream(c) || c.Params.DryRun) && !slotted() {
		return
	}
	if e.Kind == registry.Data && c.Params.DryRun {
		// No x-cache: the body's "cache" field is the snapshot.
		p.succeedAs(x, c, p.dryRun(x, c, cu), 0, nil, "")
		return
	}
	if cu.hit != nil {
		if wantsStream(c) {
			p.streamCached(x, c, cu.hit)
			return
		}
		p.deliverCached(x, c, cu.hit)
		return
	}
	fu, refusal := p.checkFairUse(x, c)
	if refusal != nil {
		x.fail(refusal)
		return
	}
	if c.Params.Async && p.billed(c) {
		p.acceptJob(x, c)
		return
	}
	if _, composite := p.cfg.Composites[e.Key()]; composite {
		c.legs = p.newLegs(x, c)
	}
	if wantsStream(c) {
		p.stream(x, c, h, cu, fu)
		return
	}
	charge, remaining, ok := p.reserveSlotted(x, c)
	if !ok {
		return
	}
	data, herr := p.run(h, x, c)
	if herr == nil {
		var cacheable bool
		if data, cacheable = p.assist(x, c, data); !cacheable {
			cu.keep = false
		}
	}
	p.countFairUse(x, c, fu)
	if herr != nil {
		if charge != nil {
			p.refund(x, *charge, herr)
		}
		x.fail(herr)
		return
	}
	if charge == nil {
		p.deliver(x, c, data, 0, c.CreditsRemaining, cu, nil)
		return
	}
	p.deliver(x, c, data, e.Cost, remaining, cu, charge)
}

// billed: a paid data call, reserved before its handler and settled or
// refunded after. A composite's legs are not: the composite charges once.
func (p *Pipeline) billed(c *Call) bool {
	e := c.Endpoint
	return e.Kind == registry.Data && e.Cost > 0 && p.cfg.Store != nil && c.parent == ""
}

// reserve takes a billed call's cost from the wallet (and the key's
// credit_limit) before its handler runs. It answers a refusal itself and
// reports !ok; an unbilled call gets a nil charge.
func (p *Pipeline) reserve(x *exchange, c *Call) (charge *store.Charge, remaining *int64, ok bool) {
	if !p.billed(c) {
		return nil, nil, true
	}
	ch := store.Charge{
		RequestID: c.RequestID, AccountID: c.Principal.AccountID, KeyID: c.Principal.KeyID,
		KeyPrefix: c.Principal.KeyPrefix, Endpoint: c.Endpoint.Path(), Cost: c.Endpoint.Cost,
	}
	res, err := billingOp(x, func(ctx context.Context) (store.Reservation, error) {
		if g := x.gather; g != nil {
			return g.reserve(ctx, ch)
		}
		return p.wallets.reserveOne(ctx, p.cfg.Store, ch)
	})
	if err != nil {
		refusal := p.reserveRefusal(x, err)
		if refusal.Type == envelope.InternalError {
			// The reservation may have been written before the error: take
			// it back, so an uncertain outcome never stays charged.
			p.refund(x, ch, refusal)
		}
		x.fail(refusal)
		return nil, nil, false
	}
	return &ch, envelope.Amount(res.CreditsRemaining), true
}

// reserveSlotted is reserve, then the wait for the in-flight slot taken
// beside it (after an Idempotency-Key claim): a refused slot refunds the
// reserve and answers the refusal.
func (p *Pipeline) reserveSlotted(x *exchange, c *Call) (charge *store.Charge, remaining *int64, ok bool) {
	charge, remaining, ok = p.reserve(x, c)
	if !ok || c.slot == nil {
		return charge, remaining, ok
	}
	if refusal := c.slot(); refusal != nil {
		if charge != nil {
			p.refund(x, *charge, refusal)
		}
		x.fail(refusal)
		return nil, nil, false
	}
	return charge, remaining, true
}

// settle records a billed call's success, an effect of its answer: it
// lands before the answer leaves, beside the answer's other writes. A
// settle that cannot be written is sent to reconciliation; one that never
// happens (the process died) leaves the reservation "reserved", and the
// sweep refunds reservations with no recorded success, so the error can
// only cost Meridian, never the caller.
func (p *Pipeline) settle(x *exchange, charge store.Charge) {
	x.effect(func(ctx context.Context) {
		if err := p.cfg.Store.Settle(ctx, charge.AccountID, charge.RequestID); err != nil {
			p.cfg.Logger.Error("settle failed", "request_id", x.requestID, "error", err.Error())
			p.reconcileLater(x, usage.Settle, charge)
		}
	})
}

// deliver answers a fresh success. It encodes the data first: a body that
// cannot be written is a failure, and a paid failure is refunded. Then it
// settles the charge, keeps the data in the cache and writes the envelope.
func (p *Pipeline) deliver(x *exchange, c *Call, data any, used int64, remaining *int64, cu cacheUse, charge *store.Charge) {
	if r, ok := data.(Raw); ok && charge == nil {
		// A document (markdown for agents, a batch wrapper), not an
		// envelope; the request id still travels as a header.
		x.w.Header().Set("Content-Type", r.ContentType)
		x.w.WriteHeader(http.StatusOK)
		_, _ = x.w.Write(r.Body)
		return
	}
	raw, err := envelope.Marshal(data)
	if err != nil {
		p.cfg.Logger.Error("encode response", "request_id", x.requestID, "error", err.Error())
		failure := envelope.Internal()
		if charge != nil {
			p.refund(x, *charge, failure)
		}
		x.fail(failure)
		return
	}
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	if charge != nil {
		p.settle(x, *charge)
	}
	p.keep(x, cu, raw)
	s := p.success(x, c, json.RawMessage(raw), used, remaining)
	body, _ := envelope.Marshal(s) // the data is already encoded; the rest is plain values
	p.write(x, s, body, "MISS")
}

// billing runs one store write of a paid call, detached from the caller
// and bounded by BillingTimeout.
func billingOp[T any](x *exchange, op func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), BillingTimeout)
	defer cancel()
	return op(ctx)
}

// run calls a handler; a panic becomes INTERNAL_ERROR here, so a paid call
// still refunds.
func (p *Pipeline) run(h Handler, x *exchange, c *Call) (data any, err *envelope.Error) {
	x.served = c.Endpoint.Kind == registry.Data
	defer func() {
		if v := recover(); v != nil {
			p.cfg.Logger.Error("panic", "request_id", x.requestID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			data, err = nil, envelope.Internal()
		}
	}()
	return h(x.r.Context(), c)
}

// refund returns a failed call's reservation; the failure then reports the
// balance after it. If the refund cannot be written the charge is pending:
// credits_used null and details.billing_status.
func (p *Pipeline) refund(x *exchange, charge store.Charge, failure *envelope.Error) {
	balance, err := billingOp(x, func(ctx context.Context) (int64, error) {
		return p.cfg.Store.Refund(ctx, charge.AccountID, charge.RequestID)
	})
	if errors.Is(err, store.ErrNotFound) {
		return // nothing was reserved
	}
	if err == nil {
		failure.CreditsRemaining = envelope.Amount(balance)
		return
	}
	p.cfg.Logger.Error("refund failed", "request_id", x.requestID, "error", err.Error())
	failure.ChargePending = true
	if failure.Details == nil {
		failure.Details = map[string]any{}
	}
	failure.Details["billing_status"] = BillingRefundPending
	x.billingStatus = BillingRefundPending
	p.reconcileLater(x, usage.Refund, charge)
}

func (p *Pipeline) reserveRefusal(x *exchange, err error) *envelope.Error {
	var limit *store.KeyLimitError
	var short *store.InsufficientCreditsError
	switch {
	case errors.As(err, &limit):
		return envelope.New(envelope.KeyLimitExceeded, http.StatusPaymentRequired,
			"This call would exceed the key's credit_limit of "+strconv.FormatInt(limit.CreditLimit, 10)+".",
			map[string]any{"credit_limit": limit.CreditLimit, "credits_used": limit.CreditsUsed})
	case errors.As(err, &short):
		e := envelope.New(envelope.InsufficientCredits, http.StatusPaymentRequired,
			"The balance is below this call's cost.",
			map[string]any{"required": short.Required, "remaining": short.Remaining})
		e.CreditsRemaining = envelope.Amount(short.Remaining)
		return e
	case errors.Is(err, store.ErrKeyInactive):
		// Revoked between authentication and reservation: the next request rule.
		return Unauthorized("invalid_api_key", "The API key is not valid.")
	}
	p.cfg.Logger.Error("reserve failed", "request_id", x.requestID, "error", err.Error())
	return envelope.Internal()
}

// succeed writes the success envelope with the credits this call used.
func (p *Pipeline) succeed(x *exchange, c *Call, data any, used int64, remaining *int64) {
	p.succeedAs(x, c, data, used, remaining, cacheMiss)
}

func (p *Pipeline) succeedAs(x *exchange, c *Call, data any, used int64, remaining *int64, cacheStatus string) {
	s := p.success(x, c, data, used, remaining)
	body, err := envelope.Marshal(s)
	if err != nil {
		p.cfg.Logger.Error("encode response", "request_id", x.requestID, "error", err.Error())
		x.fail(envelope.Internal())
		return
	}
	p.write(x, s, body, cacheStatus)
}

func (p *Pipeline) success(x *exchange, c *Call, data any, used int64, remaining *int64) envelope.Success {
	path := c.Endpoint.Path()
	if c.Sandbox {
		path = c.Endpoint.SandboxPath()
	}
	return envelope.Success{
		Success:          true,
		Platform:         c.Endpoint.Platform,
		Endpoint:         path,
		Data:             data,
		CreditsUsed:      envelope.Amount(used),
		CreditsRemaining: remaining,
		RequestID:        x.requestID,
		Synthetic:        c.Sandbox,
	}
}

func (p *Pipeline) write(x *exchange, s envelope.Success, body []byte, cacheStatus string) {
	if cacheStatus != "" {
		x.w.Header().Set("X-Cache", cacheStatus)
	}
	envelope.WriteJSON(x.w, http.StatusOK, x.requestID, s.CreditsUsed, s.CreditsRemaining, body)
}

// walletQueue gathers this process's reserves per account. While one
// group of an account's reserves is being written, the reserves that
// arrive wait, and the first of them then writes them all with one
// ReserveMany: concurrent calls of one account become one transaction
// instead of writers racing for one balance, and nothing is refused by a
// condition another reserve of this process broke.
type walletQueue struct {
	mu     sync.Mutex
	queues map[string][]*reserveTicket // an account is present while a group of it is being written
}

// reserveTicket is one caller's charges (one call's, or a batch's) and,
// once written, their outcomes.
type reserveTicket struct {
	charges []store.Charge
	done    chan struct{}
	lead    bool // woken to write the next group rather than with outcomes
	results []store.Reserved
	err     error
}

// reserve writes charges (at most store.MaxReserveGroup, of one account)
// together with the account's other reserves that arrive meanwhile and
// returns their outcomes, in order.
func (w *walletQueue) reserve(ctx context.Context, s store.Store, charges []store.Charge) ([]store.Reserved, error) {
	me := &reserveTicket{charges: charges, done: make(chan struct{})}
	account := charges[0].AccountID
	w.mu.Lock()
	if w.queues == nil {
		w.queues = map[string][]*reserveTicket{}
	}
	queue, busy := w.queues[account]
	w.queues[account] = append(queue, me)
	w.mu.Unlock()
	if busy {
		<-me.done
		if !me.lead {
			return me.results, me.err
		}
	}
	w.mu.Lock()
	queue = w.queues[account]
	n, size := 1, len(queue[0].charges) // queue[0] is me
	for ; n < len(queue) && size+len(queue[n].charges) <= store.MaxReserveGroup; n++ {
		size += len(queue[n].charges)
	}
	group := queue[:n]
	w.queues[account] = queue[n:]
	w.mu.Unlock()

	all := make([]store.Charge, 0, size)
	for _, t := range group {
		all = append(all, t.charges...)
	}
	results, err := s.ReserveMany(ctx, all)

	w.mu.Lock()
	if next := w.queues[account]; len(next) == 0 {
		delete(w.queues, account)
	} else {
		next[0].lead = true
		close(next[0].done)
	}
	w.mu.Unlock()
	for _, t := range group {
		if t.err = err; err == nil {
			t.results, results = results[:len(t.charges)], results[len(t.charges):]
		}
		if t != me {
			close(t.done)
		}
	}
	return me.results, me.err
}

// reserveOne is walletQueue.reserve of one charge.
func (w *walletQueue) reserveOne(ctx context.Context, s store.Store, c store.Charge) (store.Reservation, error) {
	return store.FirstReserved(w.reserve(ctx, s, []store.Charge{c}))
}
