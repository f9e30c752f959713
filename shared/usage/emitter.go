package usage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
)

// Sink takes messages from the request path without ever blocking it.
type Sink interface {
	Emit(m queue.Message)
}

// Emitter buffers messages and sends them to the queue in batches, off
// the request's path: in the background on a server, after each
// invocation's response in Lambda (see app). What the queue does not
// accept goes to the outbox, and every flush that reaches the queue sends
// some of the outbox too, so an event that cannot be sent is not lost.
type Emitter struct {
	Queue  queue.Queue
	Outbox store.Outbox
	Logger *slog.Logger
	Now    func() time.Time

	mu      sync.Mutex
	pending []queue.Message
	kick    chan struct{}
	once    sync.Once
	flushMu sync.Mutex  // one flush at a time
	dirty   atomic.Bool // this emitter put messages in the outbox since it last found it empty
}

// flushAt is how many pending messages wake the background flusher early
// (one SQS batch).
const flushAt = 10

// drainPerFlush bounds how much of the outbox one flush sends.
const drainPerFlush = 100

func (e *Emitter) init() {
	e.once.Do(func() {
		e.kick = make(chan struct{}, 1)
		if e.Logger == nil {
			e.Logger = slog.New(slog.DiscardHandler)
		}
		if e.Now == nil {
			e.Now = time.Now
		}
	})
}

// Emit queues m for the next flush.
func (e *Emitter) Emit(m queue.Message) {
	e.init()
	e.mu.Lock()
	e.pending = append(e.pending, m)
	n := len(e.pending)
	e.mu.Unlock()
	if n >= flushAt {
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
}

// Pending is how many messages wait for a flush.
func (e *Emitter) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.pending)
}

// Flush sends what is pending; messages the queue refuses go to the
// outbox. When the queue took them and this emitter has used the outbox,
// it also sends part of the outbox. The error is only for logs: what the
// queue and the outbox both refuse waits in memory for the next flush.
func (e *Emitter) Flush(ctx context.Context) error {
	e.init()
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	e.mu.Lock()
	msgs := e.pending
	e.pending = nil
	e.mu.Unlock()
	if err := e.send(ctx, msgs); err != nil || !e.dirty.Load() {
		return err
	}
	// This process once kept messages in the outbox: send some while the
	// queue answers. (The worker's scheduled run applies the rest.)
	_, err := e.drain(ctx, drainPerFlush)
	return err
}

// refusedBy splits msgs by the queue's answer: the ones it refused (all
// of them unless the error names some) and the ones it took.
func refusedBy(msgs []queue.Message, err error) (refused, sent []queue.Message) {
	if err == nil {
		return nil, msgs
	}
	var partial *queue.SendError
	if !errors.As(err, &partial) {
		return msgs, nil
	}
	failed := map[string]bool{}
	for _, id := range partial.Failed {
		failed[id] = true
	}
	for _, m := range msgs {
		if failed[m.ID] {
			refused = append(refused, m)
		} else {
			sent = append(sent, m)
		}
	}
	return refused, sent
}

// send sends msgs; the refused ones are kept in the outbox.
func (e *Emitter) send(ctx context.Context, msgs []queue.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	err := e.Queue.Send(ctx, msgs)
	refused, _ := refusedBy(msgs, err)
	if len(refused) == 0 {
		return nil
	}
	now := e.Now()
	kept := make([]store.OutboxMessage, len(refused))
	for i, m := range refused {
		kept[i] = store.OutboxMessage{ID: m.ID, Body: m.Encoded(), CreatedAt: now}
	}
	if perr := e.Outbox.PutOutbox(ctx, kept); perr != nil {
		// Both the queue and the store failed: keep them for the next flush.
		e.requeue(refused)
		return errors.Join(err, perr)
	}
	e.dirty.Store(true)
	e.Logger.Warn("queue refused messages; kept in the outbox", "messages", len(refused), "error", err.Error())
	return err
}

// maxPending bounds the messages held in memory while both the queue and
// the outbox fail; past it the oldest are dropped, loudly.
const maxPending = 100_000

// requeue puts messages back in front of the pending ones.
func (e *Emitter) requeue(msgs []queue.Message) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending = append(append(make([]queue.Message, 0, len(msgs)+len(e.pending)), msgs...), e.pending...)
	if over := len(e.pending) - maxPending; over > 0 {
		e.Logger.Error("usage messages lost: queue and outbox unavailable and the buffer is full", "messages", over)
		e.pending = e.pending[over:]
	}
}

// drain sends up to limit outbox messages, oldest first, and deletes the
// ones the queue took. It returns how many were sent.
func (e *Emitter) drain(ctx context.Context, limit int) (int, error) {
	batch, err := e.Outbox.OutboxBatch(ctx, limit)
	if err != nil {
		return 0, err
	}
	if len(batch) == 0 {
		e.dirty.Store(false)
		return 0, nil
	}
	msgs := make([]queue.Message, len(batch))
	for i, m := range batch {
		msgs[i] = queue.Message{ID: m.ID, Body: m.Body}
	}
	err = e.Queue.Send(ctx, msgs)
	_, sent := refusedBy(msgs, err)
	if len(sent) == 0 {
		return 0, err
	}
	ids := make([]string, len(sent))
	for i, m := range sent {
		ids[i] = m.ID
	}
	// A crash between the send and this delete re-sends them later: the
	// worker counts each request once, so a repeat changes nothing.
	return len(sent), e.Outbox.DeleteOutbox(ctx, ids)
}

// Drain sends the whole outbox (the worker's scheduled run, tests).
func (e *Emitter) Drain(ctx context.Context) (int, error) {
	e.init()
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	total := 0
	for {
		n, err := e.drain(ctx, drainPerFlush)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// flushTimeout bounds one flush.
const flushTimeout = 10 * time.Second

// Run flushes every interval, and early once a batch is pending, until ctx
// ends; then it flushes what is left.
func (e *Emitter) Run(ctx context.Context, interval time.Duration) {
	e.init()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		stop := false
		select {
		case <-ctx.Done():
			stop = true
		case <-t.C:
		case <-e.kick:
		}
		// A flush is never cut short by ctx: what it took must land.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		e.logFlush(e.Flush(fctx))
		cancel()
		if stop {
			return
		}
	}
}

func (e *Emitter) logFlush(err error) {
	if err != nil {
		e.Logger.Warn("usage flush incomplete", "error", err.Error())
	}
}
