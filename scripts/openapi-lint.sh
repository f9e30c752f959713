#!/usr/bin/env bash
# Lints an OpenAPI document with the tools client generators trust:
# Redocly CLI (recommended rules) and Spectral (spectral:oas), with the
# rulesets checked in under scripts/openapi-lint/. Fails on any error or
# warning either reports. The tools come from scripts/npm-tools.sh.
#
# Usage: scripts/openapi-lint.sh FILE
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
doc=${1:?usage: $0 FILE}
tools="$root/scripts/npm-tools.sh"
rules="$root/scripts/openapi-lint"
"$tools" install >/dev/null

status=0
report=$(mktemp)
trap 'rm -f "$report"' EXIT

# Redocly exits non-zero on errors only; its JSON totals count warnings too.
"$tools" exec redocly lint "$doc" --config "$rules/redocly.yaml" --format=json >"$report" 2>/dev/null || true
if ! node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  for (const p of r.problems) {
    const where = (p.location || []).map(l => l.pointer).join(" ");
    console.error(`redocly ${p.severity} ${p.ruleId}: ${p.message} ${where}`);
  }
  console.error(`redocly: ${r.totals.errors} errors, ${r.totals.warnings} warnings`);
  process.exit(r.totals.errors + r.totals.warnings > 0 ? 1 : 0);
' "$report"; then
  status=1
fi

if ! "$tools" exec spectral lint "$doc" --ruleset "$rules/spectral.yaml" --fail-severity=warn --format=text --quiet >&2; then
  echo "spectral: errors or warnings above" >&2
  status=1
else
  echo "spectral: no errors or warnings" >&2
fi
exit $status
