package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/gateway"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// slowSource is the replay upstream answering company_registry's source
// after a delay, counting its requests; the first failFirst of them are
// answered 404 (a definitive answer: the runner does not retry it).
type slowSource struct {
	replay    http.Handler
	delay     time.Duration
	failFirst int64
	hits      atomic.Int64
}

const sourcePrefix = "/companies_house/"

func (s *slowSource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, sourcePrefix) {
		n := s.hits.Add(1)
		time.Sleep(s.delay)
		if n <= s.failFirst {
			w.Header().Set("content-type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errors":[{"error":"not-found"}]}`))
			return
		}
	}
	s.replay.ServeHTTP(w, r)
}

func newSlowSource(t testing.TB, delay time.Duration) (*slowSource, string) {
	t.Helper()
	srv, err := replay.Load(filepath.Join(repoRoot(t), "testdata", "upstream"))
	if err != nil {
		t.Fatal(err)
	}
	s := &slowSource{replay: srv, delay: delay}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// collapsingProcess is one process of the API as make run and Lambda build
// it (a pipeline per family over the shared store), with the fill
// marker's lease set.
func collapsingProcess(t testing.TB, s store.Store, base string, lease time.Duration) string {
	t.Helper()
	logger := quietLogger()
	deps := app.Deps{Store: s, Upstream: app.NewUpstream(logger, func(string) (string, bool) { return "", false }, base)}
	handlers := map[registry.Family]http.Handler{}
	for _, f := range registry.Families {
		cfg := app.Config(f, logger, deps)
		cfg.FillLease = lease
		handlers[f] = app.New(cfg)
	}
	api := httptest.NewServer(gateway.Local(registry.Default().Routes(), handlers, logger, ""))
	t.Cleanup(api.Close)
	return api.URL
}

type burstAnswer struct {
	status int
	cache  string
	used   int64
	data   string
	typ    string
	done   time.Time // when its last byte came
}

// burst sends n identical requests at once, spread over keys and the
// processes' base URLs, and returns every answer.
func burst(t testing.TB, bases, keys []string, n int, path string, header http.Header) []burstAnswer {
	t.Helper()
	return burstAfter(t, bases, keys, n, path, header, 0)
}

// burstAfter is burst with every request but the first sent lead later,
// while the first is in flight.
func burstAfter(t testing.TB, bases, keys []string, n int, path string, header http.Header, lead time.Duration) []burstAnswer {
	t.Helper()
	answers := make([]burstAnswer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if i > 0 {
				time.Sleep(lead)
			}
			req, _ := http.NewRequest(http.MethodGet, bases[i%len(bases)]+path, nil)
			req.Header.Set("x-api-key", keys[i%len(keys)])
			for k, v := range header {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var env struct {
				Data        json.RawMessage `json:"data"`
				CreditsUsed *int64          `json:"credits_used"`
				Error       struct {
					Type string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &env); err != nil || env.CreditsUsed == nil {
				t.Errorf("answer %d: %d %.300s", i, resp.StatusCode, body)
				return
			}
			answers[i] = burstAnswer{resp.StatusCode, resp.Header.Get("x-cache"), *env.CreditsUsed, string(env.Data), env.Error.Type, time.Now()}
		}()
	}
	close(start)
	wg.Wait()
	return answers
}

// keysFor opens an account with credits and five keys (a key has 25
// requests in flight at most).
func keysFor(t testing.TB, s store.Store, credits int64) (string, []string) {
	t.Helper()
	acct, first := newAccount(t, s, credits, nil)
	keys := []string{first}
	for len(keys) < store.MaxActiveKeys {
		keys = append(keys, newKey(t, s, acct.ID))
	}
	return acct.ID, keys
}

// oneFill checks a burst's answers: one MISS that paid the list price,
// every other a HIT at 0 credits, every data identical; and the ledger: one
// debit beside the grant.
func oneFill(t *testing.T, s store.Store, accountID string, answers []burstAnswer) {
	t.Helper()
	misses := 0
	for i, a := range answers {
		switch {
		case a.status != 200:
			t.Errorf("answer %d: %d %s", i, a.status, a.typ)
		case a.cache == "MISS" && a.used == 1:
			misses++
		case a.cache != "HIT" || a.used != 0:
			t.Errorf("answer %d: x-cache %q, %d credits", i, a.cache, a.used)
		}
		if a.data != answers[0].data {
			t.Errorf("answer %d has other data", i)
		}
	}
	if misses != 1 {
		t.Errorf("%d answers fetched and paid, want 1", misses)
	}
	page, err := s.Ledger(context.Background(), accountID, store.LedgerQuery{Limit: 100})
	debits := 0
	for _, e := range page.Entries {
		if e.Type == store.EntryDebit {
			debits++
		}
	}
	if err != nil || debits != 1 || len(page.Entries) != 2 {
		t.Errorf("ledger: %d entries, %d debits, %v", len(page.Entries), debits, err)
	}
}

func searchPath(q string) string {
	return "/v1/company_registry/search?query=" + url.QueryEscape(q)
}

// A burst of 50 identical requests against a source that answers after
// 300 ms costs one source request in one process, at most two across two
// processes sharing the store; one caller pays, the rest are cache HITs.
func TestBurstCostsOneSourceRequest(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Store) {
		t.Parallel()
		src, base := newSlowSource(t, 300*time.Millisecond)
		acct, keys := keysFor(t, s, 100)
		api := collapsingProcess(t, s, base, 0)
		oneFill(t, s, acct, burst(t, []string{api}, keys, 50, searchPath("BBC LIMITED"), nil))
		if got := src.hits.Load(); got != 1 {
			t.Errorf("%d source requests, want 1", got)
		}
	})
	t.Run("two processes", func(t *testing.T) {
		t.Parallel()
		s := dynamotest.NewStore(t)
		src, base := newSlowSource(t, 300*time.Millisecond)
		acct, keys := keysFor(t, s, 100)
		apis := []string{collapsingProcess(t, s, base, 0), collapsingProcess(t, s, base, 0)}
		answers := burst(t, apis, keys, 50, searchPath("BBC LIMITED"), nil)
		hits := src.hits.Load()
		if hits < 1 || hits > 2 {
			t.Errorf("%d source requests across two processes, want 1 or 2", hits)
		}
		misses := 0
		for i, a := range answers {
			if a.status != 200 || a.data != answers[0].data || (a.cache == "HIT") != (a.used == 0) {
				t.Errorf("answer %d: %d x-cache %q, %d credits", i, a.status, a.cache, a.used)
			}
			if a.cache == "MISS" {
				misses++
			}
		}
		if int64(misses) != hits {
			t.Errorf("%d paid answers for %d source requests", misses, hits)
		}
		if bal, err := s.Account(context.Background(), acct); err != nil || bal.CreditsRemaining != 100-int64(misses) {
			t.Errorf("balance %d, %v", bal.CreditsRemaining, err)
		}
	})
}

// A filler that died mid-fetch (its marker claimed, never filled or
// released) is taken over once its lease lapses: one source request, and
// every caller gets its answer.
func TestDeadFillerIsTakenOver(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Store) {
		t.Parallel()
		src, base := newSlowSource(t, 100*time.Millisecond)
		acct, keys := keysFor(t, s, 100)
		const lease = 400 * time.Millisecond
		api := collapsingProcess(t, s, base, lease)
		key := cacheKeyOf(t, "company_registry/search", "query=DEAD+FILLER+LIMITED")
		if ok, err := s.(store.Fills).ClaimFill(context.Background(), key, "a-process-that-died", time.Now(), lease); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		start := time.Now()
		oneFill(t, s, acct, burst(t, []string{api}, keys, 20, searchPath("DEAD FILLER LIMITED"), nil))
		if got := src.hits.Load(); got != 1 {
			t.Errorf("%d source requests, want 1", got)
		}
		if took := time.Since(start); took < lease/2 {
			t.Errorf("answered in %v: nobody waited for the dead filler's lease", took)
		}
	})
}

// A failed fill is never shared: the caller whose fetch failed gets its
// own error, and a waiter takes the fill over; the rest are HITs of that.
// Cache-Control: no-cache neither waits nor is waited for.
func TestFailedFillIsNotShared(t *testing.T) {
	s := newEmbedded(t)
	src, base := newSlowSource(t, 200*time.Millisecond)
	src.failFirst = 1
	acct, keys := keysFor(t, s, 100)
	api := collapsingProcess(t, s, base, 0)
	answers := burst(t, []string{api}, keys, 20, searchPath("FAILED FILL LIMITED"), nil)
	notFound, paid, hit := 0, 0, 0
	for i, a := range answers {
		switch {
		case a.status == 404 && a.typ == "RESOURCE_NOT_FOUND" && a.used == 0:
			notFound++
		case a.status == 200 && a.cache == "MISS" && a.used == 1:
			paid++
		case a.status == 200 && a.cache == "HIT" && a.used == 0:
			hit++
		default:
			t.Errorf("answer %d: %d %s x-cache %q, %d credits", i, a.status, a.typ, a.cache, a.used)
		}
	}
	if notFound != 1 || paid != 1 || hit != 18 || src.hits.Load() != 2 {
		t.Errorf("%d not found, %d paid, %d hits; %d source requests", notFound, paid, hit, src.hits.Load())
	}
	if bal, err := s.Account(context.Background(), acct); err != nil || bal.CreditsRemaining != 99 {
		t.Errorf("balance %d, %v", bal.CreditsRemaining, err)
	}

	src.hits.Store(0)
	src.failFirst = 0
	answers = burst(t, []string{api}, keys, 10, searchPath("NO CACHE LIMITED"), http.Header{"Cache-Control": {"no-cache"}})
	for i, a := range answers {
		if a.status != 200 || a.cache != "MISS" || a.used != 1 {
			t.Errorf("no-cache answer %d: %d x-cache %q, %d credits", i, a.status, a.cache, a.used)
		}
	}
	if got := src.hits.Load(); got != 10 {
		t.Errorf("no-cache burst: %d source requests, want 10", got)
	}
}

// cacheKeyOf is the response cache's key of a request, as the dry run
// reports it.
func cacheKeyOf(t *testing.T, endpoint, query string) string {
	t.Helper()
	key, err := pipeline.CacheKey(registry.Default(), endpoint, query)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
