package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// CanaryParallel is how many checks the scheduled canary runs at once: a
// run of every operation on each route must finish inside the function's
// timeout, and four keep any one source from seeing a burst.
const CanaryParallel = 4

// Canary is the deployment's canary: the store it records runs and fair
// use in, the runner built as a request's (allowances and remembered
// resolutions in the store), and where the metrics go.
type Canary struct {
	Store  store.Store
	Runner *upstream.Runner
	// Lookup reads the configuration (the environment, overlaid by the
	// upstream secret): the budget, fill share and namespace, and the
	// credentials the output must never show.
	Lookup  func(string) (string, bool)
	Metrics io.Writer // embedded-metric-format lines (stdout in Lambda)
	Logger  *slog.Logger
	Now     func() time.Time
}

// CanarySettings are the canary function's settings from its environment
// (canary.Env*), each defaulted when unset.
type CanarySettings struct {
	Budget    int64
	FillShare float64
	Namespace string
	Only      []string // empty: every available operation
}

// CanarySettingsFrom reads the settings; a malformed value is an error
// naming its variable.
func CanarySettingsFrom(lookup func(string) (string, bool)) (CanarySettings, error) {
	c := CanarySettings{Budget: canary.DefaultBudget, FillShare: canary.DefaultFillShare, Namespace: canary.DefaultNamespace}
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	if v := get(canary.EnvBudget); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive whole number of source requests", canary.EnvBudget, v)
		}
		c.Budget = n
	}
	if v := get(canary.EnvFillShare); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return c, fmt.Errorf("%s=%q: want a share above 0 and at most 1, e.g. 0.8", canary.EnvFillShare, v)
		}
		c.FillShare = f
	}
	if v := get(canary.EnvNamespace); v != "" {
		c.Namespace = v
	}
	for _, k := range strings.Split(get(canary.EnvOnly), ",") {
		if k = strings.Trim(strings.TrimSpace(k), "/"); k == "" {
			continue
		}
		if e, ok := registry.Default().Endpoint(k); !ok || e.Kind != registry.Data {
			return c, fmt.Errorf("%s: %s is not a data endpoint", canary.EnvOnly, k)
		}
		c.Only = append(c.Only, k)
	}
	return c, nil
}

// Run checks every available operation once on each route, judged against
// the shipped baselines and the last seven runs; then, before it returns,
// records the run (for /v1/status and the next run), counts its source
// attempts in fair use under canary.FairUseAccount (never an account's:
// nothing is reserved, charged or written to a ledger) and writes the
// metrics.
func (c *Canary) Run(ctx context.Context) (canary.Report, error) {
	if c.Now == nil {
		c.Now = time.Now
	}
	set, err := CanarySettingsFrom(c.Lookup)
	if err != nil {
		return canary.Report{}, err
	}
	log, ok := c.Store.(store.CanaryLog)
	if !ok {
		return canary.Report{}, errors.New("the store keeps no canary runs")
	}
	shipped, err := canary.Shipped()
	if err != nil {
		return canary.Report{}, err
	}
	var history []canary.Report
	runs, err := log.CanaryRuns(ctx, 7, c.Now())
	if err != nil {
		return canary.Report{}, fmt.Errorf("read the last canary runs: %w", err)
	}
	for _, r := range runs {
		rep, err := canary.Decode(r.Report)
		if err != nil {
			c.Logger.Warn("a stored canary run is unreadable; left out of the baseline", "at", r.At, "error", err.Error())
			continue
		}
		history = append(history, rep)
	}
	runner := c.Runner
	if allow, ok := c.Store.(store.Allowances); ok {
		runner = runner.WithAllowances(allow)
	}
	if cache, ok := c.Store.(store.Cache); ok {
		runner = runner.WithMemory(store.Memo{Cache: cache})
	}
	rep := canary.Run(ctx, canary.Config{
		Runner: runner, Registry: registry.Default(), Only: set.Only, Budget: set.Budget, FillShare: set.FillShare, Parallel: CanaryParallel,
		Baselines: shipped, History: history, Redact: canary.Redactor(adapters.All(), c.Lookup), Now: c.Now,
	})
	// The run's writes are detached from the caller's deadline: a run
	// that made its requests is counted and kept.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	var errs []error
	if fu, ok := c.Store.(store.FairUse); ok {
		for _, op := range rep.Operations {
			if op.Attempts > 0 {
				if _, err := fu.AddFairUse(wctx, canary.FairUseAccount, op.Operation, int64(op.Attempts), c.Now()); err != nil {
					errs = append(errs, fmt.Errorf("count %s in fair use: %w", op.Operation, err))
				}
			}
		}
	}
	raw, err := canary.Encode(rep)
	if err == nil {
		err = log.RecordCanaryRun(wctx, store.CanaryRun{At: rep.FinishedAt, Report: raw})
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("record the canary run: %w", err))
	}
	if c.Metrics != nil {
		if err := canary.WriteMetrics(c.Metrics, set.Namespace, rep); err != nil {
			errs = append(errs, fmt.Errorf("write the canary metrics: %w", err))
		}
	}
	return rep, errors.Join(errs...)
}

// canarySummary is what an invocation answers (and logs).
type canarySummary struct {
	Operations     int   `json:"operations"`
	OK             int   `json:"ok"`
	Drifting       int   `json:"drifting"`
	Failing        int   `json:"failing"`
	NotChecked     int   `json:"not_checked"`
	Alarms         int   `json:"alarms"`
	SourceRequests int64 `json:"source_requests"`
	Budget         int64 `json:"budget"`
}

func summary(r canary.Report) canarySummary {
	s := canarySummary{Operations: len(r.Operations), SourceRequests: r.SourceRequests, Budget: r.Budget}
	for _, o := range r.Operations {
		switch o.State {
		case canary.StateOK:
			s.OK++
		case canary.StateDrifting:
			s.Drifting++
		case canary.StateFailing:
			s.Failing++
		default:
			s.NotChecked++
		}
		if o.Alarm {
			s.Alarms++
		}
	}
	return s
}

// canaryMargin is kept from the invocation's deadline for the run's writes.
const canaryMargin = 30 * time.Second

// StartCanary runs the canary function (functions/canary): each scheduled
// invocation is one run; the metrics go to stdout in the embedded metric
// format, the function's log lines to stderr.
func StartCanary() {
	logger := Logger()
	ctx := context.Background()
	fail := func(err error) {
		logger.Error("cannot configure the canary", "error", err.Error())
		os.Exit(1)
	}
	s, err := StoreFromEnv(ctx)
	if err == nil && s == nil {
		err = errors.New(EnvTable + " is not set")
	}
	if err != nil {
		fail(err)
	}
	lookup, err := UpstreamLookup(ctx, nil)
	if err != nil {
		fail(err)
	}
	if _, err := CanarySettingsFrom(lookup); err != nil {
		fail(err)
	}
	c := &Canary{Store: s, Runner: NewUpstream(logger, lookup, ""), Lookup: lookup, Metrics: os.Stdout, Logger: logger}
	lambda.Start(func(ctx context.Context) (canarySummary, error) {
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline.Add(-canaryMargin))
			defer cancel()
		}
		rep, err := c.Run(ctx)
		sum := summary(rep)
		logger.Info("canary run", "operations", sum.Operations, "ok", sum.OK, "drifting", sum.Drifting, "failing", sum.Failing,
			"not_checked", sum.NotChecked, "alarms", sum.Alarms, "source_requests", sum.SourceRequests, "budget", sum.Budget)
		return sum, err
	})
}
