package afterwork

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitSeesEveryPieceOfWork(t *testing.T) {
	var q Queue
	var done atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	for i := 0; i < 20; i++ {
		q.Go(ctx, time.Second, func(ctx context.Context) {
			time.Sleep(5 * time.Millisecond)
			if ctx.Err() == nil {
				done.Add(1)
			}
		})
	}
	cancel() // the request has ended: its work goes on
	if !q.Wait(context.Background()) || done.Load() != 20 {
		t.Fatalf("%d of 20 done", done.Load())
	}
}

func TestWaitGivesUpWithItsContext(t *testing.T) {
	var q Queue
	release := make(chan struct{})
	q.Go(context.Background(), time.Minute, func(context.Context) { <-release })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if q.Wait(ctx) {
		t.Fatal("waited for work that never ended")
	}
	close(release)
	if !q.Wait(context.Background()) {
		t.Fatal("work that ended")
	}
}
