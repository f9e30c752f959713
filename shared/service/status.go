package service

import (
	"context"
	"time"

	"github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
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

func (s *Service) statusHandler(ctx context.Context, _ *Call) (any, *envelope.Error) {
	return s.platformStatus(ctx)
}

// platformStatus is the status of every data platform, as /v1/status and
// the console show it.
func (s *Service) platformStatus(ctx context.Context) (statusData, *envelope.Error) {
	now := s.cfg.Now()
	minutes, err := s.cfg.Outcomes.OutcomesSince(ctx, now.Add(-store.StatusWindow), now)
	if err != nil {
		s.cfg.Logger.Error("status read failed", "error", err.Error())
		return statusData{}, envelope.Internal()
	}
	checked := s.lastCanary(ctx)
	out := statusData{WindowMinutes: int(store.StatusWindow / time.Minute), GeneratedAt: now.UTC(), Platforms: []platformStatus{}}
	seen := map[string]bool{}
	for _, e := range s.cfg.Registry.Live() {
		if e.Kind == registry.Data && !seen[e.Platform] {
			seen[e.Platform] = true
			out.Platforms = append(out.Platforms, platformStatus{store.Summarize(e.Platform, minutes[e.Platform]), checked[e.Platform]})
		}
	}
	return out, nil
}

// lastCanary is the canary's last run by platform; a run that cannot be
// read leaves the canary column empty rather than failing the status.
func (s *Service) lastCanary(ctx context.Context) map[string]*canary.PlatformResult {
	if s.cfg.Canary == nil {
		return nil
	}
	runs, err := s.cfg.Canary.CanaryRuns(ctx, 1, s.cfg.Now())
	if err == nil && len(runs) == 1 {
		var rep canary.Report
		if rep, err = canary.Decode(runs[0].Report); err == nil {
			return rep.Platforms()
		}
	}
	if err != nil {
		s.cfg.Logger.Warn("canary run unreadable for the status", "error", err.Error())
	}
	return nil
}
