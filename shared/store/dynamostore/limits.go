package dynamostore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Limit records: pk=limits#<key id>, sk=limits, state (JSON of
// store.LimitState), version N and expires_at (TTL: when the state would
// hold nothing). Writes are optimistic on version; a lost race retries
// with the item the condition returned.
const skLimits = "limits"

type limitsItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	State     string `dynamodbav:"state"`
	Version   int64  `dynamodbav:"version"`
	ExpiresAt int64  `dynamodbav:"expires_at"`
}

func (s *Store) Admit(ctx context.Context, keyID, requestID string, now time.Time, rules store.LimitRules) (store.Admission, error) {
	var a store.Admission
	err := s.changeLimits(ctx, keyID, func(st *store.LimitState) bool {
		a = st.Admit(requestID, now, rules)
		return a.Admitted
	}, rules)
	return a, err
}

func (s *Store) ReleaseSlot(ctx context.Context, keyID, requestID string, now time.Time) error {
	return s.changeLimits(ctx, keyID, func(st *store.LimitState) bool { return st.Release(requestID) }, store.DefaultLimits)
}

// changeLimits reads the key's state, lets change edit it (returning
// whether to write), and writes it back if nobody wrote in between.
func (s *Store) changeLimits(ctx context.Context, keyID string, change func(*store.LimitState) bool, rules store.LimitRules) error {
	pk := "limits#" + keyID
	item, err := get[limitsItem](ctx, s, pk, skLimits)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		var st store.LimitState
		version := int64(0)
		if item != nil {
			if err := json.Unmarshal([]byte(item.State), &st); err != nil {
				return err
			}
			version = item.Version
		}
		if !change(&st) {
			return nil
		}
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		av, err := marshal(limitsItem{PK: pk, SK: skLimits, State: string(raw), Version: version + 1,
			ExpiresAt: st.ExpiresAt(rules).Unix() + 1})
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
		if item, err = decode[limitsItem](old); err != nil {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

var _ store.Limits = (*Store)(nil)
