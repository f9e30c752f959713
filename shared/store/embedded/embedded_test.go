package embedded

import (
	"context"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/storetest"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := open(t, t.TempDir())
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestRestartKeepsEverything(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	a, err := s.CreateAccount(ctx, 100, "consolehash", "req_open")
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: "keyhash", Prefix: "mn_abcd", Last4: "wxyz"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, store.Charge{RequestID: "req_1", AccountID: a.ID, KeyID: k.ID, Cost: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if got, err := s.AccountByConsoleToken(ctx, "consolehash"); err != nil || got.CreditsRemaining != 97 {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	if got, err := s.KeyByHash(ctx, "keyhash"); err != nil || got.CreditsUsed != 3 {
		t.Fatalf("key after restart: %+v %v", got, err)
	}
	if page, err := s.Ledger(ctx, a.ID, store.LedgerQuery{}); err != nil || len(page.Entries) != 2 {
		t.Fatalf("ledger after restart: %+v %v", page, err)
	}
	if _, err := s.Refund(ctx, a.ID, "req_1"); err != nil {
		t.Fatalf("a reservation from before the restart refunds: %v", err)
	}
}

// A file written before leases existed: its reserved reservations get a
// lease from their creation when it is opened, so reconciliation finds them.
func TestLeasesBackfilled(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	a, err := s.CreateAccount(ctx, 100, "consolehash", "req_open")
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: "keyhash"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"req_1", "req_2"} {
		if _, err := s.Reserve(ctx, store.Charge{RequestID: id, AccountID: a.ID, KeyID: k.ID, Cost: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Settle(ctx, a.ID, "req_2"); err != nil {
		t.Fatal(err)
	}
	// Make it the old layout: no leases bucket, no LeaseUntil.
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bLeases); err != nil {
			return err
		}
		b := tx.Bucket(bReservations)
		for _, id := range []string{"req_1", "req_2"} {
			r, err := get[reservation](b, join(a.ID, id))
			if err != nil {
				return err
			}
			r.LeaseUntil = time.Time{}
			if err := put(b, join(a.ID, id), r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	defer s.Close()
	refs, err := s.ExpiredReservations(ctx, time.Now().Add(store.ReservationLease+time.Minute), 10)
	if err != nil || len(refs) != 1 || refs[0].RequestID != "req_1" || refs[0].AccountID != a.ID || refs[0].LeaseUntil.After(time.Now().Add(store.ReservationLease)) {
		t.Fatalf("after the backfill: %+v %v", refs, err)
	}
	if _, err := s.Refund(ctx, a.ID, "req_1"); err != nil {
		t.Fatal(err)
	}
	if refs, err := s.ExpiredReservations(ctx, time.Now().Add(store.ReservationLease+time.Minute), 10); err != nil || len(refs) != 0 {
		t.Errorf("refunded: %+v %v", refs, err)
	}
}
