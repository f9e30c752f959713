package stack

import (
	"time"

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
	// WorkerTimeout covers an SQS batch of 10 messages (a few store writes
	// each, retried on conflicts) or one scheduled run (the outbox applied
	// in place, a Query per lease shard, a refund per expired reservation).
	WorkerTimeout = 60 * time.Second
	// VisibilityTimeout is six times the worker's timeout, as Lambda
	// recommends for SQS event sources (retries and batching window).
	VisibilityTimeout = 6 * WorkerTimeout
	// MaxReceiveCount: a message that failed this many receives goes to
	// the dead-letter queue (usage.ErrPoison fails every time).
	MaxReceiveCount = 5
	// QueueRetention keeps messages (and the DLQ's) 14 days, SQS's maximum.
	QueueRetention = 14 * 24 * time.Hour
	// SweepEvery is the worker's scheduled run.
	SweepEvery = time.Minute
)

// The adapter budget must stay below the function timeout: a negative
// difference does not compile.
const _ uint64 = uint64(APITimeout - upstream.DefaultTimeout)

// Memory sizes in MB. arm64 Go binaries are small and start fast; memory
// also buys CPU share (1,769 MB is one vCPU). 512 MB is the default for
// API functions: an upstream body may be 8 MiB and a response up to
// Lambda's 6 MB, both held while JSON is decoded, validated against its
// schema, gzip-compressed for idempotency and encoded; TLS handshakes to
// upstreams want the CPU share. Fan-out functions hold up to 20 (batch)
// or 8 (search) such calls at once, and MCP tool calls likewise: 1,024 MB.
// The sandbox generates small synthetic payloads and the worker applies
// small messages: 256 MB.
func Memory(name string) int {
	switch registry.Family(name) {
	case registry.Batch, registry.Search, registry.MCP:
		return 1024
	case registry.Sandbox:
		return 256
	}
	if name == WorkerName {
		return 256
	}
	return 512
}

// Timeout is a function's timeout.
func Timeout(name string) time.Duration {
	if name == WorkerName {
		return WorkerTimeout
	}
	return APITimeout
}
