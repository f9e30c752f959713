// Package mcpserver is Meridian's MCP server (/mcp): every data endpoint of
// the registry, plus the free catalogue, endpoint, balance and transaction
// endpoints, as a typed tool. A tool call is a GET through the same API
// handler a direct call reaches, with the caller's own key, so limits,
// validation (near-miss suggestions included), the cache, billing,
// upstream routes and usage events all apply exactly as they do to /v1.
// It speaks the streamable HTTP transport in stateless mode with JSON
// responses, so every request stands alone, as Lambda needs.
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

	"github.com/meridian-data/meridian/shared/openapi"
	"github.com/meridian-data/meridian/shared/registry"
)

// Version is the server version MCP clients see.
const Version = "1.0.0"

// freeTools are the service-owned endpoints offered as tools next to the
// data endpoints (issue: catalogue, one endpoint, balance, transactions).
var freeTools = []string{"utility/endpoints", "utility/endpoint", "credits/balance", "credits/transactions"}

// forwarded are the request headers a tool call carries over from the MCP
// request: the key (either form), and what identifies the client.
var forwarded = []string{"x-api-key", "authorization", "x-forwarded-for", "x-forwarded-proto", "user-agent"}

// New builds the /mcp handler over api, the handler that serves /v1.
// schemas gives each data endpoint's data schema (nil: none).
func New(reg *registry.Registry, api http.Handler, schemas func(string) (json.RawMessage, bool), logger *slog.Logger) http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "meridian", Title: "Meridian public data API", Version: Version},
		&mcp.ServerOptions{Instructions: "Each tool is one Meridian endpoint and costs what the endpoint costs (the tool description says how many credits; cached answers, failures and dry runs cost 0). Pass dry_run=true for a free estimate. Errors carry error.type; see https://modelcontextprotocol.io for the protocol."})
	for _, t := range Tools(reg, schemas) {
		server.AddTool(t.Tool, call(api, t.Endpoint))
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: logger})
}

// Tool is an MCP tool and the endpoint it calls.
type Tool struct {
	Tool     *mcp.Tool
	Endpoint *registry.Endpoint
}

// Tools lists the tools of the registry: one per live data endpoint and
// one per free tool endpoint, sorted by name.
func Tools(reg *registry.Registry, schemas func(string) (json.RawMessage, bool)) []Tool {
	var out []Tool
	for _, e := range reg.Live() {
		free := false
		for _, k := range freeTools {
			free = free || e.Key() == k
		}
		if e.Kind != registry.Data && !free {
			continue
		}
		out = append(out, Tool{Tool: tool(e, schemas), Endpoint: e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool.Name < out[j].Tool.Name })
	return out
}

// Name is an endpoint's tool name: its key with "/" as "__" and path
// identifiers dropped (code_host/profile/repos → code_host__profile__repos).
func Name(e *registry.Endpoint) string {
	var parts []string
	for _, seg := range strings.Split(e.Key(), "/") {
		if !strings.HasPrefix(seg, "{") {
			parts = append(parts, seg)
		}
	}
	return strings.Join(parts, "__")
}

func tool(e *registry.Endpoint, schemas func(string) (json.RawMessage, bool)) *mcp.Tool {
	desc := e.Description
	if e.Kind == registry.Data {
		desc += fmt.Sprintf(" Costs %d credit%s per successful uncached call; cached answers, failures and dry runs cost 0.", e.Cost, plural(e.Cost))
	} else {
		desc += " Free."
	}
	t := &mcp.Tool{
		Name: Name(e), Title: e.Name, Description: desc,
		InputSchema: inputSchema(e),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(e.Kind == registry.Data)},
		Meta:        mcp.Meta{"meridian/path": e.Path(), "meridian/credit_cost": e.Cost},
	}
	if schemas != nil {
		if data, ok := schemas(e.Key()); ok {
			t.OutputSchema = outputSchema(data)
		}
	}
	return t
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

// outputSchema is the success envelope around the endpoint's data schema.
func outputSchema(data json.RawMessage) map[string]any {
	return map[string]any{
		"type":     "object",
		"required": []string{"success", "data", "request_id"},
		"properties": map[string]any{
			"success":           map[string]any{"const": true},
			"platform":          map[string]any{"type": "string"},
			"endpoint":          map[string]any{"type": "string"},
			"data":              data,
			"credits_used":      map[string]any{"type": []string{"number", "null"}},
			"credits_remaining": map[string]any{"type": []string{"number", "null"}},
			"request_id":        map[string]any{"type": "string"},
		},
	}
}

// call runs a tool as GET on the endpoint's path through api, with the
// MCP request's key, and returns the envelope: as structured content on
// success, as a tool error (with error.type, message, details and
// request_id) on failure. Idempotency-Key is never forwarded: MCP calls
// are not replayed (spec 4.10.4).
func call(api http.Handler, e *registry.Endpoint) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		query, err := queryOf(req.Params.Arguments)
		if err != nil {
			return toolError(fmt.Sprintf(`{"success":false,"error":{"type":"INVALID_PARAMETERS","message":%q,"status":400}}`, err.Error())), nil
		}
		target := e.Path()
		if query != "" {
			target += "?" + query
		}
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return nil, err
		}
		if req.Extra != nil {
			for _, h := range forwarded {
				if v := req.Extra.Header.Get(h); v != "" {
					r.Header.Set(h, v)
				}
			}
		}
		w := &recorder{header: http.Header{}}
		api.ServeHTTP(w, r)
		var envelope map[string]any
		if err := json.Unmarshal(w.body.Bytes(), &envelope); err != nil {
			return nil, fmt.Errorf("the API answered %d without a JSON envelope", w.status)
		}
		result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: w.body.String()}}, StructuredContent: envelope}
		result.IsError = w.status >= 300 || envelope["success"] != true
		return result, nil
	}
}

func toolError(body string) *mcp.CallToolResult {
	var envelope map[string]any
	_ = json.Unmarshal([]byte(body), &envelope)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: body}}, StructuredContent: envelope}
}

// queryOf turns tool arguments into a query string: strings as they are,
// numbers in their shortest form, booleans as true/false, arrays
// comma-joined. Validation is the API's.
func queryOf(raw json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return "", nil
	}
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return "", fmt.Errorf("tool arguments must be a JSON object: %v", err)
	}
	q := url.Values{}
	for name, v := range args {
		s, err := scalar(v)
		if arr, ok := v.([]any); ok {
			parts := make([]string, 0, len(arr))
			for _, item := range arr {
				p, perr := scalar(item)
				if perr != nil {
					return "", fmt.Errorf("%s: %v", name, perr)
				}
				parts = append(parts, p)
			}
			s, err = strings.Join(parts, ","), nil
		}
		if err != nil {
			return "", fmt.Errorf("%s: %v", name, err)
		}
		if v != nil {
			q.Set(name, s)
		}
	}
	return q.Encode(), nil
}

func scalar(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	return "", fmt.Errorf("a value must be a string, number, boolean or a list of them")
}

// recorder keeps an in-process answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
