package service

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// accountUsage itself (the console calls it too): the day window, ties
// between endpoints by name, and the days it accepts.
func TestAccountUsageReport(t *testing.T) {
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var o store.Outcomes = s
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 30, 0, 0, time.UTC) // after February's last day
	rec := func(id string, at time.Time, endpoint string, credits int64, failed bool) store.UsageRecord {
		return store.UsageRecord{RequestID: id, At: at, AccountID: "acct_r", Endpoint: endpoint, Credits: credits, Failed: failed}
	}
	if _, err := o.RecordUsage(ctx, []store.UsageRecord{
		rec("req_1", now, "/v1/b/x", 1, false),
		rec("req_2", now.Add(-time.Hour), "/v1/a/x", 2, true), // yesterday, 28 February
		rec("req_3", now.Add(-7*24*time.Hour), "/v1/c/x", 5, false),
	}, now); err != nil {
		t.Fatal(err)
	}
	u, err := accountUsage(ctx, o, "acct_r", 2, now)
	if err != nil || u.From != "2026-02-28" || u.To != "2026-03-01" || len(u.Days) != 2 {
		t.Fatalf("%+v %v", u, err)
	}
	if len(u.Endpoints) != 2 || u.Endpoints[0].Endpoint != "/v1/a/x" || u.Endpoints[0].ErrorRate != 1 || u.Endpoints[1].Endpoint != "/v1/b/x" {
		t.Errorf("equal calls sort by endpoint: %+v", u.Endpoints)
	}
	if u.Totals != (UsageTotals{UsageCounts{2, 3, 1}, 0.5}) {
		t.Errorf("totals %+v", u.Totals)
	}
	if u, err := accountUsage(ctx, o, "acct_r", 62, now); err != nil || len(u.Days) != 62 || u.Totals.Calls != 3 {
		t.Errorf("the longest report: %d days, %+v, %v", len(u.Days), u.Totals, err)
	}
	for _, days := range []int{0, 63} {
		if _, err := accountUsage(ctx, o, "acct_r", days, now); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%d days: %v", days, err)
		}
	}
	empty, err := accountUsage(ctx, o, "acct_none", 1, now)
	if raw, _ := json.Marshal(empty); err != nil || string(raw) != `{"from":"2026-03-01","to":"2026-03-01","days_count":1,`+
		`"totals":{"calls":0,"credits":0,"errors":0,"error_rate":0},"days":[{"date":"2026-03-01","calls":0,"credits":0,"errors":0}],"endpoints":[],"items":[]}` {
		t.Errorf("the empty report's JSON: %s %v", raw, err)
	}
}
