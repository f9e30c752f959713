#!/usr/bin/env bash
# The operators' live canary (issue 15): calls every wired data endpoint
# once against the real sources with the configured credentials (the
# environment, overlaid by MERIDIAN_UPSTREAM_SECRET in AWS), validates data
# against its schema and prints a table; exits non-zero when an operation
# failed or its data does not validate. It spends the sources' quota: never
# part of make test. Flags: -only platform/endpoint,... -timeout 30s -json
# -replay (offline, against the fixtures) -fixtures DIR -record DIR (live:
# each answer saved as a sanitised replay fixture). See scripts/canary/main.go.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Built, then run (like scripts/bench): go run would turn exit 2 (usage or
# configuration) into 1 and add its own "exit status" line.
"${GO:-go}" build -o build/canary/canary ./scripts/canary
exec build/canary/canary "$@"
