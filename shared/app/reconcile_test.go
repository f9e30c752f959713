package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/queue/sqsqueue"
	"github.com/meridian-data/meridian/shared/queue/sqstest"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
	"github.com/meridian-data/meridian/shared/store/storetest"
	"github.com/meridian-data/meridian/shared/usage"
)

// The reconciliation tests run the real pieces: DynamoDB Local for the
// store and outbox, goaws for SQS, the worker's SQS handler fed the way
// Lambda's event source mapping feeds it.

// brokenRefunds is the DynamoDB store with refunds failing, as when the
// table throttles at the wrong moment.
type brokenRefunds struct{ *dynamostore.Store }

func (brokenRefunds) Refund(context.Context, string, string) (int64, error) {
	return 0, errors.New("ProvisionedThroughputExceededException: injected")
}

// account opens an account with credits and n keys on s.
func account(t *testing.T, s store.Store, credits int64, n int) (store.Account, []string) {
	t.Helper()
	acct, _, err := auth.CreateAccount(context.Background(), s, credits, "req_opening_"+fmt.Sprint(time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := 0; i < n; i++ {
		full, k := auth.NewKey(acct.ID, fmt.Sprintf("k%d", i), nil)
		if _, err := s.CreateKey(context.Background(), k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, full)
	}
	return acct, keys
}

func serve(h http.Handler, target, key string) (int, map[string]any) {
	req := httptest.NewRequest(http.MethodGet, "http://api.test"+target, nil)
	req.Header.Set("x-api-key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	return rec.Code, body
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Upstream fails, the refund cannot be written: the caller is told the
// charge is pending; the worker refunds from the queue; a second delivery
// of the same message refunds nothing more.
func TestPendingRefundIsReconciledFromSQS(t *testing.T) {
	s := dynamotest.NewStore(t)
	client, queueURL, _ := sqstest.NewQueues(t, 5)
	emitter := &usage.Emitter{Queue: sqsqueue.New(client, queueURL), Outbox: s, Logger: quietLogger()}
	worker := &usage.Worker{Store: s, Outcomes: s, Outbox: s}
	acct, keys := account(t, s, 10, 1)

	t.Setenv(app.EnvUpstreamFixtures, filepath.Join(repoRoot(t), "testdata", "upstream"))
	base, stop, err := app.StartReplay(quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	runner := app.NewUpstream(quietLogger(), func(string) (string, bool) { return "", false }, base)
	api := app.LocalHandler(quietLogger(), app.Deps{Store: brokenRefunds{s}, Upstream: runner, Events: emitter})

	code, body := serve(api, "/v1/company_registry/search?query=sample+unauthorised", keys[0])
	details, _ := body["error"].(map[string]any)["details"].(map[string]any)
	if code != 502 || body["credits_used"] != nil || details["billing_status"] != pipeline.BillingRefundPending {
		t.Fatalf("%d %v", code, body)
	}
	requestID := body["request_id"].(string)
	if a, _ := s.Account(context.Background(), acct.ID); a.CreditsRemaining != 9 {
		t.Fatalf("before reconciliation the debit stands: %d", a.CreditsRemaining)
	}
	if err := emitter.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	sqstest.Drain(t, client, queueURL, worker.HandleSQS)
	checkRefundedOnce(t, s, acct.ID, requestID, 10)

	// The same reconciliation delivered again (SQS is at-least-once).
	again := usage.ReconcileMessage(usage.Reconciliation{Action: usage.Refund, AccountID: acct.ID, RequestID: requestID})
	if err := sqsqueue.New(client, queueURL).Send(context.Background(), []queue.Message{again, again}); err != nil {
		t.Fatal(err)
	}
	sqstest.Drain(t, client, queueURL, worker.HandleSQS)
	checkRefundedOnce(t, s, acct.ID, requestID, 10)
	storetest.CheckLedger(t, s, acct.ID)
}

func checkRefundedOnce(t *testing.T, s store.Store, accountID, requestID string, balance int64) {
	t.Helper()
	page, err := s.Ledger(context.Background(), accountID, store.LedgerQuery{Limit: 10, RequestID: requestID})
	if err != nil {
		t.Fatal(err)
	}
	e := page.Entries
	if len(e) != 2 || e[0].Type != store.EntryRefund || e[1].Type != store.EntryDebit || e[0].Amount+e[1].Amount != 0 {
		t.Fatalf("want one debit and one refund for %s: %+v", requestID, e)
	}
	if a, _ := s.Account(context.Background(), accountID); a.CreditsRemaining != balance {
		t.Fatalf("balance %d; want %d", a.CreditsRemaining, balance)
	}
}

// A request killed after its reservation leaves it "reserved": once the
// lease ends, the scheduled worker run refunds it, exactly once however
// many sweeps run.
func TestReservationOfADeadRequestIsRefundedOnExpiry(t *testing.T) {
	s := dynamotest.NewStore(t)
	acct, _ := account(t, s, 10, 0)
	_, k := auth.NewKey(acct.ID, "dead", nil)
	key, err := s.CreateKey(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	charge := store.Charge{RequestID: "req_killed_" + fmt.Sprint(time.Now().UnixNano()), AccountID: acct.ID, KeyID: key.ID,
		KeyPrefix: key.Prefix, Endpoint: "/v1/company_registry/search", Cost: 3}
	if _, err := s.Reserve(context.Background(), charge); err != nil {
		t.Fatal(err)
	}
	// The process died here: no settle, no refund.
	later := time.Now().Add(store.ReservationLease + time.Minute)
	early := &usage.Worker{Store: s, Outcomes: s, Now: time.Now}
	if n, err := early.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("inside its lease a reservation stays: %d %v", n, err)
	}
	worker := &usage.Worker{Store: s, Outcomes: s, Now: func() time.Time { return later }}
	handler := app.WorkerHandler(worker, nil)
	scheduled := json.RawMessage(`{"source":"aws.events","detail-type":"Scheduled Event","detail":{}}`)
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := handler(context.Background(), scheduled); err != nil {
				t.Errorf("%v %v", out, err)
			}
		}()
	}
	wg.Wait()
	// Five overlapping sweeps: the ledger shows one refund.
	checkRefundedOnce(t, s, acct.ID, charge.RequestID, 10)
	if k, _ := s.Key(context.Background(), acct.ID, key.ID); k.CreditsUsed != 0 {
		t.Fatalf("the key's budget is returned: %d", k.CreditsUsed)
	}
}

// switchable is an HTTP client that fails every request while down, as an
// SQS outage does.
type switchable struct {
	next sqs.HTTPClient
	down *atomic.Bool
}

func (c switchable) Do(req *http.Request) (*http.Response, error) {
	if c.down.Load() {
		return nil, errors.New("dial tcp: connect: connection refused (injected outage)")
	}
	return c.next.Do(req)
}

// 1,000 requests, SQS down for part of the run: every usage event arrives
// once the queue is back (the outbox kept what SQS refused), each counted
// once, and /v1/status matches the requests made.
func TestUsageEventsSurviveAnSQSOutage(t *testing.T) {
	const requests, keys = 1000, 5
	s := dynamotest.NewStore(t)
	client, queueURL, _ := sqstest.NewQueues(t, 5)
	var down atomic.Bool
	flaky := sqs.New(client.Options(), func(o *sqs.Options) {
		o.HTTPClient = switchable{next: o.HTTPClient, down: &down}
		o.Retryer = aws.NopRetryer{}
	})
	outbox := &countingOutbox{Outbox: s}
	emitter := &usage.Emitter{Queue: sqsqueue.New(flaky, queueURL), Outbox: outbox, Logger: quietLogger()}
	worker := &usage.Worker{Store: s, Outcomes: s, Outbox: s}
	_, keyList := account(t, s, 10, keys)

	runner := app.NewUpstream(quietLogger(), func(string) (string, bool) { return "", false }, "")
	cfg := app.Config("", quietLogger(), app.Deps{Store: s, Upstream: runner, Events: emitter})
	api := app.New(cfg)

	ctx, cancel := context.WithCancel(context.Background())
	flushed := make(chan struct{})
	go func() { emitter.Run(ctx, 20*time.Millisecond); close(flushed) }()

	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 4*keys; w++ {
		wg.Add(1)
		go func(key string) {
			defer wg.Done()
			for i := range work {
				if i == requests/4 {
					down.Store(true) // the queue goes away a quarter into the run...
				}
				if i == 3*requests/4 {
					down.Store(false) // ...and comes back for the last quarter
				}
				code, body := serve(api, "/v1/app_store_b/categories", key)
				if code != 200 {
					failed.Add(1)
					t.Errorf("%d %v", code, body)
					continue
				}
				sent.Add(1)
			}
		}(keyList[w%keys])
	}
	for i := 0; i < requests; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	down.Store(false)
	cancel()
	<-flushed
	if n, err := emitter.Drain(context.Background()); err != nil {
		t.Fatalf("outbox drain after %d: %v", n, err)
	}
	if left, err := s.OutboxBatch(context.Background(), 10); err != nil || len(left) != 0 {
		t.Fatalf("outbox not empty: %d %v", len(left), err)
	}
	counted := map[string]int{}
	var mu sync.Mutex
	sqstest.Drain(t, client, queueURL, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		mu.Lock()
		for _, r := range ev.Records {
			if b, err := usage.Decode([]byte(r.Body)); err == nil && b.Kind == usage.KindUsage {
				counted[b.Usage.RequestID]++
			}
		}
		mu.Unlock()
		return worker.HandleSQS(ctx, ev)
	})
	if len(counted) != requests {
		t.Fatalf("%d distinct usage events arrived; want %d (sent %d, failed %d)", len(counted), requests, sent.Load(), failed.Load())
	}
	if outbox.kept.Load() == 0 {
		t.Fatal("the outage never reached the outbox: the test proves nothing")
	}
	code, body := serve(api, "/v1/status", keyList[0])
	if code != 200 {
		t.Fatalf("status %d %v", code, body)
	}
	var inStatus float64 = -1
	for _, p := range body["data"].(map[string]any)["platforms"].([]any) {
		if m := p.(map[string]any); m["platform"] == "app_store_b" {
			inStatus, _ = m["requests"].(float64)
		}
	}
	if inStatus != requests {
		t.Fatalf("status counts %v requests for app_store_b; want %d", inStatus, requests)
	}
}

// countingOutbox counts the messages the emitter kept.
type countingOutbox struct {
	store.Outbox
	kept atomic.Int64
}

func (c *countingOutbox) PutOutbox(ctx context.Context, msgs []store.OutboxMessage) error {
	err := c.Outbox.PutOutbox(ctx, msgs)
	if err == nil {
		c.kept.Add(int64(len(msgs)))
	}
	return err
}

// A message the worker can never apply is retried a bounded number of
// times, then moved to the dead-letter queue by the queue's redrive
// policy; the good messages beside it are applied once.
func TestPoisonMessagesGoToTheDeadLetterQueue(t *testing.T) {
	s := dynamotest.NewStore(t)
	client, queueURL, dlqURL := sqstest.NewQueues(t, 3)
	worker := &usage.Worker{Store: s, Outcomes: s}
	start := time.Now()
	good := usage.UsageMessage(usage.Event{RequestID: "req_good_" + fmt.Sprint(time.Now().UnixNano()), Platform: "qa_site", Status: 200, Served: true, At: time.Now()})
	poison := queue.Message{ID: "poison", Body: []byte(`{"kind":"usage"`)}
	if err := sqsqueue.New(client, queueURL).Send(context.Background(), []queue.Message{poison, good}); err != nil {
		t.Fatal(err)
	}
	sqstest.Drain(t, client, queueURL, worker.HandleSQS)
	dead := sqstest.ReceiveAll(t, client, dlqURL)
	if len(dead) != 1 || aws.ToString(dead[0].Body) != string(poison.Body) {
		t.Fatalf("dead letters: %+v", dead)
	}
	minutes, err := s.OutcomesSince(context.Background(), start.Add(-time.Minute), time.Now().Add(time.Minute))
	if err != nil || len(minutes["qa_site"]) != 1 || minutes["qa_site"][0].Requests != 1 {
		t.Fatalf("the good message counts once: %+v %v", minutes["qa_site"], err)
	}
}

// The worker function tells SQS batches from the scheduled sweep, and
// refuses anything else.
func TestWorkerFunctionEvents(t *testing.T) {
	s := dynamotest.NewStore(t)
	h := app.WorkerHandler(&usage.Worker{Store: s, Outcomes: s}, nil)
	out, err := h(context.Background(), json.RawMessage(`{"Records":[{"messageId":"m1","eventSource":"aws:sqs","body":"nonsense"}]}`))
	if resp, ok := out.(events.SQSEventResponse); err != nil || !ok || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m1" {
		t.Fatalf("SQS batch: %+v %v", out, err)
	}
	if _, err := h(context.Background(), json.RawMessage(`{"source":"aws.events","detail-type":"Scheduled Event"}`)); err != nil {
		t.Fatalf("scheduled sweep: %v", err)
	}
	if _, err := h(context.Background(), json.RawMessage(`{"hello":"world"}`)); err == nil {
		t.Fatal("an unknown event is an error")
	}
}
