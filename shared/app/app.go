// Package app wires the pipeline from the environment for the Lambda
// functions and the local server, so that every main stays one line.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/meridian-data/meridian/shared/assist"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/composite"
	"github.com/meridian-data/meridian/shared/console"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/gateway"
	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/monitors/awsscheduler"
	"github.com/meridian-data/meridian/shared/openapi"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/queue/sqsqueue"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/usage"
	"github.com/meridian-data/meridian/shared/webjobs"
)

// Environment variables read here (README, "Configuration").
const (
	EnvAddr            = "MERIDIAN_ADDR"              // local server listen address
	EnvErrorsURL       = "MERIDIAN_ERRORS_URL"        // errors reference that doc_url anchors into
	EnvLogLevel        = "MERIDIAN_LOG_LEVEL"         // debug, info (default), warn, error
	EnvDataDir         = "MERIDIAN_DATA_DIR"          // embedded store folder (default .data)
	EnvAdminToken      = "MERIDIAN_ADMIN_TOKEN"       // enables the operator API
	EnvInvalidKeyLimit = "MERIDIAN_INVALID_KEY_LIMIT" // invalid-key attempts per client per minute (default 20)
	EnvTable           = "MERIDIAN_TABLE"             // DynamoDB table of the Lambda functions
	EnvFairUse         = "MERIDIAN_FAIR_USE"          // 30-day ceilings: platform/endpoint=N,… (0 turns metering off)
	EnvModelFairUse    = "MERIDIAN_MODEL_FAIR_USE"    // 30-day ceiling of AI-assist model calls per account (default 20000, 0 = none)
	EnvContactURL      = "MERIDIAN_CONTACT_URL"       // the OpenAPI document's info.contact.url
	EnvContactEmail    = "MERIDIAN_CONTACT_EMAIL"     // the OpenAPI document's info.contact.email
)

// DefaultAddr is where make run listens.
const DefaultAddr = "127.0.0.1:8080"

// DevCredits is the balance of the development account make run creates.
const DevCredits = 1000

// Logger writes one JSON object per line to stdout (CloudWatch in Lambda).
func Logger() *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(os.Getenv(EnvLogLevel)))
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level}))
}

// Deps are what a pipeline shares across families in one process.
type Deps struct {
	Store    store.Store // nil: no key is valid and nothing is billed
	Throttle *auth.Throttle
	// Upstream serves data endpoints; nil leaves every one unwired (501).
	Upstream *upstream.Runner
	// Pages reads the public pages web/social-profiles follows (link-in-bio
	// pages, and same-handle probes with its direct Fetch only); nil reads
	// none, and its answers say partial.
	Pages composite.PageFetcher
	// Model labels the records of AI endpoints; nil means this deployment
	// has none, and their answers say labels are off.
	Model assist.Model
	// Events takes usage events and reconciliations; nil emits nothing.
	Events usage.Sink
	// AdminToken enables the operator API; empty reads MERIDIAN_ADMIN_TOKEN.
	AdminToken string
	// Scheduler keeps one schedule per monitor (EventBridge Scheduler in
	// AWS, in process locally); nil serves no /v1/monitors.
	Scheduler monitors.Scheduler
	// Jobs queues web jobs (async=1) for the worker; nil accepts none.
	Jobs queue.JobQueue
	// Reference serves the API reference page (/docs and its files): set
	// by the mains that serve it (the service function and the local
	// server; WithReference), so no other function embeds its assets.
	Reference pipeline.Reference
	// MCP builds the /mcp surface: set by the mains that serve it (the
	// mcp function and the local server; WithMCP), so no other function
	// links the MCP server and its SDK.
	MCP MCPSurface
	// emitter is Events when a Lambda function must flush it after each invocation.
	emitter *usage.Emitter
}

// ThrottleFromEnv is the invalid-key throttle MERIDIAN_INVALID_KEY_LIMIT asks for.
func ThrottleFromEnv() *auth.Throttle {
	limit := 20
	if n, err := strconv.Atoi(os.Getenv(EnvInvalidKeyLimit)); err == nil && n > 0 {
		limit = n
	}
	return auth.NewThrottle(limit)
}

// fairUseLimits reads MERIDIAN_FAIR_USE, e.g.
// "web/social-profiles=5000,search/all=0"; bad entries are logged and skipped.
func fairUseLimits(logger *slog.Logger) map[string]int64 {
	limits := map[string]int64{}
	for _, pair := range strings.Split(os.Getenv(EnvFairUse), ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		key, value, ok := strings.Cut(pair, "=")
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if _, known := registry.Default().Endpoint(strings.TrimSpace(key)); !ok || err != nil || n < 0 || !known {
			logger.Warn("ignoring a "+EnvFairUse+" entry", "entry", pair)
			continue
		}
		limits[strings.TrimSpace(key)] = n
	}
	return limits
}

// modelFairUse reads MERIDIAN_MODEL_FAIR_USE: the 30-day ceiling of model
// calls per account (0 meters none); a bad value keeps the default.
func modelFairUse(logger *slog.Logger) int64 {
	v := strings.TrimSpace(os.Getenv(EnvModelFairUse))
	if v == "" {
		return pipeline.DefaultModelFairUse
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		logger.Warn("ignoring "+EnvModelFairUse, "value", v)
		return pipeline.DefaultModelFairUse
	}
	return n
}

// Settings are what a process's API is built from (New): the pipeline's
// configuration and what the features built on it keep.
type Settings struct {
	pipeline.Config
	// Monitors keeps monitors and their runs; with a Scheduler (one
	// schedule per monitor), /v1/monitors is served and RunMonitor runs
	// what the schedules deliver. MonitorPauseAfter is how many runs in a
	// row may fail before a monitor pauses itself (0: the default, 5).
	Monitors          store.Monitors
	Scheduler         monitors.Scheduler
	MonitorPauseAfter int
	// AdminToken enables the operator API (/admin) when set.
	AdminToken string
	// MCP builds the /mcp surface (nil: /mcp is not served here).
	MCP MCPSurface
}

// MCPSurface builds the /mcp surface (shared/mcpserver.NewSurface) over
// tools, the API its tool calls run on, asked for on first use.
type MCPSurface func(reg *registry.Registry, tools func() pipeline.Runner, schemas openapi.DataSchemas, logger *slog.Logger) pipeline.Surface

// API is one process's API for a family ("" for all): the request
// pipeline, and the features built on it, each reaching the request path
// only through the pipeline's Runner (pipeline.Run): monitors, web jobs'
// worker and the console with the operator API.
type API struct {
	*pipeline.Pipeline
	// Monitors is nil when the store keeps no monitors; Jobs when it keeps
	// no web jobs.
	Monitors *monitors.Service
	Jobs     *webjobs.Worker
	Console  *console.Console
}

// New builds the API of s.
func New(s Settings) *API {
	cfg := s.Config
	// The features are added to copies: New(all) below starts from s again.
	cfg.Features, cfg.Surfaces = slices.Clip(cfg.Features), slices.Clip(cfg.Surfaces)
	a := &API{}
	if s.Monitors != nil {
		a.Monitors = monitors.New(monitors.Config{
			Registry: cfg.Registry, Monitors: s.Monitors, Keys: cfg.Store, Scheduler: s.Scheduler, PauseAfter: s.MonitorPauseAfter,
			Logger: cfg.Logger, Now: cfg.Now,
		})
		cfg.Features = append(cfg.Features, a.Monitors)
	}
	if cfg.Jobs != nil {
		a.Jobs = webjobs.New(webjobs.Config{Jobs: cfg.Jobs, Store: cfg.Store, Logger: cfg.Logger, Now: cfg.Now})
		cfg.Features = append(cfg.Features, a.Jobs)
	}
	a.Console = console.New(console.Config{
		Registry: cfg.Registry, Store: cfg.Store, Outcomes: cfg.Outcomes, Canary: cfg.Canary, Monitors: a.Monitors,
		Throttle: cfg.Throttle, AdminToken: s.AdminToken, Logger: cfg.Logger, Now: cfg.Now,
	})
	cfg.Surfaces = append(cfg.Surfaces, a.Console)
	if s.MCP != nil {
		// A tool may be any family's endpoint: tool calls run on an API
		// serving every family, in this process.
		all := s
		all.Family, all.MCP = "", nil
		var once sync.Once
		var tools *API
		cfg.Surfaces = append(cfg.Surfaces, s.MCP(cfg.Registry, func() pipeline.Runner {
			once.Do(func() { tools = New(all) })
			return tools
		}, cfg.DataSchemas, cfg.Logger))
	}
	a.Pipeline = pipeline.New(cfg)
	return a
}

// RunMonitor makes a monitor's run that its schedule delivered.
func (a *API) RunMonitor(ctx context.Context, rr monitors.RunRequest) error {
	if a.Monitors == nil {
		return errors.New("app: monitors are not configured")
	}
	return a.Monitors.Run(ctx, rr)
}

// RunJob runs a web job the jobs queue delivered.
func (a *API) RunJob(ctx context.Context, m queue.JobMessage) error {
	if a.Jobs == nil {
		return errors.New("app: web jobs are not configured")
	}
	return a.Jobs.Run(ctx, m)
}

// Config is the API's settings for one family ("" for all).
func Config(family registry.Family, logger *slog.Logger, deps Deps) Settings {
	// Both stores also hold the response cache and idempotency records.
	cache, _ := deps.Store.(store.Cache)
	idem, _ := deps.Store.(store.Idempotency)
	limits, _ := deps.Store.(store.Limits)
	fairUse, _ := deps.Store.(store.FairUse)
	outcomes, _ := deps.Store.(store.Outcomes)
	canaryLog, _ := deps.Store.(store.CanaryLog)
	fills, _ := deps.Store.(store.Fills)
	recalls, _ := deps.Store.(store.Recalls)
	monitorStore, _ := deps.Store.(store.Monitors)
	jobs, _ := deps.Store.(store.Jobs)
	var urlPolicy *upstream.URLPolicy
	runner := deps.Upstream
	if runner != nil {
		urlPolicy = runner.URLPolicy()
		// Scarce providers' monthly allowances are counted in the store,
		// shared by every account and instance.
		if allow, ok := deps.Store.(store.Allowances); ok {
			runner = runner.WithAllowances(allow)
		}
		// Sites' remembered resolutions (a location's id) too.
		if cache, ok := deps.Store.(store.Cache); ok {
			runner = runner.WithMemory(store.Memo{Cache: cache})
		}
	}
	return Settings{Config: pipeline.Config{
		Upstream:      runner,
		Composites:    composite.All(deps.Pages),
		URLPolicy:     urlPolicy,
		Events:        deps.Events,
		DataSchemas:   schemas.For,
		Outcomes:      outcomes,
		Canary:        canaryLog,
		Reference:     deps.Reference,
		Fills:         fills,
		Limits:        limits,
		FairUse:       fairUse,
		FairUseLimits: fairUseLimits(logger),
		Assist:        &assist.Assistant{Model: deps.Model, Recalls: recalls},
		ModelFairUse:  modelFairUse(logger),
		Cache:         cache,
		Idempotency:   idem,
		Registry:      registry.Default(),
		Family:        family,
		Store:         deps.Store,
		Throttle:      deps.Throttle,
		ErrorsURL:     os.Getenv(EnvErrorsURL),
		Contact:       contact(),
		Logger:        logger,
		Jobs:          jobs,
		JobQueue:      deps.Jobs,
	},
		Monitors:   monitorStore,
		Scheduler:  deps.Scheduler,
		AdminToken: cmp.Or(deps.AdminToken, os.Getenv(EnvAdminToken)),
		MCP:        deps.MCP,
	}
}

// contact is the operator's support contact for the OpenAPI document, or
// nil for the default when neither variable is set.
func contact() *openapi.Contact {
	url, email := os.Getenv(EnvContactURL), os.Getenv(EnvContactEmail)
	if url == "" && email == "" {
		return nil
	}
	return &openapi.Contact{Name: openapi.DefaultContact.Name, URL: url, Email: email}
}

// Function is the Lambda handler of one family.
func Function(family registry.Family, logger *slog.Logger, deps Deps) gateway.EventHandler {
	cfg := Config(family, logger, deps)
	return gateway.Lambda(New(cfg), logger, cfg.ErrorsURL)
}

// StoreFromEnv is the DynamoDB store named by MERIDIAN_TABLE, with the
// standard AWS SDK configuration (AWS_ENDPOINT_URL included), or nil
// when MERIDIAN_TABLE is unset.
func StoreFromEnv(ctx context.Context) (store.Store, error) {
	table := strings.TrimSpace(os.Getenv(EnvTable))
	if table == "" {
		return nil, nil
	}
	client, err := dynamostore.NewClientFromEnv(ctx)
	if err != nil {
		return nil, err
	}
	return dynamostore.New(client, table), nil
}

// LambdaDeps builds what a function needs once per cold start: its
// sources (lambdaSources) and the usage emitter of MERIDIAN_QUEUE_URL.
func LambdaDeps(ctx context.Context, logger *slog.Logger) (Deps, error) {
	deps, err := lambdaSources(ctx, logger)
	if err != nil || deps.Store == nil {
		return deps, err
	}
	e, err := queueEmitter(ctx, deps.Store, logger)
	if err != nil {
		return Deps{}, err
	}
	deps.Events, deps.emitter = e, e
	return deps, nil
}

// lambdaSources is what every function reads from its environment: the
// store, upstreams, model, operator token, monitors' scheduler and jobs
// queue (the worker adds its own emitter).
func lambdaSources(ctx context.Context, logger *slog.Logger) (Deps, error) {
	if mode := os.Getenv(EnvUpstream); mode != "" && mode != "live" {
		return Deps{}, fmt.Errorf("%s=%s: replay is for the local server only", EnvUpstream, mode)
	}
	s, err := StoreFromEnv(ctx)
	if err != nil {
		return Deps{}, err
	}
	lookup, err := UpstreamLookup(ctx, nil)
	if err != nil {
		return Deps{}, err
	}
	admin, err := AdminToken(ctx, nil)
	if err != nil {
		return Deps{}, err
	}
	m, err := NewModel(logger, lookup, "")
	if err != nil {
		return Deps{}, err
	}
	runner := NewUpstream(logger, lookup, "")
	deps := Deps{Store: s, Throttle: ThrottleFromEnv(), Upstream: runner, Pages: PublicPages(runner, lookup, ""), Model: m, AdminToken: admin}
	if sched, err := awsscheduler.NewFromEnv(ctx); err != nil {
		return Deps{}, err
	} else if sched != nil {
		deps.Scheduler = sched
	}
	if jobs, err := sqsqueue.NewJobQueueFromEnv(ctx); err != nil {
		return Deps{}, err
	} else if jobs != nil {
		deps.Jobs = jobs
	}
	return deps, nil
}

// StartLambda runs the family's function in the Lambda runtime.
func StartLambda(family registry.Family, options ...Option) {
	logger := Logger()
	ctx := context.Background()
	deps, err := LambdaDeps(ctx, logger)
	if err != nil {
		logger.Error("cannot configure the function", "error", err.Error())
		os.Exit(1)
	}
	for _, o := range options {
		o(&deps)
	}
	var after func(gateway.EventHandler) gateway.EventHandler
	if deps.emitter != nil {
		after = afterInvocations(ctx, deps.emitter, logger)
	}
	h := Function(family, logger, deps)
	if after != nil {
		h = after(h)
	}
	lambda.Start(gateway.FunctionURLAware(h))
}

// Option adds to a main's Deps what only that main serves.
type Option func(*Deps)

// WithReference serves the API reference page (apidocs) from this main.
func WithReference(r pipeline.Reference) Option {
	return func(d *Deps) { d.Reference = r }
}

// WithMCP serves /mcp (mcpserver.NewSurface) from this main.
func WithMCP(m MCPSurface) Option {
	return func(d *Deps) { d.MCP = m }
}

// LocalHandler serves every family in one process, each request as its
// family's function sees it in Lambda (gateway.Local).
func LocalHandler(logger *slog.Logger, deps Deps) http.Handler {
	handlers := map[registry.Family]http.Handler{}
	for _, f := range registry.Families {
		handlers[f] = New(Config(f, logger, deps))
	}
	return gateway.Local(registry.Default().Routes(), handlers, logger, os.Getenv(EnvErrorsURL))
}

// localGCPercent is the local server's garbage collection target unless
// GOGC is set: collecting when the heap has grown 4× its live size rather
// than 2× roughly halves the collector's share of a request (a fifth of
// the CPU under load) for some 80 MB more memory, a fair trade on a
// developer's machine. Functions in Lambda keep Go's default.
const localGCPercent = 400

// ListenAndServe runs the local server on addr until ctx ends.
func ListenAndServe(ctx context.Context, addr string, logger *slog.Logger, deps Deps, ready func(net.Addr)) error {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(localGCPercent)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           LocalHandler(logger, deps),
		ReadHeaderTimeout: 10 * time.Second,
		// Above the pipeline's own query cap, so an oversized query gets
		// the typed 400 rather than net/http's plain-text 431.
		MaxHeaderBytes: 4 << 20,
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			return err
		}
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// devAccountMarker records, once the development account exists, its id
// (never its secrets), so later starts do not create another.
const devAccountMarker = "dev-account"

// OpenLocalStore opens the embedded store in dir. Until the development
// account exists it creates one and writes its console token and first
// API key to banner, once: they are stored only as hashes.
func OpenLocalStore(ctx context.Context, dir, addr string, banner io.Writer) (*embedded.Store, error) {
	s, err := embedded.Open(dir)
	if err != nil {
		return nil, err
	}
	marker := filepath.Join(dir, devAccountMarker)
	if _, err := os.Stat(marker); err == nil {
		return s, nil
	}
	acct, token, err := auth.CreateAccount(ctx, s, DevCredits, envelope.NewRequestID())
	if err != nil {
		s.Close()
		return nil, err
	}
	key, k := auth.NewKey(acct.ID, "development", nil)
	if _, err := s.CreateFirstKey(ctx, k); err != nil {
		s.Close()
		return nil, err
	}
	if err := os.WriteFile(marker, []byte(acct.ID+"\n"), 0o600); err != nil {
		s.Close()
		return nil, err
	}
	fmt.Fprintf(banner, `
Meridian development account %s with %d credits (data in %s).
Shown once; only hashes are stored:
  console token  %s
  API key        %s
Try:
  curl -H 'x-api-key: %s' http://%s/v1/credits/balance

`, acct.ID, DevCredits, dir, token, key, key, addr)
	return s, nil
}

// LocalRuns gives the local server what the worker does in AWS: an
// in-process scheduler delivering the monitors' runs (those stored are
// scheduled again from now) and an in-process jobs queue, both run by a
// pipeline serving every family. It sets deps.Scheduler and deps.Jobs.
func LocalRuns(ctx context.Context, logger *slog.Logger, deps *Deps) (*monitors.LocalScheduler, *queue.LocalJobQueue, error) {
	scheduler, jobs := monitors.NewLocalScheduler(logger), queue.NewLocalJobQueue(logger)
	deps.Scheduler, deps.Jobs = scheduler, jobs
	runner := New(Config("", logger, *deps))
	if ms, ok := deps.Store.(store.Monitors); ok {
		all, err := ms.AllMonitors(ctx)
		if err != nil {
			return nil, nil, err
		}
		scheduler.Load(all, time.Now())
	}
	scheduler.Start(ctx, runner.RunMonitor)
	jobs.Start(ctx, runner.RunJob)
	return scheduler, jobs, nil
}

// RunLocal is the local server's main: MERIDIAN_ADDR or 127.0.0.1:8080,
// the embedded store in MERIDIAN_DATA_DIR or .data, stopped by SIGINT or SIGTERM.
func RunLocal(options ...Option) {
	logger := Logger()
	addr := strings.TrimSpace(os.Getenv(EnvAddr))
	if addr == "" {
		addr = DefaultAddr
	}
	dir := strings.TrimSpace(os.Getenv(EnvDataDir))
	if dir == "" {
		dir = ".data"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := OpenLocalStore(ctx, dir, addr, os.Stderr)
	if err != nil {
		logger.Error("cannot open the local store", "dir", dir, "error", err.Error())
		os.Exit(1)
	}
	defer s.Close()
	deps, stopReplay, err := localSources(ctx, logger)
	if err != nil {
		logger.Error("cannot configure the upstreams", "error", err.Error())
		os.Exit(1)
	}
	defer stopReplay()
	deps.Store, deps.Throttle, deps.Events = s, ThrottleFromEnv(), LocalEvents(ctx, s, logger)
	for _, o := range options {
		o(&deps)
	}
	scheduler, jobs, err := LocalRuns(ctx, logger, &deps)
	if err != nil {
		logger.Error("cannot start the monitors' scheduler", "error", err.Error())
		os.Exit(1)
	}
	err = ListenAndServe(ctx, addr, logger, deps, func(a net.Addr) {
		logger.Info("meridian listening", "addr", "http://"+a.String(), "data_dir", dir, "try", "curl -i http://"+a.String()+"/v1")
	})
	// Shutdown waited for the last answers (each lands its writes before
	// it is sent); the runs in progress end before the store closes.
	scheduler.Wait()
	jobs.Wait()
	if err != nil {
		logger.Error("local server stopped", "error", err.Error())
		os.Exit(1)
	}
}
