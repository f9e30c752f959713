// Package openapi generates the OpenAPI 3.1 description of the registry
// at runtime (spec 4.2, 9.6): every live endpoint with its parameters, the
// envelopes, the error roster, the security schemes and each data
// endpoint's data schema.
package openapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/meridian-data/meridian/shared/registry"
)

// Version is the document's info.version.
const Version = "2026-09-22"

// DataSchemas gives the JSON Schema of an endpoint's data, if published.
type DataSchemas func(endpointKey string) (json.RawMessage, bool)

type obj = map[string]any

// Contact is the document's info.contact: who answers for this deployment.
type Contact struct {
	Name  string `json:"name,omitempty"`
	URL   string `json:"url,omitempty"`
	Email string `json:"email,omitempty"`
}

// DefaultContact points at the project's home, where its issues are filed.
var DefaultContact = Contact{Name: "Meridian API support", URL: "https://github.com/meridian-data/meridian"}

// Options are the deployment's parts of the document.
type Options struct {
	// BaseURL is the servers entry ("/" for wherever the document was read).
	BaseURL string
	// Schemas gives each data endpoint's data schema; nil publishes none.
	Schemas DataSchemas
	// Contact defaults to DefaultContact.
	Contact *Contact
	// Available says whether this deployment serves an endpoint on /v1
	// (the catalogue's available flag): each operation's x-available and
	// badge. Nil states nothing.
	Available func(*registry.Endpoint) bool
	// BatchItem is the endpoint the batch code samples call (the
	// quickstart's pick); nil leaves their list empty.
	BatchItem *registry.Endpoint
}

// Document builds the description of the registry.
func Document(reg *registry.Registry, opts Options) obj {
	if opts.Schemas == nil {
		opts.Schemas = func(string) (json.RawMessage, bool) { return nil, false }
	}
	contact := DefaultContact
	if opts.Contact != nil {
		contact = *opts.Contact
	}
	paths := obj{}
	schemaDefs := baseSchemas()
	responses := newResponseSet()
	used := map[string]bool{}
	for _, e := range reg.Live() {
		if e.Origin == registry.Derived {
			continue
		}
		path, op := operation(e, opts.Schemas, schemaDefs, responses)
		describeForReaders(op, e, opts)
		item, _ := paths[path].(obj)
		if item == nil {
			item = obj{}
			paths[path] = item
		}
		item[strings.ToLower(e.HTTPMethod())] = op
		used[tag(e)] = true
	}
	return obj{
		"openapi": "3.1.0",
		"info": obj{
			"title":       "Meridian public data API",
			"version":     Version,
			"description": "Public data from many platforms in one JSON envelope. Successful data calls spend credits; failures cost 0. Every error carries a stable error.type (the ErrorType roster); the catalogue at /v1/utility/endpoints reflects the same registry and says which endpoints this deployment can serve.",
			"contact":     contact,
			// Not an open-source licence: an SPDX LicenseRef names the
			// operator's own terms.
			"license": obj{"name": "Proprietary", "identifier": "LicenseRef-Proprietary"},
		},
		"servers":  []any{obj{"url": opts.BaseURL, "description": "This deployment."}},
		"security": []any{obj{"ApiKey": []any{}}},
		"tags":     tags(reg, used),
		"paths":    paths,
		"components": obj{
			"securitySchemes": obj{
				"ApiKey": obj{"type": "apiKey", "in": "header", "name": "x-api-key", "description": "An API key (mn_ and 43 characters). Never in the query string."},
				"Bearer": obj{"type": "http", "scheme": "bearer", "description": "The API key as a Bearer token; accepted on GET requests under /v1 and /sandbox and on /mcp only."},
			},
			"schemas":    schemaDefs,
			"responses":  responses.responses,
			"headers":    responses.headers,
			"parameters": requestHeaders(),
		},
	}
}

// tags declares every tag an operation uses, described by its platform's kind.
func tags(reg *registry.Registry, used map[string]bool) []any {
	names := make([]string, 0, len(used))
	for name := range used {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]any, 0, len(names))
	for _, name := range names {
		desc := registry.PlatformKinds[name]
		if name == "api" {
			desc = "The API index: every platform with its endpoints."
		}
		out = append(out, obj{"name": name, "description": desc})
	}
	return out
}

// requestHeaders are the request headers the API reads besides the key.
func requestHeaders() obj {
	return obj{
		"IdempotencyKey": obj{
			"name": "Idempotency-Key", "in": "header", "required": false,
			"description": "Makes retries of a direct GET safe (spec 4.10): the first request runs; a concurrent one gets 409; later ones replay the stored answer for 24 hours at no charge. Scoped to the account; not applied to batch items or MCP calls.",
			"schema":      obj{"type": "string", "minLength": 1, "maxLength": 255},
		},
		"CacheControl": obj{
			"name": "Cache-Control", "in": "header", "required": false,
			"description": "no-cache (or max-age=0) fetches fresh and refreshes the cache; no-store fetches fresh and keeps nothing.",
			"schema":      obj{"type": "string", "examples": []any{"no-cache", "no-store"}},
		},
	}
}

// anyObject is an object whose fields are not described here; generators
// read a bare {"type":"object"} as an object with no fields.
func anyObject() obj { return obj{"type": "object", "additionalProperties": true} }

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func operation(e *registry.Endpoint, schemas DataSchemas, defs obj, rs *responseSet) (string, obj) {
	path := e.Path()
	params := []any{}
	for _, p := range e.Accepted() {
		in := "query"
		if strings.Contains(e.ID, "{"+p.Name+"}") {
			in = "path"
		}
		param := obj{"name": p.Name, "in": in, "required": p.Required || in == "path", "schema": ParamSchema(p)}
		if p.Description != "" {
			param["description"] = p.Description
		}
		if p.Type == registry.List {
			param["style"], param["explode"] = "form", false
		}
		if len(p.Hosts) > 0 {
			param["x-platform-url"] = true // an id, or a URL of the platform's own site (422 wrong_host otherwise)
		}
		params = append(params, param)
	}
	if e.HTTPMethod() == http.MethodGet {
		params = append(params, obj{"$ref": "#/components/parameters/IdempotencyKey"})
	}
	if e.Kind == registry.Data {
		params = append(params, obj{"$ref": "#/components/parameters/CacheControl"})
	}
	success := obj{"description": "Success.", "headers": rs.responseHeaders(e, http.StatusOK),
		"content": obj{"application/json": obj{"schema": successSchema(e, schemas, defs)}}}
	if serves(e, "markdown") {
		success["description"] = "Success: markdown by default, the success envelope with format=json."
		success["content"].(obj)["text/markdown"] = obj{"schema": obj{"type": "string"}}
	}
	if e.Streams {
		success["description"] = "Success: the envelope, or with stream=1 server-sent events: an event \"leg\" per platform as it finishes, \": keep-alive\" comments while quiet, and a final event \"result\" whose data is the full response envelope (success or error)."
		success["content"].(obj)["text/event-stream"] = obj{"schema": obj{"type": "string",
			"description": "event: leg / data: {platform, endpoint, status, ok, request_id, cached, count, items | error, progress {done, total}}; then event: result / data: the envelope."}}
	}
	responses := obj{"200": success}
	if e.Async {
		responses["202"] = obj{
			"description": "With async=1: the call is accepted as a web job. Its cost is reserved (credits_used is null until the job ends); " +
				"poll data.url (GET /v1/web/jobs/{id}) for its state and, once done, the envelope this call would have returned. " +
				"A cached answer is returned at once with 200, as without async. An account holds at most 100 jobs queued or running " +
				"(beyond: 429 RATE_LIMITED, details.reason job_queue_full). A job that waited past its reservation's 30-minute lease " +
				"fails unpaid (500, details.reason reservation_expired).",
			"headers": obj{
				"x-request-id": obj{"$ref": "#/components/headers/XRequestId"},
				"location":     obj{"description": "The job's URL, as data.url.", "schema": obj{"type": "string"}},
			},
			"content": obj{"application/json": obj{"schema": ref("JobAccepted")}},
		}
	}
	for _, o := range outcomes(e) {
		responses[statusKey(o.status)] = rs.errorResponse(e, o)
	}
	responses["default"] = rs.defaultResponse(e)
	op := obj{
		"operationId":   operationID(e),
		"summary":       e.Name,
		"description":   e.Description,
		"tags":          []any{tag(e)},
		"parameters":    params,
		"responses":     responses,
		"x-credit-cost": e.Cost,
	}
	if e.HTTPMethod() == http.MethodGet { // Bearer works on GETs under /v1, never on batch
		op["security"] = []any{obj{"ApiKey": []any{}}, obj{"Bearer": []any{}}}
	}
	if e.Platform == "batch" {
		op["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": ref("BatchRequest")}}}
		success["description"] = "The batch wrapper (spec 2.3)."
		success["content"] = obj{"application/json": obj{"schema": ref("BatchWrapper")}}
	}
	if e.Deprecated != nil {
		op["deprecated"] = true
	}
	if e.AI {
		op["x-ai-assist"] = true
	}
	if e.LimitedCapacity {
		op["x-limited-capacity"] = true
	}
	if e.Origin == registry.Addition {
		op["x-addition"] = true // beyond the specification
	}
	return path, op
}

// serves reports whether e answers in the given format: a declared
// "format" parameter lists it.
func serves(e *registry.Endpoint, format string) bool {
	p, ok := e.Lookup("format")
	return ok && slices.Contains(p.Enum, format)
}

func operationID(e *registry.Endpoint) string {
	id := e.Key()
	if id == "" {
		id = "api_index"
	}
	r := strings.NewReplacer("/", "_", "-", "_", "{", "", "}", "")
	return r.Replace(id)
}

func tag(e *registry.Endpoint) string {
	if e.Platform == "" {
		return "api"
	}
	return e.Platform
}

// ParamSchema is the JSON Schema of one query parameter's value.
func ParamSchema(p *registry.Param) map[string]any {
	s := map[string]any{}
	switch p.Type {
	case registry.Integer, registry.Number:
		s["type"] = string(p.Type)
		if p.Min != nil {
			s["minimum"] = *p.Min
		}
		if p.Max != nil {
			s["maximum"] = *p.Max
		}
		if len(p.Enum) > 0 {
			var nums []any
			for _, v := range p.Enum {
				var f float64
				_ = json.Unmarshal([]byte(v), &f)
				nums = append(nums, f)
			}
			s["enum"] = nums
		}
	case registry.Boolean:
		s["type"] = "string"
		s["enum"] = []any{"1", "0", "true", "false", "yes", "no", "on", "off"}
	case registry.Date:
		s["type"], s["format"] = "string", "date"
	case registry.URL:
		s["type"], s["format"] = "string", "uri"
	case registry.List:
		s["type"] = "string"
		s["description"] = "Comma-separated " + string(p.Item) + " values."
	default:
		s["type"] = "string"
		if len(p.Enum) > 0 {
			s["enum"] = p.Enum
		}
		if p.Pattern != "" {
			s["pattern"] = "^(?:" + p.Pattern + ")$"
		}
	}
	if p.MaxLength > 0 {
		s["maxLength"] = p.MaxLength
	}
	if p.Default != "" {
		s["default"] = typed(p, p.Default)
	}
	if p.Example != "" && p.Type != registry.List {
		s["examples"] = []any{typed(p, p.Example)}
	}
	return s
}

// typed renders a declared value as the JSON type of its schema.
func typed(p *registry.Param, v string) any {
	if p.Type == registry.Integer || p.Type == registry.Number {
		var f float64
		if json.Unmarshal([]byte(v), &f) == nil {
			return f
		}
	}
	return v
}

// successSchema is the success envelope with the endpoint's data schema;
// a data endpoint's data may also be a dry-run estimate.
func successSchema(e *registry.Endpoint, schemas DataSchemas, defs obj) obj {
	data := anyObject()
	switch e.Key() {
	case "status":
		data = ref("Status")
	case "credits/usage":
		data = ref("CreditsUsage")
	}
	if raw, ok := schemas(e.Key()); ok && e.Kind == registry.Data {
		if s, err := embeddable(raw); err == nil {
			name := "Data_" + operationID(e)
			defs[name] = s
			data = obj{"anyOf": []any{ref(name), ref("DryRun")}}
		}
	}
	return obj{"allOf": []any{ref("SuccessEnvelope"), obj{"type": "object", "properties": obj{"data": data}}}}
}

// creditsUsageSchema is GET /v1/credits/usage's data: the account's calls,
// credits and errors per UTC day and per endpoint.
func creditsUsageSchema() obj {
	count := obj{"type": "integer", "minimum": 0}
	rate := obj{"type": "number", "minimum": 0, "maximum": 1, "description": "errors / calls; 0 without calls."}
	date := obj{"type": "string", "format": "date", "description": "A UTC day."}
	counts := func(description string, extra obj, required ...string) obj {
		props := obj{"calls": count, "credits": count, "errors": count}
		for k, v := range extra {
			props[k] = v
		}
		return obj{"type": "object", "description": description, "properties": props,
			"required": append([]any{"calls", "credits", "errors"}, toAny(required)...)}
	}
	return obj{
		"type":        "object",
		"description": "The account's usage over the last days_count UTC days (today included), as counted from usage events shortly after each call.",
		"required":    []any{"from", "to", "days_count", "totals", "days", "endpoints", "items"},
		"properties": obj{
			"from":       date,
			"to":         date,
			"days_count": obj{"type": "integer", "minimum": 1},
			"totals":     counts("Every call of the days.", obj{"error_rate": rate}, "error_rate"),
			"days": obj{"type": "array", "description": "One entry per day, oldest first, zero when there were no calls.",
				"items": counts("One day.", obj{"date": date}, "date")},
			"endpoints": obj{"type": "array", "description": "One entry per endpoint called, most calls first.",
				"items": counts("One endpoint over the days.", obj{"endpoint": obj{"type": "string", "examples": []any{"/v1/company_registry/search"}}, "error_rate": rate}, "endpoint", "error_rate")},
			"items": obj{"type": "array", "description": "Each day and endpoint with calls, by date, then endpoint.",
				"items": counts("One endpoint on one day.", obj{"date": date, "endpoint": obj{"type": "string"}}, "date", "endpoint")},
		},
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// canaryStatusSchema is a platform's part of the canary's last run
// (shared/canary PlatformResult): null when no run checked it.
func canaryStatusSchema() obj {
	states := []any{"ok", "drifting", "failing", "not_checked"}
	rate := obj{"type": []any{"number", "null"}, "minimum": 0, "maximum": 1}
	return obj{
		"type":        []any{"object", "null"},
		"description": "The scheduled canary's last check of this platform's operations, each on its catalogue example: null when no run checked it. fill_rate is the share of the data schema's fields that came back non-null (per item where there are items); null_fields are the fields its baseline had that came back null.",
		"properties": obj{
			"checked_at":      obj{"type": "string", "format": "date-time"},
			"state":           obj{"enum": states, "description": "The worst of its operations' states."},
			"source_attempts": obj{"type": "integer", "minimum": 0},
			"operations": obj{"type": "array", "items": obj{
				"type": "object",
				"properties": obj{
					"operation":          obj{"type": "string", "examples": []any{"company_registry/search"}},
					"state":              obj{"enum": states},
					"schema_valid":       obj{"type": []any{"boolean", "null"}},
					"fill_rate":          rate,
					"baseline_fill_rate": rate,
					"null_fields":        obj{"type": "array", "items": obj{"type": "string"}},
					"latency_ms":         obj{"type": "number", "minimum": 0},
				},
			}},
		},
	}
}

func baseSchemas() obj {
	return obj{
		"ErrorType":       errorTypeSchema(),
		"ErrorDetails":    errorDetailsSchema(),
		"ErrorEnvelope":   errorEnvelope(ref("ErrorType"), ref("ErrorDetails")),
		"SuccessEnvelope": successEnvelope(anyObject()),
		"DryRun":          dryRunSchema(),
		"Status": obj{
			"type":        "object",
			"description": "Each data platform's health over the last 15 minutes.",
			"properties": obj{
				"window_minutes": obj{"type": "integer"},
				"generated_at":   obj{"type": "string", "format": "date-time"},
				"platforms": obj{"type": "array", "items": obj{
					"type": "object",
					"properties": obj{
						"platform":   obj{"type": "string"},
						"requests":   obj{"type": "integer"},
						"errors":     obj{"type": "integer"},
						"error_rate": obj{"type": "number", "minimum": 0, "maximum": 1},
						"p50_ms":     obj{"type": []any{"integer", "null"}},
						"p95_ms":     obj{"type": []any{"integer", "null"}},
						"state":      obj{"enum": []any{"no_data", "operational", "degraded", "down"}},
						"canary":     canaryStatusSchema(),
					},
				}},
			},
		},
		"CreditsUsage": creditsUsageSchema(),
		"BatchRequest": obj{
			"type":     "object",
			"required": []any{"requests"},
			"properties": obj{"requests": obj{
				"type": "array", "minItems": 1, "maxItems": 20,
				"items": obj{
					"type":     "object",
					"required": []any{"platform", "endpoint"},
					"properties": obj{
						"platform": obj{"type": "string", "examples": []any{"company_registry"}},
						"endpoint": obj{"type": "string", "description": "The endpoint id after the platform, e.g. search or profile/repos.", "examples": []any{"search"}},
						"params":   obj{"type": "object", "additionalProperties": obj{"type": []any{"string", "number", "boolean"}}},
					},
				},
			}},
		},
		"JobAccepted": obj{
			"type":        "object",
			"description": "The 202 that accepts a web job (async=1): the success envelope with the job in data and credits_used null (reserved, not yet charged).",
			"required":    []any{"success", "platform", "endpoint", "data", "credits_used", "request_id"},
			"properties": obj{
				"success":           obj{"const": true},
				"platform":          obj{"type": "string"},
				"endpoint":          obj{"type": "string"},
				"credits_used":      obj{"type": "null"},
				"credits_remaining": obj{"type": "number"},
				"request_id":        obj{"type": "string", "pattern": "^req_"},
				"data": obj{
					"type":     "object",
					"required": []any{"job_id", "state", "url", "credits_reserved", "created_at", "expires_at"},
					"properties": obj{
						"job_id":           obj{"type": "string", "pattern": "^job_[a-z0-9]{26}$"},
						"state":            obj{"const": "queued"},
						"url":              obj{"type": "string", "description": "GET it for the job's state and result."},
						"credits_reserved": obj{"type": "number"},
						"created_at":       obj{"type": "string", "format": "date-time"},
						"expires_at":       obj{"type": "string", "format": "date-time", "description": "The job and its result are kept until then (7 days)."},
					},
				},
			},
		},
		"BatchWrapper": obj{
			"type":        "object",
			"description": "The batch wrapper (spec 2.3): no request_id of its own; each result is a success or an error envelope with its index and status.",
			"required":    []any{"success", "count", "succeeded", "failed", "credits_used", "results"},
			"properties": obj{
				"success":           obj{"const": true},
				"count":             obj{"type": "integer"},
				"succeeded":         obj{"type": "integer"},
				"failed":            obj{"type": "integer"},
				"credits_used":      obj{"type": "integer"},
				"credits_remaining": obj{"type": "integer"},
				"results": obj{"type": "array", "items": obj{
					"type":     "object",
					"required": []any{"index", "status", "success"},
					"properties": obj{
						"index":   obj{"type": "integer"},
						"status":  obj{"type": "integer"},
						"success": obj{"type": "boolean"},
					},
					"oneOf": []any{ref("SuccessEnvelope"), ref("ErrorEnvelope")},
				}},
			},
		},
	}
}
