package stack

import (
	"sort"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/jsii-runtime-go"

	"github.com/meridian-data/meridian/shared/monitors"
)

// SchedulerPrincipal is the service that assumes the scheduler role.
const SchedulerPrincipal = "scheduler.amazonaws.com"

// ScheduleActions are what the monitors API does with a monitor's
// schedule (shared/monitors/awsscheduler): update it or create it, delete
// it, and read it. Nothing else of EventBridge Scheduler, and only in the
// monitors' schedule group.
var ScheduleActions = []string{"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule", "scheduler:UpdateSchedule"}

// WorkerFunctionName is the worker function's name in a stage's stack
// (Meridian-dev-worker). The schedules target it, and the worker's own
// environment names it (MERIDIAN_SCHEDULER_TARGET_ARN), which a reference
// to the function from its own properties cannot do.
func WorkerFunctionName(stage string) string { return StackName(stage) + "-" + WorkerName }

// WorkerARN is the worker function's unqualified ARN, built from its name.
func (m *Meridian) WorkerARN() *string {
	st := m.Stack
	return awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("arn:"), st.Partition(), jsii.String(":lambda:"), st.Region(), jsii.String(":"), st.Account(),
		jsii.String(":function:" + WorkerFunctionName(m.Config.Stage)),
	})
}

// scheduler declares the monitors' schedule group and the role its
// schedules assume, which may invoke the worker and nothing else, and
// lets the monitors API's functions (MonitorSchedulers) manage schedules
// in that group and pass that role to them, with the environment
// awsscheduler.NewFromEnv reads. EventBridge Scheduler deletes a group's
// schedules with the group; the group is retained in prod like the other
// stateful resources.
func (m *Meridian) scheduler() {
	st := m.Stack
	worker := m.Functions[WorkerName]
	// No name: CloudFormation makes a unique one (Ref is the name).
	m.SchedulerGroup = awsscheduler.NewCfnScheduleGroup(st, jsii.String("SchedulerGroup"), &awsscheduler.CfnScheduleGroupProps{})
	m.SchedulerGroup.ApplyRemovalPolicy(m.Config.removal(), nil)
	group := m.SchedulerGroup.Ref()

	// The schedules' role: assumed by EventBridge Scheduler for this
	// account's schedules only (aws:SourceAccount, against the confused
	// deputy), allowed to invoke the worker function (the unqualified ARN
	// each schedule targets, WorkerARN) and nothing else.
	m.SchedulerRole = awsiam.NewRole(st, jsii.String("SchedulerRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String(SchedulerPrincipal), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"aws:SourceAccount": st.Account()},
			},
		}),
		Description: jsii.String("Meridian " + m.Config.Stage + ": the monitors' schedules invoke the worker"),
	})
	m.SchedulerRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String(SidInvokeWorker), Effect: awsiam.Effect_ALLOW,
		Actions:   jsii.Strings("lambda:InvokeFunction"),
		Resources: &[]*string{worker.FunctionArn()},
	}))

	schedules := awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("arn:"), st.Partition(), jsii.String(":scheduler:"), st.Region(), jsii.String(":"), st.Account(),
		jsii.String(":schedule/"), group, jsii.String("/*"),
	})
	names := make([]string, 0, len(m.MonitorSchedulers))
	for name := range m.MonitorSchedulers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fn, role := m.Functions[name], m.Roles[name]
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String(SidSchedules), Effect: awsiam.Effect_ALLOW,
			Actions:   jsii.Strings(ScheduleActions...),
			Resources: &[]*string{schedules},
		}))
		// CreateSchedule and UpdateSchedule pass the role to the schedule.
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String(SidPassSchedulerRole), Effect: awsiam.Effect_ALLOW,
			Actions:   jsii.Strings("iam:PassRole"),
			Resources: &[]*string{m.SchedulerRole.RoleArn()},
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"iam:PassedToService": SchedulerPrincipal},
			},
		}))
		fn.AddEnvironment(jsii.String(monitors.EnvSchedulerGroup), group, nil)
		fn.AddEnvironment(jsii.String(monitors.EnvSchedulerRoleARN), m.SchedulerRole.RoleArn(), nil)
		fn.AddEnvironment(jsii.String(monitors.EnvSchedulerTargetARN), m.WorkerARN(), nil)
	}
	m.out("SchedulerGroupName", *group, "EventBridge Scheduler schedule group of the monitors' schedules ("+monitors.EnvSchedulerGroup+")")
	m.out("SchedulerRoleArn", *m.SchedulerRole.RoleArn(), "Role the monitors' schedules assume: lambda:InvokeFunction on the worker only")
}
