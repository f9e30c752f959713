package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/gateway"
	"github.com/meridian-data/meridian/shared/registry"
)

const (
	firstEvent  = "event: leg\ndata: {\"platform\":\"a\"}\n\n"
	secondEvent = "event: result\ndata: {\"success\":true}\n\n"
)

// twoEvents writes one server-sent event, waits for release, then writes
// another, as a streaming call writes a leg and later its result.
func twoEvents(release <-chan struct{}, finished chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(finished)
		w.Header().Set("content-type", "text/event-stream; charset=utf-8")
		w.Header().Set("x-request-id", "req_1")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, firstEvent)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, secondEvent)
	})
}

func urlEvent(method, path string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{RawPath: path, RouteKey: "$default"}
	ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, path
	ev.RequestContext.DomainName = "abcdefghij.lambda-url.eu-west-2.on.aws"
	return ev
}

// within runs f, failing the test if it takes longer than five seconds
// (a read that should have been answered already).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting after 5 s", what)
	}
}

// readEvent reads one server-sent event (up to its blank line).
func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var ev strings.Builder
	var err error
	within(t, "read an event", func() {
		for {
			var line string
			if line, err = br.ReadString('\n'); err != nil {
				return
			}
			ev.WriteString(line)
			if line == "\n" {
				return
			}
		}
	})
	if err != nil {
		t.Fatalf("after %q: %v", ev.String(), err)
	}
	return ev.String()
}

// prelude reads what the Lambda runtime sends before a streamed body: the
// JSON head and eight NUL bytes.
type prelude struct {
	StatusCode int               `json:"statusCode"`
	Headers    map[string]string `json:"headers"`
	Cookies    []string          `json:"cookies"`
}

func readPrelude(t *testing.T, br *bufio.Reader) prelude {
	t.Helper()
	var raw []byte
	var err error
	within(t, "read the prelude", func() { raw, err = br.ReadBytes(0) })
	if err != nil {
		t.Fatal(err)
	}
	nuls := make([]byte, 7)
	if _, err := io.ReadFull(br, nuls); err != nil || !bytes.Equal(nuls, make([]byte, 7)) {
		t.Fatalf("prelude separator %q %v", nuls, err)
	}
	var p prelude
	if err := json.Unmarshal(raw[:len(raw)-1], &p); err != nil {
		t.Fatalf("prelude %q: %v", raw, err)
	}
	return p
}

func streamed(t *testing.T, out any, err error) *events.LambdaFunctionURLStreamingResponse {
	t.Helper()
	stream, ok := out.(*events.LambdaFunctionURLStreamingResponse)
	if err != nil || !ok {
		t.Fatalf("want a streamed response: %#v %v", out, err)
	}
	return stream
}

func TestFunctionURLStreamsEachWriteAsItHappens(t *testing.T) {
	release, finished := make(chan struct{}), make(chan struct{})
	h := gateway.FunctionURLAware(gateway.Lambda(twoEvents(release, finished), nil, ""))
	var out any
	var err error
	within(t, "the head", func() { out, err = h(context.Background(), urlEvent("GET", "/v1/search/all")) })
	stream := streamed(t, out, err)
	defer stream.Close()
	// What the runtime reads and sends: the head, then the body.
	br := bufio.NewReader(stream)
	p := readPrelude(t, br)
	if p.StatusCode != 200 || p.Headers["Content-Type"] != "text/event-stream; charset=utf-8" || p.Headers["X-Request-Id"] != "req_1" {
		t.Fatalf("head %+v", p)
	}
	if got := readEvent(t, br); got != firstEvent {
		t.Fatalf("first event %q", got)
	}
	select {
	case <-finished:
		t.Fatal("the handler finished before its first event was read")
	default:
	}
	close(release)
	if got := readEvent(t, br); got != secondEvent {
		t.Fatalf("second event %q", got)
	}
	within(t, "the end of the stream", func() { _, err = br.ReadByte() })
	if err != io.EOF {
		t.Fatalf("after the last event: %v", err)
	}
	<-finished
}

func TestLocalServerStreamsEventsAsTheyAreWritten(t *testing.T) {
	release, finished := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(localServer(twoEvents(release, finished)))
	defer srv.Close()
	var res *http.Response
	var err error
	within(t, "the response head", func() { res, err = http.Get(srv.URL + "/v1/search/all?query=a&stream=1") })
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("content-type") != "text/event-stream; charset=utf-8" || res.Header.Get("x-request-id") != "req_1" {
		t.Fatalf("%d %v", res.StatusCode, res.Header)
	}
	br := bufio.NewReader(res.Body)
	if got := readEvent(t, br); got != firstEvent {
		t.Fatalf("first event %q", got)
	}
	select {
	case <-finished:
		t.Fatal("the handler finished before its first event was read")
	default:
	}
	close(release)
	if got := readEvent(t, br); got != secondEvent {
		t.Fatalf("second event %q", got)
	}
	within(t, "the end of the stream", func() { _, err = br.ReadByte() })
	if err != io.EOF {
		t.Fatalf("after the last event: %v", err)
	}
}

// localServer serves every family with h, as app.LocalHandler does.
func localServer(h http.Handler) http.Handler {
	handlers := map[registry.Family]http.Handler{}
	for _, f := range registry.Families {
		handlers[f] = h
	}
	return gateway.Local(registry.Default().Routes(), handlers, slog.New(slog.DiscardHandler), "")
}

func TestLocalClientDisconnectCancelsTheHandler(t *testing.T) {
	cancelled := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/event-stream")
		_, _ = io.WriteString(w, firstEvent)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	})
	srv := httptest.NewServer(localServer(h))
	defer srv.Close()
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/search/all?query=a&stream=1", nil)
	var res *http.Response
	var err error
	within(t, "the response head", func() { res, err = http.DefaultClient.Do(req) })
	if err != nil {
		t.Fatal(err)
	}
	if got := readEvent(t, bufio.NewReader(res.Body)); got != firstEvent {
		t.Fatalf("first event %q", got)
	}
	hangUp()
	res.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the client's disconnect did not cancel the handler's context")
	}
}

// Through API Gateway the same handler is answered buffered: one body
// with every event.
func TestAPIGatewayStillBuffers(t *testing.T) {
	release, finished := make(chan struct{}), make(chan struct{})
	close(release)
	h := gateway.FunctionURLAware(gateway.Lambda(twoEvents(release, finished), nil, ""))
	ev := urlEvent("GET", "/v1/search/all")
	ev.RequestContext.DomainName = "a1b2c3d4e5.execute-api.eu-west-2.amazonaws.com"
	out, err := h(context.Background(), ev)
	resp, ok := out.(events.APIGatewayV2HTTPResponse)
	if err != nil || !ok {
		t.Fatalf("%#v %v", out, err)
	}
	select {
	case <-finished:
	default:
		t.Fatal("a buffered answer came before its handler finished")
	}
	if resp.StatusCode != 200 || resp.Body != firstEvent+secondEvent || resp.Headers["Content-Type"] != "text/event-stream; charset=utf-8" {
		t.Fatalf("%+v", resp)
	}
}

func TestPanicEndsTheStream(t *testing.T) {
	afterFirst := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.Header().Set("content-type", "text/event-stream")
		_, _ = io.WriteString(w, firstEvent)
		panic("lost")
	})
	t.Run("function URL, after the head", func(t *testing.T) {
		out, err := gateway.FunctionURLAware(gateway.Lambda(afterFirst, slog.New(slog.DiscardHandler), ""))(context.Background(), urlEvent("GET", "/v1/search/all"))
		stream := streamed(t, out, err)
		defer stream.Close()
		br := bufio.NewReader(stream.Body)
		if got := readEvent(t, br); got != firstEvent {
			t.Fatalf("first event %q", got)
		}
		within(t, "the end of the stream", func() { _, err = io.ReadAll(br) })
		// The runtime turns a read error into the response's error trailers.
		if err == nil || !strings.Contains(err.Error(), "panicked") || strings.Contains(err.Error(), "lost") {
			t.Fatalf("the body must end in an error that keeps the panic value out: %v", err)
		}
	})
	t.Run("function URL, before the head", func(t *testing.T) {
		early := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("lost") })
		out, err := gateway.FunctionURLAware(gateway.Lambda(early, slog.New(slog.DiscardHandler), ""))(context.Background(), urlEvent("GET", "/v1"))
		stream := streamed(t, out, err)
		var body []byte
		within(t, "the body", func() { body, err = io.ReadAll(stream.Body) })
		if err != nil || stream.StatusCode != 500 || !strings.Contains(string(body), `"INTERNAL_ERROR"`) ||
			stream.Headers["X-Request-Id"] == "" || !strings.Contains(string(body), stream.Headers["X-Request-Id"]) ||
			!strings.Contains(string(body), "https://abcdefghij.lambda-url.eu-west-2.on.aws/docs/errors") {
			t.Fatalf("%d %v %s %v", stream.StatusCode, stream.Headers, body, err)
		}
	})
	t.Run("local server", func(t *testing.T) {
		srv := httptest.NewServer(localServer(afterFirst))
		defer srv.Close()
		var res *http.Response
		var err error
		within(t, "the response head", func() { res, err = http.Get(srv.URL + "/v1/search/all") })
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		br := bufio.NewReader(res.Body)
		if got := readEvent(t, br); got != firstEvent {
			t.Fatalf("first event %q", got)
		}
		within(t, "the end of the response", func() { _, err = io.ReadAll(br) })
		if err == nil {
			t.Fatal("a response cut short by a panic must not read as complete")
		}
		// The server goes on serving.
		within(t, "the next request", func() { res, err = http.Get(srv.URL + "/v1") })
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%v %v", res, err)
		}
		res.Body.Close()
	})
}

// The status and headers of a stream are those of net/http: fixed by
// WriteHeader (later changes are not sent), a content-type sniffed from
// the first bytes when none was set, cookies apart.
func TestStreamHeadIsFixedAsInNetHTTP(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("vary", "a")
		w.Header().Add("vary", "b")
		w.Header().Add("set-cookie", "c=1")
		w.Header().Add("set-cookie", "d=2")
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("x-late", "1")
		_, _ = io.WriteString(w, "<!DOCTYPE html><p>hi")
	})
	out, err := gateway.FunctionURLAware(gateway.Lambda(h, nil, ""))(context.Background(), urlEvent("POST", "/v1"))
	stream := streamed(t, out, err)
	body, _ := io.ReadAll(stream.Body)
	if stream.StatusCode != 201 || stream.Headers["Content-Type"] != "text/html; charset=utf-8" || stream.Headers["Vary"] != "a,b" ||
		stream.Headers["X-Late"] != "" || strings.Join(stream.Cookies, ";") != "c=1;d=2" || string(body) != "<!DOCTYPE html><p>hi" {
		t.Fatalf("%d %v %v %q", stream.StatusCode, stream.Headers, stream.Cookies, body)
	}

	// The local server writes the same head.
	srv := httptest.NewServer(localServer(h))
	defer srv.Close()
	res, err := http.Post(srv.URL+"/v1", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 201 || res.Header.Get("vary") != "a,b" || len(res.Header.Values("set-cookie")) != 2 || res.Header.Get("x-late") != "" ||
		string(body) != "<!DOCTYPE html><p>hi" || res.ContentLength != int64(len(body)) {
		t.Fatalf("%d %v %q", res.StatusCode, res.Header, body)
	}

	// A handler that writes nothing answers 200 with no body.
	silent := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	out, err = gateway.FunctionURLAware(gateway.Lambda(silent, nil, ""))(context.Background(), urlEvent("GET", "/v1"))
	stream = streamed(t, out, err)
	if body, _ := io.ReadAll(stream.Body); stream.StatusCode != 200 || len(body) != 0 || stream.Headers["Content-Type"] != "" {
		t.Fatalf("%d %v %q", stream.StatusCode, stream.Headers, body)
	}
}

// A streamed function URL call has no deadline of its own; the local
// server keeps API Gateway's budget, as it keeps its routes.
func TestStreamDeadlines(t *testing.T) {
	var has bool
	var deadline time.Time
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline, has = r.Context().Deadline()
	})
	out, err := gateway.FunctionURLAware(gateway.Lambda(h, nil, ""))(context.Background(), urlEvent("GET", "/v1"))
	_, _ = io.ReadAll(streamed(t, out, err).Body) // the handler has returned
	if has {
		t.Fatalf("a function URL stream got a deadline in %v", time.Until(deadline))
	}
	srv := httptest.NewServer(localServer(h))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if !has || time.Until(deadline) > gateway.APIGatewayBudget {
		t.Fatalf("local deadline %v %v", has, time.Until(deadline))
	}
}

// An event that cannot become a request still gets its typed 400, as a
// stream through a function URL.
func TestFunctionURLUnreadableEvent(t *testing.T) {
	h := gateway.FunctionURLAware(gateway.Lambda(http.NotFoundHandler(), nil, ""))
	ev := urlEvent("G E T", "/v1")
	out, err := h(context.Background(), ev)
	stream := streamed(t, out, err)
	body, _ := io.ReadAll(stream.Body)
	if stream.StatusCode != 400 || !strings.Contains(string(body), `"INVALID_PARAMETERS"`) || stream.Headers["x-request-id"] == "" {
		t.Fatalf("%d %v %s", stream.StatusCode, stream.Headers, body)
	}
}

// The work after an invocation waits for a streamed response's handler,
// which outlives the Lambda handler's return.
func TestWorkWaitsForTheStreamsHandler(t *testing.T) {
	rt := &fakeRuntime{invokes: make(chan string), asked: make(chan int32, 10)}
	srv := httptest.NewServer(rt)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	worked := make(chan struct{}, 2)
	wrap, err := gateway.AfterInvocation(ctx, strings.TrimPrefix(srv.URL, "http://"), func(context.Context) { worked <- struct{}{} }, func() { t.Error("fallback") })
	if err != nil {
		t.Fatal(err)
	}
	<-rt.asked
	release, finished := make(chan struct{}), make(chan struct{})
	h := gateway.FunctionURLAware(wrap(gateway.Lambda(twoEvents(release, finished), nil, "")))
	rt.invokes <- "inv-1"
	out, err := h(ctx, urlEvent("GET", "/v1/search/all"))
	stream := streamed(t, out, err)
	defer stream.Close()
	br := bufio.NewReader(stream.Body)
	readEvent(t, br)
	select {
	case <-worked:
		t.Fatal("the work ran while the stream's handler was still writing")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	readEvent(t, br)
	select {
	case <-worked:
	case <-time.After(5 * time.Second):
		t.Fatal("no work after the stream's handler returned")
	}
}

// A stream whose reader goes away (the runtime closes the body) cancels
// the handler, whose writes then fail.
func TestClosingTheStreamCancelsTheHandler(t *testing.T) {
	writeErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, firstEvent)
		<-r.Context().Done()
		_, err := io.WriteString(w, secondEvent)
		writeErr <- err
	})
	out, err := gateway.FunctionURLAware(gateway.Lambda(h, nil, ""))(context.Background(), urlEvent("GET", "/v1"))
	stream := streamed(t, out, err)
	readEvent(t, bufio.NewReader(stream.Body))
	_ = stream.Close()
	select {
	case err := <-writeErr:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("write after close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the stream did not cancel the handler")
	}
}
