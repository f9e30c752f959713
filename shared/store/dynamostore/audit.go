package dynamostore

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/meridian-data/meridian/shared/store"
)

// Reservations implements store.Auditor: one consistent query of the
// account's req# items (settled and refunded ones until their TTL).
func (s *Store) Reservations(ctx context.Context, accountID string) ([]store.ReservationRecord, error) {
	pk := accountPK(accountID)
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                 s.table,
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :req)"),
		ExpressionAttributeValues: vals{":pk": str(pk), ":req": str(pfxReq)},
	})
	var out []store.ReservationRecord
	now := s.now()
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Items {
			r, err := decode[reservationItem](item)
			if err != nil {
				return nil, err
			}
			if r.expired(now) {
				continue
			}
			out = append(out, store.ReservationRecord{
				Charge: store.Charge{RequestID: strings.TrimPrefix(r.SK, pfxReq), AccountID: accountID, KeyID: r.KeyID,
					KeyPrefix: r.KeyPrefix, Endpoint: r.Endpoint, Cost: r.Cost},
				Status: r.Status, DebitEntryID: r.DebitEntry, RefundEntryID: r.RefundEntry,
				LeaseUntil: r.CreatedAt.Add(store.ReservationLease),
			})
		}
	}
	return out, nil
}

// HeldSlots implements store.Auditor: the s_ entries of the key's hash
// record, read consistently, expired leases included.
func (s *Store) HeldSlots(ctx context.Context, id string) ([]store.Slot, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: s.table, Key: itemKey(pfxKeyHash+id, skKeyHash), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	var slots []store.Slot
	for name, av := range out.Item {
		if strings.HasPrefix(name, attrSlot) {
			slots = append(slots, store.Slot{RequestID: name, LeaseUntil: number(av)})
		}
	}
	return slots, nil
}

var _ store.Auditor = (*Store)(nil)
