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
		p.cfg.Logger.Error("status read failed", "error", err.Error())
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

// outcomeTimeout bounds a status counter write; a lost count only blurs
// the status a little.
const outcomeTimeout = time.Second

// recordOutcome counts, for /v1/status, a finished /v1 data call that
// reached its source or the cache: refusals (authentication, validation,
// limits, payment) and unrouted paths are not the platform's health. The
// write runs after the response, off the request's path.
func (p *Pipeline) recordOutcome(x *exchange, latency time.Duration) {
	if p.cfg.Outcomes == nil || !x.served || x.sandbox {
		return
	}
	o := store.Outcome{Platform: x.endpoint.Platform, Status: x.w.status, ErrorType: string(x.errType), Latency: latency}
	now, ctx := p.cfg.Now(), context.WithoutCancel(x.r.Context())
	p.background.Add(1)
	go func() {
		defer p.background.Done()
		ctx, cancel := context.WithTimeout(ctx, outcomeTimeout)
		defer cancel()
		if _, err := p.cfg.Outcomes.RecordOutcome(ctx, x.requestID, o, now); err != nil {
			p.cfg.Logger.Warn("outcome not recorded", "request_id", x.requestID, "error", err.Error())
		}
	}()
}

// Wait blocks until background writes (status counters) are done; tests
// and a shutting-down server call it.
func (p *Pipeline) Wait() { p.background.Wait() }
