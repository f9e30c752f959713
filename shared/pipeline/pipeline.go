// Package pipeline is Meridian's request pipeline: one http.Handler that
// every Lambda function and the local server run. It resolves the path,
// authenticates and admits, validates and dispatches, bills, caches and
// replays, and writes every answer in the envelopes of spec 2.1 and 2.2.
//
// It holds the request path only. Features that run requests on someone's
// behalf (batch items and composite legs inside it; monitors, web jobs
// and MCP tool calls outside it) do so through Run, the one entry point.
// Features with endpoints of their own plug in as a Feature (given the
// pipeline as a Runner) or, outside /v1, as a Surface (the console,
// /mcp); the service's own free endpoints come from shared/service.
package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/assist"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/openapi"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/service"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/usage"
)

// Call is a resolved, authenticated and validated request.
type Call struct {
	RequestID string
	Endpoint  *registry.Endpoint
	Params    params.Result
	Principal auth.Principal
	// Sandbox is true for /sandbox calls: free and synthetic.
	Sandbox bool
	Request *http.Request
	// CreditsRemaining may be set by a handler that learns the balance.
	CreditsRemaining *int64
	// Upstream is how the handler reached the source: the route that
	// answered and every attempt, retries included. Fair use counts the
	// attempts; the request's log line records the trace.
	Upstream upstream.Trace
	// upstreamRan: the upstream layer served the call, so Upstream.Attempts
	// is exact (0 when every route was resting); other handlers count as one.
	upstreamRan bool
	// parent is the request id of the composite this call is a leg of.
	parent string
	// legs runs a composite's legs; events streams them (stream=1) or
	// reports MCP progress.
	legs   *legs
	events func(event string, data any, delivered bool) bool
	// model is what AI-assist's model calls cost, when it ran.
	model *usage.Model
	// lookup is the response cache lookup started with authentication.
	lookup *cacheLookup
	// slot waits for the in-flight slot taken after an Idempotency-Key
	// claim (nil: the slot came with admission).
	slot func() *envelope.Error
	// effect leaves work the call's answer implies for before the answer
	// is sent (exchange.effect).
	effect func(func(context.Context))
}

// Handler serves one endpoint after the pipeline has admitted the call.
// It returns the data object of the success envelope, or a typed error.
type Handler func(ctx context.Context, c *Call) (any, *envelope.Error)

// Config wires a pipeline.
type Config struct {
	Registry *registry.Registry
	// Family is the function this pipeline runs in; requests that the route
	// table gives to another family are refused. Empty serves all families.
	Family registry.Family
	Keys   auth.KeySource
	// Store holds accounts, keys, the wallet and the ledger. With a store,
	// paid calls are billed and the credits endpoints are served.
	Store store.Store
	// Cache is the response cache; nil caches nothing.
	Cache store.Cache
	// Idempotency keeps Idempotency-Key records; nil ignores the header.
	Idempotency store.Idempotency
	// Limits admits requests per key (spec 8) under LimitRules (the spec's
	// when zero); nil admits everything.
	Limits     store.Limits
	LimitRules store.LimitRules
	// FairUse counts metered calls against 30-day ceilings: the
	// registry's, overridden per endpoint key by FairUseLimits.
	FairUse       store.FairUse
	FairUseLimits map[string]int64
	// Throttle refuses clients that keep presenting invalid keys.
	Throttle *auth.Throttle
	// Surfaces serve paths of their own outside /v1 (the console and the
	// operator API, /mcp).
	Surfaces []Surface
	// DataSchemas publishes each data endpoint's data schema (OpenAPI).
	DataSchemas openapi.DataSchemas
	// Contact is the OpenAPI document's info.contact (nil: the default).
	Contact *openapi.Contact
	// Outcomes serves /v1/status (the worker writes it from usage events).
	Outcomes store.Outcomes
	// Reference serves the API reference page (/docs, its files); nil:
	// this function does not serve it (shared/apidocs is linked only into
	// the mains that do).
	Reference Reference
	// Fills are the cache's fill markers, which collapse identical
	// requests across processes (nil: within this process only), with
	// their lease and the waiters' poll (0: DefaultFillLease and
	// DefaultFillPoll).
	Fills     store.Fills
	FillLease time.Duration
	FillPoll  time.Duration
	// Canary holds the canary's runs: /v1/status shows each platform's
	// part of the last one (nil: no canary column).
	Canary store.CanaryLog
	// Events takes every request's usage event and the billing
	// reconciliations the request path could not write; nil emits nothing.
	Events usage.Sink
	// ErrorsURL is the errors reference that doc_url anchors into. Empty
	// derives {proto}://{host}/docs/errors from the request.
	ErrorsURL string
	Logger    *slog.Logger
	// Handlers serve endpoints by key (platform/id). A data endpoint with no
	// handler has no eligible route and answers 501 ENDPOINT_NOT_AVAILABLE.
	Handlers map[string]Handler
	// Upstream serves every data endpoint it has an eligible route for
	// (unless Handlers already has one).
	Upstream *upstream.Runner
	// Composites are operations built from the registry's operations, by
	// endpoint key; each is available when one of its legs is.
	Composites map[string]Composite
	// StreamKeepAlive is how often a quiet event stream gets a comment
	// line (default 15 s).
	StreamKeepAlive time.Duration
	// Assist applies AI-assist (spec 4.5) to the answers of AI endpoints;
	// nil leaves them as their source gave them (tests). An Assistant
	// without a model says labels are off.
	Assist *assist.Assistant
	// ModelFairUse is the 30-day ceiling of model calls per account
	// (ModelFairUseKey); 0 meters nothing.
	ModelFairUse int64
	// URLPolicy, when set, refuses URL-typed parameters that lead to
	// non-public addresses (422) before any fetch or charge.
	URLPolicy *upstream.URLPolicy
	// Jobs keeps web jobs; with a JobQueue, endpoints marked Async accept
	// async=1 (202) and queue the job for the worker (shared/jobs runs it).
	Jobs     store.Jobs
	JobQueue queue.JobQueue
	// Features serve endpoints of their own over the pipeline (monitors,
	// web jobs' state), given it as their Runner.
	Features []Feature
	Now      func() time.Time
}

// Pipeline is the http.Handler built from a Config.
type Pipeline struct {
	cfg Config
	// gate authenticates and admits in one store step, when the key
	// source is the store and the store keeps the limits too.
	gate        store.Gate
	wallets     walletQueue
	routes      *registry.RouteTable
	sandboxData sandboxMemo
	// svc serves the service's own endpoints (shared/service).
	svc *service.Service
	// cacheInProcess: cache lookups are made in line (store.InProcess).
	cacheInProcess bool
	// flights are this process's cache fills in flight (collapse.go), with
	// the fill marker's lease and the poll of another process's fill.
	flights             flights
	fillLease, fillPoll time.Duration
}

// Reference is a page the pipeline serves before routing: the API
// reference (shared/apidocs.Page).
type Reference interface {
	Serves(method, path string) bool
	ServeHTTP(w http.ResponseWriter, r *http.Request)
}

// New builds a pipeline; built-in handlers (the API and platform indexes)
// are added to cfg.Handlers unless already set.
func New(cfg Config) *Pipeline {
	switch {
	case cfg.Keys != nil:
	case cfg.Store != nil:
		cfg.Keys = auth.StoreKeys{Store: cfg.Store}
	default:
		cfg.Keys = auth.NoKeys{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StreamKeepAlive <= 0 {
		cfg.StreamKeepAlive = 15 * time.Second
	}
	r, d := &cfg.LimitRules, store.DefaultLimits
	if r.Rate <= 0 {
		r.Rate = d.Rate
	}
	if r.Window < time.Second {
		r.Window = d.Window
	}
	if r.Concurrency <= 0 {
		r.Concurrency = d.Concurrency
	}
	if r.Lease <= RequestTimeout {
		r.Lease = d.Lease
	}
	handlers := map[string]Handler{}
	if recalls, ok := cfg.Store.(store.Recalls); ok {
		handlers["assist/recall"] = recallHandler(recalls, cfg.Now)
	}
	for k, h := range cfg.Handlers {
		handlers[k] = h
	}
	cfg.Handlers = handlers
	p := &Pipeline{cfg: cfg, routes: registry.NewRouteTable(cfg.Registry.Routes()), cacheInProcess: store.IsInProcess(cfg.Cache),
		fillLease: cfg.FillLease, fillPoll: cfg.FillPoll}
	if p.fillLease <= 0 {
		p.fillLease = DefaultFillLease
	}
	if p.fillPoll <= 0 {
		p.fillPoll = DefaultFillPoll
	}
	if g, ok := cfg.Store.(store.Gate); ok && cfg.Limits != nil && any(cfg.Limits) == any(cfg.Store) {
		if _, storeKeys := cfg.Keys.(auth.StoreKeys); storeKeys {
			p.gate = g
		}
	}
	// The service's own endpoints (discovery, indexes, credits, status,
	// usage reports), told what this deployment serves.
	p.svc = service.New(service.Config{
		Registry: cfg.Registry, Store: cfg.Store, Outcomes: cfg.Outcomes, Canary: cfg.Canary, Upstream: cfg.Upstream,
		DataSchemas: cfg.DataSchemas, Contact: cfg.Contact, ErrorsURL: cfg.ErrorsURL, Available: p.Available,
		Logger: cfg.Logger, Now: cfg.Now,
	})
	// Built-ins that need the pipeline itself, unless a test replaced them.
	builtins := map[string]Handler{}
	for k, h := range p.svc.Handlers() {
		builtins[k] = serviceHandler(h)
	}
	builtins["batch"] = p.batch
	for _, f := range cfg.Features {
		for k, h := range f.Handlers(p) {
			builtins[k] = h
		}
	}
	if cfg.Upstream != nil {
		for _, key := range cfg.Upstream.Endpoints() {
			if e, ok := cfg.Registry.Endpoint(key); ok && e.Kind == registry.Data {
				builtins[key] = p.upstreamHandler(key)
			}
		}
	}
	for k, h := range builtins {
		if _, set := handlers[k]; !set {
			handlers[k] = h
		}
	}
	// Composites last: they are available when one of their legs is.
	for k, comp := range cfg.Composites {
		if _, set := handlers[k]; set {
			continue
		}
		for _, leg := range comp.Legs {
			if _, ok := handlers[leg]; ok {
				handlers[k] = p.compositeHandler(comp)
				break
			}
		}
	}
	return p
}

// Available reports whether this deployment can serve e on /v1: whether
// the handler table has an entry for it (an eligible upstream route, a
// configured handler or a built-in); without one, dispatch answers 501.
// Every catalogue view asks this, so they agree with what calls get.
func (p *Pipeline) Available(e *registry.Endpoint) bool {
	_, ok := p.cfg.Handlers[e.Key()]
	return ok && !e.Retired()
}

// exchange is one request in flight: what the log line and the envelope need.
type exchange struct {
	w         *statusWriter
	r         *http.Request
	requestID string
	docBase   string
	endpoint  *registry.Endpoint
	errType   envelope.Type
	// misroutedTo names the family the route table gives a request that
	// reached another function (an infra mistake worth seeing in logs).
	misroutedTo registry.Family
	// replayOf names the original request an idempotent replay repeats.
	replayOf string
	// admitted: the request holds an in-flight slot to release.
	admitted bool
	// entered is the admission made with authentication (Pipeline.gate);
	// stale names what the slot's release should tidy (store.Admission).
	entered *store.Admission
	stale   []string
	// sandbox: a /sandbox call (not counted in /v1/status).
	sandbox bool
	// served: a data call reached its handler or the cache (status counts it).
	served bool
	// call is the validated call, once there is one.
	call *Call
	// lookup is the request's cache lookup, started beside its
	// authentication; the request's end ends a fill it leads (collapse.go).
	lookup *cacheLookup
	// billingStatus is error.details.billing_status of a paid call whose
	// billing the request path could not finish (reconciliation will).
	billingStatus string
	// parentID is what a request Run runs belongs to (RunAs.Parent).
	parentID string
	// runAs is the stored hash of the key a Run request runs with
	// (RunAs.KeyHash); gather is a batch item's gather (RunAs.gather).
	runAs  string
	gather *itemGather
	// streamed is a stream's final result envelope and its status: what an
	// Idempotency-Key keeps for replay, and what the usage event reports.
	streamed *streamOutcome
	// effects are the writes the answer implies, landed before it is sent
	// (effect, land).
	effects []func(context.Context)
}

// effect leaves fn, a write whose outcome the answer implies (a settle, a
// cache entry, an idempotent outcome, a slot's release), for land: it
// runs once the answer is known and lands before the answer's last byte
// leaves, so the caller's next request sees it. The answer does not
// depend on how it went: a write that fails is logged (or reconciled)
// by fn itself.
func (x *exchange) effect(fn func(context.Context)) { x.effects = append(x.effects, fn) }

// land runs the answer's effects side by side (they touch different
// records: one round trip for all) and returns when each has landed or
// given up within BillingTimeout, detached from a caller who has gone.
// Effects left after it (none, unless a stream lands early) wait for the
// next land.
func (p *Pipeline) land(x *exchange) {
	work := x.effects
	x.effects = nil
	run := func(fn func(context.Context)) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), BillingTimeout)
		defer cancel()
		fn(ctx)
	}
	if len(work) == 1 {
		run(work[0]) // no goroutine for the common single write
		return
	}
	var wg sync.WaitGroup
	for _, fn := range work {
		wg.Go(func() { run(fn) })
	}
	wg.Wait()
}

func (p *Pipeline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.serve(w, r, p.route)
}

// serve runs one request (or batch item) with its own request id, a
// recovered panic as INTERNAL_ERROR and one log line.
func (p *Pipeline) serve(w http.ResponseWriter, r *http.Request, handle func(*exchange)) {
	start := p.cfg.Now()
	x := &exchange{w: &statusWriter{ResponseWriter: w, holding: true}, r: r, requestID: envelope.NewRequestID()}
	x.docBase = p.ErrorsURL(r)
	w.Header().Set("X-Request-Id", x.requestID)
	defer func() {
		if v := recover(); v != nil {
			p.cfg.Logger.Error("panic", "request_id", x.requestID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !x.w.wrote {
				x.fail(envelope.Internal())
			}
		}
		// What the answer implies lands, then the answer leaves: a
		// client's next request sees its effects. Usage events and the
		// log line follow it (nothing a client reads back at once).
		p.land(x)
		p.endOwnFill(x)
		x.w.send()
		p.logRequest(x, start)
		p.emitUsage(x, p.cfg.Now().Sub(start))
	}()
	handle(x)
}

// route sends a request to the part of the pipeline that owns its path.
func (p *Pipeline) route(x *exchange) {
	path := x.r.URL.EscapedPath()
	owner := p.routes.Match(x.r.Method, path).Family
	if p.cfg.Family != "" && owner != p.cfg.Family {
		x.misroutedTo = owner
		x.fail(registry.PathNotFound(path))
		return
	}
	switch {
	case path == "/v1" || strings.HasPrefix(path, "/v1/"):
		p.serveAPI(x, path, false)
	case path == "/sandbox" || strings.HasPrefix(path, "/sandbox/"):
		p.serveAPI(x, "/v1"+strings.TrimPrefix(path, "/sandbox"), true)
	case path == "/docs/errors" && x.r.Method == http.MethodGet:
		serveErrorsReference(x.w)
	case path == "/docs/ai-labels" && x.r.Method == http.MethodGet:
		x.w.Header().Set("Content-Type", "text/html; charset=utf-8")
		x.w.WriteHeader(http.StatusOK)
		_, _ = x.w.Write([]byte(assist.DocsHTML()))
	case p.cfg.Reference != nil && p.cfg.Reference.Serves(x.r.Method, path):
		p.cfg.Reference.ServeHTTP(x.w, x.r)
	case (path == "/openapi.json" || path == "/openapi.yaml") && x.r.Method == http.MethodGet:
		p.serveOpenAPI(x, strings.HasSuffix(path, ".yaml"))
	default:
		if s := p.surface(path); s != nil {
			s.Serve(&Exchange{x: x, p: p})
			return
		}
		x.fail(registry.PathNotFound(path))
	}
}

// status is the answer's status: a stream's is its result's.
func (x *exchange) status() int {
	if x.streamed != nil {
		return x.streamed.status
	}
	return x.w.status
}

func (x *exchange) fail(e *envelope.Error) {
	x.errType = e.Type
	envelope.WriteError(x.w, e, x.requestID, x.docBase)
}

// ErrorsURL is the configured errors reference, or this deployment's own
// /docs/errors page as the caller reached it.
func (p *Pipeline) ErrorsURL(r *http.Request) string {
	if p.cfg.ErrorsURL != "" {
		return p.cfg.ErrorsURL
	}
	proto := envelope.ForwardedProto(r)
	if proto != "http" && proto != "https" {
		proto = r.URL.Scheme
	}
	if proto == "" {
		proto = "http"
	}
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	return envelope.ErrorsReference(proto, host)
}

func (p *Pipeline) logRequest(x *exchange, start time.Time) {
	// Typed attributes: a line per request is worth not boxing each value.
	attrs := make([]slog.Attr, 0, 16)
	attrs = append(attrs,
		slog.String("request_id", x.requestID),
		slog.String("method", auth.ForLog(x.r.Method, 16)),
		slog.String("path", auth.ForLog(x.r.URL.EscapedPath(), 256)), // never the query: it may carry a key sent by mistake
		slog.Int("status", x.status()),
		slog.Float64("duration_ms", float64(p.cfg.Now().Sub(start).Microseconds())/1000),
	)
	if p.cfg.Family != "" {
		attrs = append(attrs, slog.String("family", string(p.cfg.Family)))
	}
	if x.endpoint != nil {
		attrs = append(attrs, slog.String("endpoint", x.endpoint.Path()))
	}
	if x.errType != "" {
		attrs = append(attrs, slog.String("error_type", string(x.errType)))
	}
	if x.misroutedTo != "" {
		attrs = append(attrs, slog.String("misrouted_to", string(x.misroutedTo)))
	}
	if x.replayOf != "" {
		attrs = append(attrs, slog.String("replay_of", x.replayOf))
	}
	if x.parentID != "" {
		attrs = append(attrs, slog.String("parent_request_id", x.parentID))
	}
	if x.call != nil && x.call.Upstream.Attempts > 0 {
		// Which route answered and how (spec 2.7 legs), for debugging.
		u := x.call.Upstream
		attrs = append(attrs, slog.String("served_by", u.ServedBy), slog.Int("upstream_attempts", u.Attempts), slog.Any("legs", u.Legs))
	}
	if x.call != nil && x.call.model != nil {
		m := x.call.model
		attrs = append(attrs, slog.Int("model_calls", m.Calls), slog.Int64("model_input_tokens", m.InputTokens),
			slog.Int64("model_output_tokens", m.OutputTokens), slog.Any("model_legs", m.Legs))
	}
	p.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

// statusWriter remembers the status for the log line, and the body when
// an idempotent request's outcome is to be stored. While holding, it
// keeps the answer back (its status and body; the head's fields stay in
// the ResponseWriter's map) until send, so that the answer's effects land
// before any of it leaves. A flush (an event stream) sends what is held
// and ends the holding: a stream lands its effects before its last event.
type statusWriter struct {
	http.ResponseWriter
	status  int
	wrote   bool
	capture *bytes.Buffer
	holding bool
	held    *bytes.Buffer // from heldBuffers while holding a body
}

// heldBuffers keeps the buffers of held answers between requests.
var heldBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (s *statusWriter) WriteHeader(code int) {
	if s.wrote {
		return
	}
	s.status, s.wrote = code, true
	if !s.holding {
		s.ResponseWriter.WriteHeader(code)
	}
}

// Unwrap lets http.ResponseController reach the ResponseWriter.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// FlushError sends what is held, then flushes: a stream goes out as written.
func (s *statusWriter) FlushError() error {
	s.send()
	return http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	if s.capture != nil {
		s.capture.Write(b)
	}
	if s.holding {
		if s.held == nil {
			s.held = heldBuffers.Get().(*bytes.Buffer)
		}
		return s.held.Write(b)
	}
	return s.ResponseWriter.Write(b)
}

// send writes the held answer and stops holding.
func (s *statusWriter) send() {
	if !s.holding {
		return
	}
	s.holding = false
	if !s.wrote {
		return
	}
	s.ResponseWriter.WriteHeader(s.status)
	if s.held != nil {
		_, _ = s.ResponseWriter.Write(s.held.Bytes())
		s.held.Reset()
		heldBuffers.Put(s.held)
		s.held = nil
	}
}
