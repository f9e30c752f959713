package pipeline

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
)

// serveAPI runs the life of a call (design notes, "The life of a paid
// call") for /v1 and its /sandbox twin: resolve, authenticate, validate,
// dispatch. Later stages (admission, idempotency, cache, billing) slot in
// between validation and dispatch.
func (p *Pipeline) serveAPI(x *exchange, v1Path string, sandbox bool) {
	// Every call ends inside RequestTimeout, so the leases of its in-flight
	// slot and Idempotency-Key claim (longer) never lapse while it runs.
	ctx, cancel := context.WithTimeout(x.r.Context(), RequestTimeout)
	defer cancel()
	x.r = x.r.WithContext(ctx)
	res, rerr := p.cfg.Registry.Resolve(v1Path)
	if rerr != nil {
		x.fail(rerr)
		return
	}
	e := res.Endpoint
	x.endpoint, x.sandbox = e, sandbox
	setDeprecationHeaders(x.w.Header(), e) // on every answer of the endpoint, refusals included
	if x.r.Method != e.HTTPMethod() {
		x.fail(methodNotAllowed(e, x.r.Method))
		return
	}
	query, qerr := params.Parse(x.r.URL.RawQuery)
	var validated params.Result
	var verr *envelope.Error
	if qerr == nil {
		validated, verr = params.Validate(e, query, res.PathParams)
	}
	// A batch wrapper is not admitted itself: its items are, one by one.
	metered := e.Platform != "batch"
	// The response cache does not depend on the caller: its lookup runs
	// beside authentication and admission, and is used only once both
	// have passed (a refused request never sees cached data).
	var lookup *cacheLookup
	if qerr == nil && verr == nil && !sandbox && (x.runAs != "" || auth.WellFormed(auth.FromRequest(x.r, x.r.Method == http.MethodGet).Key)) {
		lookup = p.startLookup(x, e, validated)
	}
	principal, aerr := p.authenticate(x, query, x.r.Method == http.MethodGet, metered)
	if aerr != nil {
		x.fail(aerr)
		return
	}
	if metered {
		if refusal := p.admit(x, principal); refusal != nil {
			x.fail(refusal)
			return
		}
		p.releaseSlot(x, principal)
	}
	if qerr != nil {
		x.fail(qerr)
		return
	}
	if verr != nil {
		x.fail(verr)
		return
	}
	call := &Call{RequestID: x.requestID, Endpoint: e, Params: validated, Principal: principal, Sandbox: sandbox, Request: x.r,
		lookup: lookup, effect: x.effect}
	x.call = call
	finish, handled := p.idempotency(x, call)
	if handled {
		return
	}
	if finish != nil {
		// It lands once the answer is known, so it sees the status of
		// every answer, refusals and panics included: a refused request
		// frees its key for the retry.
		x.effect(finish)
	}
	// A request with an Idempotency-Key takes its slot once the key is
	// claimed (a replay or a 409 takes none), beside a paid call's reserve.
	call.slot = p.startSlot(metered, x, principal)
	defer func() { _ = call.slot() }() // before the release: it must know
	p.dispatch(x, call)
}

// Bearer (spec 5.2) is accepted on GET requests under /v1 and /sandbox
// (and on /mcp); never on POST /v1/batch.
// A metered request is admitted in the same store step when the pipeline
// has a gate (x.entered).
func (p *Pipeline) authenticate(x *exchange, query params.Query, bearerAllowed, metered bool) (auth.Principal, *envelope.Error) {
	if _, inQuery := query[auth.QueryKeyParam]; inQuery {
		return auth.Principal{}, Unauthorized("query_string_key_rejected",
			"API keys are not accepted in the query string; send the x-api-key header. Treat the exposed key as compromised and rotate it.")
	}
	if x.runAs != "" {
		return p.authenticateHash(x, x.runAs, metered)
	}
	presented := auth.FromRequest(x.r, bearerAllowed)
	client := auth.ClientOf(x.r)
	if presented.Key != "" && p.cfg.Throttle != nil {
		if wait, blocked := p.cfg.Throttle.Blocked(client); blocked {
			return auth.Principal{}, RateLimited("invalid_key_attempts", wait,
				"Too many requests with invalid API keys from this client.")
		}
	}
	switch {
	case presented.BearerRefused:
		return auth.Principal{}, Unauthorized("missing_api_key",
			"Authorization: Bearer is accepted only on GET requests under /v1 and /sandbox and on /mcp; send the x-api-key header.")
	case presented.Key == "":
		return auth.Principal{}, Unauthorized("missing_api_key", "Send your API key in the x-api-key header.")
	case !auth.WellFormed(presented.Key):
		p.invalidKey(client)
		return auth.Principal{}, Unauthorized("invalid_api_key", "The API key is not valid.")
	}
	var principal auth.Principal
	var err error
	if p.gate != nil && metered {
		var a store.Admission
		principal, a, err = auth.Enter(x.r.Context(), p.gateFor(x), presented.Key, x.requestID, p.cfg.Now(), p.cfg.LimitRules, !hasIdempotencyKey(x))
		if errors.Is(err, store.ErrContended) {
			return auth.Principal{}, contended(p.cfg.LimitRules) // the key's record is hot: it exists
		}
		x.entered = &a
	} else {
		principal, err = p.cfg.Keys.Authenticate(x.r.Context(), presented.Key)
	}
	if errors.Is(err, auth.ErrUnknownKey) {
		p.invalidKey(client)
	}
	return p.authenticated(x, principal, err)
}

// authenticateHash authenticates and admits a call made with a key known
// by its hash, under the same rules as a presented key.
func (p *Pipeline) authenticateHash(x *exchange, hash string, metered bool) (auth.Principal, *envelope.Error) {
	keys, ok := p.cfg.Keys.(auth.StoreKeys)
	if !ok {
		return p.authenticated(x, auth.Principal{}, errors.New("pipeline: calls for an account need the store's keys"))
	}
	if p.gate != nil && metered {
		principal, a, err := auth.EnterHash(x.r.Context(), p.gate, hash, x.requestID, p.cfg.Now(), p.cfg.LimitRules, !hasIdempotencyKey(x))
		if errors.Is(err, store.ErrContended) {
			return auth.Principal{}, contended(p.cfg.LimitRules)
		}
		x.entered = &a
		return p.authenticated(x, principal, err)
	}
	principal, err := keys.AuthenticateHash(x.r.Context(), hash)
	return p.authenticated(x, principal, err)
}

// authenticated maps a key lookup's outcome to the principal or its refusal.
func (p *Pipeline) authenticated(x *exchange, principal auth.Principal, err error) (auth.Principal, *envelope.Error) {
	if errors.Is(err, auth.ErrUnknownKey) {
		return auth.Principal{}, Unauthorized("invalid_api_key", "The API key is not valid.")
	}
	if err != nil {
		p.cfg.Logger.Error("key lookup failed", "request_id", x.requestID, "error", auth.Redact(err.Error()))
		return auth.Principal{}, envelope.Internal()
	}
	return principal, nil
}

func (p *Pipeline) invalidKey(client string) {
	if p.cfg.Throttle != nil {
		p.cfg.Throttle.Failed(client)
	}
}

// RateLimited is the 429 RATE_LIMITED with details.reason, the wait in
// details.retry_after_seconds and a retry-after header.
func RateLimited(reason string, wait time.Duration, message string) *envelope.Error {
	seconds := int64(math.Ceil(wait.Seconds()))
	if seconds < 1 {
		seconds = 1
	}
	e := envelope.New(envelope.RateLimited, http.StatusTooManyRequests, message,
		map[string]any{"reason": reason, "retry_after_seconds": seconds})
	return e.WithHeader("retry-after", strconv.FormatInt(seconds, 10))
}

// Unauthorized is the 401 UNAUTHORIZED with details.reason.
func Unauthorized(reason, message string) *envelope.Error {
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
	if !d.Announced.IsZero() {
		h.Set("deprecation", "@"+strconv.FormatInt(d.Announced.Unix(), 10))
	}
	if !d.Sunset.IsZero() {
		h.Set("sunset", d.Sunset.UTC().Format(http.TimeFormat))
	}
	if d.Link != "" {
		h.Set("link", "<"+d.Link+`>; rel="deprecation"`)
	}
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
