package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/store"
)

func withOutcomes(c *Config) { c.Outcomes = c.Store.(store.Outcomes) }

// A paid call, a failure and a free call, applied by the worker from their
// usage events, are what GET /v1/credits/usage reports: per day
// (zero-filled), per endpoint and in total; another account sees none of
// it, and a call the next day is that day's.
func TestCreditsUsageReportsTheWorkersCounts(t *testing.T) {
	testCreditsUsageReportsTheWorkersCounts(t, newBilled)
}

func testCreditsUsageReportsTheWorkersCounts(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil, withOutcomes)
	paid := b.call("/v1/marketplace_a/search?query=lamp")
	if paid.code != 200 || paid.body["credits_used"] != float64(3) {
		t.Fatalf("paid call: %d %s", paid.code, paid.raw)
	}
	if r := b.call("/v1/marketplace_a/search?query=fail"); r.code != 502 {
		t.Fatalf("failure: %d %s", r.code, r.raw)
	}
	b.call("/v1/credits/balance")
	b.call("/sandbox/marketplace_a/search?query=lamp") // the sandbox is not the account's usage
	b.do("GET", "/v1/marketplace_a/search?query=lamp") // no key: no account
	r := b.call("/v1/credits/usage")
	if r.code != 200 || r.body["credits_used"] != float64(0) || r.body["endpoint"] != "/v1/credits/usage" {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	var got usageData
	raw, _ := json.Marshal(r.body["data"])
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	today := "2026-11-22" // the harness's clock
	search, balance := "/v1/marketplace_a/search", "/v1/credits/balance"
	if got.From != "2026-10-24" || got.To != today || got.DaysCount != 30 || len(got.Days) != 30 ||
		got.Days[0].Date != "2026-10-24" || got.Days[29].Date != today {
		t.Fatalf("window %s..%s, %d days %d rows", got.From, got.To, got.DaysCount, len(got.Days))
	}
	for _, d := range got.Days[:29] {
		if d.usageCounts != (usageCounts{}) {
			t.Errorf("a day without calls is zero: %+v", d)
		}
	}
	if got.Days[29].usageCounts != (usageCounts{Calls: 3, Credits: 3, Errors: 1}) {
		t.Errorf("today %+v", got.Days[29])
	}
	if got.Totals != (usageTotals{usageCounts{3, 3, 1}, 1.0 / 3}) {
		t.Errorf("totals %+v", got.Totals)
	}
	if len(got.Endpoints) != 2 || got.Endpoints[0] != (usageEndpointRow{search, usageCounts{2, 3, 1}, 0.5}) ||
		got.Endpoints[1] != (usageEndpointRow{balance, usageCounts{1, 0, 0}, 0}) {
		t.Errorf("endpoints, most calls first: %+v", got.Endpoints)
	}
	if len(got.Items) != 2 || got.Items[0] != (usageItem{today, balance, usageCounts{1, 0, 0}}) ||
		got.Items[1] != (usageItem{today, search, usageCounts{2, 3, 1}}) {
		t.Errorf("items: %+v", got.Items)
	}
	// The endpoint field is the ledger's.
	if e := b.entries(t, paid.header.Get("x-request-id")); len(e) != 1 || e[0].Endpoint != search {
		t.Errorf("the ledger names %+v", e)
	}

	// The next day: the usage call itself counted yesterday; days=2.
	b.clock.Advance(24 * time.Hour)
	b.call("/v1/marketplace_a/search?query=lamp") // the cache entry is a day old: charged again
	r = b.call("/v1/credits/usage?days=2")
	raw, _ = json.Marshal(r.body["data"])
	got = usageData{}
	_ = json.Unmarshal(raw, &got)
	if r.code != 200 || got.From != today || got.To != "2026-11-23" || got.DaysCount != 2 || len(got.Days) != 2 ||
		got.Days[0].Calls != 4 || got.Days[1] != (usageDayRow{"2026-11-23", usageCounts{1, 3, 0}}) || got.Totals.Calls != 5 {
		t.Errorf("two days: %d %+v", r.code, got)
	}

	// Another account's key sees only its own (nothing yet).
	other, _, err := auth.CreateAccount(context.Background(), b.store, 10, "req_other")
	if err != nil {
		t.Fatal(err)
	}
	full, k := auth.NewKey(other.ID, "other", nil)
	if _, err := b.store.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	r = b.do("GET", "/v1/credits/usage?days=1", "x-api-key", full)
	if d := r.body["data"].(map[string]any); r.code != 200 || d["totals"].(map[string]any)["calls"] != float64(0) ||
		len(d["items"].([]any)) != 0 || len(d["endpoints"].([]any)) != 0 || len(d["days"].([]any)) != 1 {
		t.Errorf("another account: %d %s", r.code, r.raw)
	}

	for _, q := range []string{"days=0", "days=31", "days=x"} {
		if r := b.call("/v1/credits/usage?" + q); r.code != 422 || r.details()["field"] != "days" {
			t.Errorf("%s: %d %s", q, r.code, r.raw)
		}
	}
	if r := b.do("GET", "/v1/credits/usage"); r.code != 401 {
		t.Errorf("no key: %d", r.code)
	}
}

// Without an Outcomes store the endpoint is not available, as /v1/status.
func TestCreditsUsageNeedsOutcomes(t *testing.T) {
	b := newBilled(t, 100, nil)
	for _, target := range []string{"/v1/credits/usage", "/v1/status"} {
		if r := b.call(target); r.code != 501 || r.errorType() != "ENDPOINT_NOT_AVAILABLE" {
			t.Errorf("%s: %d %s", target, r.code, r.raw)
		}
	}
}

// failingOutcomes cannot read account usage.
type failingOutcomes struct{ store.Outcomes }

func (failingOutcomes) AccountUsage(context.Context, string, time.Time, time.Time) ([]store.UsageDay, error) {
	return nil, errors.New("dynamodb: throughput exceeded")
}

func TestCreditsUsageReadFailureIsInternal(t *testing.T) {
	b := newBilled(t, 100, nil, func(c *Config) { c.Outcomes = failingOutcomes{c.Store.(store.Outcomes)} })
	if r := b.call("/v1/credits/usage"); r.code != 500 || r.errorType() != "INTERNAL_ERROR" {
		t.Errorf("%d %s", r.code, r.raw)
	}
}
