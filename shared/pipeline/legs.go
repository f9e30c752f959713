package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
)

// Composite is an operation built from the registry's own operations (its
// legs): search/all, search/creators, bundle/creator-vetting,
// web/social-profiles. The pipeline admits, validates, reserves and settles
// the composite as one call; each leg runs through the same steps as a
// direct call (validation, URL policy, response cache, fair use, upstream
// trace, usage event, log line) with its own request id, but is not billed
// on its own: the composite charges its list price once.
type Composite struct {
	// Legs are the endpoint keys the composite may call. It is available
	// when at least one of them is.
	Legs []string
	// Serve answers the call from legs. A leg's failure belongs in the
	// answer; Serve fails only when no leg gave it anything to answer with.
	Serve func(ctx context.Context, c *Call, legs LegRunner) (any, *envelope.Error)
}

// LegRunner runs a composite's legs for one call.
type LegRunner interface {
	// Available reports whether this deployment serves the endpoint key.
	Available(key string) bool
	// Run runs one leg and waits for it.
	Run(ctx context.Context, req LegRequest) LegResult
	// RunAll runs legs concurrently, at most as many at once as the key
	// has free in-flight slots (and always at least one, on the
	// composite's own slot). done, when set, is called as each leg
	// finishes, one call at a time. Results are in request order.
	RunAll(ctx context.Context, reqs []LegRequest, done func(i int, r LegResult)) []LegResult
	// Emit sends an event to a streaming caller (stream=1) or reports
	// progress to an MCP client; it reports whether the event was
	// delivered. delivered marks an event that carries a successful leg's
	// results (the charging rule of a stream counts them).
	Emit(event string, data any, delivered bool) bool
}

// LegRequest is one call of a registry operation: its key
// (platform/endpoint) and parameters as a caller would send them.
type LegRequest struct {
	Key    string
	Params map[string]string
}

// LegResult is a leg's outcome: the envelope it would have answered.
type LegResult struct {
	Key       string
	Platform  string
	Endpoint  string // public path (/v1/<key> when the registry does not know the key)
	RequestID string
	Status    int // HTTP status; 0 when it never ran (cancelled while waiting)
	Cached    bool
	// Data is the success envelope's data.
	Data json.RawMessage
	// Envelope is the whole envelope (success or error), as the leg's
	// direct call would have answered it.
	Envelope json.RawMessage
	// ErrorType is error.type of a failure.
	ErrorType string
	ServedBy  string // the answering route's public label
	Attempts  int
}

// OK reports a successful leg.
func (r LegResult) OK() bool { return r.Status == http.StatusOK && r.Data != nil }

// LegSummary is how a composite's answer shows a leg (the legs[] of spec
// 2.7's post-stats, plus the leg's request id and cache status).
type LegSummary struct {
	Platform  string `json:"platform"`
	Endpoint  string `json:"endpoint"`
	Status    *int   `json:"status"`
	OK        bool   `json:"ok"`
	Cached    bool   `json:"cached"`
	ServedBy  string `json:"served_by,omitempty"`
	Attempts  int    `json:"attempts"`
	Credits   int64  `json:"credits"`
	RequestID string `json:"request_id,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
}

// Summary is the leg as the composite's answer lists it. Legs cost
// nothing themselves: the composite charges once.
func (r LegResult) Summary() LegSummary {
	s := LegSummary{Platform: r.Platform, Endpoint: r.Endpoint, OK: r.OK(), Cached: r.Cached,
		ServedBy: r.ServedBy, Attempts: r.Attempts, RequestID: r.RequestID, ErrorType: r.ErrorType}
	if r.Status != 0 {
		status := r.Status
		s.Status = &status
	}
	return s
}

// Error is the leg's error envelope's error object, or nil on success.
func (r LegResult) Error() *LegError {
	if r.OK() {
		return nil
	}
	var env struct {
		Error *LegError `json:"error"`
	}
	if json.Unmarshal(r.Envelope, &env) != nil || env.Error == nil {
		return &LegError{Type: string(envelope.UpstreamError), Status: http.StatusBadGateway, Message: "The leg did not finish."}
	}
	return env.Error
}

// LegError is a failed leg's error object.
type LegError struct {
	Type    string         `json:"type"`
	Message string         `json:"message"`
	Status  int            `json:"status"`
	Details map[string]any `json:"details,omitempty"`
}

// legs is the LegRunner of one composite call.
type legs struct {
	p      *Pipeline
	parent *exchange
	call   *Call
	emit   func(event string, data any, delivered bool) bool

	// workers are the concurrent leg runs allowed now: the composite's own
	// slot, plus one per extra in-flight slot taken for the key.
	workers chan struct{}
	mu      sync.Mutex
	extra   []string // slot ids of the extra slots held
	full    bool     // the key refused another slot: stop asking
	serial  int
	// progress, when set, hears of every leg started (total) and finished
	// (done): a web job reports it to its pollers.
	progress    func(done, total int)
	done, total int
}

// step counts a leg started or finished for progress.
func (l *legs) step(started bool) {
	if l.progress == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if started {
		l.total++
	} else {
		l.done++
	}
	l.progress(l.done, l.total)
}

func (p *Pipeline) newLegs(x *exchange, c *Call) *legs {
	l := &legs{p: p, parent: x, call: c, emit: c.events, workers: make(chan struct{}, p.cfg.LimitRules.Concurrency)}
	l.workers <- struct{}{} // the composite's own slot
	return l
}

func (l *legs) Available(key string) bool {
	e, ok := l.p.cfg.Registry.Endpoint(key)
	if !ok || e.Kind != registry.Data {
		return false
	}
	if _, composite := l.p.cfg.Composites[key]; composite {
		return false // a composite is never a leg
	}
	return l.p.Available(e)
}

func (l *legs) Emit(event string, data any, delivered bool) bool {
	if l.emit == nil {
		return false
	}
	return l.emit(event, data, delivered)
}

// acquire waits for a worker: a free one, else one more in-flight slot of
// the key (while it has any free), else the next leg to finish.
func (l *legs) acquire(ctx context.Context) bool {
	select {
	case <-l.workers:
		return true
	default:
	}
	if l.grow(ctx) {
		return true
	}
	select {
	case <-l.workers:
		return true
	case <-ctx.Done():
		return false
	}
}

// grow takes one more in-flight slot for the key, under a lease of its
// own, so a fan-out never holds more slots than the key had free.
func (l *legs) grow(ctx context.Context) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	rules := l.p.cfg.LimitRules
	if l.full || len(l.extra)+1 >= rules.Concurrency {
		return false
	}
	l.serial++
	id := l.call.RequestID + ".leg" + strconv.Itoa(l.serial)
	if l.p.cfg.Limits != nil && l.call.Principal.KeyID != "" {
		a, err := l.p.cfg.Limits.TakeSlot(ctx, l.call.Principal.LimitsID(), id, l.p.cfg.Now(), rules)
		if err != nil || a.Refused != "" {
			// Refused, contended or unreachable: run on the slots held.
			l.full = true
			if err != nil && ctx.Err() == nil {
				l.extra = append(l.extra, id) // it may have landed: release it too
			}
			return false
		}
	}
	l.extra = append(l.extra, id)
	return true
}

func (l *legs) release() { l.workers <- struct{}{} }

// close frees the extra slots; their leases free any that this misses.
func (l *legs) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.p.cfg.Limits == nil || l.call.Principal.KeyID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.parent.r.Context()), BillingTimeout)
	defer cancel()
	if err := l.p.cfg.Limits.ReleaseSlots(ctx, l.call.Principal.LimitsID(), l.extra, l.p.cfg.Now(), l.p.cfg.LimitRules); err != nil {
		l.p.cfg.Logger.Warn("leg slot release failed; their leases will free them", "request_id", l.call.RequestID, "error", err.Error())
	}
	l.extra = nil
}

func (l *legs) RunAll(ctx context.Context, reqs []LegRequest, done func(int, LegResult)) []LegResult {
	out := make([]LegResult, len(reqs))
	var wg sync.WaitGroup
	var doneMu sync.Mutex
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = l.Run(ctx, req)
			if done != nil {
				doneMu.Lock()
				defer doneMu.Unlock()
				done(i, out[i])
			}
		}()
	}
	wg.Wait()
	return out
}

func (l *legs) Run(ctx context.Context, req LegRequest) LegResult {
	r := LegResult{Key: req.Key, Endpoint: "/v1/" + req.Key}
	if e, ok := l.p.cfg.Registry.Endpoint(req.Key); ok {
		r.Platform, r.Endpoint = e.Platform, e.Path()
	}
	l.step(true)
	defer l.step(false)
	if !l.acquire(ctx) {
		// The call ended before this leg ran.
		r.Envelope = failureJSON(envelope.New(envelope.UpstreamTimeout, http.StatusGatewayTimeout,
			"The call ended before this leg ran.", map[string]any{"reason": "not_run"}), l.parent.docBase)
		r.ErrorType = string(envelope.UpstreamTimeout)
		return r
	}
	defer l.release()
	return l.p.runLeg(ctx, l.parent, l.call, req, r)
}

// runLeg serves one leg as the GET it stands for, with the composite's
// principal, through validation and dispatch (unbilled).
func (p *Pipeline) runLeg(ctx context.Context, parent *exchange, pc *Call, req LegRequest, r LegResult) LegResult {
	q := url.Values{}
	for k, v := range req.Params {
		q.Set(k, v)
	}
	if e, ok := p.cfg.Registry.Endpoint(req.Key); ok && e.AI && q.Get("judgments") == "" {
		// A leg is data for the composite, not an answer: it asks for no
		// labels (and so shares the cache entry of judgments=off).
		q.Set("judgments", "off")
	}
	httpReq, err := innerGet(ctx, parent.r, r.Endpoint+"?"+q.Encode())
	if err != nil {
		r.Envelope, r.ErrorType = failureJSON(envelope.Internal(), parent.docBase), string(envelope.InternalError)
		r.Status = http.StatusInternalServerError
		return r
	}
	a := p.Run(httpReq, RunAs{leg: pc, Parent: pc.RequestID})
	r.Status, r.RequestID = a.Status, a.RequestID
	r.Envelope = bytes.TrimSpace(a.Body)
	r.ErrorType = string(a.ErrorType)
	r.Cached = a.Header.Get("x-cache") == cacheHit
	r.Attempts = a.Upstream.Attempts
	if p.cfg.Upstream != nil && a.Upstream.ServedBy != "" {
		for _, pl := range p.cfg.Upstream.PublicLegs(req.Key, a.Upstream, r.Endpoint, 0) {
			if pl.OK {
				r.ServedBy = pl.ServedBy
			}
		}
	}
	if r.Status == http.StatusOK {
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(r.Envelope, &env) == nil && len(env.Data) > 0 && string(env.Data) != "null" {
			r.Data = env.Data
		}
	}
	return r
}

// serveLeg is serveAPI for a leg: the composite's call was authenticated
// and admitted, so a leg is resolved, validated and dispatched.
func (p *Pipeline) serveLeg(x *exchange, parent *Call) {
	res, rerr := p.cfg.Registry.Resolve(x.r.URL.EscapedPath())
	if rerr != nil {
		x.fail(rerr)
		return
	}
	e := res.Endpoint
	x.endpoint = e
	if _, composite := p.cfg.Composites[e.Key()]; composite || e.Kind != registry.Data {
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
			e.Key()+" cannot be a leg.", map[string]any{"reason": "not_a_leg"}))
		return
	}
	query, qerr := params.Parse(x.r.URL.RawQuery)
	if qerr != nil {
		x.fail(qerr)
		return
	}
	validated, verr := params.Validate(e, query, res.PathParams)
	if verr != nil {
		x.fail(verr)
		return
	}
	c := &Call{RequestID: x.requestID, Endpoint: e, Params: validated, Principal: parent.Principal, Request: x.r, parent: parent.RequestID}
	x.call = c
	p.dispatch(x, c)
}

// compositeHandler serves a composite with its legs.
func (p *Pipeline) compositeHandler(comp Composite) Handler {
	return func(ctx context.Context, c *Call) (any, *envelope.Error) {
		l := c.legs
		if l == nil {
			return nil, envelope.Internal()
		}
		defer l.close()
		return comp.Serve(ctx, c, l)
	}
}
