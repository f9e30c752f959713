package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

func ref(pk, sk string) [2]string { return [2]string{pk, sk} }

func pick[T any](found map[string]map[string]types.AttributeValue, pk, sk string) (*T, error) {
	return decode[T](found[pk+"\x00"+sk])
}

// Reserve is ReserveMany of one charge.
func (s *Store) Reserve(ctx context.Context, c store.Charge) (store.Reservation, error) {
	return store.FirstReserved(s.ReserveMany(ctx, []store.Charge{c}))
}

// ReserveMany charges a group of one account's charges to their keys'
// budgets and the wallet, and writes each one's debit entry and
// reservation, all in one transaction:
//
//	account     SET balance = :expected - :total, kb#<key> = {u: used + sum, l: limit} per key charged
//	            if balance = :expected AND balance_version = :version
//	per charge  debit entry             if attribute_not_exists(pk)
//	            reservation req#<id>    if attribute_not_exists(pk) (or expired)
//	                                    with lease_pk and lease_sk: in LeaseIndex (sweep.go)
//
// The keys' budgets are on the account item (budgets.go), so no key item
// is written. It starts from one strongly consistent read of the account
// (and of the key items of keys the account carries no budget for), and
// decides the charges in order against the balance and budgets left by
// the ones before (a refusal is that charge's Err: an inactive key, a key
// over its limit, a balance below the cost; the key's are reported first).
// A failed condition returns the item as it was: a changed budget or
// balance is decided again from the new values, a reservation already
// there is that charge's ErrDuplicateRequest, and conflicts are retried,
// until ctx ends. Under contention each round has a winner, since every
// loser retries from the state the winner left.
func (s *Store) ReserveMany(ctx context.Context, charges []store.Charge) ([]store.Reserved, error) {
	out, err := store.CheckGroup(charges)
	if err != nil {
		return nil, err
	}
	pk := accountPK(charges[0].AccountID)
	var keyIDs []string
	seen := map[string]bool{}
	for _, r := range out {
		if !seen[r.KeyID] && r.Err == nil {
			seen[r.KeyID] = true
			keyIDs = append(keyIDs, r.KeyID)
		}
	}
	if len(keyIDs) == 0 {
		return out, nil // every charge was refused by CheckGroup
	}
	a, err := get[accountItem](ctx, s, pk, skAccount)
	if err != nil {
		return nil, err
	}
	final := make([]bool, len(out)) // decided for good: CheckGroup's refusals, duplicates
	for i := range out {
		final[i] = out[i].Err != nil
	}
	for attempt := 0; ; attempt++ {
		var budgets map[string]keyBudget
		var refused map[string]error
		if a != nil {
			if budgets, refused, err = s.budgetsOf(ctx, a, keyIDs); err != nil {
				return nil, err
			}
		}
		now := s.now()
		g := decideGroup(out, final, a, budgets, refused)
		if len(g.accepted) == 0 {
			return out, nil
		}
		items, whose, err := s.groupItems(pk, g, out, a, budgets, now)
		if err != nil {
			return nil, err
		}
		cx, err := s.transact(ctx, items)
		if err != nil {
			return nil, err
		}
		if cx == nil {
			return out, nil
		}
		for pos, w := range whose {
			bad, old := cx.failed(pos)
			if !bad {
				continue
			}
			switch {
			case w.reservation:
				out[w.charge].Err, final[w.charge] = store.ErrDuplicateRequest, true
			case w.debit:
				return nil, errors.New("dynamostore: ledger entry id collision")
			default:
				if a, err = decode[accountItem](old); err != nil {
					return nil, err
				}
			}
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// groupDecision is one round of ReserveMany's decisions: the charges
// accepted (indexes, in order), the credits each key takes, and the
// balance after them all.
type groupDecision struct {
	accepted []int
	keyUsed  map[string]int64
	after    int64
}

// decideGroup decides every charge not decided for good, in order, as
// Reserve decides one: each accepted charge lowers the balance and its
// key's budget for the ones after it. Accepted charges get their
// reservation (a new debit entry id, the balance after them).
func decideGroup(out []store.Reserved, final []bool, a *accountItem, budgets map[string]keyBudget, refused map[string]error) groupDecision {
	g := groupDecision{keyUsed: map[string]int64{}}
	if a != nil {
		g.after = a.Balance
	}
	for i := range out {
		if final[i] {
			continue
		}
		c := out[i].Charge
		out[i] = store.Reserved{Reservation: store.Reservation{Charge: c}}
		b, active := budgets[c.KeyID]
		switch {
		case a == nil:
			out[i].Err = store.ErrNotFound
		case refused[c.KeyID] != nil:
			out[i].Err = refused[c.KeyID]
		case !active:
			out[i].Err = store.ErrNotFound
		case b.over(g.keyUsed[c.KeyID] + c.Cost):
			out[i].Err = &store.KeyLimitError{CreditLimit: *b.Limit, CreditsUsed: b.Used + g.keyUsed[c.KeyID]}
		case g.after < c.Cost:
			out[i].Err = &store.InsufficientCreditsError{Required: c.Cost, Remaining: g.after}
		default:
			g.after -= c.Cost
			g.keyUsed[c.KeyID] += c.Cost
			g.accepted = append(g.accepted, i)
			// Ids are time-ordered and made in this order: the ledger lists
			// the group's debits in the order of their balances.
			out[i].CreditsRemaining, out[i].DebitEntryID = g.after, store.NewEntryID()
		}
	}
	return g
}

// itemOwner says what a transaction item of ReserveMany writes: the
// account (neither debit nor reservation), or a charge's debit or
// reservation.
type itemOwner struct {
	charge      int
	debit       bool
	reservation bool
}

// groupItems is ReserveMany's transaction for one round's decision, with
// each item's owner at its position.
func (s *Store) groupItems(pk string, g groupDecision, out []store.Reserved, a *accountItem, budgets map[string]keyBudget, now time.Time) ([]types.TransactWriteItem, []itemOwner, error) {
	w := newWalletWrite(a).balance(g.after, now, 0)
	ids := make([]string, 0, len(g.keyUsed))
	for id := range g.keyUsed {
		ids = append(ids, id)
	}
	sort.Strings(ids) // one expression for every round and run
	for _, id := range ids {
		b := budgets[id]
		b.Used += g.keyUsed[id]
		if err := w.budget(id, b); err != nil {
			return nil, nil, err
		}
	}
	items := []types.TransactWriteItem{w.item(s)}
	whose := []itemOwner{{}}
	for _, i := range g.accepted {
		r := out[i]
		leasePK, leaseSK := leaseKeys(now, r.AccountID, r.RequestID)
		debit, err := marshal(ledgerItem{
			PK: pk, SK: pfxLedger + r.DebitEntryID, Type: string(store.EntryDebit), Amount: -r.Cost, BalanceAfter: r.CreditsRemaining,
			RequestID: r.RequestID, Endpoint: r.Endpoint, KeyID: r.KeyID, KeyPrefix: r.KeyPrefix, CreatedAt: now,
		})
		if err != nil {
			return nil, nil, err
		}
		res, err := marshal(reservationItem{
			PK: pk, SK: pfxReq + r.RequestID, Status: resReserved, Cost: r.Cost, KeyID: r.KeyID, KeyPrefix: r.KeyPrefix,
			Endpoint: r.Endpoint, DebitEntry: r.DebitEntryID, CreatedAt: now, LeasePK: leasePK, LeaseSK: leaseSK,
		})
		if err != nil {
			return nil, nil, err
		}
		items = append(items, putNew(s, debit), types.TransactWriteItem{Put: &types.Put{
			TableName:                           s.table,
			Item:                                res,
			ConditionExpression:                 aws.String("attribute_not_exists(pk) OR expires_at <= :nowSec"),
			ExpressionAttributeValues:           vals{":nowSec": num(now.Unix())},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
		whose = append(whose, itemOwner{charge: i, debit: true}, itemOwner{charge: i, reservation: true})
	}
	return items, whose, nil
}

// Settle marks a reservation settled: its call succeeded and keeps the
// charge. Its LeaseIndex entry stays (KEYS_ONLY: a write that changes no
// index key writes nothing there), and the sweep reads past it from its
// shard's mark (sweep.go). Settling twice is fine; a refunded reservation
// is ErrRefunded.
func (s *Store) Settle(ctx context.Context, accountID, requestID string) error {
	now := s.now()
	in := &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      itemKey(accountPK(accountID), pfxReq+requestID),
		ConditionExpression:      aws.String("#status = :reserved"),
		UpdateExpression:         aws.String("SET #status = :settled, expires_at = :exp"),
		ExpressionAttributeNames: statusName,
		ExpressionAttributeValues: vals{":reserved": str(resReserved), ":settled": str(resSettled),
			":exp": num(now.Add(ReservationRetention).Unix())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	for attempt := 0; ; attempt++ {
		_, err := s.db.UpdateItem(ctx, in)
		if err == nil {
			return nil
		}
		if bad, old := condFailed(err); bad {
			r, err := decode[reservationItem](old)
			switch {
			case err != nil:
				return err
			case r == nil || r.expired(now):
				return store.ErrNotFound
			case r.Status == resSettled:
				return nil
			case r.Status == resRefunded:
				return ErrRefunded
			}
			return fmt.Errorf("dynamostore: reservation in state %q", r.Status)
		}
		if !conflict(err) {
			return fmt.Errorf("dynamostore: settle: %w", err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

// Refund returns a reserved charge to the key and the wallet with a refund
// entry, in one transaction: the reservation moves reserved -> refunded
// (so a refund happens once) and leaves LeaseIndex, the key's
// credits_used drops by the cost and the balance rises by it (conditioned
// on the account read, retried like Grant). A reservation already refunded
// returns the balance without a second entry; a settled one is
// store.ErrSettled.
func (s *Store) Refund(ctx context.Context, accountID, requestID string) (int64, error) {
	return s.refund(ctx, accountID, requestID, time.Time{})
}

// RefundExpired is Refund with one more condition on the reservation's
// write: no web job holds it past now (held_until_ns, which
// ExtendReservation sets). The sweep's relisting moves only lease_sk, so
// a reservation relisted because its refund kept failing is still
// refunded.
func (s *Store) RefundExpired(ctx context.Context, accountID, requestID string, now time.Time) (int64, error) {
	if now.IsZero() {
		return 0, store.ErrInvalid
	}
	return s.refund(ctx, accountID, requestID, now)
}

// ExtendReservation is one conditional UpdateItem: a reservation still
// reserved and not held as long already gets held_until_ns = until and
// its LeaseIndex entry moved to until, so the sweep does not list it
// before then. until is far ahead of every shard's mark (a mark never
// passes an entry whose lease ends later than now + ReservationLease -
// markMargin, and a job holds its reservation longer than that).
func (s *Store) ExtendReservation(ctx context.Context, accountID, requestID string, until time.Time) error {
	leasePK := leaseShard(requestID)
	in := &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      itemKey(accountPK(accountID), pfxReq+requestID),
		ConditionExpression:      aws.String("#status = :reserved AND (attribute_not_exists(held_until_ns) OR held_until_ns < :until)"),
		UpdateExpression:         aws.String("SET held_until_ns = :until, lease_pk = :lpk, lease_sk = :lsk"),
		ExpressionAttributeNames: statusName,
		ExpressionAttributeValues: vals{":reserved": str(resReserved), ":until": num(until.UnixNano()),
			":lpk": str(leasePK), ":lsk": str(leaseSK(ceilSeconds(until), accountID, requestID))},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	for attempt := 0; ; attempt++ {
		_, err := s.db.UpdateItem(ctx, in)
		if err == nil {
			return nil
		}
		if bad, old := condFailed(err); bad {
			r, err := decode[reservationItem](old)
			switch {
			case err != nil:
				return err
			case r == nil || r.expired(s.now()):
				return store.ErrNotFound
			case r.Status == resSettled:
				return store.ErrSettled
			case r.Status == resRefunded:
				return store.ErrRefunded
			case r.Status == resReserved:
				return nil // held at least as long already
			}
			return fmt.Errorf("dynamostore: reservation in state %q", r.Status)
		}
		if !conflict(err) && !throttled(err) {
			return fmt.Errorf("dynamostore: extend reservation: %w", err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

// refund is Refund, or with a non-zero expiredBy RefundExpired.
func (s *Store) refund(ctx context.Context, accountID, requestID string, expiredBy time.Time) (int64, error) {
	pk, resSK := accountPK(accountID), pfxReq+requestID
	found, err := s.getMany(ctx, ref(pk, resSK), ref(pk, skAccount))
	if err != nil {
		return 0, err
	}
	r, err := pick[reservationItem](found, pk, resSK)
	if err != nil {
		return 0, err
	}
	a, err := pick[accountItem](found, pk, skAccount)
	if err != nil {
		return 0, err
	}
	// BatchGetItem reads each item on its own, not one snapshot: an account
	// read with a reservation already refunded may predate that refund.
	accountFresh := false
	for attempt := 0; ; attempt++ {
		now := s.now()
		switch {
		case r == nil || r.expired(now) || a == nil:
			return 0, store.ErrNotFound
		case r.Status == resRefunded:
			if !accountFresh {
				// Read after the refund was seen: the balance includes it.
				if a, err = get[accountItem](ctx, s, pk, skAccount); err != nil {
					return 0, err
				}
				if a == nil {
					return 0, store.ErrNotFound
				}
			}
			return a.Balance, nil
		case r.Status == resSettled:
			return 0, store.ErrSettled
		case !expiredBy.IsZero() && r.HeldUntilNS > expiredBy.UnixNano():
			return 0, store.ErrLeaseHeld
		}
		entryID, after := store.NewEntryID(), a.Balance+r.Cost
		entry, err := marshal(ledgerItem{
			PK: pk, SK: pfxLedger + entryID, Type: string(store.EntryRefund), Amount: r.Cost, BalanceAfter: after,
			RequestID: requestID, Endpoint: r.Endpoint, KeyID: r.KeyID, KeyPrefix: r.KeyPrefix, CreatedAt: now,
		})
		if err != nil {
			return 0, err
		}
		// The key's spend goes back to its budget on the account, or to its
		// key item when the account carries none (a key no longer active,
		// or one from before budgets moved to the account).
		w := newWalletWrite(a).balance(after, now, 0)
		resCond, resVals := "#status = :reserved", vals{":reserved": str(resReserved), ":refunded": str(resRefunded),
			":entry": str(entryID), ":exp": num(now.Add(ReservationRetention).Unix())}
		if !expiredBy.IsZero() {
			resCond += " AND (attribute_not_exists(held_until_ns) OR held_until_ns <= :by)"
			resVals[":by"] = num(expiredBy.UnixNano())
		}
		items := []types.TransactWriteItem{
			update(s, pk, resSK, resCond, "SET #status = :refunded, refund_entry = :entry, expires_at = :exp REMOVE lease_pk, lease_sk",
				statusName, resVals),
			{}, // the account, below
			putNew(s, entry),
		}
		if b, ok := a.Budgets[r.KeyID]; ok {
			b.Used -= r.Cost
			if err := w.budget(r.KeyID, b); err != nil {
				return 0, err
			}
		} else {
			items = append(items, update(s, pk, pfxKey+r.KeyID, "attribute_exists(pk)", "ADD credits_used :minus", nil,
				vals{":minus": num(-r.Cost)}))
		}
		items[1] = w.item(s)
		cx, err := s.transact(ctx, items)
		if err != nil {
			return 0, err
		}
		if cx == nil {
			return after, nil
		}
		if bad, _ := cx.failed(3); bad {
			return 0, fmt.Errorf("dynamostore: refund %s: key %s is missing", requestID, r.KeyID)
		}
		if bad, _ := cx.failed(2); bad {
			return 0, errors.New("dynamostore: ledger entry id collision")
		}
		// The old items of one cancelled transaction are one snapshot.
		accountFresh = false
		if bad, old := cx.failed(1); bad {
			if a, err = decode[accountItem](old); err != nil {
				return 0, err
			}
			accountFresh = true
		}
		if bad, old := cx.failed(0); bad {
			// Another refund (or a settle) won: decide again from its state.
			if r, err = decode[reservationItem](old); err != nil {
				return 0, err
			}
			continue
		}
		if err := backoff(ctx, attempt); err != nil {
			return 0, err
		}
	}
}
