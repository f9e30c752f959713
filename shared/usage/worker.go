package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/store"
)

// Worker applies queue messages: usage events become /v1/status counts
// (once per request id), reconciliations refund or settle (once per
// reservation, by the store's conditional writes), and Sweep refunds
// reservations whose process died. Every operation is safe to repeat, so
// a message delivered twice changes nothing the second time.
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
	b, err := Decode(raw)
	if err != nil {
		return err
	}
	switch b.Kind {
	case KindUsage:
		return w.record(ctx, *b.Usage)
	default:
		return w.reconcile(ctx, *b.Reconcile)
	}
}

// record counts a served call in its platform's minute, once.
func (w *Worker) record(ctx context.Context, e Event) error {
	if !e.Served || e.Platform == "" || w.Outcomes == nil {
		return nil
	}
	o := store.Outcome{Platform: e.Platform, Status: e.Status, ErrorType: e.ErrorType,
		Latency: time.Duration(e.LatencyMS * float64(time.Millisecond))}
	_, err := w.Outcomes.RecordOutcome(ctx, e.RequestID, o, e.At)
	return err
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

// recordTimeout bounds one message, so one slow record cannot use up the
// invocation and send the whole batch back.
const recordTimeout = 10 * time.Second

// HandleSQS is the worker function's SQS handler: each record is applied
// on its own, and the ones that failed are reported as batch item failures
// so only they are redelivered (and, after the queue's bounded receives,
// moved to the dead-letter queue). Records the invocation has no time left
// for are reported failed without being tried.
func (w *Worker) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, rec := range ev.Records {
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < time.Second {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, recordTimeout)
		err := w.Handle(rctx, []byte(rec.Body))
		cancel()
		if err != nil {
			w.logger().Warn("message not applied", "message_id", rec.MessageId,
				"receive_count", rec.Attributes["ApproximateReceiveCount"], "poison", errors.Is(err, ErrPoison), "error", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return resp, nil
}

// sweepBatch bounds one page of expired reservations or outbox messages.
const sweepBatch = 100

// Sweep is the scheduled run. It first applies the outbox itself (a
// settle waiting there must land before its lease is swept), then refunds
// every reservation whose lease ended with no success recorded (its
// process died between reserve and settle). Refunds are conditional, so
// overlapping sweeps refund each reservation once; an item that fails is
// logged and the sweep goes on. It returns the refunds it wrote (a refund
// another sweep wrote first may count in both).
func (w *Worker) Sweep(ctx context.Context) (refunded int, err error) {
	var errs []error
	if w.Outbox != nil {
		if err := w.applyOutbox(ctx); err != nil {
			errs = append(errs, fmt.Errorf("outbox: %w", err))
		}
	}
	seen := map[string]bool{}
	for ctx.Err() == nil {
		expired, err := w.Store.ExpiredReservations(ctx, w.now(), sweepBatch)
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
			_, err := w.Store.Refund(ctx, r.AccountID, r.RequestID)
			switch {
			case err == nil:
				refunded++
				w.logger().Info("expired reservation refunded", "request_id", r.RequestID, "lease_until", r.LeaseUntil)
			case errors.Is(err, store.ErrSettled), errors.Is(err, store.ErrRefunded), errors.Is(err, store.ErrNotFound):
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
