// Package openapi generates the OpenAPI 3.1 description of the registry
// at runtime (spec 4.2, 9.6): every live endpoint with its parameters, the
// envelopes, the error roster, the security schemes and each data
// endpoint's data schema.
package openapi

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

// Version is the document's info.version.
const Version = "2026-09-22"

// DataSchemas gives the JSON Schema of an endpoint's data, if published.
type DataSchemas func(endpointKey string) (json.RawMessage, bool)

type obj = map[string]any

// Document builds the description for a deployment reachable at baseURL.
func Document(reg *registry.Registry, baseURL string, schemas DataSchemas) obj {
	paths := obj{}
	components := obj{
		"securitySchemes": obj{
			"ApiKey": obj{"type": "apiKey", "in": "header", "name": "x-api-key"},
			"Bearer": obj{"type": "http", "scheme": "bearer", "description": "Accepted on GET requests under /v1 and /sandbox and on /mcp only."},
		},
		"schemas": baseSchemas(),
		"responses": obj{
			"Error": obj{
				"description": "A typed error (spec 2.2); branch on error.type.",
				"content":     obj{"application/json": obj{"schema": ref("ErrorEnvelope")}},
			},
		},
	}
	schemaDefs := components["schemas"].(obj)
	for _, e := range reg.Live() {
		if e.Origin == registry.Derived {
			continue
		}
		path, op := operation(e, schemas, schemaDefs)
		item, _ := paths[path].(obj)
		if item == nil {
			item = obj{}
			paths[path] = item
		}
		item[strings.ToLower(e.HTTPMethod())] = op
	}
	return obj{
		"openapi": "3.1.0",
		"info": obj{
			"title":       "Meridian public data API",
			"version":     Version,
			"description": "Public data from many platforms in one JSON envelope. Successful data calls spend credits; failures cost 0. The catalogue at /v1/utility/endpoints reflects the same registry.",
		},
		"servers":    []any{obj{"url": baseURL}},
		"security":   []any{obj{"ApiKey": []any{}}},
		"paths":      paths,
		"components": components,
	}
}

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func operation(e *registry.Endpoint, schemas DataSchemas, defs obj) (string, obj) {
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
		params = append(params, param)
	}
	op := obj{
		"operationId": operationID(e),
		"summary":     e.Name,
		"description": e.Description,
		"tags":        []any{tag(e)},
		"parameters":  params,
		"responses": obj{
			"200":     obj{"description": "Success.", "content": obj{"application/json": obj{"schema": successSchema(e, schemas, defs)}}},
			"default": obj{"$ref": "#/components/responses/Error"},
		},
		"x-credit-cost": e.Cost,
	}
	if e.HTTPMethod() == http.MethodGet { // Bearer works on GETs under /v1, never on batch
		op["security"] = []any{obj{"ApiKey": []any{}}, obj{"Bearer": []any{}}}
	}
	if e.Platform == "batch" {
		op["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": ref("BatchRequest")}}}
		op["responses"].(obj)["200"] = obj{"description": "The batch wrapper (spec 2.3).", "content": obj{"application/json": obj{"schema": ref("BatchWrapper")}}}
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
	return path, op
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
	data := obj{"type": "object"}
	if e.Platform == "status" && e.ID == "" {
		data = ref("Status")
	}
	if raw, ok := schemas(e.Key()); ok && e.Kind == registry.Data {
		var s obj
		if json.Unmarshal(raw, &s) == nil {
			// The document's dialect is 2020-12 already; schemas use no
			// internal $ref, so dropping $id loses nothing (tested).
			delete(s, "$schema")
			delete(s, "$id")
			name := "Data_" + operationID(e)
			defs[name] = s
			data = obj{"anyOf": []any{ref(name), ref("DryRun")}}
		}
	}
	return obj{"allOf": []any{ref("SuccessEnvelope"), obj{"type": "object", "properties": obj{"data": data}}}}
}

func baseSchemas() obj {
	var types []any
	for _, t := range envelope.Roster {
		types = append(types, string(t.Type))
	}
	sort.Slice(types, func(i, j int) bool { return types[i].(string) < types[j].(string) })
	credits := obj{"type": []any{"integer", "null"}, "description": "Credits charged; null while a charge is pending reconciliation."}
	return obj{
		"ErrorType": obj{"type": "string", "enum": types, "description": "Stable error types (spec 7). KEY_REVOKED is listed but never emitted."},
		"DryRun": obj{
			"type":        "object",
			"description": "The data of a dry run (dry_run=1): an estimate; nothing fetched, reserved or cached.",
			"required":    []any{"dry_run", "credit_cost", "estimated_credits", "cache"},
			"properties": obj{
				"dry_run":           obj{"const": true},
				"credit_cost":       obj{"type": "integer"},
				"estimated_credits": obj{"type": "integer"},
				"cache":             obj{"enum": []any{"HIT", "MISS", "BYPASS", "OFF"}},
				"can_pay":           obj{"type": []any{"boolean", "null"}},
				"refusal":           obj{"enum": []any{nil, "KEY_LIMIT_EXCEEDED", "INSUFFICIENT_CREDITS"}},
				"credits_remaining": obj{"type": []any{"integer", "null"}},
				"key_credit_limit":  obj{"type": []any{"integer", "null"}},
				"key_credits_used":  obj{"type": []any{"integer", "null"}},
			},
		},
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
					},
				}},
			},
		},
		"SuccessEnvelope": obj{
			"type":     "object",
			"required": []any{"success", "platform", "endpoint", "data", "credits_used", "request_id", "cached"},
			"properties": obj{
				"success":           obj{"const": true},
				"platform":          obj{"type": "string"},
				"endpoint":          obj{"type": "string"},
				"data":              obj{"type": "object"},
				"credits_used":      credits,
				"credits_remaining": obj{"type": "integer"},
				"request_id":        obj{"type": "string", "pattern": "^req_"},
				"cached":            obj{"type": "boolean"},
				"synthetic":         obj{"type": "boolean"},
				"degraded":          obj{"type": "boolean"},
			},
		},
		"ErrorEnvelope": obj{
			"type":     "object",
			"required": []any{"success", "error", "credits_used", "request_id"},
			"properties": obj{
				"success": obj{"const": false},
				"error": obj{
					"type":     "object",
					"required": []any{"type", "message", "status", "doc_url"},
					"properties": obj{
						"type":    ref("ErrorType"),
						"message": obj{"type": "string"},
						"status":  obj{"type": "integer"},
						"doc_url": obj{"type": "string", "format": "uri"},
						"details": obj{"type": "object"},
					},
				},
				"credits_used":      credits,
				"credits_remaining": obj{"type": "integer"},
				"request_id":        obj{"type": "string", "pattern": "^req_"},
			},
		},
		"BatchRequest": obj{
			"type":     "object",
			"required": []any{"requests"},
			"properties": obj{"requests": obj{
				"type": "array", "minItems": 1, "maxItems": 20,
				"items": obj{
					"type":     "object",
					"required": []any{"platform", "endpoint"},
					"properties": obj{
						"platform": obj{"type": "string"},
						"endpoint": obj{"type": "string"},
						"params":   obj{"type": "object", "additionalProperties": obj{"type": []any{"string", "number", "boolean"}}},
					},
				},
			}},
		},
		"BatchWrapper": obj{
			"type":     "object",
			"required": []any{"success", "count", "succeeded", "failed", "credits_used", "results"},
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
				}},
			},
		},
	}
}
