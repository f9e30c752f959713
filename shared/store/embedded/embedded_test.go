package embedded

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// accountWithKey opens an account of 100 credits with one key, hashed "keyhash".
func accountWithKey(t *testing.T, s *Store) (store.Account, store.Key) {
	t.Helper()
	ctx := context.Background()
	a, err := s.CreateAccount(ctx, 100, "consolehash", "req_open")
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: "keyhash", Prefix: "mn_abcd", Last4: "wxyz"})
	if err != nil {
		t.Fatal(err)
	}
	return a, k
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
	a, k := accountWithKey(t, s)
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

// Cache entries are written in the binary form; entries a store wrote as
// JSON before it are still served until they expire, and swept after.
func TestCacheEntriesOfEitherForm(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	if err := s.CachePut(ctx, "fresh", []byte(`{"a":1}`), now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	legacy := []byte(`{"Data":"eyJiIjoyfQ==","StoredAt":"2026-11-24T11:00:00Z","ExpiresAt":"2026-11-24T13:00:00Z"}`)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bCache).Put([]byte("legacy"), legacy); err != nil {
			return err
		}
		return tx.Bucket(bCache).Put([]byte("garbled"), []byte{9, 9})
	}); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	_ = s.db.View(func(tx *bolt.Tx) error { raw = append(raw, tx.Bucket(bCache).Get([]byte("fresh"))...); return nil })
	if len(raw) != 17+len(`{"a":1}`) || raw[0] != cacheEntryV1 {
		t.Fatalf("fresh entry stored as %q", raw)
	}
	for key, want := range map[string]string{"fresh": `{"a":1}`, "legacy": `{"b":2}`} {
		e, err := s.CacheGet(ctx, key, now)
		if err != nil || string(e.Data) != want {
			t.Errorf("%s: %q %v, want %s", key, e.Data, err, want)
		}
	}
	if e, err := s.CacheGet(ctx, "fresh", now); err != nil || !e.StoredAt.Equal(now) || !e.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("times: %v %v %v", e.StoredAt, e.ExpiresAt, err)
	}
	if _, err := s.CacheGet(ctx, "garbled", now); err == nil {
		t.Error("a garbled entry was served")
	}
	// The 256th put sweeps what expired or cannot be read.
	later := now.Add(90 * time.Minute)
	for i := 0; i < 256; i++ {
		if err := s.CachePut(ctx, "filler", []byte("x"), later, later.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.db.View(func(tx *bolt.Tx) error {
		for _, gone := range []string{"legacy", "garbled"} {
			if tx.Bucket(bCache).Get([]byte(gone)) != nil {
				t.Errorf("%s was not swept", gone)
			}
		}
		if tx.Bucket(bCache).Get([]byte("fresh")) != nil {
			t.Error("fresh expired at 13:00 and was not swept at 13:30")
		}
		return nil
	})
}

// The key memo never serves a stale key: a revocation or a new limit is
// seen by the very next lookup, and a caller changing what it got back
// changes nothing for the next one.
func TestKeyLookupsSeeEveryWrite(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	a, k := accountWithKey(t, s)
	ten := int64(10)
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: &ten}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second lookup is served by the memo
		got, err := s.KeyByHash(ctx, "keyhash")
		if err != nil || got.CreditLimit == nil || *got.CreditLimit != 10 {
			t.Fatalf("lookup %d: %+v %v", i, got, err)
		}
		*got.CreditLimit = 99
	}
	if _, err := s.Reserve(ctx, store.Charge{AccountID: a.ID, KeyID: k.ID, RequestID: "req_1", Endpoint: "e", Cost: 3}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.KeyByHash(ctx, "keyhash"); got.CreditsUsed != 3 {
		t.Errorf("credits_used after a charge: %d", got.CreditsUsed)
	}
	if _, err := s.Refund(ctx, a.ID, "req_1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.KeyByHash(ctx, "keyhash"); got.CreditsUsed != 0 {
		t.Errorf("credits_used after the refund: %d", got.CreditsUsed)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.KeyByHash(ctx, "keyhash"); got.Status != store.KeyRevoked {
		t.Errorf("status after revocation: %s", got.Status)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.Status != store.KeyRevoked {
		t.Errorf("Key after revocation: %s", got.Status)
	}
}

// Lookups that race a write never leave a stale key to be served after
// the write returned: while readers keep looking the key up (and keeping
// what they read), each limit the writer sets is what its own next
// lookup sees.
func TestKeyLookupsRacingWrites(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	a, k := accountWithKey(t, s)
	stopReaders := raceReaders(t, func() error {
		_, err := s.KeyByHash(ctx, "keyhash")
		return err
	})
	for limit := int64(1); limit <= 300; limit++ {
		if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: &limit}); err != nil {
			t.Fatal(err)
		}
		got, err := s.KeyByHash(ctx, "keyhash")
		if err != nil || got.CreditLimit == nil || *got.CreditLimit != limit {
			stopReaders()
			seen := "none"
			if got.CreditLimit != nil {
				seen = fmt.Sprint(*got.CreditLimit)
			}
			t.Fatalf("after setting the limit to %d, the lookup saw %s (%v)", limit, seen, err)
		}
	}
	stopReaders()
}

// Cache reads come from memory until a cache entry is written: a read
// that raced a put is never served after the put returned, an entry is
// not served past its expiry, and no caller shares another's data.
func TestCacheLookupsRacingWrites(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	now := time.Now().UTC()
	if err := s.CachePut(ctx, "k", []byte("0"), now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	stopReaders := raceReaders(t, func() error {
		e, err := s.CacheGet(ctx, "k", now)
		if err == nil {
			e.Data[0] = 'x' // a caller's own copy
		}
		return err
	})
	for i := 1; i <= 60; i++ {
		want := fmt.Sprint(i)
		if err := s.CachePut(ctx, "k", []byte(want), now, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if e, err := s.CacheGet(ctx, "k", now); err != nil || string(e.Data) != want {
			stopReaders()
			t.Fatalf("after putting %q, the lookup saw %q (%v)", want, e.Data, err)
		}
	}
	stopReaders()
	if _, err := s.CacheGet(ctx, "k", now.Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a remembered entry was served at its expiry: %v", err)
	}
}

// raceReaders runs read in four goroutines, over and over, until the
// returned function stops them (and waits for them); a failed read is a
// test error and ends its goroutine.
func raceReaders(t *testing.T, read func() error) (stop func()) {
	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-done:
					return
				default:
					if err := read(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	return func() {
		close(done)
		readers.Wait()
	}
}
