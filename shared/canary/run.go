package canary

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Config is one run's settings.
type Config struct {
	// Runner serves the operations: built as the deployment builds it
	// (shared/app NewUpstream), so the canary calls the sources exactly as
	// a request would. The run adds its budget (WithMeter).
	Runner   *upstream.Runner
	Registry *registry.Registry
	// Only names the operations to check; empty checks every operation the
	// runner can serve, less those of limited capacity (their shared
	// monthly allowance is for callers).
	Only []string
	// Budget is the most source requests the run makes (0: DefaultBudget).
	Budget int64
	// FillShare: a fill rate below this share of its baseline is drift
	// (0: DefaultFillShare).
	FillShare float64
	// Timeout bounds one check (0: upstream.DefaultTimeout).
	Timeout time.Duration
	// Parallel checks run at once (0: 1, one at a time, so latencies do not
	// skew each other).
	Parallel int
	// Baselines are the fixtures' fills (Shipped); History the earlier
	// runs, newest first (the recent baseline, and the alarm's "two runs in
	// a row").
	Baselines Baselines
	History   []Report
	// Redact hides credentials in fault reasons (nil: none to hide).
	Redact func(string) string
	Now    func() time.Time
}

// Report is one run.
type Report struct {
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Budget     int64     `json:"budget"`
	// SourceRequests is how many requests reached the sources (never more
	// than Budget).
	SourceRequests int64   `json:"source_requests"`
	FillShare      float64 `json:"fill_share"`
	// Checks: each operation on each route. Operations: each operation as
	// callers get it.
	Checks     []Check     `json:"checks"`
	Operations []Operation `json:"operations"`
}

// Operation states.
const (
	StateOK         = "ok"          // answered valid data at its usual fill
	StateDrifting   = "drifting"    // answered, but with fields gone null (fill below the share of its baseline) or invalid data
	StateFailing    = "failing"     // no route answered data
	StateNotChecked = "not_checked" // the run's budget left no request for it
)

// Operation is one operation as callers get it: the first of its routes
// that answered, as failover would serve it.
type Operation struct {
	Operation string `json:"operation"`
	Platform  string `json:"platform"`
	State     string `json:"state"`
	// Route is the route whose check stands for the operation.
	Route            string   `json:"route,omitempty"`
	SchemaValid      *bool    `json:"schema_valid"`
	FillRate         *float64 `json:"fill_rate"`
	BaselineFillRate *float64 `json:"baseline_fill_rate"`
	NullFields       []string `json:"null_fields"`
	LatencyMS        float64  `json:"latency_ms"`
	// Attempts are the source attempts of every route's check.
	Attempts int `json:"attempts"`
	// Breach: the operation failed, or drifted. Alarm: it breached in this
	// run and in the run before (the stack's alarm fires on the same).
	Breach bool `json:"breach"`
	Alarm  bool `json:"alarm"`
}

func (c *Config) defaults() {
	if c.Budget <= 0 {
		c.Budget = DefaultBudget
	}
	if c.FillShare <= 0 || c.FillShare > 1 {
		c.FillShare = DefaultFillShare
	}
	if c.Timeout <= 0 {
		c.Timeout = upstream.DefaultTimeout
	}
	if c.Parallel <= 0 {
		c.Parallel = 1
	}
	if c.Redact == nil {
		c.Redact = func(s string) string { return s }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Registry == nil {
		c.Registry = registry.Default()
	}
}

// Operations are the operations a run checks: cfg.Only, or every
// operation the runner serves less those of limited capacity, sorted.
func Operations(runner *upstream.Runner, reg *registry.Registry, only []string) []string {
	keys := append([]string(nil), only...)
	if len(keys) == 0 {
		for _, k := range runner.Endpoints() {
			if e, ok := reg.Endpoint(k); ok && e.Kind == registry.Data && !e.LimitedCapacity {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// Run checks the operations, each on each of its routes, within the
// budget, and judges them against their baselines.
func Run(ctx context.Context, cfg Config) Report {
	cfg.defaults()
	rep := Report{StartedAt: cfg.Now().UTC(), Budget: cfg.Budget, FillShare: cfg.FillShare}
	var spent atomic.Int64
	metered := cfg.Runner.WithMeter(func(context.Context, string) bool {
		if spent.Add(1) > cfg.Budget {
			spent.Add(-1)
			return false
		}
		return true
	})
	k := &checker{runner: metered, reg: cfg.Registry, timeout: cfg.Timeout, redact: cfg.Redact}

	// One task per operation and route, in a fixed order; results land in
	// their own slot, so the report's order does not depend on timing.
	type task struct {
		key, platform, route string
		values               map[string]string
	}
	var tasks []task
	var early []Check
	for _, key := range Operations(cfg.Runner, cfg.Registry, cfg.Only) {
		values, refused := k.prepare(ctx, key)
		if refused != nil {
			early = append(early, *refused)
			continue
		}
		e, _ := cfg.Registry.Endpoint(key)
		for _, route := range metered.Routes(key) {
			tasks = append(tasks, task{key, e.Platform, route, values})
		}
	}
	checks := make([]Check, len(tasks))
	sem := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			checks[i] = k.check(ctx, t.key, t.platform, t.route, t.values)
		}()
	}
	wg.Wait()
	for i := range checks {
		checks[i].judge(cfg.Baselines, cfg.History, cfg.FillShare)
	}
	rep.Checks = append(early, checks...)
	sort.SliceStable(rep.Checks, func(i, j int) bool { return rep.Checks[i].Operation < rep.Checks[j].Operation })
	rep.Operations = summarize(rep.Checks, cfg.History)
	rep.SourceRequests = spent.Load()
	rep.FinishedAt = cfg.Now().UTC()
	return rep
}

// summarize folds each operation's checks into its Operation: the first
// route that answered data stands for it (failover serves that one).
func summarize(checks []Check, history []Report) []Operation {
	var ops []Operation
	index := map[string]int{}
	for _, c := range checks {
		i, seen := index[c.Operation]
		if !seen {
			i = len(ops)
			index[c.Operation] = i
			ops = append(ops, Operation{Operation: c.Operation, Platform: c.Platform, State: StateNotChecked, NullFields: []string{}})
		}
		op := &ops[i]
		op.Attempts += c.Attempts
		if op.Route != "" && op.State != StateFailing {
			continue // an earlier route answered: callers get that one
		}
		switch {
		case c.Status == "ok":
			valid := c.OK
			op.Route, op.SchemaValid, op.FillRate, op.BaselineFillRate = c.Route, &valid, c.FillRate, c.BaselineFillRate
			op.NullFields, op.LatencyMS = c.NullFields, c.LatencyMS
			op.State = StateOK
			if c.Drifting || !c.OK {
				op.State = StateDrifting
			}
		case c.Checked():
			op.State, op.Route, op.LatencyMS = StateFailing, c.Route, c.LatencyMS
		}
	}
	var previous map[string]Operation
	if len(history) > 0 {
		previous = map[string]Operation{}
		for _, o := range history[0].Operations {
			previous[o.Operation] = o
		}
	}
	for i := range ops {
		op := &ops[i]
		op.Breach = op.State == StateFailing || op.State == StateDrifting
		op.Alarm = op.Breach && previous[op.Operation].Breach
	}
	return ops
}

// Encode is a report as the canary log keeps it: gzipped JSON (a run with
// every operation's filled fields stays well inside one DynamoDB item).
func Encode(r Report) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(r); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Decode reads what Encode wrote.
func Decode(raw []byte) (Report, error) {
	var r Report
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return r, fmt.Errorf("canary: a stored run: %w", err)
	}
	defer zr.Close()
	if err := json.NewDecoder(io.LimitReader(zr, 16<<20)).Decode(&r); err != nil {
		return r, fmt.Errorf("canary: a stored run: %w", err)
	}
	return r, nil
}

// Redactor hides every credential configured for providers, whichever
// route it belongs to: the runner already redacts a route's own secrets
// from its fault reasons; this is the second look the canary's output
// gets.
func Redactor(providers []*upstream.Provider, lookup func(string) (string, bool)) func(string) string {
	var values []string
	for _, p := range providers {
		for _, s := range p.Secrets {
			if v, ok := lookup(s.Name); ok && len(v) >= 4 {
				values = append(values, v)
			}
		}
	}
	// Longest first, so a secret containing another is hidden whole.
	sort.Slice(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	return func(s string) string {
		for _, v := range values {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
		return s
	}
}
