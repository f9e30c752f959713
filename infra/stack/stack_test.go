package stack_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"

	"github.com/meridian-data/meridian/infra/stack"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store/dynamostore"
	"github.com/meridian-data/meridian/shared/upstream"
)

func stacks() map[string]*synthesized {
	return map[string]*synthesized{"dev": dev, "prod": prod, "imported-secret": imported, "streaming": streaming,
		"model-bedrock": bedrockModel, "model-profile": profileModel, "model-openai": openaiModel,
		"canary-30m": canaryCustom, "canary-off": canaryOff}
}

// Every registry route exists once, with its method and path, and its
// integration invokes its family's function (payload 2.0); /admin routes
// are IAM-authorized and no other route is; nothing else is routed.
func TestRoutesComeFromTheRegistry(t *testing.T) {
	s := dev
	routes := registry.Default().Routes()
	byKey := map[string]resource{}
	for _, r := range s.ofType("AWS::ApiGatewayV2::Route") {
		key, _ := r.Properties["RouteKey"].(string)
		if _, dup := byKey[key]; dup {
			t.Errorf("route %q declared twice", key)
		}
		byKey[key] = r
	}
	if len(byKey) != len(routes) {
		t.Errorf("%d API routes, the registry has %d", len(byKey), len(routes))
	}
	apiID, _ := s.byPath(t, "Api/Resource")
	integrations := s.ofType("AWS::ApiGatewayV2::Integration")
	permissions := s.ofType("AWS::Lambda::Permission")
	for _, rt := range routes {
		key := rt.Method + " " + rt.Path
		if rt.Path == registry.DefaultRoute {
			key = registry.DefaultRoute
		}
		r, ok := byKey[key]
		if !ok {
			t.Errorf("registry route %q has no API route", key)
			continue
		}
		if ref(r.Properties["ApiId"]) != apiID {
			t.Errorf("%s: not on the API", key)
		}
		target := literals(r.Properties["Target"])
		var integrationID string
		if j, ok := r.Properties["Target"].(map[string]any)["Fn::Join"].([]any); ok && len(j) == 2 {
			parts, _ := j[1].([]any)
			if len(parts) == 2 && parts[0] == "integrations/" {
				integrationID = ref(parts[1])
			}
		}
		integration, ok := integrations[integrationID]
		if !ok {
			t.Errorf("%s: target %v is not an integration", key, target)
			continue
		}
		fnID := s.functionID(t, string(rt.Family))
		if got := getAtt(integration.Properties["IntegrationUri"], "Arn"); got != fnID {
			t.Errorf("%s: integration invokes %s, want the %s function %s", key, got, rt.Family, fnID)
		}
		if integration.Properties["IntegrationType"] != "AWS_PROXY" || integration.Properties["PayloadFormatVersion"] != "2.0" {
			t.Errorf("%s: integration %v/%v, want AWS_PROXY with payload 2.0", key,
				integration.Properties["IntegrationType"], integration.Properties["PayloadFormatVersion"])
		}
		auth, _ := r.Properties["AuthorizationType"].(string)
		if stack.IsAdminRoute(rt) != (auth == "AWS_IAM") {
			t.Errorf("%s: authorization %q (admin route: %v)", key, auth, stack.IsAdminRoute(rt))
		}
		// API Gateway may invoke the function for this route.
		suffix := "/*/*" + rt.Path
		if rt.Path == registry.DefaultRoute {
			suffix = "/*/*"
		}
		found := false
		for _, p := range permissions {
			lit := literals(p.Properties["SourceArn"])
			if p.Properties["Principal"] == "apigateway.amazonaws.com" && getAtt(p.Properties["FunctionName"], "Arn") == fnID &&
				len(lit) > 0 && lit[len(lit)-1] == suffix {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no permission for API Gateway to invoke the %s function", key, rt.Family)
		}
	}
	// Every family's function serves at least one route.
	for _, f := range registry.Families {
		if !slices.ContainsFunc(routes, func(r registry.Route) bool { return r.Family == f }) {
			t.Errorf("family %s has no route", f)
		}
	}
}

// The operator API is every route at /admin or under /admin/ (today ANY
// /admin and ANY /admin/{proxy+}): each is IAM-authorized in every stack,
// and no other route is. The rule is written out here, not taken from
// stack.IsAdminRoute, so a wrong IsAdminRoute fails.
func TestAdminRoutesAreIAMAuthorized(t *testing.T) {
	isAdmin := func(path string) bool { return path == "/admin" || strings.HasPrefix(path, "/admin/") }
	var admin []string
	for _, r := range registry.Default().Routes() {
		if isAdmin(r.Path) {
			admin = append(admin, r.Method+" "+r.Path)
		}
		if stack.IsAdminRoute(r) != isAdmin(r.Path) {
			t.Errorf("IsAdminRoute(%s %s) = %v", r.Method, r.Path, stack.IsAdminRoute(r))
		}
	}
	for _, want := range []string{"ANY /admin", "ANY /admin/{proxy+}"} {
		if !slices.Contains(admin, want) {
			t.Errorf("the registry has no %s route (admin routes: %v)", want, admin)
		}
	}
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			seen := 0
			for id, r := range s.ofType("AWS::ApiGatewayV2::Route") {
				key, _ := r.Properties["RouteKey"].(string)
				_, path, _ := strings.Cut(key, " ")
				auth, _ := r.Properties["AuthorizationType"].(string)
				if isAdmin(path) {
					seen++
					if auth != "AWS_IAM" {
						t.Errorf("%s (%s): authorization %q, want AWS_IAM", key, id, auth)
					}
				} else if auth != "" && auth != "NONE" {
					t.Errorf("%s: authorization %q on a public route", key, auth)
				}
			}
			if seen != len(admin) {
				t.Errorf("%d IAM-authorized admin routes in the template, the registry has %d", seen, len(admin))
			}
			// The operator policy: invoking /admin and /admin/* on the
			// $default stage, and reading the operator token; nothing else.
			_, p := s.byPath(t, "OperatorPolicy/Resource")
			secretID, _ := s.byPath(t, "AdminSecret/Resource")
			got := map[string]map[string]any{}
			for _, st := range statementsOf(p.Properties["PolicyDocument"].(map[string]any)) {
				sid, _ := st["Sid"].(string)
				got[sid] = st
				if st["Effect"] != "Allow" || st["Condition"] != nil || st["NotAction"] != nil || st["NotResource"] != nil {
					t.Errorf("operator policy statement %v", st)
				}
			}
			if len(got) != 2 {
				t.Errorf("operator policy: statements %v", got)
			}
			invoke := got[stack.SidOperatorApi]
			var ends []string
			for _, r := range invoke["Resource"].([]any) {
				lit := literals(r)
				ends = append(ends, lit[len(lit)-1])
			}
			if !equalStrings(strs(invoke["Action"]), []string{"execute-api:Invoke"}) ||
				!equalStrings(ends, []string{"/$default/*/admin", "/$default/*/admin/*"}) {
				t.Errorf("operator policy: %s is %v", stack.SidOperatorApi, invoke)
			}
			token := got[stack.SidOperatorToken]
			if !equalStrings(strs(token["Action"]), []string{"secretsmanager:GetSecretValue"}) || ref(token["Resource"]) != secretID {
				t.Errorf("operator policy: %s is %v", stack.SidOperatorToken, token)
			}
		})
	}
}

func TestAccessLogging(t *testing.T) {
	_, stage := dev.byPath(t, "ApiStage/Resource")
	if stage.Properties["StageName"] != "$default" || stage.Properties["AutoDeploy"] != true {
		t.Errorf("stage %v", stage.Properties)
	}
	als, _ := stage.Properties["AccessLogSettings"].(map[string]any)
	logsID, logs := dev.byPath(t, "ApiAccessLogs/Resource")
	if getAtt(als["DestinationArn"], "Arn") != logsID {
		t.Errorf("access logs go to %v, want %s", als["DestinationArn"], logsID)
	}
	var line map[string]string
	if err := json.Unmarshal([]byte(als["Format"].(string)), &line); err != nil {
		t.Fatalf("access log format is not JSON: %v", err)
	}
	for _, field := range []string{"requestId", "routeKey", "status", "integrationError"} {
		if line[field] == "" {
			t.Errorf("access log line lacks %s", field)
		}
	}
	for _, v := range line {
		if strings.Contains(v, "$context.path") || strings.Contains(v, "querystring") || strings.Contains(v, "header") {
			t.Errorf("access log records %s: a key sent by mistake could be logged", v)
		}
	}
	if logs.Properties["RetentionInDays"] != float64(7) {
		t.Errorf("access log retention %v", logs.Properties["RetentionInDays"])
	}
	settings, _ := stage.Properties["DefaultRouteSettings"].(map[string]any)
	if settings["ThrottlingRateLimit"] == nil || settings["ThrottlingBurstLimit"] == nil {
		t.Errorf("stage throttling %v", settings)
	}
}

// The table is exactly dynamostore.Schema, with TTL and PITR; prod adds
// deletion protection and RETAIN.
func TestTableMatchesSchema(t *testing.T) {
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			tables := s.ofType("AWS::DynamoDB::Table")
			if len(tables) != 1 {
				t.Fatalf("%d tables", len(tables))
			}
			var table resource
			for _, r := range tables {
				table = r
			}
			schema := dynamostore.Schema("ignored")
			want := map[string]any{
				"BillingMode":          string(schema.BillingMode),
				"AttributeDefinitions": schema.AttributeDefinitions,
				"KeySchema":            schema.KeySchema,
				"GlobalSecondaryIndexes": func() []map[string]any {
					var out []map[string]any
					for _, g := range schema.GlobalSecondaryIndexes {
						out = append(out, map[string]any{
							"IndexName": g.IndexName, "KeySchema": g.KeySchema,
							"Projection": map[string]any{"ProjectionType": g.Projection.ProjectionType},
						})
					}
					return out
				}(),
			}
			for field, w := range want {
				if a, b := canonical(t, table.Properties[field]), canonical(t, w); a != b {
					t.Errorf("%s:\n got %s\nwant %s", field, a, b)
				}
			}
			if table.Properties["ProvisionedThroughput"] != nil {
				t.Error("table has provisioned throughput")
			}
			ttl, _ := table.Properties["TimeToLiveSpecification"].(map[string]any)
			if ttl["AttributeName"] != dynamostore.AttrExpiresAt || ttl["Enabled"] != true {
				t.Errorf("TTL %v, want %s enabled", ttl, dynamostore.AttrExpiresAt)
			}
			pitr, _ := table.Properties["PointInTimeRecoverySpecification"].(map[string]any)
			if pitr["PointInTimeRecoveryEnabled"] != true {
				t.Errorf("PITR %v", pitr)
			}
			prod := s.m.Config.Prod
			if table.Properties["DeletionProtectionEnabled"] != prod {
				t.Errorf("deletion protection %v in %s", table.Properties["DeletionProtectionEnabled"], name)
			}
			policy := map[bool]string{true: "Retain", false: "Delete"}[prod]
			if table.DeletionPolicy != policy || table.UpdateReplacePolicy != policy {
				t.Errorf("deletion policy %s/%s in %s, want %s", table.DeletionPolicy, table.UpdateReplacePolicy, name, policy)
			}
		})
	}
}

// canonical renders a value as JSON with the SDK's field names (which are
// CloudFormation's), for comparison.
func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

func TestQueueHasDeadLetterQueue(t *testing.T) {
	checkQueuePair(t, dev, "", stack.MaxReceiveCount)
}

// checkQueuePair checks <prefix>Queue and <prefix>DeadLetterQueue:
// redrive after maxReceives, encrypted, 14 days, SSL-only, and a
// visibility of six times the worker's timeout.
func checkQueuePair(t *testing.T, s *synthesized, prefix string, maxReceives int) {
	t.Helper()
	qID, q := s.byPath(t, prefix+"Queue/Resource")
	dlqID, dlq := s.byPath(t, prefix+"DeadLetterQueue/Resource")
	redrive, _ := q.Properties["RedrivePolicy"].(map[string]any)
	if getAtt(redrive["deadLetterTargetArn"], "Arn") != dlqID || redrive["maxReceiveCount"] != float64(maxReceives) {
		t.Errorf("redrive policy %v", redrive)
	}
	for id, r := range map[string]resource{qID: q, dlqID: dlq} {
		if r.Properties["SqsManagedSseEnabled"] != true {
			t.Errorf("%s: not encrypted", id)
		}
		if r.Properties["MessageRetentionPeriod"] != float64(14*24*3600) {
			t.Errorf("%s: retention %v", id, r.Properties["MessageRetentionPeriod"])
		}
		// SSL only.
		assertNoPanic(t, id+" SSL-only policy", func() {
			s.assertion.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), &map[string]any{
				"Queues": []any{map[string]any{"Ref": id}},
				"PolicyDocument": assertions.Match_ObjectLike(&map[string]any{
					"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
						"Effect": "Deny", "Action": "sqs:*",
						"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
					})}),
				}),
			})
		})
	}
	if q.Properties["VisibilityTimeout"] != float64(6*stack.WorkerTimeout.Seconds()) {
		t.Errorf("visibility timeout %v", q.Properties["VisibilityTimeout"])
	}
}

// The queues and their DLQs hold reconciliations (pending refunds) and
// jobs (held reservations), the schedule group the monitors' schedules:
// retained with the stack in prod, deleted with it in dev.
func TestQueuesRetainedInProd(t *testing.T) {
	for name, s := range stacks() {
		want := map[bool]string{true: "Retain", false: "Delete"}[s.m.Config.Prod]
		for _, path := range []string{"Queue/Resource", "DeadLetterQueue/Resource", "JobsQueue/Resource", "JobsDeadLetterQueue/Resource", "SchedulerGroup"} {
			id, q := s.byPath(t, path)
			if q.DeletionPolicy != want || q.UpdateReplacePolicy != want {
				t.Errorf("%s: %s (%s) deletion policy %q/%q, want %s", name, path, id, q.DeletionPolicy, q.UpdateReplacePolicy, want)
			}
		}
	}
	if !prod.m.Config.Prod || dev.m.Config.Prod {
		t.Fatal("the prod stack is not prod")
	}
}

// The worker's event source mappings: the usage queue in batches of 10
// and the jobs queue one job at a time, both with partial batch responses,
// bounded pollers, and created after the worker's policy.
func TestWorkerEventSourceMapping(t *testing.T) {
	s := dev
	qID, _ := s.byPath(t, "Queue/Resource")
	jobsID, _ := s.byPath(t, "JobsQueue/Resource")
	esms := s.ofType("AWS::Lambda::EventSourceMapping")
	if len(esms) != 2 {
		t.Fatalf("%d event source mappings, want the usage and the jobs queue's", len(esms))
	}
	batch := map[string]float64{}
	for _, e := range esms {
		if ref(e.Properties["FunctionName"]) != s.functionID(t, stack.WorkerName) {
			t.Errorf("mapping targets %v", e.Properties["FunctionName"])
		}
		source := getAtt(e.Properties["EventSourceArn"], "Arn")
		size, _ := e.Properties["BatchSize"].(float64)
		batch[source] = size
		if !equalStrings(strs(e.Properties["FunctionResponseTypes"]), []string{"ReportBatchItemFailures"}) {
			t.Errorf("mapping does not report batch item failures: %v", e.Properties["FunctionResponseTypes"])
		}
		sc, _ := e.Properties["ScalingConfig"].(map[string]any)
		if sc["MaximumConcurrency"] != float64(s.m.Config.WorkerMaxConcurrency) {
			t.Errorf("maximum concurrency %v", sc)
		}
		policyID, _ := s.byPath(t, "WorkerRole/DefaultPolicy/Resource")
		if !slices.Contains(e.DependsOn, policyID) {
			t.Errorf("mapping does not wait for the worker's policy: %v", e.DependsOn)
		}
	}
	if want := map[string]float64{qID: 10, jobsID: stack.JobsBatchSize}; canonical(t, batch) != canonical(t, want) || stack.JobsBatchSize != 1 {
		t.Errorf("mappings (queue: batch size) %v, want %v", batch, want)
	}
	// The scheduled sweep: an EventBridge rule every minute to the worker.
	rules := s.ofType("AWS::Events::Rule")
	if len(rules) != 1 {
		t.Fatalf("%d rules", len(rules))
	}
	for _, r := range rules {
		if r.Properties["ScheduleExpression"] != "rate(1 minute)" {
			t.Errorf("schedule %v", r.Properties["ScheduleExpression"])
		}
		targets, _ := r.Properties["Targets"].([]any)
		if len(targets) != 1 || getAtt(targets[0].(map[string]any)["Arn"], "Arn") != s.functionID(t, stack.WorkerName) {
			t.Errorf("rule targets %v", targets)
		}
	}
}

// Functions: provided.al2023 on arm64 from build/<name>, memory and
// timeouts as declared, JSON logs into their own log group with
// retention, the environment the app reads.
func TestFunctions(t *testing.T) {
	for name, s := range map[string]*synthesized{"dev": dev, "prod": prod, "streaming": streaming} {
		t.Run(name, func(t *testing.T) {
			fns := s.ofType("AWS::Lambda::Function")
			if len(fns) != len(stack.Functions()) {
				t.Errorf("%d functions, want %d", len(fns), len(stack.Functions()))
			}
			readers := stack.SecretReaders(registry.Default())
			adminReaders := stack.AdminSecretReaders(registry.Default())
			adminSecretID, _ := s.byPath(t, "AdminSecret/Resource")
			for _, fn := range stack.Functions() {
				id := s.functionID(t, fn)
				p := s.template.Resources[id].Properties
				if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" ||
					!equalStrings(strs(p["Architectures"]), []string{"arm64"}) {
					t.Errorf("%s: runtime %v handler %v architectures %v", fn, p["Runtime"], p["Handler"], p["Architectures"])
				}
				if p["MemorySize"] != float64(stack.Memory(fn)) || p["Timeout"] != stack.Timeout(fn).Seconds() {
					t.Errorf("%s: memory %v timeout %v", fn, p["MemorySize"], p["Timeout"])
				}
				if fn != stack.WorkerName && p["Timeout"].(float64) <= upstream.DefaultTimeout.Seconds() {
					t.Errorf("%s: timeout %v is not above the adapter budget", fn, p["Timeout"])
				}
				lc, _ := p["LoggingConfig"].(map[string]any)
				logsID, logs := s.byPath(t, fnConstruct(fn)+"Logs/Resource")
				if lc["LogFormat"] != "JSON" || ref(lc["LogGroup"]) != logsID {
					t.Errorf("%s: logging %v", fn, lc)
				}
				retention := map[bool]float64{false: 7, true: 90}[s.m.Config.Prod]
				if logs.Properties["RetentionInDays"] != retention {
					t.Errorf("%s: log retention %v", fn, logs.Properties["RetentionInDays"])
				}
				env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
				tableID, _ := s.byPath(t, "Table/Resource")
				queueID, _ := s.byPath(t, "Queue/Resource")
				if ref(env["MERIDIAN_TABLE"]) != tableID || env["MERIDIAN_LOG_LEVEL"] != "info" {
					t.Errorf("%s: environment %v", fn, env)
				}
				// The API functions send usage events; the worker only
				// consumes; the canary's calls are never billed.
				if q, has := env["MERIDIAN_QUEUE_URL"]; has != (fn != stack.WorkerName && fn != stack.CanaryName) || (has && ref(q) != queueID) {
					t.Errorf("%s: MERIDIAN_QUEUE_URL %v", fn, q)
				}
				// The job acceptors send web jobs (written out, not taken
				// from JobAcceptors); the worker consumes the jobs queue.
				jobsID, _ := s.byPath(t, "JobsQueue/Resource")
				acceptor := slices.Contains(jobAcceptors, fn)
				if q, has := env["MERIDIAN_JOBS_QUEUE_URL"]; has != acceptor || (has && ref(q) != jobsID) {
					t.Errorf("%s: MERIDIAN_JOBS_QUEUE_URL %v", fn, q)
				}
				// The scheduler's environment: on the monitors API's functions
				// (service, and mcp, whose tools include it) and the worker only.
				groupID, _ := s.byPath(t, "SchedulerGroup")
				schedulerRoleID, _ := s.byPath(t, "SchedulerRole/Resource")
				schedules := slices.Contains(monitorSchedulers, fn)
				for _, v := range []string{"MERIDIAN_SCHEDULER_GROUP", "MERIDIAN_SCHEDULER_ROLE_ARN", "MERIDIAN_SCHEDULER_TARGET_ARN"} {
					if _, has := env[v]; has != schedules {
						t.Errorf("%s: %s set %v", fn, v, has)
					}
				}
				if schedules {
					workerName := "Meridian-" + s.m.Config.Stage + "-worker"
					if ref(env["MERIDIAN_SCHEDULER_GROUP"]) != groupID || getAtt(env["MERIDIAN_SCHEDULER_ROLE_ARN"], "Arn") != schedulerRoleID ||
						arnText(t, env["MERIDIAN_SCHEDULER_TARGET_ARN"]) != "arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:"+workerName {
						t.Errorf("%s: scheduler environment %s", fn, canonical(t, env))
					}
				}
				if name, _ := p["FunctionName"].(string); (fn == stack.WorkerName) != (name != "") ||
					(fn == stack.WorkerName && name != stack.WorkerFunctionName(s.m.Config.Stage)) {
					t.Errorf("%s: function name %q", fn, name)
				}
				_, reads := readers[fn]
				if _, has := env["MERIDIAN_UPSTREAM_SECRET"]; has != reads {
					t.Errorf("%s: MERIDIAN_UPSTREAM_SECRET set %v, reads the secret %v", fn, has, reads)
				}
				// The operator secret: on service only (written out, not
				// taken from AdminSecretReaders).
				if v, has := env["MERIDIAN_ADMIN_SECRET"]; has != (fn == "service") || (has && ref(v) != adminSecretID) {
					t.Errorf("%s: MERIDIAN_ADMIN_SECRET %v", fn, v)
				}
				if _, has := adminReaders[fn]; has != (fn == "service") {
					t.Errorf("%s: admin secret reader %v", fn, has)
				}
				if _, has := env["MERIDIAN_ADMIN_TOKEN"]; has {
					t.Errorf("%s: the operator token in plain environment", fn)
				}
				want, reserved := s.m.Config.ReservedConcurrency[fn]
				got, has := p["ReservedConcurrentExecutions"]
				if has != reserved || (reserved && got != float64(want)) {
					t.Errorf("%s: reserved concurrency %v, want %v (%v)", fn, got, want, reserved)
				}
				// Its own role, with no managed policies.
				roleID, role := s.byPath(t, fnConstruct(fn)+"Role/Resource")
				if getAtt(p["Role"], "Arn") != roleID || role.Properties["ManagedPolicyArns"] != nil || role.Properties["Policies"] != nil {
					t.Errorf("%s: role %v", fn, role.Properties)
				}
			}
			// Reserved concurrency: none in dev (new accounts cannot reserve)
			// unless the streaming URLs are on (then search and mcp, small),
			// where it protects the store in prod.
			switch {
			case s.m.Config.Prod:
				for _, fn := range []string{stack.WorkerName, "batch", "search", "mcp"} {
					if _, ok := s.m.Config.ReservedConcurrency[fn]; !ok {
						t.Errorf("prod: %s has no reserved concurrency", fn)
					}
				}
			case s.m.Config.StreamingURLs:
				want := map[string]int{"search": stack.StreamingReservedConcurrency, "mcp": stack.StreamingReservedConcurrency}
				if canonical(t, s.m.Config.ReservedConcurrency) != canonical(t, want) {
					t.Errorf("dev with streaming URLs reserves %v, want %v", s.m.Config.ReservedConcurrency, want)
				}
			case len(s.m.Config.ReservedConcurrency) != 0:
				t.Errorf("dev reserves concurrency: %v", s.m.Config.ReservedConcurrency)
			}
		})
	}
}

// policyWant is one function's complete identity policy.
type policyWant struct {
	table, index, queue []string
	jobs                []string // on the jobs queue
	secret              bool     // the upstream secret
	adminSecret         bool     // the operator secret
	schedules           bool     // the monitors' schedules, and passing the scheduler role
}

var (
	tableAll     = []string{"dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}
	tableSandbox = []string{"dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}
	tableCanary  = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}
	send         = []string{"sqs:SendMessage"}
	consume      = []string{"sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"}
)

// The exact policy of every function, written out: a change to what a
// function may do shows up here.
var wantPolicies = map[string]policyWant{
	"commerce":  {table: tableAll, queue: send, secret: true},
	"social":    {table: tableAll, queue: send, secret: true},
	"media":     {table: tableAll, queue: send, secret: true},
	"apps":      {table: tableAll, queue: send},
	"places":    {table: tableAll, queue: send, secret: true},
	"knowledge": {table: tableAll, queue: send, secret: true},
	"web":       {table: tableAll, queue: send, jobs: send},
	"bundle":    {table: tableAll, queue: send, jobs: send, secret: true},
	"search":    {table: tableAll, queue: send, secret: true},
	"service":   {table: tableAll, queue: send, secret: true, adminSecret: true, schedules: true},
	"batch":     {table: tableAll, queue: send, jobs: send, secret: true},
	"sandbox":   {table: tableSandbox, queue: send},
	// mcp offers the monitors API as tools: it deletes monitors and
	// manages their schedules too.
	"mcp": {table: tableAll, queue: send, jobs: send, secret: true, schedules: true},
	// The worker consumes both queues and sends to neither (its own calls'
	// usage events are applied in process); it runs every endpoint (monitor
	// runs, web jobs), so it reads the upstream secret, and disables or
	// removes schedules.
	"worker": {table: tableAll, index: []string{"dynamodb:Query"}, queue: consume, jobs: consume, secret: true, schedules: true},
	// The canary: fair use under the operator's name, the runner's
	// remembered resolutions and monthly allowances, its own runs (Put,
	// Query on the table's key); no queue, no schedules, no operator
	// secret; the upstream secret for the sources' credentials.
	stack.CanaryName: {table: tableCanary, secret: true},
}

func TestFunctionPolicies(t *testing.T) {
	if len(wantPolicies) != len(stack.Functions()) {
		t.Fatalf("wantPolicies covers %d functions, there are %d", len(wantPolicies), len(stack.Functions()))
	}
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			tableID, _ := s.byPath(t, "Table/Resource")
			queueID, _ := s.byPath(t, "Queue/Resource")
			jobsID, _ := s.byPath(t, "JobsQueue/Resource")
			groupID, _ := s.byPath(t, "SchedulerGroup")
			schedulerRoleID, _ := s.byPath(t, "SchedulerRole/Resource")
			policies := s.ofType("AWS::IAM::Policy")
			for _, fn := range stack.Functions() {
				want := wantPolicies[fn]
				roleID, _ := s.byPath(t, fnConstruct(fn)+"Role/Resource")
				logsID, _ := s.byPath(t, fnConstruct(fn)+"Logs/Resource")
				var statements []map[string]any
				for _, p := range policies {
					for _, r := range p.Properties["Roles"].([]any) {
						if ref(r) == roleID {
							for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
								statements = append(statements, st.(map[string]any))
							}
						}
					}
				}
				got := map[string]map[string]any{}
				for _, st := range statements {
					sid, _ := st["Sid"].(string)
					if _, dup := got[sid]; dup || sid == "" {
						t.Errorf("%s: statement id %q missing or repeated", fn, sid)
					}
					// Only passing the scheduler role carries a condition (checked below).
					if st["Effect"] != "Allow" || st["NotAction"] != nil || st["NotResource"] != nil ||
						(st["Condition"] != nil && sid != stack.SidPassSchedulerRole) {
						t.Errorf("%s: unexpected statement shape %v", fn, st)
					}
					got[sid] = st
				}
				check := func(sid string, actions []string, resource func(any) bool) {
					st, ok := got[sid]
					delete(got, sid)
					if len(actions) == 0 {
						if ok {
							t.Errorf("%s: has %s %v, wants none", fn, sid, st["Action"])
						}
						return
					}
					if !ok {
						t.Errorf("%s: no %s statement", fn, sid)
						return
					}
					if !equalStrings(strs(st["Action"]), actions) {
						t.Errorf("%s: %s actions %v, want %v", fn, sid, strs(st["Action"]), actions)
					}
					if res, ok := st["Resource"].([]any); ok && len(res) != 1 {
						t.Errorf("%s: %s has %d resources", fn, sid, len(res))
					} else if !resource(st["Resource"]) {
						t.Errorf("%s: %s resource %v", fn, sid, st["Resource"])
					}
				}
				check(stack.SidLogs, []string{"logs:CreateLogStream", "logs:PutLogEvents"}, func(v any) bool {
					lit := literals(v)
					return slices.Contains(lit, ":log-group:") && lit[len(lit)-1] == ":*" &&
						strings.Contains(canonical(t, v), `{"Ref":"`+logsID+`"}`)
				})
				check(stack.SidTable, want.table, func(v any) bool { return getAtt(v, "Arn") == tableID })
				check(stack.SidLeaseIndex, want.index, func(v any) bool {
					return strings.Contains(canonical(t, v), `"`+tableID+`","Arn"`) &&
						strings.HasSuffix(strings.Join(literals(v), ""), "/index/"+dynamostore.LeaseIndex)
				})
				check(stack.SidQueue, want.queue, func(v any) bool { return getAtt(v, "Arn") == queueID })
				check(stack.SidJobsQueue, want.jobs, func(v any) bool { return getAtt(v, "Arn") == jobsID })
				// The monitors' schedules: every schedule of the group and
				// nothing else, and the scheduler role passed to EventBridge
				// Scheduler only.
				var scheduleActions, passRole []string
				if want.schedules {
					scheduleActions = []string{"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule", "scheduler:UpdateSchedule"}
					passRole = []string{"iam:PassRole"}
					if c := canonical(t, got[stack.SidPassSchedulerRole]["Condition"]); c != `{"StringEquals":{"iam:PassedToService":"scheduler.amazonaws.com"}}` {
						t.Errorf("%s: %s condition %s", fn, stack.SidPassSchedulerRole, c)
					}
				}
				check(stack.SidSchedules, scheduleActions, func(v any) bool {
					return arnText(t, v) == "arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/<"+groupID+">/*"
				})
				check(stack.SidPassSchedulerRole, passRole, func(v any) bool { return getAtt(v, "Arn") == schedulerRoleID })
				var secretActions []string
				if want.secret {
					secretActions = []string{"secretsmanager:GetSecretValue"}
				}
				check(stack.SidSecret, secretActions, func(v any) bool {
					if s.m.Config.UpstreamSecretName != "" {
						return strings.HasSuffix(strings.Join(literals(v), ""), ":secret:"+s.m.Config.UpstreamSecretName+"-??????")
					}
					secretID, _ := s.byPath(t, "UpstreamSecret/Resource")
					return ref(v) == secretID
				})
				var adminActions []string
				if want.adminSecret {
					adminActions = []string{"secretsmanager:GetSecretValue"}
				}
				adminSecretID, _ := s.byPath(t, "AdminSecret/Resource")
				check(stack.SidAdminSecret, adminActions, func(v any) bool { return ref(v) == adminSecretID })
				// The Bedrock model: on the AI endpoints' functions only, with
				// a Bedrock model configured (its resources: model_test.go).
				if st, has := got[stack.SidModel]; has != (s.m.Config.Model.Provider == stack.ModelBedrock && slices.Contains(aiFunctions, fn)) {
					t.Errorf("%s: %s statement %v", fn, stack.SidModel, st)
				}
				delete(got, stack.SidModel)
				for sid := range got {
					t.Errorf("%s: unexpected statement %s", fn, sid)
				}
			}
		})
	}
}

// The model behind the policies agrees with what the test expects.
func TestTableActionsModel(t *testing.T) {
	for _, fn := range stack.Functions() {
		table, index := stack.TableActions(fn)
		if !equalStrings(table, wantPolicies[fn].table) || !equalStrings(index, wantPolicies[fn].index) {
			t.Errorf("%s: TableActions %v %v", fn, table, index)
		}
		for _, u := range stack.TableUses(fn) {
			if u.Why == "" {
				t.Errorf("%s: table use %s has no reason", fn, u.Name)
			}
			for _, a := range append(append([]string{}, u.Actions...), u.Index...) {
				switch a {
				case "dynamodb:DescribeTable", "dynamodb:CreateTable", "dynamodb:UpdateTimeToLive", "dynamodb:Scan", "dynamodb:DeleteTable":
					t.Errorf("%s: %s is granted", fn, a)
				}
			}
		}
	}
}

// The upstream secret goes to the families serving endpoints through
// providers that read secrets, the fan-out families, and service, whose
// catalogue reports which endpoints are available (route eligibility,
// which the secret decides); nobody else.
func TestSecretReaders(t *testing.T) {
	readers := stack.SecretReaders(registry.Default())
	var got []string
	for fn, why := range readers {
		got = append(got, fn)
		if len(why) == 0 {
			t.Errorf("%s reads the secret without a reason", fn)
		}
	}
	want := []string{"commerce", "social", "media", "places", "knowledge", "bundle", "search", "service", "batch", "mcp", stack.WorkerName, stack.CanaryName}
	if !equalStrings(got, want) {
		t.Errorf("secret readers %v, want %v", got, want)
	}
	// Service serves no upstream endpoint: the catalogue is its only
	// reason; the canary calls the sources with the operator's credentials.
	if why := readers["service"]; len(why) != 1 || why[0] != stack.CatalogueSecretReason {
		t.Errorf("service reads the upstream secret for %v, want only %q", why, stack.CatalogueSecretReason)
	}
	if why := readers[stack.CanaryName]; len(why) != 1 || why[0] != stack.CanarySecretReason {
		t.Errorf("the canary reads the upstream secret for %v, want only %q", why, stack.CanarySecretReason)
	}
	for fn, why := range readers {
		t.Logf("%s: %s", fn, strings.Join(why, "; "))
	}
	if len(imported.ofType("AWS::SecretsManager::Secret")) != 1 {
		t.Error("an imported upstream secret is also created (or the operator secret is not)")
	}
	if n := len(dev.ofType("AWS::SecretsManager::Secret")); n != 2 {
		t.Errorf("dev creates %d secrets, want the upstream and the operator secret", n)
	}
	// Created holding an empty JSON object: no generated key in it.
	_, secret := dev.byPath(t, "UpstreamSecret/Resource")
	if secret.Properties["GenerateSecretString"] != nil || secret.Properties["SecretString"] != "{}" {
		t.Errorf("upstream secret %v, want SecretString {} and no generator", secret.Properties)
	}
	for _, fn := range []string{"service", "social", "commerce"} {
		id := imported.functionID(t, fn)
		env := imported.template.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		if env["MERIDIAN_UPSTREAM_SECRET"] != "meridian/dev/upstream" {
			t.Errorf("%s: imported secret env %v", fn, env["MERIDIAN_UPSTREAM_SECRET"])
		}
	}
	for _, fn := range []string{"apps", "web", "sandbox"} {
		id := dev.functionID(t, fn)
		env := dev.template.Resources[id].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		if _, has := env["MERIDIAN_UPSTREAM_SECRET"]; has {
			t.Errorf("%s reads the upstream secret: %v", fn, env)
		}
	}
}

// The operator secret: a generated plain string (no JSON), retained in
// prod, readable by the service function's role and no other role of the
// stack (the exported operator policy, attached to nothing here, lets
// operators read it too), and named to the service function only.
func TestAdminSecret(t *testing.T) {
	if got := stack.AdminSecretReaders(registry.Default()); len(got) != 1 || len(got["service"]) == 0 {
		t.Errorf("admin secret readers %v, want service only", got)
	}
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			secretID, secret := s.byPath(t, "AdminSecret/Resource")
			gen, _ := secret.Properties["GenerateSecretString"].(map[string]any)
			if gen == nil || gen["SecretStringTemplate"] != nil || gen["GenerateStringKey"] != nil ||
				gen["ExcludePunctuation"] != true || gen["PasswordLength"] != float64(stack.AdminTokenLength) {
				t.Errorf("operator secret generator %v, want a plain string of %d letters and digits", gen, stack.AdminTokenLength)
			}
			want := map[bool]string{true: "Retain", false: "Delete"}[s.m.Config.Prod]
			if secret.DeletionPolicy != want || secret.UpdateReplacePolicy != want {
				t.Errorf("operator secret deletion policy %q/%q, want %s", secret.DeletionPolicy, secret.UpdateReplacePolicy, want)
			}
			if _, ok := s.template.Outputs["AdminSecretArn"]; !ok {
				t.Error("no AdminSecretArn output")
			}
			serviceRole, _ := s.byPath(t, "ServiceRole/Resource")
			mentions := func(v any) bool { return strings.Contains(canonical(t, v), `{"Ref":"`+secretID+`"}`) }
			readers := map[string]bool{}
			for id, r := range s.template.Resources {
				switch r.Type {
				case "AWS::IAM::Policy":
					for _, st := range statementsOf(r.Properties["PolicyDocument"].(map[string]any)) {
						secretActions := slices.ContainsFunc(strs(st["Action"]), func(a string) bool { return strings.HasPrefix(a, "secretsmanager:") })
						if st["Effect"] == "Allow" && (mentions(st["Resource"]) || (secretActions && slices.Contains(literals(st["Resource"]), "*"))) {
							for _, role := range r.Properties["Roles"].([]any) {
								readers[ref(role)] = true
							}
						}
					}
				case "AWS::IAM::ManagedPolicy":
					path, _ := r.Metadata["aws:cdk:path"].(string)
					if mentions(r.Properties["PolicyDocument"]) && !strings.HasSuffix(path, "/OperatorPolicy/Resource") {
						t.Errorf("%s: managed policy %s grants the operator secret", id, path)
					}
					if mentions(r.Properties["PolicyDocument"]) && (r.Properties["Roles"] != nil || r.Properties["Users"] != nil || r.Properties["Groups"] != nil) {
						t.Errorf("%s: the operator policy is attached in the stack", id)
					}
				case "AWS::SecretsManager::ResourcePolicy":
					if mentions(r.Properties["SecretId"]) {
						t.Errorf("%s: the operator secret has a resource policy", id)
					}
				}
			}
			if len(readers) != 1 || !readers[serviceRole] {
				t.Errorf("roles that can read the operator secret: %v, want only the service role %s", readers, serviceRole)
			}
		})
	}
}

// Function URLs only with -c streamingUrls=true: none by default; with
// the flag, the streaming families get URLs with response streaming, their
// public permissions hold only through the URL, and each has reserved
// concurrency (dev included), since the URLs bypass API Gateway's
// throttling.
func TestStreamingFunctionURLs(t *testing.T) {
	want := []string{"mcp", "search"}
	if got := stack.StreamingFunctions(registry.Default()); !equalStrings(got, want) {
		t.Errorf("streaming functions %v, want %v", got, want)
	}
	for name, s := range map[string]*synthesized{"dev": dev, "prod": prod, "imported-secret": imported} {
		if s.m.Config.StreamingURLs {
			t.Fatalf("%s: streaming URLs on by default", name)
		}
		if n := len(s.ofType("AWS::Lambda::Url")); n != 0 {
			t.Errorf("%s: %d function URLs without streamingUrls", name, n)
		}
		for id, p := range s.ofType("AWS::Lambda::Permission") {
			if p.Properties["Principal"] == "*" {
				t.Errorf("%s: %s: public permission without streamingUrls", name, id)
			}
		}
		for _, out := range []string{"SearchStreamUrl", "McpStreamUrl"} {
			if _, ok := s.template.Outputs[out]; ok {
				t.Errorf("%s: output %s without streamingUrls", name, out)
			}
		}
	}

	s := streaming
	if !s.m.Config.StreamingURLs || s.m.Config.Prod {
		t.Fatal("the streaming stack is not dev with streaming URLs")
	}
	if n := len(s.ofType("AWS::Lambda::Url")); n != len(want) {
		t.Errorf("%d function URLs, want %d", n, len(want))
	}
	fnIDs := map[string]string{}
	for _, fn := range want {
		id := s.functionID(t, fn)
		fnIDs[id] = fn
		assertNoPanic(t, fn+" URL", func() {
			s.assertion.HasResourceProperties(jsii.String("AWS::Lambda::Url"), &map[string]any{
				"TargetFunctionArn": map[string]any{"Fn::GetAtt": []any{id, "Arn"}},
				"InvokeMode":        "RESPONSE_STREAM",
				"AuthType":          "NONE",
			})
		})
		if got := s.template.Resources[id].Properties["ReservedConcurrentExecutions"]; got != float64(stack.StreamingReservedConcurrency) {
			t.Errorf("%s: reserved concurrency %v, want %d", fn, got, stack.StreamingReservedConcurrency)
		}
		if _, ok := s.template.Outputs[fnConstruct(fn)+"StreamUrl"]; !ok {
			t.Errorf("no output %sStreamUrl", fnConstruct(fn))
		}
	}
	// Public invocation only through the URL: for each URL function
	// exactly lambda:InvokeFunctionUrl with FunctionUrlAuthType NONE and
	// lambda:InvokeFunction with InvokedViaFunctionUrl (Lambda requires both
	// for a public URL); no other public permission.
	public := map[string][]string{}
	for pid, p := range s.ofType("AWS::Lambda::Permission") {
		if p.Properties["Principal"] != "*" {
			continue
		}
		fnID := getAtt(p.Properties["FunctionName"], "Arn")
		fn, ok := fnIDs[fnID]
		if !ok {
			t.Errorf("%s: public permission on %s", pid, fnID)
			continue
		}
		action, _ := p.Properties["Action"].(string)
		switch action {
		case "lambda:InvokeFunctionUrl":
			if p.Properties["FunctionUrlAuthType"] != "NONE" || p.Properties["InvokedViaFunctionUrl"] != nil {
				t.Errorf("%s: %s permission %v", fn, action, p.Properties)
			}
		case "lambda:InvokeFunction":
			if p.Properties["InvokedViaFunctionUrl"] != true {
				t.Errorf("%s: %s permission not limited to the function URL: %v", fn, action, p.Properties)
			}
		default:
			t.Errorf("%s: public permission for %q", fn, action)
		}
		public[fn] = append(public[fn], action)
	}
	for _, fn := range want {
		if !equalStrings(public[fn], []string{"lambda:InvokeFunction", "lambda:InvokeFunctionUrl"}) {
			t.Errorf("%s: public permissions %v, want lambda:InvokeFunctionUrl and lambda:InvokeFunction", fn, public[fn])
		}
	}
	// Prod keeps its own larger reservations with the URLs on.
	p, _ := stack.Preset(stack.StageProd)
	p.StreamingURLs = true
	if r := p.Reservations(want); r["search"] != 50 || r["mcp"] != 50 || r[stack.WorkerName] != 20 {
		t.Errorf("prod reservations with streaming URLs %v", r)
	}
	d, _ := stack.Preset(stack.StageDev)
	if r := d.Reservations(want); len(r) != 0 {
		t.Errorf("dev reservations without streaming URLs %v", r)
	}
}

func TestAlarms(t *testing.T) {
	s := dev
	topicID, _ := s.byPath(t, "AlarmTopic/Resource")
	alarms := s.ofType("AWS::CloudWatch::Alarm")
	canaried := len(stack.CanaryOperations(registry.Default()))
	if want := 1 + 2*len(stack.Functions()) + 4 + canaried; len(alarms) != want {
		t.Errorf("%d alarms, want %d", len(alarms), want)
	}
	metrics := map[string]int{}
	for id, a := range alarms {
		actions := a.Properties["AlarmActions"].([]any)
		if len(actions) != 1 || ref(actions[0]) != topicID {
			t.Errorf("%s: actions %v", id, actions)
		}
		if name, ok := a.Properties["MetricName"].(string); ok {
			metrics[name]++
		} else {
			metrics["math"]++
			if !strings.Contains(canonical(t, a.Properties["Metrics"]), `"MetricName":"5xx"`) {
				t.Errorf("%s: math alarm is not the 5xx rate", id)
			}
		}
	}
	want := map[string]int{"math": 1, "Errors": len(stack.Functions()), "Throttles": len(stack.Functions()),
		"ApproximateNumberOfMessagesVisible": 2, "ApproximateAgeOfOldestMessage": 2, "Breach": canaried}
	if canonical(t, metrics) != canonical(t, want) {
		t.Errorf("alarms on %v, want %v", metrics, want)
	}
	// The topic is encrypted and SSL-only; prod subscribes the alarm email.
	assertNoPanic(t, "topic", func() {
		s.assertion.HasResourceProperties(jsii.String("AWS::SNS::Topic"), &map[string]any{
			"KmsMasterKeyId": assertions.Match_AnyValue(),
		})
	})
	if n := len(prod.ofType("AWS::SNS::Subscription")); n != 1 {
		t.Errorf("prod: %d subscriptions", n)
	}
}

// Every alarm can notify: each topic of its alarm and OK actions has a
// topic policy allowing CloudWatch to publish, for this account and for
// alarms whose ARN the condition matches, and the alarm's own name matches
// it. (EnforceSSL's topic policy replaces the default one: with only its
// Deny, nothing could publish.)
func TestAlarmTopicAllowsCloudWatch(t *testing.T) {
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			prefix := stack.AlarmNamePrefix(s.m.Config.Stage)
			// topic logical id -> the Allow statements of its policies
			allows := map[string][]map[string]any{}
			for _, p := range s.ofType("AWS::SNS::TopicPolicy") {
				for _, topic := range p.Properties["Topics"].([]any) {
					for _, st := range statementsOf(p.Properties["PolicyDocument"].(map[string]any)) {
						if st["Effect"] == "Allow" {
							allows[ref(topic)] = append(allows[ref(topic)], st)
						}
					}
				}
			}
			publishes := func(st map[string]any, topicID, alarmName string) bool {
				principal, _ := st["Principal"].(map[string]any)
				cond, _ := st["Condition"].(map[string]any)
				eq, _ := cond["StringEquals"].(map[string]any)
				like, _ := cond["ArnLike"].(map[string]any)
				if principal["Service"] != "cloudwatch.amazonaws.com" || !equalStrings(strs(st["Action"]), []string{"sns:Publish"}) ||
					ref(st["Resource"]) != topicID || ref(eq["aws:SourceAccount"]) != "AWS::AccountId" || len(cond) != 2 {
					return false
				}
				// arn:PARTITION:cloudwatch:REGION:ACCOUNT:alarm:PREFIX*
				j, _ := like["aws:SourceArn"].(map[string]any)["Fn::Join"].([]any)
				if len(j) != 2 {
					return false
				}
				var arn strings.Builder
				for _, part := range j[1].([]any) {
					switch v := part.(type) {
					case string:
						arn.WriteString(v)
					default:
						arn.WriteString("<" + ref(v) + ">")
					}
				}
				pattern := arn.String()
				if pattern != "arn:<AWS::Partition>:cloudwatch:<AWS::Region>:<AWS::AccountId>:alarm:"+prefix+"*" {
					return false
				}
				return strings.HasPrefix(alarmName, prefix)
			}
			alarms := s.ofType("AWS::CloudWatch::Alarm")
			if len(alarms) == 0 {
				t.Fatal("no alarms")
			}
			for id, a := range alarms {
				alarmName, _ := a.Properties["AlarmName"].(string)
				if !strings.HasPrefix(alarmName, prefix) {
					t.Errorf("%s: alarm name %q does not begin with %q", id, alarmName, prefix)
				}
				var topics []any
				for _, key := range []string{"AlarmActions", "OKActions"} {
					acts, _ := a.Properties[key].([]any)
					if len(acts) == 0 {
						t.Errorf("%s: no %s", id, key)
					}
					topics = append(topics, acts...)
				}
				for _, topic := range topics {
					topicID := ref(topic)
					if !slices.ContainsFunc(allows[topicID], func(st map[string]any) bool { return publishes(st, topicID, alarmName) }) {
						t.Errorf("%s (%s): topic %v has no Allow for CloudWatch to publish this alarm; Allow statements: %s",
							id, alarmName, topic, canonical(t, allows[topicID]))
					}
				}
			}
		})
	}
}

// No policy statement anywhere in the template has a wildcard action or
// resource (or an Allow to any principal) without a written reason.
func TestNoUnexplainedWildcards(t *testing.T) {
	wild := func(vals []string) bool {
		for _, v := range vals {
			if strings.ContainsAny(v, "*?") {
				return true
			}
		}
		return false
	}
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			documents := 0
			for id, r := range s.template.Resources {
				for _, doc := range policyDocuments(r.Properties) {
					documents++
					for _, st := range statementsOf(doc) {
						sid, _ := st["Sid"].(string)
						_, notAction := st["NotAction"]
						_, notResource := st["NotResource"]
						principal := canonical(t, st["Principal"])
						anyone := principal == `"*"` || principal == `{"AWS":"*"}`
						// Wildcards in conditions count too (ArnLike, StringLike).
						var likes []string
						if cond, ok := st["Condition"].(map[string]any); ok {
							for op, v := range cond {
								if strings.Contains(op, "Like") {
									likes = append(likes, literals(v)...)
								}
							}
						}
						needs := wild(strs(st["Action"])) || wild(literals(st["Resource"])) || wild(likes) || notAction || notResource ||
							(anyone && st["Effect"] == "Allow")
						if !needs {
							continue
						}
						switch {
						case st["Effect"] == "Deny" && stack.DenyReason != "":
						case stack.WildcardReasons[sid] != "":
						default:
							t.Errorf("%s (%s): statement %q has a wildcard and no reason: %s", id, r.Type, sid, canonical(t, st))
						}
					}
				}
				if r.Type == "AWS::Lambda::Permission" {
					principal, _ := r.Properties["Principal"].(string)
					if (principal == "*" || wild(literals(r.Properties["SourceArn"]))) && stack.PermissionReasons[principal] == "" {
						t.Errorf("%s: permission for %q with wildcards and no reason", id, principal)
					}
				}
			}
			if documents < len(stack.Functions()) {
				t.Errorf("only %d policy documents found", documents)
			}
		})
	}
}

// policyDocuments finds every IAM policy document in a resource's
// properties (identity policies, resource policies, key policies, trust
// policies): any object with a Statement.
func policyDocuments(v any) []map[string]any {
	var out []map[string]any
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["Statement"]; ok {
			return append(out, x)
		}
		for _, e := range x {
			out = append(out, policyDocuments(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, policyDocuments(e)...)
		}
	}
	return out
}

func statementsOf(doc map[string]any) []map[string]any {
	var out []map[string]any
	switch x := doc["Statement"].(type) {
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
	case map[string]any:
		out = append(out, x)
	}
	return out
}

// cdk-nag's AwsSolutions pack reports nothing unsuppressed, and every
// suppression carries a reason.
func TestCdkNagAwsSolutions(t *testing.T) {
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			for _, f := range nagFindings(s.messages) {
				t.Error(f)
			}
			suppressions := 0
			for id, r := range s.template.Resources {
				nag, _ := r.Metadata["cdk_nag"].(map[string]any)
				rules, _ := nag["rules_to_suppress"].([]any)
				for _, rule := range rules {
					suppressions++
					m := rule.(map[string]any)
					reason, _ := m["reason"].(string)
					if len(strings.TrimSpace(reason)) < 40 {
						t.Errorf("%s: suppression of %v has no real reason: %q", id, m["id"], reason)
					}
				}
			}
			if suppressions == 0 {
				t.Error("no suppressions found: is cdk-nag running?")
			}
		})
	}
	// The same reading finds what cdk-nag reports on a stack that breaks
	// its rules, so an empty list above means cdk-nag found nothing.
	if len(canary) == 0 || !slices.ContainsFunc(canary, func(f string) bool { return strings.Contains(f, "AwsSolutions-SQS3") }) {
		t.Errorf("cdk-nag findings on the canary stack not seen: %v", canary)
	}
}

// nagFindings are the AwsSolutions warnings and errors among messages.
func nagFindings(msgs []*cxapi.SynthesisMessage) []string {
	var out []string
	for _, msg := range msgs {
		text := fmt.Sprint(msg.Entry.Data)
		if data, ok := msg.Entry.Data.(*string); ok {
			text = *data
		}
		if strings.Contains(text, "AwsSolutions-") && msg.Level != cxapi.SynthesisMessageLevel_INFO {
			out = append(out, fmt.Sprintf("%s %s: %s", msg.Level, *msg.Id, firstLine(text)))
		}
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	if len(s) > 300 {
		return s[:300]
	}
	return s
}

// The stage presets and the context overrides.
func TestConfig(t *testing.T) {
	if _, err := stack.Preset("staging"); err == nil {
		t.Error("unknown stage accepted")
	}
	d, _ := stack.Preset(stack.StageDev)
	p, _ := stack.Preset(stack.StageProd)
	if d.Prod || !p.Prod {
		t.Error("prod flag")
	}
	if p.WorkerMaxConcurrency < 2 || d.WorkerMaxConcurrency < 2 {
		t.Error("SQS event source mappings need a maximum concurrency of at least 2")
	}
	if n, ok := p.ReservedConcurrency[stack.WorkerName]; !ok || n < p.WorkerMaxConcurrency {
		t.Errorf("prod worker reserved concurrency %d below its pollers %d", n, p.WorkerMaxConcurrency)
	}
	if prod.m.Stack.StackName() == nil || *prod.m.Stack.StackName() != "Meridian-prod" || *dev.m.Stack.StackName() != "Meridian-dev" {
		t.Error("stack names")
	}
	// Outputs operators need.
	for _, out := range []string{"ApiUrl", "TableName", "QueueUrl", "DeadLetterQueueUrl", "UpstreamSecretArn",
		"AdminSecretArn", "AlarmTopicArn", "OperatorPolicyArn", "JobsQueueUrl", "JobsDeadLetterQueueUrl",
		"SchedulerGroupName", "SchedulerRoleArn", stack.OutCanaryFunctionName, stack.OutCanaryScheduleArn} {
		if _, ok := dev.template.Outputs[out]; !ok {
			t.Errorf("no output %s", out)
		}
	}
	if stack.VisibilityTimeout < 6*stack.WorkerTimeout {
		t.Error("visibility timeout under six times the worker timeout")
	}
	// The worker's timeout covers a job's call: the pipeline's request
	// deadline and what it writes after it, with room to spare.
	if stack.WorkerTimeout < pipeline.RequestTimeout+stack.CallTail+time.Minute || stack.WorkerTimeout > 15*time.Minute {
		t.Errorf("worker timeout %v for a call of %v and %v of writes", stack.WorkerTimeout, pipeline.RequestTimeout, stack.CallTail)
	}
}

func TestRouteIDsAreUnique(t *testing.T) {
	seen := map[string]string{}
	valid := regexp.MustCompile(`^[A-Za-z0-9]+$`)
	for _, r := range registry.Default().Routes() {
		id := stack.RouteID(r)
		if !valid.MatchString(id) {
			t.Errorf("route id %q", id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%s %s and %s share the id %s", r.Method, r.Path, other, id)
		}
		seen[id] = r.Method + " " + r.Path
	}
}

func TestConfigFromContext(t *testing.T) {
	cfg, err := stack.ConfigFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
		"stage": "prod", "alarmEmail": "ops@example.com", "logLevel": "DEBUG",
		"upstreamSecretName": "meridian/prod/upstream", "fairUse": "search/all=0",
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Prod || cfg.AlarmEmail != "ops@example.com" || cfg.LogLevel != "debug" ||
		cfg.UpstreamSecretName != "meridian/prod/upstream" || cfg.FairUse != "search/all=0" || cfg.StreamingURLs {
		t.Errorf("config %+v", cfg)
	}
	cfg, err = stack.ConfigFromContext(awscdk.NewApp(nil))
	if err != nil || cfg.Stage != stack.StageDev || cfg.StreamingURLs {
		t.Errorf("default stage %q, streaming URLs %v, %v", cfg.Stage, cfg.StreamingURLs, err)
	}
	// -c streamingUrls=true arrives as a string; cdk.json may hold a bool.
	for _, on := range []any{"true", true, "TRUE"} {
		cfg, err = stack.ConfigFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"streamingUrls": on}}))
		if err != nil || !cfg.StreamingURLs {
			t.Errorf("streamingUrls=%v: %v, %v", on, cfg.StreamingURLs, err)
		}
	}
	for _, bad := range []map[string]any{
		{"stage": "production"}, {"alarmEmail": "nobody"}, {"logLevel": "loud"}, {"upstreamSecretName": "a b"},
		{"streamingUrls": "yes please"},
		// The canary's settings (canary_test.go checks the messages).
		{"canaryInterval": "hourly"}, {"canaryInterval": "4m"}, {"canaryInterval": "90s"}, {"canaryInterval": "25h"},
		{"canaryInterval": "0"}, {"canaryInterval": "-1h"}, {"canaryBudget": "0"}, {"canaryBudget": "-3"}, {"canaryBudget": "1.5"},
		{"canaryBudget": "lots"}, {"canaryFillShare": "0"}, {"canaryFillShare": "1.2"}, {"canaryFillShare": "-0.5"},
		{"canaryFillShare": "NaN"}, {"canaryFillShare": "most"},
	} {
		if _, err := stack.ConfigFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &bad})); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestCheckBuild(t *testing.T) {
	dir := t.TempDir()
	if err := stack.CheckBuild(dir); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("empty build dir: %v", err)
	}
	if err := fakeBuild(dir); err != nil {
		t.Fatal(err)
	}
	if err := stack.CheckBuild(dir); err != nil {
		t.Error(err)
	}
}
