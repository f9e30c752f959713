package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// ErrKeyHashInUse: CreateKey with a hash another key already has.
var ErrKeyHashInUse = errors.New("dynamostore: key hash already stored")

var statusName = map[string]string{"#status": "status"}

// CreateKey counts the key against the account's cap (active_keys <
// MaxActiveKeys, then +1) and writes the key and its hash lookup, in one
// transaction. The caller may choose the key id; otherwise one is drawn.
func (s *Store) CreateKey(ctx context.Context, k store.Key) (store.Key, error) {
	return s.createKey(ctx, k, false)
}

// CreateFirstKey also requires keys_created = 0 (absent on old items).
func (s *Store) CreateFirstKey(ctx context.Context, k store.Key) (store.Key, error) {
	return s.createKey(ctx, k, true)
}

func (s *Store) createKey(ctx context.Context, k store.Key, first bool) (store.Key, error) {
	if k.AccountID == "" || k.Hash == "" {
		return store.Key{}, errors.New("dynamostore: a key needs an account and a hash")
	}
	if k.CreditLimit != nil && *k.CreditLimit < 0 {
		return store.Key{}, errors.New("dynamostore: negative credit limit")
	}
	if k.ID == "" {
		k.ID = store.NewKeyID()
	}
	now := s.now()
	k.Status, k.CreditsUsed, k.CreatedAt, k.UpdatedAt = store.KeyActive, 0, now, now
	pk := accountPK(k.AccountID)
	keyAV, err := marshal(keyItem{
		PK: pk, SK: pfxKey + k.ID, Hash: k.Hash, Prefix: k.Prefix, Last4: k.Last4, Name: k.Name,
		Status: string(store.KeyActive), CreditLimit: k.CreditLimit, CreatedAt: now, UpdatedAt: now,
	})
	if err != nil {
		return store.Key{}, err
	}
	lookupAV, err := marshal(keyHashItem{
		PK: pfxKeyHash + k.Hash, SK: skKeyHash, AccountID: k.AccountID, KeyID: k.ID, Status: string(store.KeyActive), Prefix: k.Prefix,
	})
	if err != nil {
		return store.Key{}, err
	}
	budget, err := attributevalue.Marshal(keyBudget{Limit: k.CreditLimit})
	if err != nil {
		return store.Key{}, err
	}
	cond, values := "active_keys < :max", vals{":max": num(store.MaxActiveKeys), ":one": num(1), ":budget": budget}
	if first {
		cond += " AND (attribute_not_exists(keys_created) OR keys_created = :zero)"
		values[":zero"] = num(0)
	}
	// A new key's budget needs no balance_version: nothing can have
	// decided on a key that did not exist.
	items := []types.TransactWriteItem{
		update(s, pk, skAccount, cond, "SET #budget = :budget ADD active_keys :one, keys_created :one",
			map[string]string{"#budget": pfxBudget + k.ID}, values),
		putNew(s, keyAV),
		putNew(s, lookupAV),
	}
	for attempt := 0; ; attempt++ {
		c, err := s.transact(ctx, items)
		if err != nil {
			return store.Key{}, err
		}
		if c == nil {
			return k, nil
		}
		if bad, old := c.failed(0); bad {
			if old == nil {
				return store.Key{}, store.ErrNotFound
			}
			a, err := decode[accountItem](old)
			if err != nil {
				return store.Key{}, err
			}
			if first && a.KeysCreated > 0 {
				return store.Key{}, store.ErrHasKeys
			}
			return store.Key{}, store.ErrTooManyKeys
		}
		if bad, _ := c.failed(1); bad {
			return store.Key{}, fmt.Errorf("dynamostore: key id %s already exists", k.ID)
		}
		if bad, _ := c.failed(2); bad {
			return store.Key{}, ErrKeyHashInUse
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Key{}, err
		}
	}
}

// KeyByHash reads the hash lookup, then the key itself, both strongly
// consistent and uncached: a status change applies to the next lookup.
func (s *Store) KeyByHash(ctx context.Context, hash string) (store.Key, error) {
	ref, err := get[keyHashItem](ctx, s, pfxKeyHash+hash, skKeyHash)
	if err != nil {
		return store.Key{}, err
	}
	if ref == nil {
		return store.Key{}, store.ErrNotFound
	}
	return s.Key(ctx, ref.AccountID, ref.KeyID)
}

// Key reads the key and its account (for the key's budget) in one
// BatchGetItem. The two reads are not one snapshot: while the key's status
// is changing, its figures may be the key item's older ones for that
// moment. Charges never decide on them (ReserveMany reads the account).
func (s *Store) Key(ctx context.Context, accountID, keyID string) (store.Key, error) {
	pk := accountPK(accountID)
	found, err := s.getMany(ctx, ref(pk, pfxKey+keyID), ref(pk, skAccount))
	if err != nil {
		return store.Key{}, err
	}
	k, err := pick[keyItem](found, pk, pfxKey+keyID)
	if err != nil {
		return store.Key{}, err
	}
	if k == nil {
		return store.Key{}, store.ErrNotFound
	}
	a, err := pick[accountItem](found, pk, skAccount)
	if err != nil {
		return store.Key{}, err
	}
	return k.withBudget(a), nil
}

// Keys lists the account's keys that are not deleted, oldest first.
func (s *Store) Keys(ctx context.Context, accountID string) ([]store.Key, error) {
	kc := expression.Key(AttrPK).Equal(expression.Value(accountPK(accountID))).
		And(expression.Key(AttrSK).BeginsWith(pfxKey))
	filter := expression.Name("status").NotEqual(expression.Value(string(store.KeyDeleted)))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).WithFilter(filter).Build()
	if err != nil {
		return nil, err
	}
	// The account first: a key item read after it is as recent as the
	// budgets it carries (budgets.go).
	a, err := get[accountItem](ctx, s, accountPK(accountID), skAccount)
	if err != nil {
		return nil, err
	}
	var listed []keyItem
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                 s.table,
		KeyConditionExpression:    ex.KeyCondition(),
		FilterExpression:          ex.Filter(),
		ExpressionAttributeNames:  ex.Names(),
		ExpressionAttributeValues: ex.Values(),
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: list keys: %w", err)
		}
		var items []keyItem
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &items); err != nil {
			return nil, err
		}
		listed = append(listed, items...)
	}
	keys := make([]store.Key, len(listed))
	for i, it := range listed {
		keys[i] = it.withBudget(a)
	}
	if err := s.fillLastUsed(ctx, keys); err != nil {
		return nil, err
	}
	sort.Slice(keys, func(i, j int) bool {
		if !keys[i].CreatedAt.Equal(keys[j].CreatedAt) {
			return keys[i].CreatedAt.Before(keys[j].CreatedAt)
		}
		return keys[i].ID < keys[j].ID
	})
	return keys, nil
}

// SetKeyStatus moves a key between states (spec 3.1). Each change is
// conditioned on the status it starts from, and a key that leaves or
// enters active changes the wallet in the same transaction (active_keys,
// and the key's budget: leaving, the budget's figures go to the key item;
// entering, they come back to the account), so racing changes cannot
// skew the count or a charge. Asking for the current state is a no-op.
func (s *Store) SetKeyStatus(ctx context.Context, accountID, keyID string, to store.KeyStatus) (store.Key, error) {
	switch to {
	case store.KeyActive, store.KeyRevoked, store.KeyDeleted:
	default:
		return store.Key{}, fmt.Errorf("dynamostore: unknown key status %q", to)
	}
	pk, sk := accountPK(accountID), pfxKey+keyID
	a, k, err := s.undeletedKey(ctx, pk, sk)
	for attempt := 0; ; attempt++ {
		if err != nil {
			return store.Key{}, err
		}
		if k.Status == string(to) {
			return k.withBudget(a), nil
		}
		now := s.now()
		keyUpd, keyVals := "SET #status = :to, updated_at = :now", vals{":from": str(k.Status), ":to": str(string(to)), ":now": timeAV(now)}
		var w *walletWrite
		switch {
		case to == store.KeyActive: // from revoked
			w = newWalletWrite(a).activeKeys(1)
			if err := w.budget(keyID, keyBudget{Used: k.CreditsUsed, Limit: k.CreditLimit}); err != nil {
				return store.Key{}, err
			}
		case k.Status == string(store.KeyActive): // to revoked or deleted
			w = newWalletWrite(a).activeKeys(-1)
			if b, ok := a.Budgets[keyID]; ok {
				w.dropBudget(keyID)
				k.CreditsUsed, k.CreditLimit = b.Used, b.Limit
				keyUpd += ", credits_used = :used"
				keyVals[":used"] = num(b.Used)
				if b.Limit != nil {
					keyUpd += ", credit_limit = :limit"
					keyVals[":limit"] = num(*b.Limit)
				} else {
					keyUpd += " REMOVE credit_limit"
				}
			}
		}
		items := []types.TransactWriteItem{
			update(s, pk, sk, "#status = :from", keyUpd, statusName, keyVals),
			// The hash record carries the status that authenticates (Enter).
			update(s, pfxKeyHash+k.Hash, skKeyHash, "attribute_exists(pk)", "SET #status = :to, prefix = :prefix", statusName,
				vals{":to": str(string(to)), ":prefix": str(k.Prefix)}),
		}
		if w != nil {
			items = append(items, w.item(s))
		}
		c, txErr := s.transact(ctx, items)
		if txErr != nil {
			return store.Key{}, txErr
		}
		if c == nil {
			k.Status, k.UpdatedAt = string(to), now
			return k.key(), nil
		}
		if bad, _ := c.failed(1); bad {
			return store.Key{}, fmt.Errorf("dynamostore: key %s has no hash record", keyID)
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Key{}, err
		}
		bad, old := c.failed(2)
		if !bad {
			// The key changed under us (or a conflict): read both again.
			a, k, err = s.undeletedKey(ctx, pk, sk)
			continue
		}
		// The wallet changed: go on from the account as the condition saw
		// it, with the key read after it.
		if a, err = decode[accountItem](old); err != nil {
			return store.Key{}, err
		}
		if to == store.KeyActive && a != nil && a.ActiveKeys >= store.MaxActiveKeys {
			return store.Key{}, store.ErrTooManyKeys
		}
		a, k, err = s.keyAfter(ctx, a, pk, sk)
	}
}

// undeletedKey reads the account item, then the key item (in that order,
// the key's figures are at least as recent as the account's version:
// budgets.go): ErrNotFound without either, ErrKeyDeleted for a deleted key.
func (s *Store) undeletedKey(ctx context.Context, pk, sk string) (*accountItem, *keyItem, error) {
	a, err := get[accountItem](ctx, s, pk, skAccount)
	if err != nil {
		return nil, nil, err
	}
	return s.keyAfter(ctx, a, pk, sk)
}

// keyAfter is undeletedKey from an account item already read.
func (s *Store) keyAfter(ctx context.Context, a *accountItem, pk, sk string) (*accountItem, *keyItem, error) {
	k, err := get[keyItem](ctx, s, pk, sk)
	switch {
	case err != nil:
		return nil, nil, err
	case k == nil || a == nil:
		return nil, nil, store.ErrNotFound
	case k.Status == string(store.KeyDeleted):
		return nil, nil, store.ErrKeyDeleted
	}
	return a, k, nil
}

// UpdateKey renames a key and/or changes its credit limit (a nil limit
// removes the cap). A limit below credits_used is allowed: further
// reservations on the key are then refused. An active key's new limit is
// written to its budget on the account too, in the same transaction and
// conditioned on the wallet as read, so a reservation decided on the old
// limit cannot commit after it.
func (s *Store) UpdateKey(ctx context.Context, accountID, keyID string, c store.KeyChange) (store.Key, error) {
	if c.SetLimit && c.CreditLimit != nil && *c.CreditLimit < 0 {
		return store.Key{}, errors.New("dynamostore: negative credit limit")
	}
	pk, sk := accountPK(accountID), pfxKey+keyID
	for attempt := 0; ; attempt++ {
		a, k, err := s.undeletedKey(ctx, pk, sk)
		if err != nil {
			return store.Key{}, err
		}
		// The key's figures: its budget on the account while it is active,
		// else (or for a key from before budgets moved there) its key item's.
		b, onAccount := a.Budgets[keyID]
		if !onAccount {
			b = keyBudget{Used: k.CreditsUsed, Limit: k.CreditLimit}
		}
		now := s.now()
		upd := expression.Set(expression.Name("updated_at"), expression.Value(now))
		if c.Name != nil {
			upd = upd.Set(expression.Name("name"), expression.Value(*c.Name))
			k.Name = *c.Name
		}
		if c.SetLimit {
			if c.CreditLimit == nil {
				upd = upd.Remove(expression.Name("credit_limit"))
			} else {
				upd = upd.Set(expression.Name("credit_limit"), expression.Value(*c.CreditLimit))
			}
			b.Limit = c.CreditLimit
		}
		ex, err := expression.NewBuilder().WithUpdate(upd).
			WithCondition(expression.Name("status").Equal(expression.Value(k.Status))).Build()
		if err != nil {
			return store.Key{}, err
		}
		items := []types.TransactWriteItem{{Update: &types.Update{
			TableName: s.table, Key: itemKey(pk, sk), UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		}}}
		if c.SetLimit {
			// The wallet's version moves on for a key that is not active too:
			// a reactivation that read the old limit cannot commit after this.
			w := newWalletWrite(a)
			if k.Status == string(store.KeyActive) {
				if err := w.budget(keyID, b); err != nil {
					return store.Key{}, err
				}
			}
			items = append(items, w.item(s))
		}
		cx, err := s.transact(ctx, items)
		if err != nil {
			return store.Key{}, err
		}
		if cx == nil {
			k.UpdatedAt, k.CreditsUsed, k.CreditLimit = now, b.Used, b.Limit
			return k.key(), nil
		}
		// The key or the wallet changed under us: decide again.
		if err := backoff(ctx, attempt); err != nil {
			return store.Key{}, err
		}
	}
}

// attrLastUsed, on a key's hash record, is when the key last authenticated
// (Unix milliseconds), set by the admission's own write.
const attrLastUsed = "last_used"

// fillLastUsed reads the keys' hash records (one BatchGetItem per 100) for
// when each was last used.
func (s *Store) fillLastUsed(ctx context.Context, keys []store.Key) error {
	for start := 0; start < len(keys); start += 100 {
		part := keys[start:min(start+100, len(keys))]
		refs := make([][2]string, len(part))
		for i, k := range part {
			refs[i] = ref(pfxKeyHash+k.Hash, skKeyHash)
		}
		found, err := s.getMany(ctx, refs...)
		if err != nil {
			return err
		}
		for i := range part {
			if ms := number(found[pfxKeyHash+part[i].Hash+"\x00"+skKeyHash][attrLastUsed]); ms > 0 {
				t := time.UnixMilli(ms).UTC()
				part[i].LastUsedAt = &t
			}
		}
	}
	return nil
}
