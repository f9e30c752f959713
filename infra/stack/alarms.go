package stack

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/jsii-runtime-go"
)

// Alarm thresholds.
const (
	// Api5xxPercent: server errors as a share of requests over 5 minutes,
	// in 2 of 3 periods (a single upstream outage answers 502s, which
	// count: they are what callers see).
	Api5xxPercent = 5
	// QueueAgeSeconds: the oldest usage or reconciliation message has
	// waited this long, so the worker is not keeping up (or failing) and
	// refunds pending reconciliation are late.
	QueueAgeSeconds = 600
	// JobsQueueAgeSeconds: the oldest web job has waited this long to
	// start (a job runs in minutes; callers poll /v1/web/jobs/{id}).
	JobsQueueAgeSeconds = 600
)

// Statement ids of the alarm key's policy and the alarm topic's policy.
const (
	SidKeyAdmin    = "KeyAdministration"
	SidKeyAlarms   = "CloudWatchAlarmsPublish"
	SidTopicAlarms = "CloudWatchAlarmsOfThisStack"
)

// AlarmNamePrefix begins the name of every alarm of a stage's stack
// (STACK-ID, e.g. Meridian-dev-DeadLetters), which the topic policy's
// aws:SourceArn condition matches.
func AlarmNamePrefix(stage string) string { return StackName(stage) + "-" }

// alarms: every alarm notifies one SNS topic, encrypted with a customer
// managed key (CloudWatch cannot publish to a topic under the AWS managed
// SNS key). Subscribe with -c alarmEmail=... or any SNS subscription.
func (m *Meridian) alarms() {
	st := m.Stack
	key := awskms.NewKey(st, jsii.String("AlarmKey"), &awskms.KeyProps{
		Description:       jsii.String("Meridian " + m.Config.Stage + ": encrypts the alarm topic"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     m.Config.removal(),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
		Policy: awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String(SidKeyAdmin),
				Principals: &[]awsiam.IPrincipal{awsiam.NewAccountRootPrincipal()},
				Actions:    jsii.Strings("kms:*"),
				Resources:  jsii.Strings("*"),
			}),
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String(SidKeyAlarms),
				Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
				Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
				Resources:  jsii.Strings("*"),
				Conditions: &map[string]interface{}{
					"StringEquals": map[string]interface{}{"aws:SourceAccount": st.Account()},
				},
			}),
		}}),
	})
	topic := awssns.NewTopic(st, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("Meridian " + m.Config.Stage + " alarms"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
	})
	m.AlarmTopic = topic
	// With a topic policy (EnforceSSL writes one) the default policy is
	// gone, and the SSL-only Deny alone would let no one publish: allow
	// CloudWatch, for this account's alarms of this stack only.
	prefix := *st.StackName() + "-" // AlarmNamePrefix
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(SidTopicAlarms),
		Effect:     awsiam.Effect_ALLOW,
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{topic.TopicArn()},
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"aws:SourceAccount": st.Account()},
			"ArnLike": map[string]interface{}{"aws:SourceArn": awscdk.Fn_Join(jsii.String(""), &[]*string{
				jsii.String("arn:"), st.Partition(), jsii.String(":cloudwatch:"), st.Region(), jsii.String(":"),
				st.Account(), jsii.String(":alarm:" + prefix + "*"),
			})},
		},
	}))
	if m.Config.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(m.Config.AlarmEmail), nil))
	}
	action := awscloudwatchactions.NewSnsAction(topic)
	alarm := func(id, description string, metric awscloudwatch.IMetric, threshold float64, periods, datapoints int) {
		a := awscloudwatch.NewAlarm(st, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(prefix + id),
			Metric:             metric,
			AlarmDescription:   jsii.String(description),
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			DatapointsToAlarm:  jsii.Number(datapoints),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
	}
	five := duration(5 * time.Minute)

	alarm("Api5xxRate", fmt.Sprintf("HTTP API: 5xx answers are %d%% or more of requests (5-minute periods, 2 of 3)", Api5xxPercent),
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String("IF(requests > 0, 100 * errors / requests, 0)"),
			Label:      jsii.String("5xx %"),
			Period:     five,
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				"errors":   m.Api.MetricServerError(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
				"requests": m.Api.MetricCount(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
			},
		}), Api5xxPercent, 3, 2)

	for _, name := range Functions() {
		fn := m.Functions[name]
		id := cid(name)
		alarm(id+"Errors", "Function "+name+": invocation errors (crashes, timeouts, start-up failures; the pipeline answers its own faults with envelopes)",
			fn.MetricErrors(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}), 1, 1, 1)
		alarm(id+"Throttles", "Function "+name+": throttled invocations (reserved or account concurrency exhausted)",
			fn.MetricThrottles(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}), 1, 1, 1)
	}

	alarm("DeadLetters", fmt.Sprintf("Usage DLQ: a message failed %d receives (inspect, fix, redrive)", MaxReceiveCount),
		m.DLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: duration(time.Minute), Statistic: jsii.String("Maximum"),
		}), 1, 1, 1)
	alarm("ReconciliationBacklog", fmt.Sprintf("Usage queue: the oldest message is %d s old or more (the worker is behind; pending refunds wait)", QueueAgeSeconds),
		m.Queue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{
			Period: five, Statistic: jsii.String("Maximum"),
		}), QueueAgeSeconds, 1, 1)

	alarm("JobDeadLetters", fmt.Sprintf("Jobs DLQ: a web job failed %d receives and stays unfinished for its caller (inspect, fix, redrive)", JobsMaxReceiveCount),
		m.JobsDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: duration(time.Minute), Statistic: jsii.String("Maximum"),
		}), 1, 1, 1)
	alarm("JobsBacklog", fmt.Sprintf("Jobs queue: the oldest job is %d s old or more (the worker is behind or failing; callers wait)", JobsQueueAgeSeconds),
		m.JobsQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{
			Period: five, Statistic: jsii.String("Maximum"),
		}), JobsQueueAgeSeconds, 1, 1)

	m.canaryAlarms(alarm)

	m.out("AlarmTopicArn", *topic.TopicArn(), "SNS topic every alarm notifies (subscribe with -c alarmEmail=... or any SNS subscription)")
}
