package app

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/meridian-data/meridian/shared/afterwork"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/meridian-data/meridian/shared/gateway"
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

// afterInvocations sends each invocation's events after its response
// (an internal Lambda extension), or in the background when the extension
// cannot register.
//
// The work after each invocation first waits for the requests' own
// after-response writes (q): they may add reconciliations to the events.
// Without the extension it returns nil: nothing may then follow a
// response, since the environment may freeze as soon as it is returned.
func afterInvocations(ctx context.Context, q *afterwork.Queue, e *usage.Emitter, logger *slog.Logger) func(gateway.EventHandler) gateway.EventHandler {
	background := func() {
		logger.Warn("after-invocation extension lost; flushing in the background")
		go e.Run(ctx, flushEvery)
	}
	wrap, err := gateway.AfterInvocation(ctx, os.Getenv("AWS_LAMBDA_RUNTIME_API"), func(ctx context.Context) {
		if !q.Wait(ctx) {
			logger.Warn("after-response writes still running at the end of the invocation's work")
		}
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

// WorkerHandler is the worker function: SQS batches of usage events and
// reconciliations (with partial batch failures), and the scheduled sweep
// of the outbox and expired reservations.
func WorkerHandler(w *usage.Worker) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			Records []struct {
				EventSource string `json:"eventSource"`
			} `json:"Records"`
			Source string `json:"source"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, err
		}
		switch {
		case len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs":
			var ev events.SQSEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, err
			}
			return w.HandleSQS(ctx, ev)
		case probe.Source == "aws.events" || probe.Source == "aws.scheduler":
			n, err := w.Sweep(ctx)
			return map[string]int{"expired_reservations_finished": n}, err
		}
		return nil, errors.New("worker: neither an SQS batch nor a scheduled event")
	}
}

// StartWorker runs the worker function in the Lambda runtime.
func StartWorker() {
	logger := Logger()
	ctx := context.Background()
	s, err := StoreFromEnv(ctx)
	if err == nil && s == nil {
		err = errors.New(EnvTable + " is not set")
	}
	if err != nil {
		logger.Error("cannot configure the worker", "error", err.Error())
		os.Exit(1)
	}
	outcomes, _ := s.(store.Outcomes)
	outbox, _ := s.(store.Outbox)
	lambda.Start(WorkerHandler(&usage.Worker{Store: s, Outcomes: outcomes, Outbox: outbox, Logger: logger}))
}
