package stack

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/jsii-runtime-go"

	"github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// The canary (issue 42): the canary function (functions/canary, CanaryName)
// runs on an EventBridge Scheduler schedule of its own, in the default
// schedule group (the monitors API may manage every schedule of the
// monitors' group, SchedulerGroup, and must not reach this one), every
// Config.CanaryInterval. It writes CloudWatch metrics in the embedded
// metric format (its log lines: no CloudWatch permission), and an alarm
// per canaried operation watches canary.MetricBreach.

// CanaryScheduleGroup is the canary schedule's group: the account's
// default group, which the stack neither creates nor deletes.
const CanaryScheduleGroup = "default"

// Construct ids and outputs of the canary.
const (
	CanaryScheduleID     = "CanarySchedule"
	CanaryScheduleRoleID = "CanaryScheduleRole"
	// OutCanaryFunctionName is the canary function's name (invoke it by
	// hand: aws lambda invoke --function-name NAME).
	OutCanaryFunctionName = "CanaryFunctionName"
	// OutCanaryScheduleArn is the canary schedule's ARN (with the interval
	// off, there is none).
	OutCanaryScheduleArn = "CanaryScheduleArn"
)

// CanaryOperations are the operations the canary may check, sorted: every
// registry data endpoint (not retired) that the upstream runner serves,
// that is, one with a provider in adapters.All(), less those of limited
// capacity (their shared monthly allowance is for callers), the rule of
// the canary's run (shared/canary) over every route a deployment may
// configure. Composite operations (search/all, the bundles, the web
// operations) are the pipeline's, with no provider of their own: their
// legs are canaried.
func CanaryOperations(reg *registry.Registry) []string {
	served := map[string]bool{}
	for _, p := range adapters.All() {
		for key := range p.Endpoints {
			served[key] = true
		}
	}
	var keys []string
	for key := range served {
		if e, ok := reg.Endpoint(key); ok && e.Kind == registry.Data && e.RetiredFor == "" && !e.LimitedCapacity {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

// CanaryRate is the schedule expression of an interval of whole minutes:
// rate(N hours) when it is whole hours, else rate(N minutes) (the unit
// singular for 1).
func CanaryRate(d time.Duration) string {
	n, unit := int64(d/time.Minute), "minute"
	if d%time.Hour == 0 {
		n, unit = int64(d/time.Hour), "hour"
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("rate(%d %s)", n, unit)
}

// CanaryAlarmID is the construct id of an operation's canary alarm; the
// alarm's name is AlarmNamePrefix(stage) followed by it.
func CanaryAlarmID(key string) string { return "CanaryBreach" + cid(key) }

// canaryEnv is the canary's own environment (shared/canary).
func (m *Meridian) canaryEnv(env map[string]*string) {
	env[canary.EnvBudget] = jsii.String(strconv.Itoa(m.Config.CanaryBudget))
	env[canary.EnvFillShare] = jsii.String(strconv.FormatFloat(m.Config.CanaryFillShare, 'g', -1, 64))
	env[canary.EnvNamespace] = jsii.String(canary.Namespace(m.Config.Stage))
}

// canaryEventAge is how long Lambda keeps a scheduled run it could not
// start (throttled): no longer than the interval (the next run comes
// then), within Lambda's 1 minute to 6 hours.
func (c Config) canaryEventAge() time.Duration {
	if c.CanaryInterval <= 0 {
		return 6 * time.Hour
	}
	return min(c.CanaryInterval, 6*time.Hour)
}

// canarySchedule declares the canary's schedule and the role it assumes,
// which may invoke the canary function and nothing else. With the
// interval off there is neither.
func (m *Meridian) canarySchedule() {
	st := m.Stack
	fn := m.Functions[CanaryName]
	m.out(OutCanaryFunctionName, *fn.FunctionName(), "The canary function: runs on its schedule ("+CtxCanaryInterval+"), or by hand")
	if m.Config.CanaryInterval <= 0 {
		return
	}
	// Assumed by EventBridge Scheduler for this account's schedules only
	// (aws:SourceAccount, against the confused deputy); its one statement:
	// invoking the canary function (the unqualified ARN the schedule
	// targets).
	m.CanaryScheduleRole = awsiam.NewRole(st, jsii.String(CanaryScheduleRoleID), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String(SchedulerPrincipal), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"aws:SourceAccount": st.Account()},
			},
		}),
		Description: jsii.String("Meridian " + m.Config.Stage + ": the canary's schedule invokes the canary function"),
	})
	m.CanaryScheduleRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String(SidInvokeCanary), Effect: awsiam.Effect_ALLOW,
		Actions:   jsii.Strings("lambda:InvokeFunction"),
		Resources: &[]*string{fn.FunctionArn()},
	}))
	m.CanarySchedule = awsscheduler.NewCfnSchedule(st, jsii.String(CanaryScheduleID), &awsscheduler.CfnScheduleProps{
		Description: jsii.String(fmt.Sprintf("Meridian %s: the canary checks every available data operation (every %s)",
			m.Config.Stage, fmtInterval(m.Config.CanaryInterval))),
		GroupName:          jsii.String(CanaryScheduleGroup),
		ScheduleExpression: jsii.String(CanaryRate(m.Config.CanaryInterval)),
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
		State:              jsii.String("ENABLED"),
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     fn.FunctionArn(),
			RoleArn: m.CanaryScheduleRole.RoleArn(),
			Input:   jsii.String("{}"),
			// A run that could not be delivered is not retried: the next
			// one comes at the next interval.
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{MaximumRetryAttempts: jsii.Number(0)},
		},
	})
	// The first run finds its permission in place.
	if p := m.CanaryScheduleRole.Node().TryFindChild(jsii.String("DefaultPolicy")); p != nil {
		m.CanarySchedule.Node().AddDependency(p)
	}
	m.out(OutCanaryScheduleArn, *m.CanarySchedule.AttrArn(), "EventBridge Scheduler schedule of the canary (default group, "+
		CanaryRate(m.Config.CanaryInterval)+")")
}

// canaryAlarms adds, with the interval on, an alarm per canaried
// operation: its Breach metric (Maximum per period of one interval) at 1
// in two periods in a row, that is, two runs in a row that failed or
// whose fill rate fell below the fill share of its baseline. Missing data
// (the operation had no route, or the budget ran out before it) does not
// breach.
func (m *Meridian) canaryAlarms(alarm func(id, description string, metric awscloudwatch.IMetric, threshold float64, periods, datapoints int)) {
	interval := m.Config.CanaryInterval
	if interval <= 0 {
		return
	}
	namespace := canary.Namespace(m.Config.Stage)
	for _, key := range CanaryOperations(m.reg) {
		metric := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String(namespace),
			MetricName:    jsii.String(canary.MetricBreach),
			DimensionsMap: &map[string]*string{canary.DimOperation: jsii.String(key)},
			Statistic:     jsii.String("Maximum"),
			Period:        duration(interval),
		})
		alarm(CanaryAlarmID(key), fmt.Sprintf("Canary: %s failed, or its fill rate fell below %g of its baseline, "+
			"on %d runs in a row (a run every %s; %s %s/%s=%s)", key, m.Config.CanaryFillShare, CanaryAlarmRuns,
			fmtInterval(interval), namespace, canary.MetricBreach, canary.DimOperation, key), metric, 1, CanaryAlarmRuns, CanaryAlarmRuns)
	}
}

// CanaryAlarmRuns is how many runs in a row must breach before an
// operation's canary alarm fires.
const CanaryAlarmRuns = 2
