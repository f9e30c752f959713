package stack

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store/dynamostore"
)

// AdminPrefix is the operator API's path prefix: its routes are
// IAM-authorized (SigV4) in front of the application's x-admin-token.
const AdminPrefix = "/admin"

// IsAdminRoute says whether a registry route belongs to the operator API.
func IsAdminRoute(r registry.Route) bool {
	return r.Path == AdminPrefix || strings.HasPrefix(r.Path, AdminPrefix+"/")
}

// Meridian is the deployed system, with handles for tests.
type Meridian struct {
	Stack     awscdk.Stack
	Config    Config
	Functions map[string]awslambda.Function
	Roles     map[string]awsiam.Role
	LogGroups map[string]awslogs.LogGroup
	URLs      map[string]awslambda.FunctionUrl
	Api       awsapigatewayv2.HttpApi
	ApiStage  awsapigatewayv2.HttpStage
	Table     awsdynamodb.Table
	Queue     awssqs.Queue
	DLQ       awssqs.Queue
	// JobsQueue holds the web jobs accepted with async=1 (the worker runs
	// them), JobsDLQ the ones that failed JobsMaxReceiveCount receives.
	JobsQueue awssqs.Queue
	JobsDLQ   awssqs.Queue
	// SchedulerGroup holds the monitors' EventBridge Scheduler schedules,
	// which assume SchedulerRole to invoke the worker.
	SchedulerGroup awsscheduler.CfnScheduleGroup
	SchedulerRole  awsiam.Role
	// CanarySchedule runs the canary function every CanaryInterval (in
	// the default schedule group), assuming CanaryScheduleRole; both nil
	// with the interval off.
	CanarySchedule     awsscheduler.CfnSchedule
	CanaryScheduleRole awsiam.Role
	// JobAcceptors send accepted web jobs to the jobs queue;
	// MonitorSchedulers manage the monitors' schedules (with reasons).
	JobAcceptors      map[string][]string
	MonitorSchedulers map[string][]string
	Secret            awssecretsmanager.ISecret
	// SecretReaders are the functions given the upstream secret, with reasons.
	SecretReaders map[string][]string
	// AdminSecret holds the operator token (a plain string), readable by
	// AdminSecretReaders only.
	AdminSecret        awssecretsmanager.Secret
	AdminSecretReaders map[string][]string
	// ModelRunners are the functions that run AI endpoints, with reasons;
	// with a model configured only they get MERIDIAN_MODEL_* and, with
	// Bedrock, the permission to invoke it.
	ModelRunners map[string][]string
	AlarmTopic   awssns.Topic

	reg *registry.Registry
}

// New builds the stack. The stage's settings come from cfg (see
// ConfigFromContext); nothing stage-specific is decided elsewhere.
func New(scope constructs.Construct, cfg Config, props *awscdk.StackProps) *Meridian {
	if err := cfg.Model.Validate(); err != nil {
		panic("stack: " + err.Error()) // ConfigFromContext reports the same error before synthesis
	}
	if err := cfg.CheckCanary(); err != nil {
		panic("stack: " + err.Error()) // likewise
	}
	if props == nil {
		props = &awscdk.StackProps{}
	}
	if props.Description == nil {
		props.Description = jsii.String("Meridian (" + cfg.Stage + "): credit-metered public data API")
	}
	st := awscdk.NewStack(scope, jsii.String(StackName(cfg.Stage)), props)
	awscdk.Tags_Of(st).Add(jsii.String("project"), jsii.String("meridian"), nil)
	awscdk.Tags_Of(st).Add(jsii.String("stage"), jsii.String(cfg.Stage), nil)

	reg := registry.Default()
	cfg.ReservedConcurrency = cfg.Reservations(StreamingFunctions(reg))
	m := &Meridian{
		Stack: st, Config: cfg,
		Functions: map[string]awslambda.Function{}, Roles: map[string]awsiam.Role{},
		LogGroups: map[string]awslogs.LogGroup{}, URLs: map[string]awslambda.FunctionUrl{},
		SecretReaders: SecretReaders(reg), AdminSecretReaders: AdminSecretReaders(reg),
		ModelRunners: ModelRunners(reg),
		JobAcceptors: JobAcceptors(reg), MonitorSchedulers: MonitorSchedulers(reg),
		reg: reg,
	}
	if cfg.Model.Provider == ModelOpenAI {
		for name := range m.ModelRunners {
			addReason(m.SecretReaders, name, ModelSecretReason)
		}
	}
	m.table()
	m.queues()
	m.secret()
	m.adminSecret()
	for _, name := range Functions() {
		m.function(name)
	}
	m.scheduler()
	m.canarySchedule()
	m.api(reg)
	m.streaming(reg)
	m.worker()
	m.alarms()
	m.operatorPolicy()
	m.suppressions()
	return m
}

func (m *Meridian) out(id, value, description string) {
	awscdk.NewCfnOutput(m.Stack, jsii.String(id), &awscdk.CfnOutputProps{
		Value: jsii.String(value), Description: jsii.String(description),
	})
}

// table declares exactly dynamostore.Schema: keys, attribute types,
// billing mode and the global secondary indexes, with TTL on
// dynamostore.AttrExpiresAt (which CreateTableInput cannot carry).
func (m *Meridian) table() {
	schema := dynamostore.Schema("")
	types := map[string]awsdynamodb.AttributeType{}
	for _, d := range schema.AttributeDefinitions {
		switch d.AttributeType {
		case "S":
			types[*d.AttributeName] = awsdynamodb.AttributeType_STRING
		case "N":
			types[*d.AttributeName] = awsdynamodb.AttributeType_NUMBER
		case "B":
			types[*d.AttributeName] = awsdynamodb.AttributeType_BINARY
		default:
			panic(fmt.Sprintf("dynamostore.Schema: attribute %s has type %q", *d.AttributeName, d.AttributeType))
		}
	}
	keys := func(elems []ddbKey) (pk, sk *awsdynamodb.Attribute) {
		for _, e := range elems {
			a := &awsdynamodb.Attribute{Name: jsii.String(e.name), Type: types[e.name]}
			if e.hash {
				pk = a
			} else {
				sk = a
			}
		}
		return pk, sk
	}
	if schema.BillingMode != "PAY_PER_REQUEST" {
		panic("dynamostore.Schema: only on-demand billing is deployed")
	}
	pk, sk := keys(keySchema(schema.KeySchema))
	m.Table = awsdynamodb.NewTable(m.Stack, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:        pk,
		SortKey:             sk,
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(dynamostore.AttrExpiresAt),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(m.Config.Prod),
		RemovalPolicy:      m.Config.removal(),
	})
	for _, g := range schema.GlobalSecondaryIndexes {
		gpk, gsk := keys(keySchema(g.KeySchema))
		var projection awsdynamodb.ProjectionType
		switch g.Projection.ProjectionType {
		case "KEYS_ONLY":
			projection = awsdynamodb.ProjectionType_KEYS_ONLY
		case "ALL":
			projection = awsdynamodb.ProjectionType_ALL
		default:
			panic(fmt.Sprintf("dynamostore.Schema: index %s: projection %q is not deployed", *g.IndexName, g.Projection.ProjectionType))
		}
		m.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName: g.IndexName, PartitionKey: gpk, SortKey: gsk, ProjectionType: projection,
		})
	}
	m.out("TableName", *m.Table.TableName(), "DynamoDB table (MERIDIAN_TABLE)")
}

// queues: the usage queue (usage events and reconciliations) and the jobs
// queue (web jobs), each with its dead-letter queue, all SQS-encrypted and
// SSL-only. All are retained in prod: refund and settle reconciliations
// waiting there are money owed or earned, a queued job holds a
// reservation, and deleting the stack must not drop them.
func (m *Meridian) queues() {
	m.Queue, m.DLQ = m.queuePair("", MaxReceiveCount)
	m.out("QueueUrl", *m.Queue.QueueUrl(), "SQS queue of usage events and reconciliations (MERIDIAN_QUEUE_URL)")
	m.out("DeadLetterQueueUrl", *m.DLQ.QueueUrl(), "Messages the worker could not apply after "+fmt.Sprint(MaxReceiveCount)+" receives")
	m.JobsQueue, m.JobsDLQ = m.queuePair("Jobs", JobsMaxReceiveCount)
	m.out("JobsQueueUrl", *m.JobsQueue.QueueUrl(), "SQS queue of web jobs accepted with async=1, run by the worker ("+queue.EnvJobsQueueURL+")")
	m.out("JobsDeadLetterQueueUrl", *m.JobsDLQ.QueueUrl(), "Web jobs the worker could not run after "+fmt.Sprint(JobsMaxReceiveCount)+" receives")
}

// queuePair declares the queue <prefix>Queue and its dead-letter queue
// <prefix>DeadLetterQueue, which takes a message after maxReceives.
func (m *Meridian) queuePair(prefix string, maxReceives int) (queue, dlq awssqs.Queue) {
	dlq = awssqs.NewQueue(m.Stack, jsii.String(prefix+"DeadLetterQueue"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: duration(QueueRetention),
		RemovalPolicy:   m.Config.removal(),
	})
	queue = awssqs.NewQueue(m.Stack, jsii.String(prefix+"Queue"), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		RetentionPeriod:   duration(QueueRetention),
		VisibilityTimeout: duration(VisibilityTimeout),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(maxReceives)},
		RemovalPolicy:     m.Config.removal(),
	})
	return queue, dlq
}

// secret: the JSON object of upstream credentials. Created holding {}
// (operators add the upstream keys; CloudFormation writes the value again
// only if the template's value changes), or an existing secret named by
// upstreamSecretName.
func (m *Meridian) secret() {
	if name := m.Config.UpstreamSecretName; name != "" {
		m.Secret = awssecretsmanager.Secret_FromSecretNameV2(m.Stack, jsii.String("UpstreamSecret"), jsii.String(name))
	} else {
		m.Secret = awssecretsmanager.NewSecret(m.Stack, jsii.String("UpstreamSecret"), &awssecretsmanager.SecretProps{
			Description: jsii.String("Meridian " + m.Config.Stage + ": upstream credentials, one JSON object"),
			// Not a secret: the empty object the functions can parse
			// until operators write the credentials.
			SecretStringValue: awscdk.SecretValue_UnsafePlainText(jsii.String(EmptyUpstreamSecret)),
			RemovalPolicy:     m.Config.removal(),
		})
	}
	m.out("UpstreamSecretArn", *m.Secret.SecretArn(), "Secrets Manager secret (MERIDIAN_UPSTREAM_SECRET): a JSON object of upstream variables")
}

// EmptyUpstreamSecret is the created upstream secret's first value.
const EmptyUpstreamSecret = "{}"

// AdminTokenLength is the length of the generated operator token
// (letters and digits).
const AdminTokenLength = 48

// adminSecret: the operator token, generated, the secret's whole value (a
// plain string, no JSON). Only AdminSecretReaders (the service function)
// get MERIDIAN_ADMIN_SECRET and the permission to read it; operators read
// it through the exported operator policy.
func (m *Meridian) adminSecret() {
	m.AdminSecret = awssecretsmanager.NewSecret(m.Stack, jsii.String("AdminSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("Meridian " + m.Config.Stage + ": the operator token (x-admin-token), a plain string"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			ExcludePunctuation: jsii.Bool(true),
			IncludeSpace:       jsii.Bool(false),
			PasswordLength:     jsii.Number(AdminTokenLength),
		},
		RemovalPolicy: m.Config.removal(),
	})
	m.out("AdminSecretArn", *m.AdminSecret.SecretArn(), "Secrets Manager secret (MERIDIAN_ADMIN_SECRET): the operator token, a plain string")
}

// secretEnv is the value of MERIDIAN_UPSTREAM_SECRET.
func (m *Meridian) secretEnv() string {
	if m.Config.UpstreamSecretName != "" {
		return m.Config.UpstreamSecretName
	}
	return *m.Secret.SecretArn()
}

var idPart = regexp.MustCompile(`[^A-Za-z0-9]+`)

// cid turns a function name into a construct id part: "worker" -> "Worker".
func cid(name string) string {
	var b strings.Builder
	for _, p := range idPart.Split(name, -1) {
		if p != "" {
			b.WriteString(strings.ToUpper(p[:1]) + p[1:])
		}
	}
	return b.String()
}

// function declares one Lambda function with its own role, log group and
// least-privilege policy.
func (m *Meridian) function(name string) {
	id := cid(name)
	logs := awslogs.NewLogGroup(m.Stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     m.Config.LogRetention,
		RemovalPolicy: m.Config.removal(),
	})
	role := awsiam.NewRole(m.Stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("Meridian " + m.Config.Stage + " function " + name),
	})
	env := map[string]*string{
		app.EnvTable:    m.Table.TableName(),
		app.EnvLogLevel: jsii.String(m.Config.LogLevel),
	}
	if slices.Contains(QueueActions(name), "sqs:SendMessage") {
		env[app.EnvQueueURL] = m.Queue.QueueUrl()
	}
	if slices.Contains(JobsQueueActions(m.reg, name), "sqs:SendMessage") { // the worker consumes only
		env[queue.EnvJobsQueueURL] = m.JobsQueue.QueueUrl()
	}
	if m.Config.FairUse != "" {
		env[app.EnvFairUse] = jsii.String(m.Config.FairUse)
	}
	if m.Config.ErrorsURL != "" {
		env[app.EnvErrorsURL] = jsii.String(m.Config.ErrorsURL)
	}
	if _, ok := m.SecretReaders[name]; ok {
		env[app.EnvUpstreamSecret] = jsii.String(m.secretEnv())
	}
	if _, ok := m.AdminSecretReaders[name]; ok {
		env[app.EnvAdminSecret] = m.AdminSecret.SecretArn()
	}
	if _, ok := m.ModelRunners[name]; ok && m.Config.Model.Enabled() {
		m.modelEnv(env)
	}
	if name == CanaryName {
		m.canaryEnv(env)
	}
	props := &awslambda.FunctionProps{
		Description:  jsii.String(describe(name)),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(m.Config.BuildDir, name)), nil),
		MemorySize:   jsii.Number(Memory(name)),
		Timeout:      duration(Timeout(name)),
		Role:         role,
		Environment:  &env,
		LogGroup:     logs,
		// The functions write JSON lines (log/slog); Lambda's own lines
		// (START, END, REPORT) become JSON too, and Lambda filters at the
		// same level as MERIDIAN_LOG_LEVEL.
		LoggingFormat:         awslambda.LoggingFormat_JSON,
		ApplicationLogLevelV2: applicationLogLevel(m.Config.LogLevel),
		SystemLogLevelV2:      awslambda.SystemLogLevel_INFO,
	}
	if n, ok := m.Config.ReservedConcurrency[name]; ok {
		props.ReservedConcurrentExecutions = jsii.Number(n)
	}
	if name == WorkerName {
		// Named, so its ARN (WorkerARN) can be written into its own
		// environment: a reference to itself would be a cycle.
		props.FunctionName = jsii.String(WorkerFunctionName(m.Config.Stage))
	}
	if name == CanaryName {
		// EventBridge Scheduler invokes it asynchronously: a run that
		// failed is not run again (Lambda's default is twice more, each
		// with a whole budget of source requests), and one Lambda could
		// not start is dropped once the next is due.
		props.RetryAttempts = jsii.Number(0)
		props.MaxEventAge = duration(m.Config.canaryEventAge())
	}
	fn := awslambda.NewFunction(m.Stack, jsii.String(id+"Function"), props)
	m.Functions[name], m.Roles[name], m.LogGroups[name] = fn, role, logs
	m.grants(name, role, logs)
}

func describe(name string) string {
	if name == WorkerName {
		return "Meridian worker: usage events and reconciliations, and web jobs, from SQS; monitor runs from EventBridge Scheduler; " +
			"every minute, the outbox and the sweep of expired reservations"
	}
	if name == CanaryName {
		return "Meridian canary: on its EventBridge Scheduler schedule, checks every available data operation on each " +
			"configured route within a budget of source requests, and writes CloudWatch metrics (shared/canary)"
	}
	return "Meridian " + name + " family (API Gateway HTTP API, payload 2.0)"
}

func applicationLogLevel(level string) awslambda.ApplicationLogLevel {
	switch level {
	case "debug":
		return awslambda.ApplicationLogLevel_DEBUG
	case "warn":
		return awslambda.ApplicationLogLevel_WARN
	case "error":
		return awslambda.ApplicationLogLevel_ERROR
	}
	return awslambda.ApplicationLogLevel_INFO
}

// Statement ids of the functions' policies.
const (
	SidLogs       = "WriteOwnLogs"
	SidTable      = "Table"
	SidLeaseIndex = "LeaseIndex"
	SidQueue      = "UsageQueue"
	SidJobsQueue  = "JobsQueue"
	// The monitors' schedules (MonitorSchedulers only): managing them in
	// the schedule group, and passing the scheduler role to them.
	SidSchedules         = "ManageMonitorSchedules"
	SidPassSchedulerRole = "PassSchedulerRole"
	// The scheduler role's only statement: invoking the worker.
	SidInvokeWorker = "InvokeWorker"
	// The canary schedule role's only statement: invoking the canary.
	SidInvokeCanary = "InvokeCanary"
	SidSecret       = "ReadUpstreamSecret"
	SidAdminSecret  = "ReadOperatorSecret"
	SidModel        = "InvokeAssistModel" // the AI-assist model on Bedrock (ModelRunners only)
	// The operator policy's statements.
	SidOperatorApi   = "InvokeOperatorApi"
	SidOperatorToken = "ReadOperatorToken"
)

// WildcardReasons explains every policy statement that carries a wildcard
// in an action or a resource, by statement id. A test walks every policy
// of the template and fails on a wildcard whose statement is not here.
var WildcardReasons = map[string]string{
	SidLogs: "Lambda creates the log streams of the function's own log group at run time, with names it " +
		"chooses (date and instance); the resource is that one log group and its streams (log-group:NAME:*)",
	SidSecret: "only when the secret is imported by name (upstreamSecretName): Secrets Manager appends six " +
		"random characters to a secret's ARN, matched by -??????; a created secret is named by its full ARN",
	SidModel: "only for a Bedrock cross-region inference profile: Bedrock serves the profile's requests in any of " +
		"its destination regions and authorizes the foundation model there, so the model's ARN has the region * " +
		"(arn:PARTITION:bedrock:*::foundation-model/MODEL, the form AWS documents); the model itself is named exactly",
	SidSchedules: "a monitor's schedule is named by the monitor's id, made at run time: the resource is every schedule " +
		"of the monitors' schedule group and nothing else (schedule/GROUP/*)",
	SidOperatorApi: "the operator API is every method (*) of /admin and of every path under /admin/ (a greedy " +
		"route) of this API's $default stage; nothing else in the API",
	SidKeyAdmin: "a key policy's Resource \"*\" is the key itself; this default statement lets the account's " +
		"IAM policies manage the key (without it the key can become unmanageable)",
	SidKeyAlarms: "a key policy's Resource \"*\" is the key itself; kms:GenerateDataKey* is what SNS asks of the " +
		"key when CloudWatch publishes to the encrypted alarm topic (AWS documents this pair)",
	SidTopicAlarms: "the Resource is the topic itself; the wildcard is in the aws:SourceArn condition: CloudWatch " +
		"may publish for this stack's alarms only, every one named STACK-ID (AlarmNamePrefix), so " +
		"arn:PARTITION:cloudwatch:REGION:ACCOUNT:alarm:STACK-* matches them and no other alarm",
}

// PermissionReasons explains the wildcards of the functions' resource
// policies (AWS::Lambda::Permission), by principal.
var PermissionReasons = map[string]string{
	"apigateway.amazonaws.com": "API Gateway may invoke a route's function from any stage and for any method of " +
		"that route (execute-api:API/*/*/PATH): the route itself fixes what reaches the function",
	"*": "the streaming function URLs are public (AuthType NONE): callers are API clients holding Meridian API " +
		"keys, which the pipeline checks exactly as behind API Gateway; the grant holds only through the " +
		"function URL (lambda:FunctionUrlAuthType NONE, lambda:InvokedViaFunctionUrl)",
}

// DenyReason covers wildcards in Deny statements (the SSL-only queue and
// topic policies): a Deny only takes permissions away.
const DenyReason = "a Deny statement only takes permissions away: the SSL-only policies deny every action over plain HTTP"

// grants writes the function's policy: its log group, the table actions of
// TableActions, the queue actions of QueueActions and JobsQueueActions,
// the secret for SecretReaders only, and the Bedrock model for
// ModelRunners only. The scheduler's statements come with the schedule
// group (scheduler).
func (m *Meridian) grants(name string, role awsiam.Role, logs awslogs.LogGroup) {
	st := m.Stack
	add := func(sid string, actions []string, resources ...*string) {
		if len(actions) == 0 {
			return
		}
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String(sid), Effect: awsiam.Effect_ALLOW,
			Actions: jsii.Strings(actions...), Resources: &resources,
		}))
	}
	logStreams := awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("arn:"), st.Partition(), jsii.String(":logs:"), st.Region(), jsii.String(":"), st.Account(),
		jsii.String(":log-group:"), logs.LogGroupName(), jsii.String(":*"),
	})
	add(SidLogs, []string{"logs:CreateLogStream", "logs:PutLogEvents"}, logStreams)
	table, index := TableActions(name)
	add(SidTable, table, m.Table.TableArn())
	add(SidLeaseIndex, index, jsii.String(*m.Table.TableArn()+"/index/"+dynamostore.LeaseIndex))
	add(SidQueue, QueueActions(name), m.Queue.QueueArn())
	add(SidJobsQueue, JobsQueueActions(m.reg, name), m.JobsQueue.QueueArn())
	if _, ok := m.AdminSecretReaders[name]; ok {
		add(SidAdminSecret, []string{"secretsmanager:GetSecretValue"}, m.AdminSecret.SecretArn())
	}
	if _, ok := m.SecretReaders[name]; ok {
		arn := m.Secret.SecretArn()
		if m.Config.UpstreamSecretName != "" {
			arn = awscdk.Fn_Join(jsii.String(""), &[]*string{
				jsii.String("arn:"), st.Partition(), jsii.String(":secretsmanager:"), st.Region(), jsii.String(":"),
				st.Account(), jsii.String(":secret:" + m.Config.UpstreamSecretName + "-??????"),
			})
		}
		add(SidSecret, []string{"secretsmanager:GetSecretValue"}, arn)
	}
	if _, ok := m.ModelRunners[name]; ok && m.Config.Model.Provider == ModelBedrock {
		add(SidModel, ModelActions, m.ModelResources()...)
	}
}

// api declares the HTTP API: one route per registry route, each to its
// family's function, /admin under IAM authorization, JSON access logs.
func (m *Meridian) api(reg *registry.Registry) {
	m.Api = awsapigatewayv2.NewHttpApi(m.Stack, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String("meridian-" + m.Config.Stage),
		Description:        jsii.String("Meridian " + m.Config.Stage + ": routes from registry.Default().Routes()"),
		CreateDefaultStage: jsii.Bool(false),
	})
	accessLogs := awslogs.NewLogGroup(m.Stack, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     m.Config.LogRetention,
		RemovalPolicy: m.Config.removal(),
	})
	m.ApiStage = awsapigatewayv2.NewHttpStage(m.Stack, jsii.String("ApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    m.Api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit: jsii.Number(m.Config.ThrottleRate), BurstLimit: jsii.Number(m.Config.ThrottleBurst),
		},
	})
	cfnStage := m.ApiStage.Node().DefaultChild().(awsapigatewayv2.CfnStage)
	cfnStage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format:         jsii.String(AccessLogFormat),
	})

	integrations := map[registry.Family]awsapigatewayv2integrations.HttpLambdaIntegration{}
	for _, f := range registry.Families {
		integrations[f] = awsapigatewayv2integrations.NewHttpLambdaIntegration(
			jsii.String(cid(string(f))+"Integration"), m.Functions[string(f)],
			&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
				PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
			})
	}
	iam := awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	for _, r := range reg.Routes() {
		integration, ok := integrations[r.Family]
		if !ok {
			panic(fmt.Sprintf("route %s %s: family %q has no function", r.Method, r.Path, r.Family))
		}
		props := &awsapigatewayv2.HttpRouteProps{HttpApi: m.Api, Integration: integration}
		if r.Path == registry.DefaultRoute {
			props.RouteKey = awsapigatewayv2.HttpRouteKey_DEFAULT()
		} else {
			props.RouteKey = awsapigatewayv2.HttpRouteKey_With(jsii.String(r.Path), httpMethod(r.Method))
		}
		if IsAdminRoute(r) {
			props.Authorizer = iam
		}
		awsapigatewayv2.NewHttpRoute(m.Stack, jsii.String(RouteID(r)), props)
	}
	m.out("ApiUrl", *m.ApiStage.Url(), "HTTP API base URL")
}

// AccessLogFormat is the API's access log line: JSON, no query string,
// no headers and the route key rather than the path, so a key sent by
// mistake in a URL never reaches the logs (the functions log the path
// redacted).
const AccessLogFormat = `{"requestId":"$context.requestId","time":"$context.requestTime",` +
	`"ip":"$context.identity.sourceIp","method":"$context.httpMethod","routeKey":"$context.routeKey",` +
	`"status":"$context.status","protocol":"$context.protocol","responseLength":"$context.responseLength",` +
	`"latencyMs":"$context.responseLatency","integrationStatus":"$context.integrationStatus",` +
	`"integrationLatencyMs":"$context.integrationLatency","integrationError":"$context.integrationErrorMessage",` +
	`"iamUser":"$context.identity.userArn"}`

// RouteID is a route's construct id, stable across deployments.
func RouteID(r registry.Route) string {
	if r.Path == registry.DefaultRoute {
		return "RouteDefault"
	}
	return "Route" + cid(strings.ToLower(r.Method)) + cid(strings.ReplaceAll(r.Path, "{proxy+}", "proxy"))
}

func httpMethod(m string) awsapigatewayv2.HttpMethod {
	switch m {
	case "ANY":
		return awsapigatewayv2.HttpMethod_ANY
	case "GET":
		return awsapigatewayv2.HttpMethod_GET
	case "POST":
		return awsapigatewayv2.HttpMethod_POST
	case "PUT":
		return awsapigatewayv2.HttpMethod_PUT
	case "PATCH":
		return awsapigatewayv2.HttpMethod_PATCH
	case "DELETE":
		return awsapigatewayv2.HttpMethod_DELETE
	case "HEAD":
		return awsapigatewayv2.HttpMethod_HEAD
	case "OPTIONS":
		return awsapigatewayv2.HttpMethod_OPTIONS
	}
	panic("registry route with method " + m)
}

// streaming gives the streaming families a function URL with response
// streaming (API Gateway HTTP APIs buffer responses), with -c
// streamingUrls=true only. AuthType NONE: the callers are API clients with
// Meridian API keys, which the pipeline checks exactly as behind API
// Gateway; SigV4 (AWS_IAM) would require AWS credentials of every
// customer. The URLs are outside API Gateway's throttling, so their
// functions have reserved concurrency (Config.Reservations).
func (m *Meridian) streaming(reg *registry.Registry) {
	if !m.Config.StreamingURLs {
		return
	}
	for _, name := range StreamingFunctions(reg) {
		url := m.Functions[name].AddFunctionUrl(&awslambda.FunctionUrlOptions{
			AuthType:   awslambda.FunctionUrlAuthType_NONE,
			InvokeMode: awslambda.InvokeMode_RESPONSE_STREAM,
		})
		m.URLs[name] = url
		m.out(cid(name)+"StreamUrl", *url.Url(), "Streaming base URL of the "+name+" function (Lambda function URL, RESPONSE_STREAM)")
	}
}

// worker wires the worker: the usage and jobs queues' event source
// mappings with partial batch responses, and the scheduled sweep. (The
// monitors' schedules invoke it too: scheduler.)
func (m *Meridian) worker() {
	fn, role := m.Functions[WorkerName], m.Roles[WorkerName]
	esm := awslambda.NewEventSourceMapping(m.Stack, jsii.String("WorkerQueueMapping"), &awslambda.EventSourceMappingProps{
		Target:                  fn,
		EventSourceArn:          m.Queue.QueueArn(),
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(m.Config.WorkerMaxConcurrency),
	})
	// The jobs queue: one job per invocation (JobsBatchSize).
	jobs := awslambda.NewEventSourceMapping(m.Stack, jsii.String("WorkerJobsMapping"), &awslambda.EventSourceMappingProps{
		Target:                  fn,
		EventSourceArn:          m.JobsQueue.QueueArn(),
		BatchSize:               jsii.Number(JobsBatchSize),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(m.Config.WorkerMaxConcurrency),
	})
	// Lambda checks the role can poll the queue when the mapping is created.
	if p := role.Node().TryFindChild(jsii.String("DefaultPolicy")); p != nil {
		esm.Node().AddDependency(p)
		jobs.Node().AddDependency(p)
	}
	rule := awsevents.NewRule(m.Stack, jsii.String("SweepSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Meridian " + m.Config.Stage + ": the worker's sweep of expired reservations and the outbox"),
		Schedule:    awsevents.Schedule_Rate(duration(SweepEvery)),
	})
	rule.AddTarget(awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
		// The next run comes a minute later; a missed one is not retried.
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   duration(SweepEvery),
	}))
}

// operatorPolicy is a managed policy operators attach to their IAM user or
// role to call the operator API (SigV4) and read the operator token.
func (m *Meridian) operatorPolicy() {
	stage := jsii.String("$default")
	p := awsiam.NewManagedPolicy(m.Stack, jsii.String("OperatorPolicy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("Meridian " + m.Config.Stage + ": call the operator API (/admin) with SigV4 and read its token"),
		Statements: &[]awsiam.PolicyStatement{
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:     jsii.String(SidOperatorApi),
				Effect:  awsiam.Effect_ALLOW,
				Actions: jsii.Strings("execute-api:Invoke"),
				Resources: &[]*string{
					m.Api.ArnForExecuteApi(jsii.String("*"), jsii.String(AdminPrefix), stage),
					m.Api.ArnForExecuteApi(jsii.String("*"), jsii.String(AdminPrefix+"/*"), stage),
				},
			}),
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:       jsii.String(SidOperatorToken),
				Effect:    awsiam.Effect_ALLOW,
				Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
				Resources: &[]*string{m.AdminSecret.SecretArn()},
			}),
		},
	})
	m.out("OperatorPolicyArn", *p.ManagedPolicyArn(), "Attach to the operators' IAM identities: execute-api:Invoke on /admin and /admin/*, "+
		"secretsmanager:GetSecretValue on the operator secret")
}
