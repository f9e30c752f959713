package pipeline

import (
	"context"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/upstream"
)

// upstreamHandler serves a data endpoint over its eligible routes and
// keeps the trace of routes and attempts on the call. The final fault's
// reason (credentials already redacted) goes to the log, never the caller.
func (p *Pipeline) upstreamHandler(key string) Handler {
	return func(ctx context.Context, c *Call) (any, *envelope.Error) {
		out := p.cfg.Upstream.Serve(ctx, key, c.Params.Values)
		c.Upstream, c.upstreamRan = out.Trace, true
		if out.Fault == nil && out.Data != nil {
			if r, ok := out.Data.(upstream.LegsReporter); ok {
				r.ReportLegs(p.cfg.Upstream.PublicLegs(key, out.Trace, c.Endpoint.Path(), c.Endpoint.Cost))
			}
			return out.Data, nil
		}
		if out.Fault != nil {
			p.cfg.Logger.Warn("upstream failed", "request_id", c.RequestID, "endpoint", key,
				"fault", string(out.Fault.Kind), "upstream_status", out.Fault.Status, "reason", out.Fault.Reason)
		}
		if out.AllowanceErr != nil {
			// Failed closed: a scarce route is not called uncounted.
			p.cfg.Logger.Error("upstream allowance not taken", "request_id", c.RequestID, "endpoint", key,
				"error", out.AllowanceErr.Error())
		}
		return nil, out.Error()
	}
}

// checkURLs refuses a live call whose URL-typed parameter leads to a
// non-public address (upstream.CheckURLParams).
func (p *Pipeline) checkURLs(x *exchange, c *Call) *envelope.Error {
	if c.Sandbox {
		return nil
	}
	return upstream.CheckURLParams(x.r.Context(), p.cfg.URLPolicy, c.Endpoint, c.Params.Values)
}
