package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
)

// fakeAPI answers every request with one canned body and keeps the last
// request it saw.
type fakeAPI struct {
	mu     sync.Mutex
	status int
	body   string
	last   *http.Request
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = r
	w.WriteHeader(f.status)
	_, _ = w.Write([]byte(f.body))
}

func (f *fakeAPI) request() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// serve runs the MCP server over api and returns a connected client and
// the server's address.
func serve(t *testing.T, api http.Handler, h headers) (*mcp.ClientSession, string) {
	t.Helper()
	// The errors reference as the pipeline derives it without a configured one.
	errorsURL := func(r *http.Request) string { return envelope.ErrorsReference("http", r.Host) }
	srv := httptest.NewServer(mcpserver.New(registry.Default(), api, mcpserver.Options{Schemas: schemas.For, ErrorsURL: errorsURL}))
	t.Cleanup(srv.Close)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpserver-test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL, HTTPClient: &http.Client{Transport: h}, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return session, srv.URL
}

func callTool(t *testing.T, s *mcp.ClientSession, tool string, args any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	env, _ := res.StructuredContent.(map[string]any)
	var text map[string]any
	if len(res.Content) != 1 {
		t.Fatalf("%d content items", len(res.Content))
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &text); err != nil {
		t.Fatalf("text content is not the envelope: %v", err)
	}
	if a, b := mustJSON(t, env), mustJSON(t, text); a != b {
		t.Fatalf("text and structured content differ:\n%s\n%s", b, a)
	}
	return res, env
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A tool call reaches the API as GET with the key, the client headers and
// the host of the MCP request, arguments as the query, never an
// Idempotency-Key; the API's envelope comes back as it is.
func TestMCPCallForwardsToTheAPI(t *testing.T) {
	api := &fakeAPI{status: 200, body: `{"success":true,"platform":"company_registry","endpoint":"/v1/company_registry/search","data":{"items":[]},"credits_used":1,"request_id":"req_1","cached":false,"big":12345678901234567890}` + "\n"}
	session, base := serve(t, api, headers{"x-api-key": "mn_test", "idempotency-key": "k1", "x-forwarded-proto": "https"})
	res, env := callTool(t, session, "company_registry__search", map[string]any{"query": "acme", "limit": 2, "platforms": []any{"a", "b"}, "skip": nil, "fresh": true})
	if res.IsError || env["success"] != true {
		t.Fatalf("%+v", env)
	}
	if !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "12345678901234567890") {
		t.Error("numbers keep their precision")
	}
	r := api.request()
	if r.Method != http.MethodGet || r.URL.Path != "/v1/company_registry/search" ||
		r.URL.RawQuery != "fresh=true&limit=2&platforms=a%2Cb&query=acme" {
		t.Errorf("%s %s", r.Method, r.URL)
	}
	if r.Host != strings.TrimPrefix(base, "http://") || r.Header.Get("x-api-key") != "mn_test" ||
		r.Header.Get("x-forwarded-proto") != "https" || r.Header.Get("idempotency-key") != "" {
		t.Errorf("host %q, headers %v", r.Host, r.Header)
	}
}

// Failures that never reach the API are full error envelopes too.
func TestMCPLocalFailuresAreFullEnvelopes(t *testing.T) {
	api := &fakeAPI{status: 200, body: "not json"}
	session, base := serve(t, api, headers{"x-api-key": "mn_test"})
	for _, c := range []struct {
		name   string
		args   any
		kind   string
		status float64
		field  any
	}{
		{"not an object", "acme", "INVALID_PARAMETERS", 400, nil},
		{"an array", []any{1}, "INVALID_PARAMETERS", 400, nil},
		{"a nested object", map[string]any{"query": map[string]any{"a": 1}}, "INVALID_PARAMETERS", 422, "query"},
		{"an object in a list", map[string]any{"query": []any{"a", map[string]any{}}}, "INVALID_PARAMETERS", 422, "query"},
		{"no JSON from the API", map[string]any{"query": "acme"}, "INTERNAL_ERROR", 500, nil},
	} {
		res, env := callTool(t, session, "company_registry__search", c.args)
		e, _ := env["error"].(map[string]any)
		details, _ := e["details"].(map[string]any)
		if !res.IsError || env["success"] != false || e["type"] != c.kind || e["status"] != c.status ||
			env["credits_used"] != float64(0) || !strings.HasPrefix(env["request_id"].(string), "req_") ||
			!strings.HasPrefix(e["doc_url"].(string), base+"/docs/errors#") || details["field"] != c.field {
			t.Errorf("%s: %+v", c.name, env)
		}
	}
}

// Data tools declare an output schema that admits the error envelope and
// the dry-run estimate; the free tools declare none.
func TestMCPOutputSchemas(t *testing.T) {
	tools := map[string]*mcp.Tool{}
	for _, tool := range mcpserver.Tools(registry.Default(), mcpserver.Options{Schemas: schemas.For}) {
		tools[tool.Tool.Name] = tool.Tool
	}
	for _, name := range []string{"utility__endpoints", "utility__endpoint", "credits__balance", "credits__transactions", "credits__usage"} {
		if tools[name] == nil || tools[name].OutputSchema != nil {
			t.Errorf("%s: want a tool without an output schema", name)
		}
	}
	for _, key := range schemas.Keys() {
		e, ok := registry.Default().Endpoint(key)
		if !ok || e.Retired() {
			continue
		}
		tool := tools[mcpserver.Name(e)]
		if tool == nil {
			t.Errorf("%s: no tool", key)
			continue
		}
		schema, _ := tool.OutputSchema.(map[string]any)
		if branches, _ := schema["anyOf"].([]any); schema["type"] != "object" || len(branches) != 2 {
			t.Errorf("%s: output schema %v", key, schema)
		}
	}
}

// Monitor and job tools call their endpoint with its method, the path
// identifier in the path; only a read is read-only, and delete says it
// destroys.
func TestMCPMonitorTools(t *testing.T) {
	api := &fakeAPI{status: 200, body: `{"success":true,"platform":"monitors","endpoint":"/v1/monitors/{id}","data":{},"credits_used":0,"request_id":"req_1"}`}
	session, _ := serve(t, api, headers{"x-api-key": "mn_test"})
	list, err := session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		byName[tl.Name] = tl
	}
	for _, c := range []struct {
		tool, method, path, query string
		readOnly, destructive     bool
	}{
		{"monitors", "GET", "/v1/monitors", "", true, false},
		{"monitors__get", "GET", "/v1/monitors/mon_1", "", true, false},
		{"monitors__runs", "GET", "/v1/monitors/mon_1/runs", "limit=5", true, false},
		{"monitors__pause", "POST", "/v1/monitors/mon_1/pause", "", false, false},
		{"monitors__delete", "POST", "/v1/monitors/mon_1/delete", "", false, true},
		{"monitors__create", "POST", "/v1/monitors/create", "endpoint=search&params=%7B%22query%22%3A%22acme%22%7D&platform=company_registry", false, false},
		{"web__jobs__get", "GET", "/v1/web/jobs/job_1", "", true, false},
	} {
		tl := byName[c.tool]
		if tl == nil {
			t.Errorf("%s is not a tool", c.tool)
			continue
		}
		a := tl.Annotations
		if a.ReadOnlyHint != c.readOnly || (!c.readOnly && (a.DestructiveHint == nil || *a.DestructiveHint != c.destructive)) {
			t.Errorf("%s annotations: %+v", c.tool, a)
		}
		args := map[string]any{}
		switch c.tool {
		case "monitors__create":
			args = map[string]any{"platform": "company_registry", "endpoint": "search", "params": `{"query":"acme"}`}
		case "monitors__runs":
			args = map[string]any{"id": "mon_1", "limit": 5}
		case "web__jobs__get":
			args = map[string]any{"id": "job_1"}
		case "monitors":
		default:
			args = map[string]any{"id": "mon_1"}
		}
		callTool(t, session, c.tool, args)
		r := api.request()
		if r.Method != c.method || r.URL.Path != c.path || r.URL.RawQuery != c.query {
			t.Errorf("%s called %s %s?%s", c.tool, r.Method, r.URL.Path, r.URL.RawQuery)
		}
	}
}
