package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/internal/devscripts"
	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/upstream/replay"
	"github.com/meridian-data/meridian/shared/usage"
)

// Profile sizes a run.
type Profile struct {
	Name           string
	Requests       int // HTTP requests (a batch is one, whatever its items)
	Clients        int // concurrent clients
	Accounts       int
	KeysPerAccount int
}

// The profiles: make test runs Short on both stores, make soak runs Full.
var (
	Short = Profile{Name: "short", Requests: 1000, Clients: 50, Accounts: 20, KeysPerAccount: 3}
	Full  = Profile{Name: "full", Requests: 10000, Clients: 200, Accounts: 20, KeysPerAccount: 3}
)

// ProfileFromEnv is the profile MERIDIAN_SOAK names (short when unset).
func ProfileFromEnv() (Profile, error) {
	switch v := strings.TrimSpace(os.Getenv("MERIDIAN_SOAK")); v {
	case "", "short":
		return Short, nil
	case "full":
		return Full, nil
	default:
		return Profile{}, fmt.Errorf("MERIDIAN_SOAK=%q: use short or full", v)
	}
}

// Env is the store under test and its event plumbing.
type Env struct {
	// Store is what the request path uses: the store with Faults in it.
	Store store.Store
	// Clean is the same store for the population's setup, the console's
	// key changes during the run and the audit: without the wrapper that
	// injects faults (embedded), or Store itself when the faults live in
	// its client and Faults switches them off for setup and audit
	// (DynamoDB; the console's changes then meet them too).
	Clean store.Store
	// Events takes the request path's usage events and reconciliations.
	Events usage.Sink
	// Drain applies every event and reconciliation still pending (the
	// queue, the outbox), then sweeps the reservations whose lease ended,
	// as the worker would once they have (its clock set past the leases).
	Drain  func(ctx context.Context) error
	Faults *StoreFaults
	// QueueOutage, when set, takes the queue down (true) and back up.
	QueueOutage func(down bool) error
	Logger      *slog.Logger
}

// Rates of the request-level faults: of every client call, the share whose
// caller hangs up, whose process dies and whose function times out.
const (
	hangUpRate  = 0.03
	dieRate     = 0.03
	timeoutRate = 0.02
)

// endpoint is a paid data endpoint the load calls, with the parameter it
// varies and how a value is spelled.
type endpoint struct {
	path, param string
	value       func(n int64) string
}

func slug(n int64) string   { return fmt.Sprintf("soak-%d", n) }
func handle(n int64) string { return fmt.Sprintf("soak%d", n%1_000_000_000) }

// paid are endpoints of costs 1 to 3 that the replay upstream answers for
// any value of param.
var paid = []endpoint{
	{"/v1/company_registry/search", "query", slug},
	{"/v1/code_host/profile", "handle", slug},
	{"/v1/code_host/profile/repos", "handle", slug},
	{"/v1/microblog_b/profile", "handle", handle},
	{"/v1/microblog_a/search", "query", slug},
}

// account is one account of the population with its keys.
type account struct {
	id   string
	keys []popKey
}

type popKey struct {
	id, full string
	// toggled keys are revoked and reactivated during the run.
	toggled bool
}

// run is one soak run's state.
type run struct {
	p        Profile
	env      Env
	api      http.Handler
	accounts []account
	issued   atomic.Int64 // HTTP requests sent so far
	seq      atomic.Int64
	counter  *Counter

	mu      sync.Mutex
	answers []Answer
}

// Run sends the profile's load through the real request path on env with
// every fault kind injected, drains, and audits the books.
func Run(ctx context.Context, p Profile, env Env) (Report, error) {
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	r := &run{p: p, env: env, counter: env.Faults.Counter}
	if err := r.populate(ctx); err != nil {
		return Report{}, fmt.Errorf("populate: %w", err)
	}
	upstreamServer, stopUpstream, err := r.upstream()
	if err != nil {
		return Report{}, err
	}
	defer stopUpstream()
	r.api = app.LocalHandler(env.Logger, app.Deps{
		Store: env.Store, Throttle: auth.NewThrottle(1_000_000), Upstream: upstreamServer.runner,
		Events: env.Events, MCP: mcpserver.NewSurface,
	})

	env.Faults.Start()
	upstreamServer.replay.InjectChaos(&replay.Chaos{ServerError: 0.03, RateLimited: 0.01, Timeout: 0.02, Reset: 0.02, Truncate: 0.02,
		TimeoutDelay: upstreamAttemptTimeout * 3 / 2})
	stopToggles := r.toggleKeys(ctx)
	var wg sync.WaitGroup
	outage := r.queueOutage()
	for i := 0; i < p.Clients; i++ {
		wg.Add(1)
		go func(client int) {
			defer wg.Done()
			r.client(ctx, client, outage)
		}(i)
	}
	wg.Wait()
	stopToggles()
	env.Faults.Stop()
	upstreamServer.replay.InjectChaos(nil)
	if env.QueueOutage != nil {
		if err := env.QueueOutage(false); err != nil {
			return Report{}, err
		}
	}
	end := time.Now()
	if err := env.Drain(ctx); err != nil {
		return Report{}, fmt.Errorf("drain: %w", err)
	}
	ids := make([]string, len(r.accounts))
	for i, a := range r.accounts {
		ids[i] = a.id
	}
	books, err := Collect(ctx, env.Clean, ids, end.Add(store.DefaultLimits.Lease))
	if err != nil {
		return Report{}, err
	}
	report := Check(books, r.answers)
	report.Faults = r.counter.Counts()
	for k, v := range upstreamServer.replay.Injected() {
		report.Faults[k] += v
	}
	return report, nil
}

// populate opens the accounts and keys: every fifth account starts near
// an empty wallet, each account's second key has a small credit_limit,
// and every other account's third key is revoked and reactivated during
// the run.
func (r *run) populate(ctx context.Context) error {
	for i := 0; i < r.p.Accounts; i++ {
		credits := int64(1_000_000)
		if i%5 == 4 {
			credits = 15
		}
		a, _, err := auth.CreateAccount(ctx, r.env.Clean, credits, envelope.NewRequestID())
		if err != nil {
			return err
		}
		acct := account{id: a.ID}
		for k := 0; k < r.p.KeysPerAccount; k++ {
			var limit *int64
			if k == 1 {
				limit = new(int64)
				*limit = int64(10 + i)
			}
			full, key := auth.NewKey(a.ID, fmt.Sprintf("soak-%d", k), limit)
			created, err := r.env.Clean.CreateKey(ctx, key)
			if err != nil {
				return err
			}
			acct.keys = append(acct.keys, popKey{id: created.ID, full: full, toggled: k == 2 && i%2 == 0})
		}
		r.accounts = append(r.accounts, acct)
	}
	return nil
}

// upstreamAttemptTimeout is the runner's attempt timeout in the soak: short,
// so the replay upstream's timeouts cost little time, and long enough that
// only they time out on a busy machine.
const upstreamAttemptTimeout = time.Second

type upstreamSet struct {
	replay *replay.Server
	runner *upstream.Runner
}

// upstream serves the repository's fixtures with the runner the local
// server would build, its HTTP client marking the calls that reached it.
func (r *run) upstream() (upstreamSet, func(), error) {
	root, err := devscripts.Root()
	if err != nil {
		return upstreamSet{}, nil, err
	}
	srv, err := replay.Load(filepath.Join(root, replay.DefaultDir))
	if err != nil {
		return upstreamSet{}, nil, err
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		return upstreamSet{}, nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 256
	runner := upstream.NewRunner(adapters.All(), upstream.Settings{
		ReplayURL: base,
		Client:    &http.Client{Transport: upstreamTagger{next: transport}},
		Options: upstream.Options{AttemptTimeout: upstreamAttemptTimeout, Timeout: 5 * upstreamAttemptTimeout / 2, MaxAttempts: 2,
			BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Cooldown: 100 * time.Millisecond},
	})
	return upstreamSet{replay: srv, runner: runner}, func() { _ = stop() }, nil
}

// toggleKeys revokes and reactivates the toggled keys through the clean
// store (the console's writes) until stopped.
func (r *run) toggleKeys(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		revoked := map[string]string{} // key id -> account id
		for {
			select {
			case <-done:
				for id, acct := range revoked {
					_, _ = r.env.Clean.SetKeyStatus(ctx, acct, id, store.KeyActive)
				}
				return
			case <-time.After(15 * time.Millisecond):
			}
			a := r.accounts[rand.IntN(len(r.accounts))]
			for _, k := range a.keys {
				if !k.toggled {
					continue
				}
				to := store.KeyRevoked
				if revoked[k.id] != "" {
					to = store.KeyActive
				}
				if _, err := r.env.Clean.SetKeyStatus(ctx, a.id, k.id, to); err == nil {
					if to == store.KeyRevoked {
						revoked[k.id] = a.id
					} else {
						delete(revoked, k.id)
					}
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// queueOutage returns the function clients call as requests are sent: it
// takes the queue down between 30 % and 60 % of the load.
func (r *run) queueOutage() func(issued int64) {
	if r.env.QueueOutage == nil {
		return func(int64) {}
	}
	var down, up sync.Once
	total := int64(r.p.Requests)
	return func(issued int64) {
		switch {
		case issued >= total*3/10 && issued < total*6/10:
			down.Do(func() {
				if r.env.QueueOutage(true) == nil {
					r.counter.Add(FaultQueueDown)
				}
			})
		case issued >= total*6/10:
			down.Do(func() {})
			up.Do(func() { _ = r.env.QueueOutage(false) })
		}
	}
}

// client sends requests until the profile's count is sent.
func (r *run) client(ctx context.Context, id int, outage func(int64)) {
	remote := fmt.Sprintf("198.51.100.%d:%d", id%250+1, 40000+id)
	for ctx.Err() == nil {
		a := r.accounts[rand.IntN(len(r.accounts))]
		k := a.keys[rand.IntN(len(a.keys))]
		x := rand.Float64()
		n := int64(1)
		switch {
		case x < 0.30:
			r.get(ctx, remote, a, k, "get", r.paidTarget(), "")
		case x < 0.40:
			r.get(ctx, remote, a, k, "cached", r.popularTarget(), "")
		case x < 0.45:
			r.get(ctx, remote, a, k, "dry-run", r.paidTarget()+"&dry_run=1", "")
		case x < 0.50:
			r.get(ctx, remote, a, k, "invalid", r.invalidTarget(), "")
		case x < 0.65:
			n = r.idempotent(ctx, remote, a, k)
		case x < 0.80:
			n = r.batch(ctx, remote, a, k)
		case x < 0.92:
			n = r.mcp(ctx, remote, a, k)
		default:
			r.get(ctx, remote, a, k, "free", "/v1/credits/balance", "")
		}
		issued := r.issued.Add(n)
		outage(issued)
		if issued >= int64(r.p.Requests) {
			return
		}
	}
}

// unique is a number no other call of the run uses (popular values are
// below 4).
func (r *run) unique() int64 { return 1000 + r.seq.Add(1) }

// paidTarget is a paid call no cache has seen.
func (r *run) paidTarget() string {
	e := paid[rand.IntN(len(paid))]
	return e.path + "?" + e.param + "=" + e.value(r.unique())
}

// popularTarget is one of a few paid calls every client repeats: cache hits.
func (r *run) popularTarget() string {
	e := paid[rand.IntN(len(paid))]
	return fmt.Sprintf("%s?%s=%s", e.path, e.param, e.value(int64(rand.IntN(4))))
}

// invalidTarget is refused before any charge: an undeclared parameter, a
// missing required one, or a value out of range.
func (r *run) invalidTarget() string {
	switch rand.IntN(3) {
	case 0:
		return "/v1/company_registry/search?query=x&colour=red"
	case 1:
		return "/v1/company_registry/search"
	default:
		return "/v1/company_registry/search?query=x&limit=100000"
	}
}

// newPlan decides a call's fate and returns its context.
func (r *run) newPlan(ctx context.Context, idempotencyKey string) (context.Context, *plan, func()) {
	p := &plan{idempotencyKey: idempotencyKey}
	ctx, p.cancel = context.WithCancel(ctx)
	cleanup := p.cancel
	switch x := rand.Float64(); {
	case x < hangUpRate:
		p.cancelAt = 1 + rand.Int32N(6)
	case x < hangUpRate+dieRate:
		p.killAt = 1 + rand.Int32N(8)
	case x < hangUpRate+dieRate+timeoutRate:
		// The function's timeout: its context ends and, if it has not
		// answered by then, the runtime stops it.
		d := time.Duration(1+rand.IntN(40)) * time.Millisecond
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		timer := time.AfterFunc(d, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if !p.answered && !p.killed {
				p.killed = true
				r.counter.Add(FaultTimeout)
			}
		})
		cleanup = func() { timer.Stop(); cancel(); p.cancel() }
	}
	return context.WithValue(ctx, planKey{}, p), p, cleanup
}

// call sends one request through the API and returns its answer, or nil
// when the client got none (it hung up, or the process died first).
func (r *run) call(ctx context.Context, remote, method, target string, header http.Header, body []byte, idempotencyKey string) (*httptest.ResponseRecorder, *plan) {
	ctx, p, cleanup := r.newPlan(ctx, idempotencyKey)
	defer cleanup()
	req := httptest.NewRequestWithContext(ctx, method, "http://api.soak.test"+target, bytes.NewReader(body))
	req.RemoteAddr = remote
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	r.api.ServeHTTP(rec, req)
	if died := p.answer(); died || ctx.Err() != nil {
		return nil, p
	}
	return rec, p
}

// record keeps answers.
func (r *run) record(answers ...Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers = append(r.answers, answers...)
}

// envelopeAnswer reads an envelope (2.1, 2.2) into an answer.
func envelopeAnswer(kind, accountID string, status int, body []byte) Answer {
	var env struct {
		RequestID   string          `json:"request_id"`
		CreditsUsed json.RawMessage `json:"credits_used"`
		Error       *struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		} `json:"error"`
	}
	a := Answer{Kind: kind, AccountID: accountID, Status: status}
	if err := json.Unmarshal(body, &env); err != nil {
		a.Malformed = "not a JSON envelope: " + err.Error()
		return a
	}
	a.RequestID = env.RequestID
	if !strings.HasPrefix(a.RequestID, "req_") {
		a.Malformed = "no request_id"
	}
	if env.Error != nil {
		a.ErrorType = env.Error.Type
		if env.Error.Status != 0 {
			a.Status = env.Error.Status
		}
	}
	switch raw := strings.TrimSpace(string(env.CreditsUsed)); raw {
	case "null":
	case "":
		a.Credits = new(int64)
	default:
		var n int64
		if json.Unmarshal(env.CreditsUsed, &n) != nil {
			n = -1 // not a whole number: no charge can agree with it
		}
		a.Credits = &n
	}
	return a
}

// get is one direct GET; it returns the status the client saw (0: none).
func (r *run) get(ctx context.Context, remote string, a account, k popKey, kind, target, idempotencyKey string) int {
	header := http.Header{"X-Api-Key": {k.full}}
	if idempotencyKey != "" {
		header.Set("Idempotency-Key", idempotencyKey)
	}
	rec, p := r.call(ctx, remote, http.MethodGet, target, header, nil, idempotencyKey)
	ans := Answer{Kind: kind, AccountID: a.id, Lost: true}
	if rec != nil {
		ans = envelopeAnswer(kind, a.id, rec.Code, rec.Body.Bytes())
		ans.Replay = rec.Header().Get("x-idempotent-replay") == "true"
		ans.Unprotected = rec.Header().Get("x-idempotency-status") == "unavailable"
	}
	ans.IdempotencyKey, ans.ReachedUpstream = idempotencyKey, p.upstream.Load()
	r.record(ans)
	return ans.Status
}

// idempotent sends a call with an Idempotency-Key, maybe again while it
// is in flight, and again after it finished.
func (r *run) idempotent(ctx context.Context, remote string, a account, k popKey) int64 {
	key := fmt.Sprintf("soak-idem-%d", r.unique())
	target := r.paidTarget()
	n := int64(1)
	var wg sync.WaitGroup
	if rand.IntN(2) == 0 {
		n++
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			r.get(ctx, remote, a, k, "idempotent", target, key)
		}()
	}
	r.get(ctx, remote, a, k, "idempotent", target, key)
	wg.Wait()
	// Then a retry, as a client retries: shortly, and again while the
	// first is still finishing (409).
	for retry := 0; retry < 3; retry++ {
		time.Sleep(time.Duration(10+rand.IntN(30)) * time.Millisecond)
		n++
		if r.get(ctx, remote, a, k, "idempotent", target, key) != http.StatusConflict {
			break
		}
	}
	return n
}

// batch sends POST /v1/batch with 1 to 20 items: new paid calls, cached
// ones and invalid ones.
func (r *run) batch(ctx context.Context, remote string, a account, k popKey) int64 {
	type item struct {
		Platform string            `json:"platform"`
		Endpoint string            `json:"endpoint"`
		Params   map[string]string `json:"params"`
	}
	n := 1 + rand.IntN(20)
	items := make([]item, n)
	for i := range items {
		var target string
		switch x := rand.Float64(); {
		case x < 0.7:
			target = r.paidTarget()
		case x < 0.9:
			target = r.popularTarget()
		default:
			target = r.invalidTarget()
		}
		u, _ := url.Parse(target)
		platform, endpoint, _ := strings.Cut(strings.TrimPrefix(u.Path, "/v1/"), "/")
		params := map[string]string{}
		for name, v := range u.Query() {
			params[name] = v[0]
		}
		items[i] = item{Platform: platform, Endpoint: endpoint, Params: params}
	}
	body, _ := json.Marshal(map[string]any{"requests": items})
	header := http.Header{"X-Api-Key": {k.full}, "Content-Type": {"application/json"}}
	rec, _ := r.call(ctx, remote, http.MethodPost, "/v1/batch", header, body, "")
	if rec == nil {
		r.record(Answer{Kind: "batch", AccountID: a.id, Lost: true})
		return 1
	}
	var wrapper struct {
		Results []json.RawMessage `json:"results"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &wrapper) != nil {
		r.record(envelopeAnswer("batch", a.id, rec.Code, rec.Body.Bytes()))
		return 1
	}
	for _, res := range wrapper.Results {
		var status struct {
			Status int `json:"status"`
		}
		_ = json.Unmarshal(res, &status)
		r.record(envelopeAnswer("batch-item", a.id, status.Status, res))
	}
	if len(wrapper.Results) != n {
		r.record(Answer{Kind: "batch", AccountID: a.id, Status: rec.Code,
			Malformed: fmt.Sprintf("%d results for %d items", len(wrapper.Results), n)})
	}
	return 1
}

// mcp calls a data tool through /mcp (stateless JSON-RPC).
func (r *run) mcp(ctx context.Context, remote string, a account, k popKey) int64 {
	e := paid[rand.IntN(len(paid))]
	tool := strings.ReplaceAll(strings.TrimPrefix(e.path, "/v1/"), "/", "__")
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": map[string]any{e.param: e.value(r.unique())}}})
	header := http.Header{"X-Api-Key": {k.full}, "Content-Type": {"application/json"},
		"Accept": {"application/json, text/event-stream"}}
	rec, _ := r.call(ctx, remote, http.MethodPost, "/mcp", header, body, "")
	if rec == nil {
		r.record(Answer{Kind: "mcp", AccountID: a.id, Lost: true})
		return 1
	}
	var rpc struct {
		Result *struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	raw, _ := io.ReadAll(rec.Body)
	switch {
	case rec.Code >= 400:
		// Refused before the MCP server ran (a key refused at /mcp): the
		// API's error envelope on the HTTP layer.
		r.record(envelopeAnswer("mcp-refused", a.id, rec.Code, raw))
		return 1
	case json.Unmarshal(raw, &rpc) != nil || rpc.Result == nil || len(rpc.Result.StructuredContent) == 0:
		ans := Answer{Kind: "mcp-protocol", AccountID: a.id, Status: rec.Code, Credits: new(int64)}
		if rpc.Error == nil {
			ans.Malformed = "neither a tool result nor a JSON-RPC error: " + string(raw)
		}
		r.record(ans)
		return 1
	}
	r.record(envelopeAnswer("mcp", a.id, http.StatusOK, rpc.Result.StructuredContent))
	return 1
}
