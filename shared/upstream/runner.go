package upstream

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Options tune the runner; zero fields take the defaults below.
type Options struct {
	// AttemptTimeout bounds one attempt unless its provider sets its own.
	AttemptTimeout time.Duration
	// Timeout bounds a whole call, every route and retry included: the
	// adapter timeout of spec 8. It stays well under the pipeline's
	// request deadline and the functions' Lambda timeout.
	Timeout time.Duration
	// MaxAttempts is how often one route is tried for retryable faults.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the jittered exponential backoff
	// between attempts of one route.
	BackoffBase, BackoffMax time.Duration
	// CooldownAfter consecutive unhealthy attempts put a route into a
	// cooldown of Cooldown, during which it is not called.
	CooldownAfter int
	Cooldown      time.Duration
	Now           func() time.Time
}

// The defaults.
const (
	DefaultAttemptTimeout = 10 * time.Second
	DefaultTimeout        = 25 * time.Second
	DefaultMaxAttempts    = 3
	DefaultBackoffBase    = 200 * time.Millisecond
	DefaultBackoffMax     = 2 * time.Second
	DefaultCooldownAfter  = 5
	DefaultCooldown       = 30 * time.Second
)

func (o Options) withDefaults() Options {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&o.AttemptTimeout, DefaultAttemptTimeout)
	set(&o.Timeout, DefaultTimeout)
	set(&o.BackoffBase, DefaultBackoffBase)
	set(&o.BackoffMax, DefaultBackoffMax)
	set(&o.Cooldown, DefaultCooldown)
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.CooldownAfter <= 0 {
		o.CooldownAfter = DefaultCooldownAfter
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Trace records how a call was served, for the usage record: which route
// answered, and every route tried with its attempts (the legs of spec 2.7).
type Trace struct {
	ServedBy string `json:"served_by,omitempty"`
	Attempts int    `json:"attempts"`
	Legs     []Leg  `json:"legs,omitempty"`
}

// Leg is one route's part in a call.
type Leg struct {
	ServedBy string    `json:"served_by"`
	Attempts int       `json:"attempts"`
	OK       bool      `json:"ok"`
	Status   int       `json:"status,omitempty"` // the upstream's last HTTP status, when it answered
	Fault    FaultKind `json:"fault,omitempty"`
}

// route is one provider serving one endpoint, with its health.
type route struct {
	provider *Provider
	endpoint string
	adapter  Adapter
	baseURL  string
	secrets  map[string]string
	timeout  time.Duration

	mu       sync.Mutex
	failures int       // consecutive unhealthy attempts
	until    time.Time // end of the cooldown
}

func (r *route) cooldownLeft(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.until.Sub(now)
}

// record updates the route's health after an attempt.
func (r *route) record(f *Fault, now time.Time, o Options) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case f == nil:
		r.failures = 0
	case f.Kind.countsTowardCooldown():
		r.failures++
		if r.failures >= o.CooldownAfter {
			r.until, r.failures = now.Add(o.Cooldown), 0
		}
	}
}

// Runner serves endpoints over their eligible routes.
type Runner struct {
	opts   Options
	routes map[string][]*route
	client *http.Client
	public *URLPolicy
}

// Settings say where providers live and which credentials are present.
type Settings struct {
	// Lookup reads a variable: the environment locally, the Secrets
	// Manager secret overlaid on it in AWS.
	Lookup func(name string) (string, bool)
	// ReplayURL, when set, points every network provider at the replay
	// upstream (ReplayURL/<provider name>) and makes each eligible.
	ReplayURL string
	Options   Options
	// Client makes the requests to configured providers; nil uses a
	// default client that follows redirects only within the same host.
	Client *http.Client
	// URLPolicy guards caller-supplied URLs; nil is DefaultURLPolicy.
	URLPolicy *URLPolicy
}

// ReplaySecret stands in for credentials in replay mode.
const ReplaySecret = "replay"

// NewRunner builds the route table: for each endpoint, the eligible routes
// in the order of providers.
func NewRunner(providers []*Provider, s Settings) *Runner {
	if s.Lookup == nil {
		s.Lookup = func(string) (string, bool) { return "", false }
	}
	if s.Client == nil {
		s.Client = apiClient()
	}
	if s.URLPolicy == nil {
		s.URLPolicy = DefaultURLPolicy()
	}
	r := &Runner{opts: s.Options.withDefaults(), routes: map[string][]*route{}, client: s.Client, public: s.URLPolicy}
	for _, p := range providers {
		base, secrets, ok := configure(p, s)
		if !ok {
			continue
		}
		timeout := p.AttemptTimeout
		if timeout <= 0 {
			timeout = r.opts.AttemptTimeout
		}
		for key, adapter := range p.Endpoints {
			r.routes[key] = append(r.routes[key], &route{
				provider: p, endpoint: key, adapter: adapter, baseURL: base, secrets: secrets, timeout: timeout,
			})
		}
	}
	return r
}

// configure reads a provider's base URL and secrets; ok is false when a
// required secret is missing, so the provider's routes are not eligible.
func configure(p *Provider, s Settings) (base string, secrets map[string]string, ok bool) {
	secrets = map[string]string{}
	base = p.BaseURL
	if v, set := s.Lookup(p.BaseURLVar()); set && v != "" && !p.Static {
		base = v
	}
	replay := s.ReplayURL != "" && !p.Static
	if replay {
		base = s.ReplayURL + "/" + p.Name
	}
	for _, sec := range p.Secrets {
		v, set := s.Lookup(sec.Name)
		switch {
		case set && v != "":
			secrets[sec.Name] = v
		case replay && sec.Required:
			secrets[sec.Name] = ReplaySecret
		case sec.Required:
			return "", nil, false
		}
	}
	return base, secrets, true
}

// apiClient talks to configured providers. Their base URLs are operator
// configuration, so it may reach a local proxy; it follows redirects only
// within the same scheme and host.
func apiClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			ForceAttemptHTTP2:   true,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     60 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			first := via[0].URL
			if len(via) >= maxRedirects || req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

// Eligible reports whether the endpoint has at least one eligible route.
func (r *Runner) Eligible(endpoint string) bool { return len(r.routes[endpoint]) > 0 }

// Endpoints lists the endpoint keys with an eligible route.
func (r *Runner) Endpoints() []string {
	keys := make([]string, 0, len(r.routes))
	for k := range r.routes {
		keys = append(keys, k)
	}
	return keys
}

// URLPolicy is the policy that guards caller-supplied URLs.
func (r *Runner) URLPolicy() *URLPolicy { return r.public }

// Outcome is a served call: the data, or the final fault (nil Data), and
// its trace. Skipped is how long the earliest cooling route still rests
// when every eligible route was cooling and none was called.
type Outcome struct {
	Data    any
	Fault   *Fault
	Trace   Trace
	Skipped time.Duration
}

// Serve runs an endpoint over its routes: each route in order unless it is
// cooling down, each retried with backoff for retryable faults, until one
// answers. A definitive fault ("not found", an unusable parameter) ends
// the call at once.
func (r *Runner) Serve(ctx context.Context, endpoint string, params map[string]string) Outcome {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	var out Outcome
	for _, rt := range r.routes[endpoint] {
		if wait := rt.cooldownLeft(r.opts.Now()); wait > 0 {
			if out.Skipped == 0 || wait < out.Skipped {
				out.Skipped = wait
			}
			continue
		}
		data, fault, leg := r.tryRoute(ctx, rt, params)
		out.Trace.Legs = append(out.Trace.Legs, leg)
		out.Trace.Attempts += leg.Attempts
		if fault == nil {
			out.Data, out.Fault, out.Skipped = data, nil, 0
			out.Trace.ServedBy = leg.ServedBy
			return out
		}
		out.Fault = fault
		if fault.Kind.definitive() || ctx.Err() != nil {
			break
		}
	}
	if out.Fault != nil {
		out.Skipped = 0 // a route was called: its fault is the answer
	}
	if out.Fault != nil && ctx.Err() != nil && !out.Fault.Kind.definitive() {
		// The overall budget ran out: whatever the last attempt saw, no
		// attempt finished in time.
		out.Fault = &Fault{Kind: Timeout, Reason: "the adapter timeout passed"}
	}
	return out
}

// tryRoute makes up to MaxAttempts attempts of one route.
func (r *Runner) tryRoute(ctx context.Context, rt *route, params map[string]string) (any, *Fault, Leg) {
	leg := Leg{ServedBy: rt.provider.Name}
	var last *Fault
	for attempt := 1; attempt <= r.opts.MaxAttempts; attempt++ {
		if attempt > 1 && !r.backoff(ctx, attempt, last) {
			break
		}
		leg.Attempts++
		data, fault := r.attempt(ctx, rt, params)
		rt.record(fault, r.opts.Now(), r.opts)
		if fault == nil {
			leg.OK, leg.Status, leg.Fault = true, 0, ""
			return data, nil, leg
		}
		last = fault
		leg.Status, leg.Fault = fault.Status, fault.Kind
		if !fault.Kind.retryable() || ctx.Err() != nil || rt.cooldownLeft(r.opts.Now()) > 0 {
			break
		}
	}
	return nil, last, leg
}

// attempt runs the adapter once under the attempt timeout.
func (r *Runner) attempt(ctx context.Context, rt *route, params map[string]string) (any, *Fault) {
	actx, cancel := context.WithTimeout(ctx, rt.timeout)
	defer cancel()
	c := &Call{Params: params, BaseURL: rt.baseURL, Now: r.opts.Now(), secrets: rt.secrets, client: r.client, public: r.public, route: rt.provider.Name}
	data, err := rt.adapter(actx, c)
	if err == nil {
		return data, nil
	}
	var f *Fault
	if !errors.As(err, &f) {
		f = MalformedFault("%v", err)
	}
	if f.Kind != Timeout && actx.Err() != nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		// A transport error that was really the deadline.
		f = &Fault{Kind: Timeout, Reason: "no answer before the attempt timeout"}
	}
	for _, secret := range rt.secrets {
		// Reasons reach logs; an upstream may echo a credential back.
		if len(secret) >= 4 {
			f.Reason = strings.ReplaceAll(f.Reason, secret, "[redacted]")
		}
	}
	return nil, f
}

// backoff waits before a retry: exponential with jitter ("equal jitter":
// half fixed, half random), at least the upstream's Retry-After when it
// fits the budget. It reports false when the call's budget cannot cover
// the wait.
func (r *Runner) backoff(ctx context.Context, attempt int, last *Fault) bool {
	d := r.opts.BackoffBase << (attempt - 2)
	if d > r.opts.BackoffMax || d <= 0 {
		d = r.opts.BackoffMax
	}
	d = d/2 + rand.N(d/2+1)
	if last != nil && last.RetryAfter > d {
		if last.RetryAfter > r.opts.BackoffMax {
			return false // the upstream asks for longer than a retry here may wait
		}
		d = last.RetryAfter
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
