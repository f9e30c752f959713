// Package envelope holds the response envelopes of spec 2.1 and 2.2 and the
// stable error-type roster of spec part 7.
package envelope

import (
	"fmt"
	"net/http"
	"strings"
)

// Type is a stable error type; clients branch on it (spec 7, 9.5).
type Type string

// The roster of spec part 7. It is stable across releases.
const (
	Unauthorized         Type = "UNAUTHORIZED"
	KeyRevoked           Type = "KEY_REVOKED" // listed, never emitted: a revoked key answers UNAUTHORIZED
	KeyLimitExceeded     Type = "KEY_LIMIT_EXCEEDED"
	RateLimited          Type = "RATE_LIMITED"
	FairUseExceeded      Type = "FAIR_USE_EXCEEDED"
	InsufficientCredits  Type = "INSUFFICIENT_CREDITS"
	ResourceNotFound     Type = "RESOURCE_NOT_FOUND"
	InvalidParameters    Type = "INVALID_PARAMETERS"
	UpstreamError        Type = "UPSTREAM_ERROR"
	UpstreamTimeout      Type = "UPSTREAM_TIMEOUT"
	EndpointNotAvailable Type = "ENDPOINT_NOT_AVAILABLE"
	EndpointNotFound     Type = "ENDPOINT_NOT_FOUND"
	InternalError        Type = "INTERNAL_ERROR"
)

// TypeInfo describes one roster entry for the errors reference and catalogues.
type TypeInfo struct {
	Type      Type
	Statuses  []int
	Condition string
	Emitted   bool
}

// Roster lists every error type in the order of spec part 7.
var Roster = []TypeInfo{
	{Unauthorized, []int{401}, "No key, an unrecognised, revoked or deleted key, or a key in the query string.", true},
	{KeyRevoked, nil, "Reserved: listed but never emitted. A revoked key answers UNAUTHORIZED; treat it like UNAUTHORIZED.", false},
	{KeyLimitExceeded, []int{402}, "The key's credit_limit would be exceeded.", true},
	{RateLimited, []int{429}, "More than 600 requests in the last minute, more than 25 in flight, throttled invalid-key attempts, or (async=1) an account's web jobs at their cap.", true},
	{FairUseExceeded, []int{429, 503}, "The rolling 30-day fair-use ceiling of a metered endpoint was reached (503 while the quota system is unavailable).", true},
	{InsufficientCredits, []int{402}, "The balance is below the call's cost.", true},
	{ResourceNotFound, []int{404}, "The endpoint exists but the requested thing does not.", true},
	{InvalidParameters, []int{400, 409, 413, 422}, "Undeclared, missing or invalid parameters, a malformed or oversized batch, or an idempotency conflict.", true},
	{UpstreamError, []int{502, 503, 429}, "The source answered unusably, or is in a short cooldown (503).", true},
	{UpstreamTimeout, []int{504}, "No attempt finished inside the adapter's timeout.", true},
	{EndpointNotAvailable, []int{501}, "The path is known but no eligible real-data route can serve it.", true},
	{EndpointNotFound, []int{404, 410}, "Unknown path, or a retired endpoint (410).", true},
	{InternalError, []int{500}, "A server-side failure, logged against request_id.", true},
}

// Anchor is the doc_url fragment of a type: lowercased, underscores as hyphens (spec 2.2).
func (t Type) Anchor() string {
	return strings.ReplaceAll(strings.ToLower(string(t)), "_", "-")
}

// DocURL appends the type's anchor to the errors-reference address.
func DocURL(base string, t Type) string {
	base, _, _ = strings.Cut(base, "#")
	return base + "#" + t.Anchor()
}

// Error is a typed failure on its way to the error envelope.
type Error struct {
	Type    Type
	Status  int
	Message string
	Details map[string]any
	// Header holds response headers that belong to this failure (retry-after, allow).
	Header http.Header
	// CreditsRemaining is the balance when it is known.
	CreditsRemaining *int64
	// ChargePending: a refund could not be written yet, so credits_used is
	// null until reconciliation (spec 7).
	ChargePending bool
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d): %s", e.Type, e.Status, e.Message) }

// New builds a typed error.
func New(t Type, status int, message string, details map[string]any) *Error {
	return &Error{Type: t, Status: status, Message: message, Details: details}
}

// WithHeader sets a response header that travels with the error.
func (e *Error) WithHeader(name, value string) *Error {
	if e.Header == nil {
		e.Header = http.Header{}
	}
	e.Header.Set(name, value)
	return e
}

// Internal is the only shape a server fault takes in a response body.
func Internal() *Error {
	return New(InternalError, http.StatusInternalServerError,
		"An internal error occurred. It has been logged against this request_id.", nil)
}

// ForwardedProto is the scheme the caller used, as the first proxy (API
// Gateway) recorded it in x-forwarded-proto; lower case, "" when absent.
func ForwardedProto(r *http.Request) string {
	return strings.ToLower(strings.TrimSpace(strings.Split(r.Header.Get("x-forwarded-proto"), ",")[0]))
}

// ErrorsReference is the /docs/errors page of the deployment reached at
// proto://host. A host that is not a plain host[:port] is not echoed.
func ErrorsReference(proto, host string) string {
	if !plainHost(host) {
		host = "localhost"
	}
	return proto + "://" + host + "/docs/errors"
}

func plainHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-:[]", c)) {
			return false
		}
	}
	return true
}

// FieldError is the 422 INVALID_PARAMETERS about one field: details.field
// names it and details.reason says what is wrong.
func FieldError(field, reason, message string) *Error {
	return New(InvalidParameters, http.StatusUnprocessableEntity, message, map[string]any{"field": field, "reason": reason})
}
