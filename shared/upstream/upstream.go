// Package upstream is the layer between a data endpoint and the third-party
// sources that answer it. A Provider speaks one publicly documented
// protocol; for each endpoint it serves it has an Adapter that fetches and
// maps the payload to the spec's data shape. A Runner tries an endpoint's
// eligible routes in order, with per-attempt and overall timeouts, jittered
// retries of retryable faults, a short cooldown for failing routes and
// failover, and maps the final fault to the spec's typed error.
package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Provider is one upstream service. Its Name is internal (logs, usage
// records, configuration and fixture folders); the public API names only
// the neutral platform identifiers.
type Provider struct {
	// Name is a lowercase identifier such as "github". It names the base
	// URL variable MERIDIAN_UPSTREAM_<NAME>_URL, the folder of replay
	// fixtures testdata/upstream/<name>/ and the route in served_by.
	Name     string
	Protocol string // what the provider speaks, in words
	Docs     string // where that protocol is documented
	// BaseURL is the public default; configuration may point it at a proxy,
	// a regional endpoint or the replay upstream. Empty for a provider that
	// answers from data Meridian ships (Static).
	BaseURL string
	// Secrets are the credentials the provider reads; a route is eligible
	// only when every Required one is configured.
	Secrets []Secret
	// AttemptTimeout bounds one attempt; zero means the runner's default.
	AttemptTimeout time.Duration
	// Static providers answer without a network call and never fail over.
	Static bool
	// Allowance is the provider's monthly allowance of attempts, shared by
	// every account and instance and counted across all its endpoints
	// (retries included) from the start of each calendar month UTC: a
	// scarce source (spec 2.4, "limited capacity"). Zero means none. An
	// attempt takes its unit at its first upstream request, so one that
	// never reaches the source (refused by the adapter) spends nothing.
	// MERIDIAN_UPSTREAM_<NAME>_ALLOWANCE overrides it (AllowanceVar).
	Allowance int64
	// Label is the route's neutral name in public answers (spec 2.7
	// legs[].served_by), which never name a real site or vendor: empty
	// for the platform's own API or pages ("direct"); a third-party
	// service sets one such as "web_unblocker_a".
	Label string
	// Endpoints maps endpoint keys (platform/id) to adapters, in the order
	// of preference among this provider's endpoints (irrelevant); an
	// endpoint's route order is the order of providers in the list given
	// to NewRunner.
	Endpoints map[string]Adapter
}

// Secret is one configuration value a provider reads: an environment
// variable locally, a key of the Secrets Manager secret in AWS.
type Secret struct {
	Name     string // e.g. MERIDIAN_GITHUB_TOKEN
	Required bool
	Doc      string
}

// BaseURLVar is the variable that overrides a provider's base URL.
func (p *Provider) BaseURLVar() string { return BaseURLVar(p.Name) }

// BaseURLVar is the variable that moves the source named name (a
// provider, or another fetch target such as a link-in-bio service):
// MERIDIAN_UPSTREAM_<NAME>_URL.
func BaseURLVar(name string) string {
	return "MERIDIAN_UPSTREAM_" + strings.ToUpper(name) + "_URL"
}

// AllowanceVar is the variable that overrides a provider's monthly
// allowance: a whole number of attempts, 0 for none at all.
func (p *Provider) AllowanceVar() string {
	return "MERIDIAN_UPSTREAM_" + strings.ToUpper(p.Name) + "_ALLOWANCE"
}

// Allowances keep the shared monthly counters of providers with an
// allowance (store.Allowances, in the store both stores implement).
type Allowances interface {
	TakeAllowance(ctx context.Context, name, month string, limit int64, now time.Time) (used int64, ok bool, err error)
	AllowanceUsed(ctx context.Context, name, month string, now time.Time) (int64, error)
}

// Memory keeps small values that outlive a call, shared by every instance
// (the store): a site's text-to-id resolutions, say, so a second search of
// "Bath" asks no typeahead. Expiry is checked on every read.
type Memory interface {
	// Recall returns the value kept under key, or ok false when there is
	// none or it expired by now.
	Recall(ctx context.Context, key string, now time.Time) (value string, ok bool, err error)
	// Keep stores value under key until until, replacing any.
	Keep(ctx context.Context, key, value string, now, until time.Time) error
}

// Month is the calendar month (UTC) an allowance counts t in, "YYYY-MM".
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// NextMonth is when the allowances counted at t reset: the start of the
// next calendar month UTC.
func NextMonth(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// Adapter performs one attempt of an endpoint over its provider: it makes
// the upstream requests through c and maps the payload to the endpoint's
// data shape. It returns a *Fault for upstream failures; any other error
// counts as an unmappable answer (502).
type Adapter func(ctx context.Context, c *Call) (any, error)

// Call is what an adapter sees for one attempt.
type Call struct {
	// Params are the validated parameters by canonical name, defaults applied.
	Params  map[string]string
	BaseURL string
	Now     time.Time
	secrets map[string]string
	client  *http.Client
	public  *URLPolicy
	// admit, when set, runs once before the attempt's first upstream
	// request: a limited route takes its allowance unit there, so an
	// adapter that refuses a request before fetching anything spends none.
	admit *admission
	// provider names the route, so remembered values are the provider's own.
	provider string
	memory   Memory
}

// Remembered returns what key resolves to: from the runner's memory when
// a live entry is there, else from resolve, whose answer is then kept for
// ttl (shared by every call and instance). Keys are the provider's own
// (build them from the normalised text and the site's locale). A memory
// that fails is passed over: the call resolves as if nothing was kept.
func (c *Call) Remembered(ctx context.Context, key string, ttl time.Duration, resolve func(context.Context) (string, error)) (string, error) {
	sum := sha256.Sum256([]byte(key)) // bounded, whatever the text
	full := "memo#" + c.provider + "#" + hex.EncodeToString(sum[:])
	if c.memory != nil {
		if v, ok, err := c.memory.Recall(ctx, full, c.Now); err == nil && ok {
			return v, nil
		}
	}
	v, err := resolve(ctx)
	if err != nil {
		return "", err
	}
	if c.memory != nil {
		_ = c.memory.Keep(ctx, full, v, c.Now, c.Now.Add(ttl)) // kept or not, this call has its answer
	}
	return v, nil
}

// admission is the once-per-attempt gate of a limited route (take) and the
// runner's meter, asked for every request; copies of a Call (an adapter
// may copy one to change its base URL) share it.
type admission struct {
	once  sync.Once
	take  func(context.Context) *Fault
	fault *Fault
	meter func(context.Context) bool
	sent  atomic.Int64
}

// admitted runs the attempt's gate on its first upstream request, then the
// meter on every request.
func (c *Call) admitted(ctx context.Context) *Fault {
	if c.admit == nil {
		return nil
	}
	if c.admit.take != nil {
		c.admit.once.Do(func() { c.admit.fault = c.admit.take(ctx) })
		if c.admit.fault != nil {
			return c.admit.fault
		}
	}
	if c.admit.meter != nil && !c.admit.meter(ctx) {
		return &Fault{Kind: Rejected, Code: BudgetSpent, Reason: "the run's budget of source requests is spent"}
	}
	c.admit.sent.Add(1)
	return nil
}

// requests is how many upstream requests were admitted (0 without a gate).
func (a *admission) requests() int64 {
	if a == nil {
		return 0
	}
	return a.sent.Load()
}

// Param returns a validated parameter's value ("" when absent).
func (c *Call) Param(name string) string { return c.Params[name] }

// Secret returns a configured credential ("" when not configured).
func (c *Call) Secret(name string) string { return c.secrets[name] }

// FaultKind classifies why an attempt failed; it decides retry, failover,
// cooldown and the error the caller sees.
type FaultKind string

const (
	// Timeout: the attempt did not finish in time (504 when final).
	Timeout FaultKind = "timeout"
	// Transport: connection refused or reset, or a body cut short (502).
	Transport FaultKind = "transport"
	// ServerError: the upstream answered 5xx (502).
	ServerError FaultKind = "server_error"
	// RateLimited: the upstream refused for its own rate limit (429).
	RateLimited FaultKind = "rate_limited"
	// Malformed: the body could not be parsed or mapped (502).
	Malformed FaultKind = "malformed"
	// Rejected: the upstream refused the request itself, e.g. bad
	// credentials or a parameter it does not accept (502).
	Rejected FaultKind = "rejected"
	// NotFound: the requested thing does not exist (404), a definitive
	// answer: never retried nor asked of another route.
	NotFound FaultKind = "not_found"
	// InvalidParameter: a parameter the caller sent cannot be used (a
	// changed cursor, a URL leading to a private address): 422 naming
	// Field, definitive like NotFound.
	InvalidParameter FaultKind = "invalid_parameter"
)

// definitive faults are answers about the request: they end the call.
func (k FaultKind) definitive() bool { return k == NotFound || k == InvalidParameter }

// retryable faults may succeed on a second attempt of the same route.
func (k FaultKind) retryable() bool {
	return k == Timeout || k == Transport || k == ServerError
}

// Fault is an upstream failure of one attempt.
type Fault struct {
	Kind FaultKind
	// Status is the upstream HTTP status, when one came.
	Status int
	// RetryAfter is the upstream's requested wait, when it gave one.
	RetryAfter time.Duration
	// Reason says what happened, for logs; never credentials.
	Reason string
	// Field and Code, for InvalidParameter: the parameter and a
	// machine-readable reason (details.field, details.reason).
	Field, Code string
}

// unhealthy faults say the route is failing, as opposed to answers about
// this request: refusals count only when they refuse Meridian itself (bad
// or missing credentials, 401/403), which every later call would meet too.
func (f *Fault) unhealthy() bool {
	switch f.Kind {
	case NotFound, InvalidParameter:
		return false
	case Rejected:
		return f.Status == http.StatusUnauthorized || f.Status == http.StatusForbidden
	}
	return true
}

func (f *Fault) Error() string {
	if f.Status != 0 {
		return fmt.Sprintf("upstream %s (HTTP %d): %s", f.Kind, f.Status, f.Reason)
	}
	return fmt.Sprintf("upstream %s: %s", f.Kind, f.Reason)
}

// NotFoundFault is an adapter's definitive "does not exist".
func NotFoundFault(reason string) *Fault { return &Fault{Kind: NotFound, Reason: reason} }

// InvalidParameterFault says the caller's parameter cannot be used; message
// is shown to the caller.
func InvalidParameterFault(field, code, message string) *Fault {
	return &Fault{Kind: InvalidParameter, Field: field, Code: code, Reason: message}
}

// MalformedFault is an adapter's "the answer cannot be mapped".
func MalformedFault(format string, args ...any) *Fault {
	return &Fault{Kind: Malformed, Reason: fmt.Sprintf(format, args...)}
}

// StatusFault is the default classification of a non-2xx upstream status.
func StatusFault(status int, header http.Header) *Fault {
	f := &Fault{Status: status, Reason: http.StatusText(status)}
	switch {
	case status == http.StatusNotFound || status == http.StatusGone:
		f.Kind = NotFound
	case status == http.StatusTooManyRequests:
		f.Kind = RateLimited
		f.RetryAfter = parseRetryAfter(header.Get("retry-after"), time.Now())
	case status >= 500 || status == http.StatusRequestTimeout:
		// Spec 7: an upstream 5xx (its 504 too) is 502; timeouts are ours.
		f.Kind = ServerError
		f.RetryAfter = parseRetryAfter(header.Get("retry-after"), time.Now())
	default:
		f.Kind = Rejected
	}
	return f
}

// PublicLabel is the provider's Label, or "direct".
func (p *Provider) PublicLabel() string {
	if p.Label == "" {
		return "direct"
	}
	return p.Label
}
