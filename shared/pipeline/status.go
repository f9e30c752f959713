package pipeline

import (
	"context"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/usage"
)

// statusData is GET /v1/status: each data platform's health over the last
// 15 minutes (store.Summarize names the fields and states), beside its part
// of the canary's last run.
type statusData struct {
	WindowMinutes int              `json:"window_minutes"`
	GeneratedAt   time.Time        `json:"generated_at"`
	Platforms     []platformStatus `json:"platforms"`
}

// platformStatus is one platform's line: its live figures and the canary's
// last result for it (null when no run checked it).
type platformStatus struct {
	store.PlatformStatus
	Canary *canary.PlatformResult `json:"canary"`
}

func (p *Pipeline) statusHandler(ctx context.Context, _ *Call) (any, *envelope.Error) {
	return p.platformStatus(ctx)
}

// platformStatus is the status of every data platform, as /v1/status and
// the console show it.
func (p *Pipeline) platformStatus(ctx context.Context) (statusData, *envelope.Error) {
	now := p.cfg.Now()
	minutes, err := p.cfg.Outcomes.OutcomesSince(ctx, now.Add(-store.StatusWindow), now)
	if err != nil {
		p.cfg.Logger.Error("status read failed", "error", err.Error())
		return statusData{}, envelope.Internal()
	}
	checked := p.lastCanary(ctx)
	out := statusData{WindowMinutes: int(store.StatusWindow / time.Minute), GeneratedAt: now.UTC(), Platforms: []platformStatus{}}
	seen := map[string]bool{}
	for _, e := range p.cfg.Registry.Live() {
		if e.Kind == registry.Data && !seen[e.Platform] {
			seen[e.Platform] = true
			out.Platforms = append(out.Platforms, platformStatus{store.Summarize(e.Platform, minutes[e.Platform]), checked[e.Platform]})
		}
	}
	return out, nil
}

// lastCanary is the canary's last run by platform; a run that cannot be
// read leaves the canary column empty rather than failing the status.
func (p *Pipeline) lastCanary(ctx context.Context) map[string]*canary.PlatformResult {
	if p.cfg.Canary == nil {
		return nil
	}
	runs, err := p.cfg.Canary.CanaryRuns(ctx, 1, p.cfg.Now())
	if err == nil && len(runs) == 1 {
		var rep canary.Report
		if rep, err = canary.Decode(runs[0].Report); err == nil {
			return rep.Platforms()
		}
	}
	if err != nil {
		p.cfg.Logger.Warn("canary run unreadable for the status", "error", err.Error())
	}
	return nil
}

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
