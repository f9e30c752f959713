// Package canary is Meridian's canary: it calls every available data
// operation's catalogue example on each configured route, the way a
// request would (the upstream runner and its adapters), within a budget of
// source requests, and judges each answer: status, schema validity,
// latency and fill rate (the share of the data schema's fields that came
// back non-null, per item where there are items), against the operation's
// baseline. scripts/canary.sh runs it from an operator's shell (live,
// -replay, -record); the canary function runs it on an EventBridge
// Scheduler schedule in the deployment, stores each run (store.CanaryLog)
// for /v1/status and the console, and writes CloudWatch metrics in the
// embedded metric format, which the stack's alarms watch.
package canary

// The canary function's environment (the stack sets them; each has a
// default).
const (
	// EnvBudget is the most source requests one run may make, every route,
	// retry and fetch of an adapter included (default DefaultBudget). The
	// run never makes more: a request past it is refused before it leaves.
	EnvBudget = "MERIDIAN_CANARY_BUDGET"
	// EnvFillShare is the share of its baseline an operation's fill rate
	// may fall to before the run counts as drifting (default
	// DefaultFillShare).
	EnvFillShare = "MERIDIAN_CANARY_FILL_SHARE"
	// EnvNamespace is the CloudWatch namespace of the metrics (default
	// DefaultNamespace; the stack sets Namespace(stage)).
	EnvNamespace = "MERIDIAN_CANARY_NAMESPACE"
	// EnvOnly, when set, names the operations to check (comma-separated
	// platform/endpoint keys; default: every available one).
	EnvOnly = "MERIDIAN_CANARY_ONLY"
)

// Defaults.
const (
	DefaultBudget    = 300
	DefaultFillShare = 0.8
	DefaultNamespace = "Meridian/Canary"
)

// Namespace is a stage's metric namespace, e.g. "Meridian/dev/Canary".
func Namespace(stage string) string { return "Meridian/" + stage + "/Canary" }

// The metrics a run writes, each once per operation and route (dimensions
// DimOperation and DimRoute) and once per operation as callers get it
// (DimOperation alone: the best route's result).
const (
	MetricSuccess     = "Success"     // 1 when the call answered data, else 0
	MetricSchemaValid = "SchemaValid" // 1 when the data validates against its schema, else 0
	MetricFillRate    = "FillRate"    // 0 to 1; absent when no data came back
	MetricLatency     = "Latency"     // milliseconds
	// MetricBreach is 1 when the operation failed or its fill rate fell
	// below the fill share of its baseline, else 0. The stack's alarm per
	// operation fires on two breaching runs in a row.
	MetricBreach = "Breach"

	DimOperation = "Operation" // platform/endpoint, e.g. company_registry/search
	DimRoute     = "Route"     // the route's provider name
)

// FairUseAccount is the name the canary's source attempts are counted
// under in fair use (store.FairUse): the operator's own, never an
// account's.
const FairUseAccount = "operator:canary"
