package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Outcome counters: pk=outcomes#<Unix minute>, sk=<platform>, with
// requests, errors and h0..hN (latency histogram) kept by ADD, so
// recording never reads; expires_at keeps a day. Reading the status
// window is one query per minute.
//
// Account usage: pk=acctusage#<account id>, sk=<YYYY-MM-DD>#<endpoint>,
// with calls, credits and errors kept by ADD; expires_at keeps the day
// store.AccountUsageRetention after it ends. Reading an account's days is
// one query (sk BETWEEN).
//
// A request counts once: pk=usage#<request id>, sk=usage is its mark,
// with expires_at = now + store.OutcomeDedupWindow, put on the condition
// that there is no live mark before anything is added for it.
func outcomesPK(minute int64) string { return "outcomes#" + strconv.FormatInt(minute, 10) }

const skUsage = "usage"

func usagePK(requestID string) string { return "usage#" + requestID }

const pfxAcctUsage = "acctusage#"

func acctUsagePK(accountID string) string { return pfxAcctUsage + accountID }

func acctUsageSK(date, endpoint string) string { return date + "#" + endpoint }

// usageConcurrency bounds the writes one RecordUsage has in flight.
const usageConcurrency = 16

// undoTimeout bounds the take-back after a failed count; it runs even when
// the caller's context has ended.
const undoTimeout = 5 * time.Second

// counter is what one batch adds to one counter item.
type counter struct {
	pk, sk  string
	adds    map[string]int64 // attribute -> amount
	expires int64            // Unix seconds
}

// RecordUsage counts the batch with as few writes as the once-per-request
// rule allows. Transactions on a hot counter item conflict, while plain
// ADDs queue up, so it runs in three steps:
//
//  1. each record's mark, a conditional PutItem (attribute_not_exists(pk)
//     OR expires_at <= now), all at once (at most usageConcurrency in
//     flight): a failed condition means the request was counted already;
//  2. the newly marked records' amounts summed per counter item (the
//     platform's minute, the account's day and endpoint);
//  3. one UpdateItem ADD per counter item, all at once.
//
// If an ADD fails, the ADDs that succeeded are taken back (ADD of the
// negative) and the batch's new marks deleted, so a redelivery of the
// batch counts every record once. A mark whose put fails otherwise leaves
// its record uncounted and the call's error set (the rest is counted), so
// a redelivery counts it then. What remains: a take-back or mark delete
// that fails too (each is logged in the returned error) leaves the batch
// counted twice after a redelivery, or not at all; a mark put whose answer
// is lost after it was written leaves its record uncounted; and a process
// that dies between the marks and the ADDs loses the marked records'
// counts. Each needs DynamoDB to fail twice in a row or the process to
// die within a few milliseconds, and costs a status or usage figure,
// never money.
func (s *Store) RecordUsage(ctx context.Context, records []store.UsageRecord, now time.Time) (int, error) {
	for _, r := range records {
		if err := r.Check(); err != nil {
			return 0, err
		}
	}
	seen := map[string]bool{}
	var todo []store.UsageRecord
	for _, r := range records {
		if r.Counts() && !seen[r.RequestID] {
			seen[r.RequestID] = true
			todo = append(todo, r)
		}
	}
	if len(todo) == 0 {
		return 0, nil
	}
	marked := make([]bool, len(todo))
	markErrs := make([]error, len(todo))
	eachBounded(len(todo), func(i int) {
		marked[i], markErrs[i] = s.mark(ctx, todo[i].RequestID, now)
	})
	var fresh []store.UsageRecord
	for i, r := range todo {
		if marked[i] {
			fresh = append(fresh, r)
		}
	}
	markErr := errors.Join(markErrs...)
	if len(fresh) == 0 {
		return 0, markErr
	}
	counters := usageCounters(fresh)
	added := make([]bool, len(counters))
	addErrs := make([]error, len(counters))
	eachBounded(len(counters), func(i int) {
		addErrs[i] = s.add(ctx, counters[i], 1)
		added[i] = addErrs[i] == nil
	})
	addErr := errors.Join(addErrs...)
	if addErr == nil {
		return len(fresh), markErr
	}
	// Take the batch back: what was added, then the marks.
	undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	undoErrs := make([]error, len(counters)+len(fresh))
	eachBounded(len(counters), func(i int) {
		if added[i] {
			if err := s.add(undo, counters[i], -1); err != nil {
				undoErrs[i] = fmt.Errorf("take back %s %s: %w", counters[i].pk, counters[i].sk, err)
			}
		}
	})
	eachBounded(len(fresh), func(i int) {
		id := fresh[i].RequestID
		if _, err := s.db.DeleteItem(undo, &dynamodb.DeleteItemInput{TableName: s.table, Key: itemKey(usagePK(id), skUsage)}); err != nil {
			undoErrs[len(counters)+i] = fmt.Errorf("delete the mark of %s: %w", id, err)
		}
	})
	return 0, errors.Join(addErr, markErr, errors.Join(undoErrs...))
}

// eachBounded runs fn(0..n-1) with at most usageConcurrency at once.
func eachBounded(n int, fn func(int)) {
	if n == 1 {
		fn(0)
		return
	}
	sem := make(chan struct{}, usageConcurrency)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// mark puts a request's mark unless a live one is there: false, nil when
// the request was counted already.
func (s *Store) mark(ctx context.Context, requestID string, now time.Time) (bool, error) {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: s.table,
		Item: map[string]types.AttributeValue{
			AttrPK: str(usagePK(requestID)), AttrSK: str(skUsage),
			AttrExpiresAt: num(now.Add(store.OutcomeDedupWindow).Unix()),
		},
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR expires_at <= :now"),
		ExpressionAttributeValues: vals{":now": num(now.Unix())},
	})
	if failed, _ := condFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mark %s: %w", requestID, err)
	}
	return true, nil
}

// usageCounters sums the records per counter item, in key order.
func usageCounters(records []store.UsageRecord) []*counter {
	byKey := map[[2]string]*counter{}
	at := func(pk, sk string, expires time.Time) *counter {
		c := byKey[[2]string{pk, sk}]
		if c == nil {
			c = &counter{pk: pk, sk: sk, adds: map[string]int64{}, expires: expires.Unix()}
			byKey[[2]string{pk, sk}] = c
		}
		return c
	}
	for _, r := range records {
		if o := r.Outcome; o != nil {
			minute := r.At.Unix() / 60
			c := at(outcomesPK(minute), o.Platform, time.Unix((minute+1)*60, 0).Add(24*time.Hour))
			c.adds["requests"]++
			c.adds["errors"] += one(o.Error()) // added even when 0, so the attribute is always there
			c.adds[fmt.Sprintf("h%d", store.Bucket(o.Latency))]++
		}
		if r.AccountUsage() {
			dayEnd := store.UsageDayStart(r.At).Add(24 * time.Hour)
			c := at(acctUsagePK(r.AccountID), acctUsageSK(store.UsageDate(r.At), r.Endpoint), dayEnd.Add(store.AccountUsageRetention))
			c.adds["calls"]++
			c.adds["credits"] += r.Credits
			c.adds["errors"] += one(r.Failed)
		}
	}
	out := make([]*counter, 0, len(byKey))
	for _, c := range byKey {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].pk != out[j].pk {
			return out[i].pk < out[j].pk
		}
		return out[i].sk < out[j].sk
	})
	return out
}

func one(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// add is one UpdateItem that adds sign times the counter's amounts (and
// sets its expiry).
func (s *Store) add(ctx context.Context, c *counter, sign int64) error {
	names := make([]string, 0, len(c.adds))
	for name := range c.adds {
		names = append(names, name)
	}
	sort.Strings(names)
	upd := expression.Set(expression.Name(AttrExpiresAt), expression.Value(c.expires))
	for _, name := range names {
		upd = upd.Add(expression.Name(name), expression.Value(sign*c.adds[name]))
	}
	ex, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 s.table,
		Key:                       itemKey(c.pk, c.sk),
		UpdateExpression:          ex.Update(),
		ExpressionAttributeNames:  ex.Names(),
		ExpressionAttributeValues: ex.Values(),
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

// AccountUsage is one Query of the account's usage partition, sk BETWEEN
// the first day and the last day's end ("~" sorts after every endpoint,
// which starts with "/"). Rows a take-back left at zero calls are skipped.
func (s *Store) AccountUsage(ctx context.Context, accountID string, from, to time.Time) ([]store.UsageDay, error) {
	first, last := store.UsageDate(from), store.UsageDate(to)
	if accountID == "" || first > last {
		return nil, nil
	}
	kc := expression.Key(AttrPK).Equal(expression.Value(acctUsagePK(accountID))).
		And(expression.Key(AttrSK).Between(expression.Value(first), expression.Value(last+"#~")))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                 s.table,
		KeyConditionExpression:    ex.KeyCondition(),
		ExpressionAttributeNames:  ex.Names(),
		ExpressionAttributeValues: ex.Values(),
	})
	var out []store.UsageDay
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Items {
			sk, _ := item[AttrSK].(*types.AttributeValueMemberS)
			if sk == nil {
				continue
			}
			date, endpoint, ok := strings.Cut(sk.Value, "#")
			d := store.UsageDay{Date: date, Endpoint: endpoint,
				Calls: number(item["calls"]), Credits: number(item["credits"]), Errors: number(item["errors"])}
			if ok && d.Calls > 0 {
				out = append(out, d)
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
