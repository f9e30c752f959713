package dynamostore

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/storetest"
)

// testClock is the store's clock in a test: set, never ticking.
type testClock struct{ nanos atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Unix(0, c.nanos.Load()).UTC() }
func (c *testClock) set(t time.Time)         { c.nanos.Store(t.UnixNano()) }
func (c *testClock) advance(d time.Duration) { c.nanos.Add(int64(d)) }

// sweepSetup opens a store on a clock of its own, set to a whole second,
// with an account and an uncapped key.
func sweepSetup(t *testing.T, credits int64) (*Store, *testClock, store.Account, store.Key) {
	t.Helper()
	s := newStore(t)
	clock := &testClock{}
	clock.set(time.Now().UTC().Truncate(time.Second))
	s.now = clock.now
	a := mustAccount(t, s, credits)
	return s, clock, a, mustKey(t, s, a.ID, nil)
}

// shardEntries lists a shard's LeaseIndex entries, in order.
func shardEntries(t *testing.T, s *Store, shard int) []leaseEntry {
	t.Helper()
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName: s.table, IndexName: aws.String(LeaseIndex),
		KeyConditionExpression:    aws.String("lease_pk = :pk"),
		ExpressionAttributeValues: vals{":pk": str("lease#" + strconv.Itoa(shard))},
	})
	var out []leaseEntry
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			e, err := decodeLease(item)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
	}
	return out
}

// checkMarks: in every shard, each entry at or before the mark has left
// "reserved"; with exhaustive (a sweep has just read every ended entry),
// the entry right after the mark, if any, is one still reserved. It
// returns how many shards have a mark.
func checkMarks(t *testing.T, s *Store, exhaustive bool) (marked int) {
	t.Helper()
	marks, err := s.leaseMarks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for shard := range LeaseShards {
		first := true
		for _, e := range shardEntries(t, s, shard) {
			reserved := attrS(t, rawItem(t, s, accountPK(e.ref.AccountID), pfxReq+e.ref.RequestID), "status") == "reserved"
			switch {
			case e.sk <= marks[shard] && reserved:
				t.Errorf("shard %d: %s is still reserved behind the mark %s", shard, e.sk, marks[shard])
			case e.sk > marks[shard] && first:
				first = false
				if exhaustive && !reserved {
					t.Errorf("shard %d: the mark %s stopped before %s, which is done", shard, marks[shard], e.sk)
				}
			}
		}
		if marks[shard] != "" {
			marked++
		}
	}
	return marked
}

// The sweep lists only what is still reserved, moves each shard's mark
// over the settled and refunded entries before the first reserved one,
// and reads on from there: nothing reserved later is ever skipped.
func TestSweepReadsOnFromTheMark(t *testing.T) {
	t.Parallel()
	s, clock, a, k := sweepSetup(t, 1000)
	t0 := clock.now()
	var open []string
	for i := range 48 {
		c := chargeFor(k, 1)
		if _, err := s.Reserve(ctx, c); err != nil {
			t.Fatal(err)
		}
		switch i % 4 {
		case 0, 1:
			if err := s.Settle(ctx, a.ID, c.RequestID); err != nil {
				t.Fatal(err)
			}
		case 2:
			if _, err := s.Refund(ctx, a.ID, c.RequestID); err != nil {
				t.Fatal(err)
			}
		default:
			open = append(open, c.RequestID)
		}
		clock.advance(time.Second)
	}
	// By the store's clock every reservation is older than markMargin;
	// the sweeps' now is past every lease, not yet relistAfter past any.
	clock.set(t0.Add(markMargin + time.Minute))
	listed := func(now time.Time) []string {
		t.Helper()
		refs, err := s.ExpiredReservations(ctx, now, 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i, r := range refs {
			if i > 0 && r.LeaseUntil.Before(refs[i-1].LeaseUntil) {
				t.Errorf("not oldest first: %+v", refs)
			}
			ids = append(ids, r.RequestID)
		}
		return ids
	}
	sweepAt := t0.Add(store.ReservationLease + time.Minute)
	if got := listed(sweepAt); !slices.Equal(got, open) {
		t.Fatalf("listed %v, want the %d still reserved %v", got, len(open), open)
	}
	if checkMarks(t, s, true) == 0 {
		t.Error("no shard's mark moved")
	}
	for _, id := range open {
		if _, err := s.Refund(ctx, a.ID, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := listed(sweepAt); len(got) != 0 {
		t.Errorf("after the refunds: %v", got)
	}
	checkMarks(t, s, true) // every shard's mark past its last entry
	// Reservations made after the marks moved are found.
	var later []string
	for range 12 {
		c := chargeFor(k, 2)
		if _, err := s.Reserve(ctx, c); err != nil {
			t.Fatal(err)
		}
		later = append(later, c.RequestID)
		clock.advance(time.Second)
	}
	if got := listed(sweepAt); len(got) != 0 {
		t.Errorf("leases that have not ended: %v", got)
	}
	if got := listed(clock.now().Add(store.ReservationLease)); !slices.Equal(got, later) {
		t.Errorf("listed %v, want %v", got, later)
	}
	storetest.CheckLedger(t, s, a.ID)
}

// A reservation that stays reserved long past its lease (its refund keeps
// failing) does not hold the mark back: its entry moves on by relistAfter,
// the mark passes its old place, and it is listed again later.
func TestSweepNeverStallsBehindAReservation(t *testing.T) {
	t.Parallel()
	s, clock, a, k := sweepSetup(t, 1000)
	t0 := clock.now()
	stuck := chargeFor(k, 1)
	if _, err := s.Reserve(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	for range 40 {
		clock.advance(time.Second)
		c := chargeFor(k, 1)
		if _, err := s.Reserve(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(ctx, a.ID, c.RequestID); err != nil {
			t.Fatal(err)
		}
	}
	leaseEnd := t0.Add(store.ReservationLease)
	// Listed once its lease has ended; not moved yet.
	clock.set(leaseEnd.Add(time.Minute))
	refs, err := s.ExpiredReservations(ctx, clock.now(), 10)
	if err != nil || len(refs) != 1 || refs[0].RequestID != stuck.RequestID || !refs[0].LeaseUntil.Equal(leaseEnd) {
		t.Fatalf("first listing: %+v %v", refs, err)
	}
	// Still reserved relistAfter past its lease: listed, and moved on.
	clock.set(leaseEnd.Add(markMargin + relistAfter + time.Minute))
	now := clock.now()
	refs, err = s.ExpiredReservations(ctx, now, 10)
	if err != nil || len(refs) != 1 || refs[0].RequestID != stuck.RequestID {
		t.Fatalf("listing past relistAfter: %+v %v", refs, err)
	}
	res := rawItem(t, s, accountPK(a.ID), pfxReq+stuck.RequestID)
	if attrS(t, res, "status") != "reserved" || attrS(t, res, "lease_sk") != leaseSK(now.Add(relistAfter).Unix(), a.ID, stuck.RequestID) {
		t.Fatalf("the stuck reservation %v", res)
	}
	checkMarks(t, s, true) // every settled entry is behind its shard's mark
	if refs, err := s.ExpiredReservations(ctx, now, 10); err != nil || len(refs) != 0 {
		t.Errorf("its new lease has not ended: %+v %v", refs, err)
	}
	refs, err = s.ExpiredReservations(ctx, now.Add(relistAfter), 10)
	if err != nil || len(refs) != 1 || refs[0].RequestID != stuck.RequestID || !refs[0].LeaseUntil.Equal(now.Add(relistAfter)) {
		t.Fatalf("listed again: %+v %v", refs, err)
	}
	if _, err := s.Refund(ctx, a.ID, stuck.RequestID); err != nil {
		t.Fatal(err)
	}
	storetest.CheckLedger(t, s, a.ID)
}

// Reserves, settles, refunds and sweeps all at once, over clock phases
// that let the marks move while new reservations arrive: at the end every
// reservation is settled or refunded, exactly once, and the ledger adds
// up. A mark that passed a reservation still reserved would leave it
// reserved for ever.
func TestSweepConcurrentWithReserves(t *testing.T) {
	t.Parallel()
	s, clock, a, k := sweepSetup(t, 100000)
	t0 := clock.now()
	const workers, phases, perPhase = 8, 4, 8
	var mu sync.Mutex
	var ids []string
	sweep := func(now time.Time) int {
		refs, err := s.ExpiredReservations(ctx, now, 50)
		if err != nil {
			t.Error(err)
			return 0
		}
		for _, r := range refs {
			if _, err := s.Refund(ctx, r.AccountID, r.RequestID); err != nil && !errors.Is(err, store.ErrSettled) {
				t.Error(err)
			}
		}
		return len(refs)
	}
	stop := make(chan struct{})
	var sweepers sync.WaitGroup
	for range 3 {
		sweepers.Add(1)
		go func() {
			defer sweepers.Done()
			for {
				select {
				case <-stop:
					return
				default:
					// The leases of earlier phases have ended, not this one's.
					sweep(clock.now().Add(store.ReservationLease - time.Second))
				}
			}
		}()
	}
	for phase := range phases {
		// Each phase is markMargin and more after the one before, so
		// the marks may pass every earlier phase's entries.
		clock.set(t0.Add(time.Duration(phase) * (markMargin + time.Minute)))
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perPhase {
					c := chargeFor(k, 1)
					if _, err := s.Reserve(ctx, c); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					ids = append(ids, c.RequestID)
					mu.Unlock()
					if (w+i)%3 != 0 { // a third are left for the sweep
						if err := s.Settle(ctx, a.ID, c.RequestID); err != nil && !errors.Is(err, store.ErrRefunded) {
							t.Error(err)
						}
					}
				}
			}()
		}
		wg.Wait()
	}
	close(stop)
	sweepers.Wait()
	final := clock.now().Add(store.ReservationLease + markMargin + relistAfter)
	clock.set(final)
	for i := 0; i < 20 && sweep(final) > 0; i++ {
	}
	if len(ids) != workers*phases*perPhase {
		t.Fatalf("%d reserved", len(ids))
	}
	counts := map[string]int{}
	for _, id := range ids {
		counts[attrS(t, rawItem(t, s, accountPK(a.ID), pfxReq+id), "status")]++
	}
	if counts["settled"]+counts["refunded"] != len(ids) || counts["settled"] == 0 || counts["refunded"] == 0 {
		t.Errorf("at the end: %v", counts)
	}
	// Each refund wrote one entry: the ledger's refunds are the refunded.
	refunds := 0
	for _, e := range storetest.CheckLedger(t, s, a.ID) {
		if e.Type == store.EntryRefund {
			refunds++
		}
	}
	if refunds != counts["refunded"] {
		t.Errorf("%d refund entries for %d refunded", refunds, counts["refunded"])
	}
	checkMarks(t, s, true)
}
