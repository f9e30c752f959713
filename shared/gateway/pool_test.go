package gateway

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestGoroutinePoolReusesIdleGoroutines: work that follows finished work
// runs on the goroutine that did it, work that arrives while every
// goroutine is busy starts another rather than waiting, and goroutines
// left idle end.
func TestGoroutinePoolReusesIdleGoroutines(t *testing.T) {
	p := &goroutinePool{work: make(chan func()), idle: 300 * time.Millisecond}
	for i := 0; i < 50; i++ {
		done := make(chan struct{})
		p.run(func() { close(done) })
		<-done
		time.Sleep(2 * time.Millisecond) // the goroutine gets back to waiting
	}
	// One, unless a slow scheduler had not put it back to waiting in time.
	if n := p.started.Load(); n > 5 {
		t.Fatalf("50 pieces of work one after another started %d goroutines", n)
	}

	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(3)
	for i := 0; i < 3; i++ {
		p.run(func() { running.Done(); <-release })
	}
	running.Wait() // all three run at once: none waited for another
	close(release)

	// Every goroutine the pool started ends once idle.
	started := int(p.started.Load())
	before := runtime.NumGoroutine()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before-started && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before-started {
		t.Fatalf("%d goroutines after the pool's idle time, %d before with %d from the pool", n, before, started)
	}
}
