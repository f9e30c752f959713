package pipeline

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// groupCounter counts the ReserveMany calls that reach the store and the
// largest group.
type groupCounter struct {
	store.Store
	calls, largest atomic.Int64
}

func (g *groupCounter) ReserveMany(ctx context.Context, charges []store.Charge) ([]store.Reserved, error) {
	g.calls.Add(1)
	for n := int64(len(charges)); ; {
		old := g.largest.Load()
		if n <= old || g.largest.CompareAndSwap(old, n) {
			break
		}
	}
	return g.Store.ReserveMany(ctx, charges)
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
	counter := &groupCounter{Store: s}
	var w walletQueue
	const n = 100
	var accepted, short atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := store.Charge{RequestID: store.NewEntryID(), AccountID: a.ID, KeyID: k.ID, KeyPrefix: k.Prefix, Endpoint: "/v1/x/y", Cost: 1}
			r, err := w.reserve(context.Background(), counter, c)
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
