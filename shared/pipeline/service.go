package pipeline

import (
	"context"
	"net/http"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/service"
)

// serviceHandler serves one of the service's own endpoints
// (shared/service) as a built-in: it hands the handler what it reads of
// the call, and keeps the balance it learns.
func serviceHandler(h service.Handler) Handler {
	return func(ctx context.Context, c *Call) (any, *envelope.Error) {
		sc := &service.Call{RequestID: c.RequestID, Endpoint: c.Endpoint, Values: c.Params.Values, Principal: c.Principal, Request: c.Request}
		data, err := h(ctx, sc)
		if sc.CreditsRemaining != nil {
			c.CreditsRemaining = sc.CreditsRemaining
		}
		return data, err
	}
}

// serveOpenAPI answers GET /openapi.json and /openapi.yaml with the
// service's OpenAPI document.
func (p *Pipeline) serveOpenAPI(x *exchange, asYAML bool) {
	body, contentType, err := p.svc.OpenAPI(x.r, asYAML)
	if err != nil {
		p.cfg.Logger.Error("openapi", "request_id", x.requestID, "error", err.Error())
		x.fail(envelope.Internal())
		return
	}
	x.w.Header().Set("Content-Type", contentType)
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(body)
}
