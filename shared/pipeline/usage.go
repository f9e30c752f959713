package pipeline

import (
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/usage"
)

// emitUsage hands the finished request's usage event to the sink, off the
// request's path: the worker aggregates it into /v1/status (served /v1
// data calls only; refusals of authentication, validation, limits or
// payment and unrouted paths are not a platform's health). An idempotent
// replay emits nothing (spec 3.2): the original request did.
func (p *Pipeline) emitUsage(x *exchange, latency time.Duration) {
	if p.cfg.Events == nil || x.replayOf != "" {
		return
	}
	e := usage.Event{
		RequestID: x.requestID, At: p.cfg.Now().UTC(), Method: x.r.Method,
		Status: x.status(), ErrorType: string(x.errType),
		LatencyMS:     float64(latency.Microseconds()) / 1000,
		Cache:         x.w.Header().Get("x-cache"),
		Sandbox:       x.sandbox,
		BillingStatus: x.billingStatus,
		Served:        x.served && !x.sandbox,
	}
	e.ParentRequestID = x.parentID
	if x.billingStatus == "" {
		credits, _ := strconv.ParseInt(x.w.Header().Get("x-credits-used"), 10, 64)
		e.Credits = &credits
	}
	if x.endpoint != nil {
		e.Endpoint, e.Platform = x.endpoint.Path(), x.endpoint.Platform
	}
	if c := x.call; c != nil {
		e.AccountID, e.KeyID = c.Principal.AccountID, c.Principal.KeyID
		e.ServedBy, e.Attempts, e.Legs = c.Upstream.ServedBy, c.Upstream.Attempts, c.Upstream.Legs
		e.Model = c.model
	}
	p.cfg.Events.Emit(usage.UsageMessage(e))
}

// reconcileLater asks the worker to finish a paid call's billing that the
// request path could not write.
func (p *Pipeline) reconcileLater(x *exchange, action string, charge store.Charge) {
	if p.cfg.Events == nil {
		return // the lease sweep refunds what stays reserved
	}
	p.cfg.Events.Emit(usage.ReconcileMessage(usage.Reconciliation{
		Action: action, AccountID: charge.AccountID, RequestID: charge.RequestID, At: p.cfg.Now().UTC(),
	}))
}
