package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/gateway"
)

// fakeRuntime is the Extensions API side of a Lambda environment: it
// hands out one INVOKE event per invocation and notes when the extension
// asks for the next one (which is when Lambda could freeze it).
type fakeRuntime struct {
	invokes   chan string
	nextCalls atomic.Int32
	asked     chan int32
	name      string
	deadline  time.Duration // from now, in each INVOKE event
	failNext  atomic.Bool   // the Extensions API is gone
}

func (f *fakeRuntime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/2020-01-01/extension/register":
		f.name = r.Header.Get("Lambda-Extension-Name")
		w.Header().Set("Lambda-Extension-Identifier", "ext-1")
		fmt.Fprint(w, `{"functionName":"f"}`)
	case "/2020-01-01/extension/event/next":
		if r.Header.Get("Lambda-Extension-Identifier") != "ext-1" {
			http.Error(w, "unknown extension", http.StatusForbidden)
			return
		}
		if f.failNext.Load() {
			http.Error(w, "gone", http.StatusInternalServerError)
			return
		}
		f.asked <- f.nextCalls.Add(1)
		deadline := f.deadline
		if deadline == 0 {
			deadline = time.Minute
		}
		select {
		case id := <-f.invokes:
			fmt.Fprintf(w, `{"eventType":"INVOKE","deadlineMs":%d,"requestId":%q}`, time.Now().Add(deadline).UnixMilli(), id)
		case <-r.Context().Done():
		}
	default:
		http.NotFound(w, r)
	}
}

func TestWorkRunsAfterEachInvocation(t *testing.T) {
	rt := &fakeRuntime{invokes: make(chan string), asked: make(chan int32, 10)}
	srv := httptest.NewServer(rt)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	var log []string
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	wrap, err := gateway.AfterInvocation(ctx, strings.TrimPrefix(srv.URL, "http://"), func(context.Context) { note("work") }, func() { t.Error("fallback") })
	if err != nil {
		t.Fatal(err)
	}
	if rt.name != gateway.ExtensionName {
		t.Fatalf("registered as %q", rt.name)
	}
	if n := <-rt.asked; n != 1 {
		t.Fatalf("first next call = %d", n)
	}
	h := wrap(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		note("handler")
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	})
	for i := 1; i <= 2; i++ {
		rt.invokes <- fmt.Sprintf("inv-%d", i) // Lambda starts an invocation
		if _, err := h(ctx, events.APIGatewayV2HTTPRequest{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-rt.asked: // the extension is done with this invocation
		case <-time.After(5 * time.Second):
			t.Fatal("the extension never asked for its next event")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(log, ","); got != "handler,work,handler,work" {
		t.Fatalf("order = %s; want the work after each handler, before the next event", got)
	}
}

func TestAfterInvocationNeedsTheRuntime(t *testing.T) {
	if _, err := gateway.AfterInvocation(context.Background(), "127.0.0.1:1", func(context.Context) {}, func() {}); err == nil {
		t.Fatal("registration without a runtime API must fail, so the caller falls back")
	}
}

// A handler the runtime never ran (a payload it refused) does not hold
// the extension: the work runs at the invocation's deadline margin.
func TestWorkRunsWhenTheHandlerNeverDid(t *testing.T) {
	rt := &fakeRuntime{invokes: make(chan string), asked: make(chan int32, 10), deadline: 700 * time.Millisecond}
	srv := httptest.NewServer(rt)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	worked := make(chan struct{}, 1)
	if _, err := gateway.AfterInvocation(ctx, strings.TrimPrefix(srv.URL, "http://"), func(context.Context) { worked <- struct{}{} }, func() {}); err != nil {
		t.Fatal(err)
	}
	<-rt.asked
	rt.invokes <- "inv-refused"
	select {
	case <-worked:
	case <-time.After(5 * time.Second):
		t.Fatal("the extension waited for a handler that never ran")
	}
}

// When the Extensions API goes away the fallback takes over and handlers
// never block on the extension.
func TestLostExtensionFallsBack(t *testing.T) {
	rt := &fakeRuntime{invokes: make(chan string), asked: make(chan int32, 10)}
	srv := httptest.NewServer(rt)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fellBack := make(chan struct{})
	rt.failNext.Store(true)
	wrap, err := gateway.AfterInvocation(ctx, strings.TrimPrefix(srv.URL, "http://"), func(context.Context) {}, func() { close(fellBack) })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-fellBack:
	case <-time.After(5 * time.Second):
		t.Fatal("no fallback")
	}
	h := wrap(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	})
	finished := make(chan struct{})
	go func() {
		for i := 0; i < 3; i++ {
			_, _ = h(ctx, events.APIGatewayV2HTTPRequest{})
		}
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
		t.Fatal("handlers blocked on a lost extension")
	}
}

func TestNoExtensionForConcurrentInvocations(t *testing.T) {
	t.Setenv("AWS_LAMBDA_MAX_CONCURRENCY", "4")
	if _, err := gateway.AfterInvocation(context.Background(), "127.0.0.1:1", func(context.Context) {}, func() {}); err == nil {
		t.Fatal("an extension cannot pair concurrent invocations")
	}
}
