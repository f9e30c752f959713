// Package afterwork runs what a request leaves for after its response (a
// slot's release, a settle, a cache write, an idempotent outcome), so the
// caller never waits for it. In Lambda the invocation's after-invocation
// work waits for it (gateway.AfterInvocation) before the environment may
// freeze; the local server lets it run beside the next requests.
package afterwork

import (
	"context"
	"sync"
	"time"
)

// Queue tracks work running after responses. The zero value is ready.
type Queue struct {
	wg sync.WaitGroup
}

// Go runs fn on its own goroutine with a context that outlives the
// request's (ctx's values, not its cancellation) and ends after timeout.
func (q *Queue) Go(ctx context.Context, timeout time.Duration, fn func(context.Context)) {
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		fn(wctx)
	}()
}

// Wait returns once every piece of work started so far is done, or when
// ctx ends (false).
func (q *Queue) Wait(ctx context.Context) bool {
	done := make(chan struct{})
	go func() {
		q.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
