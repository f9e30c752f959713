// Package mcpserver is Meridian's MCP server (/mcp): every data endpoint of
// the registry, plus the free catalogue, endpoint, balance and transaction
// endpoints, as a typed tool. A tool call is a GET through the same API
// handler a direct call reaches, with the caller's own key, so limits,
// validation (near-miss suggestions included), the cache, billing,
// upstream routes and usage events all apply exactly as they do to /v1.
// It speaks the streamable HTTP transport in stateless mode with JSON
// responses, so every request stands alone, as Lambda needs; a call of a
// streaming tool that asks for progress is answered as server-sent events
// instead, carrying a progress notification per leg (progress.go).
//
// The pipeline serves it as a Surface (surface.go), given only by the mains
// that serve /mcp (app.WithMCP), so no other function links the SDK. It
// touches nothing itself: the caller is authenticated through the
// pipeline's Exchange, and every tool call runs through pipeline.Run.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/openapi"
	"github.com/meridian-data/meridian/shared/registry"
)

// Version is the server version MCP clients see.
const Version = "1.0.0"

// freeTools are the service-owned endpoints offered as tools next to the
// data endpoints (issue: catalogue, one endpoint, balance, transactions;
// an agent watching its spend also reads usage), and the AI-assist recall
// an agent needs after exclude or fit.
var freeTools = []string{"utility/endpoints", "utility/endpoint", "credits/balance", "credits/transactions", "credits/usage", "assist/recall",
	// An agent schedules, reads and manages monitors, and polls the web
	// jobs it started with async=1.
	"monitors", "monitors/create", "monitors/{id}", "monitors/{id}/pause", "monitors/{id}/resume", "monitors/{id}/delete",
	"monitors/{id}/runs", "web/jobs/{id}"}

// forwarded are the request headers a tool call carries over from the MCP
// request: the key (either form), and what identifies the client.
var forwarded = []string{"x-api-key", "authorization", "x-forwarded-for", "x-forwarded-proto", "user-agent"}

// Options are what the MCP server learns from the API it fronts.
type Options struct {
	// Schemas gives each data endpoint's data schema (nil: none).
	Schemas func(string) (json.RawMessage, bool)
	// ErrorsURL gives the errors reference doc_url anchors into for a
	// request, as the API derives it, for the failures answered here
	// without reaching the API (nil: the request host's /docs/errors).
	ErrorsURL func(*http.Request) string
	// Available says whether this deployment can serve an endpoint (nil:
	// every one); a tool that cannot says so in its description.
	Available func(*registry.Endpoint) bool
	Logger    *slog.Logger
}

// New builds the /mcp handler over api, the handler that serves /v1.
func New(reg *registry.Registry, api http.Handler, opts Options) http.Handler {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	errorsURL := opts.ErrorsURL
	if errorsURL == nil {
		errorsURL = func(r *http.Request) string { return envelope.ErrorsReference("http", r.Host) }
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "meridian", Title: "Meridian public data API", Version: Version},
		&mcp.ServerOptions{Instructions: "Each tool is one Meridian endpoint and costs what the endpoint costs (the tool description says how many credits; cached answers, failures and dry runs cost 0). Pass dry_run=true for a free estimate. Errors carry error.type; see https://modelcontextprotocol.io for the protocol."})
	streaming := map[string]bool{}
	for _, t := range Tools(reg, opts) {
		server.AddTool(t.Tool, call(api, t.Endpoint, logger))
		streaming[t.Tool.Name] = t.Endpoint.Streams
	}
	getServer := func(*http.Request) *mcp.Server { return server }
	asJSON := mcp.NewStreamableHTTPHandler(getServer,
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: logger})
	// In JSON mode the SDK sends a call's notifications out of band, which
	// in stateless mode is nowhere: progress needs the call's own stream.
	asEvents := mcp.NewStreamableHTTPHandler(getServer,
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: logger})
	// The SDK hands tools the request headers but not the host, which the
	// API needs for doc_url; the request context reaches the tool handler.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := origin{host: r.Host, client: r.RemoteAddr, errorsURL: errorsURL(r)}
		h := asJSON
		if asksForProgress(r, streaming) {
			h, origin.progress = asEvents, true
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), originKey{}, origin)))
	})
}

// origin is what a tool call keeps of the MCP request it came in.
type origin struct {
	host string
	// client is the /mcp caller's address: tool calls count against its
	// own invalid-key throttle, never one shared by every caller.
	client    string
	errorsURL string
	// progress: the call is answered as events, so progress
	// notifications reach the client.
	progress bool
}

// originKey is the context key of the MCP request's origin.
type originKey struct{}

// Tool is an MCP tool and the endpoint it calls.
type Tool struct {
	Tool     *mcp.Tool
	Endpoint *registry.Endpoint
}

// Tools lists the tools of the registry: one per live data endpoint and
// one per free tool endpoint, sorted by name.
func Tools(reg *registry.Registry, opts Options) []Tool {
	var out []Tool
	for _, e := range reg.Live() {
		free := false
		for _, k := range freeTools {
			free = free || e.Key() == k
		}
		if e.Kind != registry.Data && !free {
			continue
		}
		available := opts.Available == nil || opts.Available(e)
		out = append(out, Tool{Tool: tool(e, opts.Schemas, available), Endpoint: e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool.Name < out[j].Tool.Name })
	return out
}

// Name is an endpoint's tool name: its key with "/" as "__" and path
// identifiers dropped (code_host/profile/repos → code_host__profile__repos,
// monitors/{id}/runs → monitors__runs); a key ending in an identifier
// reads one item and ends in "get" (monitors/{id} → monitors__get).
func Name(e *registry.Endpoint) string {
	var parts []string
	segs := strings.Split(e.Key(), "/")
	for _, seg := range segs {
		if !strings.HasPrefix(seg, "{") {
			parts = append(parts, seg)
		}
	}
	if strings.HasPrefix(segs[len(segs)-1], "{") {
		parts = append(parts, "get")
	}
	return strings.Join(parts, "__")
}

func tool(e *registry.Endpoint, schemas func(string) (json.RawMessage, bool), available bool) *mcp.Tool {
	desc := e.Description
	if e.Kind == registry.Data {
		desc += fmt.Sprintf(" Costs %d credit%s per successful uncached call; cached answers, failures and dry runs cost 0.", e.Cost, plural(e.Cost))
	} else {
		desc += " Free."
	}
	if !available {
		// An agent choosing tools should not learn this from a failure.
		desc += " Not available in this deployment: no live source is configured, so calls answer ENDPOINT_NOT_AVAILABLE."
	}
	t := &mcp.Tool{
		Name: Name(e), Title: e.Name, Description: desc,
		InputSchema: inputSchema(e),
		Annotations: annotations(e),
		Meta:        mcp.Meta{"meridian/path": e.Path(), "meridian/credit_cost": e.Cost, "meridian/available": available},
	}
	if schemas != nil {
		if data, ok := schemas(e.Key()); ok {
			// Clients validate structured content against the output
			// schema even on isError, so it admits the error envelope and
			// the dry-run estimate too. An unreadable data schema (a build
			// defect the tests catch) leaves the tool without one rather
			// than without the tool.
			if schema, err := openapi.ToolResultSchema(data); err == nil {
				t.OutputSchema = schema
			}
		}
	}
	return t
}

// annotations: a GET reads; a POST changes the account's monitors, and
// deleting one cannot be undone.
func annotations(e *registry.Endpoint) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{ReadOnlyHint: e.HTTPMethod() == http.MethodGet, OpenWorldHint: ptr(e.Kind == registry.Data)}
	if !a.ReadOnlyHint {
		a.DestructiveHint = ptr(strings.HasSuffix(e.ID, "/delete"))
	}
	return a
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func ptr[T any](v T) *T { return &v }

// inputSchema describes the endpoint's parameters for an agent: the
// parameter schemas of the OpenAPI document, with booleans as JSON
// booleans and lists as arrays (or comma-separated strings). Undeclared
// names are not refused here: the API refuses them with suggestions.
func inputSchema(e *registry.Endpoint) map[string]any {
	props := map[string]any{}
	var required []string
	for _, p := range e.Accepted() {
		s := openapi.ParamSchema(p)
		switch p.Type {
		case registry.Boolean:
			s = map[string]any{"type": "boolean"}
		case registry.List:
			item := openapi.ParamSchema(&registry.Param{Type: p.Item, Enum: p.Enum, Pattern: p.Pattern})
			s = map[string]any{"type": []string{"array", "string"}, "items": item}
		}
		if p.Description != "" {
			s["description"] = p.Description
		}
		props[p.Name] = s
		if p.Required {
			required = append(required, p.Name)
		}
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	return schema
}

// call runs a tool as GET on the endpoint's path through api, with the
// MCP request's key, host and client headers, and returns the envelope as
// both text and structured content, with isError on failure. Every
// failure is a full error envelope (spec 2.2), so it conforms to the
// output schema. Idempotency-Key is never forwarded: MCP calls are not
// replayed (spec 4.10.4). A streaming tool called with a progress token,
// on a request New answers as events, calls the API with stream=1: each
// leg event becomes a progress notification, and the result event's
// envelope the result.
func call(api http.Handler, e *registry.Endpoint, logger *slog.Logger) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		header := http.Header{}
		if req.Extra != nil && req.Extra.Header != nil {
			header = req.Extra.Header
		}
		from, _ := ctx.Value(originKey{}).(origin)
		query, failure := queryOf(req.Params.Arguments)
		if failure != nil {
			return toolError(failure, envelope.NewRequestID(), from.errorsURL), nil
		}
		w := &recorder{header: http.Header{}}
		apiCtx := ctx
		if token := req.Params.GetProgressToken(); e.Streams && from.progress && validToken(token) {
			query = withStream(query)
			// A client gone mid-stream ends the API call as a disconnect
			// does: the remaining legs stop and the stream's charging rule
			// applies.
			var clientGone context.CancelFunc
			apiCtx, clientGone = context.WithCancel(ctx)
			defer clientGone()
			reporter := &progressReporter{ctx: ctx, session: req.Session, token: token, clientGone: clientGone, logger: logger}
			w.onLeg = reporter.leg
		}
		target, query := pathOf(e, query)
		if query != "" {
			target += "?" + query
		}
		r, err := http.NewRequestWithContext(apiCtx, e.HTTPMethod(), target, nil)
		if err != nil {
			return internalError(logger, e, from.errorsURL, err), nil
		}
		// The API derives doc_url and example addresses from the host.
		r.Host = from.host
		r.RemoteAddr = from.client
		for _, h := range forwarded {
			if v := header.Get(h); v != "" {
				r.Header.Set(h, v)
			}
		}
		api.ServeHTTP(w, r)
		if w.lost != nil {
			// Nobody is left to answer.
			logger.Info("mcp client gone during a streamed tool call", "endpoint", e.Path(), "error", w.lost.Error())
			return nil, w.lost
		}
		var head struct {
			Success *bool `json:"success"`
		}
		body := bytes.TrimSpace(w.body.Bytes())
		if json.Unmarshal(body, &head) != nil || head.Success == nil {
			return internalError(logger, e, from.errorsURL, fmt.Errorf("the API answered %d without a JSON envelope", w.status)), nil
		}
		// The API's bytes as they are: numbers keep their precision and the
		// text equals the structured content.
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(body)}},
			StructuredContent: json.RawMessage(body),
			IsError:           w.status >= 300 || !*head.Success,
		}, nil
	}
}

// toolError is the error envelope the API would have written for a
// failure that never reached it: credits_used 0, a fresh request id and
// doc_url on the deployment's errors reference.
func toolError(e *envelope.Error, requestID, errorsURL string) *mcp.CallToolResult {
	// The details here hold only strings, so encoding cannot fail.
	body, _ := envelope.Marshal(envelope.NewFailure(e, requestID, errorsURL))
	body = bytes.TrimSpace(body)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}, StructuredContent: json.RawMessage(body)}
}

// internalError logs a fault against the request id the caller sees.
func internalError(logger *slog.Logger, e *registry.Endpoint, errorsURL string, err error) *mcp.CallToolResult {
	id := envelope.NewRequestID()
	if logger != nil {
		logger.Error("mcp tool call failed", "request_id", id, "endpoint", e.Path(), "error", err.Error())
	}
	return toolError(envelope.Internal(), id, errorsURL)
}

// queryOf turns tool arguments into a query string: strings as they are,
// numbers in their shortest form, booleans as true/false, arrays
// comma-joined. Anything else is refused as the API refuses a bad
// parameter; the rest of validation is the API's.
func queryOf(raw json.RawMessage) (string, *envelope.Error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return "", nil
	}
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return "", envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
			"Tool arguments must be a JSON object of parameter names and values.",
			map[string]any{"reason": "malformed_arguments"})
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	// Sorted, so the refused field is the same on every call.
	sort.Strings(names)
	q := url.Values{}
	for _, name := range names {
		v := args[name]
		s, ok := scalar(v)
		if arr, isArr := v.([]any); isArr {
			parts := make([]string, 0, len(arr))
			for _, item := range arr {
				p, pok := scalar(item)
				if !pok {
					return "", invalidType(name)
				}
				parts = append(parts, p)
			}
			s, ok = strings.Join(parts, ","), true
		}
		if !ok {
			return "", invalidType(name)
		}
		if v != nil {
			q.Set(name, s)
		}
	}
	return q.Encode(), nil
}

// pathOf puts the arguments naming path identifiers ({id}) into the
// endpoint's path, and returns the rest as its query.
func pathOf(e *registry.Endpoint, query string) (path, rest string) {
	path = e.Path()
	if !strings.Contains(path, "{") {
		return path, query
	}
	q, _ := url.ParseQuery(query) // queryOf encoded it
	for _, p := range e.Accepted() {
		if name := "{" + p.Name + "}"; strings.Contains(path, name) {
			// An identifier left out stays a placeholder, which resolves
			// to nothing: the API's 404 names the path.
			if v := q.Get(p.Name); v != "" {
				path = strings.ReplaceAll(path, name, url.PathEscape(v))
				q.Del(p.Name)
			}
		}
	}
	return path, q.Encode()
}

// invalidType is the refusal the API gives a value of the wrong type
// (422, details.field and details.reason).
func invalidType(name string) *envelope.Error {
	return envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
		name+" must be a string, number, boolean or a list of them.",
		map[string]any{"field": name, "reason": "invalid_type"})
}

func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", true
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

// recorder keeps an in-process answer: a JSON body as written or, when
// the API answers an event stream (stream=1, whoever asked for it), the
// data of its result event, the envelope a plain call answers, with each
// leg event handed to onLeg as it is written. Once onLeg fails, writes
// fail: the API sees its caller gone, and counts that leg undelivered.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	onLeg  func(data []byte) error
	events *eventParser // set when the answer is an event stream
	lost   error
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status != 0 {
		return
	}
	r.status = status
	if isEventStream(r.header.Get("content-type")) {
		r.events = &eventParser{}
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.events == nil {
		return r.body.Write(b)
	}
	if r.lost == nil {
		r.events.feed(b, r.dispatch)
	}
	if r.lost != nil {
		return 0, r.lost
	}
	return len(b), nil
}

// Flush lets the API stream (it flushes after every event); events are
// handled as they are written, so nothing waits here.
func (r *recorder) Flush() {}

func (r *recorder) dispatch(event string, data []byte) {
	switch event {
	case eventLeg:
		if r.onLeg != nil && r.lost == nil {
			r.lost = r.onLeg(data)
		}
	case eventResult:
		r.body.Reset()
		r.body.Write(data)
	}
}
