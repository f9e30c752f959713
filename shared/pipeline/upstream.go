package pipeline

import (
	"context"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
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
// non-public address (spec: unparseable or unusable URL, 422 naming the
// field), before any cache lookup, fetch or charge.
func (p *Pipeline) checkURLs(x *exchange, c *Call) *envelope.Error {
	if p.cfg.URLPolicy == nil || c.Sandbox {
		return nil
	}
	for _, param := range c.Endpoint.Params {
		v, ok := c.Params.Values[param.Name]
		if param.Type != registry.URL || !ok {
			continue
		}
		if _, err := p.cfg.URLPolicy.Check(x.r.Context(), v); err != nil {
			return upstream.URLRefusal(param.Name, err)
		}
	}
	return nil
}
