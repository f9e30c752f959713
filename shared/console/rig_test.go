package console

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/envelope/envelopetest"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/usage"
)

// billed is the console served by a pipeline over a real store, with an
// account (and its console token), an API key and a test-only adapter for
// marketplace_a/search (cost 3), registered here, never in the production
// registry. Usage events are applied by a worker as they are emitted.
type billed struct {
	t       testing.TB
	p       *pipeline.Pipeline
	surface *Console // the console the pipeline serves
	store   billedStore
	account store.Account
	key     string
	keyRec  store.Key
	console string
	clock   *testClock
}

// billedStore is what the rig needs of a store.
type billedStore interface {
	store.Store
	store.Cache
	store.Idempotency
	store.Outcomes
}

// billedFactory builds the rig on one kind of store; mutate changes the
// console's Config.
type billedFactory func(t *testing.T, credits int64, limit *int64, mutate ...func(*Config)) *billed

func newBilled(t *testing.T, credits int64, limit *int64, mutate ...func(*Config)) *billed {
	t.Helper()
	return newBilledOn(t, openEmbedded(t), credits, limit, mutate...)
}

// openEmbedded opens an embedded store in a temporary folder.
func openEmbedded(tb testing.TB) *embedded.Store {
	tb.Helper()
	s, err := embedded.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func newBilledOn(tb testing.TB, s billedStore, credits int64, limit *int64, mutate ...func(*Config)) *billed {
	tb.Helper()
	b := &billed{t: tb, store: s, clock: &testClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}}
	b.open(tb, credits, limit)
	adapter := func(_ context.Context, c *pipeline.Call) (any, *envelope.Error) {
		if c.Params.Values["query"] == "fail" {
			return nil, envelope.New(envelope.UpstreamError, http.StatusBadGateway, "The source answered 500.", nil)
		}
		return map[string]any{"items": []any{}, "count": 0, "query": c.Params.Values["query"]}, nil
	}
	logger := slog.New(slog.DiscardHandler)
	cfg := Config{Registry: registry.Default(), Store: s, Logger: logger, Now: b.clock.Now}
	for _, m := range mutate {
		m(&cfg)
	}
	b.surface = New(cfg)
	b.p = pipeline.New(pipeline.Config{
		Registry:    registry.Default(),
		Store:       s,
		Cache:       s,
		Idempotency: s,
		Outcomes:    s,
		Events:      applied{&usage.Worker{Store: s, Outcomes: s}},
		Handlers:    map[string]pipeline.Handler{"marketplace_a/search": adapter},
		Surfaces:    []pipeline.Surface{b.surface},
		Logger:      logger,
		Now:         b.clock.Now,
	})
	return b
}

// open opens the account with its console token and an API key that the
// rig uses from then on.
func (b *billed) open(tb testing.TB, credits int64, limit *int64) {
	tb.Helper()
	ctx := context.Background()
	var err error
	if b.account, b.console, err = auth.CreateAccount(ctx, b.store, credits, "req_test_opening"); err != nil {
		tb.Fatal(err)
	}
	full, k := auth.NewKey(b.account.ID, "test", limit)
	if b.keyRec, err = b.store.CreateKey(ctx, k); err != nil {
		tb.Fatal(err)
	}
	b.key = full
}

// withOutcomes gives the console the usage and status figures.
func withOutcomes(c *Config) { c.Outcomes = c.Store.(store.Outcomes) }

// applied is the pipeline's event sink: the worker applies each message at
// once, as the queue would a moment later.
type applied struct{ worker *usage.Worker }

func (a applied) Emit(m queue.Message) {
	if err := a.worker.Handle(context.Background(), m.Encoded()); err != nil {
		panic(err)
	}
}

// testClock is the rig's clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

type response struct {
	code   int
	header http.Header
	body   map[string]any
	raw    string
}

// do sends a request without a body through the pipeline.
func (b *billed) do(method, target string, headers ...string) response {
	b.t.Helper()
	req := httptest.NewRequest(method, "http://api.test"+target, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	b.p.ServeHTTP(rec, req)
	res := response{code: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if strings.HasPrefix(rec.Header().Get("content-type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &res.body); err != nil {
			b.t.Fatalf("%s %s: body is not JSON: %v\n%s", method, target, err, rec.Body)
		}
	}
	return res
}

func (b *billed) call(target string) response {
	return b.do("GET", target, "x-api-key", b.key)
}

func (b *billed) entries(t *testing.T, requestID string) []store.Entry {
	t.Helper()
	page, err := b.store.Ledger(context.Background(), b.account.ID, store.LedgerQuery{Limit: 100, RequestID: requestID})
	if err != nil {
		t.Fatal(err)
	}
	return page.Entries
}

func (r response) errorType() string {
	e, _ := r.body["error"].(map[string]any)
	t, _ := e["type"].(string)
	return t
}

func (r response) details() map[string]any {
	e, _ := r.body["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	return d
}

// checkEnvelope asserts the rules of spec 2.1 and 2.2 that hold for every
// routed JSON response.
func checkEnvelope(t *testing.T, r response) {
	t.Helper()
	for _, p := range envelopetest.Problems(r.code, r.header, r.body, "http://api.test/docs/errors") {
		t.Error(p)
	}
}

// decode is a small helper for console bodies.
func decode(t *testing.T, raw string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return m
}

func storeQuery(limit int) store.LedgerQuery { return store.LedgerQuery{Limit: limit} }

// digest is how the pipeline names an Idempotency-Key in the store.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// decompress reads a stored (gzip-compressed) idempotent answer.
func decompress(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, 64<<20))
}
