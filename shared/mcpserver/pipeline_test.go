package mcpserver_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream"
)

// pipelineFixture is the real pipeline (the /mcp route of a pipeline
// serving every family, as make run and the mcp function build it) over
// canned company_registry and microblog_a searches, with a funded key.
type pipelineFixture struct {
	url     string
	key     string
	store   *embedded.Store
	account string
	// callGone is closed when a tools/call POST's client has gone.
	callGone chan struct{}
}

// startPipeline serves the fixture; release, when set, holds every leg
// until it is closed.
func startPipeline(t *testing.T, release <-chan struct{}) *pipelineFixture {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	acct, _, err := auth.CreateAccount(context.Background(), s, 20, envelope.NewRequestID())
	if err != nil {
		t.Fatal(err)
	}
	key, k := auth.NewKey(acct.ID, "test", nil)
	if _, err := s.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	canned := func(items ...map[string]any) upstream.Adapter {
		return func(ctx context.Context, _ *upstream.Call) (any, error) {
			if release != nil {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return map[string]any{"items": items}, nil
		}
	}
	sources := &upstream.Provider{Name: "search_fixture", Protocol: "canned answers (tests)", Static: true,
		Endpoints: map[string]upstream.Adapter{
			"company_registry/search": canned(map[string]any{"id": "00445790", "name": "Acme Ltd"}),
			"microblog_a/search":      canned(map[string]any{"id": "1", "text": "acme"}, map[string]any{"id": "2", "text": "acme"}),
		}}
	runner := upstream.NewRunner([]*upstream.Provider{sources}, upstream.Settings{})
	api := app.New(app.Config("", quiet, app.Deps{Store: s, Upstream: runner, MCP: mcpserver.NewSurface}))
	f := &pipelineFixture{key: key, store: s, account: acct.ID, callGone: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				go func() { <-r.Context().Done(); close(f.callGone) }()
			}
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/mcp"
	return f
}

func (f *pipelineFixture) connect(t *testing.T, onProgress func(*mcp.ProgressNotificationParams)) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpserver-pipeline-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { onProgress(req.Params) },
	})
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: f.url, HTTPClient: &http.Client{Transport: headers{"x-api-key": f.key}}, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

func searchWithProgress() *mcp.CallToolParams {
	params := &mcp.CallToolParams{Name: "search__all", Arguments: map[string]any{"query": "acme", "platforms": "company_registry,microblog_a"}}
	params.SetProgressToken("tok")
	return params
}

// search/all's legs reach the client as progress notifications and the
// call is charged once, at the list price.
func TestMCPProgressThroughThePipeline(t *testing.T) {
	f := startPipeline(t, nil)
	notes := make(chan *mcp.ProgressNotificationParams, 8)
	session := f.connect(t, func(p *mcp.ProgressNotificationParams) { notes <- p })
	res, err := session.CallTool(context.Background(), searchWithProgress())
	if err != nil {
		t.Fatal(err)
	}
	env, _ := res.StructuredContent.(map[string]any)
	data, _ := env["data"].(map[string]any)
	if res.IsError || env["success"] != true || env["credits_used"] != float64(5) || env["credits_remaining"] != float64(15) || data["count"] != float64(3) {
		t.Fatalf("%+v", env)
	}
	var platforms []string
	for i := range 2 {
		select {
		case n := <-notes:
			if n.ProgressToken != "tok" || n.Progress != float64(i+1) || n.Total != 2 || !strings.Contains(n.Message, ": ok (200)") {
				t.Errorf("notification %d: %+v", i, n)
			}
			leg, _ := n.Meta["meridian/leg"].(map[string]any)
			platform, _ := leg["platform"].(string)
			platforms = append(platforms, platform)
		case <-time.After(5 * time.Second):
			t.Fatalf("%d notifications", i)
		}
	}
	slices.Sort(platforms)
	if strings.Join(platforms, ",") != "company_registry,microblog_a" {
		t.Errorf("legs %v", platforms)
	}
}

// A client that goes before any leg is delivered is charged nothing: the
// first notification that cannot be sent ends the call as a disconnect.
func TestMCPProgressClientGoneIsRefunded(t *testing.T) {
	release := make(chan struct{})
	f := startPipeline(t, release)
	session := f.connect(t, func(*mcp.ProgressNotificationParams) {})
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan error, 1)
	go func() {
		_, err := session.CallTool(ctx, searchWithProgress())
		called <- err
	}()
	// Wait for the call to be reserved, then leave.
	deadline := time.Now().Add(5 * time.Second)
	for f.balance(t) == 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-called; err == nil {
		t.Fatal("the cancelled call answered")
	}
	select {
	case <-f.callGone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the client go")
	}
	// The SDK releases the call's stream just after it sees the client go.
	time.Sleep(50 * time.Millisecond)
	close(release)
	deadline = time.Now().Add(5 * time.Second)
	for f.balance(t) != 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if b := f.balance(t); b != 20 {
		t.Fatalf("balance %d: the call was charged", b)
	}
	page, err := f.store.Ledger(context.Background(), f.account, store.LedgerQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range page.Entries {
		types = append(types, string(e.Type))
	}
	if !slices.Contains(types, string(store.EntryRefund)) {
		t.Errorf("ledger %v: no refund", types)
	}
}

func (f *pipelineFixture) balance(t *testing.T) int64 {
	t.Helper()
	a, err := f.store.Account(context.Background(), f.account)
	if err != nil {
		t.Fatal(err)
	}
	return a.CreditsRemaining
}
