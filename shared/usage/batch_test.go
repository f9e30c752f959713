package usage_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/usage"
)

// countingOutcomes records every RecordUsage call, and fails the first
// fail of them as a throttled store would.
type countingOutcomes struct {
	store.Outcomes
	mu    sync.Mutex
	calls [][]store.UsageRecord
	fail  int
}

func (c *countingOutcomes) RecordUsage(ctx context.Context, records []store.UsageRecord, now time.Time) (int, error) {
	c.mu.Lock()
	c.calls = append(c.calls, records)
	fail := c.fail > 0
	if fail {
		c.fail--
	}
	c.mu.Unlock()
	if fail {
		return 0, errors.New("dynamodb: throughput exceeded")
	}
	return c.Outcomes.RecordUsage(ctx, records, now)
}

func (c *countingOutcomes) sizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, r := range c.calls {
		out = append(out, len(r))
	}
	return out
}

func credits(n int64) *int64 { return &n }

// A call of the account's own counts as its usage; a composite's legs, the
// sandbox and calls without an account or a resolved endpoint do not.
// Only served /v1 data calls count for the platform's status.
func TestWhatCountsAsAccountUsage(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	base := usage.Event{RequestID: "req_1", At: at, AccountID: "acct_a", Endpoint: "/v1/marketplace_a/search", Platform: "marketplace_a",
		Status: 200, Credits: credits(3), Served: true, LatencyMS: 12.5}
	cases := []struct {
		name    string
		edit    func(*usage.Event)
		account bool
		outcome bool
		credits int64
		failed  bool
	}{
		{"a paid call", func(*usage.Event) {}, true, true, 3, false},
		{"a failure", func(e *usage.Event) { e.Status, e.ErrorType, e.Credits = 502, "UPSTREAM_ERROR", credits(0) }, true, true, 0, true},
		{"a refusal", func(e *usage.Event) { e.Status, e.Served, e.Credits = 402, false, credits(0) }, true, false, 0, true},
		{"a pending charge", func(e *usage.Event) { e.Credits, e.BillingStatus = nil, "refund_pending" }, true, true, 0, false},
		{"a free call", func(e *usage.Event) {
			e.Endpoint, e.Platform, e.Served, e.Credits = "/v1/credits/balance", "credits", false, credits(0)
		}, true, false, 0, false},
		{"a composite's leg", func(e *usage.Event) { e.ParentRequestID = "req_parent" }, false, true, 0, false},
		{"the sandbox", func(e *usage.Event) { e.Sandbox, e.Served = true, false }, false, false, 0, false},
		{"no account", func(e *usage.Event) { e.AccountID, e.Status, e.Served = "", 401, false }, false, false, 0, false},
		{"no endpoint", func(e *usage.Event) { e.Endpoint, e.Platform, e.Status, e.Served = "", "", 404, false }, false, false, 0, false},
	}
	for _, c := range cases {
		e := base
		c.edit(&e)
		r, ok := usage.RecordOf(e)
		if ok != (c.account || c.outcome) || r.RequestID != "req_1" || !r.At.Equal(at) {
			t.Errorf("%s: %+v %v", c.name, r, ok)
		}
		if got := r.AccountID != ""; got != c.account || (c.account && (r.Endpoint != e.Endpoint || r.Credits != c.credits || r.Failed != c.failed)) {
			t.Errorf("%s: account usage %+v", c.name, r)
		}
		if got := r.Outcome != nil; got != c.outcome || (c.outcome && (r.Outcome.Platform != "marketplace_a" || r.Outcome.Latency != 12500*time.Microsecond)) {
			t.Errorf("%s: outcome %+v", c.name, r.Outcome)
		}
	}
}

func usageMsg(id, account, endpoint string, status int, cost int64, mutate ...func(*usage.Event)) queue.Message {
	e := usage.Event{RequestID: id, At: time.Now().UTC(), AccountID: account, Endpoint: endpoint, Platform: "marketplace_a",
		Status: status, Credits: credits(cost), Served: true}
	for _, m := range mutate {
		m(&e)
	}
	return usage.UsageMessage(e)
}

func sqsEvent(msgs ...queue.Message) events.SQSEvent {
	var ev events.SQSEvent
	for i, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i+1), Body: string(m.Encoded())})
	}
	return ev
}

func failures(resp events.SQSEventResponse) []string {
	var out []string
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// An SQS batch's usage events are one store call; its reconciliation is
// applied on its own; when the store call fails, every usage message of
// the batch fails (and only they, with the poison one), and their
// redelivery counts each request once.
func TestHandleSQSCountsTheBatchInOneCall(t *testing.T) {
	s := openStore(t)
	acct, c := paid(t, s)
	counting := &countingOutcomes{Outcomes: s, fail: 1}
	w := &usage.Worker{Store: s, Outcomes: counting}
	search := "/v1/marketplace_a/search"
	ev := sqsEvent(
		usageMsg("req_a", acct.ID, search, 200, 3),
		usageMsg("req_b", acct.ID, search, 502, 0),
		usage.ReconcileMessage(usage.Reconciliation{Action: usage.Refund, AccountID: acct.ID, RequestID: c.RequestID}),
		queue.Message{Body: []byte("garbage")},
		usageMsg("req_a", acct.ID, search, 200, 3), // delivered twice
		usageMsg("req_leg", acct.ID, search, 200, 0, func(e *usage.Event) { e.ParentRequestID = "req_c" }),
		usageMsg("req_c", acct.ID, "/v1/search/all", 200, 5, func(e *usage.Event) { e.Platform = "search" }),
		usageMsg("req_free", acct.ID, "/v1/credits/balance", 200, 0, func(e *usage.Event) { e.Served, e.Platform = false, "credits" }),
		usageMsg("req_sandbox", acct.ID, search, 200, 0, func(e *usage.Event) { e.Sandbox, e.Served = true, false }),
	)
	resp, err := w.HandleSQS(context.Background(), ev)
	if got := failures(resp); err != nil || fmt.Sprint(got) != "[m1 m2 m4 m5 m6 m7 m8]" {
		t.Fatalf("failed %v (%v); want every counted usage message and the poison one", got, err)
	}
	if b := balance(t, s, acct.ID); b != 10 {
		t.Fatalf("the refund is applied whatever the usage call did: balance %d", b)
	}
	// The queue redelivers the failures (the sandbox event, which counts
	// nowhere, succeeded): now they count, once.
	var again []events.SQSMessage
	for _, r := range ev.Records {
		for _, id := range failures(resp) {
			if r.MessageId == id {
				again = append(again, r)
			}
		}
	}
	resp, err = w.HandleSQS(context.Background(), events.SQSEvent{Records: again})
	if got := failures(resp); err != nil || fmt.Sprint(got) != "[m4]" {
		t.Fatalf("redelivery failed %v (%v); want only the poison message", got, err)
	}
	if sizes := counting.sizes(); fmt.Sprint(sizes) != "[6 6]" {
		t.Errorf("store calls %v; want one per delivery, of the 6 usage events that count", sizes)
	}
	days, err := s.AccountUsage(context.Background(), acct.ID, time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.UsageDay{}
	for _, d := range days {
		got[d.Endpoint] = d
	}
	if len(got) != 3 || got[search].Calls != 2 || got[search].Credits != 3 || got[search].Errors != 1 ||
		got["/v1/search/all"].Calls != 1 || got["/v1/search/all"].Credits != 5 || got["/v1/credits/balance"].Calls != 1 {
		t.Errorf("account usage %+v: want search 2 calls (3 credits, 1 error), search/all 1 (5), credits/balance 1; no leg, no sandbox", days)
	}
	minutes, _ := s.OutcomesSince(context.Background(), time.Now().Add(-store.StatusWindow), time.Now())
	if ps := store.Summarize("marketplace_a", minutes["marketplace_a"]); ps.Requests != 3 || ps.Errors != 0 {
		t.Errorf("status counts the served calls, the leg included: %+v", ps) // 502 without UPSTREAM_ERROR type: not an error
	}
}

// Near the invocation's end nothing more is tried: every message is
// reported failed for the queue to deliver again.
func TestHandleSQSWithNoTimeLeft(t *testing.T) {
	s := openStore(t)
	acct, c := paid(t, s)
	counting := &countingOutcomes{Outcomes: s}
	w := &usage.Worker{Store: s, Outcomes: counting}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	resp, _ := w.HandleSQS(ctx, sqsEvent(usageMsg("req_a", acct.ID, "/v1/x/y", 200, 1),
		usage.ReconcileMessage(usage.Reconciliation{Action: usage.Refund, AccountID: acct.ID, RequestID: c.RequestID})))
	if got := failures(resp); fmt.Sprint(got) != "[m1 m2]" || len(counting.sizes()) != 0 || balance(t, s, acct.ID) != 7 {
		t.Errorf("failed %v, store calls %v, balance %d", got, counting.sizes(), balance(t, s, acct.ID))
	}
}

// The local queue applies what is buffered as one batch (up to 1000
// messages); when the batch's store call fails, its messages are retried
// one by one.
func TestLocalQueueAppliesBufferedMessagesAsABatch(t *testing.T) {
	for _, fail := range []int{0, 1} {
		t.Run(fmt.Sprintf("failing calls %d", fail), func(t *testing.T) {
			s := openStore(t)
			counting := &countingOutcomes{Outcomes: s, fail: fail}
			q := usage.NewLocalQueue(&usage.Worker{Store: s, Outcomes: counting}, 1500, nil)
			var msgs []queue.Message
			for i := 0; i < 1200; i++ {
				msgs = append(msgs, usageMsg(fmt.Sprintf("req_%04d", i), "acct_local", "/v1/x/y", 200, 1))
			}
			if err := q.Send(context.Background(), msgs); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go q.Run(ctx)
			deadline := time.Now().Add(10 * time.Second)
			var calls int64
			for time.Now().Before(deadline) {
				days, _ := s.AccountUsage(context.Background(), "acct_local", time.Now(), time.Now())
				if calls, _, _ = totals(days); calls == 1200 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			sizes := counting.sizes()
			want := "[1000 200]"
			if fail == 1 { // the first batch again, one message at a time
				want = fmt.Sprint(append(append([]int{1000}, repeat(1, 1000)...), 200))
			}
			if calls != 1200 || fmt.Sprint(sizes) != want {
				t.Errorf("%d calls counted; store calls %v, want %s", calls, sizes, want)
			}
		})
	}
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func totals(days []store.UsageDay) (calls, credits, errs int64) {
	for _, d := range days {
		calls, credits, errs = calls+d.Calls, credits+d.Credits, errs+d.Errors
	}
	return
}

// Direct (no queue) applies a flush's messages as one batch.
func TestDirectAppliesAFlushAsOneBatch(t *testing.T) {
	s := openStore(t)
	counting := &countingOutcomes{Outcomes: s}
	e := &usage.Emitter{Queue: usage.Direct{Worker: &usage.Worker{Store: s, Outcomes: counting}}, Outbox: s}
	for i := 0; i < 5; i++ {
		e.Emit(usageMsg(fmt.Sprintf("req_d%d", i), "acct_direct", "/v1/x/y", 200, 2))
	}
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	days, _ := s.AccountUsage(context.Background(), "acct_direct", time.Now(), time.Now())
	if calls, credits, _ := totals(days); calls != 5 || credits != 10 || fmt.Sprint(counting.sizes()) != "[5]" {
		t.Errorf("%d calls, %d credits, store calls %v", calls, credits, counting.sizes())
	}
}

// A message of this process is applied from its Decoded value, not its
// Body; a Decoded value the worker cannot apply is poison, as its Body
// would be.
func TestHandleMessagesUsesTheDecodedBody(t *testing.T) {
	s := openStore(t)
	w := &usage.Worker{Store: s, Outcomes: s}
	good := usageMsg("req_decoded", "acct_local", "/v1/x/y", 200, 3)
	good.Body = []byte("not json") // only Decoded can be applied
	bad := usageMsg("", "acct_local", "/v1/x/y", 200, 1)
	bad.Body = good.Body
	encoded := usageMsg("req_encoded", "acct_local", "/v1/x/y", 200, 2)
	encoded.Body, encoded.Decoded = encoded.Encoded(), nil // from elsewhere: decoded from Body
	errs := w.HandleMessages(context.Background(), []queue.Message{good, bad, encoded})
	if errs[0] != nil || !errors.Is(errs[1], usage.ErrPoison) || errs[2] != nil {
		t.Fatalf("errors %v, want [nil poison nil]", errs)
	}
	days, err := s.AccountUsage(context.Background(), "acct_local", time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if calls, credits, _ := totals(days); calls != 2 || credits != 5 {
		t.Errorf("counted %d calls, %d credits; want 2 and 5", calls, credits)
	}
}

// The in-process queues (LocalQueue, Direct) apply a message from its
// Decoded value: one whose Body is not JSON is still counted.
func TestInProcessQueuesApplyTheDecodedBody(t *testing.T) {
	onlyDecoded := func(id string) queue.Message {
		m := usageMsg(id, "acct_local", "/v1/x/y", 200, 1)
		m.Body = []byte("not json")
		return m
	}
	s := openStore(t)
	w := &usage.Worker{Store: s, Outcomes: s}
	if err := (usage.Direct{Worker: w}).Send(context.Background(), []queue.Message{onlyDecoded("req_direct")}); err != nil {
		t.Fatalf("Direct: %v", err)
	}
	q := usage.NewLocalQueue(w, 10, nil)
	if err := q.Send(context.Background(), []queue.Message{onlyDecoded("req_local")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)
	for deadline := time.Now().Add(10 * time.Second); q.Pending() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	days, err := s.AccountUsage(context.Background(), "acct_local", time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if calls, _, _ := totals(days); calls != 2 {
		t.Errorf("counted %d calls, want 2 (one through each queue)", calls)
	}
}
