package storetest

import (
	"sort"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// The auditor lists every reservation with its state and entries, and the
// slots a key holds until they are released.
func testAuditor(t *testing.T, s store.Store) {
	au, ok := s.(store.Auditor)
	if !ok {
		t.Fatal("the store is not a store.Auditor")
	}
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, ptr(8))
	charges := []store.Charge{charge(a, k, 1), charge(a, k, 2), charge(a, k, 3)}
	debits := map[string]string{}
	for _, c := range charges {
		r, err := s.Reserve(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		debits[c.RequestID] = r.DebitEntryID
	}
	if err := s.Settle(ctx, a.ID, charges[0].RequestID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refund(ctx, a.ID, charges[1].RequestID); err != nil {
		t.Fatal(err)
	}
	got, err := au.Reservations(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Cost < got[j].Cost })
	want := []string{store.ReservationSettled, store.ReservationRefunded, store.ReservationReserved}
	if len(got) != 3 {
		t.Fatalf("reservations %+v", got)
	}
	refund := allEntries(t, s, a.ID, store.LedgerQuery{Limit: 10, RequestID: charges[1].RequestID})
	for i, r := range got {
		c := charges[i]
		if r.Status != want[i] || r.RequestID != c.RequestID || r.KeyID != k.ID || r.AccountID != a.ID || r.Endpoint != c.Endpoint ||
			r.DebitEntryID != debits[c.RequestID] || r.LeaseUntil.Before(time.Now().Add(store.ReservationLease-time.Minute)) {
			t.Errorf("reservation %d: %+v, want %s of %+v", i, r, want[i], c)
		}
		if (r.Status == store.ReservationRefunded) != (r.RefundEntryID != "") {
			t.Errorf("refund entry of %+v", r)
		}
	}
	if got[1].RefundEntryID == "" || len(refund) != 2 || refund[0].ID != got[1].RefundEntryID {
		t.Errorf("refund entry %q, ledger %+v", got[1].RefundEntryID, refund)
	}
	if other, err := au.Reservations(ctx, newAccount(t, s, 1).ID); err != nil || len(other) != 0 {
		t.Errorf("another account's reservations: %+v %v", other, err)
	}

	l := s.(store.Limits)
	id, now, rules := unique("keyhash_"), time.Now(), store.DefaultLimits
	for _, rid := range []string{"req_a", "req_b"} {
		if adm, err := l.Admit(ctx, id, rid, now, rules, true); err != nil || !adm.Admitted {
			t.Fatalf("%+v %v", adm, err)
		}
	}
	if err := l.ReleaseSlots(ctx, id, []string{"req_a"}, now, rules); err != nil {
		t.Fatal(err)
	}
	slots, err := au.HeldSlots(ctx, id)
	if err != nil || len(slots) != 1 || slots[0].LeaseUntil != now.Add(rules.Lease).UnixMilli() {
		t.Errorf("held slots %+v %v", slots, err)
	}
	if none, err := au.HeldSlots(ctx, unique("keyhash_")); err != nil || len(none) != 0 {
		t.Errorf("an unknown key holds %+v %v", none, err)
	}
}
