package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/usage"
)

// Every routed request emits one usage event with what it did.
func TestEveryRequestEmitsOneUsageEvent(t *testing.T) {
	b := newBilled(t, 100, nil)
	check := func(r response, want func(e usage.Event) bool) usage.Event {
		t.Helper()
		id := r.header.Get("x-request-id")
		events := b.events.usage(id)
		if len(events) != 1 {
			t.Fatalf("%s: %d usage events; want 1", id, len(events))
		}
		if !want(events[0]) {
			t.Fatalf("%s: %+v", r.raw, events[0])
		}
		return events[0]
	}
	paid := b.call("/v1/marketplace_a/search?query=lamp")
	e := check(paid, func(e usage.Event) bool {
		return e.Status == 200 && *e.Credits == 3 && e.Cache == "MISS" && e.Served && e.AccountID == b.account.ID &&
			e.KeyID == b.keyRec.ID && e.Endpoint == "/v1/marketplace_a/search" && e.Platform == "marketplace_a" && e.Method == "GET"
	})
	if e.LatencyMS < 0 || e.At.IsZero() {
		t.Errorf("latency and time: %+v", e)
	}
	check(b.call("/v1/marketplace_a/search?query=lamp"), func(e usage.Event) bool {
		return e.Status == 200 && *e.Credits == 0 && e.Cache == "HIT" && e.Served
	})
	check(b.call("/v1/marketplace_a/search?qery=lamp"), func(e usage.Event) bool {
		return e.Status == 400 && e.ErrorType == "INVALID_PARAMETERS" && *e.Credits == 0 && !e.Served
	})
	check(b.call("/v1/marketplace_a/search?query=fail"), func(e usage.Event) bool {
		return e.Status == 502 && e.ErrorType == "UPSTREAM_ERROR" && *e.Credits == 0 && e.Served
	})
	check(b.do("GET", "/v1/credits/balance"), func(e usage.Event) bool {
		return e.Status == 401 && e.AccountID == "" && !e.Served
	})
	check(b.call("/sandbox/marketplace_a/search?query=lamp"), func(e usage.Event) bool {
		return e.Sandbox && !e.Served // 501 here: the harness has no sandbox generator
	})
	check(b.call("/v1/nowhere/at-all"), func(e usage.Event) bool { return e.Status == 404 && e.Endpoint == "" })
}

func TestIdempotentReplayEmitsNoEvent(t *testing.T) {
	b := newBilled(t, 100, nil)
	first := b.withKey("/v1/marketplace_a/search?query=lamp", "order-1")
	replay := b.withKey("/v1/marketplace_a/search?query=lamp", "order-1")
	if replay.header.Get("x-idempotent-replay") != "true" {
		t.Fatalf("not a replay: %v", replay.header)
	}
	// The replay answers with the original's request id; it adds no event.
	if first.header.Get("x-request-id") != replay.header.Get("x-request-id") {
		t.Fatalf("ids: %s %s", first.header.Get("x-request-id"), replay.header.Get("x-request-id"))
	}
	if n := b.events.count(usage.KindUsage); n != 1 {
		t.Fatalf("%d usage events; want 1: a replay emits none (spec 3.2)", n)
	}
}

// A refund the request path cannot write is answered as pending, and the
// worker finishes it from the reconciliation message, once however often
// the message arrives.
func TestPendingRefundIsReconciledOnce(t *testing.T) {
	b := newBilled(t, 100, nil, func(c *Config) { c.Store = flakyRefunds{c.Store} })
	b.events.apply = false // the queue delivers later
	r := b.call("/v1/marketplace_a/search?query=fail")
	if r.code != 502 || r.body["credits_used"] != nil || r.details()["billing_status"] != BillingRefundPending {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	id := r.body["request_id"].(string)
	ev := b.events.usage(id)
	if len(ev) != 1 || ev[0].Credits != nil || ev[0].BillingStatus != BillingRefundPending {
		t.Fatalf("usage event: %+v", ev)
	}
	rec := b.events.reconciliations()
	if len(rec) != 1 || rec[0].Action != usage.Refund || rec[0].RequestID != id || rec[0].AccountID != b.account.ID {
		t.Fatalf("reconciliations: %+v", rec)
	}
	if a, _ := b.store.Account(context.Background(), b.account.ID); a.CreditsRemaining != 97 {
		t.Fatalf("before reconciliation the debit stands: %d", a.CreditsRemaining)
	}
	msg := usage.ReconcileMessage(rec[0])
	for i := 0; i < 3; i++ {
		if err := b.events.worker.Handle(context.Background(), msg.Encoded()); err != nil {
			t.Fatal(err)
		}
	}
	e := b.entries(t, id)
	if len(e) != 2 || e[0].Type != store.EntryRefund || e[0].Amount+e[1].Amount != 0 {
		t.Fatalf("debit and one refund: %+v", e)
	}
	if a, _ := b.store.Account(context.Background(), b.account.ID); a.CreditsRemaining != 100 {
		t.Fatalf("balance %d; want 100", a.CreditsRemaining)
	}
}

// flakySettles cannot mark a reservation settled.
type flakySettles struct{ store.Store }

func (flakySettles) Settle(context.Context, string, string) error {
	return errors.New("dynamodb: throughput exceeded")
}

// A success whose settle cannot be written still answers with its charge,
// and a settle reconciliation keeps the lease sweep from refunding it.
func TestUnwrittenSettleIsReconciled(t *testing.T) {
	b := newBilled(t, 100, nil, func(c *Config) { c.Store = flakySettles{c.Store} })
	b.events.apply = false
	r := b.call("/v1/marketplace_a/search?query=lamp")
	if r.code != 200 || r.body["credits_used"] != float64(3) {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	rec := b.events.reconciliations()
	if len(rec) != 1 || rec[0].Action != usage.Settle || rec[0].RequestID != r.body["request_id"] {
		t.Fatalf("reconciliations: %+v", rec)
	}
	if err := b.events.worker.Handle(context.Background(), usage.ReconcileMessage(rec[0]).Encoded()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Refund(context.Background(), b.account.ID, rec[0].RequestID); !errors.Is(err, store.ErrSettled) {
		t.Fatalf("after reconciliation the charge is settled: %v", err)
	}
}
