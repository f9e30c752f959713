package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// Fault kinds, as the report counts them.
const (
	FaultStoreThrottle   = "store: throttled"
	FaultStoreError      = "store: 5xx before the write"
	FaultStoreLostAnswer = "store: 5xx after the write"
	FaultTxnCancelled    = "store: transaction cancelled"
	FaultCallerHangsUp   = "request: caller hangs up"
	FaultTimeout         = "request: function timeout"
	FaultProcessDies     = "request: process dies"
	FaultQueueDown       = "queue: emulator down"
)

// Counter counts faults by kind; safe for concurrent use.
type Counter struct {
	mu sync.Mutex
	n  map[string]int64
}

// Add counts one fault of kind.
func (c *Counter) Add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[kind]++
}

// Counts returns a copy of the counts.
func (c *Counter) Counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// plan is one client call's fate, carried in its request's context: where
// its caller hangs up or its process dies (counted in store calls), and
// what the upstream log should file its upstream requests under.
type plan struct {
	idempotencyKey string
	cancelAt       int32 // cancel the request's context at this store call (0: never)
	killAt         int32 // the process dies at this store call (0: never)
	cancel         context.CancelFunc
	calls          atomic.Int32
	upstream       atomic.Bool // the call made an upstream request

	mu       sync.Mutex
	answered bool // the answer left the process: it can no longer die mid-call
	killed   bool
}

type planKey struct{}

func planOf(ctx context.Context) *plan {
	p, _ := ctx.Value(planKey{}).(*plan)
	return p
}

// errProcessGone stands for every store call a dead process never made.
var errProcessGone = errors.New("soak: the process died before this store call")

// storeCall is called before each store call of a planned request: it
// cancels the request's context at cancelAt, and from killAt on the
// process is dead, so the call fails without reaching the store. Once the
// answer has left, the process no longer dies.
func (p *plan) storeCall(faults *Counter) error {
	n := p.calls.Add(1)
	if p.cancelAt > 0 && n == p.cancelAt {
		p.cancel()
		faults.Add(FaultCallerHangsUp)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killAt > 0 && n == p.killAt && !p.answered && !p.killed {
		p.killed = true
		faults.Add(FaultProcessDies)
	}
	if p.killed {
		return errProcessGone
	}
	return nil
}

// answer marks the answer as sent and reports whether the process died
// before it could send it (the client then sees no answer).
func (p *plan) answer() (died bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answered = true
	return p.killed
}

// StoreFaults injects store failures into a share of store calls while on.
type StoreFaults struct {
	Throttle   float64 // refused for throughput, as if the SDK's retries ran out
	Error      float64 // a 5xx before the write
	LostAnswer float64 // the write happens, its answer is a 5xx
	TxnCancel  float64 // a transaction cancelled by a conflict
	Counter    *Counter

	on atomic.Bool
}

// Start and Stop turn injection on and off (setup and audit run clean).
func (f *StoreFaults) Start() { f.on.Store(true) }
func (f *StoreFaults) Stop()  { f.on.Store(false) }

// errInjected5xx is the embedded store's stand-in for a 5xx.
var errInjected5xx = errors.New("soak: injected store failure (5xx)")

// roll picks the fault for one call: "", or a fault kind.
func (f *StoreFaults) roll(transaction bool) string {
	if !f.on.Load() {
		return ""
	}
	x := rand.Float64()
	for _, c := range []struct {
		p    float64
		kind string
	}{{f.Throttle, FaultStoreThrottle}, {f.Error, FaultStoreError}, {f.LostAnswer, FaultStoreLostAnswer}} {
		if x < c.p {
			return c.kind
		}
		x -= c.p
	}
	if transaction && x < f.TxnCancel {
		return FaultTxnCancelled
	}
	return ""
}

// DynamoDB is a client option that injects the faults (and the plans'
// hang-ups and deaths) with an SDK middleware, at the start of each
// operation: before the SDK's retries, so a fault is what the store sees
// once they ran out.
func (f *StoreFaults) DynamoDB() func(*dynamodb.Options) {
	mw := middleware.InitializeMiddlewareFunc("soak-store-faults", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		if p := planOf(ctx); p != nil && f.on.Load() {
			if err := p.storeCall(f.Counter); err != nil {
				return middleware.InitializeOutput{}, middleware.Metadata{}, err
			}
		}
		txn, _ := in.Parameters.(*dynamodb.TransactWriteItemsInput)
		kind := f.roll(txn != nil)
		if kind != "" {
			f.Counter.Add(kind)
		}
		switch kind {
		case FaultStoreThrottle:
			return middleware.InitializeOutput{}, middleware.Metadata{}, &types.ProvisionedThroughputExceededException{Message: aws.String("injected by the soak")}
		case FaultStoreError:
			return middleware.InitializeOutput{}, middleware.Metadata{}, &types.InternalServerError{Message: aws.String("injected by the soak")}
		case FaultTxnCancelled:
			reasons := make([]types.CancellationReason, len(txn.TransactItems))
			for i := range reasons {
				reasons[i].Code = aws.String("None")
			}
			reasons[rand.IntN(len(reasons))].Code = aws.String("TransactionConflict")
			return middleware.InitializeOutput{}, middleware.Metadata{}, &types.TransactionCanceledException{
				Message: aws.String("injected by the soak"), CancellationReasons: reasons}
		}
		out, md, err := next.HandleInitialize(ctx, in)
		if kind == FaultStoreLostAnswer && err == nil {
			return middleware.InitializeOutput{}, md, &types.InternalServerError{Message: aws.String("injected by the soak after the write")}
		}
		return out, md, err
	})
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(mw, middleware.Before)
		})
	}
}

// Embedded wraps the embedded store so that its money and idempotency
// writes, and its key admissions, meet the faults and the plans.
func (f *StoreFaults) Embedded(s *embedded.Store) store.Store { return faultyEmbedded{Store: s, f: f} }

type faultyEmbedded struct {
	*embedded.Store
	f *StoreFaults
}

// before runs the plan and the faults that strike before a call; lost
// reports whether the call's answer is to be lost after it ran.
func (s faultyEmbedded) before(ctx context.Context) (lost bool, err error) {
	if !s.f.on.Load() {
		return false, nil
	}
	if p := planOf(ctx); p != nil {
		if err := p.storeCall(s.f.Counter); err != nil {
			return false, err
		}
	}
	switch kind := s.f.roll(false); kind {
	case FaultStoreThrottle:
		s.f.Counter.Add(kind)
		return false, store.ErrContended
	case FaultStoreError:
		s.f.Counter.Add(kind)
		return false, errInjected5xx
	case FaultStoreLostAnswer:
		s.f.Counter.Add(kind)
		return true, nil
	}
	return false, nil
}

func (s faultyEmbedded) Enter(ctx context.Context, hash, requestID string, now time.Time, rules store.LimitRules, slot bool) (store.Key, store.Admission, error) {
	if _, err := s.before(ctx); err != nil {
		return store.Key{}, store.Admission{}, err
	}
	return s.Store.Enter(ctx, hash, requestID, now, rules, slot)
}

func (s faultyEmbedded) Reserve(ctx context.Context, c store.Charge) (store.Reservation, error) {
	lost, err := s.before(ctx)
	if err != nil {
		return store.Reservation{}, err
	}
	r, err := s.Store.Reserve(ctx, c)
	if lost && err == nil {
		return store.Reservation{}, errInjected5xx
	}
	return r, err
}

func (s faultyEmbedded) ReserveMany(ctx context.Context, charges []store.Charge) ([]store.Reserved, error) {
	lost, err := s.before(ctx)
	if err != nil {
		return nil, err
	}
	out, err := s.Store.ReserveMany(ctx, charges)
	if lost && err == nil {
		return nil, errInjected5xx
	}
	return out, err
}

func (s faultyEmbedded) Settle(ctx context.Context, accountID, requestID string) error {
	lost, err := s.before(ctx)
	if err != nil {
		return err
	}
	if err := s.Store.Settle(ctx, accountID, requestID); err != nil || !lost {
		return err
	}
	return errInjected5xx
}

func (s faultyEmbedded) Refund(ctx context.Context, accountID, requestID string) (int64, error) {
	lost, err := s.before(ctx)
	if err != nil {
		return 0, err
	}
	balance, err := s.Store.Refund(ctx, accountID, requestID)
	if lost && err == nil {
		return 0, errInjected5xx
	}
	return balance, err
}

func (s faultyEmbedded) ClaimIdempotency(ctx context.Context, accountID, key, fingerprint, requestID string, now, leaseUntil, expiresAt time.Time) (store.IdempotencyRecord, bool, error) {
	if _, err := s.before(ctx); err != nil {
		return store.IdempotencyRecord{}, false, err
	}
	return s.Store.ClaimIdempotency(ctx, accountID, key, fingerprint, requestID, now, leaseUntil, expiresAt)
}

func (s faultyEmbedded) CompleteIdempotency(ctx context.Context, accountID, key, requestID string, status int, body []byte, expiresAt time.Time) error {
	lost, err := s.before(ctx)
	if err != nil {
		return err
	}
	if err := s.Store.CompleteIdempotency(ctx, accountID, key, requestID, status, body, expiresAt); err != nil || !lost {
		return err
	}
	return errInjected5xx
}

// upstreamTagger marks a planned call as having reached the upstream when
// it makes an upstream request.
type upstreamTagger struct{ next http.RoundTripper }

func (t upstreamTagger) RoundTrip(r *http.Request) (*http.Response, error) {
	if p := planOf(r.Context()); p != nil {
		p.upstream.Store(true)
	}
	return t.next.RoundTrip(r)
}

// Outage is a TCP proxy in front of a service (the SQS emulator): while
// down, its port refuses connections and open ones are cut, as when the
// emulator is stopped.
type Outage struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// NewOutage proxies 127.0.0.1:<free port> to target (host:port).
func NewOutage(target string) (*Outage, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := &Outage{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	o.serve(ln)
	return o, nil
}

// Addr is the proxy's address.
func (o *Outage) Addr() string { return o.addr }

func (o *Outage) serve(ln net.Listener) {
	o.mu.Lock()
	o.ln = ln
	o.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go o.pipe(c)
		}
	}()
}

func (o *Outage) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", o.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	o.mu.Lock()
	if o.ln == nil {
		o.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	o.conns[c], o.conns[up] = struct{}{}, struct{}{}
	o.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	o.mu.Lock()
	delete(o.conns, c)
	delete(o.conns, up)
	o.mu.Unlock()
}

// Down stops the proxy's port and cuts every open connection.
func (o *Outage) Down() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ln == nil {
		return
	}
	o.ln.Close()
	o.ln = nil
	for c := range o.conns {
		c.Close()
	}
}

// Up listens on the same port again.
func (o *Outage) Up() error {
	o.mu.Lock()
	up := o.ln != nil
	o.mu.Unlock()
	if up {
		return nil
	}
	var err error
	for i := 0; i < 50; i++ {
		var ln net.Listener
		if ln, err = net.Listen("tcp", o.addr); err == nil {
			o.serve(ln)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("soak: the proxy cannot listen on %s again: %w", o.addr, err)
}

// Close stops the proxy for good.
func (o *Outage) Close() { o.Down() }
