// Package webjobs runs web jobs: calls accepted with async=1, which the
// pipeline reserved and queued (shared/queue). The worker runs each once
// through the pipeline's Runner (pipeline.Run with RunAs.Job), stores its
// envelope, then settles or refunds its reservation; GET
// /v1/web/jobs/{id} shows the job to the account that started it. It
// touches the jobs' records and the reservation of each job's own call,
// nothing else of the store.
package webjobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
)

// ReservationExpiredReason is details.reason of a job that failed because
// its reservation was refunded before it could be charged (the job waited
// in the queue longer than the reservation's lease).
const ReservationExpiredReason = "reservation_expired"

// jobLease is how long a worker holds a running job before another
// delivery may take it over (pipeline.RunLease).
const jobLease = pipeline.RunLease

// jobHold is how long a started job holds its reservation
// (ExtendReservation): its run and billing (jobLease), then the same lease
// any reservation gets for its settle to land (store.ReservationLease).
const jobHold = jobLease + store.ReservationLease

// ErrBusy: another worker runs the job under a live lease. The message
// is delivered again later, by when the job has finished (and the delivery
// only checks its billing) or its worker is known dead (and it is taken over).
var ErrBusy = errors.New("webjobs: the job is running in another worker")

// Config wires the web jobs' worker.
type Config struct {
	// Jobs keeps the jobs; Store holds their reservations.
	Jobs   store.Jobs
	Store  store.Store
	Logger *slog.Logger
	Now    func() time.Time
}

// Worker runs web jobs and serves their state.
type Worker struct {
	cfg Config
	// api is the pipeline the worker is given to: its jobs' calls go
	// through it.
	api pipeline.Runner
}

var _ pipeline.Feature = (*Worker)(nil)

// New builds the worker; the pipeline it is given to (as a
// pipeline.Feature) is what its jobs' calls go through.
func New(cfg Config) *Worker {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Worker{cfg: cfg}
}

// Handlers implements pipeline.Feature: GET /v1/web/jobs/{id}.
func (w *Worker) Handlers(r pipeline.Runner) map[string]pipeline.Handler {
	w.api = r
	if w.cfg.Jobs == nil {
		return nil
	}
	return map[string]pipeline.Handler{"web/jobs/{id}": w.jobHandler}
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
func (w *Worker) jobHandler(ctx context.Context, c *pipeline.Call) (any, *envelope.Error) {
	j, err := w.cfg.Jobs.Job(ctx, c.Principal.AccountID, c.Params.Values["id"], w.cfg.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, envelope.New(envelope.ResourceNotFound, http.StatusNotFound,
			"No job with this id for this account: it may have expired (jobs are kept 7 days).", nil)
	case err != nil:
		w.cfg.Logger.Error("read job failed", "request_id", c.RequestID, "error", err.Error())
		return nil, envelope.Internal()
	}
	return viewJob(j), nil
}

// Run runs a queued web job once: the first delivery (or the one that
// takes over from a worker that died) runs the call, stores its envelope
// and then settles or refunds the reservation; a later delivery of a
// finished job only makes sure that billing landed. The outcome is stored
// before the money moves, so a retry never runs a finished job again, and
// the store's settle and refund are idempotent, so none charges twice.
// Before its call a started job holds its reservation (holdReservation):
// one the sweep already refunded fails the job, refunded, and nothing
// runs, so a job never delivers data that was not paid for.
func (w *Worker) Run(ctx context.Context, msg queue.JobMessage) error {
	if w.cfg.Jobs == nil || w.cfg.Store == nil {
		return errors.New("webjobs: web jobs are not configured")
	}
	if w.api == nil {
		return errors.New("webjobs: the worker was not given to a pipeline")
	}
	now := w.cfg.Now().UTC()
	job, owned, err := w.cfg.Jobs.StartJob(ctx, msg.AccountID, msg.JobID, now, now.Add(jobLease))
	switch {
	case errors.Is(err, store.ErrNotFound):
		w.releaseJobSlot(ctx, msg.AccountID, msg.JobID)
		return nil // expired or never stored: nothing left to do
	case err != nil:
		return err
	case !owned && (job.State == store.JobSucceeded || job.State == store.JobFailed):
		w.releaseJobSlot(ctx, job.AccountID, job.ID)
		if job.Billed {
			return nil
		}
		return w.billJob(ctx, job)
	case !owned:
		return ErrBusy
	}
	status, result := w.jobCall(ctx, job)
	state := store.JobFailed
	if status == http.StatusOK {
		state = store.JobSucceeded
	}
	stored, err := w.cfg.Jobs.FinishJob(context.WithoutCancel(ctx), job.AccountID, job.ID, state, status, result, w.cfg.Now().UTC())
	if err != nil {
		return err
	}
	w.releaseJobSlot(context.WithoutCancel(ctx), job.AccountID, job.ID)
	return w.billJob(context.WithoutCancel(ctx), stored)
}

// releaseJobSlot frees a job's place under MaxQueuedJobs once it has
// ended (or was never queued). A release that fails is logged: the slot
// lapses with its lease.
func (w *Worker) releaseJobSlot(ctx context.Context, accountID, jobID string) {
	ctx, cancel := context.WithTimeout(ctx, pipeline.BillingTimeout)
	defer cancel()
	if err := w.cfg.Jobs.ReleaseJobSlot(ctx, accountID, jobID); err != nil {
		w.cfg.Logger.Warn("job slot not released", "job_id", jobID, "error", err.Error())
	}
}

// holdReservation extends the job's reservation over its run and billing
// (jobHold) with one conditional write, so the expired-lease sweep, whose
// refund is conditioned on the lease (store.RefundExpired), leaves it. A
// reservation already refunded (the job waited in the queue past the
// lease, and the sweep got there first) or missing fails the job with
// reservationExpired: nothing runs, nothing is charged.
func (w *Worker) holdReservation(ctx context.Context, j store.Job) *envelope.Error {
	if w.cfg.Store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pipeline.BillingTimeout)
	defer cancel()
	err := w.cfg.Store.ExtendReservation(ctx, j.AccountID, j.RequestID, w.cfg.Now().UTC().Add(jobHold))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrSettled):
		// Paid already (no order of events settles before FinishJob,
		// but a settled charge is never free data).
		w.cfg.Logger.Error("started job's reservation is settled", "job_id", j.ID, "request_id", j.RequestID)
		return nil
	case errors.Is(err, store.ErrRefunded), errors.Is(err, store.ErrNotFound):
		return reservationExpired()
	default:
		w.cfg.Logger.Error("job reservation not held", "job_id", j.ID, "request_id", j.RequestID, "error", err.Error())
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
		map[string]any{"reason": ReservationExpiredReason})
}

// billJob settles a succeeded job's reservation or refunds a failed one's,
// and records that it landed. A success whose reservation was refunded
// first (or is gone) is not delivered: its outcome becomes the failure
// reservationExpired, and the data is withheld (a job's result shows only
// once billed).
func (w *Worker) billJob(ctx context.Context, j store.Job) error {
	var replaced *store.JobOutcome
	if j.State == store.JobSucceeded {
		err := w.cfg.Store.Settle(ctx, j.AccountID, j.RequestID)
		switch {
		case errors.Is(err, store.ErrRefunded), errors.Is(err, store.ErrNotFound):
			w.cfg.Logger.Error("succeeded job's reservation was refunded first: result withheld", "job_id", j.ID, "request_id", j.RequestID)
			req, _ := http.NewRequest(http.MethodGet, "/v1/"+j.Platform+"/"+j.Endpoint, nil)
			status, body := w.jobFailure(j, w.api.ErrorsURL(req), reservationExpired())
			replaced = &store.JobOutcome{State: store.JobFailed, Status: status, Result: body}
		case err != nil:
			return err
		}
	} else {
		_, err := w.cfg.Store.Refund(ctx, j.AccountID, j.RequestID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case errors.Is(err, store.ErrSettled):
			w.cfg.Logger.Error("failed job's reservation was settled", "job_id", j.ID, "request_id", j.RequestID)
		case err != nil:
			return err
		}
	}
	return w.cfg.Jobs.MarkJobBilled(ctx, j.AccountID, j.ID, replaced)
}

// jobCall runs the job's call (Run, RunAs.Job): as dispatch runs an
// accepted paid call (its handler with its legs, AI-assist and fair use),
// without reserving again: the accepting request reserved it. It returns
// the status and envelope the call would have answered; a failure's
// credits_used is 0, since billJob refunds it.
func (w *Worker) jobCall(ctx context.Context, j store.Job) (int, []byte) {
	ctx, cancel := context.WithTimeout(ctx, pipeline.RequestTimeout)
	defer cancel()
	q := url.Values{}
	for name, v := range j.Params {
		q.Set(name, v)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/v1/"+j.Platform+"/"+j.Endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return w.jobFailure(j, "", envelope.Internal())
	}
	req.RemoteAddr = "job"
	a := w.api.Run(req, pipeline.RunAs{Parent: j.ID, Job: &pipeline.JobCall{
		Key: j.Platform + "/" + j.Endpoint, RequestID: j.RequestID,
		Principal: auth.Principal{AccountID: j.AccountID, KeyID: j.KeyID, KeyPrefix: j.KeyPrefix, KeyHash: j.KeyHash},
		Hold:      func(ctx context.Context) *envelope.Error { return w.holdReservation(ctx, j) },
		Progress: func(done, total int) {
			if err := w.cfg.Jobs.JobProgress(context.WithoutCancel(ctx), j.AccountID, j.ID, done, total); err != nil {
				w.cfg.Logger.Warn("job progress not written", "job_id", j.ID, "error", err.Error())
			}
		},
	}})
	return a.Status, a.Body
}

// jobFailure is the error envelope a job's call answered.
func (w *Worker) jobFailure(j store.Job, docBase string, e *envelope.Error) (int, []byte) {
	body, _ := envelope.Marshal(envelope.NewFailure(e, j.RequestID, docBase))
	return e.Status, body
}

func jsonOrNull(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
