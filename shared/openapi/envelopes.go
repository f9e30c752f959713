package openapi

import (
	"encoding/json"
	"sort"

	"github.com/meridian-data/meridian/shared/envelope"
)

// The envelopes of spec 2.1 and 2.2 as JSON Schema. The OpenAPI document
// names them as components; the MCP server inlines them in each tool's
// output schema (SuccessEnvelope, ErrorEnvelope), so both describe one
// shape.

// creditsUsed is credits_used: a number, or null while a charge is
// pending reconciliation.
func creditsUsed() obj {
	return obj{"type": []any{"integer", "null"}, "description": "Credits charged; 0 on every failure; null while a charge is pending reconciliation."}
}

func requestIDSchema() obj {
	return obj{"type": "string", "pattern": "^req_", "description": "Equals the x-request-id header."}
}

// errorTypes lists the roster (spec 7), sorted.
func errorTypes() []any {
	var types []any
	for _, t := range envelope.Roster {
		types = append(types, string(t.Type))
	}
	sort.Slice(types, func(i, j int) bool { return types[i].(string) < types[j].(string) })
	return types
}

func errorTypeSchema() obj {
	return obj{"type": "string", "enum": errorTypes(), "description": "Stable error types (spec 7); branch on this. KEY_REVOKED is listed but never emitted."}
}

// errorDetailsSchema names the details keys the error types carry (spec 7);
// each is optional and others may appear.
func errorDetailsSchema() obj {
	strs := obj{"type": "array", "items": obj{"type": "string"}}
	nullableInt := obj{"type": []any{"integer", "null"}}
	return obj{
		"type":                 "object",
		"description":          "Keys per error type (spec 7); every key is optional and others may appear.",
		"additionalProperties": true,
		"properties": obj{
			"reason":              obj{"type": "string", "description": "Why, in one word: missing_api_key, invalid_api_key, query_string_key_rejected, invalid_key_attempts, rate_limit, concurrency_limit, job_queue_full, idempotency_in_progress, out_of_range, not_allowed, wrong_host, capacity_exhausted, reservation_expired (a web job's result: its reservation was refunded before it could be charged), ..."},
			"resets_at":           obj{"type": "string", "format": "date-time", "description": "capacity_exhausted: when the shared monthly allowance resets."},
			"field":               obj{"type": "string", "description": "The parameter or header at fault."},
			"message":             obj{"type": "string"},
			"unknown_parameters":  strs,
			"accepted_parameters": strs,
			"suggestions":         obj{"type": "object", "additionalProperties": obj{"type": "string"}, "description": "Supplied name → the declared name it most likely meant."},
			"missing":             strs,
			"one_of":              obj{"type": "array", "items": strs},
			"allowed":             strs,
			"errors":              obj{"type": "array", "items": obj{"type": "object", "additionalProperties": true}, "description": "Every invalid field when there are several, each with field, reason and message."},
			"min":                 obj{"type": "number"},
			"max":                 obj{"type": "number", "description": "A bound: the batch size cap, or a parameter's maximum."},
			"retry_after_seconds": obj{"type": "integer"},
			"credit_limit":        obj{"type": "integer"},
			"credits_used":        obj{"type": "integer"},
			"required":            obj{"type": "integer"},
			"remaining":           obj{"type": "integer"},
			"limit":               obj{"type": "integer"},
			"used":                nullableInt,
			"degraded":            obj{"type": "boolean"},
			"sandbox":             obj{"type": "string", "description": "The free synthetic twin of an endpoint with no live source here."},
			"platform":            obj{"type": []any{"string", "null"}},
			"endpoint":            obj{"type": []any{"string", "null"}},
			"successor":           obj{"type": "string"},
			"billing_status":      obj{"type": "string"},
		},
	}
}

// errorEnvelope is the envelope of spec 2.2 around the given error-type
// and details schemas.
func errorEnvelope(typeSchema, details obj) obj {
	return obj{
		"type":        "object",
		"description": "A typed error (spec 2.2): branch on error.type; error.message may be reworded.",
		"required":    []any{"success", "error", "credits_used", "request_id"},
		"properties": obj{
			"success": obj{"const": false},
			"error": obj{
				"type":     "object",
				"required": []any{"type", "message", "status", "doc_url"},
				"properties": obj{
					"type":    typeSchema,
					"message": obj{"type": "string"},
					"status":  obj{"type": "integer"},
					"doc_url": obj{"type": "string", "format": "uri"},
					"details": details,
				},
			},
			"credits_used":      creditsUsed(),
			"credits_remaining": obj{"type": "integer"},
			"request_id":        requestIDSchema(),
		},
	}
}

// successEnvelope is the envelope of spec 2.1 around the data schema.
func successEnvelope(data any) obj {
	return obj{
		"type":        "object",
		"description": "A success (spec 2.1).",
		"required":    []any{"success", "platform", "endpoint", "data", "credits_used", "request_id", "cached"},
		"properties": obj{
			"success":           obj{"const": true},
			"platform":          obj{"type": "string"},
			"endpoint":          obj{"type": "string"},
			"data":              data,
			"credits_used":      creditsUsed(),
			"credits_remaining": obj{"type": "integer"},
			"request_id":        requestIDSchema(),
			"cached":            obj{"type": "boolean"},
			"synthetic":         obj{"type": "boolean", "description": "Sandbox only: the data is synthetic."},
			"degraded":          obj{"type": "boolean", "description": "Sandbox only: compatibility flag."},
		},
	}
}

// dryRunSchema is the data of a dry run (dry_run=1).
func dryRunSchema() obj {
	return obj{
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
			"capacity": obj{
				"type":        "object",
				"description": "Limited-capacity endpoints only: the shared monthly allowance of live fetches.",
				"properties": obj{
					"remaining": obj{"type": []any{"integer", "null"}, "description": "Live fetches left this month across accounts; null when unknown or unbounded."},
					"resets_at": obj{"type": "string", "format": "date-time"},
					"exhausted": obj{"type": "boolean", "description": "true: a live fetch answers 429 UPSTREAM_ERROR (capacity_exhausted) until resets_at; a cached answer still serves."},
				},
			},
		},
	}
}

// ToolResultSchema is a self-contained schema (no $ref) that admits every
// envelope a call of a data endpoint answers: the success envelope whose
// data is the endpoint's data schema or a dry-run estimate, and the error
// envelope. MCP clients validate a tool's structured content against its
// output schema, failures included, so the schema must admit both.
func ToolResultSchema(data json.RawMessage) (map[string]any, error) {
	schema, err := embeddable(data)
	if err != nil {
		return nil, err
	}
	return obj{
		"type": "object",
		"anyOf": []any{
			successEnvelope(obj{"anyOf": []any{schema, dryRunSchema()}}),
			errorEnvelope(errorTypeSchema(), errorDetailsSchema()),
		},
	}, nil
}

// embeddable is a published data schema ready to sit inside another
// document: its $schema and $id go, since the host's dialect is 2020-12
// already and the schemas use no internal $ref (tested), so nothing
// resolves against the $id.
func embeddable(raw json.RawMessage) (obj, error) {
	var s obj
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	delete(s, "$schema")
	delete(s, "$id")
	return s, nil
}
