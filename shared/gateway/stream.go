package gateway

// Streamed responses. A function URL invocation in RESPONSE_STREAM mode
// offers a slot in the context; Lambda's handler then runs the family's
// http.Handler in a goroutine and answers through the slot with a
// LambdaFunctionURLStreamingResponse as soon as the status is known,
// whose Body carries the handler's writes unbuffered. Every other caller
// (API Gateway) gets the buffered v2 response. EventHandler keeps
// Lambda's signature, so its wrappers (AfterInvocation) serve both. The
// local server answers in its own goroutine with the head a function URL
// would send (serveDirect).

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/envelope"
)

// errHandlerPanicked ends a stream whose handler panicked after its head
// was sent: the Lambda runtime reports it in the response's error
// trailers, the local server cuts the response short. The panic value
// stays in the log.
var errHandlerPanicked = errors.New("the handler panicked; the response is incomplete")

type streamSlotKey struct{}

// streamSlot receives the streamed response of one invocation.
type streamSlot struct {
	taken bool
	resp  *events.LambdaFunctionURLStreamingResponse
}

// offerStream lets the EventHandler called with the returned context
// answer through slot instead of buffering.
func offerStream(ctx context.Context) (context.Context, *streamSlot) {
	slot := &streamSlot{}
	return context.WithValue(ctx, streamSlotKey{}, slot), slot
}

// takeStreamSlot is the slot offered in ctx, taken once: a handler that
// makes a call with a context derived from its own never answers it.
func takeStreamSlot(ctx context.Context) *streamSlot {
	slot, _ := ctx.Value(streamSlotKey{}).(*streamSlot)
	if slot == nil || slot.taken {
		return nil
	}
	slot.taken = true
	return slot
}

// head is a response's status and headers, fixed when its body starts.
type head struct {
	status int
	header http.Header
}

// streamWriter is the ResponseWriter of a function URL's streamed
// response. As in net/http, WriteHeader fixes the status and a copy of
// the headers, and the first Write or Flush, or the handler's return,
// sends them to start (with a content-type sniffed from the first bytes
// when none was set); the body goes through the pipe as written, so Flush
// has nothing left to push. Header stays the handler's live map, which
// the pipeline reads after answering.
type streamWriter struct {
	header http.Header
	pipe   *io.PipeWriter
	ready  chan head // capacity 1, sent once

	mu    sync.Mutex
	fixed *head
	sent  bool
}

func newStreamWriter(pipe *io.PipeWriter) *streamWriter {
	return &streamWriter{header: http.Header{}, pipe: pipe, ready: make(chan head, 1)}
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Lambda has no informational responses; a second status is ignored.
	if w.fixed != nil || status < 200 {
		return
	}
	w.fixed = &head{status: status, header: w.header.Clone()}
}

// take is the head to send before first, once; w.mu is held.
func (w *streamWriter) take(first []byte) (head, bool) {
	if w.sent {
		return head{}, false
	}
	if w.fixed == nil {
		w.fixed = &head{status: http.StatusOK, header: w.header.Clone()}
	}
	// A content-type present but empty asks for none, as in net/http.
	if _, has := w.fixed.header["Content-Type"]; !has && len(first) > 0 {
		w.fixed.header.Set("Content-Type", http.DetectContentType(first))
	}
	w.sent = true
	return *w.fixed, true
}

func (w *streamWriter) headSent() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.send(p)
	w.mu.Unlock()
	return w.pipe.Write(p) // blocks until the reader has taken p
}

// Flush sends the head if it is still pending.
func (w *streamWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.send(nil)
}

// send hands the head over once; w.mu is held.
func (w *streamWriter) send(first []byte) {
	if h, ok := w.take(first); ok {
		w.ready <- h
	}
}

// answer sends h and body as the whole response.
func (w *streamWriter) answer(h head, body string) {
	w.mu.Lock()
	w.fixed = &h
	w.send(nil)
	w.mu.Unlock()
	_, _ = io.WriteString(w.pipe, body)
	_ = w.pipe.Close()
}

// directWriter is the ResponseWriter of a local request's handler: the
// client's own ResponseWriter, whose head is made the one a function URL
// would send (multi-value headers joined with ",", cookies apart) when
// the status is written. net/http then keeps the head as streamWriter
// does: fixed by WriteHeader, sent with the first bytes, a content-type
// sniffed from them when none was set. An event stream is flushed after
// every piece, so each server-sent event reaches the client when the
// handler writes it; other responses go when net/http's buffer fills or
// they end (a short answer keeps its content-length, as through API
// Gateway).
type directWriter struct {
	dst http.ResponseWriter

	mu          sync.Mutex
	wrote       bool // the status is written
	eventStream bool
}

func newDirectWriter(dst http.ResponseWriter) *directWriter { return &directWriter{dst: dst} }

func (w *directWriter) Header() http.Header { return w.dst.Header() }

func (w *directWriter) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Lambda has no informational responses; a second status is ignored.
	if status >= 200 {
		w.writeHead(status)
	}
}

// writeHead writes the status once, with the head a function URL would
// send; w.mu is held. An event stream's head is flushed, so the client
// sees the stream open before its first event.
func (w *directWriter) writeHead(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	h := w.dst.Header()
	for name, values := range h {
		canonical := textproto.CanonicalMIMEHeaderKey(name)
		switch {
		case canonical == "Set-Cookie":
			if name != canonical {
				delete(h, name)
				h[canonical] = append(h[canonical], values...)
			}
		case len(values) > 1 || name != canonical:
			delete(h, name)
			h[canonical] = []string{strings.Join(values, ",")} // as a function URL's head joins them
		}
	}
	w.dst.WriteHeader(status)
	w.eventStream = strings.HasPrefix(strings.ToLower(h.Get("Content-Type")), "text/event-stream")
	if w.eventStream {
		_ = http.NewResponseController(w.dst).Flush()
	}
}

func (w *directWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHead(http.StatusOK)
	n, err := w.dst.Write(p)
	if err == nil && w.eventStream {
		err = http.NewResponseController(w.dst).Flush()
	}
	return n, err
}

// Flush writes the head if it is still pending; an event stream's writes
// are flushed as they come.
func (w *directWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHead(http.StatusOK)
}

func (w *directWriter) headSent() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wrote
}

// answer sends h and body as the whole response, in place of the headers
// the handler had set.
func (w *directWriter) answer(h head, body string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.dst.Header())
	for name, values := range h.header {
		w.dst.Header()[name] = values
	}
	w.writeHead(h.status)
	_, _ = io.WriteString(w.dst, body)
}

// streamBody is a streamed response's body. Closing it (the runtime does
// once it stops reading, finished or not; the local server when its copy
// ends) cancels the handler's context and fails the handler's later
// writes, so a handler whose reader went away stops.
type streamBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *streamBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// streamedResponse is the Lambda side of streaming.
type streamedResponse struct {
	handler   http.Handler
	logger    *slog.Logger
	errorsURL string
}

// start runs the handler for req in a goroutine and returns as soon as
// the head is known. cancel ends req's context and release the
// invocation (holdInvocation); both are called when the handler returns.
func (s streamedResponse) start(req *http.Request, cancel context.CancelFunc, release func()) *events.LambdaFunctionURLStreamingResponse {
	pr, pw := io.Pipe()
	w := newStreamWriter(pw)
	go s.serveStream(w, req, cancel, release)
	h := <-w.ready
	resp := &events.LambdaFunctionURLStreamingResponse{
		StatusCode: h.status,
		Headers:    map[string]string{},
		Body:       &streamBody{PipeReader: pr, cancel: cancel},
	}
	for name, values := range h.header {
		if strings.EqualFold(name, "set-cookie") {
			resp.Cookies = append(resp.Cookies, values...)
			continue
		}
		resp.Headers[name] = strings.Join(values, ",") // as the buffered adapter joins them
	}
	return resp
}

// serveStream is the goroutine of a function URL's streamed response.
// A panic that escapes the handler is logged; before the head it becomes
// a typed 500, after it the body ends in errHandlerPanicked.
func (s streamedResponse) serveStream(w *streamWriter, req *http.Request, cancel context.CancelFunc, release func()) {
	defer release()
	defer cancel()
	defer func() {
		v := recover()
		if v == nil {
			w.Flush() // a handler that wrote nothing answers 200, as in net/http
			_ = w.pipe.Close()
			return
		}
		s.logPanic(v)
		if w.headSent() {
			_ = w.pipe.CloseWithError(errHandlerPanicked)
			return
		}
		w.answer(s.internalError())
	}()
	s.handler.ServeHTTP(w, req)
}

// serveDirect runs the handler for req in the caller's goroutine,
// answering on dst (the local server) as a function URL would. A panic that escapes the handler
// is logged; before the head it becomes a typed 500, after it the
// response is aborted, so the client sees it cut short rather than
// complete.
func (s streamedResponse) serveDirect(dst http.ResponseWriter, req *http.Request, cancel context.CancelFunc, release func()) {
	defer release()
	defer cancel()
	w := newDirectWriter(dst)
	defer func() {
		v := recover()
		if v == nil {
			w.Flush() // a handler that wrote nothing answers 200, as in net/http
			return
		}
		s.logPanic(v)
		if w.headSent() {
			panic(http.ErrAbortHandler)
		}
		w.answer(s.internalError())
	}()
	s.handler.ServeHTTP(w, req)
}

func (s streamedResponse) logPanic(v any) {
	if v != http.ErrAbortHandler && s.logger != nil {
		s.logger.Error("panic", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	}
}

// internalError is the typed 500 of a handler that panicked before its
// head.
func (s streamedResponse) internalError() (head, string) {
	resp, id := typedResponse(envelope.Internal(), s.errorsURL)
	if s.logger != nil {
		s.logger.Info("request", "request_id", id, "status", resp.StatusCode, "error_type", string(envelope.InternalError))
	}
	h := head{status: resp.StatusCode, header: http.Header{}}
	for name, value := range resp.Headers {
		h.header.Set(name, value)
	}
	return h, resp.Body
}

// bufferedStream is a buffered response as a streamed one: what a
// function URL or the local server answers for a response that was
// complete before it was sent (an unreadable event's 400, a handler that
// cannot stream).
func bufferedStream(resp events.APIGatewayV2HTTPResponse) (*events.LambdaFunctionURLStreamingResponse, error) {
	body, err := responseBody(resp)
	if err != nil {
		return nil, err
	}
	headers := map[string]string{}
	for k, v := range resp.Headers {
		headers[k] = v
	}
	for k, vs := range resp.MultiValueHeaders {
		headers[k] = strings.Join(vs, ",")
	}
	return &events.LambdaFunctionURLStreamingResponse{
		StatusCode: resp.StatusCode, Headers: headers, Body: strings.NewReader(string(body)), Cookies: resp.Cookies,
	}, nil
}

// responseBody is a v2 response's body, decoded.
func responseBody(resp events.APIGatewayV2HTTPResponse) ([]byte, error) {
	if resp.IsBase64Encoded {
		return base64.StdEncoding.DecodeString(resp.Body)
	}
	return []byte(resp.Body), nil
}
