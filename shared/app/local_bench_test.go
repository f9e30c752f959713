package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// BenchmarkLocalHandler is the local server's handler (every family,
// each request as Lambda would hand it over, the embedded store, the
// in-process usage worker) answering cached data, without the network:
// the CPU a request costs the server beside what net/http itself spends.
// Keys rotate as in make bench's wrk runs, so the shipped rate limit
// never refuses one. Section 2 of BENCHMARKS.md measures it under wrk.
//
//	go test ./shared/app -run '^$' -bench '^BenchmarkLocalHandler$' -benchmem
func BenchmarkLocalHandler(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	var err error
	dir := b.TempDir()
	if parent := os.Getenv("MERIDIAN_BENCH_DATA_DIR"); parent != "" { // as BenchmarkPipeline's
		if dir, err = os.MkdirTemp(parent, "local-bench-"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	s, err := embedded.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var keys []string
	for len(keys) < 2000 {
		acct, _, err := auth.CreateAccount(ctx, s, 1_000_000_000, envelope.NewRequestID())
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < 5; n++ {
			key, k := auth.NewKey(acct.ID, "bench-"+strconv.Itoa(n), nil)
			if _, err := s.CreateKey(ctx, k); err != nil {
				b.Fatal(err)
			}
			keys = append(keys, key)
		}
	}
	srv, err := replay.Load(filepath.Join("..", "..", "testdata", "upstream"))
	if err != nil {
		b.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	none := func(string) (string, bool) { return "", false }
	h := app.LocalHandler(logger, app.Deps{Store: s, Throttle: app.ThrottleFromEnv(), Upstream: app.NewUpstream(logger, none, base), Events: app.LocalEvents(ctx, s, logger)})
	get := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/v1/company_registry/search?query=acme", nil)
		r.Header.Set("x-api-key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := get(keys[0]); w.Code != http.StatusOK {
		b.Fatalf("first call: %d %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if w := get(keys[i%len(keys)]); w.Code != http.StatusOK || w.Header().Get("x-cache") != "HIT" {
			b.Fatalf("call %d: %d %s", i, w.Code, w.Header().Get("x-cache"))
		}
	}
}
