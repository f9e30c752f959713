package storetest

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// The worker's aggregation (store.Outcomes.RecordUsage): platform minutes
// for /v1/status and each account's usage per UTC day and endpoint, every
// request counted once however often, and however concurrently, it is
// delivered.

func outcomes(t *testing.T, s store.Store) store.Outcomes {
	t.Helper()
	o, ok := s.(store.Outcomes)
	if !ok {
		t.Fatal("the store does not implement store.Outcomes")
	}
	return o
}

// recordOutcome counts one request's platform outcome, as a batch of one
// recorded at its own time.
func recordOutcome(o store.Outcomes, requestID string, out store.Outcome, at time.Time) (bool, error) {
	n, err := o.RecordUsage(ctx, []store.UsageRecord{{RequestID: requestID, At: at, Outcome: &out}}, at)
	return n == 1, err
}

// usageOf reads an account's days, failing the test on an error.
func usageOf(t *testing.T, o store.Outcomes, accountID string, from, to time.Time) []store.UsageDay {
	t.Helper()
	days, err := o.AccountUsage(ctx, accountID, from, to)
	if err != nil {
		t.Fatalf("AccountUsage: %v", err)
	}
	return days
}

func usageTotals(days []store.UsageDay) (calls, credits, errs int64) {
	for _, d := range days {
		calls, credits, errs = calls+d.Calls, credits+d.Credits, errs+d.Errors
	}
	return
}

func platformRequests(t *testing.T, o store.Outcomes, platform string, at time.Time) (requests, errs int64) {
	t.Helper()
	got, err := o.OutcomesSince(ctx, at.Add(-store.StatusWindow), at)
	if err != nil {
		t.Fatal(err)
	}
	ps := store.Summarize(platform, got[platform])
	return ps.Requests, ps.Errors
}

// A request id counts once: twice in one batch, again in a later batch
// (with other amounts), and a record with nothing to count is not marked,
// so the same id counts when it comes with something.
func testUsageCountedOnce(t *testing.T, s store.Store) {
	o := outcomes(t, s)
	now := time.Now().UTC()
	acct, platform := unique("acct_"), unique("platform_")
	id := unique("req_")
	rec := store.UsageRecord{RequestID: id, At: now, AccountID: acct, Endpoint: "/v1/" + platform + "/search", Credits: 3,
		Outcome: &store.Outcome{Platform: platform, Status: 200, Latency: 30 * time.Millisecond}}
	n, err := o.RecordUsage(ctx, []store.UsageRecord{rec, rec}, now)
	if err != nil || n != 1 {
		t.Fatalf("the same id twice in a batch: recorded %d, %v; want 1", n, err)
	}
	again := rec
	again.Credits, again.Failed = 5, true
	other := store.UsageRecord{RequestID: unique("req_"), At: now, AccountID: acct, Endpoint: rec.Endpoint, Credits: 1}
	if n, err := o.RecordUsage(ctx, []store.UsageRecord{again, other}, now.Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("the same id in a later batch beside a new one: recorded %d, %v; want 1", n, err)
	}
	days := usageOf(t, o, acct, now, now)
	if len(days) != 1 || days[0] != (store.UsageDay{Date: store.UsageDate(now), Endpoint: rec.Endpoint, Calls: 2, Credits: 4}) {
		t.Fatalf("account usage %+v; want 2 calls, 4 credits, no errors", days)
	}
	if r, e := platformRequests(t, o, platform, now); r != 1 || e != 0 {
		t.Errorf("status counted %d requests, %d errors; want 1, 0", r, e)
	}
	// Nothing to count: not marked, not counted.
	bare := unique("req_")
	if n, err := o.RecordUsage(ctx, []store.UsageRecord{{RequestID: bare, At: now}}, now); err != nil || n != 0 {
		t.Errorf("a record with nothing to count: recorded %d, %v", n, err)
	}
	if n, err := o.RecordUsage(ctx, []store.UsageRecord{{RequestID: bare, At: now, AccountID: acct, Endpoint: rec.Endpoint}}, now); err != nil || n != 1 {
		t.Errorf("the same id with account usage: recorded %d, %v; want 1", n, err)
	}
	if n, err := o.RecordUsage(ctx, nil, now); err != nil || n != 0 {
		t.Errorf("an empty batch: %d %v", n, err)
	}
}

// Account usage is kept per UTC day of each record's At and per endpoint;
// an account sees only its own; a platform outcome counts in the minute
// of its At; a record counts in one place without counting in the other.
func testUsageByDayAndEndpoint(t *testing.T, s store.Store) {
	o := outcomes(t, s)
	now := time.Now().UTC()
	acct, stranger, platform := unique("acct_"), unique("acct_"), unique("platform_")
	search, profile := "/v1/"+platform+"/search", "/v1/"+platform+"/profile"
	midnight := store.UsageDayStart(now)
	late, early := midnight.Add(-time.Second), midnight // the day before, and today
	older := midnight.Add(-5 * 24 * time.Hour)
	rec := func(at time.Time, account, endpoint string, credits int64, failed bool) store.UsageRecord {
		return store.UsageRecord{RequestID: unique("req_"), At: at, AccountID: account, Endpoint: endpoint, Credits: credits, Failed: failed}
	}
	ten := now.Add(-10 * time.Minute)
	batch := []store.UsageRecord{
		rec(late, acct, search, 3, false),
		rec(late, acct, search, 0, true),
		rec(late, acct, profile, 1, false),
		rec(early, acct, search, 3, false),
		rec(early, acct, profile, 0, true),
		rec(older, acct, search, 2, false),
		rec(early, stranger, search, 9, false),
		// Status only: no account (a keyless call never reaches here), and
		// account only (a free call that is not a platform's health).
		{RequestID: unique("req_"), At: ten, Outcome: &store.Outcome{Platform: platform, Status: 502, ErrorType: "UPSTREAM_ERROR"}},
		rec(ten, acct, "/v1/credits/balance", 0, false),
	}
	if n, err := o.RecordUsage(ctx, batch, now); err != nil || n != len(batch) {
		t.Fatalf("recorded %d, %v; want %d", n, err, len(batch))
	}
	d := func(at time.Time, endpoint string, calls, credits, errs int64) store.UsageDay {
		return store.UsageDay{Date: store.UsageDate(at), Endpoint: endpoint, Calls: calls, Credits: credits, Errors: errs}
	}
	want := []store.UsageDay{
		d(late, profile, 1, 1, 0), d(late, search, 2, 3, 1),
		d(early, profile, 1, 0, 1), d(early, search, 1, 3, 0),
		d(ten, "/v1/credits/balance", 1, 0, 0), // today, or yesterday just after midnight
	}
	sort.Slice(want, func(i, j int) bool {
		return want[i].Date < want[j].Date || (want[i].Date == want[j].Date && want[i].Endpoint < want[j].Endpoint)
	})
	got := usageOf(t, o, acct, late, early)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("two days, by date then endpoint:\n got %+v\nwant %+v", got, want)
	}
	// Bounds are whole days, both included, whatever the time of day.
	if got := usageOf(t, o, acct, early.Add(3*time.Hour), early.Add(5*time.Hour)); len(got) == 0 || got[0].Date != store.UsageDate(early) {
		t.Errorf("today only: %+v", got)
	}
	if got := usageOf(t, o, acct, older, older.Add(23*time.Hour)); len(got) != 1 || got[0] != d(older, search, 1, 2, 0) {
		t.Errorf("five days ago: %+v", got)
	}
	if got := usageOf(t, o, acct, older.Add(24*time.Hour), late.Add(-24*time.Hour)); len(got) != 0 {
		t.Errorf("the days between have no usage: %+v", got)
	}
	if got := usageOf(t, o, acct, early, late); len(got) != 0 {
		t.Errorf("from after to: %+v", got)
	}
	if got := usageOf(t, o, stranger, older, now); len(got) != 1 || got[0] != d(early, search, 1, 9, 0) {
		t.Errorf("another account sees only its own: %+v", got)
	}
	if got := usageOf(t, o, unique("acct_"), older, now); len(got) != 0 {
		t.Errorf("an account without usage: %+v", got)
	}
	// The outcome counts in the minute of its At: in the window ending
	// 10 minutes ago, not in one that ended before.
	if r, e := platformRequests(t, o, platform, ten); r != 1 || e != 1 {
		t.Errorf("status at the record's minute: %d requests, %d errors; want 1, 1", r, e)
	}
	if r, _ := platformRequests(t, o, platform, ten.Add(-time.Minute)); r != 0 {
		t.Errorf("status a minute before the record: %d requests", r)
	}
}

// A batch with a record the store cannot key is refused whole.
func testUsageRefusesARecordWithoutID(t *testing.T, s store.Store) {
	o := outcomes(t, s)
	now := time.Now().UTC()
	acct := unique("acct_")
	good := store.UsageRecord{RequestID: unique("req_"), At: now, AccountID: acct, Endpoint: "/v1/x/y", Credits: 1}
	for _, bad := range []store.UsageRecord{
		{At: now, AccountID: acct, Endpoint: "/v1/x/y"},
		{RequestID: unique("req_"), At: now, Outcome: &store.Outcome{Status: 200}},
		{RequestID: unique("req_"), At: now, AccountID: acct, Endpoint: "/v1/x/y", Credits: -1},
	} {
		if n, err := o.RecordUsage(ctx, []store.UsageRecord{good, bad}, now); !errors.Is(err, store.ErrInvalid) || n != 0 {
			t.Errorf("%+v: recorded %d, %v; want ErrInvalid", bad, n, err)
		}
	}
	if got := usageOf(t, o, acct, now, now); len(got) != 0 {
		t.Errorf("a refused batch counts nothing: %+v", got)
	}
	if n, err := o.RecordUsage(ctx, []store.UsageRecord{good}, now); err != nil || n != 1 {
		t.Errorf("the good record alone: %d %v", n, err)
	}
}

// 200 requests arrive in 20 batches of 10 sent at once, and 10 of those
// batches are delivered again at the same time (SQS delivers at least
// once; a redelivery can overlap the first delivery): every request counts
// exactly once, in the account's days and in the platform's minutes.
func testConcurrentUsageBatches(t *testing.T, s store.Store) {
	o := outcomes(t, s)
	now := time.Now().UTC()
	acct, platform := unique("acct_"), unique("platform_")
	endpoints := []string{"/v1/" + platform + "/search", "/v1/" + platform + "/profile"}
	batches := make([][]store.UsageRecord, 20)
	var wantCredits, wantErrors int64
	for i := 0; i < 200; i++ {
		failed := i%7 == 0
		credits := int64(i%3 + 1)
		if failed {
			credits = 0
			wantErrors++
		}
		wantCredits += credits
		status, errType := 200, ""
		if failed {
			status, errType = 502, "UPSTREAM_ERROR"
		}
		batches[i/10] = append(batches[i/10], store.UsageRecord{
			RequestID: unique("req_"), At: now, AccountID: acct, Endpoint: endpoints[i%2], Credits: credits, Failed: failed,
			Outcome: &store.Outcome{Platform: platform, Status: status, ErrorType: errType, Latency: time.Duration(i) * time.Millisecond},
		})
	}
	var recorded atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func(b []store.UsageRecord) {
			defer wg.Done()
			n, err := o.RecordUsage(ctx, b, now)
			if err != nil {
				t.Error(err)
			}
			recorded.Add(int64(n))
		}(batches[i%20])
	}
	wg.Wait()
	if recorded.Load() != 200 {
		t.Errorf("recorded %d in all; want 200", recorded.Load())
	}
	days := usageOf(t, o, acct, now, now)
	if calls, credits, errs := usageTotals(days); len(days) != 2 || calls != 200 || credits != wantCredits || errs != wantErrors {
		t.Errorf("account usage %+v: %d calls, %d credits, %d errors; want 200, %d, %d", days, calls, credits, errs, wantCredits, wantErrors)
	}
	if r, e := platformRequests(t, o, platform, now); r != 200 || e != wantErrors {
		t.Errorf("status: %d requests, %d errors; want 200, %d", r, e, wantErrors)
	}
	// Everything again, in one batch: nothing more.
	var all []store.UsageRecord
	for _, b := range batches {
		all = append(all, b...)
	}
	if n, err := o.RecordUsage(ctx, all, now.Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("all 200 again: recorded %d, %v", n, err)
	}
	if calls, _, _ := usageTotals(usageOf(t, o, acct, now, now)); calls != 200 {
		t.Errorf("%d calls after the redelivery; want 200", calls)
	}
}
