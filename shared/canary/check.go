package canary

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

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Check is one operation called on one route: a table line of
// scripts/canary.sh, one JSON object of its -json.
type Check struct {
	Operation string            `json:"operation"`
	Platform  string            `json:"platform"`
	Route     string            `json:"route"`            // the route's provider name ("" when none could be called)
	Params    map[string]string `json:"params,omitempty"` // the catalogue's example request (never secrets)
	Legs      []Leg             `json:"legs"`
	// OK: data came back and validates against the schema.
	OK bool `json:"ok"`
	// Status is "ok", or the fault kind (or why nothing was called) and
	// the HTTP status a caller would see, e.g. "server_error 502";
	// "budget_spent" when the run's budget left no request for it.
	Status     string  `json:"status"`
	HTTPStatus int     `json:"http_status"`
	ErrorType  string  `json:"error_type,omitempty"`
	Reason     string  `json:"reason,omitempty"` // the fault's reason, credentials redacted
	LatencyMS  float64 `json:"latency_ms"`
	Attempts   int     `json:"attempts"` // source attempts, retries included
	// Schema is "valid" or "invalid" when data came back, else empty.
	Schema      string `json:"schema,omitempty"`
	SchemaError string `json:"schema_error,omitempty"`
	// FillRate (0 to 1) and FilledFields: see Fill; null when no data.
	FillRate     *float64 `json:"fill_rate"`
	Items        *int     `json:"items,omitempty"`
	FilledFields []string `json:"filled_fields,omitempty"`
	// The baseline this route is judged against: its fill rate, where it
	// comes from ("fixtures" or "recent": the median of the last seven
	// runs), and NullFields, the fields it had that this answer left null.
	BaselineFillRate *float64 `json:"baseline_fill_rate"`
	BaselineSource   string   `json:"baseline_source,omitempty"`
	NullFields       []string `json:"null_fields"`
	// Drifting: data came back, but its fill rate is below the fill share
	// of the baseline.
	Drifting bool `json:"drifting"`

	latency time.Duration
}

// Leg is one route's part in the call.
type Leg struct {
	Route    string `json:"route"`
	Attempts int    `json:"attempts"`
	OK       bool   `json:"ok"`
	Status   int    `json:"status,omitempty"` // the upstream's last HTTP status
	Fault    string `json:"fault,omitempty"`
}

// Latency is the check's duration (0 when nothing was called).
func (c Check) Latency() time.Duration { return c.latency }

// statusBudgetSpent is the Status of a check the run's budget left no
// request for: not a failure of the operation.
const statusBudgetSpent = "budget_spent"

// Checked says whether the check called its route (the budget did not
// stop it first).
func (c Check) Checked() bool { return c.Status != statusBudgetSpent }

// checker calls operations and judges their answers.
type checker struct {
	runner  *upstream.Runner
	reg     *registry.Registry
	timeout time.Duration
	redact  func(string) string
}

// prepare validates the operation's catalogue example, as a request
// would be validated; a nil check means it can be called.
func (k *checker) prepare(ctx context.Context, key string) (map[string]string, *Check) {
	fail := func(what string, status int, errType, reason string) (map[string]string, *Check) {
		c := Check{Operation: key, Legs: []Leg{}, NullFields: []string{}}
		if e, ok := k.reg.Endpoint(key); ok {
			c.Platform = e.Platform
		}
		c.failed(what, status, errType, reason)
		return nil, &c
	}
	e, ok := k.reg.Endpoint(key)
	if !ok || e.Kind != registry.Data {
		return fail("unknown_endpoint", 0, "", "the registry has no data endpoint "+key)
	}
	q, pathParams := e.Example()
	res, verr := params.Validate(e, q, pathParams)
	if verr != nil {
		// The registry's own example does not validate: a catalogue bug.
		return fail("bad_example", verr.Status, string(verr.Type), verr.Message)
	}
	if len(k.runner.Routes(key)) == 0 {
		return fail("no_route", http.StatusNotImplemented, "ENDPOINT_NOT_AVAILABLE",
			"no eligible route: no provider serves it, or its required credentials are not configured")
	}
	if verr := upstream.CheckURLParams(ctx, k.runner.URLPolicy(), e, res.Values); verr != nil {
		return fail("invalid_parameter", verr.Status, string(verr.Type), verr.Message)
	}
	return res.Values, nil
}

// check calls the operation on one route and judges the answer.
func (k *checker) check(ctx context.Context, key, platform, route string, values map[string]string) Check {
	c := Check{Operation: key, Platform: platform, Route: route, Params: values, Legs: []Leg{}, NullFields: []string{}}
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	start := time.Now()
	out := k.runner.ServeRoute(ctx, key, route, values)
	c.latency = time.Since(start)
	c.LatencyMS = float64(c.latency.Microseconds()) / 1000
	c.Attempts = out.Trace.Attempts
	for _, l := range out.Trace.Legs {
		c.Legs = append(c.Legs, Leg{Route: l.ServedBy, Attempts: l.Attempts, OK: l.OK, Status: l.Status, Fault: string(l.Fault)})
	}
	if out.Fault != nil || out.Data == nil {
		if out.BudgetSpent {
			c.failed(statusBudgetSpent, 0, "", "the run's budget of source requests was spent before this check finished")
			return c
		}
		// What the pipeline would answer: the outcome's error.
		ee := out.Error()
		what, reason := "no_data", ""
		switch {
		case out.Fault != nil:
			what, reason = string(out.Fault.Kind), out.Fault.Reason
		case out.Skipped > 0:
			what = "cooldown"
		}
		c.failed(what, ee.Status, string(ee.Type), k.redact(reason))
		return c
	}
	c.Status, c.HTTPStatus = "ok", http.StatusOK
	doc, err := plainJSON(out.Data)
	if err != nil {
		c.Schema, c.SchemaError = "invalid", "data is not JSON: "+err.Error()
		return c
	}
	if err := schemas.Validate(key, doc); err != nil {
		c.Schema, c.SchemaError = "invalid", firstSchemaError(err)
	} else {
		c.Schema, c.OK = "valid", true
	}
	f := Measure(key, doc)
	c.FillRate, c.Items, c.FilledFields = &f.Rate, f.Items, f.Fields
	return c
}

// failed completes a check that has no data to judge.
func (c *Check) failed(what string, status int, errType, reason string) {
	c.OK = false
	c.Status = what
	if status != 0 {
		c.Status += " " + strconv.Itoa(status)
	}
	c.HTTPStatus, c.ErrorType, c.Reason = status, errType, oneLine(reason, 200)
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
