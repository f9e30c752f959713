// Package adaptertest runs adapters against the replay upstream in tests:
// a request is validated by the registry (defaults applied) exactly as the
// pipeline would, served by a Runner whose only provider is the one under
// test, and its data compared with a golden file and the endpoint's schema.
package adaptertest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/internal/devscripts"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

var update = flag.Bool("update", false, "rewrite golden files from the adapters' output")

// Root is the repository root (the folder holding go.mod).
func Root(t testing.TB) string {
	t.Helper()
	root, err := devscripts.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// FixturesDir is testdata/upstream.
func FixturesDir(t testing.TB) string { return filepath.Join(Root(t), replay.DefaultDir) }

// Upstream is a provider under test behind the replay upstream.
type Upstream struct {
	Provider *upstream.Provider
	Replay   *replay.Server
	Runner   *upstream.Runner
	// Memory keeps the runner's remembered resolutions for the test.
	Memory *Memory
}

// Options keep tests quick: short timeouts and backoff, and no cooldown
// (a test of many fault fixtures would otherwise rest its route).
var Options = upstream.Options{
	AttemptTimeout: 2 * time.Second,
	Timeout:        5 * time.Second,
	BackoffBase:    5 * time.Millisecond,
	BackoffMax:     20 * time.Millisecond,
	CooldownAfter:  1 << 30,
}

// Start serves testdata/upstream through a replay server and builds a
// runner with p as the only provider, its base URL pointed at the replay
// server. secrets are the configured credentials (placeholders stand in
// for required ones not given).
func Start(t testing.TB, p *upstream.Provider, secrets map[string]string) *Upstream {
	t.Helper()
	return StartWith(t, p, secrets, Options)
}

// StartWith is Start with other runner options (a fixed clock, say).
func StartWith(t testing.TB, p *upstream.Provider, secrets map[string]string, opts upstream.Options) *Upstream {
	t.Helper()
	return StartRoutes(t, []*upstream.Provider{p}, secrets, opts)
}

// StartRoutes serves testdata/upstream to several providers at once, in
// route order, so a test sees failover as a deployment would (a site, then
// the unblocking services). Upstream.Provider is the first; its golden
// files are the ones Data compares with.
func StartRoutes(t testing.TB, providers []*upstream.Provider, secrets map[string]string, opts upstream.Options) *Upstream {
	t.Helper()
	srv, err := replay.Load(FixturesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	// Configured like a live deployment pointed at a test server, so the
	// credentials given here are the ones sent (replay mode never sends real ones).
	values := map[string]string{}
	for _, p := range providers {
		values[p.BaseURLVar()] = base + "/" + p.Name
		for _, sec := range p.Secrets {
			if sec.Required {
				values[sec.Name] = upstream.ReplaySecret
			}
		}
	}
	for k, v := range secrets {
		values[k] = v
	}
	lookup := func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	}
	memory := &Memory{values: map[string]memo{}}
	runner := upstream.NewRunner(providers, upstream.Settings{Lookup: lookup, Options: opts}).WithMemory(memory)
	return &Upstream{Provider: providers[0], Replay: srv, Runner: runner, Memory: memory}
}

// Memory is an in-process upstream.Memory for tests, counting what it kept.
type Memory struct {
	mu     sync.Mutex
	values map[string]memo
	// Kept counts the values stored.
	Kept int
}

type memo struct {
	value string
	until time.Time
}

func (m *Memory) Recall(_ context.Context, key string, now time.Time) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[key]
	if !ok || !now.Before(v.until) {
		return "", false, nil
	}
	return v.value, true, nil
}

func (m *Memory) Keep(_ context.Context, key, value string, _, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[key] = memo{value, until}
	m.Kept++
	return nil
}

// Serve validates query for endpoint as the pipeline does and runs it.
func (u *Upstream) Serve(t testing.TB, endpoint, query string) upstream.Outcome {
	t.Helper()
	e, ok := registry.Default().Endpoint(endpoint)
	if !ok {
		t.Fatalf("%s is not in the registry", endpoint)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	res, verr := params.Validate(e, q, nil)
	if verr != nil {
		t.Fatalf("%s?%s does not validate: %v", endpoint, query, verr)
	}
	return u.Runner.Serve(context.Background(), endpoint, res.Values)
}

// Data serves the request, requires success, checks the data against the
// endpoint's schema and the golden file testdata/upstream/<provider>/golden/<name>.json
// (rewritten first under -update), and returns the data as plain JSON values.
func (u *Upstream) Data(t testing.TB, endpoint, query, golden string) map[string]any {
	t.Helper()
	got := valid(t, endpoint, u.Serve(t, endpoint, query))
	path := goldenPath(t, u.Provider.Name, golden)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	same(t, endpoint+"?"+query, got, path)
	var plain map[string]any
	if err := json.Unmarshal(got, &plain); err != nil {
		t.Fatal(err)
	}
	return plain
}

// MatchesGolden requires out to be a success whose data validates and
// equals provider's golden file name: another route's answer to the same
// question (an unblocking service fetching the page the direct route
// read) must map to the same data. It never rewrites the golden file.
func MatchesGolden(t testing.TB, endpoint string, out upstream.Outcome, provider, name string) {
	t.Helper()
	same(t, endpoint, valid(t, endpoint, out), goldenPath(t, provider, name))
}

// valid requires a success whose data validates against the endpoint's
// schema, and returns the data as the golden files hold it.
func valid(t testing.TB, endpoint string, out upstream.Outcome) []byte {
	t.Helper()
	if out.Fault != nil {
		t.Fatalf("%s failed: %v", endpoint, out.Fault)
	}
	if err := schemas.Validate(endpoint, out.Data); err != nil {
		t.Fatalf("%s: data does not validate against the schema: %v", endpoint, err)
	}
	got, err := json.MarshalIndent(out.Data, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(got, '\n')
}

func goldenPath(t testing.TB, provider, name string) string {
	return filepath.Join(FixturesDir(t), provider, "golden", name+".json")
}

func same(t testing.TB, what string, got []byte, path string) {
	t.Helper()
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (run the test with -update to write it, then review it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: data differs from %s\n got: %s\nwant: %s", what, path, got, want)
	}
}

// Fault serves the request and requires it to fail with kind.
func (u *Upstream) Fault(t testing.TB, endpoint, query string, kind upstream.FaultKind) upstream.Outcome {
	t.Helper()
	out := u.Serve(t, endpoint, query)
	if out.Fault == nil {
		t.Fatalf("%s?%s: no fault (skipped for %v); want fault %s", endpoint, query, out.Skipped, kind)
	}
	if out.Fault.Kind != kind {
		t.Fatalf("%s?%s: fault %s (%v); want %s", endpoint, query, out.Fault.Kind, out.Fault, kind)
	}
	return out
}

// LastRequest is the last request the replay upstream received.
func (u *Upstream) LastRequest(t testing.TB) replay.Request {
	t.Helper()
	reqs := u.Replay.Requests()
	if len(reqs) == 0 {
		t.Fatal("the replay upstream received no request")
	}
	return reqs[len(reqs)-1]
}

// Items returns data's items as objects, failing when it has none.
func Items(t testing.TB, data map[string]any) []map[string]any {
	t.Helper()
	raw, ok := data["items"].([]any)
	if !ok {
		t.Fatalf("items is %T", data["items"])
	}
	out := make([]map[string]any, len(raw))
	for i, v := range raw {
		out[i] = v.(map[string]any)
	}
	return out
}
