package pipeline_test

// Benchmarks of the in-process pipeline (BENCHMARKS.md, section 1): the
// whole pipeline as app wires it, on the embedded store, against the
// shipped replay fixtures. They run only with -bench (scripts/bench.sh):
//
//	go test ./shared/pipeline -run '^$' -bench '^BenchmarkPipeline$' -benchmem
//
// Besides ns/op (a mean that includes building the request) each reports
// p50-ns and p99-ns: the median and 99th percentile of ServeHTTP alone.

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/upstream/replay"
	"github.com/meridian-data/meridian/shared/usage"
)

// EnvBenchDataDir moves the embedded store of the pipeline benchmarks
// (default: a temporary folder). scripts/bench.sh runs them on a disk
// folder, as make run keeps .data, and on tmpfs (/dev/shm), where bbolt's
// fsync per write transaction costs nothing, to separate the pipeline's
// own work from the disk's.
const EnvBenchDataDir = "MERIDIAN_BENCH_DATA_DIR"

// benchPath is the paid data endpoint every benchmark calls:
// company_registry/search (1 credit, cached 10 minutes by default), served
// by the shipped companies_house adapter over the replay upstream.
const benchPath = "/v1/company_registry/search"

// benchLimits raise the per-key limits (600 a minute, 25 in flight) so a
// benchmark's one key is never refused; admission still runs its writes.
var benchLimits = store.LimitRules{Rate: 1 << 30, Window: time.Minute, Concurrency: 1 << 20, Lease: 2 * time.Minute}

// benchUpstreamOptions keep retries of a failing fixture short; cooldown
// never starts, so every failure reaches the replay upstream.
var benchUpstreamOptions = upstream.Options{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond, CooldownAfter: 1 << 30}

// discardSink takes usage events as the emitter would (a buffer append,
// off the request path) and drops them.
type discardSink struct{}

func (discardSink) Emit(queue.Message) {}

// benchEnv is one pipeline with an account and an API key.
type benchEnv struct {
	handler http.Handler
	key     string
	account store.Account
}

// replayRunner serves every shipped provider from testdata/upstream on a
// loopback replay upstream for the rest of the benchmark.
func replayRunner(tb testing.TB) *upstream.Runner {
	tb.Helper()
	srv, err := replay.Load(filepath.Join("..", "..", "testdata", "upstream"))
	if err != nil {
		tb.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = stop() })
	none := func(string) (string, bool) { return "", false }
	return upstream.NewRunner(adapters.All(), upstream.Settings{Lookup: none, ReplayURL: base, Options: benchUpstreamOptions})
}

// newBenchEnv wires the pipeline exactly as app.Config does for a
// function serving every family (events go to sink), with benchLimits.
func newBenchEnv(tb testing.TB, s store.Store, sink usage.Sink, logs io.Writer) *benchEnv {
	tb.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewJSONHandler(logs, nil)) // the log line is formatted, as app.Logger does
	cfg := app.Config("", logger, app.Deps{Store: s, Throttle: auth.NewThrottle(20), Upstream: replayRunner(tb), Events: sink})
	cfg.LimitRules = benchLimits
	acct, _, err := auth.CreateAccount(ctx, s, store.MaxCredits/2, envelope.NewRequestID())
	if err != nil {
		tb.Fatal(err)
	}
	key, k := auth.NewKey(acct.ID, "bench", nil)
	if _, err := s.CreateKey(ctx, k); err != nil {
		tb.Fatal(err)
	}
	return &benchEnv{handler: app.New(cfg), key: key, account: acct}
}

// request builds a GET with the key (when withKey) as API Gateway's
// adaptation would present it.
func (e *benchEnv) request(target string, withKey bool) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Header.Set("x-forwarded-proto", "https")
	r.RemoteAddr = "203.0.113.7:40000"
	if withKey {
		r.Header.Set("x-api-key", e.key)
	}
	return r
}

// sinkWriter is a minimal http.ResponseWriter: headers and status kept,
// body counted and dropped.
type sinkWriter struct {
	header http.Header
	status int
	bytes  int
}

func (w *sinkWriter) Header() http.Header { return w.header }
func (w *sinkWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *sinkWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.bytes += len(b)
	return len(b), nil
}

// serve runs one request and returns its status, its x-cache header and
// how long ServeHTTP took. Its after-response work runs on (e.after).
func (e *benchEnv) serve(r *http.Request) (int, string, time.Duration) {
	w := &sinkWriter{header: http.Header{}}
	start := time.Now()
	e.handler.ServeHTTP(w, r)
	return w.status, w.header.Get("x-cache"), time.Since(start)
}

// benchDataDir is where one benchmark keeps its embedded store.
func benchDataDir(b *testing.B) string {
	root := os.Getenv(EnvBenchDataDir)
	if root == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(root, "meridian-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// reportPercentiles adds the median and 99th percentile of the samples.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkPipeline: a cache hit, an uncached paid success (a cache miss,
// reserve, the replay upstream over loopback HTTP, settle, cache write),
// a 400 validation refusal (an unknown parameter) and a 401 (no key).
func BenchmarkPipeline(b *testing.B) {
	s, err := embedded.Open(benchDataDir(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	env := newBenchEnv(b, s, discardSink{}, io.Discard)
	// Warm the cache entry the hits read, and every lazy initialisation.
	if status, cache, _ := env.serve(env.request(benchPath+"?query=acme", true)); status != http.StatusOK || cache != "MISS" {
		b.Fatalf("warm-up: %d %s", status, cache)
	}
	cases := []struct {
		name    string
		target  func(i int) string
		withKey bool
		status  int
		cache   string
	}{
		{"cache_hit", func(int) string { return benchPath + "?query=acme" }, true, http.StatusOK, "HIT"},
		{"paid_uncached", func(i int) string {
			return benchPath + "?query=bench-" + strconv.Itoa(i) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		}, true, http.StatusOK, "MISS"},
		{"refusal_400", func(int) string { return benchPath + "?qery=acme" }, true, http.StatusBadRequest, ""},
		{"unauthorized_401", func(int) string { return benchPath + "?query=acme" }, false, http.StatusUnauthorized, ""},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			samples := make([]time.Duration, 0, b.N)
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				status, cache, took := env.serve(env.request(c.target(i), c.withKey))
				if status != c.status || cache != c.cache {
					b.Fatalf("request %d: %d x-cache %q, want %d %q", i, status, cache, c.status, c.cache)
				}
				samples = append(samples, took)
			}
			b.StopTimer()
			reportPercentiles(b, samples)
		})
	}
}
