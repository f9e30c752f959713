package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// testFills: one owner holds a key's marker while its lease runs; the
// owner renews it; another claims it once it lapsed or was released; a
// release by another owner changes nothing; of many claiming at once,
// exactly one wins.
func testFills(t *testing.T, s store.Store) {
	f, ok := s.(store.Fills)
	if !ok {
		t.Fatal("the store keeps no fill markers")
	}
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	key := unique("fill-key-")
	claim := func(owner string, at time.Time) bool {
		t.Helper()
		ok, err := f.ClaimFill(ctx, key, owner, at, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim("a", now) || claim("b", now.Add(time.Second)) || !claim("a", now.Add(4*time.Second)) {
		t.Fatal("a holds and renews the marker; b is refused")
	}
	if claim("b", now.Add(8*time.Second)) {
		t.Fatal("b claimed a marker a renewed until 9 s")
	}
	if !claim("b", now.Add(9*time.Second)) {
		t.Fatal("b could not take over the lapsed marker")
	}
	if err := f.ReleaseFill(ctx, key, "a"); err != nil || claim("a", now.Add(10*time.Second)) {
		t.Fatalf("a released b's marker: %v", err)
	}
	if err := f.ReleaseFill(ctx, key, "b"); err != nil || !claim("c", now.Add(10*time.Second)) {
		t.Fatalf("after b's release, c could not claim: %v", err)
	}
	// Other keys are their own.
	if ok, err := f.ClaimFill(ctx, unique("fill-other-"), "z", now.Add(10*time.Second), time.Second); err != nil || !ok {
		t.Fatalf("another key: %v %v", ok, err)
	}

	// Twenty claim one fresh key at once: one wins.
	fresh := unique("fill-race-")
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := f.ClaimFill(ctx, fresh, unique("owner-"), now, 5*time.Second)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d owners claimed the same marker", won.Load())
	}
}
