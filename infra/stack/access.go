package stack

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// WorkerName is the worker function's name (functions/worker).
const WorkerName = "worker"

// CanaryName is the canary function's name (functions/canary): it checks
// the sources on its own EventBridge Scheduler schedule (canary.go).
const CanaryName = "canary"

// Functions lists every function in deployment order: the families of
// registry.Families, then the worker, then the canary.
func Functions() []string {
	names := make([]string, 0, len(registry.Families)+2)
	for _, f := range registry.Families {
		names = append(names, string(f))
	}
	return append(names, WorkerName, CanaryName)
}

// TableUse is one thing a function does with the DynamoDB table, with the
// IAM actions it takes. The store's calls are in shared/store/dynamostore.
// TransactWriteItems has no IAM action of its own: each item is authorized
// as the PutItem, UpdateItem, DeleteItem or ConditionCheckItem it stands
// for. The store's transactions hold Put and Update items, and
// DeleteMonitor's a Delete item; none holds a ConditionCheck item, so no
// function gets dynamodb:ConditionCheckItem.
type TableUse struct {
	Name    string
	Why     string
	Actions []string // on the table
	Index   []string // on the leases index (table/<name>/index/leases)
}

// What the functions do with the table. DescribeTable, CreateTable and
// UpdateTimeToLive (dynamostore.CreateTable) are for tests and
// development only: no function gets them.
var (
	// UseRequest is every API request: authentication, admission and the
	// usage emitter, which every API function runs after each invocation.
	UseRequest = TableUse{
		Name: "request",
		Why: "Enter, Admit, TakeSlot, ReleaseSlots (UpdateItem of the key's hash record); KeyByHash/Key for requests not " +
			"admitted themselves, and Enter's completion of a hash record written before it carried the key's status (GetItem); " +
			"the usage emitter's outbox: PutOutbox (TransactWriteItems of Put), OutboxBatch (Query), " +
			"DeleteOutbox (BatchGetItem, BatchWriteItem of deletes)",
		Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem"},
	}
	// UsePaid is a paid data call: billing, the response cache, fair use and dry runs.
	UsePaid = TableUse{
		Name: "paid",
		Why: "Reserve (BatchGetItem, TransactWriteItems of Update and Put), Settle (UpdateItem), " +
			"Refund (BatchGetItem, GetItem, TransactWriteItems); CacheGet/CachePut (GetItem, PutItem); " +
			"FairUseUsed/AddFairUse (GetItem, PutItem); dry runs read the account and key (GetItem); " +
			"TakeAllowance before each attempt of a provider with a monthly allowance (conditional UpdateItem ADD), " +
			"AllowanceUsed for a limited-capacity endpoint's dry run and catalogue entry (GetItem); request collapsing: " +
			"ClaimFill of a cache key's fill marker (conditional PutItem, renewed while the fetch runs), ReleaseFill when " +
			"the fill failed (conditional DeleteItem)",
		Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchGetItem"},
	}
	// UseIdempotency is Idempotency-Key on direct GETs under /v1 (not the
	// sandbox, not batch items, not MCP calls).
	UseIdempotency = TableUse{
		Name:    "idempotency",
		Why:     "ClaimIdempotency (conditional PutItem, GetItem), CompleteIdempotency (UpdateItem), ReleaseIdempotency (DeleteItem)",
		Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"},
	}
	// UseAccounts is the console and operator APIs and the service reads.
	UseAccounts = TableUse{
		Name: "accounts",
		Why: "CreateAccount, Grant, CreateKey, SetKeyStatus (GetItem, TransactWriteItems of Put and Update); " +
			"UpdateKey (UpdateItem); Keys, Ledger, OutcomesSince for /v1/status, AccountUsage for /v1/credits/usage (Query; Keys also reads the keys' hash records for their last use: BatchGetItem, granted with the request use); AccountByConsoleToken (GetItem); " +
			"the catalogue's capacity of limited-capacity endpoints (AllowanceUsed: GetItem)",
		Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"},
	}
	// UseWorker is the worker's SQS messages and its scheduled run.
	UseWorker = TableUse{
		Name: "worker",
		Why: "RecordUsage (a conditional PutItem of each request's mark, one UpdateItem ADD per counter item: the platform's " +
			"minute and the account's day and endpoint; when an ADD fails, UpdateItem ADDs of the negative and DeleteItem of " +
			"the batch's marks take it back); refund and settle reconciliations " +
			"(Refund: BatchGetItem, GetItem, TransactWriteItems of Update and Put; Settle: UpdateItem); the " +
			"scheduled run applies the outbox in place (OutboxBatch: Query; DeleteOutbox: BatchGetItem, " +
			"BatchWriteItem) and sweeps expired reservations (RefundExpired as Refund; ExpiredReservations: BatchGetItem of the shards' marks, Query on " +
			"the leases index from each mark, BatchGetItem of the entries' reservations, PutItem of a mark moved, UpdateItem of " +
			"a reservation relisted)",
		Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
			"dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem"},
		Index: []string{"dynamodb:Query"},
	}
	// UseMonitors is the monitors API (the family serving /v1/monitors).
	// AllMonitors (Scan) is read by the local scheduler only: no function
	// gets dynamodb:Scan.
	UseMonitors = TableUse{
		Name: "monitors",
		Why: "CreateMonitor (TransactWriteItems of Update of the account's monitor count and Put of the monitor); " +
			"Monitor and Run (GetItem); ListMonitors and Runs (Query; Runs reads the changes kept beside a page's runs " +
			"with BatchGetItem); SetMonitorState (UpdateItem); DeleteMonitor (TransactWriteItems of Delete of the monitor " +
			"and Update of the count)",
		Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
			"dynamodb:Query", "dynamodb:BatchGetItem"},
	}
	// UseMonitorRuns is the worker's monitor runs.
	UseMonitorRuns = TableUse{
		Name: "monitor runs",
		Why: "Monitor and the previous succeeded Run (GetItem); ClaimRun (conditional PutItem, UpdateItem of a run " +
			"whose lease ended); CompleteRun (TransactWriteItems of Update of the run, Put of its changes item and Put " +
			"of the monitor)",
		Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
	}
	// UseCanary is the canary's run (shared/canary): the upstream runner
	// as a request uses it, under the operator's own fair-use name, never
	// billed to an account, and the run's record. No outbox: it emits no
	// usage events.
	UseCanary = TableUse{
		Name: "canary",
		Why: "AddFairUse under the operator's fair-use name (canary.FairUseAccount: GetItem, conditional PutItem); " +
			"the runner's remembered resolutions: Recall (GetItem), Keep (PutItem); monthly allowances: TakeAllowance " +
			"before each attempt of a provider with one (conditional UpdateItem ADD), AllowanceUsed (GetItem); the canary " +
			"log: RecordCanaryRun (PutItem), CanaryRuns (Query on the table's primary key, newest first; no index)",
		Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"},
	}
	// UseJobs is a web job: accepted with async=1, read at
	// /v1/web/jobs/{id}, run by the worker.
	UseJobs = TableUse{
		Name: "jobs",
		Why: "accepting a call with async=1: TakeJobSlot (GetItem, conditional PutItem of the account's job slots), " +
			"CreateJob (conditional PutItem), FinishJob of a job the queue refused and ReleaseJobSlot (UpdateItem); " +
			"GET /v1/web/jobs/{id}: Job (GetItem); the worker's job runs: StartJob, ExtendReservation, JobProgress, " +
			"FinishJob, ReleaseJobSlot, MarkJobBilled (conditional UpdateItem)",
		Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
	}
)

// TableUses says what each function does with the table, by the
// registry (registry.Default()).
func TableUses(name string) []TableUse {
	reg := registry.Default()
	uses := baseTableUses(name)
	if _, ok := MonitorsAPI(reg)[name]; ok {
		uses = append(uses, UseMonitors)
	}
	if name == WorkerName {
		uses = append(uses, UseMonitorRuns)
	}
	if _, ok := JobKeepers(reg)[name]; ok {
		uses = append(uses, UseJobs)
	}
	return uses
}

func baseTableUses(name string) []TableUse {
	switch registry.Family(name) {
	case registry.Sandbox:
		// Free synthetic data: no billing, no cache, no idempotency (the
		// pipeline skips it for the sandbox).
		return []TableUse{UseRequest}
	case registry.Batch, registry.MCP:
		// Items and tool calls are paid data calls, but never carry an
		// Idempotency-Key (batch is a POST; MCP calls are not direct GETs).
		return []TableUse{UseRequest, UsePaid}
	case registry.Service:
		// Console, operator API, credits, status and discovery: free, but
		// its GETs under /v1 honour Idempotency-Key.
		return []TableUse{UseRequest, UseIdempotency, UseAccounts}
	}
	if name == CanaryName {
		// No request, no billing, no cache of answers, no idempotency.
		return []TableUse{UseCanary}
	}
	if name == WorkerName {
		// Its SQS messages and sweep; monitor runs and web jobs are paid
		// data calls through the whole pipeline (admission with the
		// monitor's or the job's key, billing, the usage emitter), never
		// with an Idempotency-Key.
		return []TableUse{UseWorker, UseRequest, UsePaid}
	}
	// The data families: paid GETs under /v1 with idempotency.
	return []TableUse{UseRequest, UsePaid, UseIdempotency}
}

// TableActions is the sorted union of a function's table and index actions.
func TableActions(name string) (table, index []string) {
	for _, u := range TableUses(name) {
		table = append(table, u.Actions...)
		index = append(index, u.Index...)
	}
	return sortedSet(table), sortedSet(index)
}

func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}

// ConsumeActions are what an SQS event source mapping polls with, using
// the function's role: the AWSLambdaSQSQueueExecutionRole set.
var ConsumeActions = []string{"sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"}

// QueueActions are the usage queue's SQS actions of a function, sorted.
// Every API function's usage emitter sends (SendMessageBatch, authorized
// as sqs:SendMessage), also when it drains the outbox it wrote. The worker
// only consumes: its event source mapping polls with the function's role
// (ConsumeActions); the usage events of its own calls (monitor runs, web
// jobs) are applied in process (usage.Direct, app.StartWorker) and its
// scheduled run applies the outbox in place (usage.Worker.Sweep), so it
// never sends. The canary has none: its calls are never billed, so it
// emits no usage events.
func QueueActions(name string) []string {
	switch name {
	case WorkerName:
		return sortedSet(ConsumeActions)
	case CanaryName:
		return nil
	}
	return []string{"sqs:SendMessage"}
}

// JobsQueueActions are the jobs queue's SQS actions of a function, sorted:
// the job acceptors (JobAcceptors) send a message per accepted job
// (SendMessage, queue.JobQueue); the worker consumes the queue (its
// event source mapping, one job per invocation); no other function has any.
func JobsQueueActions(reg *registry.Registry, name string) []string {
	if name == WorkerName {
		return sortedSet(ConsumeActions)
	}
	if _, ok := JobAcceptors(reg)[name]; ok {
		return []string{"sqs:SendMessage"}
	}
	return nil
}

// AsyncEndpoints are the keys of the endpoints that accept async=1 (the
// registry marks them Async): the call is accepted as a web job (202), and
// the worker runs it.
func AsyncEndpoints(reg *registry.Registry) []string {
	var keys []string
	for _, e := range reg.Endpoints() {
		if e.Async {
			keys = append(keys, e.Key())
		}
	}
	return sortedSet(keys)
}

// JobAcceptors returns the functions that accept web jobs, each with its
// reasons: the family serving each async endpoint and the fan-out
// families that run it in their own process as an answer (batch items and
// MCP tool calls carry the same parameters), by the rule SecretReaders
// uses (FanOuts) less the families that run it only as a composite's legs.
// The worker runs jobs and never accepts one: a monitor's run sends no
// async (the monitors API refuses it), and a job's call is the job.
// These send to the jobs queue (MERIDIAN_JOBS_QUEUE_URL) and create jobs.
func JobAcceptors(reg *registry.Registry) map[string][]string {
	acceptors := endpointRunners(reg, AsyncEndpoints(reg), false, func(key string) string {
		return "serves " + key + ", which accepts async=1 (a web job)"
	})
	delete(acceptors, WorkerName)
	return acceptors
}

// JobKeepers returns the functions that use the table's web jobs, with
// reasons: the job acceptors, the family serving GET /v1/web/jobs/{id}
// (JobsEndpoint) and the worker, which runs them.
func JobKeepers(reg *registry.Registry) map[string][]string {
	keepers := JobAcceptors(reg)
	if e, ok := reg.Endpoint(JobsEndpoint); ok {
		addReason(keepers, string(e.Family), "serves "+JobsEndpoint+": reads a job's state and result")
		for fam, tools := range mcpTools(reg, e.Platform) {
			for _, name := range tools {
				if name == mcpserver.Name(e) {
					addReason(keepers, fam, "offers "+JobsEndpoint+" as the MCP tool "+name+", run in this process")
				}
			}
		}
	}
	addReason(keepers, WorkerName, "runs the web jobs of the jobs queue")
	return keepers
}

// JobsEndpoint reads a web job.
const JobsEndpoint = "web/jobs/{id}"

// MonitorsPath is the monitors API's path (/v1/monitors, /v1/monitors/{id},
// /v1/monitors/{id}/runs, ...).
const MonitorsPath = "/v1/monitors"

// MonitorsPlatform is the registry platform of the monitors API.
const MonitorsPlatform = "monitors"

// MonitorsAPI returns the functions serving the monitors API, with
// reasons: the families serving the monitors platform's endpoints and the
// routes of /v1/monitors (registry.RouteTable), and the family serving
// /mcp when the MCP server offers those endpoints as tools
// (mcpserver.Tools), which it runs in its own process.
func MonitorsAPI(reg *registry.Registry) map[string][]string {
	out := map[string][]string{}
	for _, e := range reg.Endpoints() {
		if e.Platform == MonitorsPlatform {
			addReason(out, string(e.Family), "serves the monitors API ("+e.Key()+")")
		}
	}
	routes := registry.NewRouteTable(reg.Routes())
	for _, r := range []struct{ method, path string }{
		{"GET", MonitorsPath}, {"POST", MonitorsPath + "/create"}, {"GET", MonitorsPath + "/mon_x"},
		{"POST", MonitorsPath + "/mon_x/pause"}, {"GET", MonitorsPath + "/mon_x/runs"},
	} {
		if rt := routes.Match(r.method, r.path); rt.Path != "" && rt.Path != registry.DefaultRoute {
			addReason(out, string(rt.Family), "serves the monitors API's routes ("+rt.Method+" "+rt.Path+")")
		}
	}
	for fam, tools := range mcpTools(reg, MonitorsPlatform) {
		addReason(out, fam, "offers the monitors API as MCP tools ("+strings.Join(tools, ", ")+"), run in this process")
	}
	return out
}

// mcpTools returns, by the family serving /mcp, the MCP tools of the
// platform's endpoints.
func mcpTools(reg *registry.Registry, platform string) map[string][]string {
	var names []string
	for _, t := range mcpserver.Tools(reg, mcpserver.Options{}) {
		if t.Endpoint.Platform == platform {
			names = append(names, mcpserver.Name(t.Endpoint))
		}
	}
	out := map[string][]string{}
	if len(names) == 0 {
		return out
	}
	for _, r := range reg.Routes() {
		if r.Path == "/mcp" {
			out[string(r.Family)] = sortedSet(names)
		}
	}
	return out
}

// MonitorSchedulers returns the functions that create, replace and delete
// the monitors' EventBridge Scheduler schedules, with reasons: the
// monitors API's functions (create, pause, resume, delete) and the
// worker, whose runs disable the schedule of a monitor they pause and
// delete a schedule that outlived its monitor (monitors.Service.Run). They
// get the scheduler's environment and permissions.
func MonitorSchedulers(reg *registry.Registry) map[string][]string {
	out := map[string][]string{}
	for fn, why := range MonitorsAPI(reg) {
		for _, w := range why {
			addReason(out, fn, w+": creates, pauses, resumes and deletes monitors and their schedules")
		}
	}
	addReason(out, WorkerName, "its monitor runs disable the schedule of a monitor they pause and delete a schedule "+
		"that outlived its monitor")
	return out
}

// FanOut declares the families whose requests run other families'
// endpoints in their own process (the pipeline is the same in every
// function), so they need those endpoints' upstream credentials too.
type FanOut struct {
	All   bool   // every endpoint
	Param string // the endpoints of the platforms this parameter of the family's endpoints enumerates
	// Legs: the family runs them as a composite's legs, which never ask
	// for AI labels (the pipeline sends judgments=off), so it needs no model.
	Legs bool
	Why  string
}

// FanOuts are the functions that run endpoints of other families: the
// families whose requests do, and the worker (keyed by its name).
var FanOuts = map[registry.Family]FanOut{
	registry.Batch: {All: true, Why: "POST /v1/batch runs each item through the whole pipeline in this process"},
	registry.MCP:   {All: true, Why: "every endpoint is an MCP tool, run in this process"},
	registry.Family(WorkerName): {All: true, Why: "a monitor's run calls its data operation (any endpoint, with the monitor's " +
		"parameters) and a web job runs its composite operation, through the whole pipeline in this process"},
	registry.Search: {Param: "platforms", Legs: true, Why: "search/all and search/creators fan out over the searches of the platforms their platforms parameter lists"},
	registry.Bundle: {Param: "platform", Legs: true, Why: "creator-vetting samples the creator's platform"},
}

// SecretReaders returns the functions that may read the upstream secret,
// each with its reasons: the families serving an endpoint through a
// provider that reads secrets (adapters.All()), the fan-out families that
// run such endpoints, and the families serving the catalogue (utility/*),
// whose available flag follows route eligibility, which the secret
// decides, and the canary (CanarySecretReason). The others never get
// MERIDIAN_UPSTREAM_SECRET (the operator token has its own secret,
// AdminSecretReaders).
func SecretReaders(reg *registry.Registry) map[string][]string {
	secretEndpoints := map[string][]string{} // endpoint key -> provider: secret names
	for _, p := range adapters.All() {
		if len(p.Secrets) == 0 {
			continue
		}
		names := make([]string, len(p.Secrets))
		for i, s := range p.Secrets {
			names[i] = s.Name
		}
		for key := range p.Endpoints {
			secretEndpoints[key] = append(secretEndpoints[key], p.Name+" ("+strings.Join(names, ", ")+")")
		}
	}
	keys := make([]string, 0, len(secretEndpoints))
	for k := range secretEndpoints {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	readers := endpointRunners(reg, keys, true, func(key string) string {
		return fmt.Sprintf("serves %s through %s", key, strings.Join(secretEndpoints[key], ", "))
	})
	if len(keys) > 0 {
		// Without the secret, the catalogue would call every credentialed
		// endpoint unavailable while the families serving it answer.
		for _, e := range reg.Endpoints() {
			if e.Platform == CataloguePlatform {
				addReason(readers, string(e.Family), CatalogueSecretReason)
			}
		}
		addReason(readers, CanaryName, CanarySecretReason)
	}
	return readers
}

// CanarySecretReason is why the canary function reads the upstream secret.
const CanarySecretReason = "calls the sources of every data operation the upstream runner serves, on each configured " +
	"route (direct and each unblocking service), with the operator's credentials, as a request would (the scheduled canary)"

// endpointRunners returns the functions that run the endpoints of keys,
// each with its reasons: the family serving each endpoint (why it serves
// it, from serves) and every fan-out family (FanOuts) that runs it in its
// own process. The upstream secret's readers and the model's runners are
// decided by this one rule.
func endpointRunners(reg *registry.Registry, keys []string, withLegs bool, serves func(key string) string) map[string][]string {
	runners := map[string][]string{}
	for _, key := range keys {
		e, ok := reg.Endpoint(key)
		if !ok {
			continue
		}
		addReason(runners, string(e.Family), serves(key))
		for fam, fo := range FanOuts {
			if fam != e.Family && (withLegs || !fo.Legs) && fanOutReaches(reg, fam, fo, e.Platform) {
				addReason(runners, string(fam), fmt.Sprintf("runs %s in process: %s", key, fo.Why))
			}
		}
	}
	return runners
}

func addReason(reasons map[string][]string, fn, why string) {
	if !slices.Contains(reasons[fn], why) {
		reasons[fn] = append(reasons[fn], why)
	}
}

// CataloguePlatform is the platform of the catalogue endpoints, which
// report which endpoints this deployment can serve.
const CataloguePlatform = "utility"

// CatalogueSecretReason is why the catalogue's family reads the upstream
// secret.
const CatalogueSecretReason = "reports which endpoints this deployment can serve: the catalogue's available flag, " +
	"the quickstart and llms; it never calls a source"

// AdminSecretReaders returns the functions that may read the operator
// secret (MERIDIAN_ADMIN_SECRET): the families serving the operator API's
// routes (IsAdminRoute), each with the routes it serves. Today: service.
func AdminSecretReaders(reg *registry.Registry) map[string][]string {
	readers := map[string][]string{}
	for _, r := range reg.Routes() {
		if IsAdminRoute(r) {
			fn := string(r.Family)
			readers[fn] = append(readers[fn], "serves "+r.Method+" "+r.Path+" (x-admin-token)")
		}
	}
	return readers
}

// fanOutReaches says whether family fam, by fo, runs endpoints of platform.
func fanOutReaches(reg *registry.Registry, fam registry.Family, fo FanOut, platform string) bool {
	if fo.All {
		return true
	}
	for _, e := range reg.Endpoints() {
		if e.Family != fam {
			continue
		}
		for _, p := range e.Params {
			if p.Name == fo.Param && slices.Contains(p.Enum, platform) {
				return true
			}
		}
	}
	return false
}

// StreamingFunctions are the functions that get a Lambda function URL with
// response streaming when Config.StreamingURLs is on: the families of endpoints that stream (stream=1,
// server-sent events) and the family serving /mcp (MCP Streamable HTTP).
func StreamingFunctions(reg *registry.Registry) []string {
	var names []string
	for _, e := range reg.Endpoints() {
		if e.Streams {
			names = append(names, string(e.Family))
		}
	}
	for _, r := range reg.Routes() {
		if r.Path == "/mcp" {
			names = append(names, string(r.Family))
		}
	}
	return sortedSet(names)
}
