package stack_test

// Monitors (EventBridge Scheduler) and web jobs (the jobs queue) in the
// template: who may do what, written out.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/infra/stack"
	"github.com/meridian-data/meridian/shared/registry"
)

// jobAcceptors accept web jobs (async=1) and send them to the jobs queue:
// web and bundle serve web/social-profiles and bundle/creator-vetting,
// batch and mcp run every endpoint as an answer. search runs bundles only
// as legs; the worker runs jobs and never accepts one. Written out, so a
// change to the rule shows up here.
var jobAcceptors = []string{"web", "bundle", "batch", "mcp"}

// monitorSchedulers manage the monitors' schedules: service serves the
// monitors API, mcp offers it as tools, and the worker's runs disable the
// schedule of a monitor they pause and remove stale ones.
var monitorSchedulers = []string{"service", "mcp", stack.WorkerName}

func TestJobAcceptors(t *testing.T) {
	reg := registry.Default()
	keys := stack.AsyncEndpoints(reg)
	if !equalStrings(keys, []string{"bundle/creator-vetting", "web/social-profiles"}) {
		t.Errorf("async endpoints %v", keys)
	}
	got := map[string][]string{}
	for fn, why := range stack.JobAcceptors(reg) {
		got[fn] = why
		if len(why) == 0 {
			t.Errorf("%s accepts jobs without a reason", fn)
		}
		t.Logf("%s: %s", fn, strings.Join(why, "; "))
	}
	var names []string
	for fn := range got {
		names = append(names, fn)
	}
	if !equalStrings(names, jobAcceptors) {
		t.Errorf("job acceptors %v, want %v", names, jobAcceptors)
	}
	for _, fn := range stack.Functions() {
		want := []string(nil)
		switch {
		case fn == stack.WorkerName:
			want = consume
		case slices.Contains(jobAcceptors, fn):
			want = send
		}
		if got := stack.JobsQueueActions(reg, fn); !equalStrings(got, want) {
			t.Errorf("%s: jobs queue actions %v, want %v", fn, got, want)
		}
	}

	// Derived from the registry: with the Async mark moved to
	// company_registry/search, the acceptors are its family and the
	// functions running every endpoint as an answer.
	var moved []registry.Endpoint
	for _, e := range reg.Endpoints() {
		c := *e
		c.Async = c.Key() == "company_registry/search"
		moved = append(moved, c)
	}
	other, err := registry.New(moved)
	if err != nil {
		t.Fatalf("registry with async moved: %v", err)
	}
	if keys := stack.AsyncEndpoints(other); !equalStrings(keys, []string{"company_registry/search"}) {
		t.Errorf("async endpoints %v", keys)
	}
	names = nil
	for fn := range stack.JobAcceptors(other) {
		names = append(names, fn)
	}
	e, _ := other.Endpoint("company_registry/search")
	if want := []string{string(e.Family), "batch", "mcp"}; !equalStrings(names, want) {
		t.Errorf("job acceptors with async on company_registry/search %v, want %v", names, want)
	}
}

// The table's monitors and jobs: the monitors API's functions (service,
// and mcp's tools), the job readers (web serves web/jobs/{id}) and the acceptors, and the
// worker; never a Scan (AllMonitors is local) nor a ConditionCheckItem.
func TestMonitorsAndJobsTableUses(t *testing.T) {
	reg := registry.Default()
	if e, ok := reg.Endpoint(stack.JobsEndpoint); !ok || e.Family != registry.Web {
		t.Errorf("%s is served by %v (%v), want web", stack.JobsEndpoint, e, ok)
	}
	api := stack.MonitorsAPI(reg)
	if len(api) != 2 || len(api["service"]) == 0 || len(api["mcp"]) == 0 {
		t.Errorf("monitors API served by %v, want service and mcp", api)
	}
	var schedulers []string
	for fn, why := range stack.MonitorSchedulers(reg) {
		schedulers = append(schedulers, fn)
		t.Logf("%s: %s", fn, strings.Join(why, "; "))
	}
	if !equalStrings(schedulers, monitorSchedulers) {
		t.Errorf("monitor schedulers %v, want %v", schedulers, monitorSchedulers)
	}
	uses := func(fn string) []string {
		var names []string
		for _, u := range stack.TableUses(fn) {
			names = append(names, u.Name)
			for _, a := range u.Actions {
				if a == "dynamodb:Scan" || a == "dynamodb:ConditionCheckItem" {
					t.Errorf("%s: %s grants %s", fn, u.Name, a)
				}
			}
		}
		return names
	}
	for _, fn := range stack.Functions() {
		got := uses(fn)
		wantMonitors := fn == "service" || fn == "mcp"
		wantRuns := fn == stack.WorkerName
		wantJobs := slices.Contains(jobAcceptors, fn) || fn == "web" || fn == stack.WorkerName
		if slices.Contains(got, stack.UseMonitors.Name) != wantMonitors || slices.Contains(got, stack.UseMonitorRuns.Name) != wantRuns ||
			slices.Contains(got, stack.UseJobs.Name) != wantJobs {
			t.Errorf("%s: table uses %v", fn, got)
		}
	}
	// The worker's calls are paid data calls: admission and billing.
	if got := uses(stack.WorkerName); !slices.Contains(got, stack.UseRequest.Name) || !slices.Contains(got, stack.UsePaid.Name) ||
		slices.Contains(got, stack.UseIdempotency.Name) {
		t.Errorf("worker table uses %v", got)
	}
}

// The jobs queue and its DLQ: encrypted, SSL-only, 14 days, visibility
// six times the worker's timeout, dead letters after JobsMaxReceiveCount.
func TestJobsQueue(t *testing.T) {
	s := dev
	checkQueuePair(t, s, "Jobs", stack.JobsMaxReceiveCount)
	_, q := s.byPath(t, "JobsQueue/Resource")
	if v := q.Properties["VisibilityTimeout"]; v != 6*stack.WorkerTimeout.Seconds() || v != float64(1800) {
		t.Errorf("jobs visibility timeout %v, want 6 x %v", v, stack.WorkerTimeout)
	}
	if _, usage := s.byPath(t, "Queue/Resource"); usage.Properties["VisibilityTimeout"] != 6*stack.WorkerTimeout.Seconds() {
		t.Errorf("usage visibility timeout %v", usage.Properties["VisibilityTimeout"])
	}
	for _, out := range []string{"JobsQueueUrl", "JobsDeadLetterQueueUrl"} {
		if _, ok := s.template.Outputs[out]; !ok {
			t.Errorf("no output %s", out)
		}
	}
}

// Only the worker consumes the jobs queue, and only the job acceptors
// send to it: every identity policy statement of the template that names
// the jobs queue (or the DLQ) is one of these.
func TestJobsQueueAccess(t *testing.T) {
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			qID, _ := s.byPath(t, "JobsQueue/Resource")
			dlqID, _ := s.byPath(t, "JobsDeadLetterQueue/Resource")
			roles := map[string]string{}
			for _, fn := range stack.Functions() {
				id, _ := s.byPath(t, fnConstruct(fn)+"Role/Resource")
				roles[id] = fn
			}
			access := map[string][]string{}
			for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
				for id, p := range s.ofType(typ) {
					for _, st := range statementsOf(p.Properties["PolicyDocument"].(map[string]any)) {
						doc := canonical(t, st["Resource"])
						if !strings.Contains(doc, `"`+qID+`"`) && !strings.Contains(doc, `"`+dlqID+`"`) {
							if slices.ContainsFunc(strs(st["Action"]), func(a string) bool { return strings.HasPrefix(a, "sqs:") }) &&
								slices.Contains(literals(st["Resource"]), "*") {
								t.Errorf("%s: SQS actions on every queue: %s", id, canonical(t, st))
							}
							continue
						}
						if getAtt(st["Resource"], "Arn") != qID {
							t.Errorf("%s: statement on the jobs DLQ or on more than the jobs queue: %s", id, canonical(t, st))
						}
						rs, _ := p.Properties["Roles"].([]any)
						if len(rs) != 1 || roles[ref(rs[0])] == "" {
							t.Errorf("%s: jobs queue access for %v", id, rs)
							continue
						}
						fn := roles[ref(rs[0])]
						access[fn] = append(access[fn], strs(st["Action"])...)
					}
				}
			}
			for _, fn := range stack.Functions() {
				var want []string
				switch {
				case fn == stack.WorkerName:
					want = consume
				case slices.Contains(jobAcceptors, fn):
					want = send
				}
				if !equalStrings(access[fn], want) {
					t.Errorf("%s: jobs queue actions %v, want %v", fn, access[fn], want)
				}
			}
			// Only the worker's mapping reads it.
			for id, e := range s.ofType("AWS::Lambda::EventSourceMapping") {
				if getAtt(e.Properties["EventSourceArn"], "Arn") == qID && ref(e.Properties["FunctionName"]) != s.functionID(t, stack.WorkerName) {
					t.Errorf("%s: %v consumes the jobs queue", id, e.Properties["FunctionName"])
				}
			}
		})
	}
}

// The schedule group; the role its schedules assume: trusted by
// EventBridge Scheduler for this account only, allowed to invoke the
// worker and nothing else; the functions that manage schedules (service,
// mcp and the worker) on the group's schedules only, passing that role to
// EventBridge Scheduler only; no other role or policy touches either.
func TestScheduler(t *testing.T) {
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			groups := s.ofType("AWS::Scheduler::ScheduleGroup")
			if len(groups) != 1 {
				t.Fatalf("%d schedule groups", len(groups))
			}
			groupID, group := s.byPath(t, "SchedulerGroup")
			if group.Properties["Name"] != nil {
				t.Errorf("schedule group named %v: CloudFormation names it", group.Properties["Name"])
			}
			// The monitors API makes the monitors' schedules; the stack
			// declares only the canary's, outside the monitors' group
			// (canary_test.go).
			for id, sc := range s.ofType("AWS::Scheduler::Schedule") {
				if p, _ := sc.Metadata["aws:cdk:path"].(string); !strings.HasSuffix(p, "/"+stack.CanaryScheduleID) ||
					sc.Properties["GroupName"] != stack.CanaryScheduleGroup {
					t.Errorf("%s: the stack declares a schedule other than the canary's in the default group: %s", id, canonical(t, sc.Properties))
				}
			}
			roleID, role := s.byPath(t, "SchedulerRole/Resource")
			trust := statementsOf(role.Properties["AssumeRolePolicyDocument"].(map[string]any))
			if len(trust) != 1 || trust[0]["Effect"] != "Allow" || trust[0]["Action"] != "sts:AssumeRole" ||
				canonical(t, trust[0]["Principal"]) != `{"Service":"scheduler.amazonaws.com"}` ||
				canonical(t, trust[0]["Condition"]) != `{"StringEquals":{"aws:SourceAccount":{"Ref":"AWS::AccountId"}}}` {
				t.Errorf("scheduler role trust %s", canonical(t, trust))
			}
			if role.Properties["ManagedPolicyArns"] != nil || role.Properties["Policies"] != nil {
				t.Errorf("scheduler role policies %v", role.Properties)
			}
			workerID := s.functionID(t, stack.WorkerName)
			var roleStatements []map[string]any
			for _, p := range s.ofType("AWS::IAM::Policy") {
				for _, r := range p.Properties["Roles"].([]any) {
					if ref(r) == roleID {
						roleStatements = append(roleStatements, statementsOf(p.Properties["PolicyDocument"].(map[string]any))...)
					}
				}
			}
			if len(roleStatements) != 1 || roleStatements[0]["Sid"] != stack.SidInvokeWorker || roleStatements[0]["Effect"] != "Allow" ||
				roleStatements[0]["Action"] != "lambda:InvokeFunction" || getAtt(roleStatements[0]["Resource"], "Arn") != workerID ||
				roleStatements[0]["Condition"] != nil {
				t.Errorf("scheduler role statements %s, want only lambda:InvokeFunction on the worker", canonical(t, roleStatements))
			}
			for _, out := range []string{"SchedulerGroupName", "SchedulerRoleArn"} {
				if _, ok := s.template.Outputs[out]; !ok {
					t.Errorf("no output %s", out)
				}
			}

			// Who may manage schedules or pass the role: monitorSchedulers
			// (TestFunctionPolicies checks their statements), nobody else; nothing allows scheduler actions or iam:PassRole on "*".
			roles := map[string]string{}
			for _, fn := range stack.Functions() {
				id, _ := s.byPath(t, fnConstruct(fn)+"Role/Resource")
				roles[id] = fn
			}
			managers := map[string]bool{}
			for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
				for id, p := range s.ofType(typ) {
					for _, st := range statementsOf(p.Properties["PolicyDocument"].(map[string]any)) {
						scheduler := slices.ContainsFunc(strs(st["Action"]), func(a string) bool {
							return strings.HasPrefix(a, "scheduler:") || a == "iam:PassRole" || a == "iam:*" || a == "*"
						})
						if !scheduler {
							continue
						}
						if slices.Contains(literals(st["Resource"]), "*") {
							t.Errorf("%s: %s on every resource", id, canonical(t, st))
						}
						rs, _ := p.Properties["Roles"].([]any)
						for _, r := range rs {
							managers[roles[ref(r)]] = true
						}
						if len(rs) == 0 {
							t.Errorf("%s: scheduler statement in a policy attached to no function role: %s", id, canonical(t, st))
						}
					}
				}
			}
			var got []string
			for fn := range managers {
				got = append(got, fn)
			}
			if !equalStrings(got, monitorSchedulers) {
				t.Errorf("functions managing schedules %v, want %v", got, monitorSchedulers)
			}
			// The wildcard of schedule/GROUP/* is explained and, for cdk-nag,
			// suppressed on exactly that resource.
			if stack.WildcardReasons[stack.SidSchedules] == "" {
				t.Error("no reason for the schedules' wildcard")
			}
			for _, fn := range monitorSchedulers {
				_, policy := s.byPath(t, fnConstruct(fn)+"Role/DefaultPolicy/Resource")
				if !strings.Contains(fmt.Sprint(policy.Metadata["cdk_nag"]), `:schedule\/<`+groupID+`>\/\*$/`) {
					t.Errorf("%s: no cdk-nag suppression of the schedules' wildcard: %s", fn, canonical(t, policy.Metadata["cdk_nag"]))
				}
			}
		})
	}
}
