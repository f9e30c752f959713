package dynamostore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Ledger page sizes.
const (
	DefaultLedgerLimit = 20
	MaxLedgerLimit     = 100
)

// The cursor is base64url("v1|<account id>|<sort key of the last entry
// returned>"): opaque to callers, bound to the account it was issued for.
const cursorVersion = "v1|"

func encodeCursor(accountID, sk string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + accountID + "|" + sk))
}

func decodeCursor(accountID, cursor string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return "", store.ErrBadCursor
	}
	sk, ok := strings.CutPrefix(string(raw), cursorVersion+accountID+"|")
	if !ok || !strings.HasPrefix(sk, pfxLedger) || len(sk) <= len(pfxLedger) || len(sk) > 1024 {
		return "", store.ErrBadCursor
	}
	return sk, nil
}

// Ledger pages the account's entries newest first (a Query on
// begins_with(sk, "ledger#") with ScanIndexForward=false). With a
// RequestID only that request's entries are returned (a FilterExpression;
// the Query keeps paging until the page is full or the ledger ends). A
// page has a cursor only when more entries follow.
func (s *Store) Ledger(ctx context.Context, accountID string, q store.LedgerQuery) (store.LedgerPage, error) {
	limit := q.Limit
	switch {
	case limit <= 0:
		limit = DefaultLedgerLimit
	case limit > MaxLedgerLimit:
		limit = MaxLedgerLimit
	}
	pk := accountPK(accountID)
	var start map[string]types.AttributeValue
	if q.Cursor != "" {
		sk, err := decodeCursor(accountID, q.Cursor)
		if err != nil {
			return store.LedgerPage{}, err
		}
		start = itemKey(pk, sk)
	}
	b := expression.NewBuilder().WithKeyCondition(expression.Key(AttrPK).Equal(expression.Value(pk)).
		And(expression.Key(AttrSK).BeginsWith(pfxLedger)))
	if q.RequestID != "" {
		b = b.WithFilter(expression.Name("request_id").Equal(expression.Value(q.RequestID)))
	}
	ex, err := b.Build()
	if err != nil {
		return store.LedgerPage{}, err
	}
	// One entry more than the page tells whether another page follows.
	var items []ledgerItem
	for {
		// Limit counts items read before the filter: read wider when filtering.
		read := int32(limit + 1 - len(items))
		if q.RequestID != "" {
			read = 500
		}
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 s.table,
			KeyConditionExpression:    ex.KeyCondition(),
			FilterExpression:          ex.Filter(),
			ExpressionAttributeNames:  ex.Names(),
			ExpressionAttributeValues: ex.Values(),
			ScanIndexForward:          aws.Bool(false),
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
			Limit:                     aws.Int32(read),
		})
		if err != nil {
			return store.LedgerPage{}, fmt.Errorf("dynamostore: ledger: %w", err)
		}
		var got []ledgerItem
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &got); err != nil {
			return store.LedgerPage{}, fmt.Errorf("dynamostore: ledger: %w", err)
		}
		items = append(items, got...)
		if len(items) > limit || len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	page := store.LedgerPage{Entries: make([]store.Entry, 0, min(len(items), limit))}
	for i, it := range items {
		if i == limit {
			page.NextCursor = encodeCursor(accountID, items[limit-1].SK)
			break
		}
		page.Entries = append(page.Entries, it.entry())
	}
	return page, nil
}
