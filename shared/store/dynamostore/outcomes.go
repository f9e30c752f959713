package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Outcome counters: pk=outcomes#<Unix minute>, sk=<platform>, with
// requests, errors and h0..hN (latency histogram) kept by ADD, so
// recording never reads; expires_at keeps a day. Reading the status
// window is one query per minute.
//
// A request counts once: pk=usage#<request id>, sk=usage is its mark,
// with expires_at = now + store.OutcomeDedupWindow, put in the same
// transaction as the counter update on the condition that there is no
// live mark.
func outcomesPK(minute int64) string { return "outcomes#" + strconv.FormatInt(minute, 10) }

const skUsage = "usage"

func usagePK(requestID string) string { return "usage#" + requestID }

// RecordOutcome is one TransactWriteItems: [put the request's mark if
// attribute_not_exists(pk) OR expires_at <= now; ADD to the minute's
// counters]. A failed mark condition means the request was counted already
// (false, nil). Transactions on the same counter item conflict, so a
// conflict (or throttling) is retried until ctx ends.
func (s *Store) RecordOutcome(ctx context.Context, requestID string, o store.Outcome, now time.Time) (bool, error) {
	if requestID == "" {
		return false, store.ErrInvalid
	}
	minute := now.Unix() / 60
	errs := int64(0)
	if o.Error() {
		errs = 1
	}
	bucket := fmt.Sprintf("h%d", store.Bucket(o.Latency))
	// Two writes, not a transaction: every event of a platform's minute
	// adds to one counter item, and transactions on a hot item conflict,
	// while plain ADDs queue up. The marker goes first; if the count then
	// fails, the marker is taken back so a redelivery counts it.
	marker := &dynamodb.PutItemInput{
		TableName: s.table,
		Item: map[string]types.AttributeValue{
			AttrPK: str(usagePK(requestID)), AttrSK: str(skUsage),
			AttrExpiresAt: num(now.Add(store.OutcomeDedupWindow).Unix()),
		},
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR expires_at <= :now"),
		ExpressionAttributeValues: vals{":now": num(now.Unix())},
	}
	if _, err := s.db.PutItem(ctx, marker); err != nil {
		if failed, _ := condFailed(err); failed {
			return false, nil // counted already
		}
		return false, err
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      itemKey(outcomesPK(minute), o.Platform),
		UpdateExpression:         aws.String("ADD requests :one, errors :errs, #bucket :one SET expires_at = :exp"),
		ExpressionAttributeNames: map[string]string{"#bucket": bucket},
		ExpressionAttributeValues: vals{
			":one": num(1), ":errs": num(errs), ":exp": num(now.Add(24 * time.Hour).Unix()),
		},
	})
	if err != nil {
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if _, derr := s.db.DeleteItem(undo, &dynamodb.DeleteItemInput{TableName: s.table, Key: itemKey(usagePK(requestID), skUsage)}); derr != nil {
			err = errors.Join(err, derr) // the event then stays uncounted
		}
		return false, err
	}
	return true, nil
}

func (s *Store) OutcomesSince(ctx context.Context, since, now time.Time) (map[string][]store.MinuteStats, error) {
	out := map[string][]store.MinuteStats{}
	for minute := since.Unix()/60 + 1; minute <= now.Unix()/60; minute++ { // 15 buckets, this minute included
		p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
			TableName:                 s.table,
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: vals{":pk": str(outcomesPK(minute))},
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, item := range page.Items {
				m := store.MinuteStats{Minute: minute, Histogram: make([]int64, len(store.LatencyBucketsMS)+1)}
				m.Requests, m.Errors = number(item["requests"]), number(item["errors"])
				for i := range m.Histogram {
					m.Histogram[i] = number(item[fmt.Sprintf("h%d", i)])
				}
				platform := item["sk"].(*types.AttributeValueMemberS).Value
				out[platform] = append(out[platform], m)
			}
		}
	}
	return out, nil
}

func number(av types.AttributeValue) int64 {
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(n.Value), 10, 64)
	return v
}

var _ store.Outcomes = (*Store)(nil)
