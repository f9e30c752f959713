// Package soak is the soak and chaos suite (issue 22): a load of mixed,
// concurrent requests against the real request path with faults injected
// (load.go, faults.go), and an audit that balances every credit after it
// (this file).
//
// The audit reads the books from the store (Collect) and checks them,
// together with what the clients saw, in one pure function (Check), so
// that each kind of discrepancy can be proved to fail the audit by
// seeding it (audit_test.go).
package soak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// Discrepancy kinds: each is a way money or limits can be wrong.
const (
	// BalanceMismatch: the balance is not grants minus settled charges, or
	// not the sum of the ledger.
	BalanceMismatch = "balance_mismatch"
	// NegativeBalance: a balance, or a ledger entry's balance_after, below 0.
	NegativeBalance = "negative_balance"
	// LedgerChain: consecutive entries' balance_after do not chain.
	LedgerChain = "ledger_chain"
	// MissingRequestID: a ledger entry that names no request.
	MissingRequestID = "missing_request_id"
	// BadEntry: an entry of the wrong sign, of an unknown type, or a debit
	// or refund with no reservation behind it.
	BadEntry = "bad_entry"
	// Unresolved: a debit whose reservation was neither settled nor
	// refunded once everything drained and every lease ended.
	Unresolved = "unresolved_debit"
	// DoubleResolution: a request with more than one debit or refund, a
	// settled reservation with a refund, or a refunded one without one.
	DoubleResolution = "double_resolution"
	// KeyOverLimit: a capped key's charges exceeded its credit_limit at
	// some point of the ledger.
	KeyOverLimit = "key_over_limit"
	// KeyUsedMismatch: a capped key's credits_used is not its net charges.
	KeyUsedMismatch = "key_used_mismatch"
	// ResponseMismatch: an answer a client saw disagrees with the ledger
	// (a 200 with credits_used n without a net charge of n, a failure that
	// nets other than 0, a null never resolved).
	ResponseMismatch = "response_mismatch"
	// IdempotencyTwice: one Idempotency-Key's call reached the upstream
	// for more than one final outcome, or a replay reached it at all.
	IdempotencyTwice = "idempotency_upstream_twice"
	// LeakedSlot: an in-flight slot that no lease will free.
	LeakedSlot = "leaked_slot"
	// MalformedAnswer: an answer a client cannot reconcile at all (not
	// JSON, no request_id, a batch whose results do not match its items).
	MalformedAnswer = "malformed_answer"
)

// Kinds lists every discrepancy kind the audit reports.
var Kinds = []string{BalanceMismatch, NegativeBalance, LedgerChain, MissingRequestID, BadEntry, Unresolved,
	DoubleResolution, KeyOverLimit, KeyUsedMismatch, ResponseMismatch, IdempotencyTwice, LeakedSlot, MalformedAnswer}

// Discrepancy is one thing the audit found wrong.
type Discrepancy struct {
	Kind      string
	AccountID string
	KeyID     string
	RequestID string
	Detail    string
}

func (d Discrepancy) String() string {
	var b strings.Builder
	b.WriteString(d.Kind)
	for _, f := range [][2]string{{"account", d.AccountID}, {"key", d.KeyID}, {"request", d.RequestID}} {
		if f[1] != "" {
			fmt.Fprintf(&b, " %s=%s", f[0], f[1])
		}
	}
	return b.String() + ": " + d.Detail
}

// Books is what the store holds after a run, for the accounts of the run.
type Books struct {
	Accounts []AccountBooks
	// LeasesEnd is when every in-flight slot taken during the run has
	// outlived its lease: the run's end plus the limits' lease.
	LeasesEnd time.Time
}

// AccountBooks is one account's books.
type AccountBooks struct {
	Account      store.Account
	Entries      []store.Entry // newest first, as the ledger pages them
	Reservations []store.ReservationRecord
	Keys         []KeyBooks
}

// KeyBooks is a key with the in-flight slots its limits still record.
type KeyBooks struct {
	Key   store.Key
	Slots []store.Slot
}

// Collect reads the books of accounts from s, which must also be a
// store.Auditor: ledgers, reservations, keys and the slots each key's
// limits hold. leasesEnd is Books.LeasesEnd.
func Collect(ctx context.Context, s store.Store, accounts []string, leasesEnd time.Time) (Books, error) {
	au, ok := s.(store.Auditor)
	if !ok {
		return Books{}, fmt.Errorf("soak: %T cannot be audited (no store.Auditor)", s)
	}
	books := Books{LeasesEnd: leasesEnd}
	for _, id := range accounts {
		a, err := s.Account(ctx, id)
		if err != nil {
			return Books{}, fmt.Errorf("account %s: %w", id, err)
		}
		ab := AccountBooks{Account: a}
		for q := (store.LedgerQuery{Limit: 100}); ; {
			page, err := s.Ledger(ctx, id, q)
			if err != nil {
				return Books{}, fmt.Errorf("ledger of %s: %w", id, err)
			}
			ab.Entries = append(ab.Entries, page.Entries...)
			if page.NextCursor == "" {
				break
			}
			q.Cursor = page.NextCursor
		}
		if ab.Reservations, err = au.Reservations(ctx, id); err != nil {
			return Books{}, fmt.Errorf("reservations of %s: %w", id, err)
		}
		keys, err := s.Keys(ctx, id)
		if err != nil {
			return Books{}, fmt.Errorf("keys of %s: %w", id, err)
		}
		for _, k := range keys {
			slots, err := au.HeldSlots(ctx, k.Hash)
			if err != nil {
				return Books{}, fmt.Errorf("slots of %s: %w", k.ID, err)
			}
			ab.Keys = append(ab.Keys, KeyBooks{Key: k, Slots: slots})
		}
		books.Accounts = append(books.Accounts, ab)
	}
	return books, nil
}

// Answer is what a client saw of one call (a direct request, a batch item
// or an MCP tool call).
type Answer struct {
	Kind      string // the load's request kind, for the figures
	AccountID string
	Status    int
	ErrorType string // error.type of a failure
	RequestID string
	// Credits is credits_used: nil when the answer said null.
	Credits *int64
	// Lost: no answer reached the client (it hung up, the function timed
	// out, the process died). A lost call claims nothing.
	Lost bool
	// Replay: answered from an Idempotency-Key's stored outcome.
	Replay bool
	// Unprotected: x-idempotency-status: unavailable (spec 4.10, rule 5).
	Unprotected bool
	// IdempotencyKey is the header the call carried, if any.
	IdempotencyKey string
	// ReachedUpstream: the call made at least one upstream request.
	ReachedUpstream bool
	// Malformed says why the answer could not be read, if it could not.
	Malformed string
}

// Report is the audit's outcome.
type Report struct {
	Outcomes        map[string]int   // answers by kind and status ("get 200", "batch-item 402", "mcp lost")
	Faults          map[string]int64 // faults injected, by kind
	CreditsGranted  int64
	CreditsCharged  int64 // settled: kept by Meridian
	CreditsRefunded int64
	Reservations    int
	SlotsAwaiting   int // slots of calls that died, freed by their lease
	Discrepancies   []Discrepancy
}

// String is the audit's printout.
func (r Report) String() string {
	var b strings.Builder
	total := 0
	for _, n := range r.Outcomes {
		total += n
	}
	fmt.Fprintf(&b, "answers: %d\n", total)
	for _, k := range sortedKeys(r.Outcomes) {
		fmt.Fprintf(&b, "  %-44s %6d\n", k, r.Outcomes[k])
	}
	var faults int64
	for _, n := range r.Faults {
		faults += n
	}
	fmt.Fprintf(&b, "faults injected: %d\n", faults)
	for _, k := range sortedKeys(r.Faults) {
		fmt.Fprintf(&b, "  %-44s %6d\n", k, r.Faults[k])
	}
	fmt.Fprintf(&b, "credits: granted %d, charged %d, refunded %d; reservations %d; slots awaiting their lease %d\n",
		r.CreditsGranted, r.CreditsCharged, r.CreditsRefunded, r.Reservations, r.SlotsAwaiting)
	fmt.Fprintf(&b, "discrepancies: %d\n", len(r.Discrepancies))
	for i, d := range r.Discrepancies {
		if i == 50 {
			fmt.Fprintf(&b, "  … and %d more\n", len(r.Discrepancies)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", d)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// requestBooks is everything the ledger and the reservations say of one
// request id.
type requestBooks struct {
	debits      []store.Entry
	refunds     []store.Entry
	reservation *store.ReservationRecord
}

func (r *requestBooks) net() int64 {
	var n int64
	for _, e := range r.debits {
		n += e.Amount
	}
	for _, e := range r.refunds {
		n += e.Amount
	}
	return n
}

// Check audits the books against what the clients saw and what reached
// the upstream.
func Check(books Books, answers []Answer) Report {
	r := Report{Outcomes: map[string]int{}, Faults: map[string]int64{}}
	add := func(kind, account, key, request, format string, args ...any) {
		r.Discrepancies = append(r.Discrepancies, Discrepancy{Kind: kind, AccountID: account, KeyID: key, RequestID: request,
			Detail: fmt.Sprintf(format, args...)})
	}
	requests := map[string]*requestBooks{}
	for _, ab := range books.Accounts {
		checkAccount(&r, ab, books.LeasesEnd, requests, add)
	}
	for _, a := range answers {
		outcome := fmt.Sprint(a.Status)
		if a.Lost {
			outcome = "lost"
		} else if a.Replay {
			outcome += " replay"
		} else if a.ErrorType != "" {
			outcome += " " + a.ErrorType
		}
		r.Outcomes[a.Kind+" "+outcome]++
		checkAnswer(a, requests[a.RequestID], add)
	}
	checkIdempotency(answers, add)
	return r
}

// checkAccount checks one account's ledger, reservations, keys and slots,
// and files its requests' entries into requests.
func checkAccount(r *Report, ab AccountBooks, leasesEnd time.Time, requests map[string]*requestBooks, add func(kind, account, key, request, format string, args ...any)) {
	acct := ab.Account.ID
	if ab.Account.CreditsRemaining < 0 {
		add(NegativeBalance, acct, "", "", "balance %d", ab.Account.CreditsRemaining)
	}
	// This account's requests, also filed in requests for the answers.
	mine := map[string]*requestBooks{}
	booksOf := func(id string) *requestBooks {
		rb := mine[id]
		if rb == nil {
			rb = &requestBooks{}
			mine[id], requests[id] = rb, rb
		}
		return rb
	}
	var sum, granted int64
	for i, e := range ab.Entries {
		sum += e.Amount
		if e.RequestID == "" {
			add(MissingRequestID, acct, e.KeyID, "", "%s entry %s of %d names no request", e.Type, e.ID, e.Amount)
		}
		if e.BalanceAfter < 0 {
			add(NegativeBalance, acct, e.KeyID, e.RequestID, "entry %s leaves %d", e.ID, e.BalanceAfter)
		}
		if i+1 < len(ab.Entries) {
			if older := ab.Entries[i+1]; older.BalanceAfter+e.Amount != e.BalanceAfter {
				add(LedgerChain, acct, e.KeyID, e.RequestID, "entry %s: %d after %d%+d (entry %s)", e.ID, e.BalanceAfter,
					older.BalanceAfter, e.Amount, older.ID)
			}
		} else if e.BalanceAfter != e.Amount {
			add(LedgerChain, acct, e.KeyID, e.RequestID, "the oldest entry %s does not start from 0: %d after %+d", e.ID, e.BalanceAfter, e.Amount)
		}
		switch {
		case e.Type == store.EntryGrant && e.Amount > 0:
			granted += e.Amount
		case e.Type == store.EntryDebit && e.Amount < 0:
			rb := booksOf(e.RequestID)
			rb.debits = append(rb.debits, e)
		case e.Type == store.EntryRefund && e.Amount > 0:
			rb := booksOf(e.RequestID)
			rb.refunds = append(rb.refunds, e)
			r.CreditsRefunded += e.Amount
		default:
			add(BadEntry, acct, e.KeyID, e.RequestID, "%s entry %s of %d", e.Type, e.ID, e.Amount)
		}
	}
	r.CreditsGranted += granted
	if len(ab.Entries) > 0 && ab.Entries[0].BalanceAfter != ab.Account.CreditsRemaining {
		add(BalanceMismatch, acct, "", "", "balance %d, newest entry leaves %d", ab.Account.CreditsRemaining, ab.Entries[0].BalanceAfter)
	}
	if sum != ab.Account.CreditsRemaining {
		add(BalanceMismatch, acct, "", "", "balance %d, ledger sums to %d", ab.Account.CreditsRemaining, sum)
	}

	var settled int64
	for i := range ab.Reservations {
		res := &ab.Reservations[i]
		rb := booksOf(res.RequestID)
		rb.reservation = res
		r.Reservations++
		switch res.Status {
		case store.ReservationSettled:
			settled += res.Cost
		case store.ReservationReserved:
			// Unresolved below; it still holds its credits.
			settled += res.Cost
		}
	}
	r.CreditsCharged += settled
	if granted-settled != ab.Account.CreditsRemaining {
		add(BalanceMismatch, acct, "", "", "balance %d, grants %d − settled charges %d = %d", ab.Account.CreditsRemaining,
			granted, settled, granted-settled)
	}
	checkReservations(ab, mine, add)
	checkKeys(r, ab, leasesEnd, add)
}

// oldestFirst is the ledger (newest first) in the order it was written.
func oldestFirst(entries []store.Entry) []store.Entry {
	out := make([]store.Entry, len(entries))
	for i, e := range entries {
		out[len(out)-1-i] = e
	}
	return out
}

// checkReservations: every debit has exactly one reservation, settled or
// refunded, and a refunded one exactly one refund of the same amount.
func checkReservations(ab AccountBooks, requests map[string]*requestBooks, add func(kind, account, key, request, format string, args ...any)) {
	acct := ab.Account.ID
	for id, rb := range requests {
		res := rb.reservation
		switch {
		case res == nil && (len(rb.debits) > 0 || len(rb.refunds) > 0):
			add(BadEntry, acct, "", id, "%d debits and %d refunds without a reservation", len(rb.debits), len(rb.refunds))
			continue
		case res == nil:
			continue
		case len(rb.debits) != 1:
			add(DoubleResolution, acct, res.KeyID, id, "%d debit entries for one reservation", len(rb.debits))
		case -rb.debits[0].Amount != res.Cost || rb.debits[0].ID != res.DebitEntryID:
			add(BadEntry, acct, res.KeyID, id, "debit %s of %d for a reservation of %d (debit %s)", rb.debits[0].ID,
				rb.debits[0].Amount, res.Cost, res.DebitEntryID)
		}
		switch res.Status {
		case store.ReservationReserved:
			add(Unresolved, acct, res.KeyID, id, "reserved %d credits at %s, neither settled nor refunded (lease until %s)",
				res.Cost, res.Endpoint, res.LeaseUntil.Format(time.RFC3339))
			if len(rb.refunds) > 0 {
				add(DoubleResolution, acct, res.KeyID, id, "still reserved with %d refunds", len(rb.refunds))
			}
		case store.ReservationSettled:
			if len(rb.refunds) > 0 {
				add(DoubleResolution, acct, res.KeyID, id, "settled and refunded %d times", len(rb.refunds))
			}
		case store.ReservationRefunded:
			switch {
			case len(rb.refunds) != 1:
				add(DoubleResolution, acct, res.KeyID, id, "refunded with %d refund entries", len(rb.refunds))
			case rb.refunds[0].Amount != res.Cost:
				add(BadEntry, acct, res.KeyID, id, "refund of %d for a reservation of %d", rb.refunds[0].Amount, res.Cost)
			}
		default:
			add(BadEntry, acct, res.KeyID, id, "reservation in state %q", res.Status)
		}
	}
}

// checkKeys: a capped key's running charges never exceed its limit and
// end at its credits_used; no slot outlives the leases.
func checkKeys(r *Report, ab AccountBooks, leasesEnd time.Time, add func(kind, account, key, request, format string, args ...any)) {
	ledger := oldestFirst(ab.Entries)
	acct := ab.Account.ID
	running := map[string]int64{}
	over := map[string]bool{}
	limits := map[string]*int64{}
	for _, kb := range ab.Keys {
		limits[kb.Key.ID] = kb.Key.CreditLimit
	}
	for _, e := range ledger {
		if e.Type == store.EntryGrant {
			continue
		}
		running[e.KeyID] -= e.Amount
		if limit := limits[e.KeyID]; limit != nil && running[e.KeyID] > *limit && !over[e.KeyID] {
			over[e.KeyID] = true
			add(KeyOverLimit, acct, e.KeyID, e.RequestID, "%d credits used against a limit of %d after entry %s",
				running[e.KeyID], *limit, e.ID)
		}
	}
	for _, kb := range ab.Keys {
		k := kb.Key
		if k.CreditLimit != nil && k.CreditsUsed != running[k.ID] {
			add(KeyUsedMismatch, acct, k.ID, "", "credits_used %d, net charges %d", k.CreditsUsed, running[k.ID])
		}
		if k.CreditLimit != nil && k.CreditsUsed > *k.CreditLimit {
			add(KeyOverLimit, acct, k.ID, "", "credits_used %d over the limit %d", k.CreditsUsed, *k.CreditLimit)
		}
		for _, s := range kb.Slots {
			if until := time.UnixMilli(s.LeaseUntil); until.After(leasesEnd) {
				add(LeakedSlot, acct, k.ID, "", "slot %s held until %s, after every lease of the run ended (%s)", s.RequestID,
					until.UTC().Format(time.RFC3339), leasesEnd.UTC().Format(time.RFC3339))
			} else {
				r.SlotsAwaiting++
			}
		}
	}
}

// checkAnswer: what a client saw agrees with the ledger.
func checkAnswer(a Answer, rb *requestBooks, add func(kind, account, key, request, format string, args ...any)) {
	if a.Malformed != "" {
		add(MalformedAnswer, a.AccountID, "", a.RequestID, "%s answer %d: %s", a.Kind, a.Status, a.Malformed)
		return
	}
	if a.Lost || a.Replay {
		return // a lost call claims nothing; a replay repeats its original, checked as such
	}
	var net int64
	var resolved = true
	if rb != nil {
		net = rb.net()
		resolved = rb.reservation == nil || rb.reservation.Status != store.ReservationReserved
	}
	switch {
	case a.Credits == nil:
		// Pending reconciliation: resolved once since (the reservation
		// checks count the resolutions); a failure must end refunded.
		// A reserve whose outcome was unknown (its answer lost) is
		// answered null too: if it never landed, nothing is left to
		// resolve, and the request has no entries.
		if rb == nil || rb.reservation == nil {
			if net != 0 {
				add(ResponseMismatch, a.AccountID, "", a.RequestID, "%d with credits_used null nets %d without a reservation", a.Status, -net)
			}
		} else if !resolved {
			add(ResponseMismatch, a.AccountID, "", a.RequestID, "%d with credits_used null, never resolved", a.Status)
		} else if a.Status >= 400 && net != 0 {
			add(ResponseMismatch, a.AccountID, "", a.RequestID, "failure %d pending reconciliation ended with a net charge of %d", a.Status, -net)
		}
	case a.Status >= 400:
		if net != 0 {
			add(ResponseMismatch, a.AccountID, "", a.RequestID, "failure %d with credits_used %d nets a charge of %d", a.Status, *a.Credits, -net)
		}
		if *a.Credits != 0 {
			add(ResponseMismatch, a.AccountID, "", a.RequestID, "failure %d says credits_used %d", a.Status, *a.Credits)
		}
	default:
		if -net != *a.Credits {
			add(ResponseMismatch, a.AccountID, "", a.RequestID, "%d with credits_used %d nets a charge of %d", a.Status, *a.Credits, -net)
		}
	}
}

// retryable outcomes free an Idempotency-Key for the retry (the pipeline's
// claimIdempotency): 402, 409, 429 and 5xx.
func retryable(status int) bool {
	return status == 402 || status == 409 || status == 429 || status >= 500
}

// checkIdempotency: per Idempotency-Key, at most one call that reached the
// upstream produced the key's stored outcome, and no replay reached it.
// Calls answered while the idempotency store was unavailable ran without
// protection (spec 4.10, rule 5), and retryable outcomes free the key.
func checkIdempotency(answers []Answer, add func(kind, account, key, request, format string, args ...any)) {
	final := map[string][]string{}
	for _, a := range answers {
		if a.IdempotencyKey == "" || !a.ReachedUpstream {
			continue
		}
		if a.Replay {
			add(IdempotencyTwice, a.AccountID, "", a.RequestID, "a replay of %q reached the upstream", a.IdempotencyKey)
			continue
		}
		if a.Lost || a.Unprotected || retryable(a.Status) {
			continue
		}
		final[a.IdempotencyKey] = append(final[a.IdempotencyKey], a.RequestID)
	}
	for key, ids := range final {
		if len(ids) > 1 {
			add(IdempotencyTwice, "", "", ids[1], "Idempotency-Key %q reached the upstream for %d outcomes: %v", key, len(ids), ids)
		}
	}
}
