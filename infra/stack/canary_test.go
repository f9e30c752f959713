package stack_test

// The scheduled canary in the template (issue 42): its function, its
// EventBridge Scheduler schedule and the role that schedule assumes, its
// alarms, its context settings, and the template's size with them.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/meridian-data/meridian/infra/stack"
	canarycontract "github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// The canaryCustom stack's settings (canaryOff has the same budget and
// fill share, and the interval off).
const (
	canaryTestInterval  = 30 * time.Minute
	canaryTestBudget    = 120
	canaryTestFillShare = 0.5
)

// The canaried operations are the registry's data endpoints that a
// provider of adapters.All() serves, less those of limited capacity, and
// nothing the pipeline composes.
func TestCanaryOperations(t *testing.T) {
	reg := registry.Default()
	ops := stack.CanaryOperations(reg)
	if len(ops) == 0 {
		t.Fatal("no canaried operations")
	}
	if !slices.IsSorted(ops) || len(slices.Compact(slices.Clone(ops))) != len(ops) {
		t.Errorf("operations not sorted and distinct: %v", ops)
	}
	served := map[string]bool{}
	for _, p := range adapters.All() {
		for key := range p.Endpoints {
			served[key] = true
		}
	}
	for _, e := range reg.Endpoints() {
		want := served[e.Key()] && e.Kind == registry.Data && e.RetiredFor == "" && !e.LimitedCapacity
		if got := slices.Contains(ops, e.Key()); got != want {
			t.Errorf("%s (family %s, kind %v, served by a provider %v, limited capacity %v): canaried %v", e.Key(), e.Family, e.Kind,
				served[e.Key()], e.LimitedCapacity, got)
		}
	}
	for _, composite := range []string{"search/all", "bundle/creator-vetting", "web/social-profiles"} {
		if slices.Contains(ops, composite) {
			t.Errorf("%s is the pipeline's composite, not the runner's: canaried", composite)
		}
	}
	if !slices.Contains(ops, "company_registry/search") {
		t.Error("company_registry/search is not canaried")
	}
	// Alarm ids are distinct (the construct ids would collide otherwise).
	ids := map[string]string{}
	for _, key := range ops {
		id := stack.CanaryAlarmID(key)
		if other, dup := ids[id]; dup {
			t.Errorf("%s and %s share the alarm id %s", key, other, id)
		}
		ids[id] = key
	}
	t.Logf("%d canaried operations", len(ops))
}

func TestCanaryRate(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Minute: "rate(5 minutes)", 30 * time.Minute: "rate(30 minutes)", 90 * time.Minute: "rate(90 minutes)",
		time.Hour: "rate(1 hour)", 2 * time.Hour: "rate(2 hours)", 24 * time.Hour: "rate(24 hours)",
	} {
		if got := stack.CanaryRate(d); got != want {
			t.Errorf("CanaryRate(%v) = %q, want %q", d, got, want)
		}
	}
}

// The schedule: EventBridge Scheduler (no events rule), in the default
// group (not the monitors'), the context's rate (hourly by default),
// exactly on time, never retried, invoking the canary function with {}
// under its own role; none with the interval off.
func TestCanarySchedule(t *testing.T) {
	for name, c := range map[string]struct {
		s    *synthesized
		rate string // "" for none
	}{
		"dev": {dev, "rate(1 hour)"}, "prod": {prod, "rate(1 hour)"}, "canary-30m": {canaryCustom, "rate(30 minutes)"}, "canary-off": {canaryOff, ""},
	} {
		t.Run(name, func(t *testing.T) {
			s := c.s
			schedules := s.ofType("AWS::Scheduler::Schedule")
			_, hasOutput := s.template.Outputs[stack.OutCanaryScheduleArn]
			if _, ok := s.template.Outputs[stack.OutCanaryFunctionName]; !ok {
				t.Errorf("no output %s", stack.OutCanaryFunctionName)
			} else if out := canonical(t, s.template.Outputs[stack.OutCanaryFunctionName]); !strings.Contains(out, `{"Ref":"`+s.functionID(t, stack.CanaryName)+`"}`) {
				t.Errorf("output %s is %s, not the canary function's name", stack.OutCanaryFunctionName, out)
			}
			if c.rate == "" {
				if len(schedules) != 0 || hasOutput || s.m.CanarySchedule != nil || s.m.CanaryScheduleRole != nil {
					t.Errorf("canaryInterval=off: %d schedules, output %v", len(schedules), hasOutput)
				}
				for id, r := range s.ofType("AWS::IAM::Role") {
					if strings.Contains(canonical(t, r.Properties["AssumeRolePolicyDocument"]), stack.SchedulerPrincipal) &&
						!strings.HasSuffix(r.Metadata["aws:cdk:path"].(string), "/SchedulerRole/Resource") {
						t.Errorf("canaryInterval=off: %s is a role for EventBridge Scheduler besides the monitors'", id)
					}
				}
				return
			}
			if len(schedules) != 1 || !hasOutput {
				t.Fatalf("%d schedules, output %v, want the canary's", len(schedules), hasOutput)
			}
			id, sc := s.byPath(t, stack.CanaryScheduleID)
			groupID, _ := s.byPath(t, "SchedulerGroup")
			roleID, _ := s.byPath(t, stack.CanaryScheduleRoleID+"/Resource")
			policyID, _ := s.byPath(t, stack.CanaryScheduleRoleID+"/DefaultPolicy/Resource")
			p := sc.Properties
			if p["GroupName"] != stack.CanaryScheduleGroup || strings.Contains(canonical(t, p), groupID) {
				t.Errorf("schedule group %v, want %q and never the monitors' group %s", p["GroupName"], stack.CanaryScheduleGroup, groupID)
			}
			if p["ScheduleExpression"] != c.rate || p["State"] != "ENABLED" || p["ScheduleExpressionTimezone"] != nil ||
				p["StartDate"] != nil || p["EndDate"] != nil {
				t.Errorf("schedule %s", canonical(t, p))
			}
			if ftw := canonical(t, p["FlexibleTimeWindow"]); ftw != `{"Mode":"OFF"}` {
				t.Errorf("flexible time window %s", ftw)
			}
			target, _ := p["Target"].(map[string]any)
			if getAtt(target["Arn"], "Arn") != s.functionID(t, stack.CanaryName) || getAtt(target["RoleArn"], "Arn") != roleID ||
				target["Input"] != "{}" || canonical(t, target["RetryPolicy"]) != `{"MaximumRetryAttempts":0}` {
				t.Errorf("schedule target %s", canonical(t, target))
			}
			for k := range target {
				switch k {
				case "Arn", "RoleArn", "Input", "RetryPolicy":
				default:
					t.Errorf("schedule target has %s: %s", k, canonical(t, target))
				}
			}
			if !slices.Contains(sc.DependsOn, policyID) {
				t.Errorf("%s does not wait for its role's policy: %v", id, sc.DependsOn)
			}
			if out := canonical(t, s.template.Outputs[stack.OutCanaryScheduleArn]); !strings.Contains(out, `{"Fn::GetAtt":["`+id+`","Arn"]}`) {
				t.Errorf("output %s is %s", stack.OutCanaryScheduleArn, out)
			}
			// Not an events rule: the only one is the worker's sweep.
			if rules := s.ofType("AWS::Events::Rule"); len(rules) != 1 {
				t.Errorf("%d events rules", len(rules))
			}
		})
	}
}

// The schedule's role: trusted by EventBridge Scheduler for this account
// only, exactly lambda:InvokeFunction on the canary function; and no
// other identity or resource policy lets anything invoke the canary.
func TestCanaryScheduleRole(t *testing.T) {
	for name, s := range map[string]*synthesized{"dev": dev, "prod": prod, "canary-30m": canaryCustom, "imported-secret": imported} {
		t.Run(name, func(t *testing.T) {
			roleID, role := s.byPath(t, stack.CanaryScheduleRoleID+"/Resource")
			trust := statementsOf(role.Properties["AssumeRolePolicyDocument"].(map[string]any))
			if len(trust) != 1 || trust[0]["Effect"] != "Allow" || trust[0]["Action"] != "sts:AssumeRole" ||
				canonical(t, trust[0]["Principal"]) != `{"Service":"scheduler.amazonaws.com"}` ||
				canonical(t, trust[0]["Condition"]) != `{"StringEquals":{"aws:SourceAccount":{"Ref":"AWS::AccountId"}}}` {
				t.Errorf("canary schedule role trust %s", canonical(t, trust))
			}
			if role.Properties["ManagedPolicyArns"] != nil || role.Properties["Policies"] != nil {
				t.Errorf("canary schedule role policies %v", role.Properties)
			}
			canaryID := s.functionID(t, stack.CanaryName)
			var statements []map[string]any
			invokers := map[string]bool{}
			for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
				for id, p := range s.ofType(typ) {
					roles, _ := p.Properties["Roles"].([]any)
					for _, st := range statementsOf(p.Properties["PolicyDocument"].(map[string]any)) {
						for _, r := range roles {
							if ref(r) == roleID {
								statements = append(statements, st)
							}
						}
						if strings.Contains(canonical(t, st["Resource"]), `"`+canaryID+`"`) {
							invokers[id] = true
						}
					}
				}
			}
			if len(statements) != 1 || statements[0]["Sid"] != stack.SidInvokeCanary || statements[0]["Effect"] != "Allow" ||
				canonical(t, statements[0]["Action"]) != `"lambda:InvokeFunction"` || getAtt(statements[0]["Resource"], "Arn") != canaryID ||
				statements[0]["Condition"] != nil || statements[0]["NotAction"] != nil || statements[0]["NotResource"] != nil {
				t.Errorf("canary schedule role statements %s, want only lambda:InvokeFunction on the canary function", canonical(t, statements))
			}
			policyID, _ := s.byPath(t, stack.CanaryScheduleRoleID+"/DefaultPolicy/Resource")
			if len(invokers) != 1 || !invokers[policyID] {
				t.Errorf("policies naming the canary function: %v, want only the schedule role's %s", invokers, policyID)
			}
			for id, p := range s.ofType("AWS::Lambda::Permission") {
				if getAtt(p.Properties["FunctionName"], "Arn") == canaryID || ref(p.Properties["FunctionName"]) == canaryID {
					t.Errorf("%s: a resource policy on the canary function: %s", id, canonical(t, p.Properties))
				}
			}
		})
	}
}

// The canary function: its own role and log group (TestFunctions,
// TestFunctionPolicies), ten minutes, 512 MB, exactly its environment, no
// retries of a failed run.
func TestCanaryFunction(t *testing.T) {
	if stack.CanaryTimeout > 15*time.Minute || stack.CanaryTimeout != 10*time.Minute || stack.Timeout(stack.CanaryName) != stack.CanaryTimeout ||
		stack.Memory(stack.CanaryName) != 512 {
		t.Errorf("canary timeout %v, memory %d", stack.Timeout(stack.CanaryName), stack.Memory(stack.CanaryName))
	}
	if !slices.Contains(stack.Functions(), stack.CanaryName) {
		t.Fatal("Functions() has no canary")
	}
	for name, c := range map[string]struct {
		s                *synthesized
		budget, share    string
		eventAge         float64
		upstreamSecretRf bool // the secret is created here (Ref), not imported by name
	}{
		"dev":             {dev, fmt.Sprint(canarycontract.DefaultBudget), fmt.Sprint(canarycontract.DefaultFillShare), 3600, true},
		"prod":            {prod, fmt.Sprint(canarycontract.DefaultBudget), fmt.Sprint(canarycontract.DefaultFillShare), 3600, true},
		"canary-30m":      {canaryCustom, "120", "0.5", 1800, true},
		"canary-off":      {canaryOff, "120", "0.5", 6 * 3600, true},
		"imported-secret": {imported, fmt.Sprint(canarycontract.DefaultBudget), fmt.Sprint(canarycontract.DefaultFillShare), 3600, false},
	} {
		t.Run(name, func(t *testing.T) {
			s := c.s
			id := s.functionID(t, stack.CanaryName)
			p := s.template.Resources[id].Properties
			if p["Timeout"] != float64(600) || p["MemorySize"] != float64(512) || p["FunctionName"] != nil {
				t.Errorf("canary timeout %v memory %v name %v", p["Timeout"], p["MemorySize"], p["FunctionName"])
			}
			if d, _ := p["Description"].(string); !strings.Contains(d, "canary") {
				t.Errorf("description %q", d)
			}
			env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
			tableID, _ := s.byPath(t, "Table/Resource")
			var secret any = "meridian/dev/upstream"
			if c.upstreamSecretRf {
				secretID, _ := s.byPath(t, "UpstreamSecret/Resource")
				secret = map[string]any{"Ref": secretID}
			}
			want := map[string]any{
				"MERIDIAN_TABLE":            map[string]any{"Ref": tableID},
				"MERIDIAN_LOG_LEVEL":        "info",
				"MERIDIAN_UPSTREAM_SECRET":  secret,
				canarycontract.EnvBudget:    c.budget,
				canarycontract.EnvFillShare: c.share,
				canarycontract.EnvNamespace: "Meridian/" + s.m.Config.Stage + "/Canary",
			}
			if canonical(t, env) != canonical(t, want) {
				t.Errorf("canary environment\n got %s\nwant %s", canonical(t, env), canonical(t, want))
			}
			// EventBridge Scheduler invokes it asynchronously: no retry of a
			// failed run, and a run not started is dropped once the next is due.
			var configs []resource
			for _, r := range s.ofType("AWS::Lambda::EventInvokeConfig") {
				if ref(r.Properties["FunctionName"]) == id {
					configs = append(configs, r)
				}
			}
			if len(configs) != 1 || configs[0].Properties["MaximumRetryAttempts"] != float64(0) ||
				configs[0].Properties["MaximumEventAgeInSeconds"] != c.eventAge || configs[0].Properties["Qualifier"] != "$LATEST" {
				t.Errorf("canary invoke configs %s", canonical(t, configs))
			}
			if n := len(s.ofType("AWS::Lambda::EventInvokeConfig")); n != 1 {
				t.Errorf("%d event invoke configs, want the canary's only", n)
			}
			// Its role: the canary's statements only (TestFunctionPolicies
			// checks them one by one), assumed by Lambda.
			_, role := s.byPath(t, "CanaryRole/Resource")
			if !strings.Contains(canonical(t, role.Properties["AssumeRolePolicyDocument"]), `"Service":"lambda.amazonaws.com"`) {
				t.Errorf("canary role trust %s", canonical(t, role.Properties["AssumeRolePolicyDocument"]))
			}
		})
	}
	// The namespace the stack sets is the contract's.
	if canarycontract.Namespace("dev") != "Meridian/dev/Canary" {
		t.Errorf("canary.Namespace(dev) = %q", canarycontract.Namespace("dev"))
	}
}

// One alarm per canaried operation on its Breach metric: the stage's
// namespace, the operation's dimension, Maximum per interval, at 1 or more
// in two runs in a row, missing data not breaching, alarm and OK actions
// to the alarm topic, named with the stack's prefix; none with the
// interval off.
func TestCanaryAlarms(t *testing.T) {
	ops := stack.CanaryOperations(registry.Default())
	for name, c := range map[string]struct {
		s      *synthesized
		period float64 // 0: no canary alarms
		share  string
	}{
		"dev": {dev, 3600, "0.8"}, "prod": {prod, 3600, "0.8"}, "canary-30m": {canaryCustom, 1800, "0.5"}, "canary-off": {canaryOff, 0, ""},
	} {
		t.Run(name, func(t *testing.T) {
			s := c.s
			topicID, _ := s.byPath(t, "AlarmTopic/Resource")
			prefix := stack.AlarmNamePrefix(s.m.Config.Stage)
			namespace := canarycontract.Namespace(s.m.Config.Stage)
			byOperation := map[string]resource{}
			for id, a := range s.ofType("AWS::CloudWatch::Alarm") {
				if a.Properties["MetricName"] != canarycontract.MetricBreach && a.Properties["Namespace"] != namespace {
					continue
				}
				dims, _ := a.Properties["Dimensions"].([]any)
				if len(dims) != 1 {
					t.Errorf("%s: dimensions %v", id, dims)
					continue
				}
				d := dims[0].(map[string]any)
				key, _ := d["Value"].(string)
				if d["Name"] != canarycontract.DimOperation {
					t.Errorf("%s: dimension %v", id, d)
				}
				if _, dup := byOperation[key]; dup {
					t.Errorf("two alarms on %s", key)
				}
				byOperation[key] = a
			}
			if c.period == 0 {
				if len(byOperation) != 0 {
					t.Errorf("canaryInterval=off: %d canary alarms", len(byOperation))
				}
				return
			}
			if len(byOperation) != len(ops) {
				t.Errorf("%d canary alarms, want %d (one per canaried operation)", len(byOperation), len(ops))
			}
			for _, key := range ops {
				a, ok := byOperation[key]
				if !ok {
					t.Errorf("%s: no canary alarm", key)
					continue
				}
				p := a.Properties
				if p["AlarmName"] != prefix+stack.CanaryAlarmID(key) || p["Namespace"] != namespace || p["MetricName"] != canarycontract.MetricBreach ||
					p["Statistic"] != "Maximum" || p["Period"] != c.period || p["EvaluationPeriods"] != float64(2) || p["DatapointsToAlarm"] != float64(2) ||
					p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["Threshold"] != float64(1) || p["TreatMissingData"] != "notBreaching" {
					t.Errorf("%s: alarm %s", key, canonical(t, p))
				}
				for _, actions := range []string{"AlarmActions", "OKActions"} {
					acts, _ := p[actions].([]any)
					if len(acts) != 1 || ref(acts[0]) != topicID {
						t.Errorf("%s: %s %v", key, actions, acts)
					}
				}
				desc, _ := p["AlarmDescription"].(string)
				for _, want := range []string{key, "failed", "fill rate", c.share + " of its baseline", "2 runs in a row"} {
					if !strings.Contains(desc, want) {
						t.Errorf("%s: description %q does not say %q", key, desc, want)
					}
				}
			}
		})
	}
}

// CloudFormation refuses a template of more than 500 resources; the
// canary's alarms (one per operation) must leave room to grow.
func TestTemplateSize(t *testing.T) {
	const limit, margin = 500, 50
	for name, s := range stacks() {
		n := len(s.template.Resources)
		t.Logf("%s: %d resources, %d outputs", name, n, len(s.template.Outputs))
		if n > limit-margin {
			t.Errorf("%s: %d resources, more than %d (CloudFormation's limit of %d less a margin of %d)", name, n, limit-margin, limit, margin)
		}
		if len(s.template.Outputs) > 200 {
			t.Errorf("%s: %d outputs", name, len(s.template.Outputs))
		}
	}
	// The canary's alarms are counted: dev has them, canary-off not.
	if d := len(dev.template.Resources) - len(canaryOff.template.Resources); d != len(stack.CanaryOperations(registry.Default()))+3 {
		t.Errorf("dev has %d resources more than canary-off, want the canary alarms, the schedule, its role and its policy", d)
	}
}

// The canary's context keys: defaults, values, and clear errors.
func TestCanaryConfigFromContext(t *testing.T) {
	cfg, err := stack.ConfigFromContext(awscdk.NewApp(nil))
	if err != nil || cfg.CanaryInterval != time.Hour || cfg.CanaryBudget != canarycontract.DefaultBudget ||
		cfg.CanaryFillShare != canarycontract.DefaultFillShare {
		t.Errorf("defaults: interval %v budget %d fill share %v (%v)", cfg.CanaryInterval, cfg.CanaryBudget, cfg.CanaryFillShare, err)
	}
	for _, c := range []struct {
		ctx      map[string]any
		interval time.Duration
		budget   int
		share    float64
	}{
		{map[string]any{"canaryInterval": "30m"}, 30 * time.Minute, canarycontract.DefaultBudget, canarycontract.DefaultFillShare},
		{map[string]any{"canaryInterval": "5m"}, 5 * time.Minute, canarycontract.DefaultBudget, canarycontract.DefaultFillShare},
		{map[string]any{"canaryInterval": "1h30m", "canaryBudget": "50"}, 90 * time.Minute, 50, canarycontract.DefaultFillShare},
		{map[string]any{"canaryInterval": "24h", "canaryFillShare": "1"}, 24 * time.Hour, canarycontract.DefaultBudget, 1},
		{map[string]any{"canaryInterval": "off"}, 0, canarycontract.DefaultBudget, canarycontract.DefaultFillShare},
		{map[string]any{"canaryInterval": " OFF "}, 0, canarycontract.DefaultBudget, canarycontract.DefaultFillShare},
		// cdk.json holds numbers as numbers.
		{map[string]any{"canaryBudget": 120, "canaryFillShare": 0.5}, time.Hour, 120, 0.5},
		{map[string]any{"canaryBudget": float64(1), "canaryFillShare": "0.05"}, time.Hour, 1, 0.05},
	} {
		cfg, err := stack.ConfigFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &c.ctx}))
		if err != nil || cfg.CanaryInterval != c.interval || cfg.CanaryBudget != c.budget || cfg.CanaryFillShare != c.share {
			t.Errorf("%v: interval %v budget %d fill share %v (%v)", c.ctx, cfg.CanaryInterval, cfg.CanaryBudget, cfg.CanaryFillShare, err)
		}
	}
	for _, c := range []struct {
		key, value string
		says       string
	}{
		{"canaryInterval", "hourly", "Go duration"},
		{"canaryInterval", "0", "5m to 24h"},
		{"canaryInterval", "4m", "5m to 24h"},
		{"canaryInterval", "-1h", "5m to 24h"},
		{"canaryInterval", "25h", "5m to 24h"},
		{"canaryInterval", "90s", "whole minutes"},
		{"canaryInterval", "5m30s", "whole minutes"},
		{"canaryBudget", "0", "positive whole number"},
		{"canaryBudget", "-3", "positive whole number"},
		{"canaryBudget", "1.5", "positive whole number"},
		{"canaryBudget", "lots", "positive whole number"},
		{"canaryFillShare", "0", "above 0 and at most 1"},
		{"canaryFillShare", "1.2", "above 0 and at most 1"},
		{"canaryFillShare", "-0.5", "above 0 and at most 1"},
		{"canaryFillShare", "NaN", "above 0 and at most 1"},
		{"canaryFillShare", "most", "above 0 and at most 1"},
	} {
		_, err := stack.ConfigFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{c.key: c.value}}))
		if err == nil || !strings.Contains(err.Error(), c.key+"=") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s=%s: error %v, want one naming the key and saying %q", c.key, c.value, err, c.says)
		}
	}
	// New refuses what ConfigFromContext would.
	bad, _ := stack.Preset(stack.StageDev)
	bad.CanaryBudget = 0
	if err := bad.CheckCanary(); err == nil {
		t.Error("a budget of 0 passes CheckCanary")
	}
	bad, _ = stack.Preset(stack.StageDev)
	bad.CanaryInterval = 7 * time.Minute / 2
	if err := bad.CheckCanary(); err == nil {
		t.Error("an interval of 3m30s passes CheckCanary")
	}
}
