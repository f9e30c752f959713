package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Allowance counters: pk=allowance#<provider>#<YYYY-MM>, sk=allowance,
// n (N, attempts counted) and expires_at (TTL, Unix seconds: the end of
// the following month, store.AllowanceExpiry). One conditional UpdateItem
// takes a unit, so the count never passes the limit whatever the
// concurrency, with no read first.
const (
	pfxAllowance = "allowance#"
	skAllowance  = "allowance"
)

type allowanceItem struct {
	N         int64 `dynamodbav:"n"`
	ExpiresAt int64 `dynamodbav:"expires_at"`
}

func allowancePK(name, month string) string { return pfxAllowance + name + "#" + month }

func (s *Store) TakeAllowance(ctx context.Context, name, month string, limit int64, now time.Time) (int64, bool, error) {
	exp, err := store.CheckAllowance(name, month, limit, now)
	if err != nil {
		return 0, false, err
	}
	if limit == 0 {
		used, err := s.AllowanceUsed(ctx, name, month, now)
		return used, false, err
	}
	in := &dynamodb.UpdateItemInput{
		TableName:           s.table,
		Key:                 itemKey(allowancePK(name, month), skAllowance),
		ConditionExpression: aws.String("attribute_not_exists(n) OR n < :limit"),
		// The expiry is the month's, the same on every write.
		UpdateExpression:                    aws.String("ADD n :one SET expires_at = :exp"),
		ExpressionAttributeValues:           vals{":limit": num(limit), ":one": num(1), ":exp": num(exp.Unix())},
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	for attempt := 0; ; attempt++ {
		out, err := s.db.UpdateItem(ctx, in)
		if failed, old := condFailed(err); failed {
			// Spent: the count as the condition saw it.
			item, derr := decode[allowanceItem](old)
			if derr != nil || item == nil {
				used, rerr := s.AllowanceUsed(ctx, name, month, now)
				return used, false, rerr
			}
			return item.N, false, nil
		}
		if conflict(err) && attempt < maxStateAttempts {
			if err := backoff(ctx, attempt); err != nil {
				return 0, false, err
			}
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("dynamostore: take allowance %s %s: %w", name, month, err)
		}
		item, err := decode[allowanceItem](out.Attributes)
		if err != nil || item == nil {
			return 0, false, fmt.Errorf("dynamostore: take allowance %s %s: no count returned (%v)", name, month, err)
		}
		return item.N, true, nil
	}
}

func (s *Store) AllowanceUsed(ctx context.Context, name, month string, now time.Time) (int64, error) {
	exp, err := store.AllowanceExpiry(month)
	if err != nil || name == "" {
		return 0, store.ErrInvalid
	}
	if !now.Before(exp) {
		return 0, nil
	}
	item, err := get[allowanceItem](ctx, s, allowancePK(name, month), skAllowance)
	if err != nil || item == nil {
		return 0, err
	}
	if item.ExpiresAt != 0 && item.ExpiresAt <= now.Unix() {
		return 0, nil // expired, not yet deleted
	}
	return item.N, nil
}

var _ store.Allowances = (*Store)(nil)
