package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// ciRun reports whether CI is running the tests: then a missing tool
// fails a test instead of skipping it.
func ciRun() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v != "" && v != "false" && v != "0"
}

// A third-party client, the official MCP TypeScript SDK (installed from
// the npm registry by scripts/mcp-client.sh), connects to the local
// server, lists the tools and calls a paid one.
func TestMCPInteropWithTheTypeScriptSDK(t *testing.T) {
	script := filepath.Join(repoRoot(t), "scripts", "mcp-client.sh")
	if out, err := exec.Command(script, "install").CombinedOutput(); err != nil {
		if ciRun() {
			t.Fatalf("cannot install the MCP TypeScript SDK: %v\n%s", err, out)
		}
		t.Skipf("cannot install the MCP TypeScript SDK (set CI=true to fail instead): %v", err)
	}
	f := startMCP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, "run", f.url, f.key, "company_registry__search", `{"query":"acme","limit":2}`)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, stderr.String())
	}
	var seen struct {
		Server struct{ Name string } `json:"server"`
		Tools  []string              `json:"tools"`
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &seen); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if seen.Server.Name != "meridian" || len(seen.Tools) < 40 || !strings.Contains(strings.Join(seen.Tools, ","), "company_registry__search") {
		t.Fatalf("server %q, %d tools", seen.Server.Name, len(seen.Tools))
	}
	env := seen.Result.StructuredContent
	if seen.Result.IsError || env["success"] != true || env["credits_used"] != float64(1) {
		t.Fatalf("tool result: %+v", seen.Result)
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
		t.Fatalf("%d debits; the call is charged once", debits)
	}
}
