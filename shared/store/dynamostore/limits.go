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
func changeState[T any](ctx context.Context, s *Store, pk, sk string, change func(*T) (bool, time.Time)) (err error) {
	defer func() {
		if throttled(err) { // a hot item, not an outage
			err = fmt.Errorf("%w: %s throttled: %v", store.ErrContended, pk, err)
		}
	}()
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
			return fmt.Errorf("%w: %s lost %d races", store.ErrContended, pk, attempt+1)
		}
		// The failure hands back the winner's item: retry on it at once,
		// while it is fresh. Past a few losses, back off first and read it
		// again after the wait (an item kept through a sleep is stale by
		// the time it is written, and loses again).
		if old != nil && attempt < immediateStateRetries {
			if item, err = decode[stateItem](old); err != nil {
				return err
			}
			continue
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
		if item, err = get[stateItem](ctx, s, pk, sk); err != nil {
			return err
		}
	}
}

// maxStateAttempts bounds the optimistic retries on one counter; past it
// the record is contended (store.ErrContended), which callers refuse on.
const maxStateAttempts = 64

// immediateStateRetries are the retries made at once on the item a lost
// race returned, before backing off.
const immediateStateRetries = 2

var (
	_ store.Limits  = (*Store)(nil)
	_ store.FairUse = (*Store)(nil)
)
