package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// An active key's budget (credits_used and credit_limit) lives on its
// account item, as attribute kb#<key id>, beside the balance it draws on:
// a reservation then writes the account item alone for both the wallet and
// the key's cap (spec 5.7: atomic), and never the key item. The budget is
// there exactly while the key is active, so it also says that the key may
// be charged; a revoked or deleted key keeps its final figures on its key
// item, and a reactivated key brings them back. At most MaxActiveKeys
// budgets keep the account item well under 1 KB (one write unit).
//
// A key made before budgets moved here (active, no budget on its account)
// is read from its key item, after the account item, and its budget is
// written by the next write that decides on it: every change of a key
// item's credits_used also moves the account's balance_version on, so a
// key item read after the account item is as recent as it.
const pfxBudget = "kb#"

// keyBudget is an active key's spend and cap.
type keyBudget struct {
	Used  int64  `dynamodbav:"u"`
	Limit *int64 `dynamodbav:"l,omitempty"`
}

// over reports whether cost more credits would take the key past its cap.
func (b keyBudget) over(cost int64) bool { return b.Limit != nil && b.Used+cost > *b.Limit }

// UnmarshalDynamoDBAttributeValue reads an account item with its keys'
// budgets (attributes kb#<key id>).
func (a *accountItem) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	m, ok := av.(*types.AttributeValueMemberM)
	if !ok {
		return errors.New("dynamostore: an account item is a map")
	}
	type plain accountItem // without this method
	if err := attributevalue.UnmarshalMap(m.Value, (*plain)(a)); err != nil {
		return err
	}
	a.Budgets = nil
	for name, v := range m.Value {
		id, ok := strings.CutPrefix(name, pfxBudget)
		if !ok {
			continue
		}
		var b keyBudget
		if err := attributevalue.Unmarshal(v, &b); err != nil {
			return err
		}
		if a.Budgets == nil {
			a.Budgets = map[string]keyBudget{}
		}
		a.Budgets[id] = b
	}
	return nil
}

// withBudget is the key as its account's budget says it stands (the key
// item's own figures when the account carries none for it).
func (k keyItem) withBudget(a *accountItem) store.Key {
	key := k.key()
	if a != nil {
		if b, ok := a.Budgets[key.ID]; ok {
			key.CreditsUsed, key.CreditLimit = b.Used, b.Limit
		}
	}
	return key
}

// budgetsOf is the budget of each key named that may be charged, from
// the account item a and, for keys it carries no budget for, their key
// items (read now, after a). A key that is missing or not active gets its
// refusal instead.
func (s *Store) budgetsOf(ctx context.Context, a *accountItem, keyIDs []string) (map[string]keyBudget, map[string]error, error) {
	budgets, refused := map[string]keyBudget{}, map[string]error{}
	var missing [][2]string
	for _, id := range keyIDs {
		if b, ok := a.Budgets[id]; ok {
			budgets[id] = b
		} else {
			missing = append(missing, ref(a.PK, pfxKey+id))
		}
	}
	if len(missing) == 0 {
		return budgets, refused, nil
	}
	found, err := s.getMany(ctx, missing...)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range missing {
		id := strings.TrimPrefix(r[1], pfxKey)
		k, err := pick[keyItem](found, r[0], r[1])
		switch {
		case err != nil:
			return nil, nil, err
		case k == nil:
			refused[id] = store.ErrNotFound
		case k.Status != string(store.KeyActive):
			refused[id] = store.ErrKeyInactive
		default: // an active key from before budgets moved to the account
			budgets[id] = keyBudget{Used: k.CreditsUsed, Limit: k.CreditLimit}
		}
	}
	return budgets, refused, nil
}

// walletWrite is one write of an account item that is decided from the
// item as read: it is conditioned on balance_version as read and moves it
// on, so a reservation, refund, grant or budget change commits only if
// nothing else changed the wallet since it was read (balance_version
// also rules out A-B-A on the balance).
type walletWrite struct {
	a      *accountItem
	cond   []string
	set    []string
	add    []string
	remove []string
	names  map[string]string
	values vals
}

func newWalletWrite(a *accountItem) *walletWrite {
	return &walletWrite{
		a:      a,
		cond:   []string{"balance_version = :version"},
		set:    []string{"balance_version = :next"},
		names:  map[string]string{},
		values: vals{":version": num(a.BalanceVersion), ":next": num(a.BalanceVersion + 1)},
	}
}

// balance sets the balance to after (from the balance read); a grant also
// raises the lifetime total.
func (w *walletWrite) balance(after int64, now time.Time, grant int64) *walletWrite {
	w.cond = append(w.cond, "balance = :expected")
	w.set = append(w.set, "balance = :after", "balance_changed_at = :now")
	w.values[":expected"], w.values[":after"], w.values[":now"] = num(w.a.Balance), num(after), timeAV(now)
	if grant > 0 {
		w.set = append(w.set, "lifetime = :lifetime")
		w.values[":lifetime"] = num(w.a.Lifetime + grant)
	}
	return w
}

func (w *walletWrite) name(keyID string) string {
	p := "#kb" + strconv.Itoa(len(w.names))
	w.names[p] = pfxBudget + keyID
	return p
}

// budget sets a key's budget.
func (w *walletWrite) budget(keyID string, b keyBudget) error {
	av, err := attributevalue.Marshal(b)
	if err != nil {
		return fmt.Errorf("dynamostore: marshal budget: %w", err)
	}
	p := w.name(keyID)
	w.set = append(w.set, p+" = :"+p[1:])
	w.values[":"+p[1:]] = av
	return nil
}

// dropBudget removes a key's budget (the key leaves active).
func (w *walletWrite) dropBudget(keyID string) *walletWrite {
	w.remove = append(w.remove, w.name(keyID))
	return w
}

// activeKeys changes active_keys by delta; a key entering active needs a
// place under MaxActiveKeys.
func (w *walletWrite) activeKeys(delta int64) *walletWrite {
	if delta > 0 {
		w.cond = append(w.cond, "active_keys < :maxKeys")
		w.values[":maxKeys"] = num(store.MaxActiveKeys)
	}
	w.add = append(w.add, "active_keys :keysDelta")
	w.values[":keysDelta"] = num(delta)
	return w
}

func (w *walletWrite) item(s *Store) types.TransactWriteItem {
	upd := "SET " + strings.Join(w.set, ", ")
	if len(w.add) > 0 {
		upd += " ADD " + strings.Join(w.add, ", ")
	}
	if len(w.remove) > 0 {
		upd += " REMOVE " + strings.Join(w.remove, ", ")
	}
	return update(s, w.a.PK, skAccount, strings.Join(w.cond, " AND "), upd, w.names, w.values)
}

// moveBalance is the account half of a balance change that touches no
// key's budget (a grant).
func moveBalance(s *Store, a *accountItem, after int64, now time.Time, grant int64) types.TransactWriteItem {
	return newWalletWrite(a).balance(after, now, grant).item(s)
}
