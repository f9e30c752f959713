// Command bench is the tooling behind make bench (scripts/bench.sh): it
// measures what Go's testing.B cannot (HTTP throughput under wrk, function
// start-up against a fake Lambda Runtime API) and writes BENCHMARKS.md
// from every section's results.
//
//	go run ./scripts/bench http    -out build/bench/http.json
//	go run ./scripts/bench startup -out build/bench/startup.json
//	go run ./scripts/bench report  -in build/bench -out BENCHMARKS.md
//
// serve-local and serve-bare are the servers the http command starts as
// child processes. Run it from the repository root.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		printUsage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "http":
		err = runHTTP(args)
	case "serve-local":
		err = serveLocal(args)
	case "serve-bare":
		err = serveBare(args)
	case "startup":
		err = runStartup(args)
	case "report":
		err = runReport(args)
	default:
		printUsage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func printUsage() {
	fmt.Fprintln(os.Stderr, "usage: go run ./scripts/bench http|startup|report [flags] (see scripts/bench.sh)")
	os.Exit(2)
}

// logf reports progress on stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func writeJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
