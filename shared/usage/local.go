package usage

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/meridian-data/meridian/shared/queue"
)

// LocalQueue is the queue of the local server (and of a deployment without
// SQS): an in-process buffer that a worker goroutine applies. A full
// buffer refuses, so the emitter keeps the rest in the outbox.
type LocalQueue struct {
	ch      chan queue.Message
	pending atomic.Int64 // accepted and not yet applied or dropped
	worker  *Worker
	logger  *slog.Logger
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
			q.pending.Add(1)
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

// Pending is how many accepted messages are not yet applied (or dropped
// as dead letters).
func (q *LocalQueue) Pending() int { return int(q.pending.Load()) }

// localBatch bounds the messages Run applies together, and localLinger
// is how long it waits for more once one arrives: each batch is one
// store write transaction with a commit of its own, so under load a
// batch of hundreds costs little more than a batch of ten, and counts
// appear at most localLinger later.
const (
	localBatch  = 1000
	localLinger = 50 * time.Millisecond
)

// Run applies messages until ctx ends: each message received and the
// ones that arrive within localLinger after it (up to localBatch) are
// applied as one batch, so their usage events are one store call; the
// messages the batch could not apply are retried one by one, a few times
// each, with backoff.
func (q *LocalQueue) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-q.ch:
			batch := q.gather(ctx, m)
			q.applyBatch(ctx, batch)
			q.pending.Add(-int64(len(batch)))
		}
	}
}

// gather returns first and the messages that arrive within localLinger,
// up to localBatch.
func (q *LocalQueue) gather(ctx context.Context, first queue.Message) []queue.Message {
	batch := []queue.Message{first}
	linger := time.NewTimer(localLinger)
	defer linger.Stop()
	for len(batch) < localBatch {
		select {
		case m := <-q.ch:
			batch = append(batch, m)
		case <-linger.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// firstRetryWait is the backoff before a failed message's second attempt;
// it doubles for each attempt after.
const firstRetryWait = 50 * time.Millisecond

// applyBatch applies the batch; the messages it could not apply wait one
// backoff together, then are retried one by one.
func (q *LocalQueue) applyBatch(ctx context.Context, batch []queue.Message) {
	var failed []queue.Message
	for i, err := range q.worker.HandleMessages(ctx, batch) {
		switch {
		case err == nil:
		case errors.Is(err, ErrPoison) || localAttempts == 1 || ctx.Err() != nil:
			q.deadLetter(batch[i], 1, err)
		default:
			failed = append(failed, batch[i])
		}
	}
	if len(failed) == 0 {
		return
	}
	sleep(ctx, firstRetryWait)
	for _, m := range failed {
		q.retry(ctx, m)
	}
}

// retry applies m from its second attempt on, with backoff, until it
// succeeds, turns out poison or runs out of attempts.
func (q *LocalQueue) retry(ctx context.Context, m queue.Message) {
	wait := 2 * firstRetryWait
	for attempt := 2; ; attempt++ {
		err := q.worker.HandleMessages(ctx, []queue.Message{m})[0]
		if err == nil {
			return
		}
		if errors.Is(err, ErrPoison) || attempt >= localAttempts || ctx.Err() != nil {
			q.deadLetter(m, attempt, err)
			return
		}
		sleep(ctx, wait)
		wait *= 2
	}
}

func (q *LocalQueue) deadLetter(m queue.Message, attempts int, err error) {
	q.logger.Error("dead letter: message dropped", "message_id", m.ID, "attempts", attempts, "error", err.Error())
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
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

// Send applies msgs as one batch (their usage events in one store call).
func (d Direct) Send(ctx context.Context, msgs []queue.Message) error {
	var failed []string
	var cause error
	for i, err := range d.Worker.HandleMessages(ctx, msgs) {
		if err != nil {
			failed, cause = append(failed, msgs[i].ID), err
		}
	}
	if failed != nil {
		return &queue.SendError{Failed: failed, Cause: cause}
	}
	return nil
}
