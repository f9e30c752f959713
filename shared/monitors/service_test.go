package monitors

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// The monitors feature against a fake pipeline: everything it needs of
// the pipeline is the Runner it is handed; monitors and keys are a real
// embedded store.

// fakeRunner is a pipeline.Runner that records every call and answers
// from a script (the last answer repeats).
type fakeRunner struct {
	mu          sync.Mutex
	calls       []ranCall
	answers     []pipeline.Answer
	unavailable map[string]bool // endpoint keys Available refuses
}

type ranCall struct {
	req *http.Request
	as  pipeline.RunAs
}

func (f *fakeRunner) Run(r *http.Request, as pipeline.RunAs) pipeline.Answer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, ranCall{r, as})
	if len(f.answers) == 0 {
		panic("fakeRunner: no answer scripted")
	}
	a := f.answers[0]
	if len(f.answers) > 1 {
		f.answers = f.answers[1:]
	}
	return a
}

func (f *fakeRunner) Available(e *registry.Endpoint) bool { return !f.unavailable[e.Key()] }

func (f *fakeRunner) ErrorsURL(*http.Request) string { return "https://docs.test/errors" }

func (f *fakeRunner) ran() []ranCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeRunner) script(a ...pipeline.Answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = a
}

// answer is a scripted answer: its status, envelope and x-request-id.
func answer(status int, requestID, body string) pipeline.Answer {
	h := http.Header{}
	h.Set("x-request-id", requestID)
	return pipeline.Answer{Status: status, Header: h, Body: []byte(body), RequestID: requestID}
}

func success(requestID, data string) pipeline.Answer {
	return answer(200, requestID, `{"success":true,"platform":"company_registry","endpoint":"/v1/company_registry/search","data":`+
		data+`,"credits_used":1,"request_id":"`+requestID+`","cached":false}`)
}

func failure(status int, requestID string, t envelope.Type) pipeline.Answer {
	return answer(status, requestID, `{"success":false,"error":{"type":"`+string(t)+`","message":"no","status":`+
		strconv.Itoa(status)+`},"credits_used":0,"request_id":"`+requestID+`"}`)
}

// recScheduler keeps the schedules asked for.
type recScheduler struct {
	mu        sync.Mutex
	schedules map[string]store.Monitor
}

func (r *recScheduler) Schedule(_ context.Context, m store.Monitor) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.schedules[m.ID] = m
	return nil
}

func (r *recScheduler) Unschedule(_ context.Context, m store.Monitor) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.schedules, m.ID)
	return nil
}

func (r *recScheduler) get(id string) (store.Monitor, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.schedules[id]
	return m, ok
}

type rig struct {
	svc    *Service
	runner *fakeRunner
	sched  *recScheduler
	s      *embedded.Store
	acct   store.Account
	key    store.Key
}

// newRig is the service over an embedded store, given the fake Runner,
// with an account and its key. It pauses a monitor after 3 failures.
func newRig(t *testing.T) *rig {
	t.Helper()
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	acct, _, err := auth.CreateAccount(context.Background(), s, 100, envelope.NewRequestID())
	if err != nil {
		t.Fatal(err)
	}
	_, k := auth.NewKey(acct.ID, "test", nil)
	key, err := s.CreateKey(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{runner: &fakeRunner{}, sched: &recScheduler{schedules: map[string]store.Monitor{}}, s: s, acct: acct, key: key}
	r.svc = New(Config{Registry: registry.Default(), Monitors: s, Keys: s, Scheduler: r.sched, PauseAfter: 3})
	if r.svc.Handlers(r.runner) == nil {
		t.Fatal("no handlers")
	}
	return r
}

// create makes a company_registry/search monitor for the rig's key.
func (r *rig) create(t *testing.T) store.Monitor {
	t.Helper()
	m, refusal := r.svc.Create(context.Background(), r.acct.ID, r.key.ID, Spec{
		Platform: "company_registry", Endpoint: "search", Params: `{"query":"acme","limit":5}`, IntervalMinutes: "15", Name: "watch",
	})
	if refusal != nil {
		t.Fatalf("create: %v", refusal)
	}
	return m
}

func (r *rig) deliver(t *testing.T, id string, at time.Time) {
	t.Helper()
	if err := r.svc.Run(context.Background(), RunRequest{AccountID: r.acct.ID, MonitorID: id, ScheduledAt: at}); err != nil {
		t.Fatalf("run at %s: %v", at, err)
	}
}

func (r *rig) monitor(t *testing.T, id string) store.Monitor {
	t.Helper()
	m, err := r.s.Monitor(context.Background(), r.acct.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (r *rig) run(t *testing.T, id string, at time.Time) store.MonitorRun {
	t.Helper()
	run, err := r.s.Run(context.Background(), r.acct.ID, id, store.RunID(at), time.Now())
	if err != nil {
		t.Fatalf("run %s: %v", store.RunID(at), err)
	}
	return run
}

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// /v1/monitors is served only where monitors can be scheduled: the seven
// keys, each a monitors endpoint of the registry.
func TestHandlers(t *testing.T) {
	if h := New(Config{Registry: registry.Default()}).Handlers(&fakeRunner{}); h != nil {
		t.Errorf("no store, no scheduler: %d handlers", len(h))
	}
	r := newRig(t)
	if h := New(Config{Registry: registry.Default(), Monitors: r.s, Keys: r.s}).Handlers(r.runner); h != nil {
		t.Errorf("no scheduler: %d handlers", len(h))
	}
	h := New(Config{Registry: registry.Default(), Monitors: r.s, Keys: r.s, Scheduler: NewLocalScheduler(nil)}).Handlers(r.runner)
	got := slices.Sorted(maps.Keys(h))
	want := []string{"monitors", "monitors/create", "monitors/{id}", "monitors/{id}/delete", "monitors/{id}/pause", "monitors/{id}/resume", "monitors/{id}/runs"}
	if !slices.Equal(got, want) {
		t.Fatalf("handlers %v, want %v", got, want)
	}
	for _, k := range got {
		if e, ok := registry.Default().Endpoint(k); !ok || e.Platform != "monitors" || e.Kind != registry.ServiceOwned {
			t.Errorf("%s is not a monitors endpoint of the registry", k)
		}
	}
}

// Create refuses what the operation would refuse, and what the Runner
// says this deployment does not serve, before anything is stored; a valid
// monitor is stored with its canonical parameters and scheduled.
func TestCreate(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	spec := func(platform, endpoint, params, interval string) Spec {
		return Spec{Platform: platform, Endpoint: endpoint, Params: params, IntervalMinutes: interval}
	}
	r.runner.unavailable = map[string]bool{"company_registry/search": true}
	for _, c := range []struct {
		name          string
		spec          Spec
		typ           envelope.Type
		status        int
		field, reason string
	}{
		{"unknown platform", spec("nowhere", "search", `{}`, ""), envelope.InvalidParameters, 422, "platform", "unknown_platform"},
		{"unknown endpoint", spec("company_registry", "nope", `{}`, ""), envelope.InvalidParameters, 422, "endpoint", "unknown_endpoint"},
		{"not a data endpoint", spec("credits", "balance", `{}`, ""), envelope.InvalidParameters, 422, "endpoint", "unknown_endpoint"},
		{"a monitors endpoint", spec("monitors", "create", `{}`, ""), envelope.InvalidParameters, 422, "endpoint", "unknown_endpoint"},
		{"not available here", spec("company_registry", "search", `{"query":"acme"}`, ""), envelope.EndpointNotAvailable, 501, "", ""},
	} {
		_, refusal := r.svc.Create(ctx, r.acct.ID, r.key.ID, c.spec)
		if refusal == nil || refusal.Type != c.typ || refusal.Status != c.status ||
			(c.field != "" && (refusal.Details["field"] != c.field || refusal.Details["reason"] != c.reason)) {
			t.Errorf("%s: %+v", c.name, refusal)
		}
	}
	r.runner.unavailable = nil
	for _, c := range []struct {
		name          string
		spec          Spec
		status        int
		field, reason string
	}{
		{"params not JSON", spec("company_registry", "search", `{"query":`, ""), 422, "params", "invalid_format"},
		{"params an array", spec("company_registry", "search", `["acme"]`, ""), 422, "params", "invalid_format"},
		{"params null", spec("company_registry", "search", `null`, ""), 422, "params", "invalid_format"},
		{"params not scalar", spec("company_registry", "search", `{"query":["a"]}`, ""), 422, "params", "invalid_format"},
		{"dry_run", spec("company_registry", "search", `{"query":"acme","dry_run":true}`, ""), 422, "params", "not_allowed"},
		{"async", spec("company_registry", "search", `{"query":"acme","async":1}`, ""), 422, "params", "not_allowed"},
		{"interval too short", spec("company_registry", "search", `{"query":"acme"}`, "4"), 422, "interval_minutes", "out_of_range"},
		{"interval too long", spec("company_registry", "search", `{"query":"acme"}`, "10081"), 422, "interval_minutes", "out_of_range"},
		{"interval not a number", spec("company_registry", "search", `{"query":"acme"}`, "hourly"), 422, "interval_minutes", "out_of_range"},
	} {
		_, refusal := r.svc.Create(ctx, r.acct.ID, r.key.ID, c.spec)
		if refusal == nil || refusal.Type != envelope.InvalidParameters || refusal.Status != c.status ||
			refusal.Details["field"] != c.field || refusal.Details["reason"] != c.reason {
			t.Errorf("%s: %+v", c.name, refusal)
		}
	}
	// The operation's own validation, marked as being about params.
	if _, refusal := r.svc.Create(ctx, r.acct.ID, r.key.ID, spec("company_registry", "search", `{}`, "")); refusal == nil ||
		refusal.Type != envelope.InvalidParameters || refusal.Details["in"] != "params" || !strings.HasPrefix(refusal.Message, "params: ") {
		t.Errorf("missing query: %+v", refusal)
	}
	if list, _ := r.s.ListMonitors(ctx, r.acct.ID); len(list) != 0 {
		t.Fatalf("a refusal stored %d monitors", len(list))
	}
	if len(r.runner.ran()) != 0 {
		t.Fatal("creating ran a call")
	}

	m := r.create(t)
	want := map[string]string{"query": "acme", "limit": "5"}
	if m.State != store.MonitorActive || m.IntervalMinutes != 15 || m.KeyID != r.key.ID || m.Platform != "company_registry" ||
		m.Endpoint != "search" || !maps.Equal(m.Params, want) {
		t.Errorf("created: %+v", m)
	}
	if stored := r.monitor(t, m.ID); !maps.Equal(stored.Params, want) || stored.Name != "watch" {
		t.Errorf("stored: %+v", stored)
	}
	if sm, ok := r.sched.get(m.ID); !ok || sm.IntervalMinutes != 15 || sm.State != store.MonitorActive {
		t.Errorf("scheduled: %+v %v", sm, ok)
	}
	// Without a Runner nothing is available: a service never given to a
	// pipeline creates nothing.
	bare := New(Config{Registry: registry.Default(), Monitors: r.s, Keys: r.s, Scheduler: r.sched})
	if _, refusal := bare.Create(ctx, r.acct.ID, r.key.ID, spec("company_registry", "search", `{"query":"acme"}`, "")); refusal == nil ||
		refusal.Type != envelope.EndpointNotAvailable || refusal.Status != 501 {
		t.Errorf("no Runner: %+v", refusal)
	}
}

// A scheduled run is one GET of the monitored operation through the
// Runner, with the monitor's key and parameters, skipping the cache; it is
// stored with the answer's data, and a second delivery of the same time
// runs nothing.
func TestRunCallsTheRunnerOnce(t *testing.T) {
	r := newRig(t)
	m := r.create(t)
	r.runner.script(success("req_first", `{"count":1,"items":[{"id":"a","title":"A"}]}`))
	r.deliver(t, m.ID, t0)
	r.deliver(t, m.ID, t0) // the same time again

	calls := r.runner.ran()
	if len(calls) != 1 {
		t.Fatalf("%d calls, want 1", len(calls))
	}
	req, as := calls[0].req, calls[0].as
	if req.Method != http.MethodGet || req.URL.Path != "/v1/company_registry/search" ||
		req.URL.Query().Get("query") != "acme" || req.URL.Query().Get("limit") != "5" || len(req.URL.Query()) != 2 {
		t.Errorf("request: %s %s", req.Method, req.URL)
	}
	if req.Header.Get("cache-control") != "no-cache" {
		t.Errorf("cache-control %q", req.Header.Get("cache-control"))
	}
	if as.KeyHash != r.key.Hash || as.Parent != m.ID || as.Job != nil || as.Live != nil {
		t.Errorf("run as %+v, want the key's hash %s and the monitor %s", as, r.key.Hash, m.ID)
	}
	run := r.run(t, m.ID, t0)
	if run.Status != store.RunSucceeded || run.HTTPStatus != 200 || run.RequestID != "req_first" || run.CreditsUsed == nil ||
		*run.CreditsUsed != 1 || run.Attempt != 1 || run.FinishedAt == nil || run.Changes != nil {
		t.Errorf("run: %+v", run)
	}
	if string(run.Data) != `{"count":1,"items":[{"id":"a","title":"A"}]}` {
		t.Errorf("data %s", run.Data)
	}
	if got := r.monitor(t, m.ID); got.LastRunStatus != store.RunSucceeded || got.LastSucceededRun != run.ID || got.ConsecutiveFailures != 0 {
		t.Errorf("monitor after the run: %+v", got)
	}

	// The next time compares with the first.
	r.runner.script(success("req_second", `{"count":2,"items":[{"id":"a","title":"A"},{"id":"b"}]}`))
	r.deliver(t, m.ID, t0.Add(15*time.Minute))
	if n := len(r.runner.ran()); n != 2 {
		t.Fatalf("%d calls, want 2", n)
	}
	var ch Changes
	if err := json.Unmarshal(r.run(t, m.ID, t0.Add(15*time.Minute)).Changes, &ch); err != nil || ch.SinceRun != run.ID {
		t.Errorf("changes since the first run: %+v %v", ch, err)
	}
}

// A 401 pauses the monitor at once (its key is gone); the run is refused.
func TestRunUnauthorizedPausesAtOnce(t *testing.T) {
	r := newRig(t)
	m := r.create(t)
	r.runner.script(failure(401, "req_401", envelope.Unauthorized))
	r.deliver(t, m.ID, t0)
	got := r.monitor(t, m.ID)
	if got.State != store.MonitorPaused || got.PausedReason != store.PausedKeyGone || got.ConsecutiveFailures != 1 {
		t.Errorf("paused at once: %+v", got)
	}
	if run := r.run(t, m.ID, t0); run.Status != store.RunRefused || run.HTTPStatus != 401 || run.ErrorType != string(envelope.Unauthorized) ||
		run.RequestID != "req_401" || run.Data != nil {
		t.Errorf("run: %+v", run)
	}
	if sm, _ := r.sched.get(m.ID); sm.State != store.MonitorPaused {
		t.Error("the schedule is not disabled")
	}
	r.deliver(t, m.ID, t0.Add(15*time.Minute))
	if n := len(r.runner.ran()); n != 1 {
		t.Errorf("a paused monitor ran: %d calls", n)
	}
}

// PauseAfter failed runs in a row pause the monitor, saying why (the
// last failure: here an answer that is not an envelope, known by its
// x-request-id header).
func TestRunPausesAfterFailures(t *testing.T) {
	r := newRig(t)
	m := r.create(t)
	fail := failure(502, "req_502", envelope.UpstreamError)
	r.runner.script(fail, fail, answer(502, "req_gateway", "<html>Bad Gateway</html>"))
	for i := range 3 {
		if got := r.monitor(t, m.ID); got.State != store.MonitorActive || got.ConsecutiveFailures != i {
			t.Fatalf("before run %d: %+v", i+1, got)
		}
		r.deliver(t, m.ID, t0.Add(time.Duration(i)*15*time.Minute))
	}
	got := r.monitor(t, m.ID)
	if got.State != store.MonitorPaused || got.PausedReason != store.PausedFailing || got.ConsecutiveFailures != 3 ||
		!strings.Contains(got.PausedMessage, "Paused after 3 runs") || !strings.Contains(got.PausedMessage, string(envelope.InternalError)) {
		t.Errorf("paused: %+v", got)
	}
	if run := r.run(t, m.ID, t0); run.Status != store.RunFailed || run.HTTPStatus != 502 || run.ErrorType != string(envelope.UpstreamError) ||
		run.RequestID != "req_502" || run.CreditsUsed == nil || *run.CreditsUsed != 0 {
		t.Errorf("first run: %+v", run)
	}
	if run := r.run(t, m.ID, t0.Add(30*time.Minute)); run.Status != store.RunFailed || run.HTTPStatus != 502 ||
		run.ErrorType != string(envelope.InternalError) || run.RequestID != "req_gateway" {
		t.Errorf("last run: %+v", run)
	}
	if sm, _ := r.sched.get(m.ID); sm.State != store.MonitorPaused {
		t.Error("the schedule is not disabled")
	}
	if n := len(r.runner.ran()); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}

// A success in between resets the count: failures must be in a row.
func TestRunSuccessResetsFailures(t *testing.T) {
	r := newRig(t)
	m := r.create(t)
	fail := failure(502, "req_502", envelope.UpstreamError)
	r.runner.script(fail, fail, success("req_ok", `{"count":0}`), fail, fail)
	for i := range 5 {
		r.deliver(t, m.ID, t0.Add(time.Duration(i)*15*time.Minute))
	}
	if got := r.monitor(t, m.ID); got.State != store.MonitorActive || got.ConsecutiveFailures != 2 {
		t.Errorf("still active: %+v", got)
	}
}

// A delivery for a deleted monitor removes its stale schedule and runs
// nothing.
func TestRunDeletedMonitorUnschedules(t *testing.T) {
	r := newRig(t)
	m := r.create(t)
	if refusal := r.svc.Delete(context.Background(), r.acct.ID, m.ID); refusal != nil {
		t.Fatal(refusal)
	}
	if _, ok := r.sched.get(m.ID); ok {
		t.Fatal("Delete left the schedule")
	}
	_ = r.sched.Schedule(context.Background(), m) // a schedule that outlived its monitor
	r.runner.script(success("req_x", `{}`))
	r.deliver(t, m.ID, t0)
	if _, ok := r.sched.get(m.ID); ok {
		t.Error("the stale schedule is left")
	}
	if n := len(r.runner.ran()); n != 0 {
		t.Errorf("%d calls for a deleted monitor", n)
	}
	if _, err := r.s.Run(context.Background(), r.acct.ID, m.ID, store.RunID(t0), time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a run was stored: %v", err)
	}
}

// A service never given to a pipeline refuses a delivery before it claims
// the run, so a later delivery (once wired) can still make it.
func TestRunWithoutRunner(t *testing.T) {
	r := newRig(t)
	m := r.create(t)
	unwired := New(Config{Registry: registry.Default(), Monitors: r.s, Keys: r.s, Scheduler: r.sched})
	if err := unwired.Run(context.Background(), RunRequest{AccountID: r.acct.ID, MonitorID: m.ID, ScheduledAt: t0}); err == nil {
		t.Fatal("Run without a Runner: no error")
	}
	if _, err := r.s.Run(context.Background(), r.acct.ID, m.ID, store.RunID(t0), time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a run was claimed: %v", err)
	}
	r.runner.script(success("req_x", `{}`))
	r.deliver(t, m.ID, t0)
	if got := r.run(t, m.ID, t0); got.Status != store.RunSucceeded {
		t.Errorf("the wired delivery: %+v", got)
	}
}
