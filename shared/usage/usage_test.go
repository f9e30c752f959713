package usage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/usage"
)

func openStore(t *testing.T) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fakeQueue records what it accepts; while down it refuses everything,
// and it refuses the IDs in reject.
type fakeQueue struct {
	mu     sync.Mutex
	got    []queue.Message
	down   bool
	reject map[string]bool
}

func (q *fakeQueue) Send(_ context.Context, msgs []queue.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.down {
		return errors.New("connection refused")
	}
	var failed []string
	for _, m := range msgs {
		if q.reject[m.ID] {
			failed = append(failed, m.ID)
			continue
		}
		q.got = append(q.got, m)
	}
	if failed != nil {
		return &queue.SendError{Failed: failed, Cause: errors.New("entry refused")}
	}
	return nil
}

func (q *fakeQueue) ids() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, m := range q.got {
		out = append(out, m.ID)
	}
	return out
}

func event(i int) queue.Message {
	return usage.UsageMessage(usage.Event{RequestID: fmt.Sprintf("req_%03d", i), Status: 200, Platform: "marketplace_a", Served: true, At: time.Now()})
}

func TestEmitterKeepsWhatTheQueueRefuses(t *testing.T) {
	s := openStore(t)
	q := &fakeQueue{down: true}
	e := &usage.Emitter{Queue: q, Outbox: s}
	for i := 0; i < 25; i++ {
		e.Emit(event(i))
	}
	if err := e.Flush(context.Background()); err == nil {
		t.Fatal("a flush into a refusing queue reports it")
	}
	if kept, _ := s.OutboxBatch(context.Background(), 100); len(kept) != 25 || e.Pending() != 0 {
		t.Fatalf("outbox %d, pending %d; want 25, 0", len(kept), e.Pending())
	}
	// One entry refused on its own; the rest go, and the outbox drains.
	q.down, q.reject = false, map[string]bool{"usage-req_030": true}
	e.Emit(event(30))
	e.Emit(event(31))
	if err := e.Flush(context.Background()); err == nil {
		t.Fatal("a partly refused flush reports it")
	}
	q.reject = nil
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if kept, _ := s.OutboxBatch(context.Background(), 100); len(kept) != 0 {
		t.Fatalf("outbox still holds %d", len(kept))
	}
	got := map[string]int{}
	for _, id := range q.ids() {
		got[id]++
	}
	if len(got) != 27 {
		t.Fatalf("%d distinct messages arrived; want 27", len(got))
	}
}

// failingOutbox refuses writes, as when the store is down too.
type failingOutbox struct{ store.Outbox }

func (failingOutbox) PutOutbox(context.Context, []store.OutboxMessage) error {
	return errors.New("store unavailable")
}

func TestEmitterHoldsMessagesWhenQueueAndOutboxFail(t *testing.T) {
	s := openStore(t)
	q := &fakeQueue{down: true}
	e := &usage.Emitter{Queue: q, Outbox: failingOutbox{s}}
	e.Emit(event(1))
	e.Emit(event(2))
	_ = e.Flush(context.Background())
	if e.Pending() != 2 {
		t.Fatalf("pending %d; want the 2 messages held for the next flush", e.Pending())
	}
	q.down = false
	if err := e.Flush(context.Background()); err != nil || len(q.ids()) != 2 {
		t.Fatalf("after recovery: %v %v", err, q.ids())
	}
}

func TestRunFlushesAndFinishesOnStop(t *testing.T) {
	q := &fakeQueue{}
	e := &usage.Emitter{Queue: q, Outbox: openStore(t)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx, time.Hour); close(done) }()
	for i := 0; i < 10; i++ { // a full batch wakes the flusher
		e.Emit(event(i))
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(q.ids()) < 10 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	e.Emit(event(99))
	cancel()
	<-done
	if len(q.ids()) != 11 {
		t.Fatalf("sent %d; want 11 (the last one by the final flush)", len(q.ids()))
	}
}

func TestDecodeRefusesWhatIsNotOurs(t *testing.T) {
	for _, body := range []string{`not json`, `{}`, `{"kind":"usage"}`, `{"kind":"reconcile","reconcile":{"action":"burn","account_id":"a","request_id":"r"}}`,
		`{"kind":"reconcile","reconcile":{"action":"refund","request_id":"r"}}`} {
		if _, err := usage.Decode([]byte(body)); !errors.Is(err, usage.ErrPoison) {
			t.Errorf("%s: %v; want ErrPoison", body, err)
		}
	}
}

// paid reserves a call of cost 3 on a fresh account with 10 credits.
func paid(t *testing.T, s *embedded.Store) (store.Account, store.Charge) {
	t.Helper()
	acct, err := s.CreateAccount(context.Background(), 10, "console-hash-"+t.Name(), "req_opening")
	if err != nil {
		t.Fatal(err)
	}
	_, k := auth.NewKey(acct.ID, "k", nil)
	key, err := s.CreateKey(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	c := store.Charge{RequestID: "req_paid", AccountID: acct.ID, KeyID: key.ID, KeyPrefix: key.Prefix, Endpoint: "/v1/x/y", Cost: 3}
	if _, err := s.Reserve(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return acct, c
}

func balance(t *testing.T, s store.Store, id string) int64 {
	t.Helper()
	a, err := s.Account(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a.CreditsRemaining
}

func TestWorkerAppliesEachMessageOnce(t *testing.T) {
	s := openStore(t)
	acct, c := paid(t, s)
	w := &usage.Worker{Store: s, Outcomes: s}
	start := time.Now()
	refund := usage.ReconcileMessage(usage.Reconciliation{Action: usage.Refund, AccountID: acct.ID, RequestID: c.RequestID})
	used := usage.UsageMessage(usage.Event{RequestID: "req_paid", Platform: "x", Status: 502, ErrorType: "UPSTREAM_ERROR", Served: true, At: time.Now()})
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: string(refund.Encoded())},
		{MessageId: "m2", Body: "garbage"},
		{MessageId: "m3", Body: string(used.Encoded())},
		{MessageId: "m4", Body: string(refund.Encoded())}, // delivered twice
		{MessageId: "m5", Body: string(used.Encoded())},
	}}
	resp, err := w.HandleSQS(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m2" {
		t.Fatalf("only the poison message fails: %+v %v", resp, err)
	}
	if b := balance(t, s, acct.ID); b != 10 {
		t.Fatalf("balance %d; want 10 after one refund", b)
	}
	page, _ := s.Ledger(context.Background(), acct.ID, store.LedgerQuery{Limit: 10, RequestID: c.RequestID})
	if len(page.Entries) != 2 {
		t.Fatalf("debit and one refund: %+v", page.Entries)
	}
	minutes, err := s.OutcomesSince(context.Background(), start.Add(-time.Minute), time.Now().Add(time.Minute))
	if err != nil || len(minutes["x"]) != 1 || minutes["x"][0].Requests != 1 || minutes["x"][0].Errors != 1 {
		t.Fatalf("the event counts once: %+v %v", minutes, err)
	}
	// A settle after the refund changes nothing, and says so in the log.
	var logs bytes.Buffer
	w.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	settle := usage.ReconcileMessage(usage.Reconciliation{Action: usage.Settle, AccountID: acct.ID, RequestID: c.RequestID})
	if err := w.Handle(context.Background(), settle.Encoded()); err != nil {
		t.Fatal(err)
	}
	if b := balance(t, s, acct.ID); b != 10 || !strings.Contains(logs.String(), "finished") {
		t.Fatalf("balance %d, log %s", b, logs.String())
	}
}

func TestSweepRefundsExpiredReservations(t *testing.T) {
	s := openStore(t)
	acct, _ := paid(t, s)
	w := &usage.Worker{Store: s, Outcomes: s}
	if n, err := w.Sweep(context.Background()); err != nil || n != 0 || balance(t, s, acct.ID) != 7 {
		t.Fatalf("inside the lease: %d %v", n, err)
	}
	w.Now = func() time.Time { return time.Now().Add(store.ReservationLease + time.Second) }
	if n, err := w.Sweep(context.Background()); err != nil || n != 1 || balance(t, s, acct.ID) != 10 {
		t.Fatalf("after the lease: %d %v balance %d", n, err, balance(t, s, acct.ID))
	}
	if n, _ := w.Sweep(context.Background()); n != 0 || balance(t, s, acct.ID) != 10 {
		t.Fatal("a second sweep refunds nothing")
	}
}

func TestLocalQueue(t *testing.T) {
	s := openStore(t)
	acct, c := paid(t, s)
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	w := &usage.Worker{Store: s, Outcomes: s}
	q := usage.NewLocalQueue(w, 2, logger)
	refund := usage.ReconcileMessage(usage.Reconciliation{Action: usage.Refund, AccountID: acct.ID, RequestID: c.RequestID})
	poison := queue.Message{ID: "poison", Body: []byte("{")}
	err := q.Send(context.Background(), []queue.Message{refund, poison, event(1)})
	var full *queue.SendError
	if !errors.As(err, &full) || len(full.Failed) != 1 || full.Failed[0] != "usage-req_001" {
		t.Fatalf("a full local queue refuses the rest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for (balance(t, s, acct.ID) != 10 || !strings.Contains(logs.String(), "dead letter")) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if balance(t, s, acct.ID) != 10 || !strings.Contains(logs.String(), `"message_id":"poison"`) {
		t.Fatalf("balance %d, log %s", balance(t, s, acct.ID), logs.String())
	}
}

// lockedBuffer is a log sink a goroutine writes while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A settle that waited in the outbox lands before the lease sweep could
// refund the call it belongs to.
func TestSweepAppliesTheOutboxFirst(t *testing.T) {
	s := openStore(t)
	acct, c := paid(t, s)
	settle := usage.ReconcileMessage(usage.Reconciliation{Action: usage.Settle, AccountID: acct.ID, RequestID: c.RequestID})
	poison := queue.Message{ID: "poison", Body: []byte("{")}
	if err := s.PutOutbox(context.Background(), []store.OutboxMessage{{ID: settle.ID, Body: settle.Encoded()}, {ID: poison.ID, Body: poison.Body}}); err != nil {
		t.Fatal(err)
	}
	w := &usage.Worker{Store: s, Outcomes: s, Outbox: s,
		Now: func() time.Time { return time.Now().Add(store.ReservationLease + time.Minute) }}
	if n, err := w.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("refunded %d (%v); the settle must win", n, err)
	}
	if b := balance(t, s, acct.ID); b != 7 {
		t.Fatalf("balance %d; the delivered call keeps its charge of 3", b)
	}
	if left, _ := s.OutboxBatch(context.Background(), 10); len(left) != 0 {
		t.Fatalf("outbox keeps %d", len(left))
	}
}

func TestDirectQueueAppliesAtOnce(t *testing.T) {
	s := openStore(t)
	acct, c := paid(t, s)
	e := &usage.Emitter{Queue: usage.Direct{Worker: &usage.Worker{Store: s, Outcomes: s}}, Outbox: s}
	e.Emit(usage.ReconcileMessage(usage.Reconciliation{Action: usage.Refund, AccountID: acct.ID, RequestID: c.RequestID}))
	e.Emit(queue.Message{ID: "poison", Body: []byte("{")})
	_ = e.Flush(context.Background())
	if b := balance(t, s, acct.ID); b != 10 {
		t.Fatalf("balance %d; want the refund applied", b)
	}
	if left, _ := s.OutboxBatch(context.Background(), 10); len(left) != 1 || left[0].ID != "poison" {
		t.Fatalf("what cannot be applied waits in the outbox: %+v", left)
	}
}
