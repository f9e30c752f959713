package openapi

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

// outcome is one error status an operation can answer, with the types it
// carries there and when.
type outcome struct {
	status int
	types  []envelope.Type
	when   []string
}

// outcomes lists the error statuses of spec 7 that apply to e, derived
// from what the pipeline does with it: every /v1 call is authenticated,
// admitted and validated; a GET may carry an Idempotency-Key; a data
// endpoint is reserved, fetched from its source and refunded on failure.
// Types are added in roster order within a status.
func outcomes(e *registry.Endpoint) []outcome {
	byStatus := map[int]*outcome{}
	var order []int
	add := func(status int, t envelope.Type, when string) {
		o := byStatus[status]
		if o == nil {
			o = &outcome{status: status}
			byStatus[status] = o
			order = append(order, status)
		}
		if !contains(o.types, t) {
			o.types = append(o.types, t)
		}
		o.when = append(o.when, when)
	}
	get := e.HTTPMethod() == http.MethodGet
	data := e.Kind == registry.Data
	if e.Platform == "batch" {
		add(400, envelope.InvalidParameters, "a malformed body, or more than 20 items (details.max)")
	} else {
		add(400, envelope.InvalidParameters, "an undeclared parameter (details.unknown_parameters, accepted_parameters and suggestions), or a malformed or oversized query")
	}
	add(401, envelope.Unauthorized, "no key, an unknown, revoked or deleted key, or a key in the query string (details.reason)")
	if data && e.Cost > 0 {
		add(402, envelope.KeyLimitExceeded, "the key's credit_limit would be exceeded")
		add(402, envelope.InsufficientCredits, "the balance is below the call's cost")
	}
	if data || e.MayNotFind {
		add(404, envelope.ResourceNotFound, "what was asked for does not exist")
	}
	if strings.Contains(e.ID, "{") {
		add(404, envelope.EndpointNotFound, "the path identifier is not an identifier (spec 4.1)")
	}
	if get {
		add(409, envelope.InvalidParameters, "a request with the same Idempotency-Key is still in progress")
	}
	if e.Platform == "batch" {
		add(413, envelope.InvalidParameters, "the body is over the size limit")
	}
	if e.Platform != "batch" {
		add(422, envelope.InvalidParameters, "a missing, blank or invalid parameter value (details.field, reason; missing)")
	}
	if get {
		add(422, envelope.InvalidParameters, "an Idempotency-Key reused for a different request, or longer than 255 characters")
	}
	add(429, envelope.RateLimited, "more than 600 requests a minute or 25 in flight for the key, or repeated invalid keys (retry-after)")
	if e.Async {
		add(429, envelope.RateLimited, "with async=1: the account's web jobs queued or running are at their cap (details.reason job_queue_full, retry-after); nothing is reserved")
	}
	if e.FairUse > 0 {
		add(429, envelope.FairUseExceeded, "the rolling 30-day fair-use ceiling of this metered endpoint was reached")
	}
	if data {
		add(429, envelope.UpstreamError, "the source's own rate limit is exhausted (retry-after when known)")
	}
	if e.LimitedCapacity {
		add(429, envelope.UpstreamError, "the endpoint's shared monthly capacity is used up (details.reason capacity_exhausted, resets_at; retry-after to the reset)")
	}
	add(500, envelope.InternalError, "a server-side failure, logged against request_id")
	if data || (e.Kind == registry.ServiceOwned && e.Origin == registry.SpecNamed) {
		add(501, envelope.EndpointNotAvailable, "no eligible real-data route can serve it in this deployment (details.sandbox names the free synthetic twin)")
	}
	if data {
		add(502, envelope.UpstreamError, "the source answered unusably")
		add(503, envelope.UpstreamError, "the source is in a short cooldown and was not called (retry-after)")
	}
	if e.LimitedCapacity {
		add(503, envelope.UpstreamError, "the capacity counter could not be read, so the source was not called (details.reason capacity_unavailable, retry-after)")
	}
	if e.FairUse > 0 {
		add(503, envelope.FairUseExceeded, "the fair-use quota system is unavailable (x-fairuse-degraded, retry-after)")
	}
	if data {
		add(504, envelope.UpstreamTimeout, "no attempt finished inside the adapter's timeout")
	}
	out := make([]outcome, 0, len(order))
	for _, s := range order {
		out = append(out, *byStatus[s])
	}
	return out
}

func contains(types []envelope.Type, t envelope.Type) bool {
	for _, x := range types {
		if x == t {
			return true
		}
	}
	return false
}

// responseSet builds the error responses of every operation, sharing
// each distinct one as a component (most data endpoints answer alike), and
// the header components they use.
type responseSet struct {
	responses obj
	headers   obj
}

func newResponseSet() *responseSet { return &responseSet{responses: obj{}, headers: obj{}} }

// errorResponse documents one error status of an operation: the error
// envelope with error.type narrowed to the types it can carry there.
// Its component name says everything its content depends on: the status,
// the types and the operation's traits (traits); so equal names mean
// equal responses, which share checks.
func (rs *responseSet) errorResponse(e *registry.Endpoint, o outcome) obj {
	var types []any
	name := "Error" + statusKey(o.status)
	for _, t := range o.types {
		types = append(types, string(t))
		name += "_" + camel(string(t), "_")
	}
	name += traits(e)
	desc := http.StatusText(o.status) + ": "
	for i, t := range o.types {
		if i > 0 {
			desc += "; "
		}
		desc += string(t)
	}
	desc += ". When " + strings.Join(o.when, "; or ") + "."
	return rs.share(name, obj{
		"description": desc,
		"headers":     rs.responseHeaders(e, o.status),
		"content": obj{"application/json": obj{"schema": obj{
			"allOf": []any{
				ref("ErrorEnvelope"),
				obj{"properties": obj{"error": obj{"properties": obj{
					"type":   obj{"enum": types},
					"status": obj{"const": o.status},
				}}}},
			},
		}}},
	})
}

// defaultResponse is any other typed error.
func (rs *responseSet) defaultResponse(e *registry.Endpoint) obj {
	return rs.share("Error"+traits(e), obj{
		"description": "Any other typed error (spec 2.2); branch on error.type.",
		"headers":     rs.responseHeaders(e, 0),
		"content":     obj{"application/json": obj{"schema": ref("ErrorEnvelope")}},
	})
}

// share keeps a response as a component and returns its reference.
func (rs *responseSet) share(name string, response obj) obj {
	if prev, ok := rs.responses[name]; ok && !reflect.DeepEqual(prev, response) {
		panic("openapi: two different responses named " + name)
	}
	rs.responses[name] = response
	return obj{"$ref": "#/components/responses/" + name}
}

// traits names what, besides status and types, shapes an operation's
// responses (their headers and wording).
func traits(e *registry.Endpoint) string {
	t := ""
	if e.Platform == "batch" {
		t += "_Batch"
	} else if m := e.HTTPMethod(); m != http.MethodGet {
		t += "_" + camel(m, "_") // no Bearer, no Idempotency-Key
	}
	if e.FairUse > 0 {
		t += "_Metered"
	}
	if e.LimitedCapacity {
		t += "_LimitedCapacity"
	}
	if e.Async {
		t += "_Async"
	}
	if e.Deprecated != nil {
		t += "_Deprecated"
	}
	return t
}

func camel(s, sep string) string {
	parts := strings.Split(strings.ToLower(s), sep)
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// responseHeaders are the headers of spec 4.9 that a response of e with
// this status may carry (0: any error status).
func (rs *responseSet) responseHeaders(e *registry.Endpoint, status int) obj {
	h := obj{}
	use := func(names ...string) {
		for _, n := range names {
			component := camel(n, "-")
			rs.headers[component] = headerDocs[n]
			h[n] = obj{"$ref": "#/components/headers/" + component}
		}
	}
	use("x-request-id", "x-credits-used", "x-credits-remaining")
	admitted := e.Platform != "batch" // the batch wrapper is not admitted itself; its items are
	if admitted && status != http.StatusUnauthorized {
		use("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-concurrency-limit", "x-concurrency-remaining")
	}
	if status == 0 || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		use("retry-after")
	}
	if e.FairUse > 0 && (status == http.StatusOK || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
		use("x-fairuse-limit", "x-fairuse-remaining", "x-fairuse-degraded")
	}
	if status == http.StatusOK {
		use("x-cache")
	}
	if e.HTTPMethod() == http.MethodGet && status != http.StatusUnauthorized {
		use("x-idempotent-replay", "x-idempotency-status")
	}
	if e.Deprecated != nil {
		use("deprecation", "sunset", "link")
	}
	return h
}

// headerDocs are the response headers of spec 4.9.
var headerDocs = map[string]obj{
	"x-request-id":            header("Equals the body's request_id.", obj{"type": "string", "pattern": "^req_"}),
	"x-credits-used":          header("Credits charged; 0 on any failure; absent while a charge is pending reconciliation.", obj{"type": "integer", "minimum": 0}),
	"x-credits-remaining":     header("The balance after the call, when known.", obj{"type": "integer", "minimum": 0}),
	"x-cache":                 header("HIT: served from the cache, costing 0 credits; MISS: a fresh answer (spec 4.9). A dry run's data.cache tells more.", obj{"type": "string", "enum": []any{"HIT", "MISS"}}),
	"x-ratelimit-limit":       header("Requests the key may make in the sliding one-minute window.", obj{"type": "integer"}),
	"x-ratelimit-remaining":   header("Requests left in the window, this one included.", obj{"type": "integer"}),
	"x-ratelimit-reset":       header("Unix second when the oldest request in the window ages out.", obj{"type": "integer"}),
	"x-concurrency-limit":     header("Requests the key may have in flight.", obj{"type": "integer"}),
	"x-concurrency-remaining": header("Free in-flight slots as this request entered.", obj{"type": "integer"}),
	"retry-after":             header("Seconds to wait before retrying.", obj{"type": "integer", "minimum": 0}),
	"x-fairuse-limit":         header("The 30-day fair-use ceiling of this metered endpoint; absence does not mean unlimited.", obj{"type": "integer"}),
	"x-fairuse-remaining":     header("Upstream attempts left under the ceiling.", obj{"type": "integer"}),
	"x-fairuse-degraded":      header("true while the quota system is unavailable.", obj{"type": "string", "enum": []any{"true", "false"}}),
	"x-idempotent-replay":     header("true when this is the stored answer of an earlier request with the same Idempotency-Key.", obj{"type": "string", "enum": []any{"true"}}),
	"x-idempotency-status":    header("unavailable when the idempotency store could not be reached: the call ran without replay protection.", obj{"type": "string", "enum": []any{"unavailable"}}),
	"deprecation":             header("When the deprecation was announced (RFC 9745 structured date: @ and Unix seconds).", obj{"type": "string"}),
	"sunset":                  header("When the endpoint goes (RFC 8594, an HTTP date).", obj{"type": "string"}),
	"link":                    header("Where to read about the deprecation (rel=\"deprecation\").", obj{"type": "string"}),
}

func header(description string, schema obj) obj {
	return obj{"description": description, "schema": schema}
}

// statusKey is a status as an OpenAPI responses key.
func statusKey(status int) string { return strconv.Itoa(status) }
