package pipeline

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
)

// A call made with async=1 is accepted here: its cost reserved, the job
// stored and queued, 202 answered. The worker runs it (shared/webjobs).

// MaxQueuedJobs caps an account's open web jobs (queued or running): an
// async=1 call beyond it is refused 429 RATE_LIMITED (details.reason
// job_queue_full) before anything is reserved, so one account's backlog
// cannot hold up every other account's jobs. A job holds its slot from
// its acceptance until it ends, or at most jobSlotLease.
const MaxQueuedJobs = 100

// JobQueueFullReason is details.reason of the 429 that refuses a job over
// MaxQueuedJobs.
const JobQueueFullReason = "job_queue_full"

// jobQueueRetry is the retry-after of a refusal for a full job queue: about
// how long a job takes.
const jobQueueRetry = time.Minute

// jobSlotLease bounds how long a job counts against MaxQueuedJobs if its
// end never releases its slot (a message lost to the dead-letter queue): a
// job still queued after its reservation's lease finds it refunded and
// fails at once, and a started one ends within its lease.
const jobSlotLease = store.ReservationLease + RunLease

// jobAccepted is the data of the 202 that accepts a web job.
type jobAccepted struct {
	JobID           string    `json:"job_id"`
	State           string    `json:"state"`
	URL             string    `json:"url"`
	CreditsReserved int64     `json:"credits_reserved"`
	CreatedAt       time.Time `json:"created_at"`
	ExpiresAt       time.Time `json:"expires_at"`
}

// acceptJob answers a call made with async=1: its cost is reserved now,
// the job is stored and queued, and the caller gets 202 with the job's
// id and URL. The worker runs it (shared/webjobs) and settles or refunds it.
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
		x.fail(RateLimited(JobQueueFullReason, jobQueueRetry, "This account has "+strconv.Itoa(MaxQueuedJobs)+
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

// releaseJobSlot frees a job's place under MaxQueuedJobs once it has
// ended (or was never queued). A release that fails is logged: the slot
// lapses with its lease.
func (p *Pipeline) releaseJobSlot(ctx context.Context, accountID, jobID string) {
	ctx, cancel := context.WithTimeout(ctx, BillingTimeout)
	defer cancel()
	if err := p.cfg.Jobs.ReleaseJobSlot(ctx, accountID, jobID); err != nil {
		p.cfg.Logger.Warn("job slot not released", "job_id", jobID, "error", err.Error())
	}
}
