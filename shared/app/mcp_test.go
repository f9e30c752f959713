package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// mcpFixture is the local server (every family, the replay upstream, an
// embedded store) on a real listener, with a funded key and a broke one.
type mcpFixture struct {
	url        string
	store      *embedded.Store
	account    store.Account
	key, broke string
}

func startMCP(t *testing.T) *mcpFixture {
	t.Helper()
	base, s := replayAndStore(t, quietLogger())
	f := &mcpFixture{store: s}
	f.account, f.key = newAccount(t, s, 10, nil)
	_, f.broke = newAccount(t, s, 1, nil)
	h := app.LocalHandler(quietLogger(), app.Deps{Store: s, Upstream: mcpUpstream(base), MCP: mcpserver.NewSurface})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/mcp"
	return f
}

// mcpUpstream is the shipped providers on the replay upstream plus a
// canned route for lodging_marketplace/locations: the one data schema with
// a required field (items), which a dry-run estimate lacks, so the output
// schema's dry-run branch is exercised end to end. app_store_a/app-info is
// left without a route (unavailableTool), so one tool is always unavailable
// whatever the shipped providers serve.
func mcpUpstream(replayURL string) *upstream.Runner {
	lodging := &upstream.Provider{Name: "lodging_fixture", Protocol: "canned answers (tests)", Static: true,
		Endpoints: map[string]upstream.Adapter{"lodging_marketplace/locations": func(context.Context, *upstream.Call) (any, error) {
			return map[string]any{"items": []any{map[string]any{"id": "lisbon", "name": "Lisbon", "country_code": "PT"}}}, nil
		}}}
	var providers []*upstream.Provider
	for _, p := range adapters.All() {
		if _, serves := p.Endpoints[unavailableEndpoint]; !serves {
			providers = append(providers, p)
		}
	}
	return upstream.NewRunner(append(providers, lodging), upstream.Settings{ReplayURL: replayURL})
}

// unavailableEndpoint has no route in the MCP fixture; unavailableTool and
// unavailableArgs call it.
const (
	unavailableEndpoint = "app_store_a/app-info"
	unavailableTool     = "app_store_a__app-info"
)

var unavailableArgs = map[string]any{"app_id": "284882215"}

// withHeader sends a header on every request of an MCP client.
type withHeader struct {
	name, value string
	next        http.RoundTripper
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.next.RoundTrip(r)
}

func connect(t *testing.T, url, header, value string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "meridian-test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:             url,
		HTTPClient:           &http.Client{Transport: withHeader{header, value, http.DefaultTransport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
	session, err := client.Connect(context.Background(), transport, nil)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

func call(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	env, _ := res.StructuredContent.(map[string]any)
	return res, env
}

func TestMCPToolsCoverTheRegistry(t *testing.T) {
	f := startMCP(t)
	session := connect(t, f.url, "authorization", "Bearer "+f.key)
	if got := session.InitializeResult().ServerInfo.Name; got != "meridian" {
		t.Fatalf("server %q", got)
	}
	var names []string
	listed := map[string]*mcp.Tool{}
	for tool, err := range session.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		listed[tool.Name] = tool
	}
	var want []string
	for _, tool := range mcpserver.Tools(registry.Default(), mcpserver.Options{Schemas: schemas.For}) {
		want = append(want, tool.Tool.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("tools:\n got %v\nwant %v", names, want)
	}
	for _, e := range registry.Default().Live() {
		if e.Kind == registry.Data {
			tool := listed[mcpserver.Name(e)]
			if tool == nil {
				t.Errorf("no tool for data endpoint %s", e.Key())
				continue
			}
			if !strings.Contains(tool.Description, "credit") || tool.InputSchema == nil {
				t.Errorf("%s: description or input schema missing", tool.Name)
			}
		}
	}
	for _, free := range []string{"utility__endpoints", "utility__endpoint", "credits__balance", "credits__transactions", "credits__usage"} {
		if listed[free] == nil {
			t.Errorf("no free tool %s", free)
		}
	}
	search := listed["company_registry__search"].InputSchema.(map[string]any)
	limit := search["properties"].(map[string]any)["limit"].(map[string]any)
	if limit["minimum"] != float64(1) || limit["maximum"] != float64(100) || search["required"].([]any)[0] != "query" {
		t.Errorf("input schema lacks bounds or required: %v", search)
	}
	// An output schema exactly where there is a data schema to put in it.
	for _, tool := range mcpserver.Tools(registry.Default(), mcpserver.Options{Schemas: schemas.For}) {
		_, hasData := schemas.For(tool.Endpoint.Key())
		if got := listed[tool.Tool.Name]; got == nil || hasData != (got.OutputSchema != nil) {
			t.Errorf("%s: output schema listed %v, data schema %v", tool.Tool.Name, got != nil && got.OutputSchema != nil, hasData)
		}
	}
}

// tools/list tells an agent which tools this deployment can serve, as
// the catalogue's available flag does, before any call fails.
func TestMCPToolsSayWhetherTheyAreAvailable(t *testing.T) {
	f := startMCP(t)
	session := connect(t, f.url, "x-api-key", f.key)
	_, catalogue := call(t, session, "utility__endpoints", map[string]any{})
	available := map[string]bool{}
	for _, item := range catalogue["data"].(map[string]any)["items"].([]any) {
		entry := item.(map[string]any)
		available[entry["id"].(string)] = entry["available"] == true
	}
	seen := map[bool]int{}
	for tool, err := range session.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		key := tool.Meta["meridian/path"].(string)[len("/v1/"):]
		want, ok := available[key]
		if !ok {
			t.Errorf("%s: %s not in the catalogue", tool.Name, key)
			continue
		}
		seen[want]++
		says := !strings.Contains(tool.Description, "Not available in this deployment")
		if tool.Meta["meridian/available"] != want || says != want {
			t.Errorf("%s: meta %v, description %q; the catalogue says available=%v", tool.Name, tool.Meta["meridian/available"], tool.Description, want)
		}
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Errorf("the fixture serves some tools and not others: %v", seen)
	}
	// An unavailable tool answers as its description says.
	if res, env := call(t, session, unavailableTool, unavailableArgs); !res.IsError ||
		env["error"].(map[string]any)["type"] != "ENDPOINT_NOT_AVAILABLE" {
		t.Errorf("%s: %v", unavailableTool, env)
	}
}

func TestMCPPaidCallChargesOnce(t *testing.T) {
	f := startMCP(t)
	session := connect(t, f.url, "x-api-key", f.key)
	res, env := call(t, session, "company_registry__search", map[string]any{"query": "acme", "limit": 2})
	if res.IsError || env["success"] != true || env["credits_used"] != float64(1) || env["credits_remaining"] != float64(9) {
		t.Fatalf("%+v", env)
	}
	if items := env["data"].(map[string]any)["items"].([]any); len(items) == 0 {
		t.Fatal("no data")
	}
	page, err := f.store.Ledger(context.Background(), f.account.ID, store.LedgerQuery{Limit: 10, RequestID: env["request_id"].(string)})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Amount != -1 {
		t.Fatalf("one debit: %+v %v", page.Entries, err)
	}
	// The balance tool is free and sees the charge.
	if _, bal := call(t, session, "credits__balance", nil); bal["data"].(map[string]any)["credits_remaining"] != float64(9) {
		t.Fatalf("balance: %v", bal)
	}
}

func TestMCPErrorsAreToolErrors(t *testing.T) {
	f := startMCP(t)
	session := connect(t, f.url, "x-api-key", f.key)
	res, env := call(t, session, "company_registry__search", map[string]any{"qery": "acme"})
	e, _ := env["error"].(map[string]any)
	if !res.IsError || e["type"] != "INVALID_PARAMETERS" || env["request_id"] == nil {
		t.Fatalf("validation: %+v", env)
	}
	if sugg := e["details"].(map[string]any)["suggestions"].(map[string]any); sugg["qery"] != "query" {
		t.Fatalf("the near-miss suggestion travels: %v", e["details"])
	}
	broke := connect(t, f.url, "x-api-key", f.broke)
	res, env = call(t, broke, "microblog_a__search", map[string]any{"query": "golang"})
	if e, _ := env["error"].(map[string]any); !res.IsError || e["type"] != "INSUFFICIENT_CREDITS" || e["details"].(map[string]any)["required"] != float64(3) {
		t.Fatalf("out of credits: %+v", env)
	}
}

func TestMCPRefusesWithoutAKey(t *testing.T) {
	f := startMCP(t)
	resp, err := http.Post(f.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("content-type"), "application/json") {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
}

// outputSchemas compiles the output schema of every tool tools/list gives,
// as a client would, under JSON Schema 2020-12 with formats asserted.
func outputSchemas(t *testing.T, s *mcp.ClientSession) map[string]*jsonschema.Schema {
	t.Helper()
	out := map[string]*jsonschema.Schema{}
	for tool, err := range s.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.OutputSchema == nil {
			continue
		}
		raw, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		loc := "urn:meridian:mcp:" + tool.Name
		if err := c.AddResource(loc, doc); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		if out[tool.Name], err = c.Compile(loc); err != nil {
			t.Errorf("%s: the output schema does not compile: %v", tool.Name, err)
		}
	}
	if len(out) == 0 {
		t.Fatal("no output schemas")
	}
	return out
}

// Every result a data tool gives, success, dry run or any failure, is
// structured content that conforms to the tool's output schema (clients
// validate it even when isError is set), with the same envelope as text.
func TestMCPResultsConformToTheOutputSchemas(t *testing.T) {
	t.Setenv(app.EnvErrorsURL, "")
	f := startMCP(t)
	session := connect(t, f.url, "x-api-key", f.key)
	compiled := outputSchemas(t, session)
	one := int64(1)
	limited := connect(t, f.url, "x-api-key", newLimitedKey(t, f.store, f.account.ID, &one))
	broke := connect(t, f.url, "authorization", "Bearer "+f.broke)
	docs := strings.TrimSuffix(f.url, "/mcp") + "/docs/errors#"
	for _, c := range []struct {
		name    string
		session *mcp.ClientSession
		tool    string
		args    any
		want    string // error.type; "" for a success
	}{
		{"paid success", session, "company_registry__search", map[string]any{"query": "acme", "limit": 2}, ""},
		{"cached success", session, "company_registry__search", map[string]any{"query": "acme", "limit": 2}, ""},
		{"success with required fields", session, "lodging_marketplace__locations", map[string]any{"query": "lisbon"}, ""},
		{"dry run", session, "lodging_marketplace__locations", map[string]any{"query": "lisbon", "dry_run": true}, ""},
		{"undeclared argument", session, "company_registry__search", map[string]any{"qery": "acme"}, "INVALID_PARAMETERS"},
		{"missing argument", session, "company_registry__search", map[string]any{}, "INVALID_PARAMETERS"},
		{"invalid value", session, "company_registry__search", map[string]any{"query": "acme", "limit": 1000}, "INVALID_PARAMETERS"},
		{"nested object", session, "company_registry__search", map[string]any{"query": map[string]any{"name": "acme"}}, "INVALID_PARAMETERS"},
		{"arguments not an object", session, "company_registry__search", "acme", "INVALID_PARAMETERS"},
		{"no route here", session, unavailableTool, unavailableArgs, "ENDPOINT_NOT_AVAILABLE"},
		{"no such record", session, "code_host__profile", map[string]any{"handle": "sample-missing"}, "RESOURCE_NOT_FOUND"},
		{"source failure", session, "code_host__profile", map[string]any{"handle": "sample-500"}, "UPSTREAM_ERROR"},
		{"key limit", limited, "microblog_a__search", map[string]any{"query": "golang"}, "KEY_LIMIT_EXCEEDED"},
		{"out of credits", broke, "microblog_a__search", map[string]any{"query": "golang"}, "INSUFFICIENT_CREDITS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := c.session.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(res.StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if err := compiled[c.tool].Validate(inst); err != nil {
				t.Fatalf("structured content does not conform: %v\n%s", err, raw)
			}
			if len(res.Content) != 1 {
				t.Fatalf("%d content items", len(res.Content))
			}
			text, _ := res.Content[0].(*mcp.TextContent)
			if text == nil || !jsonEqual(t, text.Text, string(raw)) {
				t.Fatalf("the text is not the structured envelope: %v", res.Content[0])
			}
			env := res.StructuredContent.(map[string]any)
			if c.want == "" {
				if res.IsError || env["success"] != true {
					t.Fatalf("%s", raw)
				}
				return
			}
			e, _ := env["error"].(map[string]any)
			if !res.IsError || env["success"] != false || e["type"] != c.want || env["credits_used"] != float64(0) ||
				!strings.HasPrefix(env["request_id"].(string), "req_") || !strings.HasPrefix(e["doc_url"].(string), docs) {
				t.Fatalf("%s", raw)
			}
		})
	}
	// The dry run is the estimate, which the data schema alone refuses.
	_, env := call(t, session, "lodging_marketplace__locations", map[string]any{"query": "lisbon", "dry_run": true})
	data := env["data"].(map[string]any)
	if data["dry_run"] != true || schemas.Validate("lodging_marketplace/locations", data) == nil {
		t.Fatalf("dry run data: %v", data)
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// failingInToolCalls, once armed, finds one key on every other lookup: at
// /mcp but not in the tool call that request then makes, as when its owner
// revokes and reactivates it between the two.
type failingInToolCalls struct {
	store.Store
	hash    string
	armed   atomic.Bool
	lookups atomic.Int64
}

func (f *failingInToolCalls) KeyByHash(ctx context.Context, hash string) (store.Key, error) {
	if hash == f.hash && f.armed.Load() && f.lookups.Add(1)%2 == 0 {
		return store.Key{}, store.ErrNotFound
	}
	return f.Store.KeyByHash(ctx, hash)
}

// connectFrom connects an MCP client from a local address of its own
// (any of 127.0.0.0/8 reaches the loopback listener).
func connectFrom(t *testing.T, url, localIP, key string) *mcp.ClientSession {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(localIP)}}
	transport := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(transport.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "meridian-test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             url,
		HTTPClient:           &http.Client{Transport: withHeader{"x-api-key", key, transport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err != nil {
		t.Fatalf("initialize from %s: %v", localIP, err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

// One account's failed authentications inside its tool calls throttle
// its own client, never every MCP caller of the instance.
func TestMCPInvalidKeyThrottleIsPerClient(t *testing.T) {
	base, s := replayAndStore(t, quietLogger())
	_, keyA := newAccount(t, s, 10, nil)
	_, keyB := newAccount(t, s, 10, nil)
	flicker := &failingInToolCalls{Store: s, hash: auth.Hash(keyA)}
	h := app.LocalHandler(quietLogger(), app.Deps{Store: flicker, Throttle: auth.NewThrottle(20), Upstream: mcpUpstream(base), MCP: mcpserver.NewSurface})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	a := connectFrom(t, srv.URL+"/mcp", "127.0.0.2", keyA)
	b := connectFrom(t, srv.URL+"/mcp", "127.0.0.3", keyB)
	flicker.armed.Store(true)
	for i := 0; i < 20; i++ {
		res, env := call(t, a, "credits__balance", nil)
		if !res.IsError || env["error"].(map[string]any)["type"] != "UNAUTHORIZED" {
			t.Fatalf("account A's tool call %d: %v", i, env)
		}
	}
	// A's own client is throttled now (at /mcp itself: an HTTP 429).
	if res, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "credits__balance"}); err == nil && !res.IsError {
		t.Fatalf("account A's client is throttled: %v", res.StructuredContent)
	}
	for i := 0; i < 3; i++ {
		if res, env := call(t, b, "credits__balance", nil); res.IsError || env["success"] != true {
			t.Fatalf("account B from another client: %v", env)
		}
	}
}
