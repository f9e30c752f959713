package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
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
	t.Setenv(app.EnvUpstreamFixtures, filepath.Join(repoRoot(t), "testdata", "upstream"))
	base, stop, err := app.StartReplay(quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &mcpFixture{store: s}
	f.account, _, err = pipeline.CreateAccount(context.Background(), s, 10, "req_mcp_funded")
	if err != nil {
		t.Fatal(err)
	}
	f.key = newKey(t, s, f.account.ID)
	broke, _, err := pipeline.CreateAccount(context.Background(), s, 1, "req_mcp_broke")
	if err != nil {
		t.Fatal(err)
	}
	f.broke = newKey(t, s, broke.ID)
	none := func(string) (string, bool) { return "", false }
	h := app.LocalHandler(quietLogger(), app.Deps{Store: s, Upstream: app.NewUpstream(quietLogger(), none, base)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/mcp"
	return f
}

func newKey(t *testing.T, s store.Store, accountID string) string {
	t.Helper()
	full, k := auth.NewKey(accountID, "mcp", nil)
	if _, err := s.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return full
}

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
	for _, tool := range mcpserver.Tools(registry.Default(), schemas.For) {
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
	for _, free := range []string{"utility__endpoints", "utility__endpoint", "credits__balance", "credits__transactions"} {
		if listed[free] == nil {
			t.Errorf("no free tool %s", free)
		}
	}
	search := listed["company_registry__search"].InputSchema.(map[string]any)
	limit := search["properties"].(map[string]any)["limit"].(map[string]any)
	if limit["minimum"] != float64(1) || limit["maximum"] != float64(100) || search["required"].([]any)[0] != "query" {
		t.Errorf("input schema lacks bounds or required: %v", search)
	}
	if listed["company_registry__search"].OutputSchema == nil {
		t.Error("a data tool has an output schema")
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
