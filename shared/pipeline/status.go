package pipeline

import (
	"context"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
)

// statusData is GET /v1/status: each data platform's health over the last
// 15 minutes (store.Summarize names the fields and states).
type statusData struct {
	WindowMinutes int                    `json:"window_minutes"`
	GeneratedAt   time.Time              `json:"generated_at"`
	Platforms     []store.PlatformStatus `json:"platforms"`
}

func (p *Pipeline) statusHandler(ctx context.Context, _ *Call) (any, *envelope.Error) {
	now := p.cfg.Now()
	minutes, err := p.cfg.Outcomes.OutcomesSince(ctx, now.Add(-store.StatusWindow), now)
	if err != nil {
		return nil, envelope.Internal()
	}
	out := statusData{WindowMinutes: int(store.StatusWindow / time.Minute), GeneratedAt: now.UTC(), Platforms: []store.PlatformStatus{}}
	seen := map[string]bool{}
	for _, e := range p.cfg.Registry.Live() {
		if e.Kind == registry.Data && !seen[e.Platform] {
			seen[e.Platform] = true
			out.Platforms = append(out.Platforms, store.Summarize(e.Platform, minutes[e.Platform]))
		}
	}
	return out, nil
}

// recordOutcome counts a finished /v1 data request for /v1/status, best
// effort and detached from the caller.
func (p *Pipeline) recordOutcome(x *exchange, latency time.Duration) {
	if p.cfg.Outcomes == nil || x.endpoint == nil || x.endpoint.Kind != registry.Data || x.sandbox || x.w.status == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), billingTimeout)
	defer cancel()
	o := store.Outcome{Platform: x.endpoint.Platform, Status: x.w.status, Latency: latency}
	if err := p.cfg.Outcomes.RecordOutcome(ctx, o, p.cfg.Now()); err != nil {
		p.cfg.Logger.Warn("outcome not recorded", "request_id", x.requestID, "error", err.Error())
	}
}
