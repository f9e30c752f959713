package app

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/meridian-data/meridian/shared/gateway"
	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/queue/sqsqueue"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/usage"
)

// EnvQueueURL names the SQS queue of usage events and reconciliations.
const EnvQueueURL = "MERIDIAN_QUEUE_URL"

// Background cadences: how often the emitter sends what is pending on a
// server (a Lambda function sends after each invocation instead), and how
// often the local server sweeps expired reservations and the outbox.
const (
	flushEvery = 200 * time.Millisecond
	sweepEvery = 30 * time.Second
	// localQueueSize bounds the in-process queue; past it the outbox keeps messages.
	localQueueSize = 10_000
)

// LocalEvents runs the local server's asynchronous side in process until
// ctx ends: an emitter feeding an in-process queue, the worker applying
// it, and a periodic sweep of expired reservations and the outbox. It
// needs nothing beyond the store.
func LocalEvents(ctx context.Context, s store.Store, logger *slog.Logger) *usage.Emitter {
	outbox, _ := s.(store.Outbox)
	outcomes, _ := s.(store.Outcomes)
	worker := &usage.Worker{Store: s, Outcomes: outcomes, Outbox: outbox, Logger: logger}
	q := usage.NewLocalQueue(worker, localQueueSize, logger)
	emitter := &usage.Emitter{Queue: q, Outbox: outbox, Logger: logger}
	go q.Run(ctx)
	go emitter.Run(ctx, flushEvery)
	go usage.Every(ctx, sweepEvery, func(ctx context.Context) { sweep(ctx, worker, logger) })
	return emitter
}

func sweep(ctx context.Context, w *usage.Worker, logger *slog.Logger) {
	if n, err := w.Sweep(ctx); err != nil {
		logger.Warn("sweep incomplete", "finished", n, "error", err.Error())
	}
}

// queueEmitter is the emitter of a function in AWS: SQS when
// MERIDIAN_QUEUE_URL is set; else each flush applies the messages itself
// (so /v1/status still works in a deployment without a queue).
func queueEmitter(ctx context.Context, s store.Store, logger *slog.Logger) (*usage.Emitter, error) {
	outbox, ok := s.(store.Outbox)
	if !ok {
		return nil, errors.New("the store keeps no outbox")
	}
	outcomes, _ := s.(store.Outcomes)
	url := strings.TrimSpace(os.Getenv(EnvQueueURL))
	if url == "" {
		logger.Warn(EnvQueueURL + " is not set: usage events are applied by the function itself")
		direct := usage.Direct{Worker: &usage.Worker{Store: s, Outcomes: outcomes, Outbox: outbox, Logger: logger}}
		return &usage.Emitter{Queue: direct, Outbox: outbox, Logger: logger}, nil
	}
	client, err := sqsqueue.NewClientFromEnv(ctx)
	if err != nil {
		return nil, err
	}
	return &usage.Emitter{Queue: sqsqueue.New(client, url), Outbox: outbox, Logger: logger}, nil
}

// afterInvocations sends each invocation's usage events and
// reconciliations after its response (an internal Lambda extension): no
// client reads them back at once. When the extension cannot register it
// returns nil and the events are flushed in the background.
func afterInvocations(ctx context.Context, e *usage.Emitter, logger *slog.Logger) func(gateway.EventHandler) gateway.EventHandler {
	background := func() {
		logger.Warn("after-invocation extension lost; flushing in the background")
		go e.Run(ctx, flushEvery)
	}
	wrap, err := gateway.AfterInvocation(ctx, os.Getenv("AWS_LAMBDA_RUNTIME_API"), func(ctx context.Context) {
		if err := e.Flush(ctx); err != nil {
			logger.Warn("usage flush incomplete", "error", err.Error())
		}
	}, background)
	if err != nil {
		logger.Warn("after-invocation extension unavailable; flushing in the background", "error", err.Error())
		go e.Run(ctx, flushEvery)
		return nil
	}
	return wrap
}

// Runs are what the worker runs besides usage events: the monitors' runs
// their schedules deliver and the web jobs the jobs queue carries
// (*API, serving every family).
type Runs interface {
	RunMonitor(ctx context.Context, rr monitors.RunRequest) error
	RunJob(ctx context.Context, m queue.JobMessage) error
}

// WorkerHandler is the worker function: SQS batches of usage events and
// reconciliations, and of web jobs (with partial batch failures), the
// scheduled sweep of the outbox and expired reservations, and the monitor
// runs EventBridge Scheduler delivers. runs may be nil (no monitors or
// jobs in this deployment); flush, when set, sends what the runs' own
// calls emitted before the invocation ends.
func WorkerHandler(w *usage.Worker, runs Runs, flush ...func(context.Context)) func(context.Context, json.RawMessage) (any, error) {
	logger := w.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	done := func(ctx context.Context) {
		for _, f := range flush {
			f(ctx)
		}
	}
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			Records []struct {
				EventSource string `json:"eventSource"`
			} `json:"Records"`
			Source     string               `json:"source"`
			MonitorRun *monitors.RunRequest `json:"monitor_run"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, err
		}
		switch {
		case probe.MonitorRun != nil:
			if runs == nil {
				return nil, errors.New("worker: monitors are not configured")
			}
			defer done(ctx)
			// Scheduler invokes the worker asynchronously: an error is
			// retried by Lambda's asynchronous retries, and the run's claim
			// keeps a retry from running it twice.
			return map[string]string{"monitor_id": probe.MonitorRun.MonitorID}, runs.RunMonitor(ctx, *probe.MonitorRun)
		case len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs":
			var ev events.SQSEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, err
			}
			jobs, rest := splitJobs(ev)
			resp := events.SQSEventResponse{}
			if len(rest.Records) > 0 {
				r, err := w.HandleSQS(ctx, rest)
				if err != nil {
					return nil, err
				}
				resp.BatchItemFailures = r.BatchItemFailures
			}
			if len(jobs) > 0 {
				defer done(ctx)
			}
			for _, j := range jobs {
				if runs == nil {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: j.messageID})
					continue
				}
				if err := runs.RunJob(ctx, j.msg); err != nil {
					logger.Warn("web job delivery failed; SQS delivers it again", "job_id", j.msg.JobID, "error", err.Error())
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: j.messageID})
				}
			}
			return resp, nil
		case probe.Source == "aws.events" || probe.Source == "aws.scheduler":
			n, err := w.Sweep(ctx)
			return map[string]int{"expired_reservations_finished": n}, err
		}
		return nil, errors.New("worker: neither an SQS batch, a scheduled event nor a monitor run")
	}
}

type queuedJob struct {
	messageID string
	msg       queue.JobMessage
}

// splitJobs separates the jobs queue's messages (a JobMessage body) from
// the usage queue's.
func splitJobs(ev events.SQSEvent) ([]queuedJob, events.SQSEvent) {
	var jobs []queuedJob
	rest := events.SQSEvent{}
	for _, r := range ev.Records {
		var m queue.JobMessage
		if json.Unmarshal([]byte(r.Body), &m) == nil && m.JobID != "" && m.AccountID != "" {
			jobs = append(jobs, queuedJob{messageID: r.MessageId, msg: m})
			continue
		}
		rest.Records = append(rest.Records, r)
	}
	return jobs, rest
}

// StartWorker runs the worker function in the Lambda runtime. Besides
// usage events it runs monitor runs and web jobs with a pipeline serving
// every family, whose own usage events it applies itself.
func StartWorker() {
	logger := Logger()
	ctx := context.Background()
	deps, err := lambdaSources(ctx, logger)
	if err == nil && deps.Store == nil {
		err = errors.New(EnvTable + " is not set")
	}
	if err != nil {
		logger.Error("cannot configure the worker", "error", err.Error())
		os.Exit(1)
	}
	s := deps.Store
	outcomes, _ := s.(store.Outcomes)
	outbox, _ := s.(store.Outbox)
	w := &usage.Worker{Store: s, Outcomes: outcomes, Outbox: outbox, Logger: logger}
	emitter := &usage.Emitter{Queue: usage.Direct{Worker: w}, Outbox: outbox, Logger: logger}
	deps.Events = emitter
	runner := New(Config("", logger, deps))
	lambda.Start(WorkerHandler(w, runner, func(ctx context.Context) {
		if err := emitter.Flush(ctx); err != nil {
			logger.Warn("usage flush incomplete", "error", err.Error())
		}
	}))
}
