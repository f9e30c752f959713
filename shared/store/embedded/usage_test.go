package embedded

import (
	"context"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meridian-data/meridian/shared/store"
)

// Account-usage days past the retention are dropped as later batches
// write (the DynamoDB store lets TTL do it), from every account, and a
// restart keeps the rest.
func TestAccountUsageRetention(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	old, kept := now.Add(-store.AccountUsageRetention-48*time.Hour), now.Add(-store.AccountUsageRetention+24*time.Hour)
	rec := func(id, acct string, at time.Time) store.UsageRecord {
		return store.UsageRecord{RequestID: id, At: at, AccountID: acct, Endpoint: "/v1/x/search", Credits: 1}
	}
	if _, err := s.RecordUsage(ctx, []store.UsageRecord{rec("req_1", "acct_a", old), rec("req_2", "acct_b", old), rec("req_3", "acct_a", kept)}, old); err != nil {
		t.Fatal(err)
	}
	if days, _ := s.AccountUsage(ctx, "acct_b", old, now); len(days) != 1 {
		t.Fatalf("before: %+v", days)
	}
	if _, err := s.RecordUsage(ctx, []store.UsageRecord{rec("req_4", "acct_a", now)}, now); err != nil {
		t.Fatal(err)
	}
	if days, _ := s.AccountUsage(ctx, "acct_b", old, now); len(days) != 0 {
		t.Errorf("another account's old day is dropped too: %+v", days)
	}
	days, err := s.AccountUsage(ctx, "acct_a", old, now)
	if err != nil || len(days) != 2 || days[0].Date != store.UsageDate(kept) || days[1].Date != store.UsageDate(now) {
		t.Errorf("acct_a keeps the days inside the retention: %+v %v", days, err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bAccountUsageDays).Stats().KeyN; n != 2 {
			t.Errorf("the day index holds %d rows; want 2", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	defer s.Close()
	if days, _ := s.AccountUsage(ctx, "acct_a", old, now); len(days) != 2 {
		t.Errorf("after a restart: %+v", days)
	}
	// A store that never recorded account usage reads none.
	empty := open(t, t.TempDir())
	defer empty.Close()
	if days, err := empty.AccountUsage(ctx, "acct_a", old, now); err != nil || len(days) != 0 {
		t.Errorf("fresh store: %+v %v", days, err)
	}
}
