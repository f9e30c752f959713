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
	cond, values := "active_keys < :max", vals{":max": num(store.MaxActiveKeys), ":one": num(1)}
	if first {
		cond += " AND (attribute_not_exists(keys_created) OR keys_created = :zero)"
		values[":zero"] = num(0)
	}
	items := []types.TransactWriteItem{
		update(s, pk, skAccount, cond, "ADD active_keys :one, keys_created :one", nil, values),
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

func (s *Store) Key(ctx context.Context, accountID, keyID string) (store.Key, error) {
	k, err := get[keyItem](ctx, s, accountPK(accountID), pfxKey+keyID)
	if err != nil {
		return store.Key{}, err
	}
	if k == nil {
		return store.Key{}, store.ErrNotFound
	}
	return k.key(), nil
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
	keys := []store.Key{}
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
		for _, it := range items {
			keys = append(keys, it.key())
		}
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
// conditioned on the status it starts from, and changes active_keys in the
// same transaction only when the key leaves or enters active, so racing
// changes cannot skew the count. Asking for the current state is a no-op.
func (s *Store) SetKeyStatus(ctx context.Context, accountID, keyID string, to store.KeyStatus) (store.Key, error) {
	switch to {
	case store.KeyActive, store.KeyRevoked, store.KeyDeleted:
	default:
		return store.Key{}, fmt.Errorf("dynamostore: unknown key status %q", to)
	}
	pk, sk := accountPK(accountID), pfxKey+keyID
	k, err := get[keyItem](ctx, s, pk, sk)
	if err != nil {
		return store.Key{}, err
	}
	for attempt := 0; ; attempt++ {
		switch {
		case k == nil:
			return store.Key{}, store.ErrNotFound
		case k.Status == string(store.KeyDeleted):
			return store.Key{}, store.ErrKeyDeleted
		case k.Status == string(to):
			return k.key(), nil
		}
		now := s.now()
		items := []types.TransactWriteItem{
			update(s, pk, sk, "#status = :from", "SET #status = :to, updated_at = :now", statusName,
				vals{":from": str(k.Status), ":to": str(string(to)), ":now": timeAV(now)}),
		}
		// The hash record carries the status that authenticates (Enter).
		items = append(items, update(s, pfxKeyHash+k.Hash, skKeyHash, "attribute_exists(pk)", "SET #status = :to, prefix = :prefix", statusName,
			vals{":to": str(string(to)), ":prefix": str(k.Prefix)}))
		switch {
		case to == store.KeyActive: // from revoked
			items = append(items, update(s, pk, skAccount, "active_keys < :max", "ADD active_keys :one", nil,
				vals{":max": num(store.MaxActiveKeys), ":one": num(1)}))
		case k.Status == string(store.KeyActive): // to revoked or deleted
			items = append(items, update(s, pk, skAccount, "attribute_exists(pk)", "ADD active_keys :minus", nil,
				vals{":minus": num(-1)}))
		}
		c, err := s.transact(ctx, items)
		if err != nil {
			return store.Key{}, err
		}
		if c == nil {
			k.Status, k.UpdatedAt = string(to), now
			return k.key(), nil
		}
		if bad, old := c.failed(0); bad {
			// The key changed under us: decide again from what it is now.
			if k, err = decode[keyItem](old); err != nil {
				return store.Key{}, err
			}
		} else if bad, _ := c.failed(1); bad {
			return store.Key{}, fmt.Errorf("dynamostore: key %s has no hash record", keyID)
		} else if bad, old := c.failed(2); bad {
			if old == nil {
				return store.Key{}, store.ErrNotFound
			}
			return store.Key{}, store.ErrTooManyKeys
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Key{}, err
		}
	}
}

// UpdateKey renames a key and/or changes its credit limit (a nil limit
// removes the cap). A limit below credits_used is allowed: further
// reservations on the key are then refused.
func (s *Store) UpdateKey(ctx context.Context, accountID, keyID string, c store.KeyChange) (store.Key, error) {
	if c.SetLimit && c.CreditLimit != nil && *c.CreditLimit < 0 {
		return store.Key{}, errors.New("dynamostore: negative credit limit")
	}
	upd := expression.Set(expression.Name("updated_at"), expression.Value(s.now()))
	if c.Name != nil {
		upd = upd.Set(expression.Name("name"), expression.Value(*c.Name))
	}
	if c.SetLimit {
		if c.CreditLimit == nil {
			upd = upd.Remove(expression.Name("credit_limit"))
		} else {
			upd = upd.Set(expression.Name("credit_limit"), expression.Value(*c.CreditLimit))
		}
	}
	cond := expression.AttributeExists(expression.Name(AttrPK)).
		And(expression.Name("status").NotEqual(expression.Value(string(store.KeyDeleted))))
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return store.Key{}, err
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 itemKey(accountPK(accountID), pfxKey+keyID),
		UpdateExpression:                    ex.Update(),
		ConditionExpression:                 ex.Condition(),
		ExpressionAttributeNames:            ex.Names(),
		ExpressionAttributeValues:           ex.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	for attempt := 0; ; attempt++ {
		out, err := s.db.UpdateItem(ctx, in)
		if err == nil {
			k, err := decode[keyItem](out.Attributes)
			if err != nil || k == nil {
				return store.Key{}, fmt.Errorf("dynamostore: update key: no item returned (%v)", err)
			}
			return k.key(), nil
		}
		if bad, old := condFailed(err); bad {
			if old == nil {
				return store.Key{}, store.ErrNotFound
			}
			return store.Key{}, store.ErrKeyDeleted
		}
		if !conflict(err) {
			return store.Key{}, fmt.Errorf("dynamostore: update key: %w", err)
		}
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
