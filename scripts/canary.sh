#!/usr/bin/env bash
# The canary from an operator's shell (issue 42; the deployment runs the
# same on a schedule, functions/canary): every available operation's
# catalogue example on each configured route, live with the configured
# credentials (the environment, overlaid by MERIDIAN_UPSTREAM_SECRET in
# AWS), within a budget of source requests; each answer judged by status,
# schema, latency and fill rate against its baseline. Exits non-zero when a
# check failed, did not validate or drifted. Live mode spends the sources'
# quota: never part of make test. Flags: -only platform/endpoint,...
# -timeout 30s -budget N -fill-share 0.8 -json -replay (offline, against
# the fixtures) -fixtures DIR -write-baseline FILE -record DIR (live: each
# answer saved as a sanitised replay fixture). See scripts/canary/main.go.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Built under build/tools (not build/canary, the canary function's asset
# folder), then run (like scripts/bench): go run would turn exit 2 (usage or
# configuration) into 1 and add its own "exit status" line.
"${GO:-go}" build -o build/tools/canary ./scripts/canary
exec build/tools/canary "$@"
