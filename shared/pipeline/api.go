package pipeline

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
)

// serveAPI runs the life of a call (design notes, "The life of a paid
// call") for /v1 and its /sandbox twin: resolve, authenticate, validate,
// dispatch. Later stages (admission, idempotency, cache, billing) slot in
// between validation and dispatch.
func (p *Pipeline) serveAPI(x *exchange, v1Path string, sandbox bool) {
	res, rerr := p.cfg.Registry.Resolve(v1Path)
	if rerr != nil {
		x.fail(rerr)
		return
	}
	e := res.Endpoint
	x.endpoint = e
	setDeprecationHeaders(x.w.Header(), e) // on every answer of the endpoint, refusals included
	if x.r.Method != e.HTTPMethod() {
		x.fail(methodNotAllowed(e, x.r.Method))
		return
	}
	query, qerr := params.Parse(x.r.URL.RawQuery)
	principal, aerr := p.authenticate(x, query, bearerAccepted(e))
	if aerr != nil {
		x.fail(aerr)
		return
	}
	if qerr != nil {
		x.fail(qerr)
		return
	}
	validated, verr := params.Validate(e, query, res.PathParams)
	if verr != nil {
		x.fail(verr)
		return
	}
	call := &Call{RequestID: x.requestID, Endpoint: e, Params: validated, Principal: principal, Sandbox: sandbox, Request: x.r}
	p.dispatch(x, call)
}

// bearerAccepted is spec 5.2: Bearer works on GET /v1, GET /sandbox and
// /mcp only; /sandbox resolves to the same index endpoint as /v1.
func bearerAccepted(e *registry.Endpoint) bool {
	return e.Platform == "" && e.ID == ""
}

func (p *Pipeline) authenticate(x *exchange, query params.Query, bearerAllowed bool) (auth.Principal, *envelope.Error) {
	if _, inQuery := query[auth.QueryKeyParam]; inQuery {
		return auth.Principal{}, unauthorized("query_string_key_rejected",
			"API keys are not accepted in the query string; send the x-api-key header. Treat the exposed key as compromised and rotate it.")
	}
	presented := auth.FromRequest(x.r, bearerAllowed)
	switch {
	case presented.BearerRefused:
		return auth.Principal{}, unauthorized("missing_api_key",
			"Authorization: Bearer is accepted only on GET /v1, GET /sandbox and /mcp; send the x-api-key header.")
	case presented.Key == "":
		return auth.Principal{}, unauthorized("missing_api_key", "Send your API key in the x-api-key header.")
	case !auth.WellFormed(presented.Key):
		return auth.Principal{}, unauthorized("invalid_api_key", "The API key is not valid.")
	}
	principal, err := p.cfg.Keys.Authenticate(x.r.Context(), presented.Key)
	if errors.Is(err, auth.ErrUnknownKey) {
		return auth.Principal{}, unauthorized("invalid_api_key", "The API key is not valid.")
	}
	if err != nil {
		p.cfg.Logger.Error("key lookup failed", "request_id", x.requestID, "error", auth.Redact(err.Error()))
		return auth.Principal{}, envelope.Internal()
	}
	return principal, nil
}

func unauthorized(reason, message string) *envelope.Error {
	return envelope.New(envelope.Unauthorized, http.StatusUnauthorized, message, map[string]any{"reason": reason})
}

// methodNotAllowed keeps to the roster: the path exists, but not for this
// method, so no endpoint answers the request.
func methodNotAllowed(e *registry.Endpoint, method string) *envelope.Error {
	err := envelope.New(envelope.EndpointNotFound, http.StatusNotFound,
		e.Path()+" answers "+e.HTTPMethod()+" only.",
		map[string]any{
			"platform": e.Platform, "endpoint": e.ID,
			"reason": "method_not_allowed", "method": auth.ForLog(method, 16), "allowed_methods": []string{e.HTTPMethod()},
		})
	return err.WithHeader("allow", e.HTTPMethod())
}

// setDeprecationHeaders announces a deprecated endpoint (spec 9.3): the
// deprecation date as an RFC 9745 structured date, sunset as an HTTP date
// (RFC 8594) and a link with rel="deprecation".
func setDeprecationHeaders(h http.Header, e *registry.Endpoint) {
	d := e.Deprecated
	if d == nil {
		return
	}
	h.Set("deprecation", "@"+strconv.FormatInt(d.Announced.Unix(), 10))
	if !d.Sunset.IsZero() {
		h.Set("sunset", d.Sunset.UTC().Format(http.TimeFormat))
	}
	if d.Link != "" {
		h.Set("link", "<"+d.Link+`>; rel="deprecation"`)
	}
}

// dispatch hands the call to its endpoint's handler.
func (p *Pipeline) dispatch(x *exchange, c *Call) {
	e := c.Endpoint
	h, ok := p.cfg.Handlers[e.Key()]
	if !ok || c.Sandbox {
		x.fail(notAvailable(e, c.Sandbox))
		return
	}
	data, err := h(x.r.Context(), c)
	if err != nil {
		x.fail(err)
		return
	}
	p.succeed(x, c, data)
}

// notAvailable is the truthful answer when no eligible route can serve an
// endpoint: 501 ENDPOINT_NOT_AVAILABLE, pointing data endpoints at their
// free sandbox twin.
func notAvailable(e *registry.Endpoint, sandbox bool) *envelope.Error {
	switch {
	case sandbox:
		return envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented,
			"The sandbox is not available in this deployment.", nil)
	case e.Kind == registry.Data:
		return envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented,
			"No live data source is configured for "+e.Key()+" in this deployment. The sandbox path returns free synthetic data.",
			map[string]any{"sandbox": e.SandboxPath()})
	}
	return envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented,
		e.Path()+" is not available in this deployment.", nil)
}

func (p *Pipeline) succeed(x *exchange, c *Call, data any) {
	s := envelope.Success{
		Success:     true,
		Platform:    c.Endpoint.Platform,
		Endpoint:    c.Endpoint.Path(),
		Data:        data,
		CreditsUsed: envelope.Amount(0),
		RequestID:   x.requestID,
		Synthetic:   c.Sandbox,
	}
	body, err := envelope.Marshal(s)
	if err != nil {
		p.cfg.Logger.Error("encode response", "request_id", x.requestID, "error", err.Error())
		x.fail(envelope.Internal())
		return
	}
	x.w.Header().Set("x-cache", "MISS")
	envelope.WriteJSON(x.w, http.StatusOK, x.requestID, s.CreditsUsed, s.CreditsRemaining, body)
}
