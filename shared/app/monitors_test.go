package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/queue/sqsqueue"
	"github.com/meridian-data/meridian/shared/queue/sqstest"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/store/storetest"
	"github.com/meridian-data/meridian/shared/usage"
	"github.com/meridian-data/meridian/shared/webjobs"
)

// recordingScheduler stands in for EventBridge Scheduler: it keeps what
// the API asked for, and the test delivers runs at the times it chooses.
type recordingScheduler struct {
	mu        sync.Mutex
	schedules map[string]store.Monitor
	fail      bool
}

func (r *recordingScheduler) Schedule(_ context.Context, m store.Monitor) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errors.New("scheduler unavailable")
	}
	r.schedules[m.ID] = m
	return nil
}

func (r *recordingScheduler) Unschedule(_ context.Context, m store.Monitor) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.schedules, m.ID)
	return nil
}

func (r *recordingScheduler) get(id string) (store.Monitor, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.schedules[id]
	return m, ok
}

// capturedJobs is a jobs queue whose messages the test delivers itself.
type capturedJobs struct {
	mu   sync.Mutex
	msgs []queue.JobMessage
}

func (c *capturedJobs) EnqueueJob(_ context.Context, m queue.JobMessage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
	return nil
}

// monitorEnv is the API (every family, as make run serves it) and the
// worker function (app.WorkerHandler with a pipeline serving every
// family) over one store, with the replay upstream.
type monitorEnv struct {
	t         *testing.T
	s         store.Store
	api       http.Handler
	worker    func(context.Context, json.RawMessage) (any, error)
	runner    *app.API
	scheduler *recordingScheduler
	deps      app.Deps
}

func newMonitorEnv(t *testing.T, s store.Store, jobs queue.JobQueue) *monitorEnv {
	t.Helper()
	t.Setenv(app.EnvUpstreamFixtures, filepath.Join(repoRoot(t), "testdata", "upstream"))
	base, stop, err := app.StartReplay(quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	outbox, _ := s.(store.Outbox)
	outcomes, _ := s.(store.Outcomes)
	w := &usage.Worker{Store: s, Outcomes: outcomes, Outbox: outbox}
	sched := &recordingScheduler{schedules: map[string]store.Monitor{}}
	deps := app.Deps{
		Store: s, Upstream: app.NewUpstream(quietLogger(), func(string) (string, bool) { return "", false }, base),
		Scheduler: sched, Jobs: jobs,
	}
	if outbox != nil {
		deps.Events = &usage.Emitter{Queue: usage.Direct{Worker: w}, Outbox: outbox}
	}
	runner := app.New(app.Config("", quietLogger(), deps))
	return &monitorEnv{t: t, s: s, api: app.LocalHandler(quietLogger(), deps), worker: app.WorkerHandler(w, runner),
		runner: runner, scheduler: sched, deps: deps}
}

func (e *monitorEnv) call(method, target, key string) (int, map[string]any) {
	e.t.Helper()
	req := httptest.NewRequest(method, "http://api.test"+target, nil)
	req.Header.Set("x-api-key", key)
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, req)
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		e.t.Fatalf("%s %s: %d %s", method, target, rec.Code, rec.Body)
	}
	return rec.Code, body
}

// deliver invokes the worker as EventBridge Scheduler does for the
// monitor's run at the scheduled time.
func (e *monitorEnv) deliver(acct, id string, at time.Time) {
	e.t.Helper()
	raw := fmt.Sprintf(`{"monitor_run":{"account_id":%q,"monitor_id":%q,"scheduled_at":%q}}`, acct, id, at.UTC().Format(time.RFC3339))
	if _, err := e.worker(context.Background(), json.RawMessage(raw)); err != nil {
		e.t.Fatalf("delivery at %s: %v", at, err)
	}
}

func (e *monitorEnv) runs(id, key string) []map[string]any {
	e.t.Helper()
	code, body := e.call("GET", "/v1/monitors/"+id+"/runs?limit=100", key)
	if code != 200 {
		e.t.Fatalf("runs: %d %v", code, body)
	}
	var out []map[string]any
	for _, r := range body["data"].(map[string]any)["items"].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

func balance(t *testing.T, s store.Store, acct string) int64 {
	t.Helper()
	a, err := s.Account(context.Background(), acct)
	if err != nil {
		t.Fatal(err)
	}
	return a.CreditsRemaining
}

func createPath(platform, endpoint, params string, interval int) string {
	q := url.Values{"platform": {platform}, "endpoint": {endpoint}, "params": {params}, "interval_minutes": {fmt.Sprint(interval)}, "name": {"watch"}}
	return "/v1/monitors/create?" + q.Encode()
}

func TestMonitorsEmbedded(t *testing.T) { testMonitors(t, newEmbedded(t)) }

func TestMonitorsOnDynamoDB(t *testing.T) { testMonitors(t, dynamotest.NewStore(t)) }

// A scheduled run end to end: created through the API, delivered by the
// worker at chosen times (duplicates included), billed and ledgered like
// any call, listed newest first with its data and changes; owner-bound;
// paused by the caller, and by itself when its runs keep failing.
func testMonitors(t *testing.T, s store.Store) {
	env := newMonitorEnv(t, s, nil)
	acct, key := newAccount(t, s, 100, nil)
	_, stranger := newAccount(t, s, 100, nil)

	code, body := env.call("POST", createPath("company_registry", "search", `{"query":"acme"}`, 60), key)
	if code != 200 {
		t.Fatalf("create: %d %v", code, body)
	}
	m := body["data"].(map[string]any)
	id := m["id"].(string)
	if m["state"] != "active" || m["operation"] != "/v1/company_registry/search" || m["params"].(map[string]any)["query"] != "acme" ||
		m["interval_minutes"] != float64(60) || body["credits_used"] != float64(0) {
		t.Fatalf("created: %v", body)
	}
	if sm, ok := env.scheduler.get(id); !ok || sm.IntervalMinutes != 60 || sm.State != store.MonitorActive {
		t.Fatalf("scheduled: %+v %v", sm, ok)
	}

	t1 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	env.deliver(acct.ID, id, t1)
	env.deliver(acct.ID, id, t1) // a duplicate delivery
	if got := balance(t, s, acct.ID); got != 99 {
		t.Fatalf("one run, one credit: balance %d", got)
	}
	// Ten deliveries of the next time at once.
	t2 := t1.Add(time.Hour)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env.deliver(acct.ID, id, t2)
		}()
	}
	wg.Wait()
	if got := balance(t, s, acct.ID); got != 98 {
		t.Fatalf("concurrent duplicates charge once: balance %d", got)
	}
	runs := env.runs(id, key)
	if len(runs) != 2 || runs[0]["id"] != store.RunID(t2) || runs[1]["id"] != store.RunID(t1) {
		t.Fatalf("two runs, newest first: %v", runs)
	}
	for _, r := range runs {
		if r["status"] != "succeeded" || r["credits_used"] != float64(1) || r["http_status"] != float64(200) || r["data"] == nil {
			t.Errorf("run: %v", r)
		}
		page, err := s.Ledger(context.Background(), acct.ID, store.LedgerQuery{RequestID: r["request_id"].(string)})
		if err != nil || len(page.Entries) != 1 || page.Entries[0].Amount != -1 {
			t.Errorf("the run's request_id names its debit: %+v %v", page.Entries, err)
		}
	}
	if runs[1]["changes"] != nil {
		t.Errorf("the first run has nothing to compare with: %v", runs[1]["changes"])
	}
	changes, _ := runs[0]["changes"].(map[string]any)
	if changes == nil || changes["since_run"] != store.RunID(t1) {
		t.Errorf("the second run compares with the first: %v", runs[0]["changes"])
	}

	// Owner-bound.
	for _, p := range []string{"/v1/monitors/" + id, "/v1/monitors/" + id + "/runs"} {
		if code, body := env.call("GET", p, stranger); code != 404 || errType(body) != "RESOURCE_NOT_FOUND" {
			t.Errorf("another account reads %s: %d %v", p, code, body)
		}
	}
	if code, _ := env.call("POST", "/v1/monitors/"+id+"/pause", stranger); code != 404 {
		t.Errorf("another account pauses: %d", code)
	}
	if code, body := env.call("GET", "/v1/monitors", stranger); code != 200 || body["data"].(map[string]any)["count"] != float64(0) {
		t.Errorf("another account lists: %d %v", code, body)
	}

	// Paused: its deliveries run nothing; resumed: they run again.
	if code, body := env.call("POST", "/v1/monitors/"+id+"/pause", key); code != 200 || body["data"].(map[string]any)["paused_reason"] != store.PausedByUser {
		t.Fatalf("pause: %d %v", code, body)
	}
	if sm, _ := env.scheduler.get(id); sm.State != store.MonitorPaused {
		t.Error("the schedule is disabled")
	}
	env.deliver(acct.ID, id, t2.Add(time.Hour))
	if n := len(env.runs(id, key)); n != 2 {
		t.Errorf("a paused monitor does not run: %d runs", n)
	}
	if code, _ := env.call("POST", "/v1/monitors/"+id+"/resume", key); code != 200 {
		t.Fatal("resume")
	}

	// Delete: the schedule goes, then the monitor.
	if code, body := env.call("POST", "/v1/monitors/"+id+"/delete", key); code != 200 || body["data"].(map[string]any)["deleted"] != true {
		t.Fatalf("delete: %d %v", code, body)
	}
	if _, ok := env.scheduler.get(id); ok {
		t.Error("the schedule is deleted")
	}
	if code, _ := env.call("GET", "/v1/monitors/"+id, key); code != 404 {
		t.Error("a deleted monitor is gone")
	}
	env.deliver(acct.ID, id, t2.Add(2*time.Hour)) // a schedule that outlived it: nothing
	if got := balance(t, s, acct.ID); got != 98 {
		t.Errorf("nothing charged after delete: %d", got)
	}
	storetest.CheckLedger(t, s, acct.ID)
}

func errType(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	t, _ := e["type"].(string)
	return t
}

// Runs refused for credits are recorded as refused; after five in a row
// the monitor pauses itself and says why. A revoked key pauses it at once.
func TestMonitorPausesItself(t *testing.T) {
	s := newEmbedded(t)
	env := newMonitorEnv(t, s, nil)
	acct, key := newAccount(t, s, 1, nil)
	_, body := env.call("POST", createPath("company_registry", "search", `{"query":"acme"}`, 5), key)
	id := body["data"].(map[string]any)["id"].(string)
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for i := range 6 {
		env.deliver(acct.ID, id, at.Add(time.Duration(i)*5*time.Minute))
	}
	runs := env.runs(id, key)
	if len(runs) != 6 || runs[5]["status"] != "succeeded" {
		t.Fatalf("six runs, the first succeeded: %v", runs)
	}
	for _, r := range runs[:5] {
		e, _ := r["error"].(map[string]any)
		if r["status"] != "refused" || e["type"] != "INSUFFICIENT_CREDITS" || r["credits_used"] != float64(0) {
			t.Errorf("refused for credits: %v", r)
		}
	}
	_, body = env.call("GET", "/v1/monitors/"+id, key)
	m := body["data"].(map[string]any)
	if m["state"] != "paused" || m["paused_reason"] != store.PausedFailing || !strings.Contains(m["paused_message"].(string), "INSUFFICIENT_CREDITS") ||
		m["consecutive_failures"] != float64(5) {
		t.Fatalf("paused itself, saying why: %v", m)
	}
	if sm, _ := env.scheduler.get(id); sm.State != store.MonitorPaused {
		t.Error("its schedule is disabled")
	}
	if got := balance(t, s, acct.ID); got != 0 {
		t.Errorf("balance %d", got)
	}

	// A revoked key: one run, refused, paused at once.
	other, otherKey := newAccount(t, s, 50, nil)
	_, body = env.call("POST", createPath("company_registry", "search", `{"query":"acme"}`, 5), otherKey)
	id2 := body["data"].(map[string]any)["id"].(string)
	keys, _ := s.Keys(context.Background(), other.ID)
	if _, err := s.SetKeyStatus(context.Background(), other.ID, keys[0].ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	env.deliver(other.ID, id2, at)
	m2, err := store.Monitors(s).Monitor(context.Background(), other.ID, id2)
	if err != nil || m2.State != store.MonitorPaused || m2.PausedReason != store.PausedKeyGone || m2.LastRunStatus != store.RunRefused {
		t.Errorf("a revoked key pauses the monitor at once: %+v %v", m2, err)
	}
	if got := balance(t, s, other.ID); got != 50 {
		t.Errorf("nothing charged: %d", got)
	}
}

func newEmbedded(t testing.TB) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Creating refuses what its operation would refuse, before anything is stored.
func TestMonitorCreateRefusals(t *testing.T) {
	s := newEmbedded(t)
	env := newMonitorEnv(t, s, nil)
	_, key := newAccount(t, s, 10, nil)
	for _, c := range []struct {
		target, field, reason string
		status                int
	}{
		{createPath("company_registry", "nope", `{}`, 60), "endpoint", "unknown_endpoint", 422},
		{createPath("nowhere", "search", `{}`, 60), "platform", "unknown_platform", 422},
		{createPath("credits", "balance", `{}`, 60), "endpoint", "unknown_endpoint", 422},
		{createPath("company_registry", "search", `{"query":`, 60), "params", "invalid_format", 422},
		{createPath("company_registry", "search", `{"query":["a"]}`, 60), "params", "invalid_format", 422},
		{createPath("company_registry", "search", `{"query":"acme","dry_run":1}`, 60), "params", "not_allowed", 422},
		{createPath("company_registry", "search", `{}`, 60), "", "", 422},
		{createPath("company_registry", "search", `{"query":"acme","zz":1}`, 60), "", "", 400},
		{createPath("company_registry", "search", `{"query":"acme"}`, 2), "interval_minutes", "out_of_range", 422},
		{"/v1/monitors/create?platform=company_registry", "", "", 422},
	} {
		code, body := env.call("POST", c.target, key)
		d, _ := body["error"].(map[string]any)["details"].(map[string]any)
		if code != c.status || errType(body) != "INVALID_PARAMETERS" || (c.field != "" && (d["field"] != c.field || d["reason"] != c.reason)) {
			t.Errorf("%s: %d %v", c.target, code, body)
		}
	}
	if code, body := env.call("GET", "/v1/monitors", key); code != 200 || body["data"].(map[string]any)["count"] != float64(0) {
		t.Errorf("nothing stored: %v", body)
	}
	// The scheduler down: nothing is kept that would never run.
	env.scheduler.fail = true
	if code, _ := env.call("POST", createPath("company_registry", "search", `{"query":"acme"}`, 60), key); code != 500 {
		t.Errorf("scheduler down: %d", code)
	}
	if _, body := env.call("GET", "/v1/monitors", key); body["data"].(map[string]any)["count"] != float64(0) {
		t.Errorf("an unscheduled monitor is not kept: %v", body)
	}
}

// A web job: accepted with 202 and its cost reserved, run by the worker,
// readable by its owner only; a worker that dies after the call is taken
// over once its lease ends, and the job is charged exactly once.
func TestWebJobEmbedded(t *testing.T) {
	s := newEmbedded(t)
	jobs := &capturedJobs{}
	testWebJob(t, s, jobs, func(env *monitorEnv) {
		jobs.mu.Lock()
		msgs := jobs.msgs
		jobs.msgs = nil
		jobs.mu.Unlock()
		for _, m := range msgs {
			ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", EventSource: "aws:sqs", Body: mustJSON(m)}}}
			raw, _ := json.Marshal(ev)
			out, err := env.worker(context.Background(), raw)
			if err != nil || len(out.(events.SQSEventResponse).BatchItemFailures) != 0 {
				t.Fatalf("job delivery: %v %v", out, err)
			}
		}
	})
}

func TestWebJobOnDynamoDBAndSQS(t *testing.T) {
	s := dynamotest.NewStore(t)
	client, queueURL, _ := sqstest.NewQueues(t, 5)
	testWebJob(t, s, sqsqueue.NewJobQueue(client, queueURL), func(env *monitorEnv) {
		h := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			raw, _ := json.Marshal(ev)
			out, err := env.worker(ctx, raw)
			if err != nil {
				return events.SQSEventResponse{}, err
			}
			return out.(events.SQSEventResponse), nil
		}
		sqstest.Drain(t, client, queueURL, h)
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func testWebJob(t *testing.T, s store.Store, jobs queue.JobQueue, work func(*monitorEnv)) {
	env := newMonitorEnv(t, s, jobs)
	acct, key := newAccount(t, s, 100, nil)
	_, stranger := newAccount(t, s, 100, nil)

	target := "/v1/web/social-profiles?platform=microblog_a&handle=alice.example.com&async=1"
	code, body := env.call("GET", target, key)
	if code != 202 || body["credits_used"] != nil || body["success"] != true {
		t.Fatalf("accepted: %d %v", code, body)
	}
	d := body["data"].(map[string]any)
	id := d["job_id"].(string)
	if d["url"] != "/v1/web/jobs/"+id || d["state"] != "queued" || d["credits_reserved"] != float64(15) || body["credits_remaining"] != float64(85) {
		t.Fatalf("the job: %v", body)
	}
	if got := balance(t, s, acct.ID); got != 85 {
		t.Fatalf("reserved: %d", got)
	}
	if code, body := env.call("GET", "/v1/web/jobs/"+id, stranger); code != 404 || errType(body) != "RESOURCE_NOT_FOUND" {
		t.Errorf("another account: %d %v", code, body)
	}
	if _, body := env.call("GET", "/v1/web/jobs/"+id, key); body["data"].(map[string]any)["state"] != "queued" {
		t.Errorf("queued: %v", body)
	}

	work(env)
	code, body = env.call("GET", "/v1/web/jobs/"+id, key)
	j := body["data"].(map[string]any)
	result, _ := j["result"].(map[string]any)
	if code != 200 || j["state"] != "succeeded" || j["status"] != float64(200) || result["credits_used"] != float64(15) ||
		result["request_id"] != j["request_id"] || result["endpoint"] != "/v1/web/social-profiles" {
		t.Fatalf("succeeded with the envelope: %d %v", code, body)
	}
	if p := j["progress"].(map[string]any); p["total"] == float64(0) || p["done"] != p["total"] {
		t.Errorf("progress: %v", p)
	}
	// A duplicate delivery after the end changes nothing.
	if err := env.runner.RunJob(context.Background(), queue.JobMessage{AccountID: acct.ID, JobID: id}); err != nil {
		t.Fatal(err)
	}
	if got := balance(t, s, acct.ID); got != 85 {
		t.Errorf("charged once: %d", got)
	}
	page, _ := s.Ledger(context.Background(), acct.ID, store.LedgerQuery{RequestID: j["request_id"].(string)})
	if len(page.Entries) != 1 || page.Entries[0].Amount != -15 {
		t.Errorf("one debit, no refund: %+v", page.Entries)
	}
	storetest.CheckLedger(t, s, acct.ID)
}

// finishFails is a store whose FinishJob dies: a worker killed after the
// call, before it stored the outcome.
type finishFails struct {
	store.Store
	jobs  store.Jobs
	armed atomic.Bool
}

func (f *finishFails) FinishJob(ctx context.Context, accountID, id, state string, status int, result []byte, now time.Time) (store.Job, error) {
	if f.armed.Load() {
		return store.Job{}, errors.New("worker killed")
	}
	return f.jobs.FinishJob(ctx, accountID, id, state, status, result, now)
}
func (f *finishFails) CreateJob(ctx context.Context, j store.Job) error {
	return f.jobs.CreateJob(ctx, j)
}
func (f *finishFails) Job(ctx context.Context, a, id string, now time.Time) (store.Job, error) {
	return f.jobs.Job(ctx, a, id, now)
}
func (f *finishFails) StartJob(ctx context.Context, a, id string, now, lease time.Time) (store.Job, bool, error) {
	return f.jobs.StartJob(ctx, a, id, now, lease)
}
func (f *finishFails) JobProgress(ctx context.Context, a, id string, done, total int) error {
	return f.jobs.JobProgress(ctx, a, id, done, total)
}
func (f *finishFails) MarkJobBilled(ctx context.Context, a, id string, replaced *store.JobOutcome) error {
	return f.jobs.MarkJobBilled(ctx, a, id, replaced)
}
func (f *finishFails) TakeJobSlot(ctx context.Context, a, id string, now, until time.Time, max int) error {
	return f.jobs.TakeJobSlot(ctx, a, id, now, until, max)
}
func (f *finishFails) ReleaseJobSlot(ctx context.Context, a, id string) error {
	return f.jobs.ReleaseJobSlot(ctx, a, id)
}

// A job whose worker dies after its call is delivered again: while the
// lease holds the delivery is refused (SQS keeps it), after it the job is
// taken over, run once more and charged once.
func TestWebJobSurvivesAWorkerCrash(t *testing.T) {
	for name, s := range map[string]store.Store{"embedded": newEmbedded(t), "dynamodb": dynamotest.NewStore(t)} {
		t.Run(name, func(t *testing.T) {
			crashy := &finishFails{Store: s, jobs: s.(store.Jobs)}
			jobs := &capturedJobs{}
			env := newMonitorEnv(t, crashy, jobs)
			acct, key := newAccount(t, s, 100, nil)
			code, body := env.call("GET", "/v1/web/social-profiles?platform=microblog_a&handle=alice.example.com&async=1", key)
			if code != 202 {
				t.Fatalf("%d %v", code, body)
			}
			msg := jobs.msgs[0]
			crashy.armed.Store(true)
			if err := env.runner.RunJob(context.Background(), msg); err == nil {
				t.Fatal("the crashed delivery reports failure, so SQS delivers again")
			}
			crashy.armed.Store(false)
			if err := env.runner.RunJob(context.Background(), msg); !errors.Is(err, webjobs.ErrBusy) {
				t.Fatalf("within the lease the job is the first worker's: %v", err)
			}
			// After the lease: a worker whose clock is past it takes over.
			cfg := app.Config("", quietLogger(), env.deps)
			cfg.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
			later := app.New(cfg)
			if err := later.RunJob(context.Background(), msg); err != nil {
				t.Fatal(err)
			}
			j, err := s.(store.Jobs).Job(context.Background(), acct.ID, msg.JobID, time.Now())
			if err != nil || j.State != store.JobSucceeded || j.Attempts != 2 || !j.Billed {
				t.Fatalf("taken over and finished: %+v %v", j, err)
			}
			if got := balance(t, s, acct.ID); got != 85 {
				t.Errorf("charged once: %d", got)
			}
			storetest.CheckLedger(t, s, acct.ID)
		})
	}
}

// A job the worker cannot serve fails and is refunded; its envelope says
// why and charged nothing.
func TestWebJobFailureIsRefunded(t *testing.T) {
	s := newEmbedded(t)
	jobs := &capturedJobs{}
	env := newMonitorEnv(t, s, jobs)
	acct, key := newAccount(t, s, 100, nil)
	if code, body := env.call("GET", "/v1/web/social-profiles?platform=microblog_a&handle=alice.example.com&async=1", key); code != 202 {
		t.Fatalf("%d %v", code, body)
	}
	cfg := app.Config("", quietLogger(), env.deps)
	cfg.Upstream, cfg.Composites = nil, nil // a worker that serves nothing
	if err := app.New(cfg).RunJob(context.Background(), jobs.msgs[0]); err != nil {
		t.Fatal(err)
	}
	_, body := env.call("GET", "/v1/web/jobs/"+jobs.msgs[0].JobID, key)
	j := body["data"].(map[string]any)
	result := j["result"].(map[string]any)
	if j["state"] != "failed" || j["status"] != float64(501) || result["credits_used"] != float64(0) || result["success"] != false {
		t.Fatalf("failed: %v", j)
	}
	if got := balance(t, s, acct.ID); got != 100 {
		t.Errorf("refunded: %d", got)
	}
	storetest.CheckLedger(t, s, acct.ID)
}

// The console manages the same monitors with its token: create (with the
// account's key), list, pause, resume, runs, delete.
func TestConsoleMonitors(t *testing.T) {
	s := newEmbedded(t)
	env := newMonitorEnv(t, s, nil)
	acct, token, err := auth.CreateAccount(context.Background(), s, 20, "req_console_monitors")
	if err != nil {
		t.Fatal(err)
	}
	console := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
		req.Header.Set("authorization", "Bearer "+token)
		req.Header.Set("content-type", "application/json")
		rec := httptest.NewRecorder()
		env.api.ServeHTTP(rec, req)
		var out map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, out
	}
	create := `{"platform":"company_registry","endpoint":"search","params":{"query":"acme"},"interval_minutes":30,"name":"acme"}`
	if code, body := console("POST", "/console/monitors", create); code != 422 {
		t.Fatalf("no active key yet: %d %v", code, body)
	}
	key := newKey(t, s, acct.ID)
	code, body := console("POST", "/console/monitors", create)
	if code != 201 || body["state"] != "active" || body["interval_minutes"] != float64(30) {
		t.Fatalf("create: %d %v", code, body)
	}
	id := body["id"].(string)
	if code, body := console("POST", "/console/monitors", `{"key_id":"key_nope","platform":"company_registry","endpoint":"search","params":{"query":"a"}}`); code != 422 {
		t.Errorf("another key: %d %v", code, body)
	}
	if code, body := console("GET", "/console/monitors", ""); code != 200 || body["count"] != float64(1) {
		t.Errorf("list: %d %v", code, body)
	}
	if code, body := console("POST", "/console/monitors/"+id+"/pause", ""); code != 200 || body["state"] != "paused" {
		t.Errorf("pause: %d %v", code, body)
	}
	if code, body := console("POST", "/console/monitors/"+id+"/resume", ""); code != 200 || body["state"] != "active" {
		t.Errorf("resume: %d %v", code, body)
	}
	env.deliver(acct.ID, id, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	if code, body := console("GET", "/console/monitors/"+id+"/runs?limit=5", ""); code != 200 || body["count"] != float64(1) {
		t.Errorf("runs: %d %v", code, body)
	}
	// The API sees the console's monitor (same account).
	if code, _ := env.call("GET", "/v1/monitors/"+id, key); code != 200 {
		t.Errorf("the API reads it: %d", code)
	}
	if code, _ := console("DELETE", "/console/monitors/"+id, ""); code != 200 {
		t.Errorf("delete: %d", code)
	}
	if code, _ := console("GET", "/console/monitors/"+id+"/runs", ""); code != 404 {
		t.Errorf("deleted: %d", code)
	}
}

// async=1 with an Idempotency-Key: the retry replays the same job and
// reserves nothing more. Without a jobs queue, async=1 is 501 and free.
func TestWebJobIdempotentAndUnavailable(t *testing.T) {
	s := newEmbedded(t)
	jobs := &capturedJobs{}
	env := newMonitorEnv(t, s, jobs)
	acct, key := newAccount(t, s, 100, nil)
	target := "http://api.test/v1/web/social-profiles?platform=microblog_a&handle=alice.example.com&async=1"
	ask := func() (int, map[string]any) {
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set("x-api-key", key)
		req.Header.Set("idempotency-key", "job-once")
		rec := httptest.NewRecorder()
		env.api.ServeHTTP(rec, req)
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	code1, first := ask()
	code2, again := ask()
	if code1 != 202 || code2 != 202 || first["data"].(map[string]any)["job_id"] != again["data"].(map[string]any)["job_id"] {
		t.Fatalf("replayed: %d %v / %d %v", code1, first, code2, again)
	}
	if len(jobs.msgs) != 1 || balance(t, s, acct.ID) != 85 {
		t.Errorf("one job, one reservation: %d jobs, balance %d", len(jobs.msgs), balance(t, s, acct.ID))
	}

	bare := newMonitorEnv(t, s, nil)
	code, body := bare.call("GET", "/v1/web/social-profiles?platform=microblog_a&handle=alice.example.com&async=1", key)
	if code != 501 || errType(body) != "ENDPOINT_NOT_AVAILABLE" || body["credits_used"] != float64(0) || balance(t, s, acct.ID) != 85 {
		t.Errorf("no jobs queue: %d %v", code, body)
	}
}
