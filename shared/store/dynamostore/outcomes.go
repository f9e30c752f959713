package dynamostore

import (
	"context"
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
// recording never reads and never contends; expires_at keeps a day.
// Reading the status window is one query per minute.
func outcomesPK(minute int64) string { return "outcomes#" + strconv.FormatInt(minute, 10) }

func (s *Store) RecordOutcome(ctx context.Context, o store.Outcome, now time.Time) error {
	minute := now.Unix() / 60
	errs := int64(0)
	if o.Error() {
		errs = 1
	}
	bucket := fmt.Sprintf("h%d", store.Bucket(o.Latency))
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      itemKey(outcomesPK(minute), o.Platform),
		UpdateExpression:         aws.String("ADD requests :one, errors :errs, #bucket :one SET expires_at = :exp"),
		ExpressionAttributeNames: map[string]string{"#bucket": bucket},
		ExpressionAttributeValues: vals{
			":one": num(1), ":errs": num(errs), ":exp": num(now.Add(24 * time.Hour).Unix()),
		},
	})
	return err
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
