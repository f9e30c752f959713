package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// A reservation a web job extended is not refunded by the sweep before its
// new lease ends (RefundExpired: ErrLeaseHeld) and is not listed before
// then; one the sweep refunded first cannot be extended (ErrRefunded), nor
// a settled one (ErrSettled) or a missing one (ErrNotFound). A shorter
// extension keeps the longer lease.
func testExtendReservation(t *testing.T, s store.Store) {
	a := newAccount(t, s, 100)
	k := newKey(t, s, a.ID, nil)
	start := time.Now()
	held, plain, swept, settled := charge(a, k, 1), charge(a, k, 2), charge(a, k, 4), charge(a, k, 8)
	for _, c := range []store.Charge{held, plain, swept, settled} {
		if _, err := s.Reserve(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	pastLease := time.Now().Add(store.ReservationLease + time.Minute)
	until := start.Add(2 * time.Hour)
	if err := s.ExtendReservation(ctx, a.ID, held.RequestID, until); err != nil {
		t.Fatal(err)
	}
	if err := s.ExtendReservation(ctx, a.ID, held.RequestID, start.Add(time.Hour)); err != nil {
		t.Errorf("a shorter extension: %v", err)
	}
	if _, err := s.RefundExpired(ctx, a.ID, swept.RequestID, pastLease); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, a.ID, settled.RequestID); err != nil {
		t.Fatal(err)
	}
	for c, want := range map[store.Charge]error{swept: store.ErrRefunded, settled: store.ErrSettled} {
		if err := s.ExtendReservation(ctx, a.ID, c.RequestID, until); !errors.Is(err, want) {
			t.Errorf("extending %s: %v, want %v", c.RequestID, err, want)
		}
	}
	if err := s.ExtendReservation(ctx, a.ID, "req_missing", until); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("extending a missing reservation: %v", err)
	}
	if _, err := s.RefundExpired(ctx, a.ID, plain.RequestID, time.Time{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("RefundExpired without a time: %v", err)
	}

	// Past the original lease: the sweep lists and refunds only the plain one.
	refs, err := s.ExpiredReservations(ctx, pastLease, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].RequestID != plain.RequestID {
		t.Errorf("listed past the first lease: %+v, want only %s", refs, plain.RequestID)
	}
	if _, err := s.RefundExpired(ctx, a.ID, held.RequestID, pastLease); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("the held reservation refunded past its first lease: %v", err)
	}
	if _, err := s.RefundExpired(ctx, a.ID, held.RequestID, until.Add(-time.Second)); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("the held reservation refunded a second before its new lease ends: %v", err)
	}
	if _, err := s.RefundExpired(ctx, a.ID, plain.RequestID, pastLease); err != nil {
		t.Fatal(err)
	}
	if got := balance(t, s, a.ID); got != 100-held.Cost-settled.Cost {
		t.Errorf("balance %d, want %d", got, 100-held.Cost-settled.Cost)
	}

	// After the new lease: listed (at its new lease), then refunded.
	after := until.Add(2 * time.Second)
	refs, err = s.ExpiredReservations(ctx, after, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].RequestID != held.RequestID || refs[0].LeaseUntil.Before(until.Add(-time.Second)) || refs[0].LeaseUntil.After(until.Add(time.Second)) {
		t.Errorf("listed after the new lease: %+v, want %s until %v", refs, held.RequestID, until)
	}
	if _, err := s.RefundExpired(ctx, a.ID, held.RequestID, after); err != nil {
		t.Fatal(err)
	}
	if got := balance(t, s, a.ID); got != 100-settled.Cost {
		t.Errorf("balance %d, want %d", got, 100-settled.Cost)
	}
	CheckLedger(t, s, a.ID)
}

// Sweeps (RefundExpired) racing jobs that start (ExtendReservation, then
// Settle): each reservation is either held and settled, or refunded and
// never held; never both, never neither.
func testConcurrentExtendAndSweep(t *testing.T, s store.Store) {
	a := newAccount(t, s, 1000)
	k := newKey(t, s, a.ID, nil)
	const n = 24
	charges := make([]store.Charge, n)
	for i := range charges {
		charges[i] = charge(a, k, int64(i+1))
		if _, err := s.Reserve(ctx, charges[i]); err != nil {
			t.Fatal(err)
		}
	}
	pastLease := time.Now().Add(store.ReservationLease + time.Minute)
	until := pastLease.Add(time.Hour)
	var kept, refunded atomic.Int64
	var wg sync.WaitGroup
	for _, c := range charges {
		wg.Add(3)
		go func() {
			defer wg.Done()
			err := s.ExtendReservation(ctx, a.ID, c.RequestID, until)
			switch {
			case err == nil:
				if err := s.Settle(ctx, a.ID, c.RequestID); err != nil {
					t.Errorf("settle of a held reservation %s: %v", c.RequestID, err)
				}
				kept.Add(c.Cost)
			case !errors.Is(err, store.ErrRefunded):
				t.Errorf("extend %s: %v", c.RequestID, err)
			}
		}()
		for range 2 {
			go func() {
				defer wg.Done()
				_, err := s.RefundExpired(ctx, a.ID, c.RequestID, pastLease)
				switch {
				case err == nil:
					refunded.Add(1)
				case errors.Is(err, store.ErrLeaseHeld), errors.Is(err, store.ErrSettled):
				default:
					t.Errorf("sweep %s: %v", c.RequestID, err)
				}
			}()
		}
	}
	wg.Wait()
	var charged int64
	for _, c := range charges {
		entries := allEntries(t, s, a.ID, store.LedgerQuery{RequestID: c.RequestID})
		switch len(entries) {
		case 1: // the debit: held and settled
			charged += c.Cost
		case 2: // debit and refund
		default:
			t.Errorf("%s: %d entries: %+v", c.RequestID, len(entries), entries)
		}
	}
	if charged != kept.Load() {
		t.Errorf("%d credits kept by the ledger, %d by the jobs that held their reservation", charged, kept.Load())
	}
	if got := balance(t, s, a.ID); got != 1000-charged {
		t.Errorf("balance %d, want %d", got, 1000-charged)
	}
	CheckLedger(t, s, a.ID)
	t.Logf("%d credits held and settled, %d refunds of %d reservations", kept.Load(), refunded.Load(), n)
}

// Job slots: at most max live per account, a held slot is kept, a
// released or lapsed one frees its place, and accounts do not share them.
func testJobSlots(t *testing.T, s store.Store) {
	js := jobsOf(t, s)
	a, b := newAccount(t, s, 0), newAccount(t, s, 0)
	now := wallClock()
	until := now.Add(time.Hour)
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = store.NewJobID()
		if err := js.TakeJobSlot(ctx, a.ID, ids[i], now, until, 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := js.TakeJobSlot(ctx, a.ID, store.NewJobID(), now, until, 3); !errors.Is(err, store.ErrJobQueueFull) {
		t.Errorf("a fourth slot of three: %v", err)
	}
	if err := js.TakeJobSlot(ctx, a.ID, ids[0], now, until, 3); err != nil {
		t.Errorf("a slot the job holds: %v", err)
	}
	if err := js.TakeJobSlot(ctx, b.ID, store.NewJobID(), now, until, 3); err != nil {
		t.Errorf("another account's slot: %v", err)
	}
	if err := js.ReleaseJobSlot(ctx, a.ID, ids[1]); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{ids[1], "job_never"} {
		if err := js.ReleaseJobSlot(ctx, a.ID, id); err != nil {
			t.Errorf("releasing a slot not held: %v", err)
		}
	}
	if err := js.ReleaseJobSlot(ctx, newAccount(t, s, 0).ID, "job_never"); err != nil {
		t.Errorf("releasing on an account that never held one: %v", err)
	}
	fourth := store.NewJobID()
	if err := js.TakeJobSlot(ctx, a.ID, fourth, now, until, 3); err != nil {
		t.Errorf("the released place: %v", err)
	}
	if err := js.TakeJobSlot(ctx, a.ID, store.NewJobID(), now, until, 3); !errors.Is(err, store.ErrJobQueueFull) {
		t.Errorf("full again: %v", err)
	}
	// Once their lease ended the slots no longer count.
	if err := js.TakeJobSlot(ctx, a.ID, store.NewJobID(), until, until.Add(time.Hour), 3); err != nil {
		t.Errorf("after the slots lapsed: %v", err)
	}
	for _, bad := range [][2]string{{"", "job_x"}, {a.ID, ""}, {a.ID, "job#x"}} {
		if err := js.TakeJobSlot(ctx, bad[0], bad[1], now, until, 3); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ids %q: %v", bad, err)
		}
	}
	if err := js.TakeJobSlot(ctx, a.ID, store.NewJobID(), now, until, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a cap of 0: %v", err)
	}
}

// 40 concurrent takers of 10 slots: exactly 10 win; then 20 takers race 5
// releases: exactly 5 more win.
func testConcurrentJobSlots(t *testing.T, s store.Store) {
	js := jobsOf(t, s)
	a := newAccount(t, s, 0)
	now := wallClock()
	until := now.Add(time.Hour)
	const max = 10
	take := func(n int) (won []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := store.NewJobID()
				err := js.TakeJobSlot(ctx, a.ID, id, now, until, max)
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, id)
					mu.Unlock()
				case !errors.Is(err, store.ErrJobQueueFull):
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		return won
	}
	won := take(40)
	if len(won) != max {
		t.Fatalf("%d slots taken of %d", len(won), max)
	}
	var wg sync.WaitGroup
	for _, id := range won[:5] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := js.ReleaseJobSlot(ctx, a.ID, id); err != nil {
				t.Error(err)
			}
		}()
	}
	more := take(20)
	wg.Wait()
	rest := take(20)
	if len(more)+len(rest) != 5 {
		t.Errorf("%d+%d slots taken after 5 releases", len(more), len(rest))
	}
}
