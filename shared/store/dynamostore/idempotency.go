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

// Idempotency records: pk=idem#<account id>#<key>, sk=idem, with state,
// fingerprint, request_id, status, body (B), lease_until_ms,
// expires_at_ms (compared on every write) and expires_at (the table TTL).
const skIdem = "idem"

type idemItem struct {
	PK           string `dynamodbav:"pk"`
	SK           string `dynamodbav:"sk"`
	Fingerprint  string `dynamodbav:"fingerprint"`
	RequestID    string `dynamodbav:"request_id"`
	State        string `dynamodbav:"state"`
	Status       int    `dynamodbav:"status,omitempty"`
	Body         []byte `dynamodbav:"body,omitempty"`
	LeaseUntilMS int64  `dynamodbav:"lease_until_ms"`
	ExpiresAtMS  int64  `dynamodbav:"expires_at_ms"`
	ExpiresAt    int64  `dynamodbav:"expires_at"`
}

func idemPK(accountID, key string) string { return "idem#" + accountID + "#" + key }

func (i idemItem) record() store.IdempotencyRecord {
	return store.IdempotencyRecord{
		Fingerprint: i.Fingerprint, RequestID: i.RequestID, State: i.State, Status: i.Status, Body: i.Body,
		LeaseUntil: time.UnixMilli(i.LeaseUntilMS).UTC(), ExpiresAt: time.UnixMilli(i.ExpiresAtMS).UTC(),
	}
}

// ClaimIdempotency is one conditional put: it succeeds only where no live
// record stands, and a refusal returns the holder's record (ALL_OLD).
func (s *Store) ClaimIdempotency(ctx context.Context, accountID, key, fingerprint, requestID string, now, leaseUntil, expiresAt time.Time) (store.IdempotencyRecord, bool, error) {
	it := idemItem{
		PK: idemPK(accountID, key), SK: skIdem, Fingerprint: fingerprint, RequestID: requestID, State: store.IdemInProgress,
		LeaseUntilMS: leaseUntil.UnixMilli(), ExpiresAtMS: expiresAt.UnixMilli(), ExpiresAt: expiresAt.Unix() + 1,
	}
	av, err := marshal(it)
	if err != nil {
		return store.IdempotencyRecord{}, false, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: s.table, Item: av,
		ConditionExpression: aws.String("attribute_not_exists(pk) OR expires_at_ms <= :now OR " +
			"(#state = :inprogress AND lease_until_ms <= :now)"),
		ExpressionAttributeNames:            map[string]string{"#state": "state"},
		ExpressionAttributeValues:           vals{":now": num(now.UnixMilli()), ":inprogress": str(store.IdemInProgress)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if failed, old := condFailed(err); failed {
		holder, derr := decode[idemItem](old)
		if derr == nil && holder == nil {
			holder, derr = get[idemItem](ctx, s, it.PK, skIdem) // the failure carried no item
		}
		if derr != nil || holder == nil {
			return store.IdempotencyRecord{}, false, errors.Join(errors.New("dynamostore: idempotency claim refused without a holder"), derr)
		}
		return holder.record(), false, nil
	}
	if err != nil {
		return store.IdempotencyRecord{}, false, err
	}
	return it.record(), true, nil
}

func (s *Store) CompleteIdempotency(ctx context.Context, accountID, key, requestID string, status int, body []byte, expiresAt time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: itemKey(idemPK(accountID, key), skIdem),
		ConditionExpression:      aws.String("request_id = :rid AND #state = :inprogress"),
		UpdateExpression:         aws.String("SET #state = :stored, #status = :status, body = :body, expires_at_ms = :exp, expires_at = :ttl"),
		ExpressionAttributeNames: map[string]string{"#state": "state", "#status": "status"},
		ExpressionAttributeValues: vals{
			":rid": str(requestID), ":inprogress": str(store.IdemInProgress), ":stored": str(store.IdemStored),
			":status": num(int64(status)), ":body": &types.AttributeValueMemberB{Value: body},
			":exp": num(expiresAt.UnixMilli()), ":ttl": num(expiresAt.Unix() + 1),
		},
	})
	if failed, _ := condFailed(err); failed {
		return store.ErrNotFound // another request took the key over
	}
	return err
}

func (s *Store) ReleaseIdempotency(ctx context.Context, accountID, key, requestID string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: s.table, Key: itemKey(idemPK(accountID, key), skIdem),
		ConditionExpression:       aws.String("request_id = :rid AND #state = :inprogress"),
		ExpressionAttributeNames:  map[string]string{"#state": "state"},
		ExpressionAttributeValues: vals{":rid": str(requestID), ":inprogress": str(store.IdemInProgress)},
	})
	if failed, _ := condFailed(err); failed {
		return nil // nothing of ours to free
	}
	return err
}

var _ store.Idempotency = (*Store)(nil)
