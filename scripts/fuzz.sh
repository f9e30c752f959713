#!/usr/bin/env bash
# Runs every fuzz target of the root module (shared/, functions/, scripts/;
# infra/ is a module of its own), each alone for FUZZTIME (default 30s):
# go test -fuzz takes one package and exactly one matching target. Targets
# are found in the _test.go files go test builds: every
# func FuzzXxx(f *testing.F). Stops at the first failure and names it; go
# keeps the failing input under <package>/testdata/fuzz/<target>/.
# Usage: fuzz.sh          run them all (GO picks the go command)
#        fuzz.sh --list   print "<package> <target>", one a line
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
fuzztime=${FUZZTIME:-30s}

# targets prints "<package> <target>" for every fuzz target, sorted.
targets() {
  local module
  module=$("$GO" list -m)
  "$GO" list -f '{{$p := .ImportPath}}{{$d := .Dir}}{{range .TestGoFiles}}{{$p}} {{$d}}/{{.}}{{"\n"}}{{end}}{{range .XTestGoFiles}}{{$p}} {{$d}}/{{.}}{{"\n"}}{{end}}' ./... |
    while read -r importpath file; do
      [ -n "$file" ] || continue
      rel=${importpath#"$module"}
      sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\([[:space:]]*[A-Za-z_][A-Za-z0-9_]*[[:space:]]+\*testing\.F[[:space:]]*\).*/\1/p' "$file" |
        while read -r name; do echo "./${rel#/} $name"; done
    done | sort -u
}

case "${1:-}" in
  "") ;;
  --list) targets; exit 0 ;;
  *) echo "usage: $0 [--list]" >&2; exit 2 ;;
esac

list=$(targets)
[ -n "$list" ] || { echo "fuzz.sh: no fuzz targets found" >&2; exit 1; }
total=$(wc -l <<<"$list")
n=0
while read -r pkg name <&3; do
  n=$((n + 1))
  echo "==> [$n/$total] $name in $pkg for $fuzztime"
  if ! "$GO" test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime"; then
    echo "fuzz.sh: FAILED: $name in $pkg (target $n of $total); a failing input the fuzzer found is kept under $pkg/testdata/fuzz/$name/" >&2
    exit 1
  fi
done 3<<<"$list"
echo "fuzz.sh: all $total fuzz targets passed, $fuzztime each"
