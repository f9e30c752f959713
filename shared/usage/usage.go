// Package usage carries what happens after a response: every routed
// request's usage event, and the reconciliations that finish a paid call's
// billing when the request path could not. The pipeline emits messages to
// an Emitter, which sends them to the queue in batches off the request's
// path and keeps what the queue refuses in the store's outbox; the Worker
// consumes them (exactly once in effect), settles reservations whose
// process died, and aggregates usage into what /v1/status reads.
package usage

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Event is one routed request's usage record.
type Event struct {
	RequestID string    `json:"request_id"`
	At        time.Time `json:"at"`
	AccountID string    `json:"account_id,omitempty"`
	KeyID     string    `json:"key_id,omitempty"`
	Method    string    `json:"method"`
	// Endpoint is the registry path (/v1/platform/endpoint) when the path
	// resolved; Platform its platform.
	Endpoint  string  `json:"endpoint,omitempty"`
	Platform  string  `json:"platform,omitempty"`
	Status    int     `json:"status"`
	ErrorType string  `json:"error_type,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	// Credits is what the call was charged; null while a charge is
	// pending reconciliation (BillingStatus says which).
	Credits       *int64 `json:"credits"`
	BillingStatus string `json:"billing_status,omitempty"`
	Cache         string `json:"cache,omitempty"` // HIT or MISS, when the cache was consulted
	Sandbox       bool   `json:"sandbox,omitempty"`
	// ServedBy, Attempts and Legs say how the upstream layer served it.
	ServedBy string         `json:"served_by,omitempty"`
	Attempts int            `json:"attempts"`
	Legs     []upstream.Leg `json:"legs,omitempty"`
	// Served: a /v1 data call that reached its source or the cache, the
	// calls /v1/status counts (refusals are not a platform's health).
	Served bool `json:"served"`
	// ParentRequestID names the composite call (search/all, …) this call
	// was a leg of; a leg is never charged itself.
	ParentRequestID string `json:"parent_request_id,omitempty"`
	// Model is what AI-assist's model calls cost the request (spec 4.5:
	// no surcharge, but the tokens are accounted).
	Model *Model `json:"model,omitempty"`
}

// Model is a request's model calls: attempts (retries included), tokens
// in and out, and the routes that served them.
type Model struct {
	Calls        int            `json:"calls"`
	InputTokens  int64          `json:"input_tokens"`
	OutputTokens int64          `json:"output_tokens"`
	Legs         []upstream.Leg `json:"legs,omitempty"`
}

// Reconciliation actions.
const (
	// Refund returns a failed call's reservation that the request path
	// could not refund.
	Refund = "refund"
	// Settle keeps a successful call's charge that the request path could
	// not mark settled, so the lease sweep never refunds a delivered call.
	Settle = "settle"
)

// Reconciliation asks the worker to finish a paid call's billing.
type Reconciliation struct {
	Action    string    `json:"action"`
	AccountID string    `json:"account_id"`
	RequestID string    `json:"request_id"`
	At        time.Time `json:"at"`
}

// Message kinds on the queue.
const (
	KindUsage     = "usage"
	KindReconcile = "reconcile"
)

// Body is a queue message's JSON body: one of its parts, named by Kind.
type Body struct {
	Kind      string          `json:"kind"`
	Usage     *Event          `json:"usage,omitempty"`
	Reconcile *Reconciliation `json:"reconcile,omitempty"`
}

// UsageMessage is the queue message of a usage event; its ID is stable, so
// a re-sent event is recognised. Its body is encoded only when it leaves
// the process (queue.Message.Encoded): the local server applies it as
// built.
func UsageMessage(e Event) queue.Message {
	return queue.Message{ID: "usage-" + e.RequestID, Decoded: Body{Kind: KindUsage, Usage: &e}}
}

// ReconcileMessage is the queue message of a reconciliation.
func ReconcileMessage(r Reconciliation) queue.Message {
	return queue.Message{ID: r.Action + "-" + r.RequestID, Decoded: Body{Kind: KindReconcile, Reconcile: &r}}
}

// ErrPoison marks a message that can never be processed (it is not a
// message of ours); the queue's redrive policy moves it to the
// dead-letter queue after its bounded receives.
var ErrPoison = errors.New("usage: unreadable message")

// Decode reads a message body.
func Decode(raw []byte) (Body, error) {
	var b Body
	if err := json.Unmarshal(raw, &b); err != nil {
		return b, ErrPoison
	}
	return b, check(b)
}

// check is nil for a body the worker can apply, else ErrPoison.
func check(b Body) error {
	switch {
	case b.Kind == KindUsage && b.Usage != nil && b.Usage.RequestID != "":
	case b.Kind == KindReconcile && b.Reconcile != nil && b.Reconcile.RequestID != "" && b.Reconcile.AccountID != "" &&
		(b.Reconcile.Action == Refund || b.Reconcile.Action == Settle):
	default:
		return ErrPoison
	}
	return nil
}
