#!/usr/bin/env bash
# Checks that make build produced one stripped linux/arm64 bootstrap per
# function and that a second build gave the same bytes.
# Usage: check-build.sh BUILD_DIR REBUILD_DIR FUNCTION...
set -euo pipefail
dir=$1 again=$2; shift 2
for fn in "$@"; do
  f="$dir/$fn/bootstrap"
  [ -s "$f" ] || { echo "missing $f"; exit 1; }
  # ELF, 64-bit, little-endian; e_machine 0xb7 is aarch64.
  [ "$(od -An -tx1 -j0 -N4 "$f" | tr -d ' \n')" = 7f454c46 ] || { echo "$f is not ELF"; exit 1; }
  [ "$(od -An -tx1 -j18 -N2 "$f" | tr -d ' \n')" = b700 ] || { echo "$f is not arm64"; exit 1; }
  # Stripped: no symbol table left.
  symbols=$(go tool nm "$f" 2>&1 || true)
  grep -q 'no symbol' <<<"$symbols" || { echo "$f is not stripped"; exit 1; }
  cmp -s "$f" "$again/$fn/bootstrap" || { echo "build of $fn is not reproducible"; exit 1; }
done
rm -rf "$again"
echo "build check: $# functions, linux/arm64, stripped, reproducible"
