package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/store"
)

// jobLease is how long a worker holds a running job before another
// delivery may take it over: longer than the call (RequestTimeout) and its
// billing writes, so only a dead worker's job is taken over.
const jobLease = RequestTimeout + 2*billingTimeout + time.Minute

// ErrJobBusy: another worker runs the job under a live lease. The message
// is delivered again later, by when the job has finished (and the delivery
// only checks its billing) or its worker is known dead (and it is taken over).
var ErrJobBusy = errors.New("pipeline: the job is running in another worker")

// jobAccepted is the data of the 202 that accepts a web job.
type jobAccepted struct {
	JobID           string    `json:"job_id"`
	State           string    `json:"state"`
	URL             string    `json:"url"`
	CreditsReserved int64     `json:"credits_reserved"`
	CreatedAt       time.Time `json:"created_at"`
	ExpiresAt       time.Time `json:"expires_at"`
}

// jobView is a job as GET /v1/web/jobs/{id} shows it.
type jobView struct {
	ID              string          `json:"id"`
	State           string          `json:"state"`
	Progress        jobProgress     `json:"progress"`
	Operation       jobOperation    `json:"operation"`
	CreditsReserved int64           `json:"credits_reserved"`
	Attempts        int             `json:"attempts"`
	RequestID       string          `json:"request_id"`
	CreatedAt       time.Time       `json:"created_at"`
	StartedAt       *time.Time      `json:"started_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	ExpiresAt       time.Time       `json:"expires_at"`
	Status          *int            `json:"status"`
	Result          json.RawMessage `json:"result"`
}

type jobProgress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

type jobOperation struct {
	Platform string            `json:"platform"`
	Endpoint string            `json:"endpoint"`
	Path     string            `json:"path"`
	Params   map[string]string `json:"params"`
}

func viewJob(j store.Job) jobView {
	v := jobView{
		ID: j.ID, State: j.State, Progress: jobProgress{j.ProgressDone, j.ProgressTotal},
		Operation:       jobOperation{Platform: j.Platform, Endpoint: j.Endpoint, Path: "/v1/" + j.Platform + "/" + j.Endpoint, Params: j.Params},
		CreditsReserved: j.Cost, Attempts: j.Attempts, RequestID: j.RequestID, CreatedAt: j.CreatedAt.UTC(),
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, ExpiresAt: j.ExpiresAt.UTC(), Result: jsonOrNull(j.Result),
	}
	if v.Operation.Params == nil {
		v.Operation.Params = map[string]string{}
	}
	if j.Status != 0 {
		v.Status = &j.Status
	}
	return v
}

// jobHandler serves GET /v1/web/jobs/{id} to the account that started it.
func (p *Pipeline) jobHandler(ctx context.Context, c *Call) (any, *envelope.Error) {
	j, err := p.cfg.Jobs.Job(ctx, c.Principal.AccountID, c.Params.Values["id"], p.cfg.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, envelope.New(envelope.ResourceNotFound, http.StatusNotFound,
			"No job with this id for this account: it may have expired (jobs are kept 7 days).", nil)
	case err != nil:
		return nil, p.storeFault(c, "read job", err)
	}
	return viewJob(j), nil
}

// acceptJob answers a call made with async=1: its cost is reserved now,
// the job is stored and queued, and the caller gets 202 with the job's
// id and URL. The worker runs it (RunJob) and settles or refunds it.
func (p *Pipeline) acceptJob(x *exchange, c *Call) {
	if p.cfg.Jobs == nil || p.cfg.JobQueue == nil {
		x.fail(envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented,
			"Web jobs (async=1) are not available in this deployment; call without async.", map[string]any{"field": "async"}))
		return
	}
	charge, remaining, ok := p.reserveSlotted(x, c)
	if !ok {
		return
	}
	now := p.cfg.Now().UTC()
	e := c.Endpoint
	job := store.Job{
		ID: store.NewJobID(), AccountID: c.Principal.AccountID, KeyID: c.Principal.KeyID, KeyPrefix: c.Principal.KeyPrefix,
		KeyHash: c.Principal.KeyHash, RequestID: c.RequestID, Platform: e.Platform, Endpoint: e.ID, Params: c.Params.Values,
		Cost: e.Cost, State: store.JobQueued, CreatedAt: now, ExpiresAt: now.Add(store.JobTTL),
	}
	_, err := billingOp(x, func(ctx context.Context) (struct{}, error) {
		if err := p.cfg.Jobs.CreateJob(ctx, job); err != nil {
			return struct{}{}, err
		}
		if err := p.cfg.JobQueue.EnqueueJob(ctx, monitors.JobMessage{AccountID: job.AccountID, JobID: job.ID}); err != nil {
			// Never run: end it failed, so a poll does not wait forever.
			failure, _ := envelope.Marshal(envelope.NewFailure(envelope.Internal(), c.RequestID, x.docBase))
			if _, ferr := p.cfg.Jobs.FinishJob(ctx, job.AccountID, job.ID, store.JobFailed, http.StatusInternalServerError, failure, now); ferr != nil {
				p.cfg.Logger.Error("unqueued job not ended", "request_id", x.requestID, "job_id", job.ID, "error", ferr.Error())
			}
			return struct{}{}, err
		}
		return struct{}{}, nil
	})
	if err != nil {
		p.cfg.Logger.Error("job not queued", "request_id", x.requestID, "error", err.Error())
		failure := envelope.Internal()
		p.refund(x, *charge, failure)
		x.fail(failure)
		return
	}
	x.served = true
	s := p.success(x, c, jobAccepted{
		JobID: job.ID, State: job.State, URL: "/v1/web/jobs/" + job.ID, CreditsReserved: job.Cost, CreatedAt: now, ExpiresAt: job.ExpiresAt,
	}, 0, remaining)
	s.CreditsUsed = nil // reserved, not yet charged: the job's end settles or refunds it
	body, _ := envelope.Marshal(s)
	x.w.Header().Set("Location", "/v1/web/jobs/"+job.ID)
	envelope.WriteJSON(x.w, http.StatusAccepted, x.requestID, nil, remaining, body)
}

// RunJob runs a queued web job once: the first delivery (or the one that
// takes over from a worker that died) runs the call, stores its envelope
// and then settles or refunds the reservation; a later delivery of a
// finished job only makes sure that billing landed. The outcome is stored
// before the money moves, so a retry never runs a finished job again, and
// the store's settle and refund are idempotent, so none charges twice.
func (p *Pipeline) RunJob(ctx context.Context, msg monitors.JobMessage) error {
	if p.cfg.Jobs == nil {
		return errors.New("pipeline: web jobs are not configured")
	}
	now := p.cfg.Now().UTC()
	job, owned, err := p.cfg.Jobs.StartJob(ctx, msg.AccountID, msg.JobID, now, now.Add(jobLease))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil // expired or never stored: nothing left to do
	case err != nil:
		return err
	case !owned && (job.State == store.JobSucceeded || job.State == store.JobFailed):
		if job.Billed {
			return nil
		}
		return p.billJob(ctx, job)
	case !owned:
		return ErrJobBusy
	}
	status, result := p.jobCall(ctx, job)
	state := store.JobFailed
	if status == http.StatusOK {
		state = store.JobSucceeded
	}
	stored, err := p.cfg.Jobs.FinishJob(context.WithoutCancel(ctx), job.AccountID, job.ID, state, status, result, p.cfg.Now().UTC())
	if err != nil {
		return err
	}
	return p.billJob(context.WithoutCancel(ctx), stored)
}

// billJob settles a succeeded job's reservation or refunds a failed one's,
// and records that it landed.
func (p *Pipeline) billJob(ctx context.Context, j store.Job) error {
	var replaced []byte
	if j.State == store.JobSucceeded {
		err := p.cfg.Store.Settle(ctx, j.AccountID, j.RequestID)
		switch {
		case errors.Is(err, store.ErrRefunded):
			// The sweep refunded it first (the job outlived its
			// reservation's lease): the answer was free; say so.
			replaced = uncharged(j.Result)
		case errors.Is(err, store.ErrNotFound):
			p.cfg.Logger.Error("succeeded job has no reservation", "job_id", j.ID, "request_id", j.RequestID)
		case err != nil:
			return err
		}
	} else {
		_, err := p.cfg.Store.Refund(ctx, j.AccountID, j.RequestID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case errors.Is(err, store.ErrSettled):
			p.cfg.Logger.Error("failed job's reservation was settled", "job_id", j.ID, "request_id", j.RequestID)
		case err != nil:
			return err
		}
	}
	return p.cfg.Jobs.MarkJobBilled(ctx, j.AccountID, j.ID, replaced)
}

// uncharged rewrites a success envelope as charging nothing.
func uncharged(result []byte) []byte {
	var env map[string]json.RawMessage
	if json.Unmarshal(result, &env) != nil {
		return nil
	}
	env["credits_used"] = json.RawMessage("0")
	delete(env, "credits_remaining")
	b, err := json.Marshal(env)
	if err != nil {
		return nil
	}
	return b
}

// jobCall runs the job's call as dispatch runs an accepted paid call (its
// handler with its legs, AI-assist and fair use), without reserving again:
// the accepting request reserved it. It returns the status and envelope
// the call would have answered; a failure's credits_used is 0, since
// billJob refunds it.
func (p *Pipeline) jobCall(ctx context.Context, j store.Job) (int, []byte) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	start := p.cfg.Now()
	q := url.Values{}
	for name, v := range j.Params {
		q.Set(name, v)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/v1/"+j.Platform+"/"+j.Endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return p.jobFailure(j, "", envelope.Internal())
	}
	req.RemoteAddr = "job"
	rec := &itemRecorder{header: http.Header{}}
	x := &exchange{w: &statusWriter{ResponseWriter: rec}, r: req, requestID: j.RequestID, docBase: p.errorsURL(req), parentID: j.ID}
	defer func() {
		p.land(x)
		p.logRequest(x, start)
	}()
	fail := func(e *envelope.Error) (int, []byte) {
		x.errType = e.Type
		x.w.WriteHeader(e.Status)
		return p.jobFailure(j, x.docBase, e)
	}
	e, ok := p.cfg.Registry.Endpoint(j.Platform + "/" + j.Endpoint)
	if !ok {
		return fail(envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "The job's operation no longer exists.", nil))
	}
	x.endpoint = e
	h, ok := p.cfg.Handlers[e.Key()]
	if !ok || e.Retired() {
		return fail(notAvailable(e, false))
	}
	query := params.Query{}
	for name, v := range j.Params {
		query[name] = []string{v}
	}
	validated, verr := params.Validate(e, query, nil)
	if verr != nil {
		return fail(verr)
	}
	c := &Call{RequestID: j.RequestID, Endpoint: e, Params: validated, Request: req,
		Principal: auth.Principal{AccountID: j.AccountID, KeyID: j.KeyID, KeyPrefix: j.KeyPrefix, KeyHash: j.KeyHash}}
	x.call = c
	fu, refusal := p.checkFairUse(x, c)
	if refusal != nil {
		return fail(refusal)
	}
	if _, composite := p.cfg.Composites[e.Key()]; composite {
		c.legs = p.newLegs(x, c)
		c.legs.progress = func(done, total int) {
			if err := p.cfg.Jobs.JobProgress(context.WithoutCancel(ctx), j.AccountID, j.ID, done, total); err != nil {
				p.cfg.Logger.Warn("job progress not written", "job_id", j.ID, "error", err.Error())
			}
		}
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
	return http.StatusOK, body
}

// jobFailure is the error envelope a job's call answered.
func (p *Pipeline) jobFailure(j store.Job, docBase string, e *envelope.Error) (int, []byte) {
	body, _ := envelope.Marshal(envelope.NewFailure(e, j.RequestID, docBase))
	return e.Status, body
}
