package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
	"github.com/meridian-data/meridian/shared/store/storetest"
	"github.com/meridian-data/meridian/shared/usage"
	"github.com/meridian-data/meridian/shared/webjobs"
)

// Issue 40, item 3: a web job whose reservation the expired-lease sweep
// refunded never runs for free, a started job holds its reservation
// against the sweep, and an account's open jobs are capped.

const jobTarget = "/v1/web/social-profiles?platform=microblog_a&handle=alice.example.com&async=1"

// bothStores runs a test on the embedded store and on DynamoDB Local.
func bothStores(t *testing.T, test func(t *testing.T, s store.Store)) {
	for name, open := range map[string]func(*testing.T) store.Store{
		"embedded": func(t *testing.T) store.Store { return newEmbedded(t) },
		"dynamodb": func(t *testing.T) store.Store { return dynamotest.NewStore(t) },
	} {
		t.Run(name, func(t *testing.T) { test(t, open(t)) })
	}
}

// jobHooks is a store whose job writes and settles a test can intercept:
// afterFinish runs once FinishJob stored an outcome (what happens between
// a worker's FinishJob and its billing), and failSettle makes Settle fail
// (the worker died before its billing landed).
type jobHooks struct {
	store.Store
	jobs        store.Jobs
	afterFinish func(store.Job)
	failSettle  atomic.Bool
}

func hooked(s store.Store) *jobHooks { return &jobHooks{Store: s, jobs: s.(store.Jobs)} }

func (h *jobHooks) FinishJob(ctx context.Context, accountID, id, state string, status int, result []byte, now time.Time) (store.Job, error) {
	j, err := h.jobs.FinishJob(ctx, accountID, id, state, status, result, now)
	if err == nil && h.afterFinish != nil {
		h.afterFinish(j)
	}
	return j, err
}
func (h *jobHooks) Settle(ctx context.Context, accountID, requestID string) error {
	if h.failSettle.Load() {
		return errors.New("worker killed before its settle")
	}
	return h.Store.Settle(ctx, accountID, requestID)
}
func (h *jobHooks) CreateJob(ctx context.Context, j store.Job) error { return h.jobs.CreateJob(ctx, j) }
func (h *jobHooks) Job(ctx context.Context, a, id string, now time.Time) (store.Job, error) {
	return h.jobs.Job(ctx, a, id, now)
}
func (h *jobHooks) StartJob(ctx context.Context, a, id string, now, lease time.Time) (store.Job, bool, error) {
	return h.jobs.StartJob(ctx, a, id, now, lease)
}
func (h *jobHooks) JobProgress(ctx context.Context, a, id string, done, total int) error {
	return h.jobs.JobProgress(ctx, a, id, done, total)
}
func (h *jobHooks) MarkJobBilled(ctx context.Context, a, id string, replaced *store.JobOutcome) error {
	return h.jobs.MarkJobBilled(ctx, a, id, replaced)
}
func (h *jobHooks) TakeJobSlot(ctx context.Context, a, id string, now, until time.Time, max int) error {
	return h.jobs.TakeJobSlot(ctx, a, id, now, until, max)
}
func (h *jobHooks) ReleaseJobSlot(ctx context.Context, a, id string) error {
	return h.jobs.ReleaseJobSlot(ctx, a, id)
}

// workerAt is the worker's pipeline with its clock offset from now.
func workerAt(env *monitorEnv, offset time.Duration) *app.API {
	cfg := app.Config("", quietLogger(), env.deps)
	cfg.Now = func() time.Time { return time.Now().Add(offset) }
	return app.New(cfg)
}

// sweepAt runs the expired-lease sweep with its clock offset from now and
// returns how many reservations it refunded.
func sweepAt(t *testing.T, s store.Store, offset time.Duration) int {
	t.Helper()
	n, err := (&usage.Worker{Store: s, Logger: quietLogger(), Now: func() time.Time { return time.Now().Add(offset) }}).Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// acceptOne asks for one job and returns its message.
func acceptOne(t *testing.T, env *monitorEnv, jobs *capturedJobs, key string) queue.JobMessage {
	t.Helper()
	if code, body := env.call("GET", jobTarget, key); code != 202 {
		t.Fatalf("accepted: %d %v", code, body)
	}
	jobs.mu.Lock()
	defer jobs.mu.Unlock()
	return jobs.msgs[len(jobs.msgs)-1]
}

// jobOf reads the job as its owner does.
func jobOf(t *testing.T, env *monitorEnv, key, id string) (job, result map[string]any) {
	t.Helper()
	code, body := env.call("GET", "/v1/web/jobs/"+id, key)
	if code != 200 {
		t.Fatalf("job: %d %v", code, body)
	}
	job = body["data"].(map[string]any)
	result, _ = job["result"].(map[string]any)
	return job, result
}

// requestEntries are the ledger entries of the job's accepting request.
func requestEntries(t *testing.T, s store.Store, accountID, requestID string) []store.Entry {
	t.Helper()
	page, err := s.Ledger(context.Background(), accountID, store.LedgerQuery{RequestID: requestID})
	if err != nil {
		t.Fatal(err)
	}
	return page.Entries
}

// failedUnpaid checks a job that ended failed because its reservation was
// refunded before it could be charged: no data, nothing charged, the
// reason in its error's details, a debit and its refund in the ledger.
func failedUnpaid(t *testing.T, s store.Store, env *monitorEnv, acct store.Account, key, id string) {
	t.Helper()
	j, result := jobOf(t, env, key, id)
	e, _ := result["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	if j["state"] != "failed" || j["status"] != float64(500) || result["success"] != false || result["data"] != nil ||
		result["credits_used"] != float64(0) || e["type"] != "INTERNAL_ERROR" || d["reason"] != webjobs.ReservationExpiredReason {
		t.Errorf("failed, unpaid, saying why: %v", j)
	}
	if got := balance(t, s, acct.ID); got != 100 {
		t.Errorf("balance %d, want 100: nothing charged", got)
	}
	entries := requestEntries(t, s, acct.ID, j["request_id"].(string))
	if len(entries) != 2 || entries[0].Amount+entries[1].Amount != 0 {
		t.Errorf("a debit and its refund, both naming the request: %+v", entries)
	}
	storetest.CheckLedger(t, s, acct.ID)
}

// A job still queued when the sweep refunded its reservation (it waited
// past the 30-minute lease) fails refunded when a worker starts it: the
// call does not run and no data is delivered, where it used to run and
// answer the data with credits_used 0.
func TestWebJobStartedAfterItsReservationWasSweptFailsUnpaid(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Store) {
		jobs := &capturedJobs{}
		env := newMonitorEnv(t, s, jobs)
		acct, key := newAccount(t, s, 100, nil)
		msg := acceptOne(t, env, jobs, key)
		if n := sweepAt(t, s, store.ReservationLease+2*time.Minute); n != 1 {
			t.Fatalf("the sweep refunded %d reservations, want the job's", n)
		}
		if err := workerAt(env, store.ReservationLease+3*time.Minute).RunJob(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		failedUnpaid(t, s, env, acct, key, msg.JobID)
		j, _ := jobOf(t, env, key, msg.JobID)
		if p := j["progress"].(map[string]any); p["done"] != float64(0) {
			t.Errorf("nothing ran: %v", p)
		}
	})
}

// A job that starts just before its reservation's lease ends holds the
// reservation over its run: a sweep during the run (its clock past the
// original lease) leaves it, and the job is charged once, where the sweep
// used to refund it and the job answered its data for free.
func TestWebJobHoldsItsReservationAgainstTheSweep(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Store) {
		h := hooked(s)
		jobs := &capturedJobs{}
		env := newMonitorEnv(t, h, jobs)
		acct, key := newAccount(t, s, 100, nil)
		msg := acceptOne(t, env, jobs, key)
		swept := -1
		h.afterFinish = func(store.Job) { swept = sweepAt(t, s, store.ReservationLease+5*time.Minute) }
		if err := workerAt(env, store.ReservationLease-time.Minute).RunJob(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		if swept != 0 {
			t.Errorf("the sweep during the run refunded %d reservations", swept)
		}
		j, result := jobOf(t, env, key, msg.JobID)
		if j["state"] != "succeeded" || result["credits_used"] != float64(15) || result["data"] == nil {
			t.Fatalf("succeeded and charged: %v", j)
		}
		if got := balance(t, s, acct.ID); got != 85 {
			t.Errorf("balance %d, want 85", got)
		}
		if entries := requestEntries(t, s, acct.ID, j["request_id"].(string)); len(entries) != 1 || entries[0].Amount != -15 {
			t.Errorf("one debit, no refund: %+v", entries)
		}
		// Long after: the job's hold ended, but the reservation is settled.
		if n := sweepAt(t, s, 3*time.Hour); n != 0 {
			t.Errorf("a later sweep refunded %d", n)
		}
		storetest.CheckLedger(t, s, acct.ID)
	})
}

// A success whose reservation was refunded between its outcome and its
// settle (its worker died after FinishJob and the next delivery came after
// the hold ended) is withheld: the job fails unpaid, where it used to
// answer the data with credits_used 0. Until its billing lands, a job
// reads as running, with no result.
func TestWebJobSuccessRefundedBeforeItsSettleIsWithheld(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Store) {
		h := hooked(s)
		jobs := &capturedJobs{}
		env := newMonitorEnv(t, h, jobs)
		acct, key := newAccount(t, s, 100, nil)
		msg := acceptOne(t, env, jobs, key)
		h.failSettle.Store(true)
		if err := env.runner.RunJob(context.Background(), msg); err == nil {
			t.Fatal("a lost settle reports failure, so SQS delivers the job again")
		}
		j, _ := jobOf(t, env, key, msg.JobID)
		if j["state"] != "running" || j["result"] != nil || j["status"] != nil || j["finished_at"] != nil {
			t.Errorf("unbilled, the job shows no outcome: %v", j)
		}
		// The hold ends before the next delivery: the sweep refunds it.
		if n := sweepAt(t, s, 3*time.Hour); n != 1 {
			t.Fatalf("the sweep refunded %d", n)
		}
		h.failSettle.Store(false)
		if err := env.runner.RunJob(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		failedUnpaid(t, s, env, acct, key, msg.JobID)
	})
}

// The refund can also land between FinishJob and the settle of one
// delivery: the same rule holds.
func TestWebJobRefundedWhileItFinishesIsWithheld(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Store) {
		h := hooked(s)
		jobs := &capturedJobs{}
		env := newMonitorEnv(t, h, jobs)
		acct, key := newAccount(t, s, 100, nil)
		msg := acceptOne(t, env, jobs, key)
		h.afterFinish = func(j store.Job) {
			if _, err := s.Refund(context.Background(), j.AccountID, j.RequestID); err != nil {
				t.Error(err)
			}
		}
		if err := env.runner.RunJob(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		failedUnpaid(t, s, env, acct, key, msg.JobID)
	})
}

// An account holds at most MaxQueuedJobs open jobs: the next async=1 call
// is refused 429 RATE_LIMITED (reason job_queue_full, retry-after) before
// anything is reserved, while other accounts' jobs are accepted. A job
// that ends, and a call refused after its slot was taken, free their
// places.
func TestWebJobQueueCapPerAccount(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Store) {
		jobs := &capturedJobs{}
		env := newMonitorEnv(t, s, jobs)
		cost := int64(15)
		acct, key := newAccount(t, s, pipeline.MaxQueuedJobs*cost, nil)
		for i := 0; i < pipeline.MaxQueuedJobs; i++ {
			if code, body := env.call("GET", jobTarget, key); code != 202 {
				t.Fatalf("job %d: %d %v", i, code, body)
			}
		}
		ask := func(key string) (*httptest.ResponseRecorder, map[string]any) {
			req := httptest.NewRequest("GET", "http://api.test"+jobTarget, nil)
			req.Header.Set("x-api-key", key)
			rec := httptest.NewRecorder()
			env.api.ServeHTTP(rec, req)
			var body map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			return rec, body
		}
		rec, body := ask(key)
		e, _ := body["error"].(map[string]any)
		d, _ := e["details"].(map[string]any)
		if rec.Code != 429 || e["type"] != "RATE_LIMITED" || d["reason"] != pipeline.JobQueueFullReason ||
			d["retry_after_seconds"] != float64(60) || rec.Header().Get("retry-after") != "60" || body["credits_used"] != float64(0) {
			t.Fatalf("the queue is full: %d %v %v", rec.Code, rec.Header(), body)
		}
		if got := balance(t, s, acct.ID); got != 0 {
			t.Errorf("balance %d: the refusal reserved nothing", got)
		}
		jobs.mu.Lock()
		queued := len(jobs.msgs)
		first := jobs.msgs[0]
		jobs.mu.Unlock()
		if queued != pipeline.MaxQueuedJobs {
			t.Errorf("%d jobs queued", queued)
		}
		_, other := newAccount(t, s, 100, nil)
		if rec, body := ask(other); rec.Code != 202 {
			t.Errorf("another account's job: %d %v", rec.Code, body)
		}

		// One job ends: its place is free. The next call is refused for
		// credits (the balance is spent), and that refusal frees its slot:
		// with credits granted, the call after it is accepted.
		if err := env.runner.RunJob(context.Background(), first); err != nil {
			t.Fatal(err)
		}
		if rec, body := ask(key); rec.Code != 402 || errType(body) != "INSUFFICIENT_CREDITS" {
			t.Fatalf("a free place, no credits: %d %v", rec.Code, body)
		}
		if _, err := s.Grant(context.Background(), acct.ID, cost, "test", "req_grant_"+first.JobID); err != nil {
			t.Fatal(err)
		}
		if rec, body := ask(key); rec.Code != 202 {
			t.Fatalf("the refused call's place was freed: %d %v", rec.Code, body)
		}
		if rec, body := ask(key); rec.Code != 429 {
			t.Errorf("full again: %d %v", rec.Code, body)
		}
		storetest.CheckLedger(t, s, acct.ID)
	})
}
