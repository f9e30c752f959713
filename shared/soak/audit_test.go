package soak_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/soak"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// booksFixture is a small, correct history on the embedded store: one account
// with a capped key, a settled call of 2, a refunded call of 3 and a cache
// hit, with the answers their clients saw.
type booksFixture struct {
	s                 *embedded.Store
	account           string
	key               store.Key
	settled, refunded string
	answers           []soak.Answer
	ctx               context.Context
	collect           func(t *testing.T) soak.Books
	charge            func(t *testing.T, cost int64) string
}

func newBooks(t *testing.T) *booksFixture {
	t.Helper()
	ctx := context.Background()
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, _, err := auth.CreateAccount(ctx, s, 100, envelope.NewRequestID())
	if err != nil {
		t.Fatal(err)
	}
	limit := int64(10)
	_, k := auth.NewKey(a.ID, "audited", &limit)
	key, err := s.CreateKey(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	f := &booksFixture{s: s, account: a.ID, key: key, ctx: ctx}
	f.charge = func(t *testing.T, cost int64) string {
		id := envelope.NewRequestID()
		if _, err := s.Reserve(ctx, store.Charge{RequestID: id, AccountID: a.ID, KeyID: key.ID, KeyPrefix: key.Prefix,
			Endpoint: "/v1/company_registry/search", Cost: cost}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	f.settled = f.charge(t, 2)
	if err := s.Settle(ctx, a.ID, f.settled); err != nil {
		t.Fatal(err)
	}
	f.refunded = f.charge(t, 3)
	if _, err := s.Refund(ctx, a.ID, f.refunded); err != nil {
		t.Fatal(err)
	}
	two, zero := int64(2), int64(0)
	f.answers = []soak.Answer{
		{Kind: "get", AccountID: a.ID, Status: 200, RequestID: f.settled, Credits: &two, IdempotencyKey: "idem-1", ReachedUpstream: true},
		{Kind: "get", AccountID: a.ID, Status: 200, RequestID: f.settled, Credits: &two, IdempotencyKey: "idem-1", Replay: true},
		{Kind: "get", AccountID: a.ID, Status: 502, RequestID: f.refunded, Credits: &zero, ErrorType: "UPSTREAM_ERROR", ReachedUpstream: true},
		{Kind: "cached", AccountID: a.ID, Status: 200, RequestID: envelope.NewRequestID(), Credits: &zero},
	}
	f.collect = func(t *testing.T) soak.Books {
		t.Helper()
		b, err := soak.Collect(ctx, s, []string{a.ID}, time.Now().Add(store.DefaultLimits.Lease))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return f
}

func kinds(r soak.Report) []string {
	var out []string
	for _, d := range r.Discrepancies {
		if !slices.Contains(out, d.Kind) {
			out = append(out, d.Kind)
		}
	}
	return out
}

// The correct history audits clean, with its figures.
func TestAuditOfCorrectBooks(t *testing.T) {
	f := newBooks(t)
	r := soak.Check(f.collect(t), f.answers)
	if len(r.Discrepancies) != 0 {
		t.Fatalf("a correct history: %v", r.Discrepancies)
	}
	if r.CreditsGranted != 100 || r.CreditsCharged != 2 || r.CreditsRefunded != 3 || r.Reservations != 2 ||
		r.Outcomes["get 200"] != 1 || r.Outcomes["get 200 replay"] != 1 || r.Outcomes["get 502 UPSTREAM_ERROR"] != 1 {
		t.Errorf("figures %+v", r)
	}
}

// Each kind of discrepancy, seeded into correct books (or made for real
// in the store where it can be), fails the audit with that kind.
func TestAuditFindsEveryDiscrepancy(t *testing.T) {
	newest := func(b *soak.Books) *store.Entry { return &b.Accounts[0].Entries[0] }
	// appendEntry adds an entry that chains and moves the balance, as a
	// store writing a wrong entry would.
	appendEntry := func(b *soak.Books, e store.Entry) {
		ab := &b.Accounts[0]
		e.ID = "txn_zzzz_seeded"
		e.AccountID = ab.Account.ID
		e.BalanceAfter = ab.Entries[0].BalanceAfter + e.Amount
		ab.Entries = append([]store.Entry{e}, ab.Entries...)
		ab.Account.CreditsRemaining = e.BalanceAfter
	}
	cases := []struct {
		kind string
		// real makes the fault in the store before the books are read.
		real func(t *testing.T, f *booksFixture)
		// seed changes the books or the answers after they are read.
		seed func(f *booksFixture, b *soak.Books, answers *[]soak.Answer)
	}{
		{kind: soak.BalanceMismatch, seed: func(f *booksFixture, b *soak.Books, _ *[]soak.Answer) {
			b.Accounts[0].Account.CreditsRemaining++
		}},
		{kind: soak.NegativeBalance, seed: func(f *booksFixture, b *soak.Books, _ *[]soak.Answer) {
			appendEntry(b, store.Entry{Type: store.EntryDebit, Amount: -200, RequestID: f.settled, KeyID: f.key.ID})
		}},
		{kind: soak.LedgerChain, seed: func(f *booksFixture, b *soak.Books, _ *[]soak.Answer) {
			b.Accounts[0].Entries[1].BalanceAfter += 5
		}},
		{kind: soak.MissingRequestID, seed: func(f *booksFixture, b *soak.Books, _ *[]soak.Answer) {
			newest(b).RequestID = ""
		}},
		{kind: soak.BadEntry, seed: func(f *booksFixture, b *soak.Books, _ *[]soak.Answer) {
			appendEntry(b, store.Entry{Type: store.EntryRefund, Amount: 4, RequestID: "req_never_reserved", KeyID: f.key.ID})
		}},
		{kind: soak.Unresolved, real: func(t *testing.T, f *booksFixture) {
			f.charge(t, 1) // reserved, and its process never settles or refunds it
		}},
		{kind: soak.DoubleResolution, seed: func(f *booksFixture, b *soak.Books, _ *[]soak.Answer) {
			// A double refund.
			appendEntry(b, store.Entry{Type: store.EntryRefund, Amount: 3, RequestID: f.refunded, KeyID: f.key.ID})
		}},
		{kind: soak.KeyOverLimit, seed: func(f *booksFixture, b *soak.Books, _ *[]soak.Answer) {
			appendEntry(b, store.Entry{Type: store.EntryDebit, Amount: -9, RequestID: f.settled, KeyID: f.key.ID})
		}},
		{kind: soak.KeyUsedMismatch, seed: func(f *booksFixture, b *soak.Books, _ *[]soak.Answer) {
			b.Accounts[0].Keys[0].Key.CreditsUsed++
		}},
		{kind: soak.ResponseMismatch, seed: func(f *booksFixture, b *soak.Books, answers *[]soak.Answer) {
			one := int64(1) // the client was told 1; the ledger kept 2
			*answers = append(*answers, soak.Answer{Kind: "get", AccountID: f.account, Status: 200, RequestID: f.settled, Credits: &one})
		}},
		{kind: soak.ResponseMismatch, seed: func(f *booksFixture, b *soak.Books, answers *[]soak.Answer) {
			zero := int64(0) // a failure whose charge was kept
			*answers = append(*answers, soak.Answer{Kind: "get", AccountID: f.account, Status: 502, RequestID: f.settled, Credits: &zero})
		}},
		{kind: soak.ResponseMismatch, real: func(t *testing.T, f *booksFixture) {
			pending := f.charge(t, 1)
			if err := f.s.Settle(f.ctx, f.account, pending); err != nil {
				t.Fatal(err)
			}
			// A failure answered null whose reconciliation settled instead of refunding.
			f.answers = append(f.answers, soak.Answer{Kind: "get", AccountID: f.account, Status: 502, RequestID: pending})
		}},
		{kind: soak.IdempotencyTwice, seed: func(f *booksFixture, b *soak.Books, answers *[]soak.Answer) {
			two := int64(2)
			*answers = append(*answers, soak.Answer{Kind: "get", AccountID: f.account, Status: 200, RequestID: f.settled,
				Credits: &two, IdempotencyKey: "idem-1", ReachedUpstream: true})
		}},
		{kind: soak.IdempotencyTwice, seed: func(f *booksFixture, b *soak.Books, answers *[]soak.Answer) {
			(*answers)[1].ReachedUpstream = true // the replay called the upstream
		}},
		{kind: soak.MalformedAnswer, seed: func(f *booksFixture, b *soak.Books, answers *[]soak.Answer) {
			*answers = append(*answers, soak.Answer{Kind: "batch", AccountID: f.account, Status: 200, Malformed: "3 results for 4 items"})
		}},
		{kind: soak.LeakedSlot, real: func(t *testing.T, f *booksFixture) {
			// A slot admitted under a lease far longer than the rules' and
			// never released: no lease frees it when the run's leases end.
			rules := store.DefaultLimits
			rules.Lease = 24 * time.Hour
			if a, err := f.s.Admit(f.ctx, f.key.Hash, "req_leaks", time.Now(), rules, true); err != nil || !a.Admitted {
				t.Fatalf("%+v %v", a, err)
			}
		}},
	}
	tested := map[string]bool{}
	for _, c := range cases {
		tested[c.kind] = true
		t.Run(c.kind, func(t *testing.T) {
			f := newBooks(t)
			if c.real != nil {
				c.real(t, f)
			}
			books := f.collect(t)
			answers := slices.Clone(f.answers)
			if c.seed != nil {
				c.seed(f, &books, &answers)
			}
			r := soak.Check(books, answers)
			if !slices.Contains(kinds(r), c.kind) {
				t.Errorf("the audit missed %s; it found %v", c.kind, r.Discrepancies)
			}
		})
	}
	for _, k := range soak.Kinds {
		if !tested[k] {
			t.Errorf("no test seeds %s", k)
		}
	}
}

// A slot held by a request that died is not a leak: its lease frees it
// when the run's leases end.
func TestAuditCountsSlotsAwaitingTheirLease(t *testing.T) {
	f := newBooks(t)
	if a, err := f.s.Admit(f.ctx, f.key.Hash, "req_died", time.Now(), store.DefaultLimits, true); err != nil || !a.Admitted {
		t.Fatalf("%+v %v", a, err)
	}
	r := soak.Check(f.collect(t), f.answers)
	if len(r.Discrepancies) != 0 || r.SlotsAwaiting != 1 {
		t.Errorf("%d awaiting, %v", r.SlotsAwaiting, r.Discrepancies)
	}
}
