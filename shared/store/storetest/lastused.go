package storetest

import (
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// A key's listing says when it last authenticated: never before its first
// request, then the time of its latest Enter (a refused key's attempt does
// not count), for each key on its own.
func testKeyLastUsed(t *testing.T, s store.Store) {
	g := s.(store.Gate)
	a := newAccount(t, s, 10)
	used, idle := newKey(t, s, a.ID, nil), newKey(t, s, a.ID, nil)
	lastUsed := func() map[string]*time.Time {
		keys, err := s.Keys(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*time.Time{}
		for _, k := range keys {
			out[k.ID] = k.LastUsedAt
		}
		return out
	}
	if got := lastUsed(); got[used.ID] != nil || got[idle.ID] != nil {
		t.Fatalf("before any request: %v", got)
	}
	first := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{first, first.Add(90 * time.Second)} {
		if _, _, err := g.Enter(ctx, used.Hash, unique("req_"), at, store.DefaultLimits, false); err != nil {
			t.Fatal(err)
		}
		got := lastUsed()
		if got[used.ID] == nil || !got[used.ID].Equal(at) || got[idle.ID] != nil {
			t.Fatalf("after request %d at %s: used %v, idle %v", i, at, got[used.ID], got[idle.ID])
		}
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, idle.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Enter(ctx, idle.Hash, unique("req_"), first, store.DefaultLimits, false); err == nil {
		t.Fatal("a revoked key entered")
	}
	if got := lastUsed(); got[idle.ID] != nil {
		t.Errorf("a refused key's attempt counted as a use: %v", got[idle.ID])
	}
}
