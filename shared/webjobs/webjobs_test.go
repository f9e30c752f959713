package webjobs

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// The web jobs' worker against a fake pipeline: everything it needs of
// the pipeline is the Runner it is handed; jobs, accounts and
// reservations are a real embedded store.

const errorsURL = "https://docs.test/errors"

// fakeRunner is a pipeline.Runner that records every call and answers
// with a script. during, when set, runs inside the call (as the
// pipeline's work would), before the answer.
type fakeRunner struct {
	mu     sync.Mutex
	calls  []ranCall
	answer pipeline.Answer
	during func(r *http.Request, as pipeline.RunAs) *pipeline.Answer
}

type ranCall struct {
	req *http.Request
	as  pipeline.RunAs
}

func (f *fakeRunner) Run(r *http.Request, as pipeline.RunAs) pipeline.Answer {
	f.mu.Lock()
	f.calls = append(f.calls, ranCall{r, as})
	a, during := f.answer, f.during
	f.mu.Unlock()
	if during != nil {
		if instead := during(r, as); instead != nil {
			return *instead
		}
	}
	return a
}

func (f *fakeRunner) Available(*registry.Endpoint) bool { return true }

func (f *fakeRunner) ErrorsURL(*http.Request) string { return errorsURL }

func (f *fakeRunner) ran() []ranCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// answer is a scripted answer: its status, envelope and x-request-id.
func answer(status int, requestID, body string) pipeline.Answer {
	h := http.Header{}
	h.Set("x-request-id", requestID)
	return pipeline.Answer{Status: status, Header: h, Body: []byte(body), RequestID: requestID}
}

func success(requestID string) pipeline.Answer {
	return answer(200, requestID, `{"success":true,"platform":"web","endpoint":"/v1/web/social-profiles",`+
		`"data":{"profiles":[{"platform":"microblog_b","handle":"alice"}]},"credits_used":15,"request_id":"`+requestID+`","cached":false}`)
}

func failure(status int, requestID string, e *envelope.Error) pipeline.Answer {
	body, _ := envelope.Marshal(envelope.NewFailure(e, requestID, errorsURL))
	return answer(status, requestID, string(body))
}

type rig struct {
	w      *Worker
	runner *fakeRunner
	s      *embedded.Store
	acct   store.Account
	key    store.Key
	job    store.Job
}

const cost = 15

// newRig is a worker over an embedded store, given the fake Runner, and
// one job accepted as the pipeline accepts async=1 (async.go): a slot
// taken, the cost reserved under the request id, the job stored queued.
// The account held 100 credits; 85 remain.
func newRig(t *testing.T) *rig {
	t.Helper()
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := &rig{runner: &fakeRunner{}, s: s}
	r.acct, r.key = newAccount(t, s)
	r.job = accept(t, s, r.acct, r.key)
	r.w = New(Config{Jobs: s, Store: s})
	if h := r.w.Handlers(r.runner); len(h) != 1 || h["web/jobs/{id}"] == nil {
		t.Fatalf("handlers: %v", h)
	}
	if got := r.balance(t); got != 100-cost {
		t.Fatalf("reserved: balance %d", got)
	}
	return r
}

func newAccount(t *testing.T, s *embedded.Store) (store.Account, store.Key) {
	t.Helper()
	acct, _, err := auth.CreateAccount(context.Background(), s, 100, envelope.NewRequestID())
	if err != nil {
		t.Fatal(err)
	}
	_, k := auth.NewKey(acct.ID, "test", nil)
	key, err := s.CreateKey(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return acct, key
}

func accept(t *testing.T, s *embedded.Store, acct store.Account, key store.Key) store.Job {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	j := store.Job{
		ID: store.NewJobID(), AccountID: acct.ID, KeyID: key.ID, KeyPrefix: key.Prefix, KeyHash: key.Hash,
		RequestID: envelope.NewRequestID(), Platform: "web", Endpoint: "social-profiles",
		Params: map[string]string{"platform": "microblog_a", "handle": "alice.example.com"},
		Cost:   cost, State: store.JobQueued, CreatedAt: now, ExpiresAt: now.Add(store.JobTTL),
	}
	if err := s.TakeJobSlot(ctx, acct.ID, j.ID, now, now.Add(time.Hour), pipeline.MaxQueuedJobs); err != nil {
		t.Fatal(err)
	}
	_, err := store.FirstReserved(s.ReserveMany(ctx, []store.Charge{{
		RequestID: j.RequestID, AccountID: acct.ID, KeyID: key.ID, KeyPrefix: key.Prefix, Endpoint: "/v1/web/social-profiles", Cost: cost,
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	return j
}

func (r *rig) msg() queue.JobMessage { return queue.JobMessage{AccountID: r.acct.ID, JobID: r.job.ID} }

func (r *rig) balance(t *testing.T) int64 {
	t.Helper()
	a, err := r.s.Account(context.Background(), r.acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	return a.CreditsRemaining
}

func (r *rig) stored(t *testing.T) store.Job {
	t.Helper()
	j, err := r.s.Job(context.Background(), r.acct.ID, r.job.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// entries are the ledger entries of the job's accepting request.
func (r *rig) entries(t *testing.T) []int64 {
	t.Helper()
	page, err := r.s.Ledger(context.Background(), r.acct.ID, store.LedgerQuery{RequestID: r.job.RequestID})
	if err != nil {
		t.Fatal(err)
	}
	var amounts []int64
	for _, e := range page.Entries {
		amounts = append(amounts, e.Amount)
	}
	slices.Sort(amounts)
	return amounts
}

// slotFree reports whether the job's place under MaxQueuedJobs was
// released: with a cap of one, another job takes a slot only if so.
func (r *rig) slotFree(t *testing.T) bool {
	t.Helper()
	now := time.Now()
	err := r.s.TakeJobSlot(context.Background(), r.acct.ID, store.NewJobID(), now, now.Add(time.Hour), 1)
	if err != nil && !errors.Is(err, store.ErrJobQueueFull) {
		t.Fatal(err)
	}
	return err == nil
}

// view is GET /v1/web/jobs/{id} for accountID, as JSON.
func (r *rig) view(t *testing.T, accountID, id string) (map[string]any, *envelope.Error) {
	t.Helper()
	h := r.w.Handlers(r.runner)["web/jobs/{id}"]
	out, refusal := h(context.Background(), &pipeline.Call{
		RequestID: "req_view", Principal: auth.Principal{AccountID: accountID}, Params: params.Result{Values: map[string]string{"id": id}},
	})
	if refusal != nil {
		return nil, refusal
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v, nil
}

// The job's call goes through the Runner as a RunAs.Job with the job's
// key, request id and principal; a 200 ends it succeeded, billed, its
// reservation settled; a second delivery runs nothing.
func TestRunSucceeds(t *testing.T) {
	r := newRig(t)
	if r.slotFree(t) {
		t.Fatal("the queued job holds no slot")
	}
	r.runner.answer = success(r.job.RequestID)
	if err := r.w.Run(context.Background(), r.msg()); err != nil {
		t.Fatal(err)
	}
	calls := r.runner.ran()
	if len(calls) != 1 {
		t.Fatalf("%d calls, want 1", len(calls))
	}
	req, as := calls[0].req, calls[0].as
	if req.Method != http.MethodGet || req.URL.Path != "/v1/web/social-profiles" ||
		!maps.Equal(map[string]string{"platform": req.URL.Query().Get("platform"), "handle": req.URL.Query().Get("handle")}, r.job.Params) ||
		len(req.URL.Query()) != 2 {
		t.Errorf("request: %s %s", req.Method, req.URL)
	}
	want := auth.Principal{AccountID: r.acct.ID, KeyID: r.key.ID, KeyPrefix: r.key.Prefix, KeyHash: r.key.Hash}
	if as.Job == nil || as.Job.Key != "web/social-profiles" || as.Job.RequestID != r.job.RequestID || as.Job.Principal != want ||
		as.Job.Hold == nil || as.Job.Progress == nil {
		t.Fatalf("run as job %+v, want principal %+v", as.Job, want)
	}
	if as.Parent != r.job.ID || as.KeyHash != "" {
		t.Errorf("run as %+v", as)
	}

	j := r.stored(t)
	if j.State != store.JobSucceeded || !j.Billed || j.Status != 200 || j.Attempts != 1 || string(j.Result) != string(r.runner.answer.Body) {
		t.Errorf("job: %+v", j)
	}
	if got := r.balance(t); got != 100-cost {
		t.Errorf("balance %d, want %d", got, 100-cost)
	}
	if _, err := r.s.Refund(context.Background(), r.acct.ID, r.job.RequestID); !errors.Is(err, store.ErrSettled) {
		t.Errorf("the reservation is not settled: refund says %v", err)
	}
	if e := r.entries(t); !slices.Equal(e, []int64{-cost}) {
		t.Errorf("ledger %v, want one debit", e)
	}
	if !r.slotFree(t) {
		t.Error("the finished job's slot is not released")
	}

	// Delivered again: finished and billed, nothing runs.
	if err := r.w.Run(context.Background(), r.msg()); err != nil {
		t.Fatal(err)
	}
	if n := len(r.runner.ran()); n != 1 {
		t.Errorf("a finished job ran again: %d calls", n)
	}
	if got := r.balance(t); got != 100-cost {
		t.Errorf("balance %d after the second delivery", got)
	}
	v, refusal := r.view(t, r.acct.ID, r.job.ID)
	if refusal != nil || v["state"] != "succeeded" || v["status"] != float64(200) || v["result"].(map[string]any)["credits_used"] != float64(cost) {
		t.Errorf("view: %v %v", v, refusal)
	}
}

// A failure answer ends the job failed, billed, its reservation refunded.
func TestRunFailsAndRefunds(t *testing.T) {
	r := newRig(t)
	r.runner.answer = failure(502, r.job.RequestID, envelope.New(envelope.UpstreamError, 502, "The source failed.", nil))
	if err := r.w.Run(context.Background(), r.msg()); err != nil {
		t.Fatal(err)
	}
	j := r.stored(t)
	if j.State != store.JobFailed || !j.Billed || j.Status != 502 || string(j.Result) != string(r.runner.answer.Body) {
		t.Errorf("job: %+v", j)
	}
	if got := r.balance(t); got != 100 {
		t.Errorf("balance %d, want 100: refunded", got)
	}
	if err := r.s.Settle(context.Background(), r.acct.ID, r.job.RequestID); !errors.Is(err, store.ErrRefunded) {
		t.Errorf("the reservation is not refunded: settle says %v", err)
	}
	if e := r.entries(t); !slices.Equal(e, []int64{-cost, cost}) {
		t.Errorf("ledger %v, want a debit and its refund", e)
	}
	if err := r.w.Run(context.Background(), r.msg()); err != nil || len(r.runner.ran()) != 1 {
		t.Errorf("a failed job ran again: %v, %d calls", err, len(r.runner.ran()))
	}
}

// A job whose worker died after storing its outcome, before its billing:
// the next delivery bills it and runs nothing.
func TestRunBillsAFinishedJob(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, _, err := r.s.StartJob(ctx, r.acct.ID, r.job.ID, time.Now(), time.Now().Add(pipeline.RunLease)); err != nil {
		t.Fatal(err)
	}
	body := success(r.job.RequestID).Body
	if _, err := r.s.FinishJob(ctx, r.acct.ID, r.job.ID, store.JobSucceeded, 200, body, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := r.w.Run(ctx, r.msg()); err != nil {
		t.Fatal(err)
	}
	if n := len(r.runner.ran()); n != 0 {
		t.Errorf("%d calls", n)
	}
	if j := r.stored(t); j.State != store.JobSucceeded || !j.Billed {
		t.Errorf("job: %+v", j)
	}
	if _, err := r.s.Refund(ctx, r.acct.ID, r.job.RequestID); !errors.Is(err, store.ErrSettled) {
		t.Errorf("the reservation is not settled: refund says %v", err)
	}
	if !r.slotFree(t) {
		t.Error("the slot is not released")
	}
}

// A job another worker runs under a live lease is ErrBusy, and nothing runs.
func TestRunBusy(t *testing.T) {
	r := newRig(t)
	now := time.Now()
	if _, owned, err := r.s.StartJob(context.Background(), r.acct.ID, r.job.ID, now, now.Add(pipeline.RunLease)); err != nil || !owned {
		t.Fatalf("another worker starts it: %v %v", owned, err)
	}
	r.runner.answer = success(r.job.RequestID)
	if err := r.w.Run(context.Background(), r.msg()); !errors.Is(err, ErrBusy) {
		t.Fatalf("Run: %v, want ErrBusy", err)
	}
	if n := len(r.runner.ran()); n != 0 {
		t.Errorf("%d calls", n)
	}
	if j := r.stored(t); j.State != store.JobRunning || j.Billed {
		t.Errorf("job: %+v", j)
	}
}

// A job whose reservation the sweep refunded before it started: the Hold
// it hands the Runner refuses (the pipeline answers that refusal), the
// job fails unpaid, saying why.
func TestRunReservationExpiredBeforeStart(t *testing.T) {
	r := newRig(t)
	if _, err := r.s.Refund(context.Background(), r.acct.ID, r.job.RequestID); err != nil { // the sweep
		t.Fatal(err)
	}
	r.runner.answer = success(r.job.RequestID)
	refused := false
	r.runner.during = func(req *http.Request, as pipeline.RunAs) *pipeline.Answer {
		if e := as.Job.Hold(req.Context()); e != nil {
			refused = true
			a := failure(e.Status, as.Job.RequestID, e)
			return &a
		}
		return nil
	}
	if err := r.w.Run(context.Background(), r.msg()); err != nil {
		t.Fatal(err)
	}
	if !refused {
		t.Fatal("Hold did not refuse a refunded reservation")
	}
	r.failedUnpaid(t)
}

// A success whose reservation was refunded while it ran is withheld: the
// job fails unpaid, its envelope anchored in the Runner's errors URL.
func TestRunSuccessRefundedFirstIsWithheld(t *testing.T) {
	r := newRig(t)
	r.runner.answer = success(r.job.RequestID)
	r.runner.during = func(req *http.Request, as pipeline.RunAs) *pipeline.Answer {
		if e := as.Job.Hold(req.Context()); e != nil {
			t.Errorf("Hold refused a live reservation: %v", e)
		}
		if _, err := r.s.Refund(context.Background(), r.acct.ID, r.job.RequestID); err != nil {
			t.Error(err)
		}
		return nil
	}
	if err := r.w.Run(context.Background(), r.msg()); err != nil {
		t.Fatal(err)
	}
	r.failedUnpaid(t)
}

// failedUnpaid checks a job that failed because its reservation was
// refunded before it could be charged.
func (r *rig) failedUnpaid(t *testing.T) {
	t.Helper()
	j := r.stored(t)
	var env struct {
		Data  json.RawMessage `json:"data"`
		Error struct {
			Type    string         `json:"type"`
			DocURL  string         `json:"doc_url"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(j.Result, &env); err != nil {
		t.Fatal(err)
	}
	if j.State != store.JobFailed || !j.Billed || j.Status != 500 || env.Error.Type != string(envelope.InternalError) ||
		env.Error.Details["reason"] != ReservationExpiredReason || !strings.HasPrefix(env.Error.DocURL, errorsURL) ||
		(env.Data != nil && string(env.Data) != "null") {
		t.Errorf("failed unpaid: %+v %s", j, j.Result)
	}
	if got := r.balance(t); got != 100 {
		t.Errorf("balance %d, want 100", got)
	}
}

// Without a jobs store there is nothing to run or serve: an error, no panic.
func TestRunWithoutJobs(t *testing.T) {
	w := New(Config{})
	if h := w.Handlers(&fakeRunner{}); h != nil {
		t.Errorf("handlers without jobs: %v", h)
	}
	if err := w.Run(context.Background(), queue.JobMessage{AccountID: "acc_x", JobID: "job_x"}); err == nil {
		t.Error("Run without jobs succeeded")
	}
}

// A Worker never given to a pipeline (Handlers not called) refuses to run
// a job, and leaves it as it was: queued, its reservation held.
func TestRunWithoutRunner(t *testing.T) {
	r := newRig(t)
	w := New(Config{Jobs: r.s, Store: r.s})
	if err := w.Run(context.Background(), r.msg()); err == nil {
		t.Fatal("Run without a Runner: no error")
	}
	if j := r.stored(t); j.State != store.JobQueued || j.Attempts != 0 || j.Billed {
		t.Errorf("the job was touched: %+v", j)
	}
	if got := r.balance(t); got != 100-cost {
		t.Errorf("balance %d", got)
	}
}

// GET /v1/web/jobs/{id}: owner-bound, and a finished job whose billing
// has not landed reads as running with no result.
func TestJobHandler(t *testing.T) {
	r := newRig(t)
	other, _ := newAccount(t, r.s)
	if _, refusal := r.view(t, other.ID, r.job.ID); refusal == nil || refusal.Type != envelope.ResourceNotFound || refusal.Status != 404 {
		t.Errorf("another account's job: %+v", refusal)
	}
	if _, refusal := r.view(t, r.acct.ID, store.NewJobID()); refusal == nil || refusal.Type != envelope.ResourceNotFound {
		t.Errorf("no such job: %+v", refusal)
	}
	v, refusal := r.view(t, r.acct.ID, r.job.ID)
	if refusal != nil || v["state"] != "queued" || v["credits_reserved"] != float64(cost) || v["request_id"] != r.job.RequestID ||
		v["operation"].(map[string]any)["path"] != "/v1/web/social-profiles" {
		t.Errorf("queued: %v %v", v, refusal)
	}

	ctx := context.Background()
	body := success(r.job.RequestID).Body
	if _, err := r.s.FinishJob(ctx, r.acct.ID, r.job.ID, store.JobSucceeded, 200, body, time.Now()); err != nil {
		t.Fatal(err)
	}
	v, _ = r.view(t, r.acct.ID, r.job.ID)
	if v["state"] != "running" || v["result"] != nil || v["status"] != nil || v["finished_at"] != nil {
		t.Errorf("finished, unbilled: %v", v)
	}
	if raw, _ := json.Marshal(v); !strings.Contains(string(raw), `"result":null`) {
		t.Errorf("result is not null: %s", raw)
	}
	if err := r.s.MarkJobBilled(ctx, r.acct.ID, r.job.ID, nil); err != nil {
		t.Fatal(err)
	}
	v, _ = r.view(t, r.acct.ID, r.job.ID)
	if v["state"] != "succeeded" || v["status"] != float64(200) || v["result"] == nil || v["finished_at"] == nil {
		t.Errorf("billed: %v", v)
	}
}
