package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
)

// effectPairs is how many back-to-back pairs of each kind run per store.
const effectPairs = 200

// What an answer implies is there for the very next request (issue 40.1):
// the local server, as make run builds it, answers a paid call only once
// its settle, its cache entry, its idempotent outcome and its slot's
// release have landed. 200 pairs of each kind, each second request sent
// the moment the first's body is read, on both stores; no miss tolerated.
func TestAnswerEffectsAreSeenByTheNextRequest(t *testing.T) {
	base, _ := replayAndStore(t, quietLogger()) // MERIDIAN_UPSTREAM=replay
	for name, open := range map[string]func(t *testing.T) store.Store{
		"embedded": func(t *testing.T) store.Store { return newEmbedded(t) },
		"dynamodb": func(t *testing.T) store.Store { return dynamotest.NewStore(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testAnswerEffects(t, open(t), base)
		})
	}
}

func testAnswerEffects(t *testing.T, s store.Store, base string) {
	logger := quietLogger()
	deps := app.Deps{Store: s, Upstream: app.NewUpstream(logger, func(string) (string, bool) { return "", false }, base)}
	deps.Events = localEvents(t, s, logger)
	api := httptest.NewServer(app.LocalHandler(logger, deps))
	t.Cleanup(api.Close)

	const credits = 10 * effectPairs
	acct, first := newAccount(t, s, credits, nil)
	// Five keys share the calls, so no key's rate limit is reached.
	keys := []string{first}
	for len(keys) < store.MaxActiveKeys {
		keys = append(keys, newKey(t, s, acct.ID))
	}
	type answer struct {
		status    int
		cache     string
		replay    string
		requestID string
		used      int64
		body      []byte
	}
	get := func(key, path string, header ...string) answer {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, api.URL+path, nil)
		req.Header.Set("x-api-key", key)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := api.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			CreditsUsed *int64 `json:"credits_used"`
			RequestID   string `json:"request_id"`
		}
		if err := json.Unmarshal(body, &env); err != nil || env.CreditsUsed == nil {
			t.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, body)
		}
		return answer{resp.StatusCode, resp.Header.Get("x-cache"), resp.Header.Get("x-idempotent-replay"),
			env.RequestID, *env.CreditsUsed, body}
	}
	ctx := context.Background()
	charged := int64(0)
	for i := 0; i < effectPairs; i++ {
		key := keys[i%len(keys)]
		// The same paid GET twice: the second is a HIT at 0 credits.
		path := "/v1/company_registry/search?query=" + url.QueryEscape(fmt.Sprintf("Pair %d Limited", i))
		a := get(key, path)
		b := get(keys[(i+1)%len(keys)], path)
		if a.status != 200 || a.cache != "MISS" || a.used != 1 {
			t.Fatalf("pair %d, first: %d %s %d credits", i, a.status, a.cache, a.used)
		}
		charged += a.used
		if b.status != 200 || b.cache != "HIT" || b.used != 0 {
			t.Fatalf("pair %d, second: %d x-cache %q, %d credits (the first's cache entry was not there)", i, b.status, b.cache, b.used)
		}
		// Its settle landed: the charge can no longer be refunded.
		if _, err := s.Refund(ctx, acct.ID, a.requestID); !errors.Is(err, store.ErrSettled) {
			t.Fatalf("pair %d: refund of the answered call %s: %v, want ErrSettled", i, a.requestID, err)
		}

		// The same Idempotency-Key twice: the retry replays the answer.
		path = "/v1/company_registry/search?query=" + url.QueryEscape(fmt.Sprintf("Retry %d Limited", i))
		idem := fmt.Sprintf("effects-%d", i)
		a = get(key, path, "Idempotency-Key", idem)
		b = get(key, path, "Idempotency-Key", idem)
		if a.status != 200 || a.used != 1 {
			t.Fatalf("idempotent pair %d, first: %d %d credits", i, a.status, a.used)
		}
		charged += a.used
		if b.status != 200 || b.replay != "true" || b.requestID != a.requestID || string(b.body) != string(a.body) {
			t.Fatalf("idempotent pair %d, retry: %d replay %q request %s (want %s): %.200s", i, b.status, b.replay, b.requestID, a.requestID, b.body)
		}
	}
	// The charges, exactly: the balance and the ledger as a client reads them.
	var balance struct {
		Data struct {
			CreditsRemaining int64 `json:"credits_remaining"`
		} `json:"data"`
	}
	if err := json.Unmarshal(get(first, "/v1/credits/balance").body, &balance); err != nil || balance.Data.CreditsRemaining != credits-charged {
		t.Errorf("balance %d, want %d", balance.Data.CreditsRemaining, credits-charged)
	}
	var ledger struct {
		Data struct {
			Items []struct {
				Type         string `json:"type"`
				BalanceAfter int64  `json:"balance_after"`
			} `json:"items"`
		} `json:"data"`
	}
	if err := json.Unmarshal(get(first, "/v1/credits/transactions?limit=1").body, &ledger); err != nil ||
		len(ledger.Data.Items) != 1 || ledger.Data.Items[0].BalanceAfter != credits-charged {
		t.Errorf("the ledger's newest entry: %+v %v", ledger.Data.Items, err)
	}
}
