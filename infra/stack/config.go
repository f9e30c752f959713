// Package stack is Meridian's AWS deployment as a CDK stack: the HTTP API
// with the registry's routes, one Lambda function per family plus the
// worker and the canary, the DynamoDB table of dynamostore.Schema, the SQS
// usage and jobs queues and their dead-letter queues, the EventBridge
// Scheduler schedule group of the monitors' schedules and its role, the
// canary's own schedule and its role, the upstream secret, alarms, and
// least-privilege IAM.
package stack

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/registry"
)

// Context keys (cdk deploy -c key=value, or "context" in cdk.json).
const (
	CtxStage              = "stage"              // dev (default) or prod
	CtxAlarmEmail         = "alarmEmail"         // subscribes an address to the alarm topic
	CtxUpstreamSecretName = "upstreamSecretName" // use an existing secret instead of creating one
	CtxLogLevel           = "logLevel"           // MERIDIAN_LOG_LEVEL (and Lambda's application log level)
	CtxFairUse            = "fairUse"            // MERIDIAN_FAIR_USE
	CtxErrorsURL          = "errorsUrl"          // MERIDIAN_ERRORS_URL
	CtxStreamingURLs      = "streamingUrls"      // true: public function URLs for the streaming functions (default false)
	// The scheduled canary (canary.go).
	CtxCanaryInterval  = "canaryInterval"  // a Go duration of whole minutes, 5m to 24h (default 1h), or off: no schedule, no canary alarms
	CtxCanaryBudget    = "canaryBudget"    // MERIDIAN_CANARY_BUDGET: source requests per run, a positive integer (default canary.DefaultBudget)
	CtxCanaryFillShare = "canaryFillShare" // MERIDIAN_CANARY_FILL_SHARE: in (0,1] (default canary.DefaultFillShare)
	// The AI-assist model (ModelConfig); all unset by default: no model, no AI labels.
	CtxModelProvider = "modelProvider" // MERIDIAN_MODEL_PROVIDER: bedrock or openai
	CtxModelID       = "modelId"       // MERIDIAN_MODEL_ID: Bedrock model or inference profile id, or the openai model name
	CtxModelRegion   = "modelRegion"   // MERIDIAN_MODEL_REGION (bedrock; default the stack's region)
	CtxModelURL      = "modelUrl"      // MERIDIAN_MODEL_URL: https base URL (openai: required; bedrock: optional endpoint)
	CtxModelTimeout  = "modelTimeout"  // MERIDIAN_MODEL_TIMEOUT: per attempt, a Go duration such as 15s
	// CtxModelAPIKey is refused: the key is a credential and belongs in the
	// upstream secret as MERIDIAN_MODEL_API_KEY, never in the template.
	CtxModelAPIKey = "modelApiKey"
)

// Stages the stack knows. A stage is a preset, chosen with -c stage=NAME.
const (
	StageDev  = "dev"
	StageProd = "prod"
)

// Config is everything that differs between deployments. Presets come from
// Stage; the other context keys override single values.
type Config struct {
	Stage string
	// Prod turns on deletion protection for the table, and RETAIN for
	// the table, the usage and jobs queues and their dead-letter queues,
	// the schedule group, the secrets, the alarm key and the log groups.
	Prod bool
	// LogRetention applies to every function's log group and the API's
	// access log group.
	LogRetention awslogs.RetentionDays
	// ReservedConcurrency caps (and guarantees) concurrent executions per
	// function name (a family or "worker"); absent means unreserved. Dev
	// reserves nothing: a new account's concurrency quota can be as low as
	// 10, and Lambda refuses reservations that leave under 100 (or its
	// minimum) unreserved. StreamingURLs adds reservations in every stage
	// (Reservations).
	ReservedConcurrency map[string]int
	// WorkerMaxConcurrency bounds the worker's SQS pollers of each queue
	// (usage and jobs: each event source mapping's MaximumConcurrency, 2
	// at least).
	WorkerMaxConcurrency int
	// ThrottleRate and ThrottleBurst are the HTTP API stage's default route
	// throttling (requests per second), in front of the per-key limits.
	ThrottleRate  float64
	ThrottleBurst float64
	// AlarmEmail, when set, is subscribed to the alarm topic.
	AlarmEmail string
	// UpstreamSecretName, when set, names an existing Secrets Manager
	// secret to use; otherwise the stack creates one.
	UpstreamSecretName string
	LogLevel           string // debug, info, warn, error
	FairUse            string // MERIDIAN_FAIR_USE, passed as is
	ErrorsURL          string // MERIDIAN_ERRORS_URL, passed as is
	// StreamingURLs gives the streaming functions (StreamingFunctions)
	// public Lambda function URLs in RESPONSE_STREAM mode. Off by default:
	// the URLs bypass API Gateway's throttling and access logs, and the
	// functions do not stream yet. When on, each of those functions gets
	// reserved concurrency in every stage (Reservations), so a flood on a
	// URL is capped and cannot take the account's concurrency.
	StreamingURLs bool
	// Model is the AI-assist model of the AI endpoints' functions
	// (ModelRunners); the zero value is none.
	Model ModelConfig
	// CanaryInterval is how often the canary's schedule runs it (whole
	// minutes, MinCanaryInterval to MaxCanaryInterval); zero is off: the
	// canary function is deployed (an operator may invoke it) with no
	// schedule and no canary alarms.
	CanaryInterval time.Duration
	// CanaryBudget is the most source requests one canary run makes
	// (canary.EnvBudget), CanaryFillShare the share of its baseline an
	// operation's fill rate may fall to before the run counts it as
	// drifting (canary.EnvFillShare).
	CanaryBudget    int
	CanaryFillShare float64
	// BuildDir holds build/<function>/bootstrap (make build).
	BuildDir string
}

// StreamingReservedConcurrency is the reservation a streaming function
// gets with StreamingURLs when its stage reserves nothing for it (dev):
// small, so the account keeps the 100 unreserved executions Lambda
// requires with a quota of 120 or more (the default quota is 1,000).
const StreamingReservedConcurrency = 10

// Reservations is the reserved concurrency the stack deploys: the stage's
// ReservedConcurrency, plus, with StreamingURLs, a reservation for each
// of streaming that has none (StreamingReservedConcurrency).
func (c Config) Reservations(streaming []string) map[string]int {
	out := maps.Clone(c.ReservedConcurrency)
	if out == nil {
		out = map[string]int{}
	}
	if c.StreamingURLs {
		for _, name := range streaming {
			if _, ok := out[name]; !ok {
				out[name] = StreamingReservedConcurrency
			}
		}
	}
	return out
}

// Preset returns a stage's defaults.
func Preset(stage string) (Config, error) {
	switch stage {
	case StageDev:
		return Config{
			Stage:                StageDev,
			LogRetention:         awslogs.RetentionDays_ONE_WEEK,
			ReservedConcurrency:  map[string]int{},
			WorkerMaxConcurrency: 2,
			ThrottleRate:         50,
			ThrottleBurst:        100,
			LogLevel:             "info",
			BuildDir:             "build",
			CanaryInterval:       DefaultCanaryInterval,
			CanaryBudget:         canary.DefaultBudget,
			CanaryFillShare:      canary.DefaultFillShare,
		}, nil
	case StageProd:
		return Config{
			Stage:        StageProd,
			Prod:         true,
			LogRetention: awslogs.RetentionDays_THREE_MONTHS,
			// What these protect (ARCHITECTURE.md, "Infrastructure"): the
			// worker's concurrency is both bounded and guaranteed
			// (reconciliation must run when the API is busy): its usage
			// pollers (WorkerMaxConcurrency; their transactions on the
			// per-minute outcome counters conflict with each other), its
			// jobs pollers (as many), the minute's sweep and the monitors'
			// scheduled runs, which EventBridge Scheduler invokes
			// asynchronously (Lambda queues and retries them when the
			// reservation is in use): 5 + 5 + 10. Batch, search and mcp
			// fan one request out into many store transactions.
			ReservedConcurrency: map[string]int{
				WorkerName:              20,
				string(registry.Batch):  50,
				string(registry.Search): 50,
				string(registry.MCP):    50,
			},
			WorkerMaxConcurrency: 5,
			ThrottleRate:         500,
			ThrottleBurst:        1000,
			LogLevel:             "info",
			BuildDir:             "build",
			CanaryInterval:       DefaultCanaryInterval,
			CanaryBudget:         canary.DefaultBudget,
			CanaryFillShare:      canary.DefaultFillShare,
		}, nil
	}
	return Config{}, fmt.Errorf("unknown stage %q: use -c %s=%s or -c %s=%s", stage, CtxStage, StageDev, CtxStage, StageProd)
}

var (
	emailPattern  = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
	secretPattern = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{1,512}$`)
)

// ConfigFromContext reads the stage and the overrides from the CDK context.
func ConfigFromContext(scope constructs.Construct) (Config, error) {
	get := func(key string) string {
		v := scope.Node().TryGetContext(&key)
		if v == nil {
			return ""
		}
		return strings.TrimSpace(fmt.Sprint(v))
	}
	stage := get(CtxStage)
	if stage == "" {
		stage = StageDev
	}
	cfg, err := Preset(stage)
	if err != nil {
		return Config{}, err
	}
	if v := get(CtxAlarmEmail); v != "" {
		if !emailPattern.MatchString(v) {
			return Config{}, fmt.Errorf("%s=%q is not an email address", CtxAlarmEmail, v)
		}
		cfg.AlarmEmail = v
	}
	if v := get(CtxUpstreamSecretName); v != "" {
		if !secretPattern.MatchString(v) {
			return Config{}, fmt.Errorf("%s=%q is not a secret name", CtxUpstreamSecretName, v)
		}
		cfg.UpstreamSecretName = v
	}
	if v := get(CtxLogLevel); v != "" {
		switch v = strings.ToLower(v); v {
		case "debug", "info", "warn", "error":
			cfg.LogLevel = v
		default:
			return Config{}, fmt.Errorf("%s=%q: use debug, info, warn or error", CtxLogLevel, v)
		}
	}
	if v := get(CtxStreamingURLs); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s=%q: use true or false", CtxStreamingURLs, v)
		}
		cfg.StreamingURLs = on
	}
	cfg.FairUse = get(CtxFairUse)
	cfg.ErrorsURL = get(CtxErrorsURL)
	if get(CtxModelAPIKey) != "" { // never quoted: it is a credential
		return Config{}, fmt.Errorf("%s: the model's API key never goes into the template or an environment variable; "+
			"write it as %s into the upstream secret (%s)", CtxModelAPIKey, EnvModelAPIKey, app.EnvUpstreamSecret)
	}
	cfg.Model = ModelConfig{
		Provider: strings.ToLower(get(CtxModelProvider)),
		ID:       get(CtxModelID),
		Region:   get(CtxModelRegion),
		URL:      get(CtxModelURL),
	}
	if v := get(CtxModelTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("%s=%q: use a positive Go duration such as 15s", CtxModelTimeout, v)
		}
		cfg.Model.Timeout = d
	}
	if err := cfg.Model.Validate(); err != nil {
		return Config{}, err
	}
	if v := get(CtxCanaryInterval); v != "" {
		d, err := ParseCanaryInterval(v)
		if err != nil {
			return Config{}, err
		}
		cfg.CanaryInterval = d
	}
	if v := get(CtxCanaryBudget); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return Config{}, fmt.Errorf("%s=%q: use a positive whole number of source requests per run (default %d)",
				CtxCanaryBudget, v, canary.DefaultBudget)
		}
		cfg.CanaryBudget = n
	}
	if v := get(CtxCanaryFillShare); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return Config{}, fmt.Errorf("%s=%q: use a number above 0 and at most 1, the share of its baseline an "+
				"operation's fill rate may fall to (default %g)", CtxCanaryFillShare, v, canary.DefaultFillShare)
		}
		cfg.CanaryFillShare = f
	}
	if err := cfg.CheckCanary(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// The canary's schedule.
const (
	DefaultCanaryInterval = time.Hour
	// MinCanaryInterval: a run takes minutes (CanaryTimeout) and spends
	// up to its budget of source requests.
	MinCanaryInterval = 5 * time.Minute
	// MaxCanaryInterval: a day. Each canary alarm evaluates two periods of
	// the interval, which CloudWatch allows up to a day for periods under
	// an hour and seven days above; a canary run less than daily would not
	// catch a site's change within the day.
	MaxCanaryInterval = 24 * time.Hour
	// CanaryOff (-c canaryInterval=off) deploys no schedule and no canary
	// alarms.
	CanaryOff = "off"
)

// ParseCanaryInterval reads -c canaryInterval: a Go duration of whole
// minutes from MinCanaryInterval to MaxCanaryInterval, or CanaryOff (0).
func ParseCanaryInterval(v string) (time.Duration, error) {
	if strings.EqualFold(strings.TrimSpace(v), CanaryOff) {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%s=%q: use a Go duration such as 1h or 30m, or %s", CtxCanaryInterval, v, CanaryOff)
	}
	if err := checkCanaryInterval(d); err != nil {
		return 0, fmt.Errorf("%s=%q: %w", CtxCanaryInterval, v, err)
	}
	return d, nil
}

func checkCanaryInterval(d time.Duration) error {
	if d%time.Minute != 0 {
		return fmt.Errorf("use whole minutes (the schedule's rate and the alarms' period are in minutes)")
	}
	if d < MinCanaryInterval || d > MaxCanaryInterval {
		return fmt.Errorf("use %s to %s, or %s", fmtInterval(MinCanaryInterval), fmtInterval(MaxCanaryInterval), CanaryOff)
	}
	return nil
}

// CheckCanary validates the canary's settings (New panics on what it
// reports; ConfigFromContext reports it first).
func (c Config) CheckCanary() error {
	if c.CanaryInterval != 0 {
		if err := checkCanaryInterval(c.CanaryInterval); err != nil {
			return fmt.Errorf("%s %s: %w", CtxCanaryInterval, c.CanaryInterval, err)
		}
	}
	if c.CanaryBudget <= 0 {
		return fmt.Errorf("%s %d: the canary's budget must be a positive number of source requests", CtxCanaryBudget, c.CanaryBudget)
	}
	if !(c.CanaryFillShare > 0 && c.CanaryFillShare <= 1) {
		return fmt.Errorf("%s %g: the canary's fill share must be above 0 and at most 1", CtxCanaryFillShare, c.CanaryFillShare)
	}
	return nil
}

// fmtInterval writes a whole-minute duration as 5m, 1h or 1h30m.
func fmtInterval(d time.Duration) string {
	s := strings.TrimSuffix(d.String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// StackName is the CloudFormation stack of a stage.
func StackName(stage string) string { return "Meridian-" + stage }

// removal is the removal policy of stateful resources.
func (c Config) removal() awscdk.RemovalPolicy {
	if c.Prod {
		return awscdk.RemovalPolicy_RETAIN
	}
	return awscdk.RemovalPolicy_DESTROY
}
