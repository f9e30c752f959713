package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Counter records (rate limits and fair use) keep a small JSON state:
//
//	limits   limits#<key id>                  limits    store.LimitState
//	fair use fairuse#<account id>#<endpoint>  fairuse   store.FairUseState
//
// with version N and expires_at (TTL: when the state would hold nothing).
// Writes are optimistic on version; a lost race retries with the item the
// condition returned.
const (
	skLimits  = "limits"
	skFairUse = "fairuse"
)

type stateItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	State     string `dynamodbav:"state"`
	Version   int64  `dynamodbav:"version"`
	ExpiresAt int64  `dynamodbav:"expires_at"`
}

func (s *Store) Admit(ctx context.Context, keyID, requestID string, now time.Time, rules store.LimitRules, slot bool) (store.Admission, error) {
	var a store.Admission
	err := changeState(ctx, s, "limits#"+keyID, skLimits, func(st *store.LimitState) (bool, time.Time) {
		a = st.Admit(requestID, now, rules, slot)
		return a.Admitted, st.ExpiresAt(rules)
	})
	return a, err
}

func (s *Store) TakeSlot(ctx context.Context, keyID, requestID string, now time.Time, rules store.LimitRules) (store.Admission, error) {
	var a store.Admission
	err := changeState(ctx, s, "limits#"+keyID, skLimits, func(st *store.LimitState) (bool, time.Time) {
		a = st.Take(requestID, now, rules)
		return a.Admitted, st.ExpiresAt(rules)
	})
	return a, err
}

func (s *Store) ReleaseSlot(ctx context.Context, keyID, requestID string, now time.Time, rules store.LimitRules) error {
	return changeState(ctx, s, "limits#"+keyID, skLimits, func(st *store.LimitState) (bool, time.Time) {
		return st.Release(requestID), st.ExpiresAt(rules)
	})
}

func (s *Store) FairUseUsed(ctx context.Context, accountID, endpoint string, now time.Time) (int64, error) {
	item, err := get[stateItem](ctx, s, "fairuse#"+accountID+"#"+endpoint, skFairUse)
	if err != nil || item == nil {
		return 0, err
	}
	var st store.FairUseState
	if err := json.Unmarshal([]byte(item.State), &st); err != nil {
		return 0, err
	}
	return st.Used(now), nil
}

func (s *Store) AddFairUse(ctx context.Context, accountID, endpoint string, attempts int64, now time.Time) (int64, error) {
	var total int64
	err := changeState(ctx, s, "fairuse#"+accountID+"#"+endpoint, skFairUse, func(st *store.FairUseState) (bool, time.Time) {
		total = st.Add(attempts, now)
		return true, now.Add(store.FairUseWindow)
	})
	return total, err
}

// changeState reads a counter's state, lets change edit it (returning
// whether to write and when the state expires), and writes it back if
// nobody wrote in between.
func changeState[T any](ctx context.Context, s *Store, pk, sk string, change func(*T) (bool, time.Time)) error {
	item, err := get[stateItem](ctx, s, pk, sk)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		st := new(T)
		version := int64(0)
		if item != nil {
			if err := json.Unmarshal([]byte(item.State), st); err != nil {
				return err
			}
			version = item.Version
		}
		write, expires := change(st)
		if !write {
			return nil
		}
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		av, err := marshal(stateItem{PK: pk, SK: sk, State: string(raw), Version: version + 1, ExpiresAt: expires.Unix() + 1})
		if err != nil {
			return err
		}
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: s.table, Item: av,
			ConditionExpression:                 aws.String("attribute_not_exists(pk) OR version = :v"),
			ExpressionAttributeValues:           vals{":v": num(version)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		failed, old := condFailed(err)
		if !failed {
			return err
		}
		if attempt >= maxStateAttempts {
			return fmt.Errorf("dynamostore: %s stayed contended for %d attempts", pk, attempt+1)
		}
		if old == nil { // the failure carried no item: read it again
			item, err = get[stateItem](ctx, s, pk, sk)
		} else {
			item, err = decode[stateItem](old)
		}
		if err != nil {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

// maxStateAttempts bounds the optimistic retries on one counter; callers
// treat the error as the store being unavailable.
const maxStateAttempts = 64

var (
	_ store.Limits  = (*Store)(nil)
	_ store.FairUse = (*Store)(nil)
)
