package app_test

// Contract tests: every operation GET /openapi.json describes is called on
// the local server (in process, replay upstream, embedded store), and each
// actual response, success and every error the test can provoke, is
// validated against the document's response for that operation and status
// with kin-openapi (openapi3filter.ValidateResponse, which switches to its
// JSON Schema 2020-12 validator for a 3.1 document). Failures that begin
// with "MISMATCH" are disagreements between the document and the API.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/composite"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/gateway"
	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// contractMarkdown: kin-openapi registers no body decoder for text/markdown
// (utility/llms' default answer), so it would fail to decode the body
// rather than validate it; the document's schema for it is a plain string.
var contractMarkdown sync.Once

// contractEnv is one in-process local server and what the tests need of it.
type contractEnv struct {
	h     http.Handler
	store *embedded.Store
	key   string // a key of an account with 1,000 credits
	wired map[string]bool
	spec  *contractSpec
}

// contractOptions change the local server for the tests that need a
// provoked fault; the zero value is exactly app.LocalHandler in replay mode.
type contractOptions struct {
	// fixtures are added to the replay upstream, per provider.
	fixtures map[string][]replay.Fixture
	// upstream tunes the runner (short timeouts, quick backoff); zero
	// builds it with app.NewUpstream as the local server does.
	upstream *upstream.Options
	throttle *auth.Throttle
	// mutate changes every family's pipeline configuration.
	mutate func(*pipeline.Config)
	// wrap, when set, is the store the server uses around the embedded one.
	wrap func(*embedded.Store) store.Store
}

func newContractEnv(t *testing.T, o contractOptions) *contractEnv {
	t.Helper()
	contractMarkdown.Do(func() { openapi3filter.RegisterBodyDecoder("text/markdown", openapi3filter.PlainBodyDecoder) })
	logger := slog.New(slog.DiscardHandler)
	base, s := replayAndStore(t, logger)
	var runner *upstream.Runner
	if o.fixtures == nil && o.upstream == nil {
		// The local server's own path: MERIDIAN_UPSTREAM=replay.
		runner = app.NewUpstream(logger, func(string) (string, bool) { return "", false }, base)
	} else {
		// A replay upstream of its own, with the added fixtures.
		srv, err := replay.Load(filepath.Join(repoRoot(t), "testdata", "upstream"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range slices.Sorted(maps.Keys(o.fixtures)) {
			for i, fx := range o.fixtures[p] {
				if err := srv.Add(p, fmt.Sprintf("contract-%d.json", i), fx); err != nil {
					t.Fatal(err)
				}
			}
		}
		base, stop, err := srv.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stop() })
		// NewUpstream's route table, with the tuned options.
		opts := upstream.Options{}
		if o.upstream != nil {
			opts = *o.upstream
		}
		runner = upstream.NewRunner(adapters.All(), upstream.Settings{ReplayURL: base, Options: opts})
	}
	env := &contractEnv{store: s, wired: map[string]bool{}}
	env.key = contractAccount(t, s, 1000, nil)
	for _, k := range runner.Endpoints() {
		env.wired[k] = true
	}
	for k, c := range composite.All(nil) {
		env.wired[k] = slices.ContainsFunc(c.Legs, func(leg string) bool { return env.wired[leg] })
	}
	throttle := o.throttle
	if throttle == nil {
		throttle = app.ThrottleFromEnv()
	}
	// Monitors are scheduled (in memory, never delivered: a run would
	// charge the accounts under test behind their backs).
	deps := app.Deps{Store: s, Upstream: runner, Throttle: throttle, Scheduler: monitors.NewLocalScheduler(logger)}
	if o.wrap != nil {
		deps.Store = o.wrap(s)
	}
	// Usage events applied in process, as make run does, so /v1/status
	// reports the traffic the tests make.
	deps.Events = localEvents(t, deps.Store, logger)
	if o.mutate == nil {
		env.h = app.LocalHandler(logger, deps)
	} else {
		// app.LocalHandler, with each family's configuration changed.
		handlers := map[registry.Family]http.Handler{}
		for _, f := range registry.Families {
			cfg := app.Config(f, logger, deps)
			o.mutate(&cfg.Config)
			handlers[f] = app.New(cfg)
		}
		env.h = gateway.Local(registry.Default().Routes(), handlers, logger, os.Getenv(app.EnvErrorsURL))
	}
	env.spec = loadContractSpec(t, env.h)
	return env
}

// contractAccount creates an account with credits and one key (capped at
// limit when not nil) and returns the key.
func contractAccount(t *testing.T, s store.Store, credits int64, limit *int64) string {
	t.Helper()
	_, key := newAccount(t, s, credits, limit)
	return key
}

// contractSpec is the served document, loaded with kin-openapi.
type contractSpec struct {
	doc *openapi3.T
	// raw is the document as santhosh-tekuri/jsonschema reads it, for the
	// second opinion on bodies (secondOpinion).
	raw      any
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
	// headers are the response header names the document declares
	// anywhere (spec 4.9's), so an undeclared one on a response is seen.
	headers map[string]bool
}

func loadContractSpec(t *testing.T, h http.Handler) *contractSpec {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://api.test/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %s", rec.Code, rec.Body)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(rec.Body.Bytes())
	if err != nil {
		t.Fatalf("load the document: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %s: ValidateResponse would not use JSON Schema 2020-12", doc.OpenAPI)
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	spec := &contractSpec{doc: doc, raw: raw, compiled: map[string]*jsonschema.Schema{}, headers: map[string]bool{}}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, r := range op.Responses.Map() {
				for name := range r.Value.Headers {
					spec.headers[strings.ToLower(name)] = true
				}
			}
		}
	}
	return spec
}

// operations lists the document's operations, sorted by path then method.
func (s *contractSpec) operations() []contractOp {
	var ops []contractOp
	for path, item := range s.doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, contractOp{path: path, method: method, op: op})
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].path != ops[j].path {
			return ops[i].path < ops[j].path
		}
		return ops[i].method < ops[j].method
	})
	return ops
}

type contractOp struct {
	path, method string
	op           *openapi3.Operation
}

// key is the registry key of the operation ("" for /v1).
func (o contractOp) key() string { return strings.TrimPrefix(strings.TrimPrefix(o.path, "/v1"), "/") }

func (o contractOp) param(name string) *openapi3.Parameter {
	for _, p := range o.op.Parameters {
		if p.Value != nil && p.Value.Name == name {
			return p.Value
		}
	}
	return nil
}

// contractCall is one request, and the document operation it belongs to.
type contractCall struct {
	path       string // the operation's path in the document (a template)
	method     string
	target     string // path and query sent
	header     http.Header
	body       []byte
	remoteAddr string
}

type contractResult struct {
	code   int
	header http.Header
	body   []byte
}

func (r contractResult) json() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	return m
}

func (r contractResult) errorType() string {
	e, _ := r.json()["error"].(map[string]any)
	t, _ := e["type"].(string)
	return t
}

// outcome names the response in messages: its error.type, or "success".
func (r contractResult) outcome() string {
	if t := r.errorType(); t != "" {
		return t
	}
	return "success"
}

func (c contractCall) request() *http.Request {
	req := httptest.NewRequest(c.method, "http://api.test"+c.target, bytes.NewReader(c.body))
	for k, v := range c.header {
		req.Header[k] = append([]string(nil), v...)
	}
	if c.remoteAddr != "" {
		req.RemoteAddr = c.remoteAddr
	}
	return req
}

func (c contractCall) with(name, value string) contractCall {
	h := c.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if value == "" {
		h.Del(name)
	} else {
		h.Set(name, value)
	}
	c.header = h
	return c
}

// withQuery sets (or, with "", removes) one query parameter.
func (c contractCall) withQuery(name, value string) contractCall {
	p, q, _ := strings.Cut(c.target, "?")
	values, _ := url.ParseQuery(q)
	if value == "" {
		values.Del(name)
	} else {
		values.Set(name, value)
	}
	c.target = p
	if len(values) > 0 {
		c.target += "?" + values.Encode()
	}
	return c
}

func (e *contractEnv) do(c contractCall) contractResult {
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, c.request())
	return contractResult{code: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// example is the ready-to-run request utility/endpoint publishes for the
// operation, sent with the funded key.
func (e *contractEnv) example(t *testing.T, o contractOp) contractCall {
	t.Helper()
	q := "id=" + url.QueryEscape(o.key())
	if o.key() == "" {
		q = "url=" + url.QueryEscape(o.path)
	}
	r := e.do(contractCall{method: http.MethodGet, target: "/v1/utility/endpoint?" + q, header: http.Header{"X-Api-Key": {e.key}}})
	var desc struct {
		Data struct {
			Request struct {
				Method  string            `json:"method"`
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
				Body    json.RawMessage   `json:"body"`
			} `json:"request"`
		} `json:"data"`
	}
	if r.code != http.StatusOK || json.Unmarshal(r.body, &desc) != nil || desc.Data.Request.URL == "" {
		t.Fatalf("%s: utility/endpoint?%s answered %d %s", o.path, q, r.code, r.body)
	}
	req := desc.Data.Request
	u, err := url.Parse(req.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := contractCall{path: o.path, method: req.Method, target: u.RequestURI(), header: http.Header{}}
	for k, v := range req.Headers {
		c.header.Set(k, v)
	}
	c.header.Set("x-api-key", e.key)
	if len(req.Body) > 0 && string(req.Body) != "null" {
		c.body = req.Body
	}
	if !strings.EqualFold(c.method, o.method) {
		t.Fatalf("%s: the example is a %s, the document describes %s", o.path, c.method, o.method)
	}
	return c
}

// contractRequestCheck says what ValidateRequest should make of the request.
type contractRequestCheck int

const (
	contractRequestSkip    contractRequestCheck = iota
	contractRequestValid                        // the document must accept it (the example requests)
	contractRequestInvalid                      // the API refused a value: the document must refuse it too
)

type contractWant struct {
	status  int
	typ     string // error.type; "" for a success
	request contractRequestCheck
	reason  string // details.reason, when it matters to the case
}

// exchange sends c and checks the response against the document; a batch
// wrapper's items are checked against their own operations too.
func (e *contractEnv) exchange(t *testing.T, c contractCall, want contractWant) contractResult {
	t.Helper()
	r := e.do(c)
	e.spec.check(t, c, r, want)
	if c.path == "/v1/batch" && r.code == http.StatusOK {
		e.spec.checkBatchItems(t, c, r)
	}
	return r
}

// checkBatchItems validates each result of a batch wrapper as the answer of
// the GET it stands for: its status must be one that operation documents,
// and its envelope must match that operation's response for the status
// (the wrapper's own schema only says "a success or an error envelope").
func (s *contractSpec) checkBatchItems(t *testing.T, c contractCall, r contractResult) {
	t.Helper()
	var req struct {
		Requests []struct {
			Platform string         `json:"platform"`
			Endpoint string         `json:"endpoint"`
			Params   map[string]any `json:"params"`
		} `json:"requests"`
	}
	var wrapper struct {
		Results []json.RawMessage `json:"results"`
	}
	if json.Unmarshal(c.body, &req) != nil || json.Unmarshal(r.body, &wrapper) != nil || len(req.Requests) != len(wrapper.Results) {
		t.Errorf("UNEXPECTED batch: %d requests, %d results: %s", len(req.Requests), len(wrapper.Results), contractClip(string(r.body), 400))
		return
	}
	for i, it := range req.Requests {
		path := "/v1/" + it.Platform + "/" + it.Endpoint
		if s.doc.Paths.Value(path) == nil || s.doc.Paths.Value(path).Get == nil {
			continue // not an operation of the document (an unknown platform)
		}
		q := url.Values{}
		for k, v := range it.Params {
			q.Set(k, fmt.Sprint(v))
		}
		var item struct {
			Status int `json:"status"`
		}
		_ = json.Unmarshal(wrapper.Results[i], &item)
		ic := contractCall{path: path, method: http.MethodGet, target: path + "?" + q.Encode()}
		ir := contractResult{code: item.Status, header: http.Header{"Content-Type": {"application/json"}}, body: wrapper.Results[i]}
		t.Run(fmt.Sprintf("item %d", i), func(t *testing.T) {
			s.check(t, ic, ir, contractWant{status: item.Status, typ: ir.errorType()})
		})
	}
}

// check validates one actual response against the document's response
// for its operation and status.
func (s *contractSpec) check(t *testing.T, c contractCall, r contractResult, want contractWant) {
	t.Helper()
	label := fmt.Sprintf("%s %s (sent %s)", c.method, c.path, contractClip(c.target, 160))
	got := r.errorType()
	if r.code != want.status || got != want.typ {
		t.Errorf("UNEXPECTED %s: answered %d %s, the case expects %d %s: %s", label, r.code, got, want.status, want.typ, contractClip(string(r.body), 400))
	}
	if want.reason != "" {
		e, _ := r.json()["error"].(map[string]any)
		d, _ := e["details"].(map[string]any)
		if d["reason"] != want.reason {
			t.Errorf("UNEXPECTED %s: details.reason %v, want %s", label, d["reason"], want.reason)
		}
	}
	item := s.doc.Paths.Value(c.path)
	if item == nil || item.GetOperation(c.method) == nil {
		t.Fatalf("%s: no such operation in the document", label)
	}
	op := item.GetOperation(c.method)
	explicit := op.Responses.Status(r.code)
	if explicit == nil {
		t.Errorf("MISMATCH %s: status %d (%s) is not documented explicitly for this operation (documented: %s); only `default` matches it",
			label, r.code, r.outcome(), strings.Join(slices.Sorted(maps.Keys(op.Responses.Map())), ", "))
	}
	route := &routers.Route{Spec: s.doc, Server: s.doc.Servers[0], Path: c.path, PathItem: item, Method: c.method, Operation: op}
	req := c.request()
	reqInput := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: contractPathParams(c.path, req.URL.Path),
		Route:      route,
		Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true, MultiError: true},
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqInput,
		Status:                 r.code,
		Header:                 r.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(r.body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("MISMATCH %s: the %d %s response does not match the document: %v\n  body: %s",
			label, r.code, r.outcome(), contractOneLine(err), contractClip(string(r.body), 600))
	}
	if err := s.secondOpinion(c, op, r); err != nil {
		t.Errorf("MISMATCH %s (jsonschema/v6): the %d %s body does not match the document: %v\n  body: %s",
			label, r.code, r.outcome(), contractOneLine(err), contractClip(string(r.body), 600))
	}
	// Headers of spec 4.9 that this response carries although the
	// document does not declare them for this status.
	declared := map[string]bool{}
	documented := explicit
	if documented == nil {
		documented = op.Responses.Default()
	}
	if documented != nil && documented.Value != nil {
		for name := range documented.Value.Headers {
			declared[strings.ToLower(name)] = true
		}
	}
	var extra []string
	for name := range r.header {
		n := strings.ToLower(name)
		if s.headers[n] && !declared[n] {
			extra = append(extra, n+": "+r.header.Get(name))
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("MISMATCH %s: the %d %s response carries headers the document does not declare for it: %s",
			label, r.code, r.outcome(), strings.Join(extra, "; "))
	}
	switch want.request {
	case contractRequestValid:
		if err := openapi3filter.ValidateRequest(context.Background(), reqInput); err != nil {
			t.Errorf("MISMATCH %s: the API accepts this request but the document refuses it: %v", label, contractOneLine(err))
		}
	case contractRequestInvalid:
		if err := openapi3filter.ValidateRequest(context.Background(), reqInput); err == nil {
			t.Errorf("MISMATCH %s: the API refused this request with %d, but the document's parameters accept it", label, r.code)
		}
	}
}

// contractDocURL names the document for santhosh-tekuri/jsonschema.
const contractDocURL = "https://contract.test/openapi.json"

// secondOpinion validates a JSON body with santhosh-tekuri/jsonschema/v6
// (draft 2020-12, formats asserted as kin-openapi does) against the
// document's own schema for the operation and status, addressed by JSON
// pointer inside the whole document, so every $ref resolves as written.
// kin-openapi quietly falls back to its OpenAPI 3.0 validator when it
// cannot compile a schema for 2020-12; this keeps such a fallback from
// hiding a mismatch.
func (s *contractSpec) secondOpinion(c contractCall, op *openapi3.Operation, r contractResult) error {
	ref := op.Responses.Status(r.code)
	status := strconv.Itoa(r.code)
	if ref == nil {
		ref, status = op.Responses.Default(), "default"
	}
	media, _, _ := strings.Cut(r.header.Get("content-type"), ";")
	if ref == nil || ref.Value == nil || ref.Value.Content.Get(media) == nil || media != "application/json" {
		return nil // kin-openapi reports these
	}
	esc := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1") }
	pointer := "/paths/" + esc(c.path) + "/" + strings.ToLower(c.method) + "/responses/" + status
	if strings.HasPrefix(ref.Ref, "#/components/responses/") {
		pointer = strings.TrimPrefix(ref.Ref, "#")
	}
	pointer += "/content/" + esc(media) + "/schema"
	s.mu.Lock()
	sch, ok := s.compiled[pointer]
	if !ok {
		comp := jsonschema.NewCompiler()
		comp.DefaultDraft(jsonschema.Draft2020)
		comp.AssertFormat()
		if err := comp.AddResource(contractDocURL, s.raw); err != nil {
			s.mu.Unlock()
			return err
		}
		var err error
		if sch, err = comp.Compile(contractDocURL + "#" + pointer); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("compile %s: %w", pointer, err)
		}
		s.compiled[pointer] = sch
	}
	s.mu.Unlock()
	body, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
	if err != nil {
		return err
	}
	return sch.Validate(body)
}

// contractPathParams fills the document path's {names} from the request path.
func contractPathParams(template, actual string) map[string]string {
	out := map[string]string{}
	ts, as := strings.Split(template, "/"), strings.Split(actual, "/")
	if len(ts) != len(as) {
		return out
	}
	for i, seg := range ts {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out[seg[1:len(seg)-1]] = as[i]
		}
	}
	return out
}

func contractClip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// contractOneLine keeps kin-openapi's multi-line errors readable in a report.
func contractOneLine(err error) string {
	return contractClip(strings.Join(strings.Fields(err.Error()), " "), 1500)
}

// contractInvalidValue picks a query parameter of o and a value its declared
// schema refuses, so the API's 422 can be compared with the document.
func contractInvalidValue(o contractOp) (name, value string, ok bool) {
	var fallback string
	for _, ref := range o.op.Parameters {
		p := ref.Value
		if p == nil || p.In != openapi3.ParameterInQuery || p.Schema == nil || p.Schema.Value == nil {
			continue
		}
		s := p.Schema.Value
		switch {
		case s.Type.Is("integer") || s.Type.Is("number"):
			return p.Name, "not-a-number", true
		case len(s.Enum) > 0:
			return p.Name, "zz-not-allowed", true
		case s.Pattern != "":
			if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString("!!") {
				return p.Name, "!!", true
			}
		case s.Format == "date":
			return p.Name, "2026-13-45", true
		case s.MaxLength != nil && fallback == "":
			fallback = p.Name
		}
	}
	if fallback != "" {
		p := o.param(fallback)
		return fallback, strings.Repeat("a", int(*p.Schema.Value.MaxLength)+1), true
	}
	return "", "", false
}

// unwiredCall is the example call of a data endpoint no route serves
// here (which one changes as sources are wired).
func (e *contractEnv) unwiredCall(t *testing.T) contractCall {
	t.Helper()
	for _, o := range e.spec.operations() {
		if e.isData(o.key()) && !e.wired[o.key()] {
			return e.example(t, o)
		}
	}
	t.Fatal("every data endpoint has a route: no 501 to provoke")
	return contractCall{}
}

func (e *contractEnv) isData(key string) bool {
	ep, ok := registry.Default().Endpoint(key)
	return ok && ep.Kind == registry.Data
}

// TestContractEveryOperation calls every operation of the document: its
// example (200, or 501 where no route serves it), a dry run, an undeclared
// parameter (400), no key (401), an invalid value (422), an over-long
// Idempotency-Key (422) and, for path identifiers, a non-identifier (404).
func TestContractEveryOperation(t *testing.T) {
	env := newContractEnv(t, contractOptions{})
	ops := env.spec.operations()
	if len(ops) < 40 {
		t.Fatalf("only %d operations in the document", len(ops))
	}
	for _, o := range ops {
		t.Run(o.op.OperationID, func(t *testing.T) {
			ex := env.example(t, o)
			success := contractWant{status: http.StatusOK, request: contractRequestValid}
			ep, _ := registry.Default().Endpoint(o.key())
			switch {
			case env.isData(o.key()) && !env.wired[o.key()]:
				success = contractWant{status: http.StatusNotImplemented, typ: string(envelope.EndpointNotAvailable), request: contractRequestValid}
			case ep != nil && ep.Kind == registry.ServiceOwned && (ep.Origin == registry.SpecNamed || ep.MayNotFind):
				// Named by the spec without a shape (monitors, web jobs):
				// 501 until Meridian serves them, 200 afterwards; one that
				// reads what a caller owns (a recall) finds nothing under
				// the example id: its documented 404.
				switch r := env.do(ex); {
				case r.code == http.StatusNotImplemented:
					success = contractWant{status: http.StatusNotImplemented, typ: string(envelope.EndpointNotAvailable), request: contractRequestValid}
				case r.code == http.StatusNotFound && ep.MayNotFind:
					success = contractWant{status: http.StatusNotFound, typ: string(envelope.ResourceNotFound), request: contractRequestValid}
				}
			}
			t.Run("example", func(t *testing.T) { env.exchange(t, ex, success) })
			if o.param("dry_run") != nil {
				t.Run("dry_run", func(t *testing.T) { env.exchange(t, ex.withQuery("dry_run", "1"), success) })
			}
			t.Run("400_undeclared_parameter", func(t *testing.T) {
				env.exchange(t, ex.withQuery("zz_undeclared", "1"), contractWant{status: http.StatusBadRequest, typ: string(envelope.InvalidParameters)})
			})
			t.Run("401_missing_key", func(t *testing.T) {
				env.exchange(t, ex.with("x-api-key", ""), contractWant{status: http.StatusUnauthorized, typ: string(envelope.Unauthorized), reason: "missing_api_key"})
			})
			if name, value, ok := contractInvalidValue(o); ok {
				t.Run("422_invalid_"+name, func(t *testing.T) {
					env.exchange(t, ex.withQuery(name, value), contractWant{status: http.StatusUnprocessableEntity, typ: string(envelope.InvalidParameters), request: contractRequestInvalid})
				})
			}
			if o.method == http.MethodGet {
				t.Run("422_long_idempotency_key", func(t *testing.T) {
					env.exchange(t, ex.with("Idempotency-Key", strings.Repeat("k", 256)),
						contractWant{status: http.StatusUnprocessableEntity, typ: string(envelope.InvalidParameters), request: contractRequestInvalid})
				})
			}
			if strings.Contains(o.path, "{") {
				t.Run("404_not_an_identifier", func(t *testing.T) {
					c := ex
					c.target = regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(o.path, "word")
					env.exchange(t, c, contractWant{status: http.StatusNotFound, typ: string(envelope.EndpointNotFound)})
				})
			}
		})
	}
	t.Logf("%d operations; %d response schemas compiled for the second opinion", len(ops), len(env.spec.compiled))
}

// contractGet is a GET of an operation with the given key.
func contractGet(path, target, key string) contractCall {
	return contractCall{path: path, method: http.MethodGet, target: target, header: http.Header{"X-Api-Key": {key}}}
}

// TestContractPaymentRefusals: 402 INSUFFICIENT_CREDITS (an account with
// no credits) and KEY_LIMIT_EXCEEDED (a key capped at 0), and the dry
// runs that predict them.
func TestContractPaymentRefusals(t *testing.T) {
	env := newContractEnv(t, contractOptions{})
	broke := contractAccount(t, env.store, 0, nil)
	zero := int64(0)
	capped := contractAccount(t, env.store, 1000, &zero)
	cases := []struct{ path, target string }{
		{"/v1/company_registry/search", "/v1/company_registry/search?query=acme"},
		{"/v1/code_host/profile", "/v1/code_host/profile?handle=golang"},
		{"/v1/app_store_a/app-info", "/v1/app_store_a/app-info?app_id=284882215"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			// no-cache: a cached answer (shared across accounts) would be free.
			c := contractGet(tc.path, tc.target, broke).with("Cache-Control", "no-cache")
			env.exchange(t, c, contractWant{status: http.StatusPaymentRequired, typ: string(envelope.InsufficientCredits), request: contractRequestValid})
			c = contractGet(tc.path, tc.target, capped).with("Cache-Control", "no-cache")
			env.exchange(t, c, contractWant{status: http.StatusPaymentRequired, typ: string(envelope.KeyLimitExceeded), request: contractRequestValid})
			for _, key := range []string{broke, capped} {
				r := env.exchange(t, contractGet(tc.path, tc.target+"&dry_run=1", key), contractWant{status: http.StatusOK, request: contractRequestValid})
				if d, _ := r.json()["data"].(map[string]any); d["can_pay"] != false || d["refusal"] == nil {
					t.Errorf("dry run of a call that cannot be paid: %s", r.body)
				}
			}
		})
	}
}

// TestContractNotFound: 404 RESOURCE_NOT_FOUND from the replay fixtures
// that record one (GitHub, AT Protocol, iTunes) and from the discovery
// endpoints.
func TestContractNotFound(t *testing.T) {
	env := newContractEnv(t, contractOptions{})
	cases := []struct{ path, target string }{
		{"/v1/code_host/profile", "/v1/code_host/profile?handle=sample-missing"},
		{"/v1/code_host/profile/repos", "/v1/code_host/profile/repos?handle=sample-missing"},
		{"/v1/code_host/repo/issues", "/v1/code_host/repo/issues?repo=sample-org/sample-missing"},
		{"/v1/microblog_a/profile", "/v1/microblog_a/profile?handle=nobody.example.com"},
		{"/v1/app_store_a/app-info", "/v1/app_store_a/app-info?app_id=1"},
		{"/v1/code_host/repo/issues", "/v1/code_host/repo/issues?repo=sample-org/sample-no-issues"},
		{"/v1/utility/endpoint", "/v1/utility/endpoint?id=nowhere/nothing"},
		{"/v1/utility/endpoint", "/v1/utility/endpoint?url=/v1/nowhere/nothing"},
		{"/v1/utility/endpoint", "/v1/utility/endpoint?url=/v1/microblog_b/search-tweets"},
		{"/v1/utility/quickstart", "/v1/utility/quickstart?platform=nowhere"},
	}
	for _, tc := range cases {
		t.Run(tc.target, func(t *testing.T) {
			env.exchange(t, contractGet(tc.path, tc.target, env.key), contractWant{status: http.StatusNotFound, typ: string(envelope.ResourceNotFound), request: contractRequestValid})
		})
	}
}

// TestContractBatch: the wrapper with succeeded and failed items, and the
// batch's own refusals (400 malformed, 400 too many, 413, 401).
func TestContractBatch(t *testing.T) {
	env := newContractEnv(t, contractOptions{})
	batch := func(body string) contractCall {
		return contractCall{path: "/v1/batch", method: http.MethodPost, target: "/v1/batch", body: []byte(body),
			header: http.Header{"X-Api-Key": {env.key}, "Content-Type": {"application/json"}}}
	}
	t.Run("mixed items", func(t *testing.T) {
		r := env.exchange(t, batch(`{"requests": [
			{"platform": "company_registry", "endpoint": "search", "params": {"query": "acme", "limit": 2}},
			{"platform": "travel_booking", "endpoint": "search-attractions", "params": {}},
			{"platform": "code_host", "endpoint": "profile", "params": {"handle": "sample-missing"}},
			{"platform": "company_registry", "endpoint": "search", "params": {"query": "acme", "qery": "x"}},
			{"platform": "app_store_b", "endpoint": "categories", "params": {"dry_run": true}},
			{"platform": "nowhere", "endpoint": "nothing"},
			{"platform": "utility", "endpoint": "llms"}
		]}`), contractWant{status: http.StatusOK, request: contractRequestValid})
		if m := r.json(); m["succeeded"] != float64(2) || m["failed"] != float64(5) {
			t.Errorf("UNEXPECTED batch outcome: %s", contractClip(string(r.body), 800))
		}
	})
	t.Run("400 malformed", func(t *testing.T) {
		env.exchange(t, batch(`{"requests": [`), contractWant{status: http.StatusBadRequest, typ: string(envelope.InvalidParameters), reason: "malformed_body"})
	})
	t.Run("400 too many", func(t *testing.T) {
		items := strings.TrimSuffix(strings.Repeat(`{"platform": "app_store_b", "endpoint": "categories"},`, 21), ",")
		env.exchange(t, batch(`{"requests": [`+items+`]}`), contractWant{status: http.StatusBadRequest, typ: string(envelope.InvalidParameters), reason: "too_many_requests", request: contractRequestInvalid})
	})
	t.Run("413", func(t *testing.T) {
		big := `{"requests": [{"platform": "company_registry", "endpoint": "search", "params": {"query": "` + strings.Repeat("a", pipeline.MaxBatchBody) + `"}}]}`
		env.exchange(t, batch(big), contractWant{status: http.StatusRequestEntityTooLarge, typ: string(envelope.InvalidParameters)})
	})
	t.Run("401", func(t *testing.T) {
		env.exchange(t, batch(`{"requests": []}`).with("x-api-key", ""), contractWant{status: http.StatusUnauthorized, typ: string(envelope.Unauthorized)})
	})
}

// TestContractIdempotency: 409 while the first request with a key runs,
// the stored replay, and 422 for the key reused with other parameters.
func TestContractIdempotency(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	env := newContractEnv(t, contractOptions{mutate: func(cfg *pipeline.Config) {
		cfg.Handlers = map[string]pipeline.Handler{
			// Holds the first request inside the handler, so the second
			// deterministically meets a claimed key.
			"company_registry/search": func(ctx context.Context, _ *pipeline.Call) (any, *envelope.Error) {
				select {
				case entered <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return map[string]any{"items": []any{}, "count": 0}, nil
			},
		}
	}})
	path := "/v1/company_registry/search"
	c := contractGet(path, path+"?query=acme", env.key).with("Idempotency-Key", "contract-1")
	first := make(chan contractResult, 1)
	go func() { first <- env.do(c) }()
	<-entered
	env.exchange(t, c, contractWant{status: http.StatusConflict, typ: string(envelope.InvalidParameters), reason: "idempotency_in_progress", request: contractRequestValid})
	close(release)
	env.spec.check(t, c, <-first, contractWant{status: http.StatusOK, request: contractRequestValid})
	r := env.exchange(t, c, contractWant{status: http.StatusOK, request: contractRequestValid})
	if r.header.Get("x-idempotent-replay") != "true" {
		t.Errorf("UNEXPECTED: the retry is not a replay: %v", r.header)
	}
	env.exchange(t, c.withQuery("query", "other"), contractWant{status: http.StatusUnprocessableEntity, typ: string(envelope.InvalidParameters), reason: "idempotency_key_reused", request: contractRequestValid})

	// A replay is the stored JSON envelope (spec 4.10.2): an answer in
	// another format (utility/llms' markdown, free) is not kept, so the
	// retry runs again and answers as documented; a failure (404) replays.
	llms := contractGet("/v1/utility/llms", "/v1/utility/llms", env.key).with("Idempotency-Key", "contract-llms")
	env.exchange(t, llms, contractWant{status: http.StatusOK, request: contractRequestValid})
	r = env.exchange(t, llms, contractWant{status: http.StatusOK, request: contractRequestValid})
	if r.header.Get("x-idempotent-replay") != "" || !strings.HasPrefix(r.header.Get("content-type"), "text/markdown") {
		t.Errorf("the markdown retry: %v", r.header)
	}
	missing := contractGet("/v1/code_host/profile", "/v1/code_host/profile?handle=sample-missing", env.key).with("Idempotency-Key", "contract-404")
	env.exchange(t, missing, contractWant{status: http.StatusNotFound, typ: string(envelope.ResourceNotFound), request: contractRequestValid})
	env.exchange(t, missing, contractWant{status: http.StatusNotFound, typ: string(envelope.ResourceNotFound), request: contractRequestValid})
}

// contractFailingFairUse is a quota store that cannot be reached for one endpoint.
type contractFailingFairUse struct {
	store.FairUse
	endpoint string
}

func (f contractFailingFairUse) FairUseUsed(ctx context.Context, account, endpoint string, now time.Time) (int64, error) {
	if endpoint == f.endpoint {
		return 0, errors.New("quota store unavailable")
	}
	return f.FairUse.FairUseUsed(ctx, account, endpoint, now)
}

// TestContractServerFaults: 500 INTERNAL_ERROR (a handler that panics, on
// a data and a service endpoint, and as a batch item), and the fair-use
// refusals of a metered endpoint (429, and 503 while the quota store is
// unavailable) through handlers that stand in for its missing source.
func TestContractServerFaults(t *testing.T) {
	panics := func(context.Context, *pipeline.Call) (any, *envelope.Error) { panic("contract test") }
	served := func(context.Context, *pipeline.Call) (any, *envelope.Error) { return map[string]any{}, nil }
	env := newContractEnv(t, contractOptions{mutate: func(cfg *pipeline.Config) {
		cfg.Handlers = map[string]pipeline.Handler{
			"app_store_a/app-info": panics,
			"credits/balance":      panics,
			"search/all":           served,
			"search/creators":      served,
		}
		cfg.FairUseLimits = map[string]int64{"search/all": 1}
		cfg.FairUse = contractFailingFairUse{FairUse: cfg.FairUse, endpoint: "search/creators"}
	}})
	internal := contractWant{status: http.StatusInternalServerError, typ: string(envelope.InternalError), request: contractRequestValid}
	env.exchange(t, contractGet("/v1/app_store_a/app-info", "/v1/app_store_a/app-info?app_id=284882215", env.key), internal)
	env.exchange(t, contractGet("/v1/credits/balance", "/v1/credits/balance", env.key), internal)
	r := env.exchange(t, contractCall{path: "/v1/batch", method: http.MethodPost, target: "/v1/batch",
		header: http.Header{"X-Api-Key": {env.key}, "Content-Type": {"application/json"}},
		body:   []byte(`{"requests": [{"platform": "app_store_a", "endpoint": "app-info", "params": {"app_id": "284882215"}}, {"platform": "app_store_b", "endpoint": "categories"}]}`),
	}, contractWant{status: http.StatusOK, request: contractRequestValid})
	if m := r.json(); m["failed"] != float64(1) {
		t.Errorf("UNEXPECTED batch with a panicking item: %s", r.body)
	}

	all := contractGet("/v1/search/all", "/v1/search/all?query=golang", env.key).with("Cache-Control", "no-store")
	env.exchange(t, all, contractWant{status: http.StatusOK, request: contractRequestValid})
	env.exchange(t, all, contractWant{status: http.StatusTooManyRequests, typ: string(envelope.FairUseExceeded), request: contractRequestValid})
	creators := contractGet("/v1/search/creators", "/v1/search/creators?query=golang", env.key)
	env.exchange(t, creators, contractWant{status: http.StatusServiceUnavailable, typ: string(envelope.FairUseExceeded), request: contractRequestValid})
}

// TestContractUpstreamFaults: the replay upstream's recorded faults and an
// injected delay, with short attempt timeouts: 429 (the source's rate
// limit), 503 (its route resting afterwards), 502 (5xx, a reset, an
// unreadable body), 504 (no attempt in time) and 501.
func TestContractUpstreamFaults(t *testing.T) {
	var slow replay.Fixture
	slow.Match.Method, slow.Match.Path = http.MethodGet, "/search/companies"
	slow.Match.Query = map[string]string{"q": "sample slow"}
	slow.Response.DelayMS = 10_000
	slow.Response.Body = json.RawMessage(`{"items": []}`)
	env := newContractEnv(t, contractOptions{
		fixtures: map[string][]replay.Fixture{"companies_house": {slow}},
		// One attempt of a second: the delayed fixture times out, while a
		// loaded machine still answers every other fixture well within it.
		upstream: &upstream.Options{AttemptTimeout: time.Second, Timeout: 5 * time.Second, MaxAttempts: 1},
		// Every data endpoint has a replay route: a deployment without the
		// search fan-out gives the 501 to provoke.
		mutate: func(c *pipeline.Config) { delete(c.Composites, "search/all") },
	})
	env.wired["search/all"] = false
	unwired := env.unwiredCall(t)
	cases := []struct {
		name, path, target string
		want               contractWant
	}{
		{"429 source rate limit", "/v1/code_host/profile", "/v1/code_host/profile?handle=sample-429", contractWant{status: 429, typ: string(envelope.UpstreamError)}},
		{"503 route resting", "/v1/code_host/profile", "/v1/code_host/profile?handle=golang", contractWant{status: 503, typ: string(envelope.UpstreamError)}},
		{"502 server error", "/v1/code_host/profile/repos", "/v1/code_host/profile/repos?handle=sample-500", contractWant{status: 502, typ: string(envelope.UpstreamError)}},
		{"502 refused by the source", "/v1/code_host/repo/issues", "/v1/code_host/repo/issues?repo=sample-org/sample-forbidden", contractWant{status: 502, typ: string(envelope.UpstreamError)}},
		{"502 malformed", "/v1/code_host/repo/issues", "/v1/code_host/repo/issues?repo=sample-org/sample-malformed", contractWant{status: 502, typ: string(envelope.UpstreamError)}},
		{"502 reset", "/v1/video_platform/search", "/v1/video_platform/search?query=sample-reset", contractWant{status: 502, typ: string(envelope.UpstreamError)}},
		{"504 timeout", "/v1/company_registry/search", "/v1/company_registry/search?query=sample+slow", contractWant{status: 504, typ: string(envelope.UpstreamTimeout)}},
		{"501 no route", unwired.path, unwired.target, contractWant{status: 501, typ: string(envelope.EndpointNotAvailable)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.request = contractRequestValid
			r := env.exchange(t, contractGet(tc.path, tc.target, env.key), tc.want)
			if (tc.want.status == 429 || tc.want.status == 503) && r.header.Get("retry-after") == "" {
				t.Errorf("UNEXPECTED %s: no retry-after", tc.name)
			}
		})
	}
}

// TestContractRateLimited: 429 RATE_LIMITED past a small per-key limit (a
// data, a service and a batch item), and for repeated invalid keys (the
// batch wrapper included).
func TestContractRateLimited(t *testing.T) {
	env := newContractEnv(t, contractOptions{
		throttle: auth.NewThrottle(1),
		mutate:   func(cfg *pipeline.Config) { cfg.LimitRules = store.LimitRules{Rate: 2, Window: time.Minute} },
	})
	search := contractGet("/v1/company_registry/search", "/v1/company_registry/search?query=acme", env.key)
	env.exchange(t, search, contractWant{status: http.StatusOK, request: contractRequestValid})
	env.exchange(t, contractGet("/v1/credits/balance", "/v1/credits/balance", env.key), contractWant{status: http.StatusOK, request: contractRequestValid})
	limited := contractWant{status: http.StatusTooManyRequests, typ: string(envelope.RateLimited), reason: "rate_limit", request: contractRequestValid}
	env.exchange(t, search, limited)
	env.exchange(t, contractGet("/v1/credits/balance", "/v1/credits/balance", env.key), limited)
	env.exchange(t, contractGet("/v1", "/v1", env.key), limited)
	r := env.exchange(t, contractCall{path: "/v1/batch", method: http.MethodPost, target: "/v1/batch",
		header: http.Header{"X-Api-Key": {env.key}, "Content-Type": {"application/json"}},
		body:   []byte(`{"requests": [{"platform": "app_store_b", "endpoint": "categories"}]}`),
	}, contractWant{status: http.StatusOK, request: contractRequestValid})
	if m := r.json(); m["failed"] != float64(1) {
		t.Errorf("UNEXPECTED: the batch item was not rate limited: %s", r.body)
	}

	// One invalid key from a client, then everything it sends is refused.
	const client = "198.51.100.7:4000"
	bad := "mn_" + strings.Repeat("x", 43)
	c := contractGet("/v1/credits/balance", "/v1/credits/balance", bad)
	c.remoteAddr = client
	env.exchange(t, c, contractWant{status: http.StatusUnauthorized, typ: string(envelope.Unauthorized), reason: "invalid_api_key"})
	throttled := contractWant{status: http.StatusTooManyRequests, typ: string(envelope.RateLimited), reason: "invalid_key_attempts"}
	env.exchange(t, c, throttled)
	c = contractGet("/v1/company_registry/search", "/v1/company_registry/search?query=acme", bad)
	c.remoteAddr = client
	env.exchange(t, c, throttled)
	b := contractCall{path: "/v1/batch", method: http.MethodPost, target: "/v1/batch", remoteAddr: client,
		header: http.Header{"X-Api-Key": {bad}, "Content-Type": {"application/json"}}, body: []byte(`{"requests": []}`)}
	env.exchange(t, b, throttled)
}

// TestContractValidatorSeesMismatches proves the validation is not
// vacuous: kin-openapi must refuse a response whose error.type or
// error.status contradicts the narrowed schema of its status, a header
// value off its schema, and a success body missing required fields; so
// must the second opinion (jsonschema/v6) for the bodies. A silent
// fallback of either would make every other test pass.
func TestContractValidatorSeesMismatches(t *testing.T) {
	env := newContractEnv(t, contractOptions{})
	path := "/v1/company_registry/search"
	c := contractGet(path, path+"?query=acme", env.key)
	item := env.spec.doc.Paths.Value(path)
	op := item.GetOperation(http.MethodGet)
	route := &routers.Route{Spec: env.spec.doc, Server: env.spec.doc.Servers[0], Path: path, PathItem: item, Method: http.MethodGet, Operation: op}
	validate := func(status int, header http.Header, body string) error {
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: c.request(), Route: route},
			Status:                 status, Header: header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}
		in.SetBodyBytes([]byte(body))
		return openapi3filter.ValidateResponse(context.Background(), in)
	}
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	failure := func(typ string, status int) string {
		return `{"success":false,"error":{"type":"` + typ + `","message":"m","status":` + strconv.Itoa(status) + `,"doc_url":"http://api.test/docs/errors#x"},"credits_used":0,"request_id":"req_1"}`
	}
	second := func(status int, header http.Header, body string) error {
		return env.spec.secondOpinion(c, op, contractResult{code: status, header: header, body: []byte(body)})
	}
	if err := validate(404, jsonCT, failure("RESOURCE_NOT_FOUND", 404)); err != nil {
		t.Fatalf("a well-formed 404 is refused: %v", err)
	}
	if err := second(404, jsonCT, failure("RESOURCE_NOT_FOUND", 404)); err != nil {
		t.Fatalf("a well-formed 404 is refused by the second opinion: %v", err)
	}
	for name, tc := range map[string]struct {
		status int
		header http.Header
		body   string
	}{
		"a type another status carries":  {404, jsonCT, failure("UNAUTHORIZED", 404)},
		"a type outside the roster":      {404, jsonCT, failure("NOT_A_TYPE", 404)},
		"error.status not the HTTP one":  {404, jsonCT, failure("RESOURCE_NOT_FOUND", 400)},
		"a header off its schema":        {404, http.Header{"Content-Type": {"application/json"}, "X-Credits-Used": {"-1"}}, failure("RESOURCE_NOT_FOUND", 404)},
		"x-cache outside its enum":       {200, http.Header{"Content-Type": {"application/json"}, "X-Cache": {"MAYBE"}}, `{"success":true,"platform":"p","endpoint":"e","data":{},"credits_used":1,"request_id":"req_1","cached":false}`},
		"a success without request_id":   {200, jsonCT, `{"success":true,"platform":"p","endpoint":"e","data":{},"credits_used":1,"cached":false}`},
		"a data field of the wrong type": {200, jsonCT, `{"success":true,"platform":"p","endpoint":"e","data":{"items":"not a list"},"credits_used":1,"request_id":"req_1","cached":false}`},
	} {
		if err := validate(tc.status, tc.header, tc.body); err == nil {
			t.Errorf("the validator accepts %s", name)
		}
		if err := second(tc.status, tc.header, tc.body); err == nil && !strings.Contains(name, "header") && !strings.Contains(name, "x-cache") {
			t.Errorf("the second opinion accepts %s", name)
		}
	}
	// kin-openapi matches an undocumented status with default: hence the
	// separate check that every provoked status is documented explicitly.
	if err := validate(418, jsonCT, failure("INTERNAL_ERROR", 418)); err != nil || op.Responses.Status(418) != nil {
		t.Errorf("default no longer covers an undocumented status (%v): revisit the explicit-status check", err)
	}
}

// TestContractRequestRefusals: the other ways a request is refused before
// it runs (spec 5, 4.1, 7), and the cache's answers (x-cache).
func TestContractRequestRefusals(t *testing.T) {
	env := newContractEnv(t, contractOptions{})
	search := "/v1/company_registry/search"
	unauthorized := func(reason string) contractWant {
		return contractWant{status: http.StatusUnauthorized, typ: string(envelope.Unauthorized), reason: reason}
	}
	t.Run("401 key in the query", func(t *testing.T) {
		env.exchange(t, contractGet(search, search+"?query=acme&api_key="+env.key, ""), unauthorized("query_string_key_rejected"))
	})
	t.Run("401 unknown key", func(t *testing.T) {
		env.exchange(t, contractGet(search, search+"?query=acme", "mn_"+strings.Repeat("u", 43)), unauthorized("invalid_api_key"))
	})
	t.Run("401 Bearer on batch", func(t *testing.T) {
		c := contractCall{path: "/v1/batch", method: http.MethodPost, target: "/v1/batch", body: []byte(`{"requests": []}`),
			header: http.Header{"Authorization": {"Bearer " + env.key}, "Content-Type": {"application/json"}}}
		env.exchange(t, c, unauthorized(""))
	})
	t.Run("200 Bearer on a GET", func(t *testing.T) {
		c := contractGet(search, search+"?query=acme", "").with("Authorization", "Bearer "+env.key)
		env.exchange(t, c, contractWant{status: http.StatusOK, request: contractRequestValid})
	})
	t.Run("400 oversized query", func(t *testing.T) {
		env.exchange(t, contractGet(search, search+"?query="+strings.Repeat("a", 9000), env.key),
			contractWant{status: http.StatusBadRequest, typ: string(envelope.InvalidParameters)})
	})
	t.Run("422 missing required", func(t *testing.T) {
		env.exchange(t, contractGet(search, search+"?limit=2", env.key),
			contractWant{status: http.StatusUnprocessableEntity, typ: string(envelope.InvalidParameters), request: contractRequestInvalid})
	})
	t.Run("400 malformed query", func(t *testing.T) {
		env.exchange(t, contractGet(search, search+"?query=%zz", env.key),
			contractWant{status: http.StatusBadRequest, typ: string(envelope.InvalidParameters), reason: "malformed_query"})
	})
	t.Run("422 repeated", func(t *testing.T) {
		env.exchange(t, contractGet(search, search+"?query=acme&query=other", env.key),
			contractWant{status: http.StatusUnprocessableEntity, typ: string(envelope.InvalidParameters)})
	})
	t.Run("422 invalid UTF-8", func(t *testing.T) {
		env.exchange(t, contractGet(search, search+"?query=%ff", env.key),
			contractWant{status: http.StatusUnprocessableEntity, typ: string(envelope.InvalidParameters)})
	})
	t.Run("422 refused by the source", func(t *testing.T) {
		env.exchange(t, contractGet("/v1/app_store_a/app-info", "/v1/app_store_a/app-info?app_id=284882215&country=zz", env.key),
			contractWant{status: http.StatusUnprocessableEntity, typ: string(envelope.InvalidParameters)})
	})
	t.Run("422 path and query disagree", func(t *testing.T) {
		env.exchange(t, contractGet("/v1/monitors/{id}/runs", "/v1/monitors/mon_1/runs?id=mon_2", env.key),
			contractWant{status: http.StatusUnprocessableEntity, typ: string(envelope.InvalidParameters)})
	})
	t.Run("x-cache", func(t *testing.T) {
		// Spec 4.9: HIT (cost 0) or MISS on every successful routed answer;
		// a fresh answer asked for with Cache-Control is a MISS too.
		c := contractGet(search, search+"?query=acme&limit=3", env.key)
		balance := contractGet("/v1/credits/balance", "/v1/credits/balance", env.key)
		for _, tc := range []struct {
			call         contractCall
			cacheControl string
			want         string
		}{
			{c, "", "MISS"},
			{c, "", "HIT"},
			{c, "no-cache", "MISS"},
			{c, "no-store", "MISS"},
			{balance, "", "MISS"},
		} {
			r := env.exchange(t, tc.call.with("Cache-Control", tc.cacheControl), contractWant{status: http.StatusOK, request: contractRequestValid})
			if got := r.header.Get("x-cache"); got != tc.want {
				t.Errorf("%s %s with Cache-Control %q: x-cache %q, want %q", tc.call.method, tc.call.path, tc.cacheControl, got, tc.want)
			}
		}
	})
}

// contractDownIdempotency is an idempotency store that cannot be reached.
type contractDownIdempotency struct{}

var errContractDown = errors.New("store unavailable")

func (contractDownIdempotency) ClaimIdempotency(context.Context, string, string, string, string, time.Time, time.Time, time.Time) (store.IdempotencyRecord, bool, error) {
	return store.IdempotencyRecord{}, false, errContractDown
}

func (contractDownIdempotency) CompleteIdempotency(context.Context, string, string, string, int, []byte, time.Time) error {
	return errContractDown
}

func (contractDownIdempotency) ReleaseIdempotency(context.Context, string, string, string) error {
	return errContractDown
}

// contractRefundless is the embedded store with refunds that cannot be written.
type contractRefundless struct{ *embedded.Store }

func (contractRefundless) Refund(context.Context, string, string) (int64, error) {
	return 0, errContractDown
}

// TestContractStoreFaults: what a caller sees when parts of the store are
// down: a paid failure whose refund is pending (credits_used null,
// details.billing_status) and a call without replay protection
// (x-idempotency-status: unavailable).
func TestContractStoreFaults(t *testing.T) {
	env := newContractEnv(t, contractOptions{
		wrap: func(s *embedded.Store) store.Store { return contractRefundless{s} },
		mutate: func(cfg *pipeline.Config) {
			cfg.Idempotency = contractDownIdempotency{}
			cfg.Handlers = map[string]pipeline.Handler{
				"code_host/profile": func(context.Context, *pipeline.Call) (any, *envelope.Error) {
					return nil, envelope.New(envelope.UpstreamError, http.StatusBadGateway, "The source answered unusably.", nil)
				},
			}
		},
	})
	r := env.exchange(t, contractGet("/v1/code_host/profile", "/v1/code_host/profile?handle=golang", env.key),
		contractWant{status: http.StatusBadGateway, typ: string(envelope.UpstreamError), request: contractRequestValid})
	if r.json()["credits_used"] != nil {
		t.Errorf("UNEXPECTED: a pending refund reports credits_used %v", r.json()["credits_used"])
	}
	c := contractGet("/v1/company_registry/search", "/v1/company_registry/search?query=acme", env.key).with("Idempotency-Key", "contract-down")
	r = env.exchange(t, c, contractWant{status: http.StatusOK, request: contractRequestValid})
	if r.header.Get("x-idempotency-status") != "unavailable" {
		t.Errorf("UNEXPECTED: no x-idempotency-status: %v", r.header)
	}
}

// TestContractStatusWithTraffic validates /v1/status once usage events
// have counted successes and failures (p50/p95 and state filled in).
func TestContractStatusWithTraffic(t *testing.T) {
	env := newContractEnv(t, contractOptions{})
	env.exchange(t, contractGet("/v1/code_host/profile", "/v1/code_host/profile?handle=golang", env.key), contractWant{status: http.StatusOK, request: contractRequestValid})
	env.exchange(t, contractGet("/v1/code_host/profile", "/v1/code_host/profile?handle=sample-malformed", env.key), contractWant{status: http.StatusBadGateway, typ: string(envelope.UpstreamError), request: contractRequestValid})
	status := contractGet("/v1/status", "/v1/status", env.key)
	// Events are applied in the background: wait for them (not a timing
	// assertion; the deadline only bounds a broken run).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := env.exchange(t, status, contractWant{status: http.StatusOK, request: contractRequestValid})
		var body struct {
			Data struct {
				Platforms []struct {
					Platform string `json:"platform"`
					Requests int    `json:"requests"`
				} `json:"platforms"`
			} `json:"data"`
		}
		_ = json.Unmarshal(r.body, &body)
		counted := false
		for _, p := range body.Data.Platforms {
			counted = counted || (p.Platform == "code_host" && p.Requests == 2)
		}
		if counted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never counted the calls: %s", r.body)
		}
	}
}

// TestContractParameters compares each query parameter's schema in the
// document with the API's validation: values the schema admits (bounds,
// enum members, default, example, longest string) must not be refused for
// that parameter, and values it refuses (past a bound, outside the enum,
// off the pattern, too long, not a date) must be refused. Calls are dry
// runs where the operation has them, so nothing is fetched or charged.
func TestContractParameters(t *testing.T) {
	env := newContractEnv(t, contractOptions{})
	var admitted, refused int
	defer func() { t.Logf("%d admitted and %d refused values compared", admitted, refused) }()
	for _, o := range env.spec.operations() {
		if o.method != http.MethodGet {
			continue
		}
		t.Run(o.op.OperationID, func(t *testing.T) {
			ex := env.example(t, o)
			// A key per operation: the sweep would pass one key's 600 a minute.
			ex = ex.with("x-api-key", contractAccount(t, env.store, 10, nil))
			if o.param("dry_run") != nil {
				ex = ex.withQuery("dry_run", "1")
			}
			for _, ref := range o.op.Parameters {
				p := ref.Value
				if p.In != openapi3.ParameterInQuery || p.Name == "dry_run" || p.Schema == nil || p.Schema.Value == nil {
					continue
				}
				good, bad := contractParamValues(p.Schema.Value)
				admitted, refused = admitted+len(good), refused+len(bad)
				for _, v := range good {
					c := ex.withQuery(p.Name, v)
					if r := env.do(c); contractRefusedFor(r, p.Name) {
						t.Errorf("MISMATCH %s %s: the document admits %s=%q (schema %s) but the API refuses it: %s",
							o.method, o.path, p.Name, contractClip(v, 40), contractSchemaJSON(p.Schema.Value), contractClip(string(r.body), 400))
					}
				}
				for _, v := range bad {
					c := ex.withQuery(p.Name, v)
					if r := env.do(c); r.code != http.StatusUnprocessableEntity && r.code != http.StatusBadRequest {
						t.Errorf("MISMATCH %s %s: the document refuses %s=%q (schema %s) but the API answers %d %s",
							o.method, o.path, p.Name, contractClip(v, 40), contractSchemaJSON(p.Schema.Value), r.code, r.outcome())
					}
				}
			}
		})
	}
}

// contractParamValues are values a parameter schema admits and values it refuses.
func contractParamValues(s *openapi3.Schema) (good, bad []string) {
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	switch {
	case s.Type.Is("integer") || s.Type.Is("number"):
		if s.Min != nil {
			good, bad = append(good, num(*s.Min)), append(bad, num(*s.Min-1))
		}
		if s.Max != nil {
			good, bad = append(good, num(*s.Max)), append(bad, num(*s.Max+1))
		}
		if s.Type.Is("integer") {
			bad = append(bad, "1.5")
		}
		bad = append(bad, "x")
	case len(s.Enum) > 0:
		for _, v := range s.Enum {
			good = append(good, fmt.Sprint(v))
		}
		bad = append(bad, "zz-not-allowed")
	case s.Format == "date":
		bad = append(bad, "2026-13-45", "yesterday")
	case s.Pattern != "":
		if re, err := regexp.Compile(s.Pattern); err == nil {
			for _, v := range []string{"!!", " ", "a b"} {
				if !re.MatchString(v) {
					bad = append(bad, v)
					break
				}
			}
		}
	case s.MaxLength != nil && s.Format == "":
		good = append(good, strings.Repeat("a", int(*s.MaxLength)))
		bad = append(bad, strings.Repeat("a", int(*s.MaxLength)+1))
	}
	if s.Default != nil {
		good = append(good, fmt.Sprint(s.Default))
	}
	for _, e := range s.Examples {
		good = append(good, fmt.Sprint(e))
	}
	return good, bad
}

// contractRefusedFor reports a 400 or 422 that names the parameter as the fault
// (not an opaque cursor a source did not issue, or a value the source
// itself refuses: the document cannot describe those).
func contractRefusedFor(r contractResult, name string) bool {
	if r.code != http.StatusBadRequest && r.code != http.StatusUnprocessableEntity {
		return false
	}
	e, _ := r.json()["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	problems := []map[string]any{d}
	if list, ok := d["errors"].([]any); ok {
		for _, x := range list {
			if m, ok := x.(map[string]any); ok {
				problems = append(problems, m)
			}
		}
	}
	for _, p := range problems {
		if p["field"] == name && p["reason"] != "invalid_cursor" && p["reason"] != "not_accepted_by_source" {
			return true
		}
	}
	return false
}

func contractSchemaJSON(s *openapi3.Schema) string {
	raw, _ := json.Marshal(s)
	return contractClip(string(raw), 200)
}
