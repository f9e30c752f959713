package queue

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// EnvJobsQueueURL is the SQS queue web jobs run from (README,
// "Configuration"; infra sets it).
const EnvJobsQueueURL = "MERIDIAN_JOBS_QUEUE_URL"

// JobMessage is a web job's message on the jobs queue.
type JobMessage struct {
	AccountID string `json:"account_id"`
	JobID     string `json:"job_id"`
}

// JobQueue sends accepted web jobs (async=1) to the worker.
type JobQueue interface {
	EnqueueJob(ctx context.Context, m JobMessage) error
}

// LocalJobQueue is the local server's JobQueue: each job runs in process
// as soon as it is queued, retried with a growing pause while it fails,
// as SQS would deliver it again.
type LocalJobQueue struct {
	logger *slog.Logger
	ctx    context.Context
	run    func(context.Context, JobMessage) error
	wg     sync.WaitGroup
	// Retries and Pause bound the attempts of a failing job.
	Retries int
	Pause   time.Duration
}

// NewLocalJobQueue returns a queue whose jobs Start runs.
func NewLocalJobQueue(logger *slog.Logger) *LocalJobQueue {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &LocalJobQueue{logger: logger, Retries: 5, Pause: time.Second}
}

// Start runs jobs queued from now on with run, until ctx ends.
func (q *LocalJobQueue) Start(ctx context.Context, run func(context.Context, JobMessage) error) {
	q.ctx, q.run = ctx, run
}

// EnqueueJob implements JobQueue.
func (q *LocalJobQueue) EnqueueJob(_ context.Context, m JobMessage) error {
	if q.run == nil {
		return errNotStarted
	}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		pause := q.Pause
		for attempt := 0; ; attempt++ {
			err := q.run(q.ctx, m)
			if err == nil {
				return
			}
			if attempt >= q.Retries {
				q.logger.Error("web job gave up", "job_id", m.JobID, "error", err.Error())
				return
			}
			select {
			case <-q.ctx.Done():
				return
			case <-time.After(pause):
			}
			pause *= 2
		}
	}()
	return nil
}

// Wait waits for the jobs under way.
func (q *LocalJobQueue) Wait() { q.wg.Wait() }

type queueError string

func (e queueError) Error() string { return string(e) }

const errNotStarted = queueError("queue: the local job queue is not started")
