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

// Cache entries: pk=cache#<key>, sk=cache, data_gz (B, the data gzipped)
// or data (B, as it is, when gzip would not make it smaller), stored_at,
// expires_at (the table's TTL attribute, Unix seconds) and expires_at_ms,
// which reads compare exactly because TTL deletion is lazy. DynamoDB bills
// a write per started kilobyte of the item and a read per 4 KB: JSON data
// gzipped is a fraction of both.
const (
	pfxCache = "cache#"
	skCache  = "cache"
)

type cacheItem struct {
	PK          string    `dynamodbav:"pk"`
	SK          string    `dynamodbav:"sk"`
	Data        []byte    `dynamodbav:"data,omitempty"`
	DataGzip    []byte    `dynamodbav:"data_gz,omitempty"`
	StoredAt    time.Time `dynamodbav:"stored_at"`
	ExpiresAt   int64     `dynamodbav:"expires_at"`
	ExpiresAtMS int64     `dynamodbav:"expires_at_ms"`
}

// CacheGet reads eventually consistently: a cache may be a moment stale.
func (s *Store) CacheGet(ctx context.Context, key string, now time.Time) (store.CacheEntry, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: itemKey(pfxCache+key, skCache)})
	if err != nil {
		return store.CacheEntry{}, err
	}
	c, err := decode[cacheItem](out.Item)
	if err != nil {
		return store.CacheEntry{}, err
	}
	if c == nil || now.UnixMilli() >= c.ExpiresAtMS {
		return store.CacheEntry{}, store.ErrNotFound
	}
	data := c.Data
	if c.DataGzip != nil {
		if data, err = unpack(c.DataGzip); err != nil {
			return store.CacheEntry{}, err
		}
	}
	return store.CacheEntry{Data: data, StoredAt: c.StoredAt, ExpiresAt: time.UnixMilli(c.ExpiresAtMS).UTC()}, nil
}

func (s *Store) CachePut(ctx context.Context, key string, data []byte, now, expiresAt time.Time) error {
	if len(data) > store.MaxCachedBytes || !expiresAt.After(now) {
		return store.ErrInvalid
	}
	c := cacheItem{PK: pfxCache + key, SK: skCache, StoredAt: now.UTC(), ExpiresAt: ttl(expiresAt), ExpiresAtMS: expiresAt.UnixMilli()}
	packed, err := pack(data)
	if err != nil {
		return err
	}
	if len(packed) < len(data) {
		c.DataGzip = packed
	} else {
		c.Data = data
	}
	item, err := marshal(c)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item})
	return err
}

var _ store.Cache = (*Store)(nil)

// Fill markers: pk=cache#<key> (the cache entry's partition), sk=fill,
// owner, lease_ms (until when the owner fills) and expires_at (TTL, a
// minute on): one conditional write claims or renews it.
const skFill = "fill"

func (s *Store) ClaimFill(ctx context.Context, key, owner string, now time.Time, lease time.Duration) (bool, error) {
	until := now.Add(lease)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: s.table,
		Item: map[string]types.AttributeValue{
			AttrPK: str(pfxCache + key), AttrSK: str(skFill), "owner": str(owner),
			"lease_ms": num(until.UnixMilli()), AttrExpiresAt: num(until.Add(time.Minute).Unix()),
		},
		ConditionExpression:      aws.String("attribute_not_exists(pk) OR lease_ms <= :now OR #owner = :owner"),
		ExpressionAttributeNames: map[string]string{"#owner": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": num(now.UnixMilli()), ":owner": str(owner),
		},
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return false, nil
	}
	return err == nil, err
}

func (s *Store) ReleaseFill(ctx context.Context, key, owner string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: s.table, Key: itemKey(pfxCache+key, skFill),
		ConditionExpression:       aws.String("#owner = :owner"),
		ExpressionAttributeNames:  map[string]string{"#owner": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": str(owner)},
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return nil // another owner's marker, or none: nothing of ours to remove
	}
	return err
}

var _ store.Fills = (*Store)(nil)
