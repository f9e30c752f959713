#!/usr/bin/env bash
# make bench: runs every benchmark of issue 10 and writes BENCHMARKS.md.
#
#   1. Go benchmarks of the in-process pipeline (embedded store on tmpfs and on disk)
#   2. HTTP throughput of the local server under wrk, beside a bare net/http handler
#   3. Store round trips per request kind on DynamoDB Local
#   4. The cost model (from 3; prices in scripts/bench/cost.go)
#   5. Bootstrap sizes (make build) and function start-up against a fake Lambda Runtime API
#   6. Request collapsing: source requests per burst of 50 identical requests, waiters' added latency
#
# Installs what is missing: Debian's wrk (apt-get), DynamoDB Local (through
# scripts/dynamodb-local.sh; this script then runs a private instance of it).
# Intermediate results go to build/bench/. Not part of make test.
#
# Environment (defaults in brackets):
#   BENCH_TIME [2s]       -benchtime of section 1      BENCH_COUNT [3]   its -count
#   BENCH_TRIPS [20x]     -benchtime of section 3
#   BENCH_DURATION [10s]  each measured wrk run         BENCH_WARMUP [2s] unmeasured run before it
#   BENCH_THREADS [2]     wrk threads                   BENCH_CONNECTIONS [64]  wrk connections
#   BENCH_KEYS [500]      API keys per wrk run          BENCH_TMPFS [/dev/shm]  tmpfs folder ("" for none)
#   BENCH_STARTUPS [7]    start-ups per function        BENCH_BURSTS [10x] -benchtime of section 6
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
GO=${GO:-go}
out=build/bench
mkdir -p "$out"
: >"$out/commands.txt"
tmpfs=${BENCH_TMPFS-/dev/shm}

log() { echo "bench: $*" >&2; }
record() { printf '%s\t%s\n' "$1" "$2" >>"$out/commands.txt"; }

if ! command -v wrk >/dev/null 2>&1; then
  log "installing wrk (Debian package)"
  sudo=""
  [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq wrk >/dev/null
fi

# DynamoDB Local: a private instance on its own port (other make test runs
# on this machine start and stop the shared one of scripts/dynamodb-local.sh),
# from the jar that script installs; stopped when this script ends.
ddb_dir=.tools/dynamodb-local
jar=$ddb_dir/node_modules/amplify-dynamodb-simulator/emulator/DynamoDBLocal.jar
if [[ -n ${MERIDIAN_DYNAMODB_ENDPOINT:-} ]]; then
  endpoint=$MERIDIAN_DYNAMODB_ENDPOINT
  ddb_pid=
else
  if [[ ! -f $jar ]] || ! command -v java >/dev/null 2>&1; then
    log "installing DynamoDB Local (scripts/dynamodb-local.sh)"
    running_before=0
    scripts/dynamodb-local.sh endpoint >/dev/null 2>&1 && running_before=1
    scripts/dynamodb-local.sh start >/dev/null
    [[ $running_before == 1 ]] || scripts/dynamodb-local.sh stop >/dev/null 2>&1 || true
  fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
  (cd "$(dirname "$jar")" && exec java -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar \
    -inMemory -disableTelemetry -port "$port") >"$out/dynamodb-local.log" 2>&1 </dev/null &
  ddb_pid=$!
  endpoint=http://127.0.0.1:$port
  for _ in $(seq 1 300); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -X POST -H 'Content-Type: application/x-amz-json-1.0' \
      -d '{}' "$endpoint" 2>/dev/null || true)
    [[ -n $code && $code != 000 ]] && break
    kill -0 "$ddb_pid" 2>/dev/null || { tail -n 20 "$out/dynamodb-local.log" >&2; exit 1; }
    sleep 0.2
  done
fi
cleanup() {
  [[ -n ${ddb_pid:-} ]] || return 0
  kill "$ddb_pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "$ddb_pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$ddb_pid" 2>/dev/null || true
}
trap cleanup EXIT
export MERIDIAN_DYNAMODB_ENDPOINT=$endpoint
log "DynamoDB Local at $endpoint"
load() { record "load-$1" "$(cut -d' ' -f1-3 /proc/loadavg)"; }
if awk -v n="$(nproc)" '{exit !($1 > n)}' /proc/loadavg; then
  log "WARNING: load average $(cut -d' ' -f1 /proc/loadavg) is above $(nproc) cores: other work will move the figures"
fi

# 1. In-process pipeline, on tmpfs (no fsync cost) and on disk (as make run).
stores=(disk)
if [[ -n $tmpfs && -d $tmpfs ]]; then stores=(tmpfs disk); fi
for store in "${stores[@]}"; do
  if [[ $store == tmpfs ]]; then dir=$tmpfs; else dir=$root/$out/pipeline-data; mkdir -p "$dir"; fi
  cmd="MERIDIAN_BENCH_DATA_DIR=$dir $GO test ./shared/pipeline -run '^\$' -bench '^BenchmarkPipeline\$' -benchmem -benchtime ${BENCH_TIME:-2s} -count ${BENCH_COUNT:-3}"
  log "section 1 ($store store): $cmd"
  record "pipeline-$store" "$cmd"
  load "pipeline-$store"
  MERIDIAN_BENCH_DATA_DIR=$dir $GO test ./shared/pipeline -run '^$' -bench '^BenchmarkPipeline$' -benchmem \
    -benchtime "${BENCH_TIME:-2s}" -count "${BENCH_COUNT:-3}" | tee "$out/pipeline-$store.txt"
done
rm -rf "$out/pipeline-data"

# 3. Store round trips on DynamoDB Local.
cmd="MERIDIAN_BENCH_OUT=\$PWD/$out/roundtrips.json $GO test ./shared/pipeline -run '^\$' -bench '^BenchmarkStoreRoundTrips\$' -benchtime ${BENCH_TRIPS:-20x}"
log "section 3: $cmd"
record roundtrips "$cmd"
load roundtrips
MERIDIAN_BENCH_OUT=$root/$out/roundtrips.json $GO test ./shared/pipeline -run '^$' -bench '^BenchmarkStoreRoundTrips$' \
  -benchtime "${BENCH_TRIPS:-20x}" | tee "$out/roundtrips.txt"

# The tooling of sections 2, 5 and the report.
$GO build -o "$out/bench" ./scripts/bench

# 2. HTTP throughput.
args=(-out "$out/http.json" -duration "${BENCH_DURATION:-10s}" -warmup "${BENCH_WARMUP:-2s}" -threads "${BENCH_THREADS:-2}"
  -connections "${BENCH_CONNECTIONS:-64}" -keys "${BENCH_KEYS:-2000}" -tmpfs "$tmpfs")
record http "go run ./scripts/bench http ${args[*]}"
load http
log "section 2: go run ./scripts/bench http ${args[*]}"
"$out/bench" http "${args[@]}"

# 5. Bootstrap sizes and start-up.
log "section 5: make build, then start-ups"
make --no-print-directory build >/dev/null
record startup "make build && go run ./scripts/bench startup -out $out/startup.json -runs ${BENCH_STARTUPS:-7}"
load startup
"$out/bench" startup -out "$out/startup.json" -runs "${BENCH_STARTUPS:-7}"

# 6. Request collapsing: bursts of identical requests, one process and two,
# on the embedded store and DynamoDB Local.
cmd="MERIDIAN_BENCH_OUT=\$PWD/$out/collapse.json $GO test ./shared/app -run '^\$' -bench '^BenchmarkRequestCollapsing\$' -benchtime ${BENCH_BURSTS:-10x}"
log "section 6: $cmd"
record collapse "$cmd"
load collapse
MERIDIAN_BENCH_OUT=$root/$out/collapse.json $GO test ./shared/app -run '^$' -bench '^BenchmarkRequestCollapsing$' \
  -benchtime "${BENCH_BURSTS:-10x}" | tee "$out/collapse.txt"

# 4. and the report.
"$out/bench" report -in "$out" -out BENCHMARKS.md
log "wrote BENCHMARKS.md"
