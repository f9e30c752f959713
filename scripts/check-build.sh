#!/usr/bin/env bash
# Checks that make build produced one linux/arm64 bootstrap per function and
# that building again gives the same bytes (reproducible builds).
set -euo pipefail
dir=$1; shift
first=$(mktemp -d)
trap 'rm -rf "$first"' EXIT
for fn in "$@"; do
  f="$dir/$fn/bootstrap"
  [ -s "$f" ] || { echo "missing $f"; exit 1; }
  head -c 20 "$f" | od -An -tx1 | tr -d ' \n' | grep -q '^7f454c46020101' || { echo "$f is not a 64-bit ELF"; exit 1; }
  cp "$f" "$first/$fn"
done
# Rebuild one function into a fresh place and compare.
fn=$1
CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -buildvcs=false -tags lambda.norpc -ldflags='-s -w -buildid=' -o "$first/rebuilt" "./functions/$fn"
cmp -s "$first/$fn" "$first/rebuilt" || { echo "build of $fn is not reproducible"; exit 1; }
echo "build check: $# functions, linux/arm64 ELF, reproducible"
