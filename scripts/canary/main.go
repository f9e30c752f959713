// Command canary is the operators' live canary (scripts/canary.sh): it
// builds the upstream runner exactly as a deployment does (environment
// variables, overlaid by the Secrets Manager secret MERIDIAN_UPSTREAM_SECRET
// names), calls every wired data endpoint once with the registry's example
// request, validates data against the endpoint's schema and prints a table
// of operation, route, status, latency, schema and fields filled.
//
//	go run ./scripts/canary                       # every endpoint with an eligible route
//	go run ./scripts/canary -only code_host/profile,company_registry/search
//	go run ./scripts/canary -json                 # one JSON object per operation
//	go run ./scripts/canary -replay               # against the replay fixtures, offline
//	go run ./scripts/canary -record testdata/upstream # live, each answer saved as a sanitised fixture
//
// It exits 1 when an operation failed or returned data that does not
// validate, 2 on a usage or configuration error. Live mode calls the real
// sources and spends their quota: it is never part of make test.
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
	"sort"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // an operation failed or its data does not validate
	exitUsage  = 2 // bad flags or configuration; nothing was called
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, nil))
}

// options are the parsed flags.
type options struct {
	only     []string
	timeout  time.Duration
	json     bool
	replay   bool
	fixtures string
	record   string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var only string
	fs := flag.NewFlagSet("canary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&only, "only", "", "comma-separated platform/endpoint keys to check (default: every endpoint with an eligible route)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-call timeout")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per operation instead of a table")
	fs.BoolVar(&o.replay, "replay", false, "run against the local replay upstream (fixtures) instead of the live sources")
	fs.StringVar(&o.fixtures, "fixtures", replay.DefaultDir, "replay fixtures folder, with -replay (relative paths: from the working directory, which scripts/canary.sh sets to the repository root)")
	fs.StringVar(&o.record, "record", "", "live mode: save each source answer as a replay fixture under DIR/<provider>/, credentials, cookies and signed URL parameters removed")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.record != "" && o.replay {
		return o, errors.New("-record records the live sources: it cannot be combined with -replay")
	}
	if o.timeout <= 0 {
		return o, errors.New("-timeout must be positive")
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

	keys := o.only
	if len(keys) == 0 {
		// A limited-capacity endpoint's shared monthly allowance is counted
		// in the deployment's store, which the canary does not touch: it
		// runs only when -only names it.
		for _, k := range runner.Endpoints() {
			if e, ok := reg.Endpoint(k); ok && !e.LimitedCapacity {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	c := &canary{srv: runner, reg: reg, timeout: o.timeout, redact: redactor(lookup)}
	rows := make([]row, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, c.check(ctx, k))
	}
	if o.json {
		err = writeJSON(stdout, rows)
	} else {
		err = writeTable(stdout, rows)
	}
	if err != nil {
		fmt.Fprintln(stderr, "canary:", err)
		return exitUsage
	}
	if rec != nil && !rec.report(stderr) {
		return exitFailed
	}
	for _, r := range rows {
		if !r.OK {
			return exitFailed
		}
	}
	return exitOK
}

// redactor hides every configured provider credential, whichever route it
// belongs to: the runner already redacts a route's own secrets from its
// fault reasons, this is the second look the canary's output gets.
func redactor(lookup func(string) (string, bool)) func(string) string {
	var values []string
	for _, p := range adapters.All() {
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
