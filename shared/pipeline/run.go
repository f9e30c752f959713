package pipeline

import (
	"bytes"
	"context"
	"net/http"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Run is the one way to run a request on someone's behalf: a batch item,
// a composite's leg, a monitor's run, a web job's call, an MCP tool call.
// r is the request as a caller would send it (method, path under /v1 and
// query, headers, host and client address; its context bounds the run),
// and as says who it runs as. The request takes the same path as one that
// reached ServeHTTP (authentication and admission, validation, cache,
// fair use, billing, usage event, log line), as as describes, with a
// request id of its own (a web job's: the one its acceptance was given),
// and Run returns its answer: the envelope and its status.
//
// Features that run requests do it only through Run: they build the
// request, call Run and read the envelope.
func (p *Pipeline) Run(r *http.Request, as RunAs) Answer {
	if as.Job != nil {
		return p.runJob(r, as)
	}
	var rec *answerRecorder
	w := as.Live
	if w == nil {
		rec = &answerRecorder{header: http.Header{}}
		w = rec
	}
	var ran *exchange
	p.serve(w, r, func(x *exchange) {
		ran, x.parentID, x.runAs, x.gather = x, as.Parent, as.KeyHash, as.gather
		if as.leg != nil {
			p.serveLeg(x, as.leg)
			return
		}
		p.serveAPI(x, x.r.URL.EscapedPath(), false)
	})
	a := Answer{Status: ran.status(), Header: w.Header(), RequestID: ran.requestID, ErrorType: ran.errType}
	if rec != nil {
		a.Status, a.Body = rec.status, rec.body.Bytes()
	}
	if ran.call != nil {
		a.Upstream = ran.call.Upstream
	}
	return a
}

// RunAs is who a request given to Run runs as. The zero value runs it with
// the key the request presents itself (its x-api-key or Authorization
// header): a batch item, an MCP tool call.
type RunAs struct {
	// KeyHash runs the request with an account's key known by its stored
	// hash, under the same rules as a presented key (a monitor's run).
	KeyHash string
	// Job runs a call accepted earlier with async=1 (a web job): as the
	// principal that accepted it, under the acceptance's request id, its
	// cost reserved already; Run neither admits nor reserves it again.
	Job *JobCall
	// Parent is what the request runs within, for its log line
	// (parent_request_id): a monitor's id, a job's id, a composite's
	// request id.
	Parent string
	// Live, when set, receives the answer as it is written (an event
	// stream's events as they happen: an MCP tool call's progress), and
	// the Answer carries no Body.
	Live http.ResponseWriter

	// leg is the composite call a leg belongs to: the leg runs with its
	// principal, validated and dispatched, unbilled (legs.go).
	leg *Call
	// gather is a batch item's place in its batch's gathered store
	// writes (gather.go).
	gather *itemGather
}

// Answer is what Run's request answered.
type Answer struct {
	Status int
	Header http.Header
	// Body is the answer as written: the envelope (success or error), or
	// the document of an endpoint that answers one.
	Body      []byte
	RequestID string
	// ErrorType is error.type of a failure.
	ErrorType envelope.Type
	// Upstream is how the call reached its source, when it ran.
	Upstream upstream.Trace
}

// answerRecorder keeps a Run's answer.
type answerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *answerRecorder) Header() http.Header { return r.header }
func (r *answerRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *answerRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// JobCall is a call accepted earlier with async=1, as Run runs it
// (RunAs.Job): a web job's call.
type JobCall struct {
	// Key is the operation's endpoint key (platform/endpoint); the
	// request's query holds its parameters.
	Key string
	// RequestID is the id the call was accepted (and reserved) under.
	RequestID string
	// Principal is who accepted it.
	Principal auth.Principal
	// Hold runs once the parameters are valid, before anything else: a
	// refusal ends the call with it (the reservation has lapsed).
	Hold func(context.Context) *envelope.Error
	// Progress, when set, hears of a composite's legs started (total) and
	// finished (done).
	Progress func(done, total int)
}

// runJob runs a JobCall as dispatch runs an accepted paid call (its
// handler with its legs, AI-assist and fair use), without admitting or
// reserving it again. Its answer is the status and envelope the call
// would have answered; a failure's credits_used is 0 (its reservation is
// refunded by the job's billing). It writes a log line, and no usage
// event (its acceptance had one).
func (p *Pipeline) runJob(req *http.Request, as RunAs) Answer {
	j := as.Job
	start := p.cfg.Now()
	rec := &answerRecorder{header: http.Header{}}
	x := &exchange{w: &statusWriter{ResponseWriter: rec}, r: req, requestID: j.RequestID, docBase: p.ErrorsURL(req), parentID: as.Parent}
	defer func() {
		p.land(x)
		p.logRequest(x, start)
	}()
	answer := func(status int, body []byte) Answer {
		a := Answer{Status: status, Header: rec.header, Body: body, RequestID: j.RequestID, ErrorType: x.errType}
		if x.call != nil {
			a.Upstream = x.call.Upstream
		}
		return a
	}
	fail := func(e *envelope.Error) Answer {
		x.errType = e.Type
		x.w.WriteHeader(e.Status)
		body, _ := envelope.Marshal(envelope.NewFailure(e, j.RequestID, x.docBase))
		return answer(e.Status, body)
	}
	e, ok := p.cfg.Registry.Endpoint(j.Key)
	if !ok {
		return fail(envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "The job's operation no longer exists.", nil))
	}
	x.endpoint = e
	h, ok := p.cfg.Handlers[e.Key()]
	if !ok || e.Retired() {
		return fail(notAvailable(e, false))
	}
	validated, verr := params.Validate(e, req.URL.Query(), nil)
	if verr != nil {
		return fail(verr)
	}
	if j.Hold != nil {
		if refusal := j.Hold(req.Context()); refusal != nil {
			return fail(refusal)
		}
	}
	c := &Call{RequestID: j.RequestID, Endpoint: e, Params: validated, Request: req, Principal: j.Principal}
	x.call = c
	fu, refusal := p.checkFairUse(x, c)
	if refusal != nil {
		return fail(refusal)
	}
	if _, composite := p.cfg.Composites[e.Key()]; composite {
		c.legs = p.newLegs(x, c)
		c.legs.progress = j.Progress
	}
	data, herr := p.run(h, x, c)
	if herr == nil {
		data, _ = p.assist(x, c, data)
	}
	p.countFairUse(x, c, fu)
	if herr != nil {
		return fail(herr)
	}
	body, err := envelope.Marshal(p.success(x, c, data, e.Cost, nil))
	if err != nil {
		return fail(envelope.Internal())
	}
	x.w.WriteHeader(http.StatusOK)
	return answer(http.StatusOK, body)
}
