package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
)

// server is the part of *upstream.Runner the canary uses; tests may stand
// in for it.
type server interface {
	Eligible(endpoint string) bool
	Serve(ctx context.Context, endpoint string, params map[string]string) upstream.Outcome
	URLPolicy() *upstream.URLPolicy
}

// canary checks operations one at a time: one call each, in sequence, so
// it spends as little of the sources' quota as it can and latencies are
// not skewed by each other.
type canary struct {
	srv     server
	reg     *registry.Registry
	timeout time.Duration
	redact  func(string) string
}

// row is one operation's result: a table line, or one JSON object.
type row struct {
	Operation string            `json:"operation"`
	Params    map[string]string `json:"params,omitempty"` // the example request (registry examples, never secrets)
	Route     string            `json:"route,omitempty"`  // the route that served it (trace served_by)
	Legs      []leg             `json:"legs"`
	OK        bool              `json:"ok"`
	// Status is "ok", or the fault kind (or why nothing was called) and
	// the HTTP status the caller would see, e.g. "server_error 502".
	Status     string  `json:"status"`
	HTTPStatus int     `json:"http_status"`
	ErrorType  string  `json:"error_type,omitempty"`
	Reason     string  `json:"reason,omitempty"` // the fault's reason, credentials redacted
	LatencyMS  float64 `json:"latency_ms"`
	// Schema is "valid" or "invalid" when data came back, else empty.
	Schema      string  `json:"schema,omitempty"`
	SchemaError string  `json:"schema_error,omitempty"`
	Fields      *filled `json:"fields,omitempty"`

	latency time.Duration
}

// leg is one route's part in the call.
type leg struct {
	Route    string `json:"route"`
	Attempts int    `json:"attempts"`
	OK       bool   `json:"ok"`
	Status   int    `json:"status,omitempty"` // the upstream's last HTTP status
	Fault    string `json:"fault,omitempty"`
}

// check calls one operation and judges the answer.
func (c *canary) check(ctx context.Context, key string) row {
	r := row{Operation: key, Legs: []leg{}}
	e, ok := c.reg.Endpoint(key)
	if !ok || e.Kind != registry.Data {
		return r.failed("unknown_endpoint", 0, "", "the registry has no data endpoint "+key)
	}
	q, pathParams := exampleRequest(e)
	res, verr := params.Validate(e, q, pathParams)
	if verr != nil {
		// The registry's own example does not validate: a catalogue bug.
		return r.failed("bad_example", verr.Status, string(verr.Type), verr.Message)
	}
	r.Params = res.Values
	if !c.srv.Eligible(key) {
		return r.failed("no_route", http.StatusNotImplemented, "ENDPOINT_NOT_AVAILABLE", "no eligible route: no provider serves it, or its required credentials are not configured")
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	if verr := c.checkURLs(ctx, e, res.Values); verr != nil {
		r.latency = time.Since(start)
		return r.failed("invalid_parameter", verr.Status, string(verr.Type), verr.Message)
	}
	out := c.srv.Serve(ctx, key, res.Values)
	r.latency = time.Since(start)
	r.LatencyMS = float64(r.latency.Microseconds()) / 1000
	r.Route = out.Trace.ServedBy
	for _, l := range out.Trace.Legs {
		r.Legs = append(r.Legs, leg{Route: l.ServedBy, Attempts: l.Attempts, OK: l.OK, Status: l.Status, Fault: string(l.Fault)})
	}
	if out.Fault != nil || out.Data == nil {
		// What the pipeline would answer (upstreamHandler): the outcome's error.
		ee := out.Error()
		what := "no_data"
		switch {
		case out.Fault != nil:
			what = string(out.Fault.Kind)
		case out.Skipped > 0:
			what = "cooldown"
		}
		reason := ""
		if out.Fault != nil {
			reason = out.Fault.Reason
		}
		return r.failed(what, ee.Status, string(ee.Type), c.redact(reason))
	}

	r.Status, r.HTTPStatus = "ok", http.StatusOK
	doc, err := plainJSON(out.Data)
	if err != nil {
		r.Schema, r.SchemaError = "invalid", "data is not JSON: "+err.Error()
		return r
	}
	if err := schemas.Validate(key, doc); err != nil {
		r.Schema, r.SchemaError = "invalid", firstSchemaError(err)
	} else {
		r.Schema, r.OK = "valid", true
	}
	r.Fields = fieldsFilled(key, doc)
	return r
}

// failed completes a row that has no data to judge.
func (r row) failed(what string, status int, errType, reason string) row {
	r.OK = false
	r.Status = what
	if status != 0 {
		r.Status += " " + strconv.Itoa(status)
	}
	r.HTTPStatus, r.ErrorType, r.Reason = status, errType, oneLine(reason, 200)
	if r.latency > 0 {
		r.LatencyMS = float64(r.latency.Microseconds()) / 1000
	}
	return r
}

// checkURLs refuses URL-typed parameters the URL policy refuses, as the
// pipeline does before any call (a registry example must pass it too).
func (c *canary) checkURLs(ctx context.Context, e *registry.Endpoint, values map[string]string) *envelope.Error {
	return upstream.CheckURLParams(ctx, c.srv.URLPolicy(), e, values)
}

// exampleRequest is the request discovery shows for e (registry's
// Example): parameters named in the endpoint's path template go to the path.
func exampleRequest(e *registry.Endpoint) (params.Query, map[string]string) {
	return e.Example()
}

// plainJSON is data as the envelope would carry it: decoded JSON.
func plainJSON(data any) (any, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// firstSchemaError names where the first violation is and which keyword it
// breaks, without quoting the offending value: the canary never prints
// page content.
func firstSchemaError(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return oneLine(err.Error(), 200)
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	at := "/" + strings.Join(ve.InstanceLocation, "/")
	what := strings.Join(ve.ErrorKind.KeywordPath(), "/")
	switch k := ve.ErrorKind.(type) {
	case *kind.Type:
		what = fmt.Sprintf("type: got %s, want %s", k.Got, strings.Join(k.Want, " or "))
	case *kind.Required:
		what = "required: missing " + strings.Join(k.Missing, ", ")
	}
	return oneLine("at "+at+": "+what, 200)
}

// oneLine keeps s to one printable line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return upstream.Clip(strings.TrimSpace(s), n)
}
