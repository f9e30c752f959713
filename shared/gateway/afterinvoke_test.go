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
		f.asked <- f.nextCalls.Add(1)
		select {
		case id := <-f.invokes:
			fmt.Fprintf(w, `{"eventType":"INVOKE","deadlineMs":%d,"requestId":%q}`, time.Now().Add(time.Minute).UnixMilli(), id)
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
	wrap, err := gateway.AfterInvocation(ctx, strings.TrimPrefix(srv.URL, "http://"), func(context.Context) { note("work") })
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
	if _, err := gateway.AfterInvocation(context.Background(), "127.0.0.1:1", func(context.Context) {}); err == nil {
		t.Fatal("registration without a runtime API must fail, so the caller falls back")
	}
}
