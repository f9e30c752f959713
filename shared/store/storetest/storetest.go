// Package storetest is the conformance suite every store.Store must pass:
// the embedded store and the DynamoDB store run the same tests, including
// the concurrency proofs that money stays exact.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meridian-data/meridian/shared/store"
)

// Factory returns a fresh, empty store for one test.
type Factory func(t *testing.T) store.Store

// Run runs the whole suite.
func Run(t *testing.T, newStore Factory) {
	tests := map[string]func(*testing.T, store.Store){
		"Accounts":                      testAccounts,
		"Grant":                         testGrant,
		"KeyLifecycle":                  testKeyLifecycle,
		"FiveActiveKeys":                testFiveActiveKeys,
		"ConcurrentKeyCreation":         testConcurrentKeyCreation,
		"UpdateKey":                     testUpdateKey,
		"ReserveAndSettle":              testReserveAndSettle,
		"ReserveRefusals":               testReserveRefusals,
		"Refund":                        testRefund,
		"Ledger":                        testLedger,
		"ConcurrentReservationsKeyCap":  testConcurrentKeyCap,
		"ConcurrentReservationsWallet":  testConcurrentWallet,
		"ConcurrentReserveAndRefund":    testConcurrentReserveAndRefund,
		"ConcurrentRefundsRefundOnce":   testConcurrentRefunds,
		"ConcurrentStatusChangesCounts": testConcurrentStatusChanges,
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
	a, err := s.CreateAccount(ctx, credits, hash(unique("console")))
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

// checkLedger proves the books: entries sum to the balance change since
// opening, nothing is negative, and every entry names its request.
func checkLedger(t *testing.T, s store.Store, accountID string) []store.Entry {
	t.Helper()
	a, err := s.Account(ctx, accountID)
	if err != nil {
		t.Fatal(err)
	}
	entries := allEntries(t, s, accountID, store.LedgerQuery{Limit: 100})
	var sum int64
	seen := map[string]bool{}
	for _, e := range entries {
		sum += e.Amount
		if seen[e.ID] {
			t.Errorf("entry %s listed twice", e.ID)
		}
		seen[e.ID] = true
		if e.BalanceAfter < 0 {
			t.Errorf("entry %s leaves a negative balance %d", e.ID, e.BalanceAfter)
		}
		if e.Type != store.EntryGrant && e.RequestID == "" {
			t.Errorf("entry %s names no request", e.ID)
		}
		if e.Type == store.EntryDebit && e.Amount >= 0 || e.Type != store.EntryDebit && e.Amount <= 0 {
			t.Errorf("entry %s: %s of %d", e.ID, e.Type, e.Amount)
		}
	}
	if sum != a.CreditsRemaining {
		t.Errorf("ledger sums to %d, balance is %d", sum, a.CreditsRemaining)
	}
	if a.CreditsRemaining < 0 {
		t.Errorf("negative balance %d", a.CreditsRemaining)
	}
	return entries
}

func testAccounts(t *testing.T, s store.Store) {
	token := hash(unique("console"))
	a, err := s.CreateAccount(ctx, 1000, token)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == "" || a.CreditsRemaining != 1000 || a.CreditsLifetime != 1000 || a.ActiveKeys != 0 || a.BalanceChangedAt.IsZero() {
		t.Errorf("new account %+v", a)
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
	entries := checkLedger(t, s, a.ID)
	if len(entries) != 1 || entries[0].Type != store.EntryGrant || entries[0].BalanceAfter != 1000 {
		t.Errorf("opening grant %+v", entries)
	}
	empty := newAccount(t, s, 0)
	if got := checkLedger(t, s, empty.ID); len(got) != 0 {
		t.Errorf("an empty account has no entries: %+v", got)
	}
}

func testGrant(t *testing.T, s store.Store) {
	a := newAccount(t, s, 10)
	after, err := s.Grant(ctx, a.ID, 25, "top-up", "req_grant1")
	if err != nil || after.CreditsRemaining != 35 || after.CreditsLifetime != 35 {
		t.Fatalf("grant: %+v %v", after, err)
	}
	entries := checkLedger(t, s, a.ID)
	if e := entries[0]; e.Type != store.EntryGrant || e.Amount != 25 || e.BalanceAfter != 35 || e.Note != "top-up" || e.RequestID != "req_grant1" {
		t.Errorf("grant entry %+v", e)
	}
	if _, err := s.Grant(ctx, "acct_missing", 5, "", "req_x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("grant to nobody: %v", err)
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
	step := func(to store.KeyStatus, wantActive int) {
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
	}
	step(store.KeyRevoked, 0)
	step(store.KeyRevoked, 0) // no-op
	step(store.KeyActive, 1)
	step(store.KeyActive, 1) // no-op
	step(store.KeyDeleted, 0)
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyActive); !errors.Is(err, store.ErrKeyDeleted) {
		t.Errorf("a deleted key has no undo: %v", err)
	}
	name := "x"
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{Name: &name}); !errors.Is(err, store.ErrKeyDeleted) {
		t.Errorf("a deleted key cannot be renamed: %v", err)
	}
	if kept, err := s.Key(ctx, a.ID, k.ID); err != nil || kept.Status != store.KeyDeleted {
		t.Errorf("the deleted row is kept: %+v %v", kept, err)
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
	var keys []store.Key
	for i := 0; i < store.MaxActiveKeys; i++ {
		keys = append(keys, newKey(t, s, a.ID, nil))
	}
	if _, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: hash(unique("k")), Prefix: "mn_abcd", Last4: "aaaa"}); !errors.Is(err, store.ErrTooManyKeys) {
		t.Fatalf("sixth active key: %v", err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, keys[0].ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	sixth := newKey(t, s, a.ID, nil) // the revoked key freed a slot
	if _, err := s.SetKeyStatus(ctx, a.ID, keys[0].ID, store.KeyActive); !errors.Is(err, store.ErrTooManyKeys) {
		t.Errorf("reactivating past the cap: %v", err)
	}
	if list, _ := s.Keys(ctx, a.ID); len(list) != 6 || list[5].ID != sixth.ID {
		t.Errorf("keys oldest first, revoked included: %d", len(list))
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
}

func testConcurrentStatusChanges(t *testing.T, s store.Store) {
	a := newAccount(t, s, 0)
	var keys []store.Key
	for i := 0; i < 3; i++ {
		keys = append(keys, newKey(t, s, a.ID, nil))
	}
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			to := []store.KeyStatus{store.KeyRevoked, store.KeyActive}[i%2]
			if _, err := s.SetKeyStatus(ctx, a.ID, keys[i%3].ID, to); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	active := 0
	list, _ := s.Keys(ctx, a.ID)
	for _, k := range list {
		if k.Status == store.KeyActive {
			active++
		}
	}
	if acct, _ := s.Account(ctx, a.ID); acct.ActiveKeys != active {
		t.Errorf("active_keys %d but %d keys are active", acct.ActiveKeys, active)
	}
}

func testUpdateKey(t *testing.T, s store.Store) {
	a := newAccount(t, s, 100)
	k := newKey(t, s, a.ID, nil)
	name := "production"
	got, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{Name: &name, SetLimit: true, CreditLimit: ptr(10)})
	if err != nil || got.Name != "production" || got.CreditLimit == nil || *got.CreditLimit != 10 {
		t.Fatalf("update: %+v %v", got, err)
	}
	got, err = s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{})
	if err != nil || got.Name != "production" || *got.CreditLimit != 10 {
		t.Errorf("an empty change changes nothing: %+v %v", got, err)
	}
	got, err = s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true})
	if err != nil || got.CreditLimit != nil {
		t.Errorf("removing the cap: %+v %v", got, err)
	}
	if _, err := s.UpdateKey(ctx, a.ID, "key_missing", store.KeyChange{Name: &name}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
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
	e := checkLedger(t, s, a.ID)[0]
	if e.ID != r.DebitEntryID || e.Type != store.EntryDebit || e.Amount != -3 || e.BalanceAfter != 97 || e.RequestID != c.RequestID ||
		e.Endpoint != c.Endpoint || e.KeyID != k.ID || e.KeyPrefix != "mn_abcd" || e.CreatedAt.IsZero() {
		t.Errorf("debit entry %+v", e)
	}
	if err := s.Settle(ctx, a.ID, c.RequestID); err != nil {
		t.Fatal(err)
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

func testReserveRefusals(t *testing.T, s store.Store) {
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, ptr(5))
	if _, err := s.Reserve(ctx, charge(a, k, 4)); err != nil {
		t.Fatal(err)
	}
	var limit *store.KeyLimitError
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
	// Both refusals apply: the key's limit is reported first.
	if _, err := s.Reserve(ctx, charge(a, k, 100)); !errors.As(err, &limit) {
		t.Errorf("key limit first: %v", err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, free.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, charge(a, free, 1)); !errors.Is(err, store.ErrKeyInactive) {
		t.Errorf("a revoked key: %v", err)
	}
	// A limit lowered below what is used refuses every further charge.
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: ptr(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, charge(a, k, 1)); !errors.As(err, &limit) || limit.CreditLimit != 2 || limit.CreditsUsed != 5 {
		t.Errorf("limit below used: %v", err)
	}
	if balance(t, s, a.ID) != 5 {
		t.Errorf("balance %d", balance(t, s, a.ID))
	}
	checkLedger(t, s, a.ID)
}

func testRefund(t *testing.T, s store.Store) {
	a := newAccount(t, s, 20)
	k := newKey(t, s, a.ID, ptr(10))
	c := charge(a, k, 7)
	if _, err := s.Reserve(ctx, c); err != nil {
		t.Fatal(err)
	}
	after, err := s.Refund(ctx, a.ID, c.RequestID)
	if err != nil || after != 20 {
		t.Fatalf("refund: %d %v", after, err)
	}
	again, err := s.Refund(ctx, a.ID, c.RequestID)
	if err != nil || again != 20 {
		t.Errorf("a second refund refunds nothing: %d %v", again, err)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 0 {
		t.Errorf("the key's budget is returned: %d", got.CreditsUsed)
	}
	entries := checkLedger(t, s, a.ID)
	var debit, refund *store.Entry
	for i := range entries {
		if entries[i].RequestID == c.RequestID {
			switch entries[i].Type {
			case store.EntryDebit:
				debit = &entries[i]
			case store.EntryRefund:
				if refund != nil {
					t.Error("two refunds")
				}
				refund = &entries[i]
			}
		}
	}
	if debit == nil || refund == nil || debit.Amount+refund.Amount != 0 || refund.BalanceAfter != 20 || refund.Endpoint != c.Endpoint || refund.KeyPrefix != "mn_abcd" {
		t.Errorf("debit %+v refund %+v", debit, refund)
	}
	if err := s.Settle(ctx, a.ID, c.RequestID); err == nil {
		t.Error("a refunded reservation cannot be settled")
	}
	if _, err := s.Refund(ctx, a.ID, "req_unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refunding nothing: %v", err)
	}
	// A refund still lands after the key was revoked.
	c2 := charge(a, k, 2)
	if _, err := s.Reserve(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	if after, err := s.Refund(ctx, a.ID, c2.RequestID); err != nil || after != 20 {
		t.Errorf("refund after revocation: %d %v", after, err)
	}
}

func testLedger(t *testing.T, s store.Store) {
	a := newAccount(t, s, 1000)
	k := newKey(t, s, a.ID, nil)
	var ids []string
	for i := 0; i < 25; i++ {
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
	entries := allEntries(t, s, a.ID, store.LedgerQuery{Limit: 7})
	if len(entries) != 1+25+5 {
		t.Fatalf("%d entries through the cursor", len(entries))
	}
	// Newest first, and each balance_after follows from the one before it.
	for i := 0; i+1 < len(entries); i++ {
		if entries[i].BalanceAfter-entries[i].Amount != entries[i+1].BalanceAfter {
			t.Fatalf("entries %d and %d do not chain: %+v %+v", i, i+1, entries[i], entries[i+1])
		}
	}
	if entries[len(entries)-1].Type != store.EntryGrant || entries[0].BalanceAfter != balance(t, s, a.ID) {
		t.Errorf("oldest %+v newest %+v", entries[len(entries)-1], entries[0])
	}
	checkLedger(t, s, a.ID)
	byRequest := allEntries(t, s, a.ID, store.LedgerQuery{RequestID: ids[5]})
	if len(byRequest) != 2 || byRequest[0].Type != store.EntryRefund || byRequest[1].Type != store.EntryDebit {
		t.Errorf("entries of one request: %+v", byRequest)
	}
	if got := allEntries(t, s, a.ID, store.LedgerQuery{RequestID: ids[6]}); len(got) != 1 {
		t.Errorf("one debit: %+v", got)
	}
	if got := allEntries(t, s, a.ID, store.LedgerQuery{RequestID: "req_none"}); len(got) != 0 {
		t.Errorf("no entries: %+v", got)
	}
	page, err := s.Ledger(ctx, a.ID, store.LedgerQuery{Limit: 31})
	if err != nil || len(page.Entries) != 31 || page.NextCursor != "" {
		t.Errorf("an exact last page has no cursor: %d %q %v", len(page.Entries), page.NextCursor, err)
	}
	for _, bad := range []string{"!!!", "bm90LWEtY3Vyc29y"} {
		if _, err := s.Ledger(ctx, a.ID, store.LedgerQuery{Cursor: bad}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
	other := newAccount(t, s, 5)
	first, _ := s.Ledger(ctx, a.ID, store.LedgerQuery{Limit: 1})
	if _, err := s.Ledger(ctx, other.ID, store.LedgerQuery{Cursor: first.NextCursor}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("another account's cursor: %v", err)
	}
}

// reserveMany runs n concurrent reservations and counts outcomes.
func reserveMany(t *testing.T, s store.Store, a store.Account, k store.Key, n int, cost int64) (ok, limited, short int) {
	var okN, limitN, shortN atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var le *store.KeyLimitError
			var ie *store.InsufficientCreditsError
			_, err := s.Reserve(ctx, charge(a, k, cost))
			switch {
			case err == nil:
				okN.Add(1)
			case errors.As(err, &le):
				limitN.Add(1)
			case errors.As(err, &ie):
				shortN.Add(1)
			default:
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	return int(okN.Load()), int(limitN.Load()), int(shortN.Load())
}

func testConcurrentKeyCap(t *testing.T, s store.Store) {
	a := newAccount(t, s, 10_000)
	k := newKey(t, s, a.ID, ptr(30))
	ok, limited, short := reserveMany(t, s, a, k, 200, 3)
	if ok != 10 || limited != 190 || short != 0 {
		t.Fatalf("%d succeeded, %d KEY_LIMIT_EXCEEDED, %d INSUFFICIENT_CREDITS; want 10/190/0", ok, limited, short)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 30 {
		t.Errorf("credits_used %d", got.CreditsUsed)
	}
	if b := balance(t, s, a.ID); b != 10_000-30 {
		t.Errorf("balance %d", b)
	}
	checkLedger(t, s, a.ID)
}

func testConcurrentWallet(t *testing.T, s store.Store) {
	a := newAccount(t, s, 30)
	k := newKey(t, s, a.ID, nil)
	ok, limited, short := reserveMany(t, s, a, k, 200, 3)
	if ok != 10 || short != 190 || limited != 0 {
		t.Fatalf("%d succeeded, %d INSUFFICIENT_CREDITS, %d KEY_LIMIT_EXCEEDED; want 10/190/0", ok, short, limited)
	}
	if b := balance(t, s, a.ID); b != 0 {
		t.Errorf("balance %d", b)
	}
	checkLedger(t, s, a.ID)
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
	entries := checkLedger(t, s, a.ID)
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

func testConcurrentRefunds(t *testing.T, s store.Store) {
	a := newAccount(t, s, 10)
	k := newKey(t, s, a.ID, nil)
	c := charge(a, k, 4)
	if _, err := s.Reserve(ctx, c); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if after, err := s.Refund(ctx, a.ID, c.RequestID); err != nil || after != 10 {
				t.Errorf("refund: %d %v", after, err)
			}
		}()
	}
	wg.Wait()
	if got := allEntries(t, s, a.ID, store.LedgerQuery{RequestID: c.RequestID}); len(got) != 2 {
		t.Errorf("one debit and one refund, got %d entries", len(got))
	}
	checkLedger(t, s, a.ID)
}
