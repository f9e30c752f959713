package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

type batchResult struct {
	Index            int             `json:"index"`
	Status           int             `json:"status"`
	Success          bool            `json:"success"`
	CreditsUsed      *float64        `json:"credits_used"`
	CreditsRemaining *float64        `json:"credits_remaining"`
	RequestID        string          `json:"request_id"`
	Cached           bool            `json:"cached"`
	Data             json.RawMessage `json:"data"`
	Error            *struct {
		Type    string         `json:"type"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

type batchWrapperBody struct {
	Success          bool          `json:"success"`
	Count            int           `json:"count"`
	Succeeded        int           `json:"succeeded"`
	Failed           int           `json:"failed"`
	CreditsUsed      float64       `json:"credits_used"`
	CreditsRemaining *float64      `json:"credits_remaining"`
	RequestID        *string       `json:"request_id"`
	Results          []batchResult `json:"results"`
}

func (b *billed) batch(body string, headers ...string) (response, batchWrapperBody) {
	b.t.Helper()
	req := httptest.NewRequest("POST", "http://api.test/v1/batch", strings.NewReader(body))
	req.Header.Set("x-api-key", b.key)
	req.Header.Set("content-type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	b.p.ServeHTTP(rec, req)
	r := response{code: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	var w batchWrapperBody
	_ = json.Unmarshal(rec.Body.Bytes(), &w)
	_ = json.Unmarshal(rec.Body.Bytes(), &r.body)
	return r, w
}

func items(specs ...string) string {
	return `{"requests":[` + strings.Join(specs, ",") + `]}`
}

func search(query string) string {
	return fmt.Sprintf(`{"platform":"marketplace_a","endpoint":"search","params":{"query":%q}}`, query)
}

func TestBatchOfMixedItems(t *testing.T) { testBatchOfMixedItems(t, newBilled) }

func testBatchOfMixedItems(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 1000, nil, withLimits)
	var specs []string
	want := map[int]int{}
	for i := 0; i < 20; i++ {
		switch i % 5 {
		case 0, 1:
			specs, want[i] = append(specs, search(fmt.Sprint("ok", i))), 200
		case 2:
			specs, want[i] = append(specs, `{"platform":"marketplace_a","endpoint":"search","params":{"page":2}}`), 422
		case 3:
			specs, want[i] = append(specs, search("fail")), 502
		case 4:
			specs, want[i] = append(specs, `{"platform":"marketplace_a","endpoint":"nope","params":{}}`), 404
		}
	}
	r, w := b.batch(items(specs...))
	if r.code != 200 || !w.Success || w.Count != 20 || w.Succeeded != 8 || w.Failed != 12 || w.RequestID != nil || len(w.Results) != 20 {
		t.Fatalf("%d %+v\n%.500s", r.code, w, r.raw)
	}
	ids := map[string]bool{}
	for i, res := range w.Results {
		if res.Index != i || res.Status != want[i] || res.RequestID == "" || ids[res.RequestID] {
			t.Errorf("item %d: %+v", i, res)
		}
		ids[res.RequestID] = true
		if res.Status == 200 && (res.CreditsUsed == nil || *res.CreditsUsed != 3 || res.Data == nil) {
			t.Errorf("item %d success fields: %+v", i, res)
		}
		if res.Status != 200 && (res.Error == nil || res.CreditsUsed == nil || *res.CreditsUsed != 0) {
			t.Errorf("item %d error fields: %+v", i, res)
		}
	}
	// Items run concurrently: the lowest balance observed lies between all
	// twelve paid items reserved at once and the final balance.
	if w.CreditsUsed != 24 || w.CreditsRemaining == nil || *w.CreditsRemaining < 964 || *w.CreditsRemaining > 976 {
		t.Errorf("sums: used %v lowest %v", w.CreditsUsed, w.CreditsRemaining)
	}
	if a, _ := b.store.Account(t.Context(), b.account.ID); a.CreditsRemaining != 976 {
		t.Errorf("balance %d: the failures were refunded", a.CreditsRemaining)
	}
	// Items are admitted one by one and the wrapper is not: the window holds
	// the 16 items that resolved (unknown paths are refused before
	// admission) and this call.
	if r := b.call("/v1/credits/balance"); r.header.Get("x-ratelimit-remaining") != "583" {
		t.Errorf("window after a batch of 20 and this call: %s", r.header.Get("x-ratelimit-remaining"))
	}
}

func TestBatchItemOutOfCreditsTouchesOnlyItself(t *testing.T) {
	testBatchItemOutOfCreditsTouchesOnlyItself(t, newBilled)
}

func testBatchItemOutOfCreditsTouchesOnlyItself(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 5, nil)
	_, w := b.batch(items(search("x"), search("y"), `{"platform":"app_store_b","endpoint":"categories","params":{}}`))
	statuses := map[int]int{}
	for _, res := range w.Results {
		statuses[res.Status]++
		if res.Status == 402 && (res.Error.Type != "INSUFFICIENT_CREDITS" || res.Error.Details["required"] != float64(3)) {
			t.Errorf("%+v", res)
		}
	}
	// app_store_b/categories has no test adapter: 501, free.
	if statuses[200] != 1 || statuses[402] != 1 || statuses[501] != 1 || w.CreditsUsed != 3 || w.CreditsRemaining == nil || *w.CreditsRemaining != 2 {
		t.Fatalf("%+v %+v", statuses, w)
	}
}

func TestBatchRefusals(t *testing.T) {
	b := newBilled(t, 100, nil)
	var many []string
	for i := 0; i < 21; i++ {
		many = append(many, search(fmt.Sprint(i)))
	}
	cases := []struct {
		name, body string
		status     int
		reason     string
	}{
		{"21 items", items(many...), 400, "too_many_requests"},
		{"not JSON", `{"requests":`, 400, "malformed_body"},
		{"no requests", `{}`, 400, "malformed_body"},
		{"empty", `{"requests":[]}`, 400, "malformed_body"},
		{"item not an object", `{"requests":[1]}`, 400, "malformed_body"},
		{"unknown item field", `{"requests":[{"platform":"a","endpoint":"b","parms":{}}]}`, 400, "malformed_body"},
		{"nested params", `{"requests":[{"platform":"marketplace_a","endpoint":"search","params":{"query":{"a":1}}}]}`, 400, "malformed_body"},
		{"trailing data", items(search("a")) + `]`, 400, "malformed_body"},
		{"too large", `{"requests":[` + search(strings.Repeat("q", MaxBatchBody)) + `]}`, 413, "body_too_large"},
	}
	for _, c := range cases {
		r, _ := b.batch(c.body)
		checkEnvelope(t, r)
		if r.code != c.status || r.details()["reason"] != c.reason {
			t.Errorf("%s: %d %.300s", c.name, r.code, r.raw)
		}
		if c.reason == "too_many_requests" && r.details()["max"] != float64(20) {
			t.Errorf("details.max: %v", r.details())
		}
	}
	if b.calls.Load() != 0 {
		t.Error("a refused batch runs nothing")
	}
	if a, _ := b.store.Account(t.Context(), b.account.ID); a.CreditsRemaining != 100 {
		t.Error("a refused batch charges nothing")
	}
}

func TestBatchDoesNotForwardIdempotencyOrCacheControl(t *testing.T) {
	b := newBilled(t, 100, nil)
	b.call("/v1/marketplace_a/search?query=cached")
	body := items(search("cached"), search("fail"))
	for i := 0; i < 2; i++ {
		_, w := b.batch(body, "idempotency-key", "same", "cache-control", "no-cache")
		if !w.Results[0].Cached || w.Results[0].Status != 200 {
			t.Errorf("Cache-Control is not forwarded: the item is a hit: %+v", w.Results[0])
		}
	}
	if b.calls.Load() != 3 { // the warm-up and the failing item twice
		t.Errorf("Idempotency-Key is not forwarded: %d upstream calls", b.calls.Load())
	}
}

func TestBatchesHoldNoSlotAndDocumentsAreRefused(t *testing.T) {
	b := newBilled(t, 1000, nil, withLimits)
	for i := 0; i < 30; i++ {
		if r, _ := b.batch(items(search("s"))); r.code != 200 {
			t.Fatalf("batch %d: %d %s", i, r.code, r.raw)
		}
	}
	if r := b.call("/v1/credits/balance"); r.code != 200 || r.header.Get("x-concurrency-remaining") != "24" {
		t.Errorf("batches leave every slot free: %d %v", r.code, r.header)
	}
	_, w := b.batch(items(`{"platform":"utility","endpoint":"llms","params":{}}`, `{"platform":"utility","endpoint":"llms","params":{"format":"json"}}`))
	if w.Results[0].Status != 400 || w.Results[0].Error.Details["reason"] != "not_batchable" || w.Results[1].Status != 200 || w.Succeeded != 1 {
		t.Errorf("a document item: %+v", w.Results)
	}
}

// slotRecorder counts the limit store's slot releases.
type slotRecorder struct {
	store.Limits
	mu       sync.Mutex
	releases [][]string
}

func (r *slotRecorder) ReleaseSlots(ctx context.Context, id string, requestIDs []string, now time.Time, rules store.LimitRules, stale ...string) error {
	r.mu.Lock()
	r.releases = append(r.releases, slices.Clone(requestIDs))
	r.mu.Unlock()
	return r.Limits.ReleaseSlots(ctx, id, requestIDs, now, rules, stale...)
}

// A batch's items hold their in-flight slots until the batch has answered,
// then free them all with one write, whatever each item's outcome.
func TestBatchFreesItsItemsSlotsInOneWrite(t *testing.T) {
	rec := &slotRecorder{Limits: &store.MemoryLimits{}}
	b := newBilled(t, 1000, nil, func(c *Config) { c.Limits = rec })
	specs := []string{search("s1"), search("fail"), `{"platform":"company_registry","endpoint":"search","params":{"limit":500}}`}
	for len(specs) < 20 {
		specs = append(specs, search(fmt.Sprint("s", len(specs))))
	}
	_, w := b.batch(items(specs...))
	if w.Count != 20 || w.Succeeded != 18 {
		t.Fatalf("%+v", w)
	}
	if len(rec.releases) != 1 || len(rec.releases[0]) != 20 {
		t.Fatalf("releases %v, want one of the 20 items", rec.releases)
	}
	var ids []string
	for _, res := range w.Results {
		ids = append(ids, res.RequestID)
	}
	slices.Sort(ids)
	slices.Sort(rec.releases[0])
	if !slices.Equal(ids, rec.releases[0]) {
		t.Errorf("released %v, want the items' %v", rec.releases[0], ids)
	}
	if r := b.call("/v1/credits/balance"); r.code != 200 || r.header.Get("x-concurrency-remaining") != "24" {
		t.Errorf("every slot is free after the batch: %d %v", r.code, r.header)
	}
}

// The mix in one batch of 20: successes, 422s, an item the wallet
// cannot pay and upstream failures; each outcome touches only its item.
func TestBatchOfTwentyWithEveryOutcome(t *testing.T) { testBatchOfTwentyWithEveryOutcome(t, newBilled) }

func testBatchOfTwentyWithEveryOutcome(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 14, nil) // never enough for a 15-credit call, always for the rest
	var specs []string
	want := map[int]int{}
	add := func(spec string, status int) { want[len(specs)] = status; specs = append(specs, spec) }
	add(search("s1"), 200)
	add(`{"platform":"web","endpoint":"social-profiles","params":{"platform":"microblog_b","handle":"x"}}`, 402)
	add(search("fail"), 502)
	add(search("s2"), 200)
	add(search("fail"), 502)
	for len(specs) < 20 {
		add(`{"platform":"company_registry","endpoint":"search","params":{"limit":500}}`, 422)
	}
	_, w := b.batch(items(specs...))
	if w.Count != 20 || w.Succeeded != 2 || w.Failed != 18 || w.CreditsUsed != 6 {
		t.Fatalf("%+v", w)
	}
	for i, res := range w.Results {
		if res.Index != i || res.Status != want[i] {
			t.Errorf("item %d: %d, want %d", i, res.Status, want[i])
		}
	}
	if w.Results[1].Error.Type != "INSUFFICIENT_CREDITS" {
		t.Errorf("%+v", w.Results[1].Error)
	}
	if a, _ := b.store.Account(t.Context(), b.account.ID); a.CreditsRemaining != 8 {
		t.Errorf("balance %d: two successes charged, failures refunded", a.CreditsRemaining)
	}
}
