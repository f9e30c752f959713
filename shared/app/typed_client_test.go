package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// typedClientServer is the local server as MERIDIAN_UPSTREAM=replay
// make run wires it (every family, the replay upstream, the embedded
// store, usage events in process) on an httptest listener, with a
// funded key.
type typedClientServer struct {
	url     string
	key     string
	store   *embedded.Store
	account store.Account
}

func startTypedClientServer(t *testing.T) *typedClientServer {
	t.Helper()
	logger := quietLogger()
	base, s := replayAndStore(t, logger)
	f := &typedClientServer{store: s}
	f.account, f.key = newAccount(t, s, 10, nil)
	none := func(string) (string, bool) { return "", false }
	deps := app.Deps{Store: s, Throttle: app.ThrottleFromEnv(), Upstream: app.NewUpstream(logger, none, base), Events: localEvents(t, s, logger)}
	srv := httptest.NewServer(app.LocalHandler(logger, deps))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// typedClientRun is the one JSON line scripts/npm-tools/typed-client.ts prints.
type typedClientRun struct {
	Paid struct {
		Status      int      `json:"status"`
		CreditsUsed *int     `json:"credits_used"`
		RequestID   string   `json:"request_id"`
		Items       int      `json:"items"`
		Names       []string `json:"names"`
	} `json:"paid"`
	Typo struct {
		Status            int      `json:"status"`
		Type              string   `json:"type"`
		InvalidParameters bool     `json:"invalid_parameters"`
		Suggestion        string   `json:"suggestion"`
		UnknownParameters []string `json:"unknown_parameters"`
	} `json:"typo"`
	Batch struct {
		Status      int `json:"status"`
		Count       int `json:"count"`
		Succeeded   int `json:"succeeded"`
		Failed      int `json:"failed"`
		CreditsUsed int `json:"credits_used"`
		Results     []struct {
			Index       int    `json:"index"`
			Status      int    `json:"status"`
			Success     bool   `json:"success"`
			RequestID   string `json:"request_id"`
			CreditsUsed *int   `json:"credits_used"`
			Type        string `json:"type"`
		} `json:"results"`
	} `json:"batch"`
}

// A client typed from the served /openapi.json (openapi-typescript types,
// openapi-fetch, tsc --strict) calls the local server: a paid search, an
// undeclared parameter read back as a typed 400, and a batch. The types
// come from the document the server serves, so a document change that
// breaks such a client fails this test at compilation.
func TestTypedClientFromTheServedOpenAPI(t *testing.T) {
	root := repoRoot(t)
	tools := filepath.Join(root, "scripts", "npm-tools.sh")
	var installErr bytes.Buffer
	install := exec.Command(tools, "install")
	install.Stderr = &installErr
	out, err := install.Output()
	if err != nil {
		if ciRun() {
			t.Fatalf("cannot install the npm tools: %v\n%s", err, installErr.String())
		}
		t.Skipf("cannot install the npm tools (set CI=true to fail instead): %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	toolsDir := lines[len(lines)-1]

	f := startTypedClientServer(t)
	resp, err := http.Get(f.url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %v", resp.StatusCode, err)
	}

	// Inside the tools folder, so that the program's import of
	// openapi-fetch resolves from its node_modules.
	work, err := os.MkdirTemp(toolsDir, "typed-client-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.WriteFile(filepath.Join(work, "openapi.json"), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"typed-client.ts", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join(root, "scripts", "npm-tools", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(what, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = work
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s%s", what, err, stdout.String(), stderr.String())
		}
		return stdout.Bytes()
	}
	run("openapi-typescript", tools, "exec", "openapi-typescript", "openapi.json", "-o", "api.d.ts")
	// tsc reports type errors on stdout; run shows it on failure.
	run("tsc (the client no longer compiles against the served document)", tools, "exec", "tsc", "-p", "tsconfig.json")
	printed := run("the typed client", "node", "typed-client.js", f.url, f.key)

	var seen typedClientRun
	if err := json.Unmarshal(printed, &seen); err != nil {
		t.Fatalf("%v: %s", err, printed)
	}

	paid := seen.Paid
	if paid.Status != http.StatusOK || paid.CreditsUsed == nil || *paid.CreditsUsed != 1 || !strings.HasPrefix(paid.RequestID, "req_") || paid.Items == 0 {
		t.Fatalf("paid search: %s", printed)
	}
	typo := seen.Typo
	if typo.Status != http.StatusBadRequest || typo.Type != "INVALID_PARAMETERS" || !typo.InvalidParameters ||
		typo.Suggestion != "query" || !slices.Equal(typo.UnknownParameters, []string{"qery"}) {
		t.Fatalf("undeclared parameter: %s", printed)
	}
	batch := seen.Batch
	if batch.Status != http.StatusOK || batch.Count != 2 || batch.Succeeded != 1 || batch.Failed != 1 || batch.CreditsUsed != 1 || len(batch.Results) != 2 {
		t.Fatalf("batch: %s", printed)
	}
	ok, bad := batch.Results[0], batch.Results[1]
	if ok.Index != 0 || !ok.Success || ok.Status != http.StatusOK || ok.CreditsUsed == nil || *ok.CreditsUsed != 1 {
		t.Fatalf("batch item 0: %s", printed)
	}
	if bad.Index != 1 || bad.Success || (bad.Status != http.StatusBadRequest && bad.Status != http.StatusUnprocessableEntity) || bad.Type != "INVALID_PARAMETERS" {
		t.Fatalf("batch item 1: %s", printed)
	}

	// Exactly two debits, the paid search and the valid batch item; the
	// rejected calls are never charged, so nothing is refunded either.
	page, err := f.store.Ledger(context.Background(), f.account.ID, store.LedgerQuery{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var debited []string
	for _, e := range page.Entries {
		switch e.Type {
		case store.EntryDebit:
			if e.Amount != -1 || e.Endpoint != "/v1/company_registry/search" {
				t.Fatalf("debit %+v", e)
			}
			debited = append(debited, e.RequestID)
		case store.EntryRefund:
			t.Fatalf("refund %+v", e)
		}
	}
	slices.Sort(debited)
	want := []string{paid.RequestID, ok.RequestID}
	slices.Sort(want)
	if !slices.Equal(debited, want) {
		t.Fatalf("debited requests %v, want %v", debited, want)
	}
}
