package upstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
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
	// limited routes take one unit of their provider's monthly allowance
	// before each attempt (when the runner has an Allowances store).
	limited   bool
	allowance int64

	mu       sync.Mutex
	failures int       // consecutive unhealthy attempts
	until    time.Time // end of the cooldown
	// spent is the month whose allowance this process saw used up: the
	// count only grows within a month, so the route is passed over without
	// asking the store again until the month changes.
	spent string
}

func (r *route) spentIn(month string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spent == month
}

func (r *route) markSpent(month string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spent = month
}

func (r *route) cooldownLeft(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.until.Sub(now)
}

// maxRateLimitRest caps how long an upstream's own rate-limit wait rests
// a route (a daily quota may ask for hours; the process may live less).
const maxRateLimitRest = time.Hour

// record updates the route's health once per call: a success clears its
// failures; CooldownAfter unhealthy calls in a row rest it; an upstream
// rate limit with a known wait rests it for that wait at once.
func (r *route) record(f *Fault, now time.Time, o Options) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case f == nil:
		r.failures = 0
	case f.Kind == RateLimited && f.RetryAfter > 0:
		r.until, r.failures = now.Add(min(f.RetryAfter, maxRateLimitRest)), 0
	case f.unhealthy():
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
	// allow counts the monthly allowances; nil enforces none.
	allow Allowances
	// memory keeps remembered resolutions; nil keeps none.
	memory Memory
	// meter admits every upstream request; nil admits all.
	meter Meter
}

// Meter admits one upstream request of provider's route: false refuses it
// before it leaves (the canary's budget of source requests). It is asked
// once per request, every fetch of an adapter included.
type Meter func(ctx context.Context, provider string) bool

// BudgetSpent is the Code of the fault a request the meter refused ends
// with.
const BudgetSpent = "budget_spent"

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
	// Allowances keep providers' shared monthly allowances (the store);
	// nil enforces none (WithAllowances adds it later).
	Allowances Allowances
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
	r := &Runner{opts: s.Options.withDefaults(), routes: map[string][]*route{}, client: s.Client, public: s.URLPolicy, allow: s.Allowances}
	for _, p := range providers {
		base, secrets, ok := configure(p, s)
		if !ok {
			continue
		}
		timeout := p.AttemptTimeout
		if timeout <= 0 {
			timeout = r.opts.AttemptTimeout
		}
		// A malformed override keeps the declared allowance (NewUpstream in
		// shared/app logs it).
		allowance, limited, _ := AllowanceOf(p, s.Lookup)
		for key, adapter := range p.Endpoints {
			r.routes[key] = append(r.routes[key], &route{
				provider: p, endpoint: key, adapter: adapter, baseURL: base, secrets: secrets, timeout: timeout,
				limited: limited, allowance: allowance,
			})
		}
	}
	return r
}

// AllowanceOf is p's monthly allowance as configured: AllowanceVar when
// set ("unlimited" lifts it, "0" allows no attempt), else p.Allowance;
// limited is false when there is none. A value that is neither is an
// error, and the declared allowance stands.
func AllowanceOf(p *Provider, lookup func(string) (string, bool)) (limit int64, limited bool, err error) {
	limit, limited = p.Allowance, p.Allowance > 0
	v, set := "", false
	if lookup != nil {
		v, set = lookup(p.AllowanceVar())
	}
	switch v = strings.TrimSpace(v); {
	case !set || v == "":
		return limit, limited, nil
	case strings.EqualFold(v, "unlimited"):
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || n < 0 {
		// The value is not quoted: variables may come from the secret.
		return limit, limited, fmt.Errorf("%s: want a whole number of attempts a month, or unlimited", p.AllowanceVar())
	}
	return n, true, nil
}

// WithAllowances is the runner enforcing allowances counted in a: the same
// routes (and their health), so every family in a process shares them.
func (r *Runner) WithAllowances(a Allowances) *Runner {
	c := *r
	c.allow = a
	return &c
}

// WithMemory is the runner keeping remembered resolutions in m (the
// store), shared by every family in a process and every instance.
func (r *Runner) WithMemory(m Memory) *Runner {
	c := *r
	c.memory = m
	return &c
}

// WithMeter is the runner asking m before every upstream request (the
// same routes and their health).
func (r *Runner) WithMeter(m Meter) *Runner {
	c := *r
	c.meter = m
	return &c
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
		case replay:
			// Real credentials never go to the replay upstream.
			if sec.Required {
				secrets[sec.Name] = ReplaySecret
			}
		case set && v != "":
			secrets[sec.Name] = v
		case sec.Required:
			return "", nil, false
		}
	}
	return base, secrets, true
}

// NewAPIClient is the client NewRunner uses when Settings.Client is nil:
// a caller that wants to observe the routes' requests (the canary's
// -record) wraps its Transport and passes it as Settings.Client.
func NewAPIClient() *http.Client { return apiClient() }

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

// Routes names the endpoint's eligible routes (their providers), in the
// order Serve tries them.
func (r *Runner) Routes(endpoint string) []string {
	names := make([]string, 0, len(r.routes[endpoint]))
	for _, rt := range r.routes[endpoint] {
		names = append(names, rt.provider.Name)
	}
	return names
}

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
// when a route was passed over for its cooldown.
type Outcome struct {
	Data    any
	Fault   *Fault
	Trace   Trace
	Skipped time.Duration
	// CapacityReset, when a route was passed over because its provider's
	// monthly allowance is spent, is when it resets (the next month), and
	// CapacityWait how long that is from the call.
	CapacityReset time.Time
	CapacityWait  time.Duration
	// AllowanceErr is the store's error when a route's allowance could
	// not be taken: the route was not called (fail closed).
	AllowanceErr error
	// BudgetSpent: the meter refused a request (WithMeter), so a route
	// was not called or did not finish.
	BudgetSpent bool
}

// Serve runs an endpoint over its routes: each route in order unless it is
// cooling down, each retried with backoff for retryable faults while the
// budget leaves room for the routes after it, until one answers. A
// definitive fault ("not found", an unusable parameter) ends the call.
func (r *Runner) Serve(ctx context.Context, endpoint string, params map[string]string) Outcome {
	return r.serve(ctx, r.routes[endpoint], params)
}

// ServeRoute is Serve over the one route of provider (the canary checks
// each route alone); an endpoint without that route is served by none.
func (r *Runner) ServeRoute(ctx context.Context, endpoint, provider string, params map[string]string) Outcome {
	for _, rt := range r.routes[endpoint] {
		if rt.provider.Name == provider {
			return r.serve(ctx, []*route{rt}, params)
		}
	}
	return Outcome{}
}

func (r *Runner) serve(ctx context.Context, routes []*route, params map[string]string) Outcome {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	var out Outcome
	for i, rt := range routes {
		if wait := rt.cooldownLeft(r.opts.Now()); wait > 0 {
			if out.Skipped == 0 || wait < out.Skipped {
				out.Skipped = wait
			}
			continue
		}
		data, fault, leg, gate := r.tryRoute(ctx, rt, params, r.reserveFor(routes[i+1:]))
		if leg.Attempts == 0 {
			// Not called: passed over like a resting route.
			out.BudgetSpent = out.BudgetSpent || gate.budget
			if gate.err != nil && out.AllowanceErr == nil {
				out.AllowanceErr = gate.err
			}
			if gate.spent {
				now := r.opts.Now()
				out.CapacityReset = NextMonth(now)
				out.CapacityWait = out.CapacityReset.Sub(now)
			}
			continue
		}
		out.Trace.Legs = append(out.Trace.Legs, leg)
		out.Trace.Attempts += leg.Attempts
		if fault == nil {
			out.Data, out.Fault, out.Skipped = data, nil, 0
			out.CapacityReset, out.CapacityWait, out.AllowanceErr = time.Time{}, 0, nil
			out.Trace.ServedBy = leg.ServedBy
			return out
		}
		out.Fault = fault
		out.BudgetSpent = out.BudgetSpent || fault.Code == BudgetSpent
		if fault.Kind.definitive() || ctx.Err() != nil || out.BudgetSpent {
			break
		}
	}
	if out.Fault != nil && ctx.Err() != nil && !out.Fault.Kind.definitive() {
		// The overall budget ran out: whatever the last attempt saw, no
		// attempt finished in time.
		out.Fault = &Fault{Kind: Timeout, Reason: "the adapter timeout passed"}
	}
	return out
}

// reserveFor is the time to keep for the routes after this one: one
// attempt each, so that retries never starve a failover.
func (r *Runner) reserveFor(later []*route) time.Duration {
	var d time.Duration
	now := r.opts.Now()
	for _, rt := range later {
		if rt.cooldownLeft(now) <= 0 && !rt.spentIn(Month(now)) {
			d += rt.timeout
		}
	}
	return d
}

// gate is why a route's next attempt was not made: its allowance is spent,
// the store could not take a unit (err), or the meter refused its first
// request (budget).
type gate struct {
	spent  bool
	err    error
	budget bool
}

func (g gate) closed() bool { return g.spent || g.err != nil || g.budget }

// take takes one unit of the route's allowance for the next attempt.
func (r *Runner) take(ctx context.Context, rt *route) gate {
	if !rt.limited || r.allow == nil {
		return gate{}
	}
	now := r.opts.Now()
	month := Month(now)
	if rt.allowance <= 0 || rt.spentIn(month) {
		return gate{spent: true}
	}
	_, ok, err := r.allow.TakeAllowance(ctx, rt.provider.Name, month, rt.allowance, now)
	switch {
	case err != nil:
		return gate{err: fmt.Errorf("take the %s allowance: %w", rt.provider.Name, err)}
	case !ok:
		rt.markSpent(month)
		return gate{spent: true}
	}
	return gate{}
}

// Capacity is what remains this month of an endpoint's allowances.
type Capacity struct {
	// Bounded: every eligible route has an allowance and the runner
	// enforces them, so Remaining (the sum over the routes) is exact as
	// of now. Otherwise it is unknown or unbounded.
	Bounded   bool
	Remaining int64
	ResetsAt  time.Time
}

// Capacity reads the allowances left to an endpoint's eligible routes: one
// store read per route with an allowance.
func (r *Runner) Capacity(ctx context.Context, endpoint string) (Capacity, error) {
	now := r.opts.Now()
	c := Capacity{ResetsAt: NextMonth(now)}
	routes := r.routes[endpoint]
	if len(routes) == 0 || r.allow == nil {
		return c, nil
	}
	for _, rt := range routes {
		if !rt.limited {
			return c, nil
		}
	}
	for _, rt := range routes {
		if rt.allowance <= 0 {
			continue
		}
		used, err := r.allow.AllowanceUsed(ctx, rt.provider.Name, Month(now), now)
		if err != nil {
			return c, fmt.Errorf("read the %s allowance: %w", rt.provider.Name, err)
		}
		c.Remaining += max(0, rt.allowance-used)
	}
	c.Bounded = true
	return c, nil
}

// tryRoute makes up to MaxAttempts attempts of one route, each taking a
// unit of its allowance at its first upstream request, and records the call's outcome in the
// route's health, unless the caller went away or no attempt was made. The
// gate says why an attempt was not made for the allowance.
func (r *Runner) tryRoute(ctx context.Context, rt *route, params map[string]string, reserve time.Duration) (any, *Fault, Leg, gate) {
	leg := Leg{ServedBy: rt.provider.Name}
	var data any
	var last *Fault
	var g gate
	for attempt := 1; attempt <= r.opts.MaxAttempts; attempt++ {
		if attempt > 1 && !r.backoff(ctx, attempt, last, rt.timeout/2+reserve) {
			break
		}
		var took gate
		var take func(context.Context) *Fault
		if rt.limited && r.allow != nil {
			// Taken at the attempt's first upstream request, so a request
			// the adapter refuses before fetching spends no allowance.
			take = func(ctx context.Context) *Fault {
				if took = r.take(ctx, rt); took.closed() {
					return &Fault{Kind: Rejected, Reason: "the route's monthly allowance is not available"}
				}
				return nil
			}
		}
		got, f, sent := r.attempt(ctx, rt, params, take)
		if took.closed() {
			g = took
			break // no request was made, so no attempt; a retry keeps the fault it had
		}
		if sent == 0 && f != nil && f.Code == BudgetSpent {
			g = gate{budget: true}
			break // likewise: the meter refused the attempt's first request
		}
		leg.Attempts++
		data, last = got, f
		if last == nil {
			leg.OK, leg.Status, leg.Fault = true, 0, ""
			break
		}
		leg.Status, leg.Fault = last.Status, last.Kind
		if !last.Kind.retryable() || ctx.Err() != nil || last.Code == BudgetSpent {
			break
		}
	}
	if leg.Attempts > 0 && !errors.Is(ctx.Err(), context.Canceled) {
		rt.record(last, r.opts.Now(), r.opts)
	}
	return data, last, leg, g
}

// RouteInfo names the route an attempt runs on.
type RouteInfo struct {
	Provider string // the provider's Name
	BaseURL  string // the route's base URL as configured
}

// routeKey carries an attempt's RouteInfo in its context.
type routeKey struct{}

// RouteOf reports the route whose attempt made a request with ctx (an
// http.Request's context, in a RoundTripper of Settings.Client), so a
// transport shared by every route knows whose request it carries: the
// replay recorder files answers under their provider this way.
func RouteOf(ctx context.Context) (RouteInfo, bool) {
	info, ok := ctx.Value(routeKey{}).(RouteInfo)
	return info, ok
}

// attempt runs the adapter once under the attempt timeout; sent is how
// many upstream requests it made (counted when a meter or an allowance
// gates them).
func (r *Runner) attempt(ctx context.Context, rt *route, params map[string]string, take func(context.Context) *Fault) (any, *Fault, int64) {
	ctx = context.WithValue(ctx, routeKey{}, RouteInfo{Provider: rt.provider.Name, BaseURL: rt.baseURL})
	actx, cancel := context.WithTimeout(ctx, rt.timeout)
	defer cancel()
	c := &Call{Params: params, BaseURL: rt.baseURL, Now: r.opts.Now(), secrets: rt.secrets, client: r.client, public: r.public,
		provider: rt.provider.Name, memory: r.memory}
	if take != nil || r.meter != nil {
		c.admit = &admission{take: take}
		if m := r.meter; m != nil {
			c.admit.meter = func(ctx context.Context) bool { return m(ctx, rt.provider.Name) }
		}
	}
	data, err := rt.adapter(actx, c)
	sent := c.admit.requests()
	if err == nil && data == nil {
		err = MalformedFault("the adapter mapped no data")
	}
	if err == nil {
		return data, nil, sent
	}
	var f *Fault
	if !errors.As(err, &f) {
		f = MalformedFault("%v", err)
	}
	if f.Kind == Transport && errors.Is(actx.Err(), context.DeadlineExceeded) {
		// A transport error that was really the deadline.
		f = &Fault{Kind: Timeout, Reason: "no answer before the attempt timeout"}
	}
	for _, secret := range rt.secrets {
		// Reasons reach the request log; an upstream may echo a credential.
		if len(secret) >= 4 {
			f.Reason = strings.ReplaceAll(f.Reason, secret, "[redacted]")
		}
	}
	return nil, f, sent
}

// backoff waits before a retry: exponential with jitter ("equal jitter":
// half fixed, half random), at least the upstream's Retry-After when it
// fits the cap. It reports false, without waiting, when the call's budget
// cannot cover the wait and still keep need for what comes after.
func (r *Runner) backoff(ctx context.Context, attempt int, last *Fault, need time.Duration) bool {
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
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d+need {
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

// PublicLeg is one route's part in a call as an answer shows it (spec 2.7
// legs[]): the route by its neutral label, never a real site or vendor.
type PublicLeg struct {
	Attempts int    `json:"attempts"`
	Credits  int64  `json:"credits"`
	Endpoint string `json:"endpoint"`
	OK       bool   `json:"ok"`
	ServedBy string `json:"served_by"`
	// Status is the HTTP status the leg ended with: 200 for the leg that
	// answered, the source's last status for one that failed, null when
	// no answer came (a timeout or a reset).
	Status *int `json:"status"`
}

// LegsReporter is data that shows its legs (photo_social/post-stats): the
// caller gives it the trace once the call succeeded.
type LegsReporter interface {
	ReportLegs([]PublicLeg)
}

// PublicLegs turns a trace of key's routes into the legs an answer shows:
// each route by its neutral label; the call's charge is on the leg that
// answered (failed legs cost nothing, spec 8); endpoint is the public path.
func (r *Runner) PublicLegs(key string, t Trace, endpoint string, charge int64) []PublicLeg {
	labels := map[string]string{}
	for _, rt := range r.routes[key] {
		labels[rt.provider.Name] = rt.provider.PublicLabel()
	}
	legs := make([]PublicLeg, 0, len(t.Legs))
	for _, l := range t.Legs {
		pl := PublicLeg{Attempts: l.Attempts, Endpoint: endpoint, OK: l.OK, ServedBy: labels[l.ServedBy]}
		if pl.ServedBy == "" {
			pl.ServedBy = "direct"
		}
		switch {
		case l.OK:
			ok := 200
			pl.Status, pl.Credits = &ok, charge
		case l.Status != 0:
			status := l.Status
			pl.Status = &status
		}
		legs = append(legs, pl)
	}
	return legs
}
