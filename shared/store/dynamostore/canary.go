package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/meridian-data/meridian/shared/store"
)

// Canary runs: pk=canary, sk=run#<time, store.CanaryRunTimeFormat>, report
// (B), expires_at (the table's TTL attribute). One partition: a run an
// hour is far below any partition's limits, and newest-first is one Query.
const (
	pkCanary     = "canary"
	pfxCanaryRun = "run#"
)

type canaryItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	Report    []byte `dynamodbav:"report"`
	ExpiresAt int64  `dynamodbav:"expires_at"`
}

func (s *Store) RecordCanaryRun(ctx context.Context, r store.CanaryRun) error {
	if err := store.CheckCanaryRun(r); err != nil {
		return err
	}
	item, err := marshal(canaryItem{
		PK: pkCanary, SK: pfxCanaryRun + r.At.UTC().Format(store.CanaryRunTimeFormat), Report: r.Report,
		ExpiresAt: r.At.Add(store.CanaryRetention).Unix(),
	})
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item})
	return err
}

// CanaryRuns reads newest first from the retention's start: TTL deletion
// is lazy, so older items are bounded out by the key condition.
func (s *Store) CanaryRuns(ctx context.Context, limit int, now time.Time) ([]store.CanaryRun, error) {
	if limit <= 0 {
		return nil, nil
	}
	from := pfxCanaryRun + now.Add(-store.CanaryRetention).UTC().Format(store.CanaryRunTimeFormat)
	ex, err := expression.NewBuilder().WithKeyCondition(expression.Key(AttrPK).Equal(expression.Value(pkCanary)).
		And(expression.Key(AttrSK).Between(expression.Value(from), expression.Value(pfxCanaryRun+"~")))).Build()
	if err != nil {
		return nil, err
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: s.table, KeyConditionExpression: ex.KeyCondition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: canary runs: %w", err)
	}
	var items []canaryItem
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &items); err != nil {
		return nil, fmt.Errorf("dynamostore: canary runs: %w", err)
	}
	runs := make([]store.CanaryRun, 0, len(items))
	for _, it := range items {
		at, err := time.Parse(store.CanaryRunTimeFormat, it.SK[len(pfxCanaryRun):])
		if err != nil {
			return nil, fmt.Errorf("dynamostore: canary run %q: %w", it.SK, err)
		}
		runs = append(runs, store.CanaryRun{At: at, Report: it.Report})
	}
	return runs, nil
}

var _ store.CanaryLog = (*Store)(nil)
