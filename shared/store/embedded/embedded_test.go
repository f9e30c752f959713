package embedded

import (
	"context"
	"testing"

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
