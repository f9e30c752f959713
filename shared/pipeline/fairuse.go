package pipeline

import (
	"context"
	"net/http"
	"strconv"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

// fairUseRetry is the wait a degraded refusal asks for while the quota
// store is unavailable.
const fairUseRetry = 30

// fairUse is a metered call's ceiling and the use counted before it.
type fairUse struct {
	limit, used int64
}

// fairUseLimit is the endpoint's 30-day ceiling: configuration first,
// then the registry's default; 0 means not metered.
func (p *Pipeline) fairUseLimit(e *registry.Endpoint) int64 {
	if limit, ok := p.cfg.FairUseLimits[e.Key()]; ok {
		return limit
	}
	return e.FairUse
}

// checkFairUse refuses a metered call whose account reached the ceiling
// (429 FAIR_USE_EXCEEDED), or any metered call while the quota store is
// unavailable (503, degraded): an uncounted metered call is not allowed.
func (p *Pipeline) checkFairUse(x *exchange, c *Call) (*fairUse, *envelope.Error) {
	limit := p.fairUseLimit(c.Endpoint)
	if limit <= 0 || p.cfg.FairUse == nil {
		return nil, nil
	}
	used, err := p.cfg.FairUse.FairUseUsed(x.r.Context(), c.Principal.AccountID, c.Endpoint.Key(), p.cfg.Now())
	if err != nil {
		p.cfg.Logger.Warn("fair-use store unavailable", "request_id", x.requestID, "error", err.Error())
		e := envelope.New(envelope.FairUseExceeded, http.StatusServiceUnavailable,
			"Fair use cannot be checked right now; retry shortly.",
			map[string]any{"limit": limit, "used": nil, "degraded": true})
		return nil, e.WithHeader("retry-after", strconv.Itoa(fairUseRetry)).WithHeader("x-fairuse-degraded", "true")
	}
	fu := &fairUse{limit: limit, used: used}
	if used >= limit {
		setFairUseHeaders(x, fu)
		return nil, envelope.New(envelope.FairUseExceeded, http.StatusTooManyRequests,
			"This account reached the 30-day fair-use ceiling of "+c.Endpoint.Key()+".",
			map[string]any{"limit": limit, "used": used, "degraded": false})
	}
	return fu, nil
}

// countFairUse adds the upstream attempts the handler made (every route
// and retry) once it has run, success or failure; a call no route served
// (all resting) adds nothing.
func (p *Pipeline) countFairUse(x *exchange, c *Call, fu *fairUse) {
	if fu == nil {
		return
	}
	attempts := int64(c.Upstream.Attempts)
	if !c.upstreamRan {
		attempts = max(1, attempts) // a handler that does not trace counts as one attempt
	}
	// Detached: a caller who hangs up does not escape the count.
	total, err := billingOp(x, func(ctx context.Context) (int64, error) {
		return p.cfg.FairUse.AddFairUse(ctx, c.Principal.AccountID, c.Endpoint.Key(), attempts, p.cfg.Now())
	})
	if err != nil {
		p.cfg.Logger.Warn("fair-use count not written", "request_id", x.requestID, "error", err.Error())
		x.w.Header().Set("X-Fairuse-Degraded", "true")
		return
	}
	fu.used = total
	setFairUseHeaders(x, fu)
}

func setFairUseHeaders(x *exchange, fu *fairUse) {
	h := x.w.Header()
	h.Set("X-Fairuse-Limit", strconv.FormatInt(fu.limit, 10))
	h.Set("X-Fairuse-Remaining", strconv.FormatInt(max(0, fu.limit-fu.used), 10))
	h.Set("X-Fairuse-Degraded", "false")
}
