package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/meridian-data/meridian/shared/store"
)

// An account's open web jobs are counted on one item of their own (not on
// the account item, which every paid call writes: a hundred slots there
// would make each of those writes several units dearer):
//
//	job slots  acct#<account id>  jobslots  slots M {<job id>: N, the end of its lease in Unix
//	                                        nanoseconds}, v N (moves on with every write)
//
// TakeJobSlot reads it strongly consistently, drops lapsed slots, counts
// the live ones and puts the item back conditioned on v as read (absent:
// on the item being absent), so of two concurrent takers that read the
// same count one wins and the other counts again. ReleaseJobSlot removes
// the job's entry and moves v on, so a taker that read the slot before
// the release cannot write it back.
const skJobSlots = "jobslots"

type jobSlotsItem struct {
	PK      string           `dynamodbav:"pk"`
	SK      string           `dynamodbav:"sk"`
	Slots   map[string]int64 `dynamodbav:"slots"`
	Version int64            `dynamodbav:"v"`
}

func (s *Store) TakeJobSlot(ctx context.Context, accountID, id string, now, until time.Time, max int) error {
	if store.BadID(accountID) || store.BadID(id) || max <= 0 {
		return store.ErrInvalid
	}
	pk := accountPK(accountID)
	for attempt := 0; ; attempt++ {
		it, err := get[jobSlotsItem](ctx, s, pk, skJobSlots)
		if err != nil {
			return err
		}
		next := jobSlotsItem{PK: pk, SK: skJobSlots, Slots: map[string]int64{}}
		cond, v := "attribute_not_exists(pk)", vals{}
		if it != nil {
			for job, end := range it.Slots {
				if end > now.UnixNano() {
					next.Slots[job] = end
				}
			}
			next.Version = it.Version + 1
			cond, v = "#v = :v", vals{":v": num(it.Version)}
		}
		held, ok := next.Slots[id]
		if !ok && len(next.Slots) >= max {
			return store.ErrJobQueueFull
		}
		if ok && held >= until.UnixNano() {
			return nil
		}
		next.Slots[id] = until.UnixNano()
		item, err := marshal(next)
		if err != nil {
			return err
		}
		in := &dynamodb.PutItemInput{TableName: s.table, Item: item, ConditionExpression: aws.String(cond)}
		if it != nil {
			in.ExpressionAttributeNames = map[string]string{"#v": "v"}
			in.ExpressionAttributeValues = v
		}
		_, err = s.db.PutItem(ctx, in)
		if err == nil {
			return nil
		}
		if bad, _ := condFailed(err); !bad && !conflict(err) && !throttled(err) {
			return fmt.Errorf("dynamostore: take job slot: %w", err)
		}
		// Another taker or a release wrote first: count again.
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

func (s *Store) ReleaseJobSlot(ctx context.Context, accountID, id string) error {
	in := &dynamodb.UpdateItemInput{
		TableName:                 s.table,
		Key:                       itemKey(accountPK(accountID), skJobSlots),
		ConditionExpression:       aws.String("attribute_exists(#slots.#job)"),
		UpdateExpression:          aws.String("REMOVE #slots.#job ADD #v :one"),
		ExpressionAttributeNames:  map[string]string{"#slots": "slots", "#job": id, "#v": "v"},
		ExpressionAttributeValues: vals{":one": num(1)},
	}
	for attempt := 0; ; attempt++ {
		_, err := s.db.UpdateItem(ctx, in)
		if bad, _ := condFailed(err); err == nil || bad {
			return nil // released, or not held
		}
		if !conflict(err) && !throttled(err) {
			return fmt.Errorf("dynamostore: release job slot: %w", err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}
