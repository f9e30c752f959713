package dynamostore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/meridian-data/meridian/shared/store"
)

// faulty is s's table through a client whose PutItem and UpdateItem fail,
// as a throttled item does once the SDK's retries are spent, while fail
// says so for the item's partition key.
func faulty(s *Store, fail func(op, pk string) bool) (*Store, *atomic.Int64) {
	var failed atomic.Int64
	mw := middleware.InitializeMiddlewareFunc("meridian-usage-faults", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		var op string
		var pk types.AttributeValue
		switch w := in.Parameters.(type) {
		case *dynamodb.PutItemInput:
			op, pk = "PutItem", w.Item[AttrPK]
		case *dynamodb.UpdateItemInput:
			op, pk = "UpdateItem", w.Key[AttrPK]
		}
		if v, ok := pk.(*types.AttributeValueMemberS); ok && fail(op, v.Value) {
			failed.Add(1)
			return middleware.InitializeOutput{}, middleware.Metadata{}, &types.ProvisionedThroughputExceededException{Message: aws.String("injected by the test")}
		}
		return next.HandleInitialize(ctx, in)
	})
	client := dynamodb.New(s.db.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error { return st.Initialize.Add(mw, middleware.Before) })
	})
	return &Store{db: client, table: s.table, now: s.now}, &failed
}

func usageBatch(n int, at time.Time, acct, platform string) []store.UsageRecord {
	var out []store.UsageRecord
	for i := 0; i < n; i++ {
		status, errType := 200, ""
		if i%4 == 0 {
			status, errType = 502, "UPSTREAM_ERROR"
		}
		out = append(out, store.UsageRecord{
			RequestID: unique("req_"), At: at, AccountID: acct, Endpoint: "/v1/" + platform + "/search",
			Credits: int64(i % 3), Failed: status >= 400,
			Outcome: &store.Outcome{Platform: platform, Status: status, ErrorType: errType, Latency: 40 * time.Millisecond},
		})
	}
	return out
}

// The items a batch writes: one mark per request, one ADD per counter
// item, with the documented attributes and expiries.
func TestUsageItems(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	at := time.Date(2026, 11, 24, 13, 45, 10, 0, time.UTC)
	now := at.Add(time.Minute)
	acct, platform := unique("acct_"), unique("platform_")
	batch := usageBatch(4, at, acct, platform) // credits 0, 1, 2, 0; the first fails
	if n, err := s.RecordUsage(ctx, batch, now); err != nil || n != 4 {
		t.Fatalf("recorded %d, %v", n, err)
	}
	for _, r := range batch {
		mark := rawItem(t, s, "usage#"+r.RequestID, "usage")
		if attrN(t, mark, AttrExpiresAt) != strconv.FormatInt(now.Add(store.OutcomeDedupWindow).Unix(), 10) {
			t.Errorf("mark %v", mark)
		}
	}
	u := rawItem(t, s, "acctusage#"+acct, "2026-11-24#/v1/"+platform+"/search")
	if attrN(t, u, "calls") != "4" || attrN(t, u, "credits") != "3" || attrN(t, u, "errors") != "1" ||
		attrN(t, u, AttrExpiresAt) != strconv.FormatInt(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC).Add(store.AccountUsageRetention).Unix(), 10) {
		t.Errorf("account usage item %v", u)
	}
	m := rawItem(t, s, "outcomes#"+strconv.FormatInt(at.Unix()/60, 10), platform)
	if attrN(t, m, "requests") != "4" || attrN(t, m, "errors") != "1" || attrN(t, m, "h2") != "4" ||
		attrN(t, m, AttrExpiresAt) != strconv.FormatInt(at.Truncate(time.Minute).Add(time.Minute+24*time.Hour).Unix(), 10) {
		t.Errorf("minute item %v", m)
	}
}

// A counter ADD that fails takes the batch back: what was added is
// subtracted and the batch's marks deleted, so the batch delivered again
// counts every request once.
func TestUsageTakesTheBatchBackWhenACountFails(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	now := time.Now().UTC()
	acct, platform := unique("acct_"), unique("platform_")
	batch := usageBatch(12, now, acct, platform)
	broken, failures := faulty(s, func(op, pk string) bool { return op == "UpdateItem" && strings.HasPrefix(pk, pfxAcctUsage) })
	n, err := broken.RecordUsage(ctx, batch, now)
	var throttle *types.ProvisionedThroughputExceededException
	if n != 0 || !errors.As(err, &throttle) || failures.Load() != 1 {
		t.Fatalf("recorded %d, %v (%d failures); want the account item's failure", n, err, failures.Load())
	}
	for _, r := range batch {
		if mark := rawItem(t, s, "usage#"+r.RequestID, "usage"); mark != nil {
			t.Fatalf("the mark of %s was left: %v", r.RequestID, mark)
		}
	}
	if r, e := statusOf(t, s, platform, now); r != 0 || e != 0 {
		t.Fatalf("the minute's counts were not taken back: %d requests, %d errors", r, e)
	}
	if days, err := s.AccountUsage(ctx, acct, now, now); err != nil || len(days) != 0 {
		t.Fatalf("account usage after the failure: %+v %v", days, err)
	}
	// Delivered again, part of it twice (the queue's own retry overlaps).
	if n, err := s.RecordUsage(ctx, append(batch, batch[:5]...), now); err != nil || n != 12 {
		t.Fatalf("redelivery: recorded %d, %v", n, err)
	}
	if r, e := statusOf(t, s, platform, now); r != 12 || e != 3 {
		t.Errorf("status after the redelivery: %d requests, %d errors; want 12, 3", r, e)
	}
	days, err := s.AccountUsage(ctx, acct, now, now)
	if err != nil || len(days) != 1 || days[0].Calls != 12 || days[0].Credits != 12 || days[0].Errors != 3 {
		t.Errorf("account usage after the redelivery: %+v %v; want 12 calls, 12 credits, 3 errors", days, err)
	}
}

// A mark that cannot be written leaves its request uncounted and the call
// failed; the rest of the batch is counted, and a redelivery counts the
// one left.
func TestUsageMarkFailureCountsTheRest(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	now := time.Now().UTC()
	acct, platform := unique("acct_"), unique("platform_")
	batch := usageBatch(6, now, acct, platform)
	victim := usagePK(batch[2].RequestID)
	broken, _ := faulty(s, func(op, pk string) bool { return op == "PutItem" && pk == victim })
	if n, err := broken.RecordUsage(ctx, batch, now); n != 5 || err == nil || !strings.Contains(err.Error(), batch[2].RequestID) {
		t.Fatalf("recorded %d, %v; want 5 and the mark's error", n, err)
	}
	if n, err := s.RecordUsage(ctx, batch, now); err != nil || n != 1 {
		t.Fatalf("redelivery: recorded %d, %v; want the one left", n, err)
	}
	if r, _ := statusOf(t, s, platform, now); r != 6 {
		t.Errorf("status: %d requests; want 6", r)
	}
	if days, err := s.AccountUsage(ctx, acct, now, now); err != nil || len(days) != 1 || days[0].Calls != 6 {
		t.Errorf("account usage: %+v %v", days, err)
	}
}

func statusOf(t *testing.T, s *Store, platform string, at time.Time) (requests, errs int64) {
	t.Helper()
	got, err := s.OutcomesSince(ctx, at.Add(-store.StatusWindow), at)
	if err != nil {
		t.Fatal(err)
	}
	ps := store.Summarize(platform, got[platform])
	return ps.Requests, ps.Errors
}
