package soak_test

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/queue/sqsqueue"
	"github.com/meridian-data/meridian/shared/queue/sqstest"
	"github.com/meridian-data/meridian/shared/soak"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/usage"
)

// The store faults of every soak run: shares of all store calls.
func storeFaults() *soak.StoreFaults {
	return &soak.StoreFaults{Throttle: 0.01, Error: 0.005, LostAnswer: 0.005, TxnCancel: 0.03, Counter: &soak.Counter{}}
}

// pastTheLeases is the worker's clock for the final sweep: every
// reservation of the run has outlived its lease.
func pastTheLeases() time.Time { return time.Now().Add(store.ReservationLease + time.Minute) }

// TestSoak runs the profile MERIDIAN_SOAK names (make test: short; make
// soak: full) on both stores and fails on any discrepancy.
func TestSoak(t *testing.T) {
	profile, err := soak.ProfileFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]func(*testing.T, context.Context) soak.Env{
		"embedded": embeddedEnv,
		"dynamodb": dynamoEnv,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			start := time.Now()
			report, err := soak.Run(ctx, profile, env(t, ctx))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("soak %s on %s in %v\n%s", profile.Name, name, time.Since(start).Round(time.Millisecond), report)
			if len(report.Discrepancies) > 0 {
				t.Errorf("%d discrepancies", len(report.Discrepancies))
			}
			checkEveryFaultStruck(t, name, report)
		})
	}
}

// checkEveryFaultStruck: a run in which a fault kind never happened proves
// nothing about it.
func checkEveryFaultStruck(t *testing.T, name string, r soak.Report) {
	kinds := []string{soak.FaultStoreThrottle, soak.FaultStoreError, soak.FaultStoreLostAnswer, soak.FaultCallerHangsUp,
		soak.FaultTimeout, soak.FaultProcessDies, "upstream: 5xx", "upstream: 429", "upstream: timeout", "upstream: reset",
		"upstream: truncated body"}
	if name == "dynamodb" {
		kinds = append(kinds, soak.FaultTxnCancelled, soak.FaultQueueDown)
	}
	for _, k := range kinds {
		if r.Faults[k] == 0 {
			t.Errorf("fault %q never struck", k)
		}
	}
}

// embeddedEnv is make run's store and local queue, with faults.
func embeddedEnv(t *testing.T, ctx context.Context) soak.Env {
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	logger := slog.New(slog.DiscardHandler)
	faults := storeFaults()
	worker := &usage.Worker{Store: s, Outcomes: s, Outbox: s, Logger: logger}
	q := usage.NewLocalQueue(worker, 4096, logger)
	emitter := &usage.Emitter{Queue: q, Outbox: s, Logger: logger}
	runCtx, stopEmitter := context.WithCancel(ctx)
	go q.Run(ctx)
	emitted := make(chan struct{})
	go func() { emitter.Run(runCtx, 20*time.Millisecond); close(emitted) }()
	return soak.Env{
		Store: faults.Embedded(s), Clean: s, Events: emitter, Faults: faults, Logger: logger,
		Drain: func(ctx context.Context) error {
			stopEmitter()
			<-emitted
			for q.Pending() > 0 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			if _, err := emitter.Drain(ctx); err != nil {
				return err
			}
			for q.Pending() > 0 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			sweeper := &usage.Worker{Store: s, Outcomes: s, Outbox: s, Logger: logger, Now: pastTheLeases}
			_, err := sweeper.Sweep(ctx)
			return err
		},
	}
}

// dynamoEnv is the Lambda functions' store on DynamoDB Local with the
// faults in its client, and SQS (goaws) behind a proxy that can take it
// down, drained by the worker's SQS handler.
func dynamoEnv(t *testing.T, ctx context.Context) soak.Env {
	faults := storeFaults()
	s := dynamotest.NewStoreWith(t, faults.DynamoDB())
	logger := slog.New(slog.DiscardHandler)
	// A 1 s visibility: a message left hidden (received and not deleted)
	// holds sqstest.Drain until it is visible again, here 1 to 2 s; with
	// 30 s some runs waited that long. A message applied twice changes
	// nothing, which the audit checks too.
	direct, queueURL, _ := sqstest.NewQueues(t, 0)
	endpoint, err := url.Parse(sqstest.Endpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := soak.NewOutage(endpoint.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	emitter := &usage.Emitter{Queue: sqsqueue.New(sqstest.NewClient("http://"+proxy.Addr()), queueURL), Outbox: s, Logger: logger}
	runCtx, stopEmitter := context.WithCancel(ctx)
	emitted := make(chan struct{})
	go func() { emitter.Run(runCtx, 20*time.Millisecond); close(emitted) }()
	worker := &usage.Worker{Store: s, Outcomes: s, Outbox: s, Logger: logger}
	return soak.Env{
		Store: s, Clean: s, Events: emitter, Faults: faults, Logger: logger,
		QueueOutage: func(down bool) error {
			if down {
				proxy.Down()
				return nil
			}
			return proxy.Up()
		},
		Drain: func(ctx context.Context) error {
			stopEmitter()
			<-emitted
			if _, err := emitter.Drain(ctx); err != nil {
				return err
			}
			sqstest.Drain(t, direct, queueURL, worker.HandleSQS)
			sweeper := &usage.Worker{Store: s, Outcomes: s, Outbox: s, Logger: logger, Now: pastTheLeases}
			_, err := sweeper.Sweep(ctx)
			return err
		},
	}
}
