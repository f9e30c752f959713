// Command canary is the operators' canary (scripts/canary.sh): it builds
// the upstream runner exactly as a deployment does (environment variables,
// overlaid by the Secrets Manager secret MERIDIAN_UPSTREAM_SECRET names)
// and runs shared/canary once: every available operation's catalogue
// example on each configured route, within a budget of source requests,
// each answer judged by its schema and its fill rate against the shipped
// baseline (shared/canary/baseline.json). It prints a table of operation,
// route, status, latency, schema, fill rate and the fields gone null.
//
//	go run ./scripts/canary                       # every operation with a route, live
//	go run ./scripts/canary -only code_host/profile,company_registry/search
//	go run ./scripts/canary -json                 # one JSON object per operation and route
//	go run ./scripts/canary -replay               # against the replay fixtures, offline
//	go run ./scripts/canary -replay -write-baseline shared/canary/baseline.json
//	go run ./scripts/canary -record testdata/upstream # live, each answer saved as a sanitised fixture
//
// It exits 1 when an operation failed, returned data that does not
// validate or drifted below the fill share of its baseline, 2 on a usage
// or configuration error. Live mode calls the real sources and spends
// their quota: it is never part of make test. The deployment runs the
// same canary on a schedule (functions/canary).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // an operation failed, its data does not validate, or it drifted
	exitUsage  = 2 // bad flags or configuration; nothing was called
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, nil))
}

// options are the parsed flags.
type options struct {
	only          []string
	timeout       time.Duration
	json          bool
	replay        bool
	fixtures      string
	budget        int64
	fillShare     float64
	writeBaseline string
	record        string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var only string
	fs := flag.NewFlagSet("canary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&only, "only", "", "comma-separated platform/endpoint keys to check (default: every operation with an eligible route)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-check timeout")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per operation and route instead of a table")
	fs.BoolVar(&o.replay, "replay", false, "run against the local replay upstream (fixtures) instead of the live sources")
	fs.StringVar(&o.fixtures, "fixtures", replay.DefaultDir, "replay fixtures folder, with -replay (relative paths: from the working directory, which scripts/canary.sh sets to the repository root)")
	fs.Int64Var(&o.budget, "budget", canary.DefaultBudget, "the most source requests the run makes, every route, retry and fetch included")
	fs.Float64Var(&o.fillShare, "fill-share", canary.DefaultFillShare, "a fill rate below this share of its baseline is drift")
	fs.StringVar(&o.writeBaseline, "write-baseline", "", "with -replay: write the run's fills as the baseline file (make canary-baseline)")
	fs.StringVar(&o.record, "record", "", "live mode: save each source answer as a replay fixture under DIR/<provider>/, credentials, cookies and signed URL parameters removed")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	switch {
	case o.record != "" && o.replay:
		return o, errors.New("-record records the live sources: it cannot be combined with -replay")
	case o.timeout <= 0:
		return o, errors.New("-timeout must be positive")
	case o.budget <= 0:
		return o, errors.New("-budget must be positive")
	case o.fillShare <= 0 || o.fillShare > 1:
		return o, errors.New("-fill-share must be above 0 and at most 1")
	case o.writeBaseline != "" && !o.replay:
		return o, errors.New("-write-baseline needs -replay: baselines come from the fixtures")
	}
	for _, k := range strings.Split(only, ",") {
		if k = strings.Trim(strings.TrimSpace(k), "/"); k != "" {
			o.only = append(o.only, k)
		}
	}
	return o, nil
}

// run is the whole command; secrets (nil: the AWS SDK's client) lets a
// test stand in for Secrets Manager.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, secrets app.SecretsAPI) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "canary:", err)
		return exitUsage
	}
	reg := registry.Default()
	for _, k := range o.only {
		if e, ok := reg.Endpoint(k); !ok || e.Kind != registry.Data {
			fmt.Fprintf(stderr, "canary: -only %s: not a data endpoint\n", k)
			return exitUsage
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var lookup func(string) (string, bool)
	var replayURL string
	switch mode := strings.TrimSpace(os.Getenv(app.EnvUpstream)); {
	case o.replay:
		srv, err := replay.Load(o.fixtures)
		if err != nil {
			fmt.Fprintf(stderr, "canary: load replay fixtures from %s: %v\n", o.fixtures, err)
			return exitUsage
		}
		base, stop, err := srv.Listen("127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(stderr, "canary:", err)
			return exitUsage
		}
		defer func() { _ = stop() }()
		// Real credentials never reach the replay upstream (the runner
		// substitutes them), so the AWS secret is not read: replay stays offline.
		lookup, replayURL = os.LookupEnv, base
		fmt.Fprintf(stderr, "canary: REPLAY MODE: answers come from %s, not the live sources\n", o.fixtures)
	case mode == app.UpstreamReplay:
		fmt.Fprintf(stderr, "canary: %s=replay: the canary checks the live sources; pass -replay to run it against the fixtures\n", app.EnvUpstream)
		return exitUsage
	case mode != "" && mode != "live":
		fmt.Fprintf(stderr, "canary: %s=%q: use live or leave it unset\n", app.EnvUpstream, mode)
		return exitUsage
	default:
		lookup, err = app.UpstreamLookup(ctx, secrets)
		if err != nil {
			fmt.Fprintln(stderr, "canary:", err)
			return exitUsage
		}
	}
	var rec *recording
	var client *http.Client
	if o.record != "" {
		rec = startRecording(o.record, lookup)
		client = rec.client
	}
	runner := app.NewUpstreamClient(logger, lookup, replayURL, client)
	shipped, err := canary.Shipped()
	if err != nil {
		fmt.Fprintln(stderr, "canary:", err)
		return exitUsage
	}
	if o.writeBaseline != "" {
		shipped = nil // a new baseline is not judged against the old one
	}
	rep := canary.Run(ctx, canary.Config{
		Runner: runner, Registry: reg, Only: o.only, Budget: o.budget, FillShare: o.fillShare, Timeout: o.timeout,
		Baselines: shipped, Redact: canary.Redactor(adapters.All(), lookup),
	})
	if o.writeBaseline != "" {
		raw, err := canary.EncodeBaselines(canary.BaselinesOf(rep))
		if err == nil {
			err = os.WriteFile(o.writeBaseline, raw, 0o644)
		}
		if err != nil {
			fmt.Fprintln(stderr, "canary:", err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "canary: baselines of %d operations written to %s\n", len(canary.BaselinesOf(rep)), o.writeBaseline)
	}
	if o.json {
		err = writeJSON(stdout, rep.Checks)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, "canary:", err)
		return exitUsage
	}
	if rec != nil && !rec.report(stderr) {
		return exitFailed
	}
	for _, c := range rep.Checks {
		if !c.OK || c.Drifting {
			return exitFailed
		}
	}
	return exitOK
}
