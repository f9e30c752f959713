package stack_test

// The policies are written from reading shared/store/dynamostore; this test
// checks them against what the code does, both ways. Each function's real
// handler (app.Function, the same wiring as in Lambda) runs a set of
// requests of its family against DynamoDB Local through a client that
// records every DynamoDB call (transactions split into the item actions
// IAM checks), and the worker applies the messages they emitted and runs
// its sweep. Every recorded action must be one the function's policy
// grants, and every granted action must be recorded, except those listed
// in unexercised with the reason the replay cannot reach them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/meridian-data/meridian/infra/stack"
	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	canarycontract "github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/gateway"
	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore"
	"github.com/meridian-data/meridian/shared/usage"
)

// unexercised lists, per function, the granted table actions the replay
// does not reach, each with its reason. Anything else granted and unused
// fails the test (exercise it, list it here, or take it out of the policy);
// an action listed here that the replay does use fails too.
var unexercised = map[string]map[string]string{
	"sandbox": {
		"dynamodb:GetItem": "every sandbox call is admitted with its authentication (one UpdateItem); GetItem completes a key " +
			"hash record written before records carried the key's status (an older deployment's), which the replay's new keys are not",
	},
	stack.WorkerName: {
		"dynamodb:DeleteItem": "RecordUsage deletes a batch's marks only when a counter update after them " +
			"fails (so a redelivery counts the events): an error path that needs DynamoDB to fail mid-call " +
			"(shared/store/dynamostore's usage tests inject that failure)",
	},
}

// recorder collects the IAM actions of the DynamoDB calls a client makes.
type recorder struct {
	mu           sync.Mutex
	table, index map[string]bool
}

func newRecorder() *recorder { return &recorder{table: map[string]bool{}, index: map[string]bool{}} }

func (r *recorder) add(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("meridian-record-actions",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			r.record(awsmiddleware.GetOperationName(ctx), in.Parameters)
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

func (r *recorder) record(op string, params any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch p := params.(type) {
	case *dynamodb.TransactWriteItemsInput:
		// IAM authorizes each item as the single-item action it stands for.
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				r.table["dynamodb:PutItem"] = true
			case it.Update != nil:
				r.table["dynamodb:UpdateItem"] = true
			case it.Delete != nil:
				r.table["dynamodb:DeleteItem"] = true
			case it.ConditionCheck != nil:
				r.table["dynamodb:ConditionCheckItem"] = true
			}
		}
	case *dynamodb.TransactGetItemsInput:
		r.table["dynamodb:GetItem"] = true
	case *dynamodb.QueryInput:
		if p.IndexName != nil {
			r.index["dynamodb:Query"] = true
		} else {
			r.table["dynamodb:Query"] = true
		}
	case *dynamodb.ScanInput:
		if p.IndexName != nil {
			r.index["dynamodb:Scan"] = true
		} else {
			r.table["dynamodb:Scan"] = true
		}
	default:
		r.table["dynamodb:"+op] = true
	}
}

func (r *recorder) actions() (table, index []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a := range r.table {
		table = append(table, a)
	}
	for a := range r.index {
		index = append(index, a)
	}
	sort.Strings(table)
	sort.Strings(index)
	return table, index
}

// fixture is one DynamoDB Local table, with an unrecorded store for setup.
type fixture struct {
	endpoint, table string
	plain           *dynamostore.Store
}

func (f *fixture) client(rec *recorder) *dynamodb.Client {
	opts := dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(f.endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
	}
	if rec != nil {
		opts.APIOptions = append(opts.APIOptions, rec.add)
	}
	return dynamodb.New(opts)
}

// repoRoot is the directory holding cdk.json.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "cdk.json")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no cdk.json above the working directory")
		}
		dir = parent
	}
}

// dynamoEndpoint is MERIDIAN_DYNAMODB_ENDPOINT (make test sets it), or the
// emulator scripts/dynamodb-local.sh runs (started and left running, as
// the root module's tests do).
func dynamoEndpoint(t *testing.T) string {
	t.Helper()
	if e := os.Getenv("MERIDIAN_DYNAMODB_ENDPOINT"); e != "" {
		return e
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(repoRoot(t), "scripts", "dynamodb-local.sh"), "start")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("DynamoDB Local: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tenant is what a table holds for the replay: an account with credits and
// its first key, and a broke account (no credits) with its own key.
type tenant struct {
	acct         store.Account
	k            store.Key
	key, console string
	brokeKey     string
}

func (f *fixture) seed(t *testing.T) tenant {
	t.Helper()
	ctx := context.Background()
	var ten tenant
	var err error
	if ten.acct, ten.console, err = auth.CreateAccount(ctx, f.plain, 100_000, "req_setup"); err != nil {
		t.Fatal(err)
	}
	ten.key, ten.k = auth.NewKey(ten.acct.ID, "infra-test", nil)
	if ten.k, err = f.plain.CreateFirstKey(ctx, ten.k); err != nil {
		t.Fatal(err)
	}
	broke, _, err := auth.CreateAccount(ctx, f.plain, 0, "req_setup_broke")
	if err != nil {
		t.Fatal(err)
	}
	var bk store.Key
	ten.brokeKey, bk = auth.NewKey(broke.ID, "infra-test-broke", nil)
	if _, err = f.plain.CreateFirstKey(ctx, bk); err != nil {
		t.Fatal(err)
	}
	return ten
}

// compareGrants fails on an action used and not granted, and on one
// granted and neither used nor listed in unexercised. The leases index
// must be used exactly as granted.
func compareGrants(t *testing.T, fn string, rec *recorder) {
	t.Helper()
	got, gotIndex := rec.actions()
	want, wantIndex := stack.TableActions(fn)
	for _, a := range got {
		if !slices.Contains(want, a) {
			t.Errorf("%s called %s, which its policy does not grant (granted: %v)", fn, a, want)
		}
	}
	for _, a := range want {
		reason, listed := unexercised[fn][a]
		switch used := slices.Contains(got, a); {
		case used && listed:
			t.Errorf("%s used %s, listed as unexercised (%s): take it off the list", fn, a, reason)
		case !used && !listed:
			t.Errorf("%s's policy grants %s, which the replay never used: exercise it, list it in unexercised "+
				"with the reason, or take it out of the policy", fn, a)
		}
	}
	for a := range unexercised[fn] {
		if !slices.Contains(want, a) {
			t.Errorf("%s: unexercised lists %s, which its policy does not grant", fn, a)
		}
	}
	if !equalStrings(gotIndex, wantIndex) {
		t.Errorf("%s used %v on the leases index, its policy grants %v", fn, gotIndex, wantIndex)
	}
	t.Logf("%s used %v (index %v); granted %v (index %v)", fn, got, gotIndex, want, wantIndex)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{endpoint: dynamoEndpoint(t), table: fmt.Sprintf("meridian-infra-%d", time.Now().UnixNano())}
	c := f.client(nil)
	if err := dynamostore.CreateTable(context.Background(), c, f.table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(f.table)})
	})
	f.plain = dynamostore.New(c, f.table)
	return f
}

// requireAllowanceCounters fails unless the replay took allowance units
// (TakeAllowance wrote a counter), so its UpdateItem was checked above.
func (f *fixture) requireAllowanceCounters(t *testing.T) {
	t.Helper()
	out, err := f.client(nil).Scan(context.Background(), &dynamodb.ScanInput{
		TableName:                 aws.String(f.table),
		FilterExpression:          aws.String("begins_with(pk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "allowance#"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count == 0 {
		t.Error("no allowance counter was written: the replay never took an allowance unit")
	}
}

// capturingQueue keeps what it is sent; it refuses the first send, so the
// emitter also writes and later drains the outbox.
type capturingQueue struct {
	mu      sync.Mutex
	refused atomic.Bool
	msgs    []queue.Message
}

func (q *capturingQueue) Send(_ context.Context, msgs []queue.Message) error {
	if q.refused.CompareAndSwap(false, true) {
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.ID
		}
		return &queue.SendError{Failed: ids, Cause: fmt.Errorf("refused once on purpose")}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, msgs...)
	return nil
}

// recordingScheduler stands in for EventBridge Scheduler (its calls need
// no table access); it counts what the pipeline asks of it.
type recordingScheduler struct {
	mu                    sync.Mutex
	scheduled, unschedule int
}

func (s *recordingScheduler) Schedule(context.Context, store.Monitor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scheduled++
	return nil
}

func (s *recordingScheduler) Unschedule(context.Context, store.Monitor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unschedule++
	return nil
}

// jobQueue keeps the web jobs it is sent, as the jobs queue would.
type jobQueue struct {
	mu   sync.Mutex
	msgs []queue.JobMessage
}

func (q *jobQueue) EnqueueJob(_ context.Context, m queue.JobMessage) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, m)
	return nil
}

func (q *jobQueue) taken() []queue.JobMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.msgs)
}

// monitorOperations are data operations a monitor may run in the replay,
// first choice first (an operation the replay cannot serve is refused at
// creation as unavailable).
var monitorOperations = []string{"company_registry/search", "code_host/profile", "qa_site/question"}

// monitorParams is the JSON of e's example parameters, as a monitor takes
// them.
func monitorParams(e *registry.Endpoint) string {
	params := map[string]string{}
	for _, p := range e.Params {
		if p.Example != "" {
			params[p.Name] = p.Example
		}
	}
	b, _ := json.Marshal(params)
	return string(b)
}

// asyncTarget is a GET of the async endpoint key with async=1.
func asyncTarget(t *testing.T, reg *registry.Registry, key string) string {
	t.Helper()
	e, ok := reg.Endpoint(key)
	if !ok || !e.Async {
		t.Fatalf("%s is not an async endpoint", key)
	}
	target, ok := exampleRequest(e, "")
	if !ok {
		t.Fatalf("%s has no example request", key)
	}
	if strings.Contains(target, "?") {
		return target + "&async=1"
	}
	return target + "?async=1"
}

// exampleRequest builds a GET of e from its declared examples.
func exampleRequest(e *registry.Endpoint, base string) (string, bool) {
	path := e.Path()
	q := url.Values{}
	for _, p := range e.Params {
		if p.Example == "" {
			if p.Required {
				return "", false
			}
			continue
		}
		if strings.Contains(path, "{"+p.Name+"}") {
			path = strings.ReplaceAll(path, "{"+p.Name+"}", url.PathEscape(p.Example))
			continue
		}
		q.Set(p.Name, p.Example)
	}
	if strings.Contains(path, "{") {
		return "", false
	}
	if base != "" {
		path = base + strings.TrimPrefix(path, "/v1")
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path, true
}

type caller struct {
	t       *testing.T
	handler http.Handler
	flush   func()
}

func (c caller) do(method, target string, body any, headers ...string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	r := httptest.NewRequest(method, target, rd)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	c.handler.ServeHTTP(w, r)
	c.flush() // as the after-invocation extension does in Lambda
	if w.Code >= 500 && w.Code != http.StatusNotImplemented && w.Code != http.StatusBadGateway && w.Code != http.StatusServiceUnavailable && w.Code != http.StatusGatewayTimeout {
		c.t.Errorf("%s %s: %d %s", method, target, w.Code, w.Body.String())
	}
	return w.Code, w.Body.Bytes()
}

func TestGrantsCoverWhatTheFunctionsDo(t *testing.T) {
	if testing.Short() {
		t.Skip("needs DynamoDB Local")
	}
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	reg := registry.Default()

	t.Setenv(app.EnvUpstreamFixtures, filepath.Join(repoRoot(t), "testdata", "upstream"))
	replayURL, stopReplay, err := app.StartReplay(logger)
	if err != nil {
		t.Fatal(err)
	}
	defer stopReplay()
	// No credentials (replay stands in), and a monthly allowance on every
	// provider, so every routed call takes a unit (TakeAllowance) under the
	// function's policy, as a limited-capacity route does in production.
	noSecrets := func(name string) (string, bool) {
		if strings.HasSuffix(name, "_ALLOWANCE") {
			return "1000000", true
		}
		return "", false
	}

	const adminToken = "op-infra-test"
	var emitted []queue.Message
	var seq atomic.Int64
	idem := func() string { return fmt.Sprintf("idem-%d", seq.Add(1)) }

	for _, family := range registry.Families {
		t.Run(string(family), func(t *testing.T) {
			// Each family on a table of its own, as a fresh deployment: the
			// response cache is shared across accounts, and entries the
			// other families wrote would answer batch items and MCP tool
			// calls for free, never reaching the paid path (Reserve,
			// Settle).
			f := newFixture(t)
			ten := f.seed(t)
			key, consoleToken := ten.key, ten.console
			rec := newRecorder()
			st := dynamostore.New(f.client(rec), f.table)
			q := &capturingQueue{}
			emitter := &usage.Emitter{Queue: q, Outbox: st, Logger: logger}
			sched, jobs := &recordingScheduler{}, &jobQueue{}
			deps := app.Deps{
				Store: st, Throttle: auth.NewThrottle(10_000),
				Upstream: app.NewUpstream(logger, noSecrets, replayURL),
				Events:   emitter, AdminToken: adminToken,
				Scheduler: sched, Jobs: jobs, MCP: mcpserver.NewSurface,
			}
			h := gateway.Local(reg.Routes(), map[registry.Family]http.Handler{family: app.New(app.Config(family, logger, deps))}, logger, "")
			c := caller{t: t, handler: h, flush: func() { _ = emitter.Flush(ctx) }}
			apiKey := []string{"x-api-key", key}
			requests := 0
			var paid *registry.Endpoint // the family's first paid endpoint that answered
			for _, e := range reg.Endpoints() {
				if e.Family != family || e.RetiredFor != "" || (e.Method != "" && e.Method != http.MethodGet) {
					continue
				}
				target, ok := exampleRequest(e, "")
				if !ok {
					continue
				}
				code, _ := c.do(http.MethodGet, target, nil, append(apiKey, "Idempotency-Key", idem())...)
				c.do(http.MethodGet, target, nil, apiKey...) // a cache hit, or the same again
				sep := "?"
				if strings.Contains(target, "?") {
					sep = "&"
				}
				c.do(http.MethodGet, target+sep+"dry_run=1", nil, apiKey...)
				requests += 3
				if paid == nil && e.Kind == registry.Data && e.Cost > 0 && code == http.StatusOK {
					paid = e
				}
			}
			if paid != nil {
				// A paid call the account cannot afford, past the cache: 402,
				// which frees its Idempotency-Key (ReleaseIdempotency). In a
				// family where every call answered (media, apps), this is
				// the only release; elsewhere an endpoint with no live source
				// (501) releases its key too.
				target, _ := exampleRequest(paid, "")
				if code, body := c.do(http.MethodGet, target, nil, "x-api-key", ten.brokeKey, "Idempotency-Key", idem(),
					"cache-control", "no-cache"); code != http.StatusPaymentRequired {
					t.Errorf("broke account: %s answered %d %s, want 402", target, code, body)
				}
			}
			switch family {
			case registry.Service:
				c.do(http.MethodGet, "/v1/credits/transactions", nil, apiKey...)
				c.do(http.MethodGet, "/v1/status", nil, apiKey...)
				c.do(http.MethodGet, "/openapi.json", nil)
				bearer := []string{"authorization", "Bearer " + consoleToken}
				c.do(http.MethodGet, "/console/overview", nil, bearer...)
				code, body := c.do(http.MethodPost, "/console/keys", map[string]any{"name": "ci", "credit_limit": 30}, bearer...)
				var created struct {
					Data struct {
						ID  string `json:"id"`
						Key struct {
							ID string `json:"id"`
						} `json:"key"`
					} `json:"data"`
					ID string `json:"id"`
				}
				_ = json.Unmarshal(body, &created)
				id := created.Data.ID
				if id == "" {
					id = created.Data.Key.ID
				}
				if id == "" {
					id = created.ID
				}
				if code == http.StatusCreated && id != "" {
					c.do(http.MethodPatch, "/console/keys/"+id, map[string]any{"name": "ci2", "credit_limit": 40}, bearer...)
					c.do(http.MethodPost, "/console/keys/"+id+"/revoke", nil, bearer...)
					c.do(http.MethodPost, "/console/keys/"+id+"/reactivate", nil, bearer...)
					c.do(http.MethodDelete, "/console/keys/"+id, nil, bearer...)
				} else {
					t.Errorf("console key not created: %d %s", code, body)
				}
				c.do(http.MethodGet, "/console/keys", nil, bearer...)
				c.do(http.MethodGet, "/console/ledger?limit=5", nil, bearer...)
				c.do(http.MethodGet, "/console/usage?days=7", nil, bearer...)
				c.do(http.MethodGet, "/console/status", nil, bearer...)
				c.do(http.MethodGet, "/console/", nil)
				c.do(http.MethodPost, "/console/session", map[string]any{"token": consoleToken})
				// The monitors API: create, list, read, pause, resume, runs, delete.
				var monitorID string
				for _, key := range monitorOperations {
					e, ok := reg.Endpoint(key)
					if !ok {
						continue
					}
					q := url.Values{"platform": {e.Platform}, "endpoint": {e.ID}, "params": {monitorParams(e)}, "interval_minutes": {"5"}}
					code, body := c.do(http.MethodPost, "/v1/monitors/create?"+q.Encode(), nil, apiKey...)
					var created struct {
						Data struct {
							ID string `json:"id"`
						} `json:"data"`
					}
					_ = json.Unmarshal(body, &created)
					if code/100 == 2 && created.Data.ID != "" {
						monitorID = created.Data.ID
						break
					}
					t.Logf("monitor of %s not created: %d %s", key, code, body)
				}
				if monitorID == "" {
					t.Fatal("no monitor created")
				}
				c.do(http.MethodGet, "/v1/monitors", nil, apiKey...)
				c.do(http.MethodGet, "/v1/monitors/"+monitorID, nil, apiKey...)
				c.do(http.MethodPost, "/v1/monitors/"+monitorID+"/pause", nil, apiKey...)
				c.do(http.MethodPost, "/v1/monitors/"+monitorID+"/resume", nil, apiKey...)
				c.do(http.MethodGet, "/v1/monitors/"+monitorID+"/runs", nil, apiKey...)
				if code, body := c.do(http.MethodPost, "/v1/monitors/"+monitorID+"/delete", nil, apiKey...); code != http.StatusOK {
					t.Errorf("monitor not deleted: %d %s", code, body)
				}
				if sched.scheduled < 3 || sched.unschedule != 1 {
					t.Errorf("the monitors API scheduled %d times and unscheduled %d, want create, pause, resume and one delete",
						sched.scheduled, sched.unschedule)
				}
				admin := []string{"x-admin-token", adminToken}
				code, body = c.do(http.MethodPost, "/admin/accounts", map[string]any{"credits": 5}, admin...)
				var account struct {
					AccountID string `json:"account_id"`
				}
				_ = json.Unmarshal(body, &account)
				if aid := account.AccountID; code == http.StatusCreated && aid != "" {
					c.do(http.MethodPost, "/admin/accounts/"+aid+"/credits", map[string]any{"amount": 10, "note": "infra test"}, admin...)
				} else {
					t.Errorf("admin account not created: %d %s", code, body)
				}
			case registry.Batch:
				var items []map[string]any
				for _, e := range reg.Endpoints() {
					if e.Kind != registry.Data || len(items) == pipeline.MaxBatchItems-1 {
						continue
					}
					if target, ok := exampleRequest(e, ""); ok && !strings.Contains(e.ID, "{") {
						u, _ := url.Parse(target)
						params := map[string]any{}
						for k, v := range u.Query() {
							params[k] = v[0]
						}
						items = append(items, map[string]any{"platform": e.Platform, "endpoint": e.ID, "params": params})
					}
				}
				// An item whose source answers 404: its failed fill releases
				// the cache key's fill marker (ReleaseFill).
				items = append(items, map[string]any{"platform": "code_host", "endpoint": "profile", "params": map[string]any{"handle": "sample-missing"}})
				c.do(http.MethodPost, "/v1/batch", map[string]any{"requests": items}, apiKey...)
			case registry.Sandbox:
				c.do(http.MethodGet, "/sandbox", nil, apiKey...)
				for _, e := range reg.Endpoints() {
					if e.Kind == registry.Data && e.RetiredFor == "" {
						if target, ok := exampleRequest(e, "/sandbox"); ok {
							c.do(http.MethodGet, target, nil, append(apiKey, "Idempotency-Key", idem())...)
						}
					}
				}
			case registry.MCP:
				mcpHeaders := append(apiKey, "accept", "application/json, text/event-stream", "content-type", "application/json")
				c.do(http.MethodPost, "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
					"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "infra-test", "version": "1"},
				}}, mcpHeaders...)
				for i, e := range reg.Endpoints() {
					if e.Kind != registry.Data || e.RetiredFor != "" {
						continue
					}
					target, ok := exampleRequest(e, "")
					if !ok {
						continue
					}
					u, _ := url.Parse(target)
					args := map[string]any{}
					for k, v := range u.Query() {
						args[k] = v[0]
					}
					c.do(http.MethodPost, "/mcp", map[string]any{"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
						"params": map[string]any{"name": mcpserver.Name(e), "arguments": args}}, mcpHeaders...)
				}
				// The monitors API's tools: create, read, pause, resume, runs, delete.
				call := func(name string, args map[string]any) map[string]any {
					_, body := c.do(http.MethodPost, "/mcp", map[string]any{"jsonrpc": "2.0", "id": name, "method": "tools/call",
						"params": map[string]any{"name": name, "arguments": args}}, mcpHeaders...)
					var out struct {
						Result struct {
							IsError           bool           `json:"isError"`
							StructuredContent map[string]any `json:"structuredContent"`
						} `json:"result"`
					}
					if err := json.Unmarshal(body, &out); err != nil || out.Result.IsError {
						t.Errorf("tool %s: %s", name, body)
					}
					return out.Result.StructuredContent
				}
				e, _ := reg.Endpoint(monitorOperations[0])
				created := call("monitors__create", map[string]any{"platform": e.Platform, "endpoint": e.ID,
					"params": monitorParams(e), "interval_minutes": 5})
				id, _ := created["id"].(string)
				if data, ok := created["data"].(map[string]any); ok && id == "" {
					id, _ = data["id"].(string)
				}
				if id == "" {
					t.Fatalf("monitors__create answered %v", created)
				}
				for _, name := range []string{"monitors__get", "monitors__pause", "monitors__resume", "monitors__runs", "monitors__delete"} {
					call(name, map[string]any{"id": id})
				}
				call("monitors", map[string]any{})
			}
			// Web jobs: each async endpoint accepted (202) by its family, then
			// read at /v1/web/jobs/{id} by the family serving that.
			for _, key := range stack.AsyncEndpoints(reg) {
				e, _ := reg.Endpoint(key)
				if e.Family != family {
					continue
				}
				// Past the cache: a cached answer is served at once, never as a job.
				code, body := c.do(http.MethodGet, asyncTarget(t, reg, key), nil, append(apiKey, "cache-control", "no-cache")...)
				if code != http.StatusAccepted {
					t.Errorf("%s with async=1: %d %s", key, code, body)
				}
			}
			if jobsEndpoint, _ := reg.Endpoint(stack.JobsEndpoint); jobsEndpoint.Family == family {
				for _, m := range jobs.taken() {
					if code, body := c.do(http.MethodGet, "/v1/web/jobs/"+m.JobID, nil, apiKey...); code != http.StatusOK {
						t.Errorf("job %s: %d %s", m.JobID, code, body)
					}
				}
			}
			if _, accepts := stack.JobAcceptors(reg)[string(family)]; accepts && len(jobs.taken()) == 0 &&
				family != registry.Batch && family != registry.MCP {
				t.Errorf("%s accepted no web job", family)
			}
			if _, accepts := stack.JobAcceptors(reg)[string(family)]; !accepts && len(jobs.taken()) != 0 {
				t.Errorf("%s queued web jobs %v, but it is no job acceptor", family, jobs.taken())
			}
			if requests == 0 && family != registry.Batch && family != registry.MCP && family != registry.Sandbox {
				t.Errorf("no requests for %s", family)
			}
			// The outbox was written (the first send was refused) and drained.
			c.flush()
			compareGrants(t, string(family), rec)
			if family == registry.Commerce || family == registry.Batch || family == registry.MCP {
				f.requireAllowanceCounters(t)
			}
			q.mu.Lock()
			emitted = append(emitted, q.msgs...)
			q.mu.Unlock()
		})
	}

	t.Run(stack.WorkerName, func(t *testing.T) {
		f := newFixture(t)
		ten := f.seed(t)
		acct, k := ten.acct, ten.k
		rec := newRecorder()
		st := dynamostore.New(f.client(rec), f.table)
		w := &usage.Worker{Store: st, Outcomes: st, Outbox: st, Logger: logger}
		// Reservations to reconcile: one refunded, one settled, by message;
		// the refund is delivered again later (SQS delivers at least once),
		// which reads the balance after the refund it finds (GetItem). The
		// usage events the functions emitted are counted; their other
		// reconciliations, if any, name reservations in the families'
		// tables and find nothing here (which the worker accepts).
		msgs := append([]queue.Message{}, emitted...)
		var again queue.Message
		for i, action := range []string{usage.Refund, usage.Settle} {
			reqID := fmt.Sprintf("req_infra_%d_%d", time.Now().UnixNano(), i)
			if _, err := f.plain.Reserve(ctx, store.Charge{RequestID: reqID, AccountID: acct.ID, KeyID: k.ID, KeyPrefix: k.Prefix,
				Endpoint: "/v1/company_registry/search", Cost: 1}); err != nil {
				t.Fatal(err)
			}
			msg := usage.ReconcileMessage(usage.Reconciliation{Action: action, AccountID: acct.ID, RequestID: reqID, At: time.Now()})
			msgs = append(msgs, msg)
			if action == usage.Refund {
				again = msg
			}
		}
		if len(msgs) < 3 {
			t.Fatalf("the functions emitted %d messages", len(msgs))
		}
		ev := events.SQSEvent{}
		for _, m := range msgs {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: m.ID, Body: string(m.Encoded()), EventSource: "aws:sqs"})
		}
		for start := 0; start < len(ev.Records); start += 10 {
			end := min(start+10, len(ev.Records))
			resp, err := w.HandleSQS(ctx, events.SQSEvent{Records: ev.Records[start:end]})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Errorf("worker batch: %v, failures %v", err, resp.BatchItemFailures)
			}
		}
		resp, err := w.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: again.ID, Body: string(again.Encoded()), EventSource: "aws:sqs"}}})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Errorf("the refund delivered again: %v, failures %v", err, resp.BatchItemFailures)
		}
		// An outbox message for the scheduled run to apply.
		if err := f.plain.PutOutbox(ctx, []store.OutboxMessage{{ID: msgs[0].ID + "-outbox", Body: msgs[0].Encoded(), CreatedAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Sweep(ctx); err != nil {
			t.Errorf("sweep: %v", err)
		}

		// Monitor runs and web jobs, as app.StartWorker runs them: a
		// pipeline serving every family, applying its calls' usage events
		// itself. The monitor and the job are made through the API on the
		// unrecorded store.
		sched, jobs := &recordingScheduler{}, &jobQueue{}
		setup := app.Deps{Store: f.plain, Throttle: auth.NewThrottle(10_000), Upstream: app.NewUpstream(logger, noSecrets, replayURL),
			AdminToken: adminToken, Scheduler: sched, Jobs: jobs}
		api := app.New(app.Config("", logger, setup))
		var m store.Monitor
		for _, key := range monitorOperations {
			e, ok := reg.Endpoint(key)
			if !ok {
				continue
			}
			made, refusal := api.Monitors.Create(ctx, acct.ID, k.ID, monitors.Spec{Platform: e.Platform, Endpoint: e.ID,
				Params: monitorParams(e), IntervalMinutes: "5"})
			if refusal == nil {
				m = made
				break
			}
			t.Logf("monitor of %s not created: %v", key, refusal.Message)
		}
		if m.ID == "" {
			t.Fatal("no monitor created")
		}
		acceptor := gateway.Local(reg.Routes(), map[registry.Family]http.Handler{registry.Web: app.New(app.Config(registry.Web, logger, setup))}, logger, "")
		c := caller{t: t, handler: acceptor, flush: func() {}}
		if code, body := c.do(http.MethodGet, asyncTarget(t, reg, "web/social-profiles"), nil, "x-api-key", ten.key); code != http.StatusAccepted {
			t.Fatalf("web job not accepted: %d %s", code, body)
		}
		queued := jobs.taken()
		if len(queued) != 1 {
			t.Fatalf("queued %v", queued)
		}

		workerSched := &recordingScheduler{}
		emitter := &usage.Emitter{Queue: usage.Direct{Worker: w}, Outbox: st, Logger: logger}
		runs := app.New(app.Config("", logger, app.Deps{Store: st, Throttle: auth.NewThrottle(10_000),
			Upstream: app.NewUpstream(logger, noSecrets, replayURL), Events: emitter, Scheduler: workerSched}))
		at := time.Now().UTC().Truncate(time.Second)
		for i := range 2 { // the second run compares with the first
			rr := monitors.RunRequest{AccountID: acct.ID, MonitorID: m.ID, ScheduledAt: at.Add(time.Duration(i) * 5 * time.Minute)}
			if err := runs.RunMonitor(ctx, rr); err != nil {
				t.Errorf("monitor run %d: %v", i, err)
			}
			if err := runs.RunMonitor(ctx, rr); err != nil { // delivered again: claimed already
				t.Errorf("monitor run %d again: %v", i, err)
			}
		}
		page, err := f.plain.Runs(ctx, acct.ID, m.ID, store.RunQuery{Limit: 10}, time.Now())
		if err != nil || len(page.Runs) != 2 {
			t.Errorf("runs after two scheduled times: %d (%v)", len(page.Runs), err)
		}
		// A schedule that outlived its monitor is removed.
		if err := runs.RunMonitor(ctx, monitors.RunRequest{AccountID: acct.ID, MonitorID: "mon_gone", ScheduledAt: at}); err != nil ||
			workerSched.unschedule != 1 {
			t.Errorf("stale schedule: %v, unscheduled %d", err, workerSched.unschedule)
		}
		if err := runs.RunJob(ctx, queued[0]); err != nil {
			t.Errorf("web job: %v", err)
		}
		if err := emitter.Flush(ctx); err != nil {
			t.Errorf("usage flush: %v", err)
		}
		if j, err := f.plain.Job(ctx, acct.ID, queued[0].JobID, time.Now()); err != nil || (j.State != store.JobSucceeded && j.State != store.JobFailed) || !j.Billed {
			t.Errorf("web job after its run: %+v, %v", j, err)
		}
		compareGrants(t, stack.WorkerName, rec)
	})

	// The canary's store calls: the last runs read and the new one
	// recorded (the canary log), fair use under the operator's own name,
	// the runner's remembered resolutions, and a monthly allowance, taken
	// until spent and read, as its runner does before each attempt of a
	// provider that has one.
	t.Run(stack.CanaryName, func(t *testing.T) {
		f := newFixture(t)
		rec := newRecorder()
		st := dynamostore.New(f.client(rec), f.table)
		now := time.Now().UTC()
		if runs, err := st.CanaryRuns(ctx, 7, now); err != nil || len(runs) != 0 {
			t.Errorf("CanaryRuns before any: %v %v", runs, err)
		}
		if err := st.RecordCanaryRun(ctx, store.CanaryRun{At: now, Report: []byte("run")}); err != nil {
			t.Error(err)
		}
		if runs, err := st.CanaryRuns(ctx, 7, now); err != nil || len(runs) != 1 {
			t.Errorf("CanaryRuns after one: %v %v", runs, err)
		}
		for _, key := range []string{"company_registry/search", "company_registry/search", "code_host/profile"} {
			if _, err := st.AddFairUse(ctx, canarycontract.FairUseAccount, key, 2, now); err != nil {
				t.Errorf("AddFairUse %s: %v", key, err)
			}
		}
		memo := store.Memo{Cache: st}
		if _, ok, err := memo.Recall(ctx, "memory#infra-test#site", now); err != nil || ok {
			t.Errorf("Recall before Keep: %v %v", ok, err)
		}
		if err := memo.Keep(ctx, "memory#infra-test#site", "id-42", now, now.Add(time.Hour)); err != nil {
			t.Error(err)
		}
		if v, ok, err := memo.Recall(ctx, "memory#infra-test#site", now); err != nil || !ok || v != "id-42" {
			t.Errorf("Recall after Keep: %q %v %v", v, ok, err)
		}
		month := now.Format("2006-01")
		for i := range 3 { // the third is refused: the allowance is 2
			if _, ok, err := st.TakeAllowance(ctx, "INFRA_TEST_ALLOWANCE", month, 2, now); err != nil || ok != (i < 2) {
				t.Errorf("TakeAllowance %d: %v %v", i, ok, err)
			}
		}
		if used, err := st.AllowanceUsed(ctx, "INFRA_TEST_ALLOWANCE", month, now); err != nil || used != 2 {
			t.Errorf("AllowanceUsed %d %v", used, err)
		}
		f.requireAllowanceCounters(t)
		compareGrants(t, stack.CanaryName, rec)
	})
}
