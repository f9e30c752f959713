package pipeline

import (
	"net/http"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
)

// Surface serves paths of its own outside /v1 (the console and the
// operator API, shared/console; /mcp, shared/mcpserver) inside the
// pipeline's handling of a request: its request id, log line and
// recovered panic, and the effects its answer implies landed before the
// answer leaves. It reaches the request only through the Exchange it is
// given.
type Surface interface {
	// Owns reports whether the surface answers path.
	Owns(path string) bool
	Serve(x *Exchange)
}

// surface is the surface that owns path, or nil.
func (p *Pipeline) surface(path string) Surface {
	for _, s := range p.cfg.Surfaces {
		if s.Owns(path) {
			return s
		}
	}
	return nil
}

// Exchange is a surface's request in flight.
type Exchange struct {
	x *exchange
	p *Pipeline
}

// Request is the request being answered.
func (e *Exchange) Request() *http.Request { return e.x.r }

// Writer is where the answer is written; it is held until its effects
// have landed.
func (e *Exchange) Writer() http.ResponseWriter { return e.x.w }

// RequestID is the request's id (x-request-id).
func (e *Exchange) RequestID() string { return e.x.requestID }

// Fail answers err as the error envelope.
func (e *Exchange) Fail(err *envelope.Error) { e.x.fail(err) }

// Idempotent applies the request's Idempotency-Key, if it has one, with
// the rules of direct GETs (spec 3.2): 24 hours, 409 while in progress,
// 422 for another request, the original status and body replayed.
// owner namespaces the key (an account id, or the operator's scope);
// request is the canonical request the key is bound to; credential, when
// set, seals the stored body so a retry reveals it again only when it
// presents the same credential. handled means the answer is given (a
// replay or a refusal); otherwise the outcome is stored as it lands.
func (e *Exchange) Idempotent(owner, request, credential string) (handled bool) {
	finish, handled := e.p.claimIdempotency(e.x, idemScope{owner: owner, fingerprint: digest(request), secret: credential})
	if finish != nil {
		e.x.effect(finish)
	}
	return handled
}

// Authenticate checks the request's API key as /v1 does (Bearer
// accepted, spec 5.2), counting a wrong one against the client's
// invalid-key throttle, without admitting the request against the
// limits; a refusal is the envelope to answer with.
func (e *Exchange) Authenticate() *envelope.Error {
	query, _ := params.Parse(e.x.r.URL.RawQuery)
	_, refusal := e.p.authenticate(e.x, query, true, false)
	return refusal
}
