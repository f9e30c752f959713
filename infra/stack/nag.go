package stack

import (
	"regexp"

	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/meridian-data/meridian/shared/registry"
)

// Reasons of the cdk-nag AwsSolutions findings the stack accepts. Each is
// applied to the named resources only, and where the rule is granular
// (IAM5), to the named finding only.
const (
	// APIG4 on every route but /admin.
	ReasonPublicRoutes = "Meridian's public routes authenticate in the application, not API Gateway: every " +
		"function's pipeline checks the caller's API key (x-api-key, or Bearer where spec 5 allows it) and the " +
		"console token before doing anything paid; /openapi.json, /openapi.yaml, /docs (the API reference page), /docs/errors, /v1 " +
		"and $default (typed 404s) are public by design. Only the operator API (/admin) is IAM-authorized."
	// SMG4 on the upstream secret.
	ReasonSecretRotation = "The secret holds third-party credentials (API keys, an app password) that only their " +
		"providers can issue, so no rotation Lambda can rotate them; operators rotate them at the provider and " +
		"write the new values (README, Deploy to AWS)."
	// SMG4 on the operator secret.
	ReasonAdminSecretRotation = "The operator token is a shared secret that human operators hold and send as " +
		"x-admin-token; a rotation Lambda would change it under them without telling anyone. Operators rotate it " +
		"by writing a new random value and restarting the service function (README, Deploy to AWS), and the " +
		"operator API is also behind IAM (SigV4), so a leaked token alone opens nothing."
)

func suppress(c constructs.IConstruct, id, reason string, appliesTo ...string) {
	s := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		list := make([]interface{}, len(appliesTo))
		for i, a := range appliesTo {
			list[i] = &cdknag.RegexAppliesTo{Regex: jsii.String(a)}
		}
		s.AppliesTo = &list
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{s}, jsii.Bool(false))
}

// suppressions records every cdk-nag AwsSolutions finding the stack
// accepts, each with its reason. The tests fail on any finding not
// suppressed here.
func (m *Meridian) suppressions() {
	for _, r := range registry.Default().Routes() {
		if IsAdminRoute(r) {
			continue
		}
		route := m.Stack.Node().FindChild(jsii.String(RouteID(r)))
		suppress(route.Node().DefaultChild(), "AwsSolutions-APIG4", ReasonPublicRoutes)
	}
	for name, role := range m.Roles {
		policy := role.Node().FindChild(jsii.String("DefaultPolicy"))
		logID := regexp.QuoteMeta(cid(name) + "Logs")
		suppress(policy, "AwsSolutions-IAM5", WildcardReasons[SidLogs],
			`/^Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:<`+logID+`[0-9A-F]{8}>:\*$/`)
		if m.Config.UpstreamSecretName != "" {
			suppress(policy, "AwsSolutions-IAM5", WildcardReasons[SidSecret],
				`/^Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:`+
					regexp.QuoteMeta(m.Config.UpstreamSecretName)+`-\?{6}$/`)
		}
	}
	if _, foundation, profile := m.Config.Model.InferenceProfile(); m.Config.Model.Provider == ModelBedrock && profile {
		for name := range m.ModelRunners {
			policy := m.Roles[name].Node().FindChild(jsii.String("DefaultPolicy"))
			suppress(policy, "AwsSolutions-IAM5", WildcardReasons[SidModel],
				`/^Resource::arn:<AWS::Partition>:bedrock:\*::foundation-model\/`+regexp.QuoteMeta(foundation)+`$/`)
		}
	}
	for name := range m.MonitorSchedulers {
		policy := m.Roles[name].Node().FindChild(jsii.String("DefaultPolicy"))
		suppress(policy, "AwsSolutions-IAM5", WildcardReasons[SidSchedules],
			`/^Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule\/<SchedulerGroup>\/\*$/`)
	}
	suppress(m.Stack.Node().FindChild(jsii.String("OperatorPolicy")), "AwsSolutions-IAM5", WildcardReasons[SidOperatorApi],
		`/^Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<Api[0-9A-F]{8}>\/\$default\/\*\/admin(\/\*)?$/`)
	if m.Config.UpstreamSecretName == "" { // created here
		suppress(m.Secret, "AwsSolutions-SMG4", ReasonSecretRotation)
	}
	suppress(m.AdminSecret, "AwsSolutions-SMG4", ReasonAdminSecretRotation)
}
