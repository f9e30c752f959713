package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
)

// Server-sent events of a streaming call (spec 4.4, 6.1): stream=1 on an
// endpoint that streams answers text/event-stream with one "leg" event per
// leg as it finishes, ": keep-alive" comments while it is quiet, and a
// final "result" event whose data is the full response envelope (success
// or error), after which the stream ends. Refusals before the call runs
// (authentication, limits, validation, credits) are plain JSON errors with
// their own status, as for any call.
//
// Charging rule: the call is reserved at its list price before the stream
// opens and settled once, at the end, when at least one leg succeeded; if
// the caller disconnects, the remaining legs stop, and the call is settled
// only if a successful leg's event had been written and flushed to it
// before; otherwise it is refunded in full. The ledger shows the debit and
// its settle or refund under the call's request_id.
const (
	EventLeg    = "leg"
	EventResult = "result"
)

// streamOutcome is a stream's final envelope and the status it stands for.
type streamOutcome struct {
	status int
	body   []byte
}

// wantsStream: a streaming endpoint called with stream=1 (a dry run is a
// plain JSON estimate).
func wantsStream(c *Call) bool {
	return c.Endpoint.Streams && c.Params.Values["stream"] == "true" && !c.Params.DryRun
}

// eventStream writes server-sent events, one whole event per write and
// flush, from any goroutine.
type eventStream struct {
	mu        sync.Mutex
	w         http.ResponseWriter
	rc        *http.ResponseController
	ctx       context.Context
	broken    bool
	delivered int // successful legs' events written and flushed
}

func (p *Pipeline) openStream(x *exchange) *eventStream {
	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies that buffer by default stream it
	x.w.WriteHeader(http.StatusOK)
	s := &eventStream{w: x.w, rc: http.NewResponseController(x.w), ctx: x.r.Context()}
	s.flush()
	return s
}

func (s *eventStream) flush() bool {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.broken = true
	}
	return !s.broken
}

// write sends one frame unless the caller has gone.
func (s *eventStream) write(frame []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken || s.ctx.Err() != nil {
		s.broken = true
		return false
	}
	if _, err := s.w.Write(frame); err != nil {
		s.broken = true
		return false
	}
	return s.flush()
}

// send writes an event whose data is JSON (one line: envelope.Marshal
// never breaks lines inside a value).
func (s *eventStream) send(event string, data any, delivered bool) bool {
	body, err := envelope.Marshal(data)
	if err != nil {
		return false
	}
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	ok := s.write(b.Bytes())
	if ok && delivered {
		s.mu.Lock()
		s.delivered++
		s.mu.Unlock()
	}
	return ok
}

// keepAlive writes a comment every period until stop is called.
func (s *eventStream) keepAlive(period time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-s.ctx.Done():
				return
			case <-t.C:
				s.write([]byte(": keep-alive\n\n"))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (s *eventStream) deliveredLegs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered
}

// stream runs a streaming call: reserve, open the stream, run the handler
// with its events going out as they happen, then settle or refund and end
// with the result event.
func (p *Pipeline) stream(x *exchange, c *Call, h Handler, cu cacheUse, fu *fairUse) {
	charge, remaining, ok := p.reserve(x, c)
	if !ok {
		return
	}
	if fu != nil {
		// Sent with the head: the ceiling and what was used before this call.
		setFairUseHeaders(x, fu)
	}
	es := p.openStream(x)
	stop := es.keepAlive(p.cfg.StreamKeepAlive)
	c.events = es.send
	if c.legs != nil {
		c.legs.emit = es.send
	}
	data, herr := p.run(h, x, c)
	stop()
	p.countFairUse(x, c, fu)
	if herr == nil && x.r.Context().Err() != nil && es.deliveredLegs() == 0 {
		herr = envelope.New(envelope.UpstreamTimeout, http.StatusGatewayTimeout,
			"The caller disconnected before any results were delivered; nothing is charged.",
			map[string]any{"reason": "caller_disconnected"})
	}
	var raw []byte
	if herr == nil {
		var err error
		if raw, err = envelope.Marshal(data); err != nil {
			p.cfg.Logger.Error("encode response", "request_id", x.requestID, "error", err.Error())
			herr = envelope.Internal()
		}
	}
	if herr != nil {
		if charge != nil {
			p.refund(x, *charge, herr)
		}
		x.errType = herr.Type
		p.endStream(x, es, herr.Status, envelope.NewFailure(herr, x.requestID, x.docBase), herr.ChargePending, 0)
		return
	}
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	var used int64
	if charge != nil {
		p.settle(x, *charge)
		used = charge.Cost
	}
	p.keep(x, cu, raw)
	p.endStream(x, es, http.StatusOK, p.success(x, c, json.RawMessage(raw), used, remaining), false, used)
}

// streamCached answers a streaming call from the cache: one result event,
// cached true, 0 credits.
func (p *Pipeline) streamCached(x *exchange, c *Call, e *store.CacheEntry) {
	x.served = true
	x.w.Header().Set("X-Cache", cacheHit)
	es := p.openStream(x)
	s := p.success(x, c, json.RawMessage(e.Data), 0, nil)
	s.Cached = true
	p.endStream(x, es, http.StatusOK, s, false, 0)
}

// endStream keeps the outcome for the usage event and idempotent replay
// (which answers this envelope as JSON), lands the call's effects, then
// writes the result event.
func (p *Pipeline) endStream(x *exchange, es *eventStream, status int, env any, pending bool, used int64) {
	body, err := envelope.Marshal(env)
	if err != nil {
		p.cfg.Logger.Error("encode response", "request_id", x.requestID, "error", err.Error())
		return
	}
	x.streamed = &streamOutcome{status: status, body: bytes.TrimSpace(body)}
	if !pending {
		// Read by the usage event; on the wire the envelope says it.
		x.w.Header().Set("X-Credits-Used", strconv.FormatInt(used, 10))
	}
	// What the result implies lands before the result event is sent.
	p.land(x)
	es.send(EventResult, json.RawMessage(x.streamed.body), false)
}
