package pipeline

import (
	"context"
	"net/http"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
)

// upstreamHandler serves a data endpoint over its eligible routes and
// keeps the trace of routes and attempts on the call.
func upstreamHandler(r *upstream.Runner, key string) Handler {
	return func(ctx context.Context, c *Call) (any, *envelope.Error) {
		out := r.Serve(ctx, key, c.Params.Values)
		c.Upstream = out.Trace
		if out.Fault != nil || out.Data == nil {
			return nil, out.Error()
		}
		return out.Data, nil
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
			return envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
				param.Name+" is not fetched: "+err.Error(),
				map[string]any{"field": param.Name, "reason": "unsafe_url"})
		}
	}
	return nil
}
