package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/store"
)

// ciRun reports whether CI is running the tests: then a missing tool
// fails a test instead of skipping it.
func ciRun() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v != "" && v != "false" && v != "0"
}

// interopCall is one call the TypeScript client makes and what it saw:
// the result, or what the SDK threw.
type interopCall struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	Result    *struct {
		IsError           bool             `json:"isError"`
		StructuredContent map[string]any   `json:"structuredContent"`
		Content           []map[string]any `json:"content"`
	} `json:"result"`
	Error *struct {
		Name    string `json:"name"`
		Code    any    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// A third-party client, the official MCP TypeScript SDK (installed from
// the npm registry by scripts/mcp-client.sh), does what an agent does for
// each call: lists the tools, which makes it validate every result against
// the tool's output schema, failures included, then calls one. A result
// the SDK refuses is a thrown error and fails the test.
func TestMCPInteropWithTheTypeScriptSDK(t *testing.T) {
	script := filepath.Join(repoRoot(t), "scripts", "mcp-client.sh")
	if out, err := exec.Command(script, "install").CombinedOutput(); err != nil {
		if ciRun() {
			t.Fatalf("cannot install the MCP TypeScript SDK: %v\n%s", err, out)
		}
		t.Skipf("cannot install the MCP TypeScript SDK (set CI=true to fail instead): %v", err)
	}
	t.Setenv(app.EnvErrorsURL, "")
	f := startMCP(t)
	calls := []interopCall{
		{Tool: "company_registry__search", Arguments: map[string]any{"query": "acme", "limit": 2}},
		{Tool: "company_registry__search", Arguments: map[string]any{"qery": "acme"}},
		{Tool: "company_registry__search", Arguments: map[string]any{"query": map[string]any{"name": "acme"}}},
		{Tool: "lodging_marketplace__locations", Arguments: map[string]any{"query": "lisbon", "dry_run": true}},
		{Tool: unavailableTool, Arguments: unavailableArgs},
		{Tool: "utility__endpoints", Arguments: map[string]any{"platform": "company_registry"}},
	}
	arg, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, "run", f.url, f.key, string(arg))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var seen struct {
		Server struct{ Name string } `json:"server"`
		Tools  []string              `json:"tools"`
		Calls  []interopCall         `json:"calls"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &seen); err != nil {
		t.Fatalf("the TypeScript client failed: %v (%v)\n%s\n%s", runErr, err, stdout.String(), stderr.String())
	}
	if len(seen.Calls) != len(calls) {
		t.Fatalf("%d calls reported, %d made", len(seen.Calls), len(calls))
	}
	for i, c := range seen.Calls {
		switch {
		case c.Error != nil:
			t.Errorf("call %d (%s %v): the SDK threw %s %v: %s", i, c.Tool, c.Arguments, c.Error.Name, c.Error.Code, c.Error.Message)
		case c.Result == nil:
			t.Errorf("call %d (%s %v): no result", i, c.Tool, c.Arguments)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Fatalf("the TypeScript client failed: %v\n%s", runErr, stderr.String())
	}
	if t.Failed() {
		t.FailNow()
	}
	if seen.Server.Name != "meridian" || len(seen.Tools) < 40 || !strings.Contains(strings.Join(seen.Tools, ","), "company_registry__search") {
		t.Fatalf("server %q, %d tools", seen.Server.Name, len(seen.Tools))
	}
	result := func(i int) (bool, map[string]any, map[string]any) {
		r := seen.Calls[i].Result
		e, _ := r.StructuredContent["error"].(map[string]any)
		return r.IsError, r.StructuredContent, e
	}

	// A paid success, charged once.
	if isErr, env, _ := result(0); isErr || env["success"] != true || env["credits_used"] != float64(1) {
		t.Errorf("paid call: %+v", env)
	}
	page, err := f.store.Ledger(context.Background(), f.account.ID, store.LedgerQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	debits := 0
	for _, e := range page.Entries {
		if e.Type == store.EntryDebit {
			debits++
		}
	}
	if debits != 1 {
		t.Errorf("%d debits; the paid call is charged once and nothing else", debits)
	}

	// An undeclared argument: the agent sees the API's error and suggestion,
	// as structured content and as the text.
	isErr, env, e := result(1)
	details, _ := e["details"].(map[string]any)
	suggestions, _ := details["suggestions"].(map[string]any)
	if !isErr || env["success"] != false || e["type"] != "INVALID_PARAMETERS" || suggestions["qery"] != "query" ||
		!strings.HasPrefix(fmt.Sprint(env["request_id"]), "req_") || env["credits_used"] != float64(0) {
		t.Errorf("undeclared argument: %+v", env)
	}
	content := seen.Calls[1].Result.Content
	var fromText map[string]any
	if len(content) != 1 || content[0]["type"] != "text" || json.Unmarshal([]byte(fmt.Sprint(content[0]["text"])), &fromText) != nil ||
		fromText["request_id"] != env["request_id"] {
		t.Errorf("the text content is not the envelope: %v", content)
	}

	// Arguments the server refuses itself get the same envelope.
	if isErr, env, e := result(2); !isErr || e["type"] != "INVALID_PARAMETERS" || e["doc_url"] == nil ||
		!strings.HasPrefix(fmt.Sprint(env["request_id"]), "req_") || env["credits_used"] != float64(0) {
		t.Errorf("nested argument: %+v", env)
	}

	// A dry run: the data is the estimate, not the data schema (which
	// requires items here).
	if isErr, env, _ := result(3); isErr || env["data"].(map[string]any)["dry_run"] != true || env["credits_used"] != float64(0) {
		t.Errorf("dry run: %+v", env)
	}

	// An endpoint without a route in this deployment.
	if isErr, env, e := result(4); !isErr || e["type"] != "ENDPOINT_NOT_AVAILABLE" || e["status"] != float64(501) {
		t.Errorf("unavailable endpoint: %+v", env)
	}

	// A free tool, which declares no output schema.
	if isErr, env, _ := result(5); isErr || env["success"] != true || env["credits_used"] != float64(0) {
		t.Errorf("free tool: %+v", env)
	}
}
