package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/store/storetest"
)

// groupCounter counts the ReserveMany calls that reach the store and the
// largest group, and the store's Enter and EnterMany calls.
type groupCounter struct {
	billedStore
	calls, largest      atomic.Int64
	enters, enterGroups atomic.Int64
	largestEnter        atomic.Int64
}

func (g *groupCounter) Enter(ctx context.Context, hash, requestID string, now time.Time, rules store.LimitRules, slot bool) (store.Key, store.Admission, error) {
	g.enters.Add(1)
	return g.billedStore.(store.Gate).Enter(ctx, hash, requestID, now, rules, slot)
}

func (g *groupCounter) EnterMany(ctx context.Context, hash string, requestIDs []string, now time.Time, rules store.LimitRules, slot bool) (store.Key, []store.Admission, error) {
	g.enterGroups.Add(1)
	g.largestEnter.Store(max(g.largestEnter.Load(), int64(len(requestIDs))))
	return g.billedStore.(store.GroupGate).EnterMany(ctx, hash, requestIDs, now, rules, slot)
}

func (g *groupCounter) ReserveMany(ctx context.Context, charges []store.Charge) ([]store.Reserved, error) {
	g.calls.Add(1)
	for n := int64(len(charges)); ; {
		old := g.largest.Load()
		if n <= old || g.largest.CompareAndSwap(old, n) {
			break
		}
	}
	return g.billedStore.ReserveMany(ctx, charges)
}

// Reserves of one account arriving together are written in groups, each
// caller gets its own charge's outcome, and the money is exact.
func TestWalletQueueGroupsReserves(t *testing.T) {
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	a, err := s.CreateAccount(context.Background(), 60, "console-hash", "req_open")
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.CreateKey(context.Background(), store.Key{AccountID: a.ID, Hash: "key-hash", Prefix: "mn_abcd", Last4: "wxyz", Status: store.KeyActive})
	if err != nil {
		t.Fatal(err)
	}
	counter := &groupCounter{billedStore: s}
	var w walletQueue
	const n = 100
	var accepted, short atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := store.Charge{RequestID: store.NewEntryID(), AccountID: a.ID, KeyID: k.ID, KeyPrefix: k.Prefix, Endpoint: "/v1/x/y", Cost: 1}
			r, err := w.reserveOne(context.Background(), counter, c)
			var ie *store.InsufficientCreditsError
			switch {
			case err == nil && r.RequestID == c.RequestID && r.DebitEntryID != "":
				accepted.Add(1)
			case errors.As(err, &ie):
				short.Add(1)
			default:
				t.Errorf("reserve: %+v %v", r, err)
			}
		}()
	}
	wg.Wait()
	if accepted.Load() != 60 || short.Load() != n-60 {
		t.Errorf("%d accepted, %d refused; want 60 and %d", accepted.Load(), short.Load(), n-60)
	}
	if calls := counter.calls.Load(); calls >= n || counter.largest.Load() > store.MaxReserveGroup {
		t.Errorf("%d ReserveMany calls for %d reserves, largest group %d", calls, n, counter.largest.Load())
	}
	if len(w.queues) != 0 {
		t.Errorf("queues left behind: %v", w.queues)
	}
	if acct, _ := s.Account(context.Background(), a.ID); acct.CreditsRemaining != 0 {
		t.Errorf("balance %d", acct.CreditsRemaining)
	}
}

// A batch's paid items are reserved in one group: one store transaction
// for the batch, each item still billed on its own.
func TestBatchReservesItsItemsTogether(t *testing.T) {
	counter := &groupCounter{}
	b := newBilled(t, 1000, nil, func(c *Config) {
		counter.billedStore = c.Store.(billedStore)
		c.Store, c.Limits = counter, counter
	})
	var specs []string
	for i := 0; i < 20; i++ {
		if i%4 == 3 {
			specs = append(specs, `{"platform":"marketplace_a","endpoint":"search","params":{"page":2}}`) // refused before its reserve
			continue
		}
		specs = append(specs, search(fmt.Sprint("item", i)))
	}
	r, w := b.batch(items(specs...))
	if r.code != 200 || w.Succeeded != 15 || w.CreditsUsed != 45 {
		t.Fatalf("%d %+v", r.code, w)
	}
	if calls, largest := counter.calls.Load(), counter.largest.Load(); calls != 1 || largest != 15 {
		t.Errorf("%d ReserveMany calls, the largest of %d charges; want one of 15", calls, largest)
	}
	// The 20 items (the five refused by validation too: they are admitted
	// first) enter with one EnterMany; the wrapper itself is not admitted.
	if groups, single, largest := counter.enterGroups.Load(), counter.enters.Load(), counter.largestEnter.Load(); groups != 1 || single != 0 || largest != 20 {
		t.Errorf("%d EnterMany calls (largest %d) and %d Enter calls; want one EnterMany of 20", groups, largest, single)
	}
	if a, _ := b.store.Account(t.Context(), b.account.ID); a.CreditsRemaining != 955 {
		t.Errorf("balance %d", a.CreditsRemaining)
	}
	entries := storetest.CheckLedger(t, b.store, b.account.ID)
	if len(entries) != 1+15 {
		t.Errorf("%d ledger entries, want the grant and 15 debits", len(entries))
	}
}
