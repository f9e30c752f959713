package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
)

// Worker applies queue messages: usage events become /v1/status counts
// and each account's usage per day and endpoint (once per request id, a
// batch of events in one store call), reconciliations refund or settle
// (once per reservation, by the store's conditional writes), and Sweep
// refunds reservations whose process died. Every operation is safe to
// repeat, so a message delivered twice changes nothing the second time.
type Worker struct {
	Store    store.Store
	Outcomes store.Outcomes
	// Outbox, when set, is applied by Sweep: the messages the queue once
	// refused, which the worker can apply itself.
	Outbox store.Outbox
	Logger *slog.Logger
	Now    func() time.Time
}

func (w *Worker) logger() *slog.Logger {
	if w.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Logger
}

func (w *Worker) now() time.Time {
	if w.Now == nil {
		return time.Now()
	}
	return w.Now()
}

// Handle applies one message body. ErrPoison means it can never succeed;
// any other error is worth a retry.
func (w *Worker) Handle(ctx context.Context, raw []byte) error {
	return w.HandleBatch(ctx, [][]byte{raw})[0]
}

// HandleBatch applies message bodies: the usage events among them in one
// store call (Outcomes.RecordUsage), each reconciliation on its own. It
// returns one error per body, nil for the ones applied: ErrPoison for a
// body that can never be, and the store's error for every usage event
// when their call fails (the store counts each request once, so applying
// them all again is safe).
func (w *Worker) HandleBatch(ctx context.Context, bodies [][]byte) []error {
	return w.handleBatch(ctx, decodeAll(bodies), nil)
}

// HandleMessages is HandleBatch for messages of this process: a message
// that carries its Body decoded (UsageMessage, ReconcileMessage) is
// applied without decoding it again.
func (w *Worker) HandleMessages(ctx context.Context, msgs []queue.Message) []error {
	decoded := make([]decodedBody, len(msgs))
	for i, m := range msgs {
		if b, ok := m.Decoded.(Body); ok {
			decoded[i].body, decoded[i].err = b, check(b)
		} else {
			decoded[i].body, decoded[i].err = Decode(m.Encoded())
		}
	}
	return w.handleBatch(ctx, decoded, nil)
}

// decodedBody is a message body read, or why it cannot be (ErrPoison).
type decodedBody struct {
	body Body
	err  error
}

func decodeAll(bodies [][]byte) []decodedBody {
	out := make([]decodedBody, len(bodies))
	for i, raw := range bodies {
		out[i].body, out[i].err = Decode(raw)
	}
	return out
}

// errNoTime marks a message the invocation had no time left to try.
var errNoTime = errors.New("usage: no time left in the invocation")

// handleBatch is HandleBatch; before each store call it asks timeLeft
// (nil: always), and a message it cannot try fails with errNoTime.
func (w *Worker) handleBatch(ctx context.Context, bodies []decodedBody, timeLeft func() bool) []error {
	errs := make([]error, len(bodies))
	var records []store.UsageRecord
	var counted []int // the bodies behind records
	for i, d := range bodies {
		b, err := d.body, d.err
		switch {
		case err != nil:
			errs[i] = err
		case b.Kind == KindUsage:
			if r, ok := RecordOf(*b.Usage); ok && w.Outcomes != nil {
				records, counted = append(records, r), append(counted, i)
			}
		case timeLeft != nil && !timeLeft():
			errs[i] = errNoTime
		default:
			rctx, cancel := context.WithTimeout(ctx, recordTimeout)
			errs[i] = w.reconcile(rctx, *b.Reconcile)
			cancel()
		}
	}
	if len(records) == 0 {
		return errs
	}
	var err error
	if timeLeft != nil && !timeLeft() {
		err = errNoTime
	} else {
		rctx, cancel := context.WithTimeout(ctx, recordTimeout)
		_, err = w.Outcomes.RecordUsage(rctx, records, w.now())
		cancel()
	}
	for _, i := range counted {
		errs[i] = err
	}
	return errs
}

// RecordOf is what the worker counts of a usage event; false when it
// counts nowhere. Its platform outcome: a served /v1 data call, what
// /v1/status counts. Its account usage: a call of the account's own (not a
// composite's leg, which its composite's call stands for, and not the
// sandbox), under the endpoint the ledger names, with the credits it was
// charged (0 while a charge is pending) and whether it failed.
func RecordOf(e Event) (store.UsageRecord, bool) {
	r := store.UsageRecord{RequestID: e.RequestID, At: e.At}
	if e.Served && e.Platform != "" {
		r.Outcome = &store.Outcome{Platform: e.Platform, Status: e.Status, ErrorType: e.ErrorType,
			Latency: time.Duration(e.LatencyMS * float64(time.Millisecond))}
	}
	if e.AccountID != "" && e.Endpoint != "" && e.ParentRequestID == "" && !e.Sandbox {
		r.AccountID, r.Endpoint, r.Failed = e.AccountID, e.Endpoint, e.Status >= 400
		if e.Credits != nil {
			r.Credits = *e.Credits
		}
	}
	return r, r.Counts()
}

// reconcile finishes a call's billing. The store's writes are conditional
// on the reservation's state, so applying a reconciliation twice, or after
// the request path or the sweep already did, changes nothing.
func (w *Worker) reconcile(ctx context.Context, r Reconciliation) error {
	var err error
	switch r.Action {
	case Refund:
		_, err = w.Store.Refund(ctx, r.AccountID, r.RequestID)
	case Settle:
		err = w.Store.Settle(ctx, r.AccountID, r.RequestID)
	}
	switch {
	case err == nil:
		w.logger().Info("reconciled", "action", r.Action, "request_id", r.RequestID)
		return nil
	case errors.Is(err, store.ErrNotFound):
		// Nothing was reserved (or the record aged out): nothing to do.
		w.logger().Warn("reconciliation found no reservation", "action", r.Action, "request_id", r.RequestID)
		return nil
	case errors.Is(err, store.ErrSettled), errors.Is(err, store.ErrRefunded):
		// Finished the other way already (a refund after a recorded
		// success, or the lease sweep before a late settle): the first
		// outcome stands, and the ledger shows it.
		w.logger().Warn("reconciliation found the reservation finished", "action", r.Action,
			"request_id", r.RequestID, "state", err.Error())
		return nil
	}
	return err
}

// recordTimeout bounds one store call (a reconciliation, or a batch's
// usage events), so one slow call cannot use up the invocation and send
// the whole batch back.
const recordTimeout = 10 * time.Second

// HandleSQS is the worker function's SQS handler: the batch's usage events
// are counted in one store call, each reconciliation is applied on its
// own, and the messages that failed are reported as batch item failures
// so only they are redelivered (and, after the queue's bounded receives,
// moved to the dead-letter queue): every usage event when their call
// failed. Messages the invocation has no time left for are reported
// failed without being tried.
func (w *Worker) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	bodies := make([][]byte, len(ev.Records))
	for i, rec := range ev.Records {
		bodies[i] = []byte(rec.Body)
	}
	timeLeft := func() bool {
		deadline, ok := ctx.Deadline()
		return !ok || time.Until(deadline) >= time.Second
	}
	for i, err := range w.handleBatch(ctx, decodeAll(bodies), timeLeft) {
		if err == nil {
			continue
		}
		rec := ev.Records[i]
		if !errors.Is(err, errNoTime) {
			w.logger().Warn("message not applied", "message_id", rec.MessageId,
				"receive_count", rec.Attributes["ApproximateReceiveCount"], "poison", errors.Is(err, ErrPoison), "error", err.Error())
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
	}
	return resp, nil
}

// sweepBatch bounds one page of expired reservations or outbox messages.
const sweepBatch = 100

// Sweep is the scheduled run. It first applies the outbox itself (a
// settle waiting there must land before its lease is swept), then refunds
// every reservation whose lease ended with no success recorded (its
// process died between reserve and settle). Refunds are conditional, so
// overlapping sweeps refund each reservation once, and only while the
// lease is still over (store.RefundExpired): a web job that started since
// the listing holds its reservation (ExtendReservation) and keeps it. An
// item that fails is logged and the sweep goes on. It returns the refunds
// it wrote (a refund another sweep wrote first may count in both).
func (w *Worker) Sweep(ctx context.Context) (refunded int, err error) {
	var errs []error
	if w.Outbox != nil {
		if err := w.applyOutbox(ctx); err != nil {
			errs = append(errs, fmt.Errorf("outbox: %w", err))
		}
	}
	seen := map[string]bool{}
	for ctx.Err() == nil {
		now := w.now()
		expired, err := w.Store.ExpiredReservations(ctx, now, sweepBatch)
		if err != nil {
			errs = append(errs, fmt.Errorf("list expired reservations: %w", err))
			break
		}
		fresh := 0
		for _, r := range expired {
			if seen[r.RequestID] {
				continue // the index has not caught up with a refund yet
			}
			seen[r.RequestID] = true
			fresh++
			_, err := w.Store.RefundExpired(ctx, r.AccountID, r.RequestID, now)
			switch {
			case err == nil:
				refunded++
				w.logger().Info("expired reservation refunded", "request_id", r.RequestID, "lease_until", r.LeaseUntil)
			case errors.Is(err, store.ErrSettled), errors.Is(err, store.ErrRefunded), errors.Is(err, store.ErrNotFound),
				errors.Is(err, store.ErrLeaseHeld):
			default:
				w.logger().Error("expired reservation not refunded", "request_id", r.RequestID, "error", err.Error())
				errs = append(errs, err)
			}
		}
		if len(expired) < sweepBatch || fresh == 0 {
			break
		}
	}
	return refunded, errors.Join(errs...)
}

// applyOutbox applies and removes the outbox's messages, oldest first.
func (w *Worker) applyOutbox(ctx context.Context) error {
	for ctx.Err() == nil {
		batch, err := w.Outbox.OutboxBatch(ctx, sweepBatch)
		if err != nil || len(batch) == 0 {
			return err
		}
		var done []string
		for _, m := range batch {
			err := w.Handle(ctx, m.Body)
			if errors.Is(err, ErrPoison) {
				w.logger().Error("dead letter: outbox message dropped", "message_id", m.ID)
			} else if err != nil {
				return err // retried on the next run, in order
			}
			done = append(done, m.ID)
		}
		if err := w.Outbox.DeleteOutbox(ctx, done); err != nil {
			return err
		}
	}
	return ctx.Err()
}
