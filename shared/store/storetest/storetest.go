// Package storetest is the conformance suite every store.Store must pass:
// the embedded store and the DynamoDB store run the same tests, including
// the concurrency proofs that money stays exact.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Factory returns a fresh, empty store for one test.
type Factory func(t *testing.T) store.Store

// Run runs the whole suite.
func Run(t *testing.T, newStore Factory) {
	tests := map[string]func(*testing.T, store.Store){
		"Accounts":                      testAccounts,
		"FirstKey":                      testFirstKey,
		"Cache":                         testCache,
		"Idempotency":                   testIdempotency,
		"RateWindow":                    testRateWindow,
		"ConcurrencySlots":              testConcurrencySlots,
		"Gate":                          testGate,
		"ConcurrentGate":                testConcurrentGate,
		"KeyLastUsed":                   testKeyLastUsed,
		"FairUse":                       testFairUse,
		"Outcomes":                      testOutcomes,
		"Grant":                         testGrant,
		"KeyLifecycle":                  testKeyLifecycle,
		"FiveActiveKeys":                testFiveActiveKeys,
		"ConcurrentKeyCreation":         testConcurrentKeyCreation,
		"UpdateKey":                     testUpdateKey,
		"ReserveAndSettle":              testReserveAndSettle,
		"ReserveRefusals":               testReserveRefusals,
		"ReserveMany":                   testReserveMany,
		"EnterMany":                     testEnterMany,
		"ConcurrentGroupRelease":        testConcurrentGroupRelease,
		"ConcurrentReserveGroups":       testConcurrentReserveGroups,
		"Refund":                        testRefund,
		"Ledger":                        testLedger,
		"ConcurrentReservationsKeyCap":  testConcurrentKeyCap,
		"ConcurrentReservationsWallet":  testConcurrentWallet,
		"ConcurrentReserveAndRefund":    testConcurrentReserveAndRefund,
		"ConcurrentRefundsRefundOnce":   testConcurrentRefunds,
		"ConcurrentStatusChangesCounts": testConcurrentStatusChanges,
		"ReserveNeedsAPositiveCost":     testReservePositiveCost,
		"ConcurrentGrantsAndReserves":   testConcurrentGrantsAndReserves,
		"ReserveWhileTheLimitChanges":   testReserveWhileTheLimitChanges,
		"SpendThroughStatusChanges":     testSpendThroughStatusChanges,
		"LimitChangeWhileReactivated":   testLimitChangeWhileReactivated,
		"ExpiredReservations":           testExpiredReservations,
		"ExtendReservation":             testExtendReservation,
		"ConcurrentExtendAndSweep":      testConcurrentExtendAndSweep,
		"JobSlots":                      testJobSlots,
		"ConcurrentJobSlots":            testConcurrentJobSlots,
		"Outbox":                        testOutbox,
		"OutcomesOncePerRequest":        testOutcomesOncePerRequest,
		"Allowance":                     testAllowance,
		"ConcurrentAllowance":           testConcurrentAllowance,
		"UsageCountedOnce":              testUsageCountedOnce,
		"UsageByDayAndEndpoint":         testUsageByDayAndEndpoint,
		"UsageRefusesARecordWithoutID":  testUsageRefusesARecordWithoutID,
		"ConcurrentUsageBatches":        testConcurrentUsageBatches,
		"Auditor":                       testAuditor,
		"MonitorsCRUD":                  testMonitorsCRUD,
		"ConcurrentMonitorCap":          testConcurrentMonitorCap,
		"MonitorPauseResume":            testMonitorPauseResume,
		"ClaimRun":                      testClaimRun,
		"CompleteRunCounters":           testCompleteRunCounters,
		"CompleteRunAfterDelete":        testCompleteRunAfterDelete,
		"RunsPaging":                    testRunsPaging,
		"RunDocuments":                  testRunDocuments,
		"Jobs":                          testJobs,
		"JobDocuments":                  testJobDocuments,
		"ConcurrentStartJob":            testConcurrentStartJob,
		"ConcurrentFinishJob":           testConcurrentFinishJob,
		"ConcurrentCompleteRuns":        testConcurrentCompleteRuns,
		"CanaryLog":                     testCanaryLog,
		"Fills":                         testFills,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newStore(t))
		})
	}
}

var ctx = context.Background()

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var seq atomic.Int64

// unique returns a string no other call in this process returns.
func unique(prefix string) string { return fmt.Sprintf("%s%d", prefix, seq.Add(1)) }

func newAccount(t *testing.T, s store.Store, credits int64) store.Account {
	t.Helper()
	a, err := s.CreateAccount(ctx, credits, hash(unique("console")), unique("req_open"))
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	return a
}

func newKey(t *testing.T, s store.Store, accountID string, limit *int64) store.Key {
	t.Helper()
	k, err := s.CreateKey(ctx, store.Key{AccountID: accountID, Hash: hash(unique("key")), Prefix: "mn_abcd", Last4: "wxyz", Name: "test", CreditLimit: limit})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	return k
}

func ptr(v int64) *int64 { return &v }

func charge(a store.Account, k store.Key, cost int64) store.Charge {
	return store.Charge{RequestID: unique("req_"), AccountID: a.ID, KeyID: k.ID, KeyPrefix: k.Prefix, Endpoint: "/v1/company_registry/search", Cost: cost}
}

func balance(t *testing.T, s store.Store, id string) int64 {
	t.Helper()
	a, err := s.Account(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return a.CreditsRemaining
}

// allEntries reads the whole ledger through its cursor, newest first.
func allEntries(t *testing.T, s store.Store, accountID string, q store.LedgerQuery) []store.Entry {
	t.Helper()
	var out []store.Entry
	for pages := 0; ; pages++ {
		page, err := s.Ledger(ctx, accountID, q)
		if err != nil {
			t.Fatalf("Ledger: %v", err)
		}
		out = append(out, page.Entries...)
		if page.NextCursor == "" {
			return out
		}
		if pages > 10_000 {
			t.Fatal("the ledger cursor does not end")
		}
		q.Cursor = page.NextCursor
	}
}

// CheckLedger proves an account's books. The whole ledger, read through
// its cursor, is newest first by id (so no entry is listed twice); each
// balance_after follows from the entry before it, the oldest from 0, and
// the newest is the balance; the amounts sum to the balance; nothing is
// negative; debits are negative, grants and refunds positive; every entry
// belongs to the account and all but grants name their request.
func CheckLedger(t *testing.T, s store.Store, accountID string) []store.Entry {
	t.Helper()
	entries := allEntries(t, s, accountID, store.LedgerQuery{Limit: 100})
	a, err := s.Account(ctx, accountID)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for i, e := range entries {
		sum += e.Amount
		if e.AccountID != accountID {
			t.Errorf("entry %s belongs to %q", e.ID, e.AccountID)
		}
		if e.BalanceAfter < 0 {
			t.Errorf("entry %s leaves a negative balance %d", e.ID, e.BalanceAfter)
		}
		if e.Type != store.EntryGrant && e.RequestID == "" {
			t.Errorf("entry %s names no request", e.ID)
		}
		if e.Type == store.EntryDebit && e.Amount >= 0 || e.Type != store.EntryDebit && e.Amount <= 0 {
			t.Errorf("entry %s: %s of %d", e.ID, e.Type, e.Amount)
		}
		if i+1 == len(entries) {
			if e.BalanceAfter != e.Amount {
				t.Errorf("the oldest entry does not start from 0: %+v", e)
			}
			break
		}
		if older := entries[i+1]; older.ID >= e.ID {
			t.Errorf("not newest first by id: %s then %s", e.ID, older.ID)
		} else if e.BalanceAfter-e.Amount != older.BalanceAfter {
			t.Errorf("entries %d and %d do not chain: %+v after %+v", i, i+1, e, older)
		}
	}
	if sum != a.CreditsRemaining || a.CreditsRemaining < 0 {
		t.Errorf("ledger sums to %d, balance is %d", sum, a.CreditsRemaining)
	}
	if len(entries) > 0 && entries[0].BalanceAfter != a.CreditsRemaining {
		t.Errorf("newest balance_after %d, balance %d", entries[0].BalanceAfter, a.CreditsRemaining)
	}
	return entries
}

func testAccounts(t *testing.T, s store.Store) {
	token := hash(unique("console"))
	a, err := s.CreateAccount(ctx, 1000, token, "req_open_1000")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == "" || a.CreditsRemaining != 1000 || a.CreditsLifetime != 1000 || a.ActiveKeys != 0 || a.BalanceChangedAt.IsZero() {
		t.Errorf("new account %+v", a)
	}
	if _, err := s.CreateAccount(ctx, 5, token, unique("req_")); err == nil {
		t.Error("a console token opens one account")
	}
	if _, err := s.CreateAccount(ctx, -1, hash(unique("console")), unique("req_")); err == nil {
		t.Error("negative opening credits")
	}
	got, err := s.AccountByConsoleToken(ctx, token)
	if err != nil || got.ID != a.ID {
		t.Errorf("by console token: %+v %v", got, err)
	}
	if _, err := s.AccountByConsoleToken(ctx, hash("nobody")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown console token: %v", err)
	}
	if _, err := s.Account(ctx, "acct_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown account: %v", err)
	}
	entries := CheckLedger(t, s, a.ID)
	if len(entries) != 1 || entries[0].Type != store.EntryGrant || entries[0].BalanceAfter != 1000 || entries[0].RequestID != "req_open_1000" {
		t.Errorf("the opening grant names its request: %+v", entries)
	}
	if _, err := s.CreateAccount(ctx, store.MaxCredits+1, hash(unique("console")), unique("req_")); err == nil {
		t.Error("opening credits above the ceiling")
	}
	empty := newAccount(t, s, 0)
	if got := CheckLedger(t, s, empty.ID); len(got) != 0 {
		t.Errorf("an empty account has no entries: %+v", got)
	}
}

func testGrant(t *testing.T, s store.Store) {
	token := hash(unique("console"))
	a, err := s.CreateAccount(ctx, 10, token, unique("req_"))
	if err != nil {
		t.Fatal(err)
	}
	for _, amount := range []int64{0, -5} {
		if _, err := s.Grant(ctx, a.ID, amount, "", unique("req_")); err == nil {
			t.Errorf("a grant of %d", amount)
		}
	}
	after, err := s.Grant(ctx, a.ID, 25, "top-up", "req_grant1")
	if err != nil || after.ID != a.ID || after.CreditsRemaining != 35 || after.CreditsLifetime != 35 {
		t.Fatalf("grant: %+v %v", after, err)
	}
	entries := CheckLedger(t, s, a.ID)
	if len(entries) != 2 {
		t.Errorf("refused grants wrote entries: %+v", entries)
	}
	if e := entries[0]; e.Type != store.EntryGrant || e.Amount != 25 || e.BalanceAfter != 35 || e.Note != "top-up" || e.RequestID != "req_grant1" || e.AccountID != a.ID {
		t.Errorf("grant entry %+v", e)
	}
	if by, err := s.AccountByConsoleToken(ctx, token); err != nil || by.CreditsRemaining != 35 || by.CreditsLifetime != 35 {
		t.Errorf("by console token after the grant: %+v %v", by, err)
	}
	if _, err := s.Grant(ctx, "acct_missing", 5, "", "req_x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("grant to nobody: %v", err)
	}
	if _, err := s.Grant(ctx, a.ID, store.MaxCredits-34, "", unique("req_")); !errors.Is(err, store.ErrCreditCeiling) {
		t.Errorf("a grant past the ceiling: %v", err)
	}
	if _, err := s.Grant(ctx, a.ID, 1<<62, "", unique("req_")); !errors.Is(err, store.ErrCreditCeiling) {
		t.Errorf("a grant that would overflow: %v", err)
	}
	if top, err := s.Grant(ctx, a.ID, store.MaxCredits-35, "", unique("req_")); err != nil || top.CreditsRemaining != store.MaxCredits {
		t.Errorf("exactly the ceiling: %+v %v", top, err)
	}
	CheckLedger(t, s, a.ID)
}

func testFirstKey(t *testing.T, s store.Store) {
	a := newAccount(t, s, 0)
	var ok, had atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateFirstKey(ctx, store.Key{AccountID: a.ID, Hash: hash(unique("k")), Prefix: "mn_abcd", Last4: "aaaa"})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, store.ErrHasKeys):
				had.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || had.Load() != 7 {
		t.Fatalf("concurrent first visits created %d keys", ok.Load())
	}
	acct, _ := s.Account(ctx, a.ID)
	keys, _ := s.Keys(ctx, a.ID)
	if acct.KeysCreated != 1 || len(keys) != 1 {
		t.Fatalf("keys created %d, listed %d", acct.KeysCreated, len(keys))
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, keys[0].ID, store.KeyDeleted); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateFirstKey(ctx, store.Key{AccountID: a.ID, Hash: hash(unique("k")), Prefix: "mn_abcd", Last4: "aaaa"}); !errors.Is(err, store.ErrHasKeys) {
		t.Errorf("deleting every key does not make the next visit a first one: %v", err)
	}
	newKey(t, s, a.ID, nil)
	if acct, _ := s.Account(ctx, a.ID); acct.KeysCreated != 2 {
		t.Errorf("CreateKey counts too: %d", acct.KeysCreated)
	}
	if _, err := s.CreateFirstKey(ctx, store.Key{AccountID: "acct_missing", Hash: hash(unique("k")), Prefix: "mn_abcd", Last4: "aaaa"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown account: %v", err)
	}
}

func testKeyLifecycle(t *testing.T, s store.Store) {
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, nil)
	if k.ID == "" || k.Status != store.KeyActive || k.CreditLimit != nil || k.CreditsUsed != 0 || k.CreatedAt.IsZero() {
		t.Fatalf("new key %+v", k)
	}
	byHash, err := s.KeyByHash(ctx, k.Hash)
	if err != nil || byHash.ID != k.ID || byHash.AccountID != a.ID || byHash.Prefix != "mn_abcd" || byHash.Last4 != "wxyz" {
		t.Fatalf("by hash: %+v %v", byHash, err)
	}
	if _, err := s.KeyByHash(ctx, hash("unknown")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown hash: %v", err)
	}
	step := func(to store.KeyStatus, wantActive int) store.Key {
		t.Helper()
		got, err := s.SetKeyStatus(ctx, a.ID, k.ID, to)
		if err != nil || got.Status != to {
			t.Fatalf("to %s: %+v %v", to, got, err)
		}
		if byHash, _ := s.KeyByHash(ctx, k.Hash); byHash.Status != to {
			t.Fatalf("the very next lookup sees %s, want %s", byHash.Status, to)
		}
		if acct, _ := s.Account(ctx, a.ID); acct.ActiveKeys != wantActive {
			t.Fatalf("active keys %d, want %d", acct.ActiveKeys, wantActive)
		}
		return got
	}
	if got := step(store.KeyRevoked, 0); !got.UpdatedAt.After(k.UpdatedAt) {
		t.Errorf("revoking moves updated_at: %v, was %v", got.UpdatedAt, k.UpdatedAt)
	}
	step(store.KeyRevoked, 0) // no-op
	step(store.KeyActive, 1)
	step(store.KeyActive, 1) // no-op
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, "paused"); err == nil {
		t.Error("an unknown status")
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.Status != store.KeyActive {
		t.Errorf("an unknown status changed the key to %s", got.Status)
	}
	step(store.KeyDeleted, 0)
	for _, to := range []store.KeyStatus{store.KeyActive, store.KeyRevoked, store.KeyDeleted} {
		if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, to); !errors.Is(err, store.ErrKeyDeleted) {
			t.Errorf("a deleted key has no undo: to %s: %v", to, err)
		}
	}
	name := "x"
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{Name: &name}); !errors.Is(err, store.ErrKeyDeleted) {
		t.Errorf("a deleted key cannot be renamed: %v", err)
	}
	if kept, err := s.Key(ctx, a.ID, k.ID); err != nil || kept.Status != store.KeyDeleted {
		t.Errorf("the deleted row is kept: %+v %v", kept, err)
	}
	if kept, err := s.KeyByHash(ctx, k.Hash); err != nil || kept.Status != store.KeyDeleted {
		t.Errorf("a lookup finds the deleted row: %+v %v", kept, err)
	}
	if keys, _ := s.Keys(ctx, a.ID); len(keys) != 0 {
		t.Errorf("a deleted key disappears from the list: %+v", keys)
	}
	revoked := newKey(t, s, a.ID, nil)
	step2 := func(to store.KeyStatus) {
		if _, err := s.SetKeyStatus(ctx, a.ID, revoked.ID, to); err != nil {
			t.Fatal(err)
		}
	}
	step2(store.KeyRevoked)
	step2(store.KeyDeleted) // delete from revoked
	if acct, _ := s.Account(ctx, a.ID); acct.ActiveKeys != 0 {
		t.Errorf("deleting a revoked key frees nothing twice: %d", acct.ActiveKeys)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, "key_missing", store.KeyRevoked); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	other := newAccount(t, s, 0)
	if _, err := s.SetKeyStatus(ctx, other.ID, newKey(t, s, a.ID, nil).ID, store.KeyRevoked); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a key of another account: %v", err)
	}
}

func testFiveActiveKeys(t *testing.T, s store.Store) {
	a := newAccount(t, s, 0)
	active := func(want int) {
		t.Helper()
		if acct, _ := s.Account(ctx, a.ID); acct.ActiveKeys != want {
			t.Fatalf("active keys %d, want %d", acct.ActiveKeys, want)
		}
	}
	if _, err := s.CreateKey(ctx, store.Key{AccountID: "acct_missing", Hash: hash(unique("k"))}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a key for nobody: %v", err)
	}
	var keys []store.Key
	for i := 0; i < store.MaxActiveKeys; i++ {
		keys = append(keys, newKey(t, s, a.ID, nil))
	}
	active(store.MaxActiveKeys)
	if _, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: hash(unique("k")), Prefix: "mn_abcd", Last4: "aaaa"}); !errors.Is(err, store.ErrTooManyKeys) {
		t.Fatalf("sixth active key: %v", err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, keys[0].ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	active(4)
	if _, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: keys[1].Hash, Prefix: "mn_abcd", Last4: "aaaa"}); err == nil || errors.Is(err, store.ErrTooManyKeys) {
		t.Errorf("a hash is stored once: %v", err)
	}
	active(4)
	sixth := newKey(t, s, a.ID, nil) // the revoked key freed a slot
	if _, err := s.SetKeyStatus(ctx, a.ID, keys[0].ID, store.KeyActive); !errors.Is(err, store.ErrTooManyKeys) {
		t.Errorf("reactivating past the cap: %v", err)
	}
	active(store.MaxActiveKeys)
	if list, _ := s.Keys(ctx, a.ID); len(list) != 6 || list[5].ID != sixth.ID {
		t.Errorf("keys oldest first, revoked included: %d", len(list))
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, sixth.ID, store.KeyDeleted); err != nil {
		t.Fatal(err)
	}
	active(4)
	if got, err := s.SetKeyStatus(ctx, a.ID, keys[0].ID, store.KeyActive); err != nil || got.Status != store.KeyActive {
		t.Fatalf("reactivating in the slot a deletion freed: %+v %v", got, err)
	}
	active(store.MaxActiveKeys)
	list, err := s.Keys(ctx, a.ID)
	if err != nil || len(list) != len(keys) {
		t.Fatalf("keys without the deleted one: %d %v", len(list), err)
	}
	for i := range list {
		if list[i].ID != keys[i].ID || list[i].Status != store.KeyActive || i > 0 && list[i].CreatedAt.Before(list[i-1].CreatedAt) {
			t.Errorf("keys oldest first: %d is %+v", i, list[i])
		}
	}
}

func testConcurrentKeyCreation(t *testing.T, s store.Store) {
	a := newAccount(t, s, 0)
	var ok, capped atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: hash(unique("k")), Prefix: "mn_abcd", Last4: "aaaa"})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, store.ErrTooManyKeys):
				capped.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != store.MaxActiveKeys || capped.Load() != 12-store.MaxActiveKeys {
		t.Errorf("%d created, %d capped", ok.Load(), capped.Load())
	}
	if acct, _ := s.Account(ctx, a.ID); acct.ActiveKeys != store.MaxActiveKeys {
		t.Errorf("active keys %d", acct.ActiveKeys)
	}
	if list, err := s.Keys(ctx, a.ID); err != nil || len(list) != store.MaxActiveKeys {
		t.Errorf("%d keys stored: %v", len(list), err)
	}
}

// Racing revocations, reactivations and deletions keep active_keys equal
// to the number of active keys. Keys 0-2 only flip between revoked and
// active, which never fails; key 3 is also deleted, after which every
// change to it is ErrKeyDeleted.
func testConcurrentStatusChanges(t *testing.T, s store.Store) {
	a := newAccount(t, s, 0)
	var keys []store.Key
	for i := 0; i < 4; i++ {
		keys = append(keys, newKey(t, s, a.ID, nil))
	}
	var wg sync.WaitGroup
	for i := 0; i < 80; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k, round := keys[i%4], i/4
			if i%4 < 3 {
				if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, []store.KeyStatus{store.KeyRevoked, store.KeyActive}[round%2]); err != nil {
					t.Error(err)
				}
				return
			}
			to := []store.KeyStatus{store.KeyRevoked, store.KeyActive, store.KeyDeleted}[round%3]
			if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, to); err != nil && !errors.Is(err, store.ErrKeyDeleted) {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	active := 0
	for _, k := range keys {
		got, err := s.Key(ctx, a.ID, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == store.KeyActive {
			active++
		}
	}
	if got, _ := s.Key(ctx, a.ID, keys[3].ID); got.Status != store.KeyDeleted {
		t.Errorf("a deletion is final, key 3 is %s", got.Status)
	}
	listed := 0
	list, _ := s.Keys(ctx, a.ID)
	for _, k := range list {
		if k.Status == store.KeyActive {
			listed++
		}
	}
	if acct, _ := s.Account(ctx, a.ID); acct.ActiveKeys != active || listed != active || len(list) != 3 {
		t.Errorf("active_keys %d but %d keys are active (%d listed active of %d)", acct.ActiveKeys, active, listed, len(list))
	}
}

func testUpdateKey(t *testing.T, s store.Store) {
	a := newAccount(t, s, 100)
	k := newKey(t, s, a.ID, nil)
	name := "production"
	got, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{Name: &name, SetLimit: true, CreditLimit: ptr(10)})
	if err != nil || got.ID != k.ID || got.Name != "production" || got.CreditLimit == nil || *got.CreditLimit != 10 ||
		got.Status != store.KeyActive || got.Hash != k.Hash || got.Prefix != k.Prefix || got.Last4 != k.Last4 {
		t.Fatalf("update: %+v %v", got, err)
	}
	got, err = s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{})
	if err != nil || got.Name != "production" || *got.CreditLimit != 10 {
		t.Errorf("an empty change changes nothing: %+v %v", got, err)
	}
	got, err = s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true})
	if err != nil || got.CreditLimit != nil || got.Name != "production" {
		t.Errorf("removing the cap: %+v %v", got, err)
	}
	if read, _ := s.Key(ctx, a.ID, k.ID); read.CreditLimit != nil || read.Name != "production" {
		t.Errorf("the change is stored: %+v", read)
	}
	if _, err := s.UpdateKey(ctx, a.ID, "key_missing", store.KeyChange{Name: &name}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: ptr(-1)}); err == nil {
		t.Error("a negative credit limit")
	}
	if read, _ := s.Key(ctx, a.ID, k.ID); read.CreditLimit != nil {
		t.Errorf("a refused limit is stored: %d", *read.CreditLimit)
	}
}

func testReserveAndSettle(t *testing.T, s store.Store) {
	a := newAccount(t, s, 100)
	k := newKey(t, s, a.ID, ptr(50))
	c := charge(a, k, 3)
	r, err := s.Reserve(ctx, c)
	if err != nil || r.CreditsRemaining != 97 || r.DebitEntryID == "" || r.RequestID != c.RequestID {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 3 {
		t.Errorf("key credits_used %d", got.CreditsUsed)
	}
	if acct, _ := s.Account(ctx, a.ID); acct.CreditsRemaining != 97 || acct.CreditsLifetime != 100 || !acct.BalanceChangedAt.After(a.BalanceChangedAt) && !acct.BalanceChangedAt.Equal(a.BalanceChangedAt) {
		t.Errorf("account after reserve %+v", acct)
	}
	e := CheckLedger(t, s, a.ID)[0]
	if e.ID != r.DebitEntryID || e.Type != store.EntryDebit || e.Amount != -3 || e.BalanceAfter != 97 || e.RequestID != c.RequestID ||
		e.Endpoint != c.Endpoint || e.KeyID != k.ID || e.KeyPrefix != "mn_abcd" || e.CreatedAt.IsZero() {
		t.Errorf("debit entry %+v", e)
	}
	for i := 0; i < 2; i++ {
		if err := s.Settle(ctx, a.ID, c.RequestID); err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
	}
	if _, err := s.Refund(ctx, a.ID, c.RequestID); !errors.Is(err, store.ErrSettled) {
		t.Errorf("a settled charge is kept: %v", err)
	}
	if _, err := s.Reserve(ctx, c); !errors.Is(err, store.ErrDuplicateRequest) {
		t.Errorf("the same request id twice: %v", err)
	}
	if err := s.Settle(ctx, a.ID, "req_unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("settling nothing: %v", err)
	}
	if balance(t, s, a.ID) != 97 {
		t.Error("refusals charged something")
	}
}

// A charge costs more than 0: a debit of 0 or less would break the books
// (a negative one would mint credits).
func testReservePositiveCost(t *testing.T, s store.Store) {
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, ptr(5))
	for _, cost := range []int64{0, -3} {
		if _, err := s.Reserve(ctx, charge(a, k, cost)); err == nil {
			t.Errorf("a reservation of %d went through", cost)
		}
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 0 {
		t.Errorf("credits_used %d", got.CreditsUsed)
	}
	if b := balance(t, s, a.ID); b != 10 {
		t.Errorf("balance %d", b)
	}
	CheckLedger(t, s, a.ID)
}

func testReserveRefusals(t *testing.T, s store.Store) {
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, ptr(5))
	missing := k
	missing.ID = "key_missing"
	if _, err := s.Reserve(ctx, charge(a, missing, 1)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown key: %v", err)
	}
	other := newAccount(t, s, 10)
	if _, err := s.Reserve(ctx, charge(other, k, 1)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a key of another account: %v", err)
	}
	// Over both the key's limit and the wallet: the key's limit is reported.
	var limit *store.KeyLimitError
	if _, err := s.Reserve(ctx, charge(a, k, 11)); !errors.As(err, &limit) || limit.CreditLimit != 5 || limit.CreditsUsed != 0 {
		t.Errorf("key limit first: %v", err)
	}
	if _, err := s.Reserve(ctx, charge(a, k, 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, charge(a, k, 2)); !errors.As(err, &limit) || limit.CreditLimit != 5 || limit.CreditsUsed != 4 {
		t.Fatalf("over the key's limit: %v", err)
	}
	if _, err := s.Reserve(ctx, charge(a, k, 1)); err != nil {
		t.Errorf("exactly at the limit is allowed: %v", err)
	}
	free := newKey(t, s, a.ID, nil)
	var short *store.InsufficientCreditsError
	if _, err := s.Reserve(ctx, charge(a, free, 6)); !errors.As(err, &short) || short.Required != 6 || short.Remaining != 5 {
		t.Fatalf("over the balance: %v", err)
	}
	if _, err := s.Reserve(ctx, charge(a, k, 100)); !errors.As(err, &limit) || limit.CreditLimit != 5 || limit.CreditsUsed != 5 {
		t.Errorf("key limit first, again: %v", err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, free.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, charge(a, free, 1)); !errors.Is(err, store.ErrKeyInactive) {
		t.Errorf("a revoked key: %v", err)
	}
	// A limit lowered below what is used is allowed and refuses every further charge.
	if got, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: ptr(2)}); err != nil || got.CreditLimit == nil || *got.CreditLimit != 2 || got.CreditsUsed != 5 {
		t.Fatalf("lowering the limit: %+v %v", got, err)
	}
	if _, err := s.Reserve(ctx, charge(a, k, 1)); !errors.As(err, &limit) || limit.CreditLimit != 2 || limit.CreditsUsed != 5 {
		t.Errorf("limit below used: %v", err)
	}
	// Uncapped again, the key is held back only by the wallet.
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, charge(a, k, 6)); !errors.As(err, &short) || short.Required != 6 || short.Remaining != 5 {
		t.Errorf("uncapped, over the balance: %v", err)
	}
	if balance(t, s, a.ID) != 5 || balance(t, s, other.ID) != 10 {
		t.Errorf("refusals charged: balances %d and %d", balance(t, s, a.ID), balance(t, s, other.ID))
	}
	CheckLedger(t, s, a.ID)
	CheckLedger(t, s, other.ID)
}

func testRefund(t *testing.T, s store.Store) {
	a := newAccount(t, s, 20)
	k := newKey(t, s, a.ID, ptr(10))
	c := charge(a, k, 7)
	if r, err := s.Reserve(ctx, c); err != nil || r.CreditsRemaining != 13 {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	// The balance moves between reserve and refund; the refund builds on it.
	if _, err := s.Grant(ctx, a.ID, 100, "", unique("req_")); err != nil {
		t.Fatal(err)
	}
	after, err := s.Refund(ctx, a.ID, c.RequestID)
	if err != nil || after != 120 {
		t.Fatalf("refund: %d %v", after, err)
	}
	again, err := s.Refund(ctx, a.ID, c.RequestID)
	if err != nil || again != 120 {
		t.Errorf("a second refund refunds nothing: %d %v", again, err)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 0 {
		t.Errorf("the key's budget is returned: %d", got.CreditsUsed)
	}
	entries := CheckLedger(t, s, a.ID)
	var debit, refund *store.Entry
	for i, e := range entries {
		if e.RequestID != c.RequestID {
			continue
		}
		if e.KeyID != k.ID || e.Endpoint != c.Endpoint || e.KeyPrefix != "mn_abcd" {
			t.Errorf("entry of the request %+v", e)
		}
		switch e.Type {
		case store.EntryDebit:
			debit = &entries[i]
		case store.EntryRefund:
			if refund != nil {
				t.Error("two refunds")
			}
			refund = &entries[i]
		default:
			t.Errorf("entry of the request %+v", e)
		}
	}
	if debit == nil || refund == nil || debit.Amount+refund.Amount != 0 || refund.BalanceAfter != 120 {
		t.Errorf("debit %+v refund %+v", debit, refund)
	}
	if err := s.Settle(ctx, a.ID, c.RequestID); !errors.Is(err, store.ErrRefunded) {
		t.Errorf("a refunded reservation cannot be settled: %v", err)
	}
	if _, err := s.Refund(ctx, a.ID, "req_unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refunding nothing: %v", err)
	}
	other := newAccount(t, s, 5)
	for _, in := range []string{other.ID, "acct_missing"} {
		if _, err := s.Refund(ctx, in, c.RequestID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refunding in account %s: %v", in, err)
		}
	}
	// A refund still lands after the key was revoked.
	c2 := charge(a, k, 2)
	if _, err := s.Reserve(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	if after, err := s.Refund(ctx, a.ID, c2.RequestID); err != nil || after != 120 {
		t.Errorf("refund after revocation: %d %v", after, err)
	}
	if acct, _ := s.Account(ctx, a.ID); acct.CreditsRemaining != 120 || acct.CreditsLifetime != 120 {
		t.Errorf("account %+v", acct)
	}
	CheckLedger(t, s, a.ID)
	CheckLedger(t, s, other.ID)
}

func testLedger(t *testing.T, s store.Store) {
	a := newAccount(t, s, 1000)
	k := newKey(t, s, a.ID, nil)
	const n = 130
	var ids []string
	for i := 0; i < n; i++ {
		c := charge(a, k, 1)
		ids = append(ids, c.RequestID)
		if _, err := s.Reserve(ctx, c); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			if _, err := s.Refund(ctx, a.ID, c.RequestID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A request deep in the ledger refunded last: its entries stand at both
	// ends, more than a page of other entries apart.
	if _, err := s.Refund(ctx, a.ID, ids[3]); err != nil {
		t.Fatal(err)
	}
	const total = 1 + n + n/5 + 1
	entries := allEntries(t, s, a.ID, store.LedgerQuery{Limit: 7})
	if len(entries) != total {
		t.Fatalf("%d entries through the cursor, want %d", len(entries), total)
	}
	if entries[len(entries)-1].Type != store.EntryGrant || entries[0].Type != store.EntryRefund || entries[0].RequestID != ids[3] {
		t.Errorf("oldest %+v newest %+v", entries[len(entries)-1], entries[0])
	}
	// Pages of any size continue each other.
	for i, e := range CheckLedger(t, s, a.ID) {
		if e.ID != entries[i].ID {
			t.Fatalf("entry %d: %s in pages of 100, %s in pages of 7", i, e.ID, entries[i].ID)
		}
	}
	first, err := s.Ledger(ctx, a.ID, store.LedgerQuery{Limit: 100})
	if err != nil || len(first.Entries) != 100 || first.NextCursor == "" {
		t.Fatalf("first page: %d %q %v", len(first.Entries), first.NextCursor, err)
	}
	last, err := s.Ledger(ctx, a.ID, store.LedgerQuery{Limit: total - 100, Cursor: first.NextCursor})
	if err != nil || len(last.Entries) != total-100 || last.NextCursor != "" || last.Entries[0].ID != entries[100].ID {
		t.Errorf("an exact last page has no cursor: %d %q %v", len(last.Entries), last.NextCursor, err)
	}

	byRequest := allEntries(t, s, a.ID, store.LedgerQuery{RequestID: ids[5]})
	if len(byRequest) != 2 || byRequest[0].Type != store.EntryRefund || byRequest[1].Type != store.EntryDebit {
		t.Errorf("entries of one request: %+v", byRequest)
	}
	if got := allEntries(t, s, a.ID, store.LedgerQuery{RequestID: ids[6]}); len(got) != 1 || got[0].Type != store.EntryDebit {
		t.Errorf("one debit: %+v", got)
	}
	// Filtering finds entries however far apart, and pages them too.
	deep, err := s.Ledger(ctx, a.ID, store.LedgerQuery{RequestID: ids[3]})
	if err != nil || len(deep.Entries) != 2 || deep.NextCursor != "" || deep.Entries[0].Type != store.EntryRefund || deep.Entries[1].Type != store.EntryDebit {
		t.Errorf("entries of a request far apart: %+v %v", deep, err)
	}
	one, err := s.Ledger(ctx, a.ID, store.LedgerQuery{RequestID: ids[3], Limit: 1})
	if err != nil || len(one.Entries) != 1 || one.Entries[0].Type != store.EntryRefund || one.NextCursor == "" {
		t.Fatalf("by request, one a page: %+v %v", one, err)
	}
	two, err := s.Ledger(ctx, a.ID, store.LedgerQuery{RequestID: ids[3], Limit: 1, Cursor: one.NextCursor})
	if err != nil || len(two.Entries) != 1 || two.Entries[0].Type != store.EntryDebit || two.NextCursor != "" {
		t.Errorf("by request, the second page: %+v %v", two, err)
	}
	if none, err := s.Ledger(ctx, a.ID, store.LedgerQuery{RequestID: "req_none"}); err != nil || len(none.Entries) != 0 || none.NextCursor != "" {
		t.Errorf("no entries: %+v %v", none, err)
	}

	for _, bad := range []string{"!!!", "%%%", "bm90LWEtY3Vyc29y"} {
		if _, err := s.Ledger(ctx, a.ID, store.LedgerQuery{Cursor: bad}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
	other := newAccount(t, s, 5)
	if _, err := s.Ledger(ctx, other.ID, store.LedgerQuery{Cursor: first.NextCursor}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("another account's cursor: %v", err)
	}
	if empty, err := s.Ledger(ctx, "acct_missing", store.LedgerQuery{}); err != nil || len(empty.Entries) != 0 || empty.NextCursor != "" {
		t.Errorf("an unknown account: %+v %v", empty, err)
	}
}

// reserveMany runs n concurrent reservations and counts outcomes; every
// outcome must be consistent with the charge.
func reserveMany(t *testing.T, s store.Store, a store.Account, k store.Key, n int, cost int64) (ok, limited, short int) {
	var okN, limitN, shortN atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var le *store.KeyLimitError
			var ie *store.InsufficientCreditsError
			r, err := s.Reserve(ctx, charge(a, k, cost))
			switch {
			case err == nil:
				okN.Add(1)
				if r.CreditsRemaining < 0 || r.DebitEntryID == "" {
					t.Errorf("reservation %+v", r)
				}
			case errors.As(err, &le):
				limitN.Add(1)
				if le.CreditsUsed+cost <= le.CreditLimit {
					t.Errorf("key limit %+v for a cost of %d", le, cost)
				}
			case errors.As(err, &ie):
				shortN.Add(1)
				if ie.Required != cost || ie.Remaining >= cost || ie.Remaining < 0 {
					t.Errorf("insufficient %+v for a cost of %d", ie, cost)
				}
			default:
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	return int(okN.Load()), int(limitN.Load()), int(shortN.Load())
}

// checkSpent proves that the key and the wallet were charged exactly spent
// credits since a was opened, and the books.
func checkSpent(t *testing.T, s store.Store, a store.Account, k store.Key, spent int64) []store.Entry {
	t.Helper()
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != spent {
		t.Errorf("credits_used %d, want %d", got.CreditsUsed, spent)
	}
	if acct, _ := s.Account(ctx, a.ID); acct.CreditsRemaining != a.CreditsRemaining-spent || acct.CreditsLifetime != a.CreditsLifetime {
		t.Errorf("account %+v, want %d of %d spent", acct, spent, a.CreditsRemaining)
	}
	return CheckLedger(t, s, a.ID)
}

func testConcurrentKeyCap(t *testing.T, s store.Store) {
	a := newAccount(t, s, 10_000)
	k := newKey(t, s, a.ID, ptr(30))
	ok, limited, short := reserveMany(t, s, a, k, 200, 3)
	if ok != 10 || limited != 190 || short != 0 {
		t.Fatalf("%d succeeded, %d KEY_LIMIT_EXCEEDED, %d INSUFFICIENT_CREDITS; want 10/190/0", ok, limited, short)
	}
	if entries := checkSpent(t, s, a, k, 30); len(entries) != 1+10 {
		t.Errorf("%d entries, want the grant and 10 debits", len(entries))
	}
}

func testConcurrentWallet(t *testing.T, s store.Store) {
	a := newAccount(t, s, 30)
	k := newKey(t, s, a.ID, nil)
	ok, limited, short := reserveMany(t, s, a, k, 200, 3)
	if ok != 10 || short != 190 || limited != 0 {
		t.Fatalf("%d succeeded, %d INSUFFICIENT_CREDITS, %d KEY_LIMIT_EXCEEDED; want 10/190/0", ok, short, limited)
	}
	checkSpent(t, s, a, k, 30)
}

// A key's limit changing under concurrent reservations never refuses one
// it allows before and after, and every reservation is counted once.
func testReserveWhileTheLimitChanges(t *testing.T, s store.Store) {
	a := newAccount(t, s, 1000)
	k := newKey(t, s, a.ID, ptr(1000))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 30; i++ {
			limit := []*int64{ptr(1000), nil, ptr(999)}[i%3]
			if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: limit}); err != nil {
				t.Error(err)
			}
		}
	}()
	ok, limited, short := reserveMany(t, s, a, k, 40, 1)
	<-done
	if ok != 40 || limited != 0 || short != 0 {
		t.Errorf("%d succeeded, %d KEY_LIMIT_EXCEEDED, %d INSUFFICIENT_CREDITS; want 40/0/0", ok, limited, short)
	}
	checkSpent(t, s, a, k, 40)
}

// A capped key's spend survives revocations and reactivations racing its
// reservations and refunds: a charge is accepted only while the key is
// active and within its cap, each refund gives its credits back to the key
// whether it is active then or not, and afterwards credits_used is exactly
// the net of what was charged, never above the cap.
func testSpendThroughStatusChanges(t *testing.T, s store.Store) {
	a := newAccount(t, s, 1000)
	k := newKey(t, s, a.ID, ptr(40))
	var wg sync.WaitGroup
	var net atomic.Int64
	for i := 0; i < 120; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%4 == 0 {
				to := []store.KeyStatus{store.KeyRevoked, store.KeyActive}[(i/4)%2]
				if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, to); err != nil {
					t.Error(err)
				}
				return
			}
			c := charge(a, k, 1)
			var limit *store.KeyLimitError
			_, err := s.Reserve(ctx, c)
			switch {
			case errors.Is(err, store.ErrKeyInactive) || errors.As(err, &limit):
				return
			case err != nil:
				t.Error(err)
				return
			}
			net.Add(1)
			if i%3 == 0 {
				if _, err := s.Refund(ctx, a.ID, c.RequestID); err != nil {
					t.Error(err)
					return
				}
				net.Add(-1)
			}
		}(i)
	}
	wg.Wait()
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyActive); err != nil {
		t.Fatal(err)
	}
	if net.Load() == 0 || net.Load() > 40 {
		t.Errorf("net charge %d, want 1 to 40", net.Load())
	}
	checkSpent(t, s, a, k, net.Load())
}

// A limit set on a revoked key while it is being reactivated holds once
// both are done, and is the one enforced: the reactivation cannot bring
// back the limit it read before.
func testLimitChangeWhileReactivated(t *testing.T, s store.Store) {
	a := newAccount(t, s, 1000)
	k := newKey(t, s, a.ID, ptr(500))
	for round := int64(0); round < 20; round++ {
		if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyRevoked); err != nil {
			t.Fatal(err)
		}
		limit := 10 + round
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyActive); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: &limit}); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		if got, err := s.Key(ctx, a.ID, k.ID); err != nil || got.CreditLimit == nil || *got.CreditLimit != limit {
			t.Fatalf("round %d: key %+v (%v), want the limit %d", round, got, err, limit)
		}
		var over *store.KeyLimitError
		if _, err := s.Reserve(ctx, charge(a, k, limit+1)); !errors.As(err, &over) || over.CreditLimit != limit {
			t.Fatalf("round %d: a charge over the limit %d: %v", round, limit, err)
		}
	}
}

// Grants racing reservations: every grant returns the exact account after
// it, every reservation is charged to both the key and the wallet once.
func testConcurrentGrantsAndReserves(t *testing.T, s store.Store) {
	a := newAccount(t, s, 0)
	k := newKey(t, s, a.ID, nil)
	const grants, reserves = 40, 80
	var wg sync.WaitGroup
	lifetimes := make(chan int64, grants)
	var spent atomic.Int64
	for i := 0; i < grants+reserves; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%3 == 0 && i/3 < grants {
				got, err := s.Grant(ctx, a.ID, 5, "", unique("req_g"))
				if err != nil {
					t.Error(err)
					return
				}
				lifetimes <- got.CreditsLifetime
				return
			}
			var short *store.InsufficientCreditsError
			_, err := s.Reserve(ctx, charge(a, k, 2))
			switch {
			case err == nil:
				spent.Add(2)
			case !errors.As(err, &short):
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	close(lifetimes)
	seen := map[int64]bool{}
	for l := range lifetimes {
		seen[l] = true
	}
	for i := int64(1); i <= grants; i++ {
		if !seen[5*i] {
			t.Errorf("no grant returned lifetime %d: %v", 5*i, seen)
		}
	}
	if acct, _ := s.Account(ctx, a.ID); acct.CreditsLifetime != 5*grants || acct.CreditsRemaining != 5*grants-spent.Load() {
		t.Errorf("account %+v, spent %d", acct, spent.Load())
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != spent.Load() {
		t.Errorf("credits_used %d, spent %d", got.CreditsUsed, spent.Load())
	}
	CheckLedger(t, s, a.ID)
}

func testConcurrentReserveAndRefund(t *testing.T, s store.Store) {
	a := newAccount(t, s, 60)
	k := newKey(t, s, a.ID, ptr(40))
	var kept atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := charge(a, k, 2)
			if _, err := s.Reserve(ctx, c); err != nil {
				return // refused: nothing charged
			}
			if i%2 == 0 { // a failed call refunds
				if _, err := s.Refund(ctx, a.ID, c.RequestID); err != nil {
					t.Error(err)
				}
				return
			}
			if err := s.Settle(ctx, a.ID, c.RequestID); err != nil {
				t.Error(err)
			}
			kept.Add(2)
		}(i)
	}
	wg.Wait()
	if b := balance(t, s, a.ID); b != 60-kept.Load() || b < 0 {
		t.Errorf("balance %d, kept %d", b, kept.Load())
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != kept.Load() || got.CreditsUsed > 40 {
		t.Errorf("credits_used %d, kept %d", got.CreditsUsed, kept.Load())
	}
	entries := CheckLedger(t, s, a.ID)
	net := map[string]int64{}
	for _, e := range entries {
		net[e.RequestID] += e.Amount
	}
	var settled int64
	for _, v := range net {
		if v != 0 && v != -2 && v != 60 {
			t.Errorf("a request nets %d", v)
		}
		if v == -2 {
			settled += 2
		}
	}
	if settled != kept.Load() {
		t.Errorf("settled %d, kept %d", settled, kept.Load())
	}
}

// refundAll refunds every charge times times, all at once, and returns the
// balance each refund returned, by request.
func refundAll(t *testing.T, s store.Store, accountID string, charges []store.Charge, times int) map[string][]int64 {
	t.Helper()
	var mu sync.Mutex
	got := map[string][]int64{}
	var wg sync.WaitGroup
	for i := 0; i < len(charges)*times; i++ {
		wg.Add(1)
		go func(c store.Charge) {
			defer wg.Done()
			after, err := s.Refund(ctx, accountID, c.RequestID)
			if err != nil {
				t.Errorf("refund %s: %v", c.RequestID, err)
				return
			}
			mu.Lock()
			got[c.RequestID] = append(got[c.RequestID], after)
			mu.Unlock()
		}(charges[i%len(charges)])
	}
	wg.Wait()
	return got
}

// Racing refunds refund each reservation once, and each returns a
// balance that includes its refund.
func testConcurrentRefunds(t *testing.T, s store.Store) {
	// One reservation, refunded 20 times at once: every refund returns the
	// balance after the one refund.
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, nil)
	c := charge(a, k, 4)
	if _, err := s.Reserve(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, after := range refundAll(t, s, a.ID, []store.Charge{c}, 20)[c.RequestID] {
		if after != 10 {
			t.Errorf("a refund returned %d, want 10", after)
		}
	}
	if got := allEntries(t, s, a.ID, store.LedgerQuery{RequestID: c.RequestID}); len(got) != 2 {
		t.Errorf("one debit and one refund, got %d entries", len(got))
	}
	CheckLedger(t, s, a.ID)

	// Ten reservations of 1 to 10 credits (55 of 100), each refunded four
	// times at once.
	b := newAccount(t, s, 100)
	kb := newKey(t, s, b.ID, ptr(100))
	var charges []store.Charge
	for i := int64(1); i <= 10; i++ {
		c := charge(b, kb, i)
		if _, err := s.Reserve(ctx, c); err != nil {
			t.Fatal(err)
		}
		charges = append(charges, c)
	}
	returned := refundAll(t, s, b.ID, charges, 4)
	var highest int64
	for _, c := range charges {
		for _, after := range returned[c.RequestID] {
			if after < 45+c.Cost || after > 100 {
				t.Errorf("refunding %d returned a balance of %d", c.Cost, after)
			}
			highest = max(highest, after)
		}
	}
	if highest != 100 {
		t.Errorf("the last refund returns the full balance, the highest returned is %d", highest)
	}
	if bal := balance(t, s, b.ID); bal != 100 {
		t.Errorf("balance %d", bal)
	}
	if got, _ := s.Key(ctx, b.ID, kb.ID); got.CreditsUsed != 0 {
		t.Errorf("credits_used %d", got.CreditsUsed)
	}
	entries := CheckLedger(t, s, b.ID)
	if len(entries) != 1+10+10 {
		t.Errorf("%d entries, want the grant, 10 debits and 10 refunds", len(entries))
	}
	net := map[string]int64{}
	for _, e := range entries {
		net[e.RequestID] += e.Amount
	}
	for _, c := range charges {
		if net[c.RequestID] != 0 {
			t.Errorf("request %s nets %d", c.RequestID, net[c.RequestID])
		}
	}
}

func testCache(t *testing.T, s store.Store) {
	c, ok := s.(store.Cache)
	if !ok {
		t.Fatal("the store does not implement store.Cache")
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := unique("cachekey")
	if _, err := c.CacheGet(ctx, key, now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty cache: %v", err)
	}
	if err := c.CachePut(ctx, key, []byte(`{"a":1}`), now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	e, err := c.CacheGet(ctx, key, now.Add(59*time.Second))
	if err != nil || string(e.Data) != `{"a":1}` || !e.StoredAt.Equal(now) || !e.ExpiresAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("hit: %+v %v", e, err)
	}
	if _, err := c.CacheGet(ctx, key, now.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired entry is a miss, whatever TTL deletion has done: %v", err)
	}
	if err := c.CachePut(ctx, key, []byte(`{"a":2}`), now.Add(time.Minute), now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if e, err := c.CacheGet(ctx, key, now.Add(90*time.Second)); err != nil || string(e.Data) != `{"a":2}` {
		t.Errorf("a put replaces: %+v %v", e, err)
	}
	// Large repetitive JSON (a store may compress it) and random bytes
	// (which do not compress) both come back byte for byte.
	large := []byte(`{"items":[`)
	for i := 0; len(large) < 200<<10; i++ {
		large = fmt.Appendf(large, `{"id":"%d","name":"Acme Holdings %d Limited","status":"active"},`, i, i)
	}
	large = append(large[:len(large)-1], "]}"...)
	noise := make([]byte, 8<<10)
	_, _ = rand.Read(noise)
	for _, data := range [][]byte{large, noise} {
		k := unique("large")
		if err := c.CachePut(ctx, k, data, now, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if e, err := c.CacheGet(ctx, k, now); err != nil || !bytes.Equal(e.Data, data) {
			t.Errorf("a %d-byte entry comes back as %d bytes: %v", len(data), len(e.Data), err)
		}
	}
	if err := c.CachePut(ctx, unique("big"), make([]byte, store.MaxCachedBytes+1), now, now.Add(time.Minute)); err == nil {
		t.Error("an oversized entry is refused")
	}
	if err := c.CachePut(ctx, unique("dead"), []byte(`{}`), now, now); err == nil {
		t.Error("an entry that is already expired is refused")
	}
}

func testIdempotency(t *testing.T, s store.Store) {
	st, ok := s.(store.Idempotency)
	if !ok {
		t.Fatal("the store does not implement store.Idempotency")
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	acct, key := unique("acct_"), unique("idem")
	claim := func(fp, rid string, at time.Time) (store.IdempotencyRecord, bool) {
		t.Helper()
		rec, claimed, err := st.ClaimIdempotency(ctx, acct, key, fp, rid, at, at.Add(time.Minute), at.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return rec, claimed
	}
	if rec, claimed := claim("fp1", "req_1", now); !claimed || rec.State != store.IdemInProgress || rec.RequestID != "req_1" {
		t.Fatalf("first claim: %+v %v", rec, claimed)
	}
	if rec, claimed := claim("fp1", "req_2", now.Add(time.Second)); claimed || rec.RequestID != "req_1" || rec.State != store.IdemInProgress || rec.Fingerprint != "fp1" {
		t.Fatalf("in progress: %+v %v", rec, claimed)
	}
	if err := st.CompleteIdempotency(ctx, acct, key, "req_2", 200, []byte(`{}`), now.Add(24*time.Hour)); err == nil {
		t.Error("only the owner completes")
	}
	body := []byte(`{"success":true,"request_id":"req_1"}`)
	if err := st.CompleteIdempotency(ctx, acct, key, "req_1", 200, body, now.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	rec, claimed := claim("fp1", "req_3", now.Add(23*time.Hour))
	if claimed || rec.State != store.IdemStored || rec.Status != 200 || string(rec.Body) != string(body) || rec.RequestID != "req_1" {
		t.Fatalf("stored: %+v %v", rec, claimed)
	}
	if _, claimed := claim("fp2", "req_4", now.Add(24*time.Hour)); !claimed {
		t.Error("after 24 hours the key is free")
	}
	// A request that died: its lease runs out and the key can be taken over.
	key = unique("idem")
	claim("fp", "req_dead", now)
	if _, claimed := claim("fp", "req_next", now.Add(59*time.Second)); claimed {
		t.Error("the lease holds")
	}
	if _, claimed := claim("fp", "req_next", now.Add(time.Minute)); !claimed {
		t.Error("a dead request's claim expires with its lease")
	}
	if err := st.CompleteIdempotency(ctx, acct, key, "req_dead", 200, body, now.Add(24*time.Hour)); err == nil {
		t.Error("the dead request may not complete a key taken over")
	}
	// Release frees the owner's claim only.
	key = unique("idem")
	claim("fp", "req_a", now)
	if err := st.ReleaseIdempotency(ctx, acct, key, "req_other"); err != nil {
		t.Fatal(err)
	}
	if _, claimed := claim("fp", "req_b", now); claimed {
		t.Error("a stranger's release frees nothing")
	}
	if err := st.ReleaseIdempotency(ctx, acct, key, "req_a"); err != nil {
		t.Fatal(err)
	}
	if _, claimed := claim("fp", "req_b", now); !claimed {
		t.Error("the owner's release frees the key")
	}
	// Keys are scoped to the account.
	if _, claimed, _ := st.ClaimIdempotency(ctx, unique("acct_"), key, "fp", "req_c", now, now.Add(time.Minute), now.Add(24*time.Hour)); !claimed {
		t.Error("another account's key is another key")
	}
	// Of many concurrent claims exactly one wins.
	key = unique("idem")
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, claimed, err := st.ClaimIdempotency(ctx, acct, key, "fp", fmt.Sprint("req_", i), now, now.Add(time.Minute), now.Add(24*time.Hour))
			if err != nil {
				t.Error(err)
			}
			if claimed {
				wins.Add(1)
			}
		}(i)
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d concurrent claims won", wins.Load())
	}
}

func testRateWindow(t *testing.T, s store.Store) {
	l, ok := s.(store.Limits)
	if !ok {
		t.Fatal("the store does not implement store.Limits")
	}
	rules := store.DefaultLimits
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key, other := unique("key_"), unique("key_")
	admitted := 0
	for i := 0; i < 700; i++ {
		now := t0.Add(time.Duration(i) * 80 * time.Millisecond) // 700 requests inside 56 seconds
		rid := unique("req_")
		a, err := l.Admit(ctx, key, rid, now, rules, true)
		if err != nil {
			t.Fatal(err)
		}
		if a.Admitted {
			admitted++
			if a.RateRemaining != rules.Rate-admitted || !a.RateReset.Equal(t0.Add(61*time.Second)) || a.RateLimit != 600 {
				t.Fatalf("request %d: remaining %d reset %v", i, a.RateRemaining, a.RateReset)
			}
			if err := l.ReleaseSlots(ctx, key, []string{rid}, now, rules); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if a.Refused != "rate" || a.RetryAfter != t0.Add(61*time.Second).Sub(now) || a.RetryAfter <= 0 {
			t.Fatalf("request %d: refused %q after %v", i, a.Refused, a.RetryAfter)
		}
	}
	if admitted != 600 {
		t.Fatalf("%d of 700 admitted in one minute, want 600", admitted)
	}
	if a, _ := l.Admit(ctx, other, unique("req_"), t0.Add(30*time.Second), rules, true); !a.Admitted {
		t.Error("a second key is unaffected")
	}
	// The first second's entries age out a whole window after that second ends.
	if a, _ := l.Admit(ctx, key, unique("req_"), t0.Add(61*time.Second-time.Millisecond), rules, true); a.Admitted {
		t.Error("still inside the window")
	}
	if a, _ := l.Admit(ctx, key, unique("req_"), t0.Add(61*time.Second), rules, true); !a.Admitted {
		t.Error("the oldest entries aged out")
	}
	// No request counts for less than a window, whatever its fraction of a second.
	key = unique("key_")
	late := t0.Add(999 * time.Millisecond)
	for i := 0; i < 600; i++ {
		if a, _ := l.Admit(ctx, key, unique("req_"), late, rules, false); !a.Admitted {
			t.Fatalf("request %d refused", i)
		}
	}
	if a, _ := l.Admit(ctx, key, unique("req_"), t0.Add(time.Minute), rules, false); a.Admitted || a.RetryAfter != time.Second {
		t.Errorf("59.001 s later the window is still full: %+v", a)
	}
	// A request admitted without a slot takes none.
	if a, _ := l.Admit(ctx, unique("key_"), unique("req_"), t0, rules, false); !a.Admitted || a.SlotsFree != rules.Concurrency {
		t.Errorf("without a slot: %+v", a)
	}
}

func testConcurrencySlots(t *testing.T, s store.Store) {
	l := s.(store.Limits)
	rules := store.DefaultLimits
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := unique("key_")
	var admitted, refused atomic.Int64
	ids := make(chan string, 40)
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rid := unique("req_")
			a, err := l.Admit(ctx, key, rid, now, rules, true)
			switch {
			case err != nil:
				t.Error(err)
			case a.Admitted:
				admitted.Add(1)
				ids <- rid
			case a.Refused == "concurrency" && a.RetryAfter == time.Second:
				refused.Add(1)
			default:
				t.Errorf("%+v", a)
			}
		}()
	}
	wg.Wait()
	close(ids)
	if admitted.Load() != 25 || refused.Load() != 15 {
		t.Fatalf("%d admitted, %d refused; want 25 in flight at most", admitted.Load(), refused.Load())
	}
	first := <-ids
	if err := l.ReleaseSlots(ctx, key, []string{first}, now, rules); err != nil {
		t.Fatal(err)
	}
	a, _ := l.Admit(ctx, key, unique("req_"), now, rules, true)
	if !a.Admitted || a.SlotsFree != 0 {
		t.Errorf("a released slot is free again: %+v", a)
	}
	if a, _ := l.Admit(ctx, key, unique("req_"), now.Add(rules.Lease-time.Millisecond), rules, true); a.Admitted {
		t.Error("leases still hold")
	}
	// Requests that died without releasing: their slots come back after the lease.
	if a, _ := l.Admit(ctx, key, unique("req_"), now.Add(rules.Lease), rules, true); !a.Admitted || a.SlotsFree != 24 {
		t.Errorf("after the lease: %+v", a)
	}
	if err := l.ReleaseSlots(ctx, key, []string{"req_unknown"}, now, rules); err != nil {
		t.Errorf("releasing nothing is fine: %v", err)
	}
	// A slot taken later (after an Idempotency-Key claim) obeys the same cap.
	key = unique("key_")
	var held []string
	for i := 0; i < rules.Concurrency; i++ {
		rid := unique("req_")
		if a, _ := l.TakeSlot(ctx, key, rid, now, rules); !a.Admitted {
			t.Fatalf("slot %d refused", i)
		}
		held = append(held, rid)
	}
	if a, _ := l.TakeSlot(ctx, key, unique("req_"), now, rules); a.Admitted || a.Refused != "concurrency" || a.RetryAfter != time.Second {
		t.Errorf("a 26th slot: %+v", a)
	}
	// A batch's items free their slots in one write: exactly those come
	// back; an id holding no slot, or named twice, frees nothing more.
	if err := l.ReleaseSlots(ctx, key, []string{held[3], "req_unknown", held[7], held[3], held[11]}, now, rules); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if a, _ := l.TakeSlot(ctx, key, unique("req_"), now, rules); !a.Admitted || a.SlotsFree != 2-i {
			t.Fatalf("freed slot %d: %+v", i, a)
		}
	}
	if a, _ := l.TakeSlot(ctx, key, unique("req_"), now, rules); a.Admitted {
		t.Errorf("three freed, a fourth taken: %+v", a)
	}
	if err := l.ReleaseSlots(ctx, key, nil, now, rules); err != nil {
		t.Errorf("releasing no slot: %v", err)
	}
	if a, _ := l.Admit(ctx, key, unique("req_"), now, rules, false); !a.Admitted {
		t.Error("full slots do not refuse a request that takes none")
	}
}

// Enter authenticates a key by its hash and admits its request in one
// step; a key that is not active, or unknown, is refused and counts
// nothing; a status change applies to the very next Enter.
func testGate(t *testing.T, s store.Store) {
	g, ok := s.(store.Gate)
	if !ok {
		t.Fatal("the store does not implement store.Gate")
	}
	rules := store.DefaultLimits
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, nil)
	got, adm, err := g.Enter(ctx, k.Hash, unique("req_"), now, rules, true)
	if err != nil || got.ID != k.ID || got.AccountID != a.ID || got.Prefix != k.Prefix || got.Status != store.KeyActive {
		t.Fatalf("enter: %+v %v", got, err)
	}
	if !adm.Admitted || adm.RateRemaining != rules.Rate-1 || adm.SlotsFree != rules.Concurrency-1 {
		t.Fatalf("admission %+v", adm)
	}
	if _, _, err := g.Enter(ctx, hash(unique("nokey")), unique("req_"), now, rules, true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	for _, to := range []store.KeyStatus{store.KeyRevoked, store.KeyActive, store.KeyDeleted} {
		if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, to); err != nil {
			t.Fatal(err)
		}
		_, adm, err := g.Enter(ctx, k.Hash, unique("req_"), now, rules, true)
		switch {
		case to == store.KeyActive && (err != nil || !adm.Admitted):
			t.Errorf("reactivated: %+v %v", adm, err)
		case to == store.KeyActive && adm.RateRemaining != rules.Rate-2:
			// The refused Enter of the revoked key counted nothing.
			t.Errorf("after a refused Enter: %+v", adm)
		case to != store.KeyActive && !errors.Is(err, store.ErrKeyInactive):
			t.Errorf("%s key: %v", to, err)
		}
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.Status != store.KeyDeleted {
		t.Errorf("the key itself: %+v", got)
	}
}

// Many requests of one key entering at once: at most the key's in-flight
// slots are admitted, a released slot (with the stale entries its
// admission named) is free again, and refusals leave nothing behind.
func testConcurrentGate(t *testing.T, s store.Store) {
	g := s.(store.Gate)
	l := s.(store.Limits)
	rules := store.DefaultLimits
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, nil)
	type entered struct {
		rid string
		adm store.Admission
	}
	var admitted, refused atomic.Int64
	in := make(chan entered, 60)
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rid := unique("req_")
			_, adm, err := g.Enter(ctx, k.Hash, rid, now, rules, true)
			switch {
			case err != nil:
				t.Error(err)
			case adm.Admitted:
				admitted.Add(1)
				in <- entered{rid, adm}
			case adm.Refused == "concurrency":
				refused.Add(1)
			default:
				t.Errorf("%+v", adm)
			}
		}()
	}
	wg.Wait()
	close(in)
	if admitted.Load() != int64(rules.Concurrency) || refused.Load() != 60-int64(rules.Concurrency) {
		t.Fatalf("%d admitted, %d refused; want %d in flight at most", admitted.Load(), refused.Load(), rules.Concurrency)
	}
	for e := range in {
		if err := l.ReleaseSlots(ctx, k.Hash, []string{e.rid}, now, rules, e.adm.Stale...); err != nil {
			t.Fatal(err)
		}
	}
	_, adm, err := g.Enter(ctx, k.Hash, unique("req_"), now, rules, true)
	if err != nil || !adm.Admitted || adm.SlotsFree != rules.Concurrency-1 || adm.RateRemaining != rules.Rate-rules.Concurrency-1 {
		t.Errorf("after every release, refusals recorded nothing: %+v %v", adm, err)
	}
	// A minute and more later the window is empty again.
	_, adm, err = g.Enter(ctx, k.Hash, unique("req_"), now.Add(2*time.Minute+time.Second), rules, false)
	if err != nil || !adm.Admitted || adm.RateRemaining != rules.Rate-1 || adm.SlotsFree != rules.Concurrency {
		t.Errorf("two minutes later: %+v %v", adm, err)
	}
}

func testFairUse(t *testing.T, s store.Store) {
	f, ok := s.(store.FairUse)
	if !ok {
		t.Fatal("the store does not implement store.FairUse")
	}
	day0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	acct := unique("acct_")
	add := func(n int64, at time.Time) int64 {
		t.Helper()
		total, err := f.AddFairUse(ctx, acct, "web/social-profiles", n, at)
		if err != nil {
			t.Fatal(err)
		}
		return total
	}
	used := func(at time.Time) int64 {
		t.Helper()
		u, err := f.FairUseUsed(ctx, acct, "web/social-profiles", at)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if used(day0) != 0 {
		t.Fatal("nothing used yet")
	}
	if add(5, day0) != 5 || add(2, day0.Add(time.Hour)) != 7 || add(3, day0.AddDate(0, 0, 10)) != 10 {
		t.Fatal("totals")
	}
	if u := used(day0.AddDate(0, 0, 30)); u != 10 {
		t.Errorf("an attempt counts for at least 30 days: %d", u)
	}
	if u := used(day0.AddDate(0, 0, 31)); u != 3 {
		t.Errorf("day 0 rolled out after 31 days: %d", u)
	}
	if u := used(day0.AddDate(0, 0, 41)); u != 0 {
		t.Errorf("all rolled out: %d", u)
	}
	if u, _ := f.FairUseUsed(ctx, acct, "bundle/creator-vetting", day0); u != 0 {
		t.Error("endpoints count apart")
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.AddFairUse(ctx, acct, "search/all", 1, day0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if u, _ := f.FairUseUsed(ctx, acct, "search/all", day0); u != 20 {
		t.Errorf("concurrent counts are all kept: %d", u)
	}
}

func testOutcomes(t *testing.T, s store.Store) {
	o, ok := s.(store.Outcomes)
	if !ok {
		t.Fatal("the store does not implement store.Outcomes")
	}
	now := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
	platform := unique("platform_")
	types := map[int]string{404: "RESOURCE_NOT_FOUND", 501: "ENDPOINT_NOT_AVAILABLE", 502: "UPSTREAM_ERROR", 504: "UPSTREAM_TIMEOUT"}
	record := func(at time.Time, status int, ms int) {
		t.Helper()
		out := store.Outcome{Platform: platform, Status: status, ErrorType: types[status], Latency: time.Duration(ms) * time.Millisecond}
		if recorded, err := recordOutcome(o, unique("req_"), out, at); err != nil || !recorded {
			t.Errorf("record: %v %v", recorded, err)
		}
	}
	// Outside the window (15 minute buckets, this one included): never counted.
	record(now.Add(-20*time.Minute), 502, 9000)
	record(now.Add(-15*time.Minute), 502, 9000)
	// Inside: 20 requests, 2 server errors, 1 client error, 1 unrouted.
	for i := 0; i < 16; i++ {
		record(now.Add(-time.Duration(i%10)*time.Minute), 200, 20+i) // 25 ms bucket for i<6, 50 ms for the rest
	}
	record(now.Add(-3*time.Minute), 404, 5)
	record(now.Add(-2*time.Minute), 501, 1)
	record(now.Add(-1*time.Minute), 502, 700)
	record(now, 504, 30000)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); record(now.Add(-14*time.Minute), 200, 60) }()
	}
	wg.Wait()
	got, err := o.OutcomesSince(ctx, now.Add(-store.StatusWindow), now)
	if err != nil {
		t.Fatal(err)
	}
	ps := store.Summarize(platform, got[platform])
	if ps.Requests != 30 || ps.Errors != 2 || ps.ErrorRate != 2.0/30 || ps.State != "degraded" {
		t.Fatalf("%+v", ps)
	}
	if ps.P50MS == nil || *ps.P50MS != 50 || ps.P95MS == nil || *ps.P95MS != 1000 {
		t.Errorf("p50 %v p95 %v", *ps.P50MS, *ps.P95MS)
	}
}

// Reservations whose lease ended while still reserved are listed, oldest
// lease first, and a sweep refunding them from many workers at once
// refunds each exactly once.
func testExpiredReservations(t *testing.T, s store.Store) {
	a := newAccount(t, s, 1000)
	k := newKey(t, s, a.ID, nil)
	b := newAccount(t, s, 100)
	kb := newKey(t, s, b.ID, ptr(50))
	reserve := func(a store.Account, k store.Key, cost int64) store.Charge {
		t.Helper()
		c := charge(a, k, cost)
		if _, err := s.Reserve(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	start := time.Now()
	first := reserve(a, k, 1)
	time.Sleep(1100 * time.Millisecond) // leases may be kept to the second
	open := []store.Charge{first}
	for i := int64(2); i <= 6; i++ {
		open = append(open, reserve(a, k, i))
	}
	open = append(open, reserve(b, kb, 7)) // the sweep spans accounts
	settled, refunded := reserve(a, k, 10), reserve(a, k, 20)
	if err := s.Settle(ctx, a.ID, settled.RequestID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refund(ctx, a.ID, refunded.RequestID); err != nil {
		t.Fatal(err)
	}
	end := time.Now()

	for _, now := range []time.Time{end, end.Add(store.ReservationLease / 2), start.Add(store.ReservationLease - time.Second)} {
		if refs, err := s.ExpiredReservations(ctx, now, 100); err != nil || len(refs) != 0 {
			t.Errorf("leases that have not ended are not listed at %v: %+v %v", now.Sub(start), refs, err)
		}
	}
	if _, err := s.ExpiredReservations(ctx, end, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a limit of 0: %v", err)
	}

	later := time.Now().Add(store.ReservationLease + time.Minute)
	all, err := s.ExpiredReservations(ctx, later, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, c := range open {
		want[c.RequestID] = c.AccountID
	}
	if len(all) != len(open) {
		t.Errorf("%d listed, want the %d still reserved: %+v", len(all), len(open), all)
	}
	for i, r := range all {
		if want[r.RequestID] != r.AccountID {
			t.Errorf("listed %+v: not a reservation still reserved (settled %s, refunded %s)", r, settled.RequestID, refunded.RequestID)
		}
		delete(want, r.RequestID)
		if r.LeaseUntil.Before(start.Add(store.ReservationLease)) || r.LeaseUntil.After(end.Add(store.ReservationLease+time.Second)) {
			t.Errorf("lease of %s ends %v after the test started", r.RequestID, r.LeaseUntil.Sub(start))
		}
		if i > 0 && r.LeaseUntil.Before(all[i-1].LeaseUntil) {
			t.Errorf("not oldest first: %+v after %+v", r, all[i-1])
		}
	}
	if len(want) != 0 {
		t.Errorf("not listed: %v", want)
	}
	if len(all) == 0 || all[0].RequestID != first.RequestID {
		t.Fatalf("the oldest lease first: %+v", all)
	}
	if refs, err := s.ExpiredReservations(ctx, all[0].LeaseUntil, 100); err != nil || len(refs) != 1 || refs[0] != all[0] {
		t.Errorf("a lease ends at LeaseUntil, the next one later: %+v %v", refs, err)
	}
	if refs, err := s.ExpiredReservations(ctx, later, 3); err != nil || len(refs) != 3 || refs[0] != all[0] || refs[1] != all[1] || refs[2] != all[2] {
		t.Errorf("limit 3: %+v %v", refs, err)
	}

	// 20 sweeps at once, each refunding every reservation it lists.
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refs, err := s.ExpiredReservations(ctx, later, 100)
			if err != nil {
				t.Error(err)
				return
			}
			for _, r := range refs {
				if _, err := s.Refund(ctx, r.AccountID, r.RequestID); err != nil {
					t.Errorf("refund %s: %v", r.RequestID, err)
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range open {
		entries := allEntries(t, s, c.AccountID, store.LedgerQuery{RequestID: c.RequestID})
		var debits, refunds int
		for _, e := range entries {
			switch {
			case e.Type == store.EntryDebit && e.Amount == -c.Cost:
				debits++
			case e.Type == store.EntryRefund && e.Amount == c.Cost:
				refunds++
			default:
				t.Errorf("entry of %s: %+v", c.RequestID, e)
			}
		}
		if debits != 1 || refunds != 1 {
			t.Errorf("%s: %d debits and %d refunds, want one of each", c.RequestID, debits, refunds)
		}
	}
	if got := balance(t, s, a.ID); got != 1000-settled.Cost {
		t.Errorf("balance %d, want %d", got, 1000-settled.Cost)
	}
	if got := balance(t, s, b.ID); got != 100 {
		t.Errorf("balance %d, want 100", got)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != settled.Cost {
		t.Errorf("credits_used %d", got.CreditsUsed)
	}
	if got, _ := s.Key(ctx, b.ID, kb.ID); got.CreditsUsed != 0 {
		t.Errorf("credits_used %d", got.CreditsUsed)
	}
	CheckLedger(t, s, a.ID)
	CheckLedger(t, s, b.ID)
	if refs, err := s.ExpiredReservations(ctx, later, 100); err != nil || len(refs) != 0 {
		t.Errorf("refunded reservations leave the list: %+v %v", refs, err)
	}
}

func testOutbox(t *testing.T, s store.Store) {
	ob, ok := s.(store.Outbox)
	if !ok {
		t.Fatal("the store does not implement store.Outbox")
	}
	base := time.Now().UTC().Add(-time.Hour)
	msg := func(i int) store.OutboxMessage {
		// Two messages a second: the id orders messages of the same time.
		return store.OutboxMessage{ID: fmt.Sprintf("msg-%02d", i), Body: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			CreatedAt: base.Add(time.Duration(i/2) * time.Second)}
	}
	var first, second []store.OutboxMessage
	for _, i := range []int{17, 3, 0, 11, 19, 1, 8, 14, 2, 5, 4, 16, 9, 7, 6, 10, 18, 12, 15, 13} {
		first = append(first, msg(i))
	}
	// The same id twice in one put, and again in a later put, with another
	// time and body: the message stored first is kept.
	dup := msg(3)
	dup.Body, dup.CreatedAt = []byte(`{"dup":true}`), base.Add(-time.Minute)
	first = append(first, dup)
	for i := 29; i >= 20; i-- {
		second = append(second, msg(i))
	}
	dup = msg(7)
	dup.Body, dup.CreatedAt = []byte(`{"dup":true}`), base.Add(time.Minute)
	second = append(second, dup)
	// One past retention is not kept at all.
	stale := store.OutboxMessage{ID: "msg-stale", Body: []byte(`{}`), CreatedAt: time.Now().Add(-store.OutboxRetention - time.Hour)}
	second = append(second, stale)
	for _, put := range [][]store.OutboxMessage{first, second} {
		if err := ob.PutOutbox(ctx, put); err != nil {
			t.Fatal(err)
		}
	}
	check := func(limit int, want []int) {
		t.Helper()
		got, err := ob.OutboxBatch(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("limit %d: %d messages, want %d", limit, len(got), len(want))
		}
		for i := 0; i < len(got) && i < len(want); i++ {
			w := msg(want[i])
			if got[i].ID != w.ID || string(got[i].Body) != string(w.Body) || !got[i].CreatedAt.Equal(w.CreatedAt) {
				t.Errorf("limit %d, message %d: %s %s %v, want %s %s %v", limit, i, got[i].ID, got[i].Body, got[i].CreatedAt, w.ID, w.Body, w.CreatedAt)
			}
		}
	}
	seq := func(from, to int, skip ...int) []int {
		var out []int
	next:
		for i := from; i < to; i++ {
			for _, s := range skip {
				if s == i {
					continue next
				}
			}
			out = append(out, i)
		}
		return out
	}
	check(100, seq(0, 30))
	check(10, seq(0, 10))
	check(1, seq(0, 1))
	if _, err := ob.OutboxBatch(ctx, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a limit of 0: %v", err)
	}

	if err := ob.DeleteOutbox(ctx, []string{"msg-00", "msg-03", "msg-04", "msg-29", "msg-unknown", "msg-03"}); err != nil {
		t.Fatal(err)
	}
	check(100, seq(0, 30, 0, 3, 4, 29))
	for _, ids := range [][]string{{"msg-unknown", "msg-stale"}, {}, nil} {
		if err := ob.DeleteOutbox(ctx, ids); err != nil {
			t.Errorf("deleting unknown ids %v: %v", ids, err)
		}
	}
	check(5, []int{1, 2, 5, 6, 7})
	// A deleted id may be stored again.
	if err := ob.PutOutbox(ctx, []store.OutboxMessage{msg(0)}); err != nil {
		t.Fatal(err)
	}
	check(3, []int{0, 1, 2})
	var rest []string
	for _, i := range seq(0, 30, 3, 4, 29) {
		rest = append(rest, msg(i).ID)
	}
	if err := ob.DeleteOutbox(ctx, rest); err != nil {
		t.Fatal(err)
	}
	check(100, nil)
}

// A request counts once in the status counters, however often and however
// concurrently it is recorded, until OutcomeDedupWindow has passed.
func testOutcomesOncePerRequest(t *testing.T, s store.Store) {
	o, ok := s.(store.Outcomes)
	if !ok {
		t.Fatal("the store does not implement store.Outcomes")
	}
	now := time.Now().UTC()
	platform := unique("platform_")
	out := store.Outcome{Platform: platform, Status: 502, ErrorType: "UPSTREAM_ERROR", Latency: 40 * time.Millisecond}
	requests := func(at time.Time) (requests, errs int64) {
		t.Helper()
		got, err := o.OutcomesSince(ctx, at.Add(-store.StatusWindow), at)
		if err != nil {
			t.Fatal(err)
		}
		ps := store.Summarize(platform, got[platform])
		return ps.Requests, ps.Errors
	}
	id := unique("req_")
	var recorded atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Delivered twice, possibly in another second of the minute.
			r, err := recordOutcome(o, id, out, now.Add(-time.Duration(i%3)*time.Second))
			if err != nil {
				t.Error(err)
			}
			if r {
				recorded.Add(1)
			}
		}(i)
	}
	wg.Wait()
	if recorded.Load() != 1 {
		t.Errorf("recorded %d times, want once", recorded.Load())
	}
	if n, e := requests(now); n != 1 || e != 1 {
		t.Errorf("%d requests and %d errors counted, want 1 and 1", n, e)
	}
	for _, other := range []string{unique("req_"), unique("req_")} {
		if r, err := recordOutcome(o, other, out, now); err != nil || !r {
			t.Errorf("another request: %v %v", r, err)
		}
	}
	if r, err := recordOutcome(o, id, out, now.Add(time.Minute)); err != nil || r {
		t.Errorf("the same request a minute later: %v %v", r, err)
	}
	if n, _ := requests(now.Add(time.Minute)); n != 3 {
		t.Errorf("%d requests counted, want 3", n)
	}
	if _, err := recordOutcome(o, "", out, now); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no request id: %v", err)
	}
	// Past the window the id is forgotten.
	after := now.Add(store.OutcomeDedupWindow + time.Minute)
	if r, err := recordOutcome(o, id, out, after); err != nil || !r {
		t.Errorf("the same request after the window: %v %v", r, err)
	}
	if n, _ := requests(after); n != 1 {
		t.Errorf("%d requests counted after the window, want 1", n)
	}
}

func allowances(t *testing.T, s store.Store) store.Allowances {
	t.Helper()
	a, ok := s.(store.Allowances)
	if !ok {
		t.Fatal("the store does not implement store.Allowances")
	}
	return a
}

func testAllowance(t *testing.T, s store.Store) {
	a := allowances(t, s)
	now := time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)
	month := upstream.Month(now)
	if month != "2026-11" {
		t.Fatalf("month %q", month)
	}
	name := unique("provider")
	take := func(limit int64, at time.Time, m string) (int64, bool) {
		t.Helper()
		used, ok, err := a.TakeAllowance(ctx, name, m, limit, at)
		if err != nil {
			t.Fatal(err)
		}
		return used, ok
	}
	if u, err := a.AllowanceUsed(ctx, name, month, now); err != nil || u != 0 {
		t.Fatalf("nothing used yet: %d %v", u, err)
	}
	for i := int64(1); i <= 3; i++ {
		if used, ok := take(3, now, month); !ok || used != i {
			t.Fatalf("take %d: used %d ok %v", i, used, ok)
		}
	}
	if used, ok := take(3, now, month); ok || used != 3 {
		t.Fatalf("past the limit: used %d ok %v", used, ok)
	}
	if u, _ := a.AllowanceUsed(ctx, name, month, now); u != 3 {
		t.Errorf("a refusal counts nothing: %d", u)
	}
	// A raised limit (operator configuration) lets more through.
	if used, ok := take(4, now, month); !ok || used != 4 {
		t.Errorf("raised limit: used %d ok %v", used, ok)
	}
	// A limit of 0 takes nothing.
	if used, ok := take(0, now, month); ok || used != 4 {
		t.Errorf("limit 0: used %d ok %v", used, ok)
	}
	// The next month starts from nothing; providers count apart.
	next := now.Add(time.Second)
	if upstream.Month(next) != "2026-12" {
		t.Fatal("next month")
	}
	if used, ok := take(3, next, upstream.Month(next)); !ok || used != 1 {
		t.Errorf("a new month: used %d ok %v", used, ok)
	}
	if u, _ := a.AllowanceUsed(ctx, unique("provider"), month, now); u != 0 {
		t.Errorf("another provider: %d", u)
	}
	// Last month stays readable through this month, then it is gone
	// (expiry checked on read), and can no longer be taken from.
	if u, _ := a.AllowanceUsed(ctx, name, month, next.AddDate(0, 0, 30)); u != 4 {
		t.Errorf("last month's use, a month on: %d", u)
	}
	gone := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if u, err := a.AllowanceUsed(ctx, name, month, gone); err != nil || u != 0 {
		t.Errorf("an expired month reads 0: %d %v", u, err)
	}
	if _, _, err := a.TakeAllowance(ctx, name, month, 10, gone); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("taking from an expired month: %v", err)
	}
	for _, bad := range []struct {
		name, month string
		limit       int64
	}{{"", month, 1}, {name, "2026-13", 1}, {name, "november", 1}, {name, month, -1}} {
		if _, _, err := a.TakeAllowance(ctx, bad.name, bad.month, bad.limit, now); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("TakeAllowance(%q, %q, %d): %v, want ErrInvalid", bad.name, bad.month, bad.limit, err)
		}
	}
}

// testConcurrentAllowance races many takes on a small limit: exactly the
// limit succeed, each sees a distinct count, and the counter ends at it.
func testConcurrentAllowance(t *testing.T, s store.Store) {
	a := allowances(t, s)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	month := upstream.Month(now)
	name := unique("provider")
	const n, limit = 40, 7
	var ok, refused atomic.Int64
	seen := make([]atomic.Int64, limit+1)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			used, took, err := a.TakeAllowance(ctx, name, month, limit, now)
			switch {
			case err != nil:
				t.Error(err)
			case took && used >= 1 && used <= limit:
				ok.Add(1)
				seen[used].Add(1)
			case !took && used == limit:
				refused.Add(1)
			default:
				t.Errorf("used %d, took %v", used, took)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != limit || refused.Load() != n-limit {
		t.Fatalf("%d took, %d refused; want %d and %d", ok.Load(), refused.Load(), limit, n-limit)
	}
	for i := 1; i <= limit; i++ {
		if seen[i].Load() != 1 {
			t.Errorf("count %d seen %d times", i, seen[i].Load())
		}
	}
	if u, err := a.AllowanceUsed(ctx, name, month, now); err != nil || u != limit {
		t.Errorf("used %d %v, want %d", u, err, limit)
	}
}
