package awsscheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/monitors/awsscheduler"
	"github.com/meridian-data/meridian/shared/store"
)

const (
	group  = "Meridian-test-monitors"
	role   = "arn:aws:iam::123456789012:role/meridian-scheduler"
	target = "arn:aws:lambda:us-east-1:123456789012:function:meridian-worker"
)

func monitor(id string, minutes int, state string) store.Monitor {
	return store.Monitor{
		ID: id, AccountID: "acct_01", KeyID: "key_01", Name: "<b>my monitor</b>",
		Platform: "company_registry", Endpoint: "search", Params: map[string]string{"q": "acme"},
		IntervalMinutes: minutes, State: state,
	}
}

// schedule is what a fake keeps of one schedule.
type schedule struct {
	Group, Name, Description, Expression, FlexMode, State, ActionAfterCompletion string
	Target                                                                       *types.Target
}

// fake is an in-memory EventBridge Scheduler with the API's errors.
type fake struct {
	mu        sync.Mutex
	schedules map[string]schedule // group/name
	calls     []string
	// raceCreate makes the next CreateSchedule find the schedule made
	// meanwhile (ConflictException), as when two requests schedule at once.
	raceCreate bool
	fail       error // returned by every call when set
}

func newFake() *fake { return &fake{schedules: map[string]schedule{}} }

func key(group, name *string) string { return aws.ToString(group) + "/" + aws.ToString(name) }

func (f *fake) CreateSchedule(_ context.Context, in *scheduler.CreateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "create")
	if f.fail != nil {
		return nil, f.fail
	}
	k := key(in.GroupName, in.Name)
	if f.raceCreate {
		f.raceCreate = false
		f.schedules[k] = schedule{Name: "someone else's"}
	}
	if _, ok := f.schedules[k]; ok {
		return nil, &types.ConflictException{Message: aws.String("Schedule " + aws.ToString(in.Name) + " already exists.")}
	}
	f.schedules[k] = schedule{Group: aws.ToString(in.GroupName), Name: aws.ToString(in.Name), Description: aws.ToString(in.Description),
		Expression: aws.ToString(in.ScheduleExpression), FlexMode: string(in.FlexibleTimeWindow.Mode), State: string(in.State),
		ActionAfterCompletion: string(in.ActionAfterCompletion), Target: in.Target}
	return &scheduler.CreateScheduleOutput{ScheduleArn: aws.String("arn:aws:scheduler:::schedule/" + k)}, nil
}

func (f *fake) UpdateSchedule(_ context.Context, in *scheduler.UpdateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "update")
	if f.fail != nil {
		return nil, f.fail
	}
	k := key(in.GroupName, in.Name)
	if _, ok := f.schedules[k]; !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Schedule " + aws.ToString(in.Name) + " does not exist.")}
	}
	f.schedules[k] = schedule{Group: aws.ToString(in.GroupName), Name: aws.ToString(in.Name), Description: aws.ToString(in.Description),
		Expression: aws.ToString(in.ScheduleExpression), FlexMode: string(in.FlexibleTimeWindow.Mode), State: string(in.State),
		ActionAfterCompletion: string(in.ActionAfterCompletion), Target: in.Target}
	return &scheduler.UpdateScheduleOutput{ScheduleArn: aws.String("arn:aws:scheduler:::schedule/" + k)}, nil
}

func (f *fake) DeleteSchedule(_ context.Context, in *scheduler.DeleteScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "delete")
	if f.fail != nil {
		return nil, f.fail
	}
	k := key(in.GroupName, in.Name)
	if _, ok := f.schedules[k]; !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Schedule " + aws.ToString(in.Name) + " does not exist.")}
	}
	delete(f.schedules, k)
	return &scheduler.DeleteScheduleOutput{}, nil
}

func (f *fake) get(name string) (schedule, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.schedules[group+"/"+name]
	return s, ok
}

func (f *fake) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// decodeAsWorker substitutes the placeholder as EventBridge Scheduler
// does (the format its documentation gives: 2022-03-22T18:59:43Z) and
// decodes the input as the worker does.
func decodeAsWorker(t *testing.T, input string, at time.Time) monitors.Invocation {
	t.Helper()
	if !strings.Contains(input, `"`+monitors.ScheduledTimePlaceholder+`"`) {
		t.Fatalf("input %s does not hold the literal placeholder %s in a JSON string", input, monitors.ScheduledTimePlaceholder)
	}
	delivered := strings.ReplaceAll(input, monitors.ScheduledTimePlaceholder, at.UTC().Format("2006-01-02T15:04:05Z"))
	var inv monitors.Invocation
	dec := json.NewDecoder(strings.NewReader(delivered))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&inv); err != nil {
		t.Fatalf("the worker cannot decode %s: %v", delivered, err)
	}
	return inv
}

func TestScheduleCreatesThenReplaces(t *testing.T) {
	f := newFake()
	s := awsscheduler.New(f, group, role, target)
	ctx := context.Background()
	m := monitor("mon_01jb2c3d4e", 15, store.MonitorActive)
	if err := s.Schedule(ctx, m); err != nil {
		t.Fatal(err)
	}
	if c := f.takeCalls(); strings.Join(c, ",") != "update,create" {
		t.Errorf("calls %v, want update then create", c)
	}
	got, ok := f.get(m.ID)
	if !ok {
		t.Fatal("no schedule")
	}
	if got.Group != group || got.Expression != "rate(15 minutes)" || got.FlexMode != "OFF" || got.State != "ENABLED" ||
		got.ActionAfterCompletion != "NONE" {
		t.Errorf("schedule %+v", got)
	}
	tg := got.Target
	if aws.ToString(tg.Arn) != target || aws.ToString(tg.RoleArn) != role {
		t.Errorf("target %s role %s", aws.ToString(tg.Arn), aws.ToString(tg.RoleArn))
	}
	if tg.RetryPolicy == nil || aws.ToInt32(tg.RetryPolicy.MaximumRetryAttempts) != awsscheduler.MaxRetryAttempts ||
		aws.ToInt32(tg.RetryPolicy.MaximumEventAgeInSeconds) != 15*60 {
		t.Errorf("retry policy %+v", tg.RetryPolicy)
	}
	if strings.Contains(got.Description, m.Name) || strings.Contains(got.Description, "acme") || !strings.Contains(got.Description, m.ID) {
		t.Errorf("description %q: names the monitor's id, never its name or parameters", got.Description)
	}
	at := time.Date(2022, 3, 22, 18, 59, 43, 0, time.UTC)
	inv := decodeAsWorker(t, aws.ToString(tg.Input), at)
	if r := inv.MonitorRun; r == nil || r.AccountID != m.AccountID || r.MonitorID != m.ID || !r.ScheduledAt.Equal(at) {
		t.Errorf("decoded %+v", r)
	}
	if want := `{"monitor_run":{"account_id":"acct_01","monitor_id":"mon_01jb2c3d4e","scheduled_at":"<aws.scheduler.scheduled-time>"}}`; aws.ToString(tg.Input) != want {
		t.Errorf("input %s, want %s", aws.ToString(tg.Input), want)
	}

	// Paused, then a new interval: the same schedule, replaced.
	m.State, m.PausedReason = store.MonitorPaused, store.PausedByUser
	if err := s.Schedule(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.get(m.ID); got.State != "DISABLED" || got.Expression != "rate(15 minutes)" {
		t.Errorf("paused: %+v", got)
	}
	m.State, m.IntervalMinutes = store.MonitorActive, 60
	if err := s.Schedule(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.get(m.ID); got.State != "ENABLED" || got.Expression != "rate(1 hour)" || aws.ToInt32(got.Target.RetryPolicy.MaximumEventAgeInSeconds) != 3600 {
		t.Errorf("resumed hourly: %+v", got)
	}
	if c := f.takeCalls(); strings.Join(c, ",") != "update,update" {
		t.Errorf("calls %v, want one update each", c)
	}
	// The same monitor again leaves the same schedule.
	before, _ := f.get(m.ID)
	if err := s.Schedule(ctx, m); err != nil {
		t.Fatal(err)
	}
	if after, _ := f.get(m.ID); after.Expression != before.Expression || after.State != before.State ||
		aws.ToString(after.Target.Input) != aws.ToString(before.Target.Input) {
		t.Errorf("scheduling twice changed %+v into %+v", before, after)
	}
}

// A create that finds the schedule made meanwhile (two requests at once)
// replaces it rather than failing.
func TestScheduleRaceWithAnotherCreate(t *testing.T) {
	f := newFake()
	f.raceCreate = true
	s := awsscheduler.New(f, group, role, target)
	m := monitor("mon_race", 5, store.MonitorActive)
	if err := s.Schedule(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if c := f.takeCalls(); strings.Join(c, ",") != "update,create,update" {
		t.Errorf("calls %v", c)
	}
	if got, _ := f.get(m.ID); got.Expression != "rate(5 minutes)" || got.Name != m.ID {
		t.Errorf("schedule %+v, want ours", got)
	}
}

func TestUnschedule(t *testing.T) {
	f := newFake()
	s := awsscheduler.New(f, group, role, target)
	ctx := context.Background()
	m := monitor("mon_gone", 1, store.MonitorActive)
	if err := s.Schedule(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.get(m.ID); got.Expression != "rate(1 minute)" || aws.ToInt32(got.Target.RetryPolicy.MaximumEventAgeInSeconds) != 60 {
		t.Errorf("every minute: %+v", got)
	}
	for range 2 { // the second finds nothing: not an error
		if err := s.Unschedule(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := f.get(m.ID); ok {
		t.Error("schedule still there")
	}
}

func TestErrors(t *testing.T) {
	f := newFake()
	s := awsscheduler.New(f, group, role, target)
	ctx := context.Background()
	for name, m := range map[string]store.Monitor{
		"empty id":       monitor("", 5, store.MonitorActive),
		"id too long":    monitor(strings.Repeat("m", 65), 5, store.MonitorActive),
		"id with slash":  monitor("mon/1", 5, store.MonitorActive),
		"no interval":    monitor("mon_1", 0, store.MonitorActive),
		"unknown state":  monitor("mon_1", 5, "deleted"),
		"no account":     func() store.Monitor { m := monitor("mon_1", 5, store.MonitorActive); m.AccountID = ""; return m }(),
		"negative every": monitor("mon_1", -5, store.MonitorActive),
	} {
		if err := s.Schedule(ctx, m); err == nil {
			t.Errorf("%s: scheduled", name)
		}
	}
	if err := s.Unschedule(ctx, monitor("a b", 5, store.MonitorActive)); err == nil {
		t.Error("unscheduled an invalid name")
	}
	if c := f.takeCalls(); len(c) != 0 {
		t.Errorf("invalid monitors reached the API: %v", c)
	}
	if err := s.Schedule(ctx, monitor(strings.Repeat("m", 64), 5, store.MonitorActive)); err != nil {
		t.Errorf("64-character id: %v", err)
	}
	f.fail = &types.ThrottlingException{Message: aws.String("Rate exceeded")}
	for op, err := range map[string]error{
		"schedule":   s.Schedule(ctx, monitor("mon_1", 5, store.MonitorActive)),
		"unschedule": s.Unschedule(ctx, monitor("mon_1", 5, store.MonitorActive)),
	} {
		var te *types.ThrottlingException
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "mon_1") {
			t.Errorf("%s: %v, want the API's error, naming the schedule", op, err)
		}
	}
}

func TestExpression(t *testing.T) {
	for minutes, want := range map[int]string{
		1: "rate(1 minute)", 2: "rate(2 minutes)", 45: "rate(45 minutes)", 59: "rate(59 minutes)",
		60: "rate(1 hour)", 90: "rate(90 minutes)", 120: "rate(2 hours)", 1380: "rate(23 hours)",
		1440: "rate(1 day)", 2880: "rate(2 days)", 1500: "rate(25 hours)",
	} {
		if got, err := awsscheduler.Expression(minutes); err != nil || got != want {
			t.Errorf("Expression(%d) = %q, %v; want %q", minutes, got, err, want)
		}
	}
	for _, bad := range []int{0, -1} {
		if _, err := awsscheduler.Expression(bad); err == nil {
			t.Errorf("Expression(%d) accepted", bad)
		}
	}
	for minutes, want := range map[int]int32{1: 60, 5: 300, 1440: 86400, 2880: 86400} {
		if got := awsscheduler.EventAge(minutes); got != want {
			t.Errorf("EventAge(%d) = %d, want %d", minutes, got, want)
		}
	}
}

// An account id with characters JSON escapes still decodes, and the
// placeholder stays literal.
func TestInputEscaping(t *testing.T) {
	m := monitor("mon_1", 5, store.MonitorActive)
	m.AccountID = `acct "<&>"`
	in, err := awsscheduler.Input(m)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if r := decodeAsWorker(t, in, at).MonitorRun; r.AccountID != m.AccountID || !r.ScheduledAt.Equal(at) {
		t.Errorf("decoded %+v", r)
	}
}

// restScheduler is EventBridge Scheduler's REST API for the three
// operations, enough for the real SDK client (NewFromEnv) to talk to.
type restScheduler struct {
	mu        sync.Mutex
	schedules map[string]map[string]any // group/name -> the request body
	auth      []string                  // Authorization headers seen
}

func (r *restScheduler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.auth = append(r.auth, req.Header.Get("Authorization"))
	name, ok := strings.CutPrefix(req.URL.Path, "/schedules/")
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	name, _ = url.PathUnescape(name)
	body, _ := io.ReadAll(req.Body)
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	g, _ := in["GroupName"].(string)
	if req.Method == http.MethodDelete {
		g = req.URL.Query().Get("groupName")
	}
	k := g + "/" + name
	fail := func(code int, typ string) {
		w.Header().Set("X-Amzn-Errortype", typ)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"Message": typ + " for " + k})
	}
	_, exists := r.schedules[k]
	switch req.Method {
	case http.MethodPost:
		if exists {
			fail(http.StatusConflict, "ConflictException")
			return
		}
		r.schedules[k] = in
	case http.MethodPut:
		if !exists {
			fail(http.StatusNotFound, "ResourceNotFoundException")
			return
		}
		r.schedules[k] = in
	case http.MethodDelete:
		if !exists {
			fail(http.StatusNotFound, "ResourceNotFoundException")
			return
		}
		delete(r.schedules, k)
		_, _ = w.Write([]byte("{}"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"ScheduleArn": "arn:aws:scheduler:us-east-1:123456789012:schedule/" + k})
}

func awsEnv(t *testing.T, endpoint string) {
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOCALTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local-secret-never-shown")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_MAX_ATTEMPTS", "1") // the failure below, at once
}

// NewFromEnv builds the real SDK client: the requests it sends are the
// REST API's, its errors are the typed exceptions Schedule and Unschedule
// handle, and no error carries the credentials.
func TestNewFromEnvWithTheSDK(t *testing.T) {
	rest := &restScheduler{schedules: map[string]map[string]any{}}
	srv := httptest.NewServer(rest)
	defer srv.Close()
	awsEnv(t, srv.URL)
	ctx := context.Background()

	t.Setenv(monitors.EnvSchedulerGroup, "")
	if s, err := awsscheduler.NewFromEnv(ctx); s != nil || err != nil {
		t.Fatalf("no group: %v, %v; want nil, nil", s, err)
	}
	t.Setenv(monitors.EnvSchedulerGroup, group)
	t.Setenv(monitors.EnvSchedulerRoleARN, "")
	t.Setenv(monitors.EnvSchedulerTargetARN, target)
	if _, err := awsscheduler.NewFromEnv(ctx); err == nil || !strings.Contains(err.Error(), monitors.EnvSchedulerRoleARN) {
		t.Errorf("group without role: %v", err)
	}
	t.Setenv(monitors.EnvSchedulerRoleARN, role)
	s, err := awsscheduler.NewFromEnv(ctx)
	if err != nil || s == nil {
		t.Fatalf("NewFromEnv: %v", err)
	}
	if s.Group() != group {
		t.Errorf("group %q", s.Group())
	}
	m := monitor("mon_sdk.1-a", 30, store.MonitorActive)
	for range 2 {
		if err := s.Schedule(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	rest.mu.Lock()
	got := rest.schedules[group+"/"+m.ID]
	rest.mu.Unlock()
	tg, _ := got["Target"].(map[string]any)
	if got["ScheduleExpression"] != "rate(30 minutes)" || got["State"] != "ENABLED" || got["ActionAfterCompletion"] != "NONE" ||
		canonicalJSON(t, got["FlexibleTimeWindow"]) != `{"Mode":"OFF"}` || tg["Arn"] != target || tg["RoleArn"] != role ||
		canonicalJSON(t, tg["RetryPolicy"]) != `{"MaximumEventAgeInSeconds":1800,"MaximumRetryAttempts":3}` {
		t.Errorf("schedule sent: %s", canonicalJSON(t, got))
	}
	input, _ := tg["Input"].(string)
	at := time.Date(2024, 2, 29, 23, 30, 0, 0, time.UTC)
	if r := decodeAsWorker(t, input, at).MonitorRun; r.MonitorID != m.ID || !r.ScheduledAt.Equal(at) {
		t.Errorf("decoded %+v", r)
	}
	for range 2 {
		if err := s.Unschedule(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	rest.mu.Lock()
	n := len(rest.schedules)
	signed := len(rest.auth) > 0 && strings.Contains(rest.auth[0], "AKIDLOCALTEST")
	rest.mu.Unlock()
	if n != 0 {
		t.Errorf("%d schedules left", n)
	}
	if !signed {
		t.Error("requests not signed with the environment's credentials")
	}

	// A failing API: the error names the schedule, never the credentials.
	srv.Close()
	err = s.Schedule(ctx, m)
	if err == nil {
		t.Fatal("no error from a closed endpoint")
	}
	if msg := err.Error(); strings.Contains(msg, "local-secret-never-shown") || strings.Contains(msg, "AKIDLOCALTEST") || !strings.Contains(msg, m.ID) {
		t.Errorf("error %q", msg)
	}
}

func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
