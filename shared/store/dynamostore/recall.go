package dynamostore

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Recalls: pk=recall#<id>, sk=recall, account_id, request_id, endpoint,
// data (B), created_at, expires_at (the table's TTL attribute, Unix
// seconds) and expires_at_ms, which reads compare exactly because TTL
// deletion is lazy.
const (
	pfxRecall = "recall#"
	skRecall  = "recall"
)

type recallItem struct {
	PK          string    `dynamodbav:"pk"`
	SK          string    `dynamodbav:"sk"`
	AccountID   string    `dynamodbav:"account_id"`
	RequestID   string    `dynamodbav:"request_id"`
	Endpoint    string    `dynamodbav:"endpoint"`
	Data        []byte    `dynamodbav:"data"`
	CreatedAt   time.Time `dynamodbav:"created_at"`
	ExpiresAt   int64     `dynamodbav:"expires_at"`
	ExpiresAtMS int64     `dynamodbav:"expires_at_ms"`
}

// PutRecall writes only where no recall is: ids are random, and a
// conditional put makes a collision an error rather than a swap of
// another account's records.
func (s *Store) PutRecall(ctx context.Context, r store.Recall) error {
	if err := store.CheckRecall(r); err != nil {
		return err
	}
	item, err := marshal(recallItem{
		PK: pfxRecall + r.ID, SK: skRecall, AccountID: r.AccountID, RequestID: r.RequestID, Endpoint: r.Endpoint,
		Data: r.Data, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.Unix() + 1, ExpiresAtMS: r.ExpiresAt.UnixMilli(),
	})
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: s.table, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return store.ErrRecallExists
	}
	return err
}

// GetRecall reads consistently: a caller recalls right after the answer
// that named the recall.
func (s *Store) GetRecall(ctx context.Context, id, accountID string, now time.Time) (store.Recall, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: s.table, Key: itemKey(pfxRecall+id, skRecall), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return store.Recall{}, err
	}
	it, err := decode[recallItem](out.Item)
	if err != nil {
		return store.Recall{}, err
	}
	if it == nil || it.AccountID != accountID || now.UnixMilli() >= it.ExpiresAtMS {
		return store.Recall{}, store.ErrNotFound
	}
	return store.Recall{
		ID: id, AccountID: it.AccountID, RequestID: it.RequestID, Endpoint: it.Endpoint, Data: it.Data,
		CreatedAt: it.CreatedAt, ExpiresAt: time.UnixMilli(it.ExpiresAtMS).UTC(),
	}, nil
}

var _ store.Recalls = (*Store)(nil)
