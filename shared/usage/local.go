package usage

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/meridian-data/meridian/shared/queue"
)

// LocalQueue is the queue of the local server (and of a deployment without
// SQS): an in-process buffer that a worker goroutine applies. A full
// buffer refuses, so the emitter keeps the rest in the outbox.
type LocalQueue struct {
	ch     chan queue.Message
	worker *Worker
	logger *slog.Logger
}

// localAttempts bounds how often a message is tried before it is dropped
// as a dead letter (logged with its id).
const localAttempts = 5

// NewLocalQueue buffers up to capacity messages for w.
func NewLocalQueue(w *Worker, capacity int, logger *slog.Logger) *LocalQueue {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &LocalQueue{ch: make(chan queue.Message, capacity), worker: w, logger: logger}
}

// Send enqueues msgs without waiting; the ones that do not fit are refused.
func (q *LocalQueue) Send(_ context.Context, msgs []queue.Message) error {
	for i, m := range msgs {
		select {
		case q.ch <- m:
		default:
			failed := make([]string, 0, len(msgs)-i)
			for _, rest := range msgs[i:] {
				failed = append(failed, rest.ID)
			}
			return &queue.SendError{Failed: failed, Cause: errors.New("local queue is full")}
		}
	}
	return nil
}

// Run applies messages until ctx ends, retrying a failing one a few times
// with backoff.
func (q *LocalQueue) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-q.ch:
			q.apply(ctx, m)
		}
	}
}

func (q *LocalQueue) apply(ctx context.Context, m queue.Message) {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := q.worker.Handle(ctx, m.Body)
		if err == nil {
			return
		}
		if errors.Is(err, ErrPoison) || attempt == localAttempts || ctx.Err() != nil {
			q.logger.Error("dead letter: message dropped", "message_id", m.ID, "attempts", attempt, "error", err.Error())
			return
		}
		select {
		case <-time.After(wait):
			wait *= 2
		case <-ctx.Done():
		}
	}
}

// Every runs fn every interval until ctx ends (the local server's sweep).
func Every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

// Direct is a queue that applies each message at once with its worker:
// for a deployment without a queue, where the emitter's flush (after each
// invocation) does the worker's job. Messages it cannot apply are refused,
// so the emitter keeps them in the outbox for the sweep.
type Direct struct{ Worker *Worker }

// Send applies msgs in order.
func (d Direct) Send(ctx context.Context, msgs []queue.Message) error {
	var failed []string
	var cause error
	for _, m := range msgs {
		if err := d.Worker.Handle(ctx, m.Body); err != nil {
			failed, cause = append(failed, m.ID), err
		}
	}
	if failed != nil {
		return &queue.SendError{Failed: failed, Cause: cause}
	}
	return nil
}
