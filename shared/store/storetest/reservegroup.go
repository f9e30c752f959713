package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// testReserveMany: a group is decided in order, as single reserves would
// be, each refusal typed and the rest written together.
func testReserveMany(t *testing.T, s store.Store) {
	a := newAccount(t, s, 10)
	capped := newKey(t, s, a.ID, ptr(6))
	free := newKey(t, s, a.ID, nil)
	revoked := newKey(t, s, a.ID, nil)
	if _, err := s.SetKeyStatus(ctx, a.ID, revoked.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	earlier := charge(a, free, 1)
	if _, err := s.Reserve(ctx, earlier); err != nil { // balance 9
		t.Fatal(err)
	}
	first := charge(a, capped, 3)
	missing := free
	missing.ID = "key_missing"
	group := []store.Charge{
		first,                 // accepted: balance 6, capped used 3
		charge(a, capped, 4),  // 3+4 > 6: KEY_LIMIT_EXCEEDED with 3 used
		charge(a, capped, 3),  // accepted: balance 3, capped used 6
		first,                 // the same request twice in the group
		earlier,               // a request already reserved
		charge(a, free, 0),    // no cost
		charge(a, revoked, 1), // an inactive key
		charge(a, missing, 1), // an unknown key
		charge(a, free, 4),    // 4 > 3 left: INSUFFICIENT_CREDITS
		charge(a, free, 3),    // accepted: balance 0
	}
	out, err := s.ReserveMany(ctx, group)
	if err != nil || len(out) != len(group) {
		t.Fatalf("ReserveMany: %d results, %v", len(out), err)
	}
	var limit *store.KeyLimitError
	var short *store.InsufficientCreditsError
	for i, want := range []struct {
		remaining int64
		check     func(error) bool
	}{
		{6, nil},
		{0, func(err error) bool {
			return errors.As(err, &limit) && limit.CreditLimit == 6 && limit.CreditsUsed == 3
		}},
		{3, nil},
		{0, func(err error) bool { return errors.Is(err, store.ErrDuplicateRequest) }},
		{0, func(err error) bool { return errors.Is(err, store.ErrDuplicateRequest) }},
		{0, func(err error) bool { return errors.Is(err, store.ErrInvalid) }},
		{0, func(err error) bool { return errors.Is(err, store.ErrKeyInactive) }},
		{0, func(err error) bool { return errors.Is(err, store.ErrNotFound) }},
		{0, func(err error) bool { return errors.As(err, &short) && short.Required == 4 && short.Remaining == 3 }},
		{0, nil},
	} {
		r := out[i]
		if r.RequestID != group[i].RequestID {
			t.Errorf("result %d is for %q, not %q", i, r.RequestID, group[i].RequestID)
		}
		switch {
		case want.check == nil && (r.Err != nil || r.CreditsRemaining != want.remaining || r.DebitEntryID == ""):
			t.Errorf("charge %d: %+v, want a reservation leaving %d", i, r, want.remaining)
		case want.check != nil && !want.check(r.Err):
			t.Errorf("charge %d: %v", i, r.Err)
		}
	}
	if got, _ := s.Key(ctx, a.ID, capped.ID); got.CreditsUsed != 6 {
		t.Errorf("capped key credits_used %d, want 6", got.CreditsUsed)
	}
	if got, _ := s.Key(ctx, a.ID, free.ID); got.CreditsUsed != 4 {
		t.Errorf("uncapped key credits_used %d, want 4", got.CreditsUsed)
	}
	entries := CheckLedger(t, s, a.ID)
	if len(entries) != 5 {
		t.Fatalf("%d entries, want the grant and four debits", len(entries))
	}
	// Newest first: the group's debits in reverse order, each with its request.
	for i, idx := range []int{9, 2, 0} {
		if e := entries[i]; e.ID != out[idx].DebitEntryID || e.RequestID != group[idx].RequestID || e.Amount != -group[idx].Cost {
			t.Errorf("entry %d %+v, want the debit of charge %d", i, e, idx)
		}
	}
	// Each reservation of the group settles or refunds on its own.
	if err := s.Settle(ctx, a.ID, group[0].RequestID); err != nil {
		t.Error(err)
	}
	if b, err := s.Refund(ctx, a.ID, group[2].RequestID); err != nil || b != 3 {
		t.Errorf("refund: %d %v", b, err)
	}
	if got, _ := s.Key(ctx, a.ID, capped.ID); got.CreditsUsed != 3 {
		t.Errorf("capped key credits_used %d after the refund, want 3", got.CreditsUsed)
	}
	CheckLedger(t, s, a.ID)

	other := newAccount(t, s, 10)
	if _, err := s.ReserveMany(ctx, []store.Charge{charge(a, free, 1), charge(other, free, 1)}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a group of two accounts: %v", err)
	}
	tooMany := make([]store.Charge, store.MaxReserveGroup+1)
	for i := range tooMany {
		tooMany[i] = charge(other, free, 1)
	}
	if _, err := s.ReserveMany(ctx, tooMany); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a group over MaxReserveGroup: %v", err)
	}
	if _, err := s.ReserveMany(ctx, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an empty group: %v", err)
	}
	if balance(t, s, other.ID) != 10 {
		t.Error("a refused group charged something")
	}
}

// testConcurrentReserveGroups: groups and single reserves racing for one
// wallet and one key's budget spend exactly what there is, never more.
func testConcurrentReserveGroups(t *testing.T, s store.Store) {
	a := newAccount(t, s, 150)
	capped := newKey(t, s, a.ID, ptr(100))
	free := newKey(t, s, a.ID, nil)
	var accepted, cappedUsed atomic.Int64
	var wg sync.WaitGroup
	count := func(r store.Reserved) {
		var limit *store.KeyLimitError
		var short *store.InsufficientCreditsError
		switch {
		case r.Err == nil:
			accepted.Add(1)
			if r.KeyID == capped.ID {
				cappedUsed.Add(1)
			}
			if r.CreditsRemaining < 0 || r.DebitEntryID == "" {
				t.Errorf("reservation %+v", r)
			}
		case errors.As(r.Err, &limit):
			if r.KeyID != capped.ID || limit.CreditsUsed+1 <= limit.CreditLimit {
				t.Errorf("key limit %+v for %+v", limit, r.Charge)
			}
		case errors.As(r.Err, &short):
			if short.Remaining >= 1 || short.Remaining < 0 {
				t.Errorf("insufficient %+v", short)
			}
		default:
			t.Errorf("charge %+v: %v", r.Charge, r.Err)
		}
	}
	for g := 0; g < 30; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g%3 == 0 { // single reserves beside the groups
				for i := 0; i < 8; i++ {
					c := charge(a, []store.Key{capped, free}[i%2], 1)
					r, err := s.Reserve(ctx, c)
					count(store.Reserved{Reservation: store.Reservation{Charge: c, CreditsRemaining: r.CreditsRemaining, DebitEntryID: r.DebitEntryID}, Err: err})
				}
				return
			}
			group := make([]store.Charge, 8)
			for i := range group {
				group[i] = charge(a, []store.Key{capped, free}[i%2], 1)
			}
			out, err := s.ReserveMany(ctx, group)
			if err != nil {
				t.Error(err)
				return
			}
			for _, r := range out {
				count(r)
			}
		}()
	}
	wg.Wait()
	// 240 charges of 1 ask for more than the wallet's 150 and the key's 100.
	if accepted.Load() != 150 || cappedUsed.Load() > 100 {
		t.Errorf("%d accepted (%d on the capped key); want 150, at most 100 capped", accepted.Load(), cappedUsed.Load())
	}
	if got, _ := s.Key(ctx, a.ID, capped.ID); got.CreditsUsed != cappedUsed.Load() {
		t.Errorf("capped credits_used %d, reservations %d", got.CreditsUsed, cappedUsed.Load())
	}
	if got, _ := s.Key(ctx, a.ID, free.ID); got.CreditsUsed != accepted.Load()-cappedUsed.Load() {
		t.Errorf("uncapped credits_used %d, reservations %d", got.CreditsUsed, accepted.Load()-cappedUsed.Load())
	}
	if entries := CheckLedger(t, s, a.ID); len(entries) != 1+150 {
		t.Errorf("%d entries, want the grant and 150 debits", len(entries))
	}
}

// testEnterMany: several requests of one key admitted in one step are
// decided in order as single Enters would be; refusals count nothing.
func testEnterMany(t *testing.T, s store.Store) {
	g, ok := s.(store.GroupGate)
	if !ok {
		t.Fatal("the store does not implement store.GroupGate")
	}
	lim := s.(store.Limits)
	rules := store.LimitRules{Rate: 5, Window: time.Minute, Concurrency: 3, Lease: time.Minute}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, nil)
	first := []string{unique("req_"), unique("req_"), unique("req_"), unique("req_")}
	got, as, err := g.EnterMany(ctx, k.Hash, first, now, rules, true)
	if err != nil || got.ID != k.ID || got.AccountID != a.ID || len(as) != 4 {
		t.Fatalf("EnterMany: %+v %d %v", got, len(as), err)
	}
	for i, want := range []struct {
		admitted        bool
		refused         string
		rateLeft, slots int
	}{{true, "", 4, 2}, {true, "", 3, 1}, {true, "", 2, 0}, {false, "concurrency", 2, 0}} {
		if as[i].Admitted != want.admitted || as[i].Refused != want.refused || as[i].RateRemaining != want.rateLeft || want.admitted && as[i].SlotsFree != want.slots {
			t.Errorf("request %d: %+v, want %+v", i, as[i], want)
		}
	}
	// A batch frees its items' slots together; the refused one held none.
	if err := lim.ReleaseSlots(ctx, k.Hash, first, now, rules, as[0].Stale...); err != nil {
		t.Fatal(err)
	}
	// Three in the window: two more fit, the third is over the rate.
	_, as, err = g.EnterMany(ctx, k.Hash, []string{unique("req_"), unique("req_"), unique("req_")}, now.Add(time.Second), rules, true)
	if err != nil || !as[0].Admitted || !as[1].Admitted || as[2].Admitted || as[2].Refused != "rate" || as[1].RateRemaining != 0 {
		t.Fatalf("over the rate: %+v %v", as, err)
	}
	// The refused requests counted nothing: the window holds exactly five,
	// and the slots two.
	if adm, err := lim.Admit(ctx, k.Hash, unique("req_"), now.Add(2*time.Second), rules, false); err != nil || adm.Admitted || adm.Refused != "rate" {
		t.Errorf("the window after the refusals: %+v %v", adm, err)
	}
	if adm, err := lim.TakeSlot(ctx, k.Hash, unique("req_"), now.Add(2*time.Second), rules); err != nil || !adm.Admitted || adm.SlotsFree != 0 {
		t.Errorf("the slots after the refusals: %+v %v", adm, err)
	}
	if _, _, err := g.EnterMany(ctx, hash(unique("nokey")), []string{unique("req_")}, now, rules, true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.EnterMany(ctx, k.Hash, []string{unique("req_")}, now, rules, true); !errors.Is(err, store.ErrKeyInactive) {
		t.Errorf("revoked key: %v", err)
	}
}

// Batches of one key entering and freeing their items' slots together,
// many at once: never more than the key's in-flight slots are held, and
// once every batch has released, every slot is free again.
func testConcurrentGroupRelease(t *testing.T, s store.Store) {
	g := s.(store.GroupGate)
	lim := s.(store.Limits)
	rules := store.DefaultLimits
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, nil)
	var inFlight, peak, admitted atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 8; round++ {
				ids := []string{unique("req_"), unique("req_"), unique("req_"), unique("req_"), unique("req_")}
				_, as, err := g.EnterMany(ctx, k.Hash, ids, now, rules, true)
				if err != nil {
					t.Error(err)
					return
				}
				var held []string
				for i, adm := range as {
					if adm.Admitted {
						held = append(held, ids[i])
					}
				}
				n := inFlight.Add(int64(len(held)))
				admitted.Add(int64(len(held)))
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Millisecond)
				// Counted out before the release lands: the count here
				// never exceeds what the store holds.
				inFlight.Add(-int64(len(held)))
				if err := lim.ReleaseSlots(ctx, k.Hash, held, now, rules, as[0].Stale...); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if peak.Load() > int64(rules.Concurrency) || admitted.Load() == 0 {
		t.Fatalf("peak %d in flight (admitted %d), at most %d", peak.Load(), admitted.Load(), rules.Concurrency)
	}
	if adm, err := lim.TakeSlot(ctx, k.Hash, unique("req_"), now, rules); err != nil || !adm.Admitted || adm.SlotsFree != rules.Concurrency-1 {
		t.Errorf("after every batch released: %+v %v", adm, err)
	}
}
