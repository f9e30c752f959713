package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
)

// jobLease is how long a worker holds a running job before another
// delivery may take it over: longer than the call (RequestTimeout) and its
// billing writes, so only a dead worker's job is taken over.
const jobLease = RequestTimeout + 2*billingTimeout + time.Minute

// MaxQueuedJobs caps an account's open web jobs (queued or running): an
// async=1 call beyond it is refused 429 RATE_LIMITED (details.reason
// job_queue_full) before anything is reserved, so one account's backlog
// cannot hold up every other account's jobs. A job holds its slot from
// its acceptance until it ends, or at most jobSlotLease.
const MaxQueuedJobs = 100

// JobQueueFullReason is details.reason of the 429 that refuses a job over
// MaxQueuedJobs; JobReservationExpiredReason is details.reason of a job
// that failed because its reservation was refunded before it could be
// charged (the job waited in the queue longer than the reservation's
// lease).
const (
	JobQueueFullReason          = "job_queue_full"
	JobReservationExpiredReason = "reservation_expired"
)

// jobQueueRetry is the retry-after of a refusal for a full job queue: about
// how long a job takes.
const jobQueueRetry = time.Minute

// jobSlotLease bounds how long a job counts against MaxQueuedJobs if its
// end never releases its slot (a message lost to the dead-letter queue): a
// job still queued after its reservation's lease finds it refunded and
// fails at once, and a started one ends within its lease.
const jobSlotLease = store.ReservationLease + jobLease

// jobHold is how long a started job holds its reservation
// (ExtendReservation): its run and billing (jobLease), then the same lease
// any reservation gets for its settle to land (store.ReservationLease).
const jobHold = jobLease + store.ReservationLease

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
	if store.JobFinished(j.State) && !j.Billed {
		// Its outcome is stored but its money has not moved: until it has,
		// the job reads as running, so no data shows that billing may yet
		// withhold (a success whose reservation was refunded first).
		v.State, v.FinishedAt, v.Result = store.JobRunning, nil, jsonOrNull(nil)
		return v
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
	now := p.cfg.Now().UTC()
	id := store.NewJobID()
	_, err := billingOp(x, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.cfg.Jobs.TakeJobSlot(ctx, c.Principal.AccountID, id, now, now.Add(jobSlotLease), MaxQueuedJobs)
	})
	switch {
	case errors.Is(err, store.ErrJobQueueFull):
		x.fail(rateLimited(JobQueueFullReason, jobQueueRetry, "This account has "+strconv.Itoa(MaxQueuedJobs)+
			" web jobs queued or running, the most it may; submit more as they finish."))
		return
	case err != nil:
		p.cfg.Logger.Error("job slot not taken", "request_id", x.requestID, "error", err.Error())
		x.fail(envelope.Internal())
		return
	}
	charge, remaining, ok := p.reserveSlotted(x, c)
	if !ok {
		p.releaseJobSlot(context.WithoutCancel(x.r.Context()), c.Principal.AccountID, id)
		return
	}
	e := c.Endpoint
	job := store.Job{
		ID: id, AccountID: c.Principal.AccountID, KeyID: c.Principal.KeyID, KeyPrefix: c.Principal.KeyPrefix,
		KeyHash: c.Principal.KeyHash, RequestID: c.RequestID, Platform: e.Platform, Endpoint: e.ID, Params: c.Params.Values,
		Cost: e.Cost, State: store.JobQueued, CreatedAt: now, ExpiresAt: now.Add(store.JobTTL),
	}
	_, err = billingOp(x, func(ctx context.Context) (struct{}, error) {
		if err := p.cfg.Jobs.CreateJob(ctx, job); err != nil {
			return struct{}{}, err
		}
		if err := p.cfg.JobQueue.EnqueueJob(ctx, queue.JobMessage{AccountID: job.AccountID, JobID: job.ID}); err != nil {
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
		p.releaseJobSlot(context.WithoutCancel(x.r.Context()), job.AccountID, job.ID)
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
// Before its call a started job holds its reservation (holdReservation):
// one the sweep already refunded fails the job, refunded, and nothing
// runs, so a job never delivers data that was not paid for.
func (p *Pipeline) RunJob(ctx context.Context, msg queue.JobMessage) error {
	if p.cfg.Jobs == nil {
		return errors.New("pipeline: web jobs are not configured")
	}
	now := p.cfg.Now().UTC()
	job, owned, err := p.cfg.Jobs.StartJob(ctx, msg.AccountID, msg.JobID, now, now.Add(jobLease))
	switch {
	case errors.Is(err, store.ErrNotFound):
		p.releaseJobSlot(ctx, msg.AccountID, msg.JobID)
		return nil // expired or never stored: nothing left to do
	case err != nil:
		return err
	case !owned && (job.State == store.JobSucceeded || job.State == store.JobFailed):
		p.releaseJobSlot(ctx, job.AccountID, job.ID)
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
	p.releaseJobSlot(context.WithoutCancel(ctx), job.AccountID, job.ID)
	return p.billJob(context.WithoutCancel(ctx), stored)
}

// releaseJobSlot frees a job's place under MaxQueuedJobs once it has
// ended (or was never queued). A release that fails is logged: the slot
// lapses with its lease.
func (p *Pipeline) releaseJobSlot(ctx context.Context, accountID, jobID string) {
	ctx, cancel := context.WithTimeout(ctx, billingTimeout)
	defer cancel()
	if err := p.cfg.Jobs.ReleaseJobSlot(ctx, accountID, jobID); err != nil {
		p.cfg.Logger.Warn("job slot not released", "job_id", jobID, "error", err.Error())
	}
}

// holdReservation extends the job's reservation over its run and billing
// (jobHold) with one conditional write, so the expired-lease sweep, whose
// refund is conditioned on the lease (store.RefundExpired), leaves it. A
// reservation already refunded (the job waited in the queue past the
// lease, and the sweep got there first) or missing fails the job with
// reservationExpired: nothing runs, nothing is charged.
func (p *Pipeline) holdReservation(ctx context.Context, j store.Job) *envelope.Error {
	if p.cfg.Store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), billingTimeout)
	defer cancel()
	err := p.cfg.Store.ExtendReservation(ctx, j.AccountID, j.RequestID, p.cfg.Now().UTC().Add(jobHold))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrSettled):
		// Paid already (no order of events settles before FinishJob,
		// but a settled charge is never free data).
		p.cfg.Logger.Error("started job's reservation is settled", "job_id", j.ID, "request_id", j.RequestID)
		return nil
	case errors.Is(err, store.ErrRefunded), errors.Is(err, store.ErrNotFound):
		return reservationExpired()
	default:
		p.cfg.Logger.Error("job reservation not held", "job_id", j.ID, "request_id", j.RequestID, "error", err.Error())
		return envelope.Internal()
	}
}

// reservationExpired is the failure of a job whose reservation was
// refunded before the job could be charged for it.
func reservationExpired() *envelope.Error {
	return envelope.New(envelope.InternalError, http.StatusInternalServerError,
		"The job waited longer than its reservation is held ("+strconv.Itoa(int(store.ReservationLease/time.Minute))+
			" minutes), and the reservation was refunded before the job could be charged: no data is delivered and nothing "+
			"is charged. Submit the job again.",
		map[string]any{"reason": JobReservationExpiredReason})
}

// billJob settles a succeeded job's reservation or refunds a failed one's,
// and records that it landed. A success whose reservation was refunded
// first (or is gone) is not delivered: its outcome becomes the failure
// reservationExpired, and the data is withheld (a job's result shows only
// once billed).
func (p *Pipeline) billJob(ctx context.Context, j store.Job) error {
	var replaced *store.JobOutcome
	if j.State == store.JobSucceeded {
		err := p.cfg.Store.Settle(ctx, j.AccountID, j.RequestID)
		switch {
		case errors.Is(err, store.ErrRefunded), errors.Is(err, store.ErrNotFound):
			p.cfg.Logger.Error("succeeded job's reservation was refunded first: result withheld", "job_id", j.ID, "request_id", j.RequestID)
			req, _ := http.NewRequest(http.MethodGet, "/v1/"+j.Platform+"/"+j.Endpoint, nil)
			status, body := p.jobFailure(j, p.errorsURL(req), reservationExpired())
			replaced = &store.JobOutcome{State: store.JobFailed, Status: status, Result: body}
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

// jobCall runs the job's call (Run, RunAs.Job): as dispatch runs an
// accepted paid call (its handler with its legs, AI-assist and fair use),
// without reserving again: the accepting request reserved it. It returns
// the status and envelope the call would have answered; a failure's
// credits_used is 0, since billJob refunds it.
func (p *Pipeline) jobCall(ctx context.Context, j store.Job) (int, []byte) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	q := url.Values{}
	for name, v := range j.Params {
		q.Set(name, v)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/v1/"+j.Platform+"/"+j.Endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return p.jobFailure(j, "", envelope.Internal())
	}
	req.RemoteAddr = "job"
	a := p.Run(req, RunAs{Parent: j.ID, Job: &JobCall{
		Key: j.Platform + "/" + j.Endpoint, RequestID: j.RequestID,
		Principal: auth.Principal{AccountID: j.AccountID, KeyID: j.KeyID, KeyPrefix: j.KeyPrefix, KeyHash: j.KeyHash},
		Hold:      func(ctx context.Context) *envelope.Error { return p.holdReservation(ctx, j) },
		Progress: func(done, total int) {
			if err := p.cfg.Jobs.JobProgress(context.WithoutCancel(ctx), j.AccountID, j.ID, done, total); err != nil {
				p.cfg.Logger.Warn("job progress not written", "job_id", j.ID, "error", err.Error())
			}
		},
	}})
	return a.Status, a.Body
}

// jobFailure is the error envelope a job's call answered.
func (p *Pipeline) jobFailure(j store.Job, docBase string, e *envelope.Error) (int, []byte) {
	body, _ := envelope.Marshal(envelope.NewFailure(e, j.RequestID, docBase))
	return e.Status, body
}
