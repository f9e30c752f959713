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
	// Emitter, when set, is drained by Sweep: the outbox of messages the
	// queue once refused.
	Emitter *Emitter
	Logger  *slog.Logger
	Now     func() time.Time
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

// HandleSQS is the worker function's SQS handler: each record is applied
// on its own, and the ones that failed are reported as batch item failures
// so only they are redelivered (and, after the queue's bounded receives,
// moved to the dead-letter queue).
func (w *Worker) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, rec := range ev.Records {
		if err := w.Handle(ctx, []byte(rec.Body)); err != nil {
			w.logger().Warn("message not applied", "message_id", rec.MessageId,
				"receive_count", rec.Attributes["ApproximateReceiveCount"], "poison", errors.Is(err, ErrPoison), "error", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return resp, nil
}

// sweepBatch bounds one sweep's page of expired reservations.
const sweepBatch = 100

// Sweep refunds every reservation whose lease ended with no success
// recorded (its process died between reserve and settle), then sends the
// outbox. Several sweeps at once refund each reservation once (the store's
// refund is conditional); each reports the expired reservations it
// finished, so overlapping sweeps may both count one.
func (w *Worker) Sweep(ctx context.Context) (finished int, err error) {
	for {
		expired, err := w.Store.ExpiredReservations(ctx, w.now(), sweepBatch)
		if err != nil {
			return finished, fmt.Errorf("list expired reservations: %w", err)
		}
		progress := 0
		for _, r := range expired {
			_, err := w.Store.Refund(ctx, r.AccountID, r.RequestID)
			switch {
			case err == nil:
				finished++
				progress++
				w.logger().Info("expired reservation refunded", "request_id", r.RequestID, "lease_until", r.LeaseUntil)
			case errors.Is(err, store.ErrSettled), errors.Is(err, store.ErrRefunded), errors.Is(err, store.ErrNotFound):
				progress++ // finished meanwhile; the index catches up
			default:
				return finished, err
			}
		}
		if len(expired) < sweepBatch || progress == 0 {
			break
		}
	}
	if w.Emitter != nil {
		if _, err := w.Emitter.Drain(ctx); err != nil {
			return finished, fmt.Errorf("drain the outbox: %w", err)
		}
	}
	return finished, nil
}
