package stack

import (
	"time"

	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Timeouts. upstream.DefaultTimeout (25 s) bounds one data call over all
// its routes and retries; API Gateway HTTP APIs answer 503 to the caller
// after 30 s whatever the function does, so the app ends a call that came
// through it at 28 s (gateway.APIGatewayBudget). The function timeout is
// above that on purpose: what the call started runs detached from its
// deadline and must be allowed to finish so the books stay right without
// waiting for the sweep (a refund or settle waits up to 15 s on a
// contended account; the usage flush after the response takes up to 3 s):
// 28 s + 15 s + 3 s, rounded up to 60 s. A function killed anyway leaves a
// reservation the worker's sweep refunds once its lease ends.
const (
	APITimeout = 60 * time.Second
	// WorkerTimeout covers the longest thing the worker does. A web job
	// (one message of the jobs queue) or a monitor's run (one scheduled
	// invocation) is one call through the pipeline: its request deadline
	// (pipeline.RequestTimeout, 90 s, over a composite's legs and their
	// retries), then its billing writes, detached, each within the
	// pipeline's billing timeout (15 s: the settle or refund on a
	// contended account), the job's or run's own outcome writes (FinishJob
	// and MarkJobBilled, or CompleteRun: 15 s) and the usage flush (3 s):
	// 90 + 15 + 15 + 3 = 123 s (RequestTimeout + CallTail), plus start-up (the secret and config
	// reads of a cold start, a few seconds). Five minutes leaves over
	// twice that, so a slow store never kills a job between its charge
	// and its outcome; a worker killed anyway leaves the job running
	// under its lease, taken over on the message's next receive, and a
	// reservation the sweep refunds. An SQS batch of 10 usage messages (a
	// few store writes each, retried on conflicts) and the scheduled
	// sweep (the outbox applied in place, a Query per lease shard, a
	// refund per expired reservation) take well under a minute.
	WorkerTimeout = 5 * time.Minute
	// VisibilityTimeout is six times the worker's timeout, as Lambda
	// recommends for SQS event sources (retries and batching window), on
	// both queues the worker consumes (usage and jobs): 30 minutes. A
	// message a worker failed returns after it.
	VisibilityTimeout = 6 * WorkerTimeout
	// MaxReceiveCount: a message that failed this many receives goes to
	// the dead-letter queue (usage.ErrPoison fails every time).
	MaxReceiveCount = 5
	// JobsMaxReceiveCount: a job message that failed this many receives
	// goes to the jobs dead-letter queue. Each receive may run minutes of
	// upstream calls; a job whose worker died is taken over once its lease
	// ends, so three receives give it two second chances. A job left there
	// keeps its state (queued or running) until it is redriven (an alarm
	// says so).
	JobsMaxReceiveCount = 3
	// JobsBatchSize: the worker takes one job per invocation (a job can
	// use most of WorkerTimeout; a batch would share it).
	JobsBatchSize = 1
	// QueueRetention keeps messages (and the DLQ's) 14 days, SQS's maximum.
	QueueRetention = 14 * 24 * time.Hour
	// SweepEvery is the worker's scheduled run.
	SweepEvery = time.Minute
	// CanaryTimeout bounds one canary run. A run checks every available
	// data operation on each configured route (about fifty operations,
	// some on several routes), each call under its own per-call timeout,
	// within a budget of source requests (canary.DefaultBudget), then
	// records the run and writes its metrics. Ten minutes holds a run
	// whose sources are slow or timing out (at least twenty calls at the
	// adapter budget, upstream.DefaultTimeout, one after another) and
	// stays under Lambda's fifteen-minute maximum; a run cut off anyway is
	// not retried (the next scheduled run comes anyway).
	CanaryTimeout = 10 * time.Minute
)

// The adapter budget must stay below the function timeout, the worker's
// timeout must cover a call's request deadline with its billing writes,
// and the canary's must stay within Lambda's maximum and hold twenty
// calls that use their whole adapter budget: a negative difference does
// not compile.
const (
	_ uint64 = uint64(APITimeout - upstream.DefaultTimeout)
	_ uint64 = uint64(WorkerTimeout - 2*(pipeline.RequestTimeout+CallTail))
	_ uint64 = uint64(LambdaMaxTimeout - CanaryTimeout)
	_ uint64 = uint64(CanaryTimeout - 20*upstream.DefaultTimeout)
)

// LambdaMaxTimeout is the longest a Lambda function may run.
const LambdaMaxTimeout = 15 * time.Minute

// CallTail is what a call run by the worker writes after its request
// deadline: the billing write (15 s), the job's or run's outcome (15 s)
// and the usage flush (3 s).
const CallTail = 33 * time.Second

// Memory sizes in MB. arm64 Go binaries are small and start fast; memory
// also buys CPU share (1,769 MB is one vCPU). 512 MB is the default for
// API functions: an upstream body may be 8 MiB and a response up to
// Lambda's 6 MB, both held while JSON is decoded, validated against its
// schema, gzip-compressed for idempotency and encoded; TLS handshakes to
// upstreams want the CPU share. Fan-out functions hold up to 20 (batch)
// or 8 (search) such calls at once, and MCP tool calls likewise: 1,024 MB.
// The worker runs composite operations (web jobs: a bundle's or a web
// operation's legs, several upstream calls at once) and any data operation
// (monitor runs) besides its small usage messages: 1,024 MB too. The
// canary makes the calls an API function makes (an upstream body of up to
// 8 MiB, decoded and validated against its schema) and keeps only each
// check's figures: 512 MB. The
// sandbox generates small synthetic payloads: 256 MB.
func Memory(name string) int {
	switch registry.Family(name) {
	case registry.Batch, registry.Search, registry.MCP:
		return 1024
	case registry.Sandbox:
		return 256
	}
	switch name {
	case WorkerName:
		return 1024
	case CanaryName:
		return 512
	}
	return 512
}

// Timeout is a function's timeout.
func Timeout(name string) time.Duration {
	switch name {
	case WorkerName:
		return WorkerTimeout
	case CanaryName:
		return CanaryTimeout
	}
	return APITimeout
}
