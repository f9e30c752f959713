package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/envelope/envelopetest"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// fuzzEnv is what the body fuzzers run against: the real pipeline over the
// embedded store (in a temporary folder), one funded account with a key,
// and handlers that answer without any network. bbolt
// syncs every write to disk, which bounds the fuzzers' pace: with
// TMPDIR=/dev/shm (tmpfs) they run many times faster.
type fuzzEnv struct {
	p       *Pipeline
	store   *embedded.Store
	account store.Account
	console string // the account's console token
	key     string // the account's API key
	keyRec  store.Key
}

// fuzzCredits is the balance the fuzzers keep the account at or above, so
// that no input runs out of credits by the mere number of runs before it.
const fuzzCredits = 1_000_000_000

func newFuzzEnv(tb testing.TB) *fuzzEnv {
	tb.Helper()
	s, err := embedded.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	env := &fuzzEnv{store: s}
	env.openAccount(tb)
	// A paid endpoint that succeeds, fails upstream (502, refunded) or finds
	// nothing (404) by its query; every other data endpoint has no handler
	// and answers 501, the service-owned ones answer from the store.
	adapter := func(_ context.Context, c *Call) (any, *envelope.Error) {
		switch c.Params.Values["query"] {
		case "fail":
			return nil, envelope.New(envelope.UpstreamError, http.StatusBadGateway, "The source answered 500.", nil)
		case "missing":
			return nil, envelope.New(envelope.ResourceNotFound, http.StatusNotFound, "The source has no such record.", nil)
		}
		return map[string]any{"items": []any{}, "count": 0, "query": c.Params.Values["query"]}, nil
	}
	env.p = New(Config{
		Registry:    registry.Default(),
		Store:       s,
		Cache:       s,
		Idempotency: s,
		Outcomes:    s,
		Handlers: map[string]Handler{
			"marketplace_a/search":     adapter,
			"microblog_b/search-posts": adapter,
			"web/social-profiles":      adapter,
		},
	})
	return env
}

// openAccount opens the funded account with its key that the fuzzers use
// from then on.
func (e *fuzzEnv) openAccount(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	var err error
	if e.account, e.console, err = auth.CreateAccount(ctx, e.store, fuzzCredits, "req_fuzz_opening"); err != nil {
		tb.Fatal(err)
	}
	full, k := auth.NewKey(e.account.ID, "fuzz", nil)
	if e.keyRec, err = e.store.CreateKey(ctx, k); err != nil {
		tb.Fatal(err)
	}
	e.key = full
}

// balance is the account's balance as the store holds it.
func (e *fuzzEnv) balance(t *testing.T) int64 {
	t.Helper()
	a, err := e.store.Account(context.Background(), e.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	return a.CreditsRemaining
}

// topUp grants credits when earlier runs spent the balance below fuzzCredits.
func (e *fuzzEnv) topUp(t *testing.T) {
	t.Helper()
	if b := e.balance(t); b < fuzzCredits {
		if _, err := e.store.Grant(context.Background(), e.account.ID, fuzzCredits-b, "fuzz top-up", "req_fuzz_topup"); err != nil {
			t.Fatal(err)
		}
	}
}

// serve runs one request through the pipeline.
func (e *fuzzEnv) serve(method, target string, body []byte, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://api.test"+target, bytes.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	e.p.ServeHTTP(rec, req)
	return rec
}

// batchEntry is one results[] entry as FuzzBatchBody reads it.
type batchEntry struct {
	Index       *int            `json:"index"`
	Status      *int            `json:"status"`
	Success     *bool           `json:"success"`
	CreditsUsed *json.Number    `json:"credits_used"`
	RequestID   string          `json:"request_id"`
	Data        json.RawMessage `json:"data"`
	Error       json.RawMessage `json:"error"`
}

// FuzzBatchBody sends arbitrary bodies to POST /v1/batch through the whole
// pipeline. Whatever the body: the answer is JSON and never a 5xx; a
// refused body is a typed 400 or 413 INVALID_PARAMETERS that charges
// nothing; an accepted one is the wrapper of spec 2.3 (count, succeeded +
// failed, credits_used the sum of the items'), and the balance moves by
// exactly the wrapper's credits_used.
func FuzzBatchBody(f *testing.F) {
	item := func(platform, endpoint, params string) string {
		return fmt.Sprintf(`{"platform":%q,"endpoint":%q,"params":%s}`, platform, endpoint, params)
	}
	search := func(q string) string { return item("marketplace_a", "search", fmt.Sprintf(`{"query":%q}`, q)) }
	many := func(n int) string {
		var specs []string
		for i := range n {
			specs = append(specs, search(fmt.Sprint("many ", i%7)))
		}
		return items(specs...)
	}
	for _, seed := range []string{
		// Valid batches: one item, then every outcome side by side.
		items(search("lamp")),
		items(search("lamp"), search("fail"), search("missing"),
			item("marketplace_a", "search", `{"query":"lamp","limit":5,"dry_run":1}`),
			item("marketplace_a", "search", `{"page":2}`),
			item("marketplace_a", "nope", `{}`),
			item("app_store_b", "categories", `{}`),
			item("credits", "balance", `{}`),
			item("utility", "endpoints", `{"platform":"marketplace_a"}`),
			item("utility", "llms", `{}`),
			item("utility", "llms", `{"format":"json"}`),
			item("web", "social-profiles", `{"platform":"microblog_b","handle":"x"}`),
			item("marketplace_a", "search", `{"query":"s","stream":"1"}`),
			`{"platform":"microblog_b","endpoint":"search-posts"}`),
		many(20),
		many(21),
		// Wrong types.
		`{"requests":{}}`,
		`{"requests":"marketplace_a/search"}`,
		`{"requests":[1,"two",true]}`,
		`{"requests":[{"platform":1,"endpoint":"search","params":{}}]}`,
		`{"requests":[{"platform":"marketplace_a","endpoint":["search"],"params":{}}]}`,
		`{"requests":[{"platform":"marketplace_a","endpoint":"search","params":[]}]}`,
		`{"requests":[{"platform":"marketplace_a","endpoint":"search","params":{"query":"a","limit":"x"}}]}`,
		`{"requests":[{"platform":"marketplace_a","endpoint":"search","params":{"query":true,"limit":1e400}}]}`,
		// Nested params.
		`{"requests":[{"platform":"marketplace_a","endpoint":"search","params":{"query":{"a":1}}}]}`,
		`{"requests":[{"platform":"marketplace_a","endpoint":"search","params":{"query":["a","b"]}}]}`,
		`{"requests":[{"platform":"marketplace_a","endpoint":"search","params":{"params":{"query":"a"}}}]}`,
		// Huge strings: within the size limit and over it.
		items(search(strings.Repeat("q", 10_000))),
		items(search(strings.Repeat("q", MaxBatchBody))),
		items(item(strings.Repeat("p", 5000), strings.Repeat("e/", 2000), `{}`)),
		// Invalid UTF-8, NUL and odd path segments.
		"{\"requests\":[{\"platform\":\"market\xffplace_a\",\"endpoint\":\"search\",\"params\":{\"query\":\"a\"}}]}",
		"{\"requests\":[{\"platform\":\"marketplace_a\",\"endpoint\":\"search\",\"params\":{\"query\":\"\xc3\x28\"}}]}",
		"{\"requests\":[{\"platform\":\"marketplace_a\",\"endpoint\":\"search\",\"params\":{\"qu\xfe\xffery\":\"a\"}}]}",
		items(item("marketplace_a", "search", `{"query":"a\u0000b"}`), item("marketplace_a", "../search", `{}`),
			item("..", "..", `{}`), item("marketplace_a/search", "", `{"query":"a"}`), item("marketplace_a", "search?query=a", `{}`),
			item("marketplace_a", "search", `{"":"1","query":"a"}`), item("marketplace_a", "search", `{"query":"a","api_key":"x"}`)),
		// Duplicate keys.
		`{"requests":[` + search("a") + `],"requests":[` + search("b") + `]}`,
		`{"requests":[{"platform":"nope","platform":"marketplace_a","endpoint":"search","params":{"query":"a","query":"b"}}]}`,
		// null.
		`null`,
		`{"requests":null}`,
		`{"requests":[null]}`,
		`{"requests":[{"platform":"marketplace_a","endpoint":"search","params":null}]}`,
		`{"requests":[{"platform":"marketplace_a","endpoint":null,"params":{"query":null}}]}`,
		// Trailing garbage, and other bodies that are not one object.
		items(search("a")) + `]`,
		items(search("a")) + `{}`,
		items(search("a")) + " \n\t",
		`{"requests":[` + search("a"),
		``,
		`{}`,
		`[]`,
		`{"requests":[]}`,
		`{"requests":[{"platform":"marketplace_a","endpoint":"search","params":{"query":"a"},"extra":1}]}`,
	} {
		f.Add([]byte(seed))
	}
	env := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		env.topUp(t)
		before := env.balance(t)
		rec := env.serve("POST", "/v1/batch", body, "x-api-key", env.key, "content-type", "application/json")
		after := env.balance(t)
		raw := rec.Body.Bytes()
		if !strings.HasPrefix(rec.Header().Get("content-type"), "application/json") || !json.Valid(raw) {
			t.Fatalf("HTTP %d: the answer is not JSON (%q): %.500s", rec.Code, rec.Header().Get("content-type"), raw)
		}
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d for a batch body: %.500s", rec.Code, raw)
		}
		if rec.Code != http.StatusOK {
			checkBatchRefusal(t, rec, len(body))
			if after != before {
				t.Fatalf("a refused batch changed the balance: %d -> %d", before, after)
			}
			return
		}
		used := checkBatchWrapper(t, raw, before)
		if before-after != used {
			t.Fatalf("the balance moved by %d, the wrapper says credits_used %d: %.1000s", before-after, used, raw)
		}
	})
}

// checkBatchRefusal: a refused batch is 400 (malformed, too many items) or
// 413 (too large), typed INVALID_PARAMETERS, with its reason.
func checkBatchRefusal(t *testing.T, rec *httptest.ResponseRecorder, size int) {
	t.Helper()
	raw := rec.Body.Bytes()
	f, err := envelopetest.TypedFailure(rec.Code, raw)
	if err != nil {
		t.Fatalf("HTTP %d: %v: %.500s", rec.Code, err, raw)
	}
	if f.Error.Type != envelope.InvalidParameters || (rec.Code != http.StatusBadRequest && rec.Code != http.StatusRequestEntityTooLarge) {
		t.Fatalf("a refused batch is 400 or 413 INVALID_PARAMETERS, not %d %s: %.500s", rec.Code, f.Error.Type, raw)
	}
	if rec.Header().Get("x-request-id") != f.RequestID {
		t.Fatalf("request_id %q, header %q", f.RequestID, rec.Header().Get("x-request-id"))
	}
	tooLarge := size > MaxBatchBody
	if (rec.Code == http.StatusRequestEntityTooLarge) != tooLarge {
		t.Fatalf("a body of %d bytes (limit %d) answered %d", size, MaxBatchBody, rec.Code)
	}
	reason, _ := f.Error.Details["reason"].(string)
	switch {
	case tooLarge && reason != "body_too_large",
		!tooLarge && reason != "malformed_body" && reason != "too_many_requests":
		t.Fatalf("details.reason %q: %.500s", reason, raw)
	}
	if reason == "too_many_requests" {
		if max, ok := f.Error.Details["max"].(json.Number); !ok || max.String() != fmt.Sprint(MaxBatchItems) {
			t.Fatalf("details.max %v", f.Error.Details["max"])
		}
	}
}

// checkBatchWrapper checks the wrapper of spec 2.3 and each entry, and
// returns the wrapper's credits_used.
func checkBatchWrapper(t *testing.T, raw []byte, before int64) int64 {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatalf("the wrapper is not an object: %v", err)
	}
	if _, ok := top["request_id"]; ok {
		t.Fatalf("the wrapper has no request_id of its own: %.300s", raw)
	}
	var w struct {
		Success          *bool        `json:"success"`
		Count            *int         `json:"count"`
		Succeeded        *int         `json:"succeeded"`
		Failed           *int         `json:"failed"`
		CreditsUsed      *int64       `json:"credits_used"`
		CreditsRemaining *int64       `json:"credits_remaining"`
		Results          []batchEntry `json:"results"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("the wrapper does not decode: %v: %.500s", err, raw)
	}
	if w.Success == nil || !*w.Success || w.Count == nil || w.Succeeded == nil || w.Failed == nil || w.CreditsUsed == nil {
		t.Fatalf("the wrapper lacks success, count, succeeded, failed or credits_used: %.500s", raw)
	}
	if *w.Count != len(w.Results) || *w.Count < 1 || *w.Count > MaxBatchItems || *w.Succeeded+*w.Failed != *w.Count {
		t.Fatalf("count %d, succeeded %d, failed %d for %d results", *w.Count, *w.Succeeded, *w.Failed, len(w.Results))
	}
	var sum int64
	succeeded := 0
	ids := map[string]bool{}
	for i, r := range w.Results {
		if r.Index == nil || *r.Index != i || r.Status == nil || r.Success == nil {
			t.Fatalf("results[%d] lacks its index, status or success: %+v", i, r)
		}
		ok := *r.Status >= 200 && *r.Status < 300
		if *r.Success != ok {
			t.Fatalf("results[%d]: success %v with status %d", i, *r.Success, *r.Status)
		}
		if r.CreditsUsed == nil {
			t.Fatalf("results[%d]: credits_used is null or absent", i)
		}
		n, err := r.CreditsUsed.Int64()
		if err != nil || n < 0 {
			t.Fatalf("results[%d]: credits_used %v", i, r.CreditsUsed)
		}
		sum += n
		if !envelopetest.RequestID.MatchString(r.RequestID) || ids[r.RequestID] {
			t.Fatalf("results[%d]: request_id %q missing or repeated", i, r.RequestID)
		}
		ids[r.RequestID] = true
		if ok {
			succeeded++
			if len(r.Data) == 0 {
				t.Fatalf("results[%d]: a success without data", i)
			}
			continue
		}
		if *r.Status == http.StatusInternalServerError {
			t.Fatalf("results[%d]: an internal error: %s", i, r.Error)
		}
		entry, err := json.Marshal(map[string]any{"success": false, "error": r.Error, "credits_used": r.CreditsUsed, "request_id": r.RequestID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := envelopetest.TypedFailure(*r.Status, entry); err != nil {
			t.Fatalf("results[%d] (status %d): %v: %s", i, *r.Status, err, r.Error)
		}
	}
	if succeeded != *w.Succeeded {
		t.Fatalf("succeeded %d, but %d entries have a 2xx status", *w.Succeeded, succeeded)
	}
	if sum != *w.CreditsUsed {
		t.Fatalf("credits_used %d is not the sum of the items' (%d)", *w.CreditsUsed, sum)
	}
	if lowest := w.CreditsRemaining; lowest != nil && (*lowest < 0 || *lowest > before) {
		t.Fatalf("credits_remaining %d outside [0, %d]", *lowest, before)
	}
	return *w.CreditsUsed
}
