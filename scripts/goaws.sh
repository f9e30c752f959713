#!/usr/bin/env bash
# Runs goaws (github.com/Admiral-Piett/goaws, an SQS emulator in Go) for
# tests, in memory, in the background. It is a Go tool dependency of this
# module (go.mod: tool github.com/Admiral-Piett/goaws/app/cmd), so the go
# toolchain builds it from the module cache: no Docker, no other download.
#
# Usage: scripts/goaws.sh start|stop|endpoint
#   start     build the binary, start the server (unless it already runs)
#             and print its endpoint URL as the last line of stdout
#   stop      stop the server started by start
#   endpoint  print the endpoint URL if the server runs (exit 1 if not)
#
# Environment: GOAWS_PORT (default: a free port), GOAWS_POOL (queue pairs
# made at start-up, default 500), GO (default: go).
# State lives in .tools/goaws/ (gitignored): the binary, goaws.yaml,
# server.log, server.pid and endpoint. The server keeps queues in memory
# only; queues die with it.
#
# goaws listens on all interfaces (it has no listen-address option); the
# endpoint printed is the loopback one. Region us-east-1, account
# 100010001000: queue ARNs are arn:aws:sqs:us-east-1:100010001000:NAME.
#
# The queue pool: goaws v0.5.4 reads its queue map without a lock in most
# handlers, so a CreateQueue (or DeleteQueue) while other requests run can
# kill it ("fatal error: concurrent map read and map write"). Queues made
# from the config at start-up involve no such write, so the server starts
# with GOAWS_POOL pairs meridian-pool-N / meridian-pool-N-dlq and the queue
# meridian-pool holding one message per pair, its body N. A test takes a
# pair by receiving one message from meridian-pool (receives are atomic in
# goaws) and configures it with SetQueueAttributes (package
# shared/queue/sqstest does this); it never creates or deletes queues.
set -euo pipefail

readonly GOAWS_PKG=github.com/Admiral-Piett/goaws/app/cmd
readonly ACCOUNT=100010001000
readonly REGION=us-east-1
readonly POOL_QUEUE=meridian-pool
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir="$root/.tools/goaws"
bin="$dir/goaws"
conf="$dir/goaws.yaml"
pidfile="$dir/server.pid"
endpointfile="$dir/endpoint"
logfile="$dir/server.log"
go=${GO:-go}

name=goaws
proc_pattern="$bin"
# shellcheck source=scripts/emulator-lib.sh
source "$root/scripts/emulator-lib.sh"

# answers URL: true when goaws's health check at URL says OK.
answers() {
  local body
  body=$(curl -s --max-time 2 "$1/health" 2>/dev/null) || return 1
  [[ $body == OK ]]
}

# need_curl installs curl from Debian when this machine lacks it.
need_curl() {
  command -v curl >/dev/null 2>&1 && return
  local sudo=
  log "installing curl from Debian"
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq curl >&2
}

# build compiles goaws at the version go.mod pins (quick when the build
# cache has it; works offline once the module cache holds the module).
build() {
  command -v "$go" >/dev/null 2>&1 || die "no go toolchain ($go) to build goaws"
  (cd "$root" && "$go" build -o "$bin" "$GOAWS_PKG") >&2 || die "go build $GOAWS_PKG failed"
}

# write_config PORT POOL writes the one environment (Local) goaws starts
# with: the pool of queue pairs and the queue of their numbers.
write_config() {
  local i
  {
    cat <<YAML
Local:
  Host: 127.0.0.1
  Port: "$1"
  Region: $REGION
  AccountId: "$ACCOUNT"
  LogToFile: false
  EnableDuplicates: false
  QueueAttributeDefaults:
    VisibilityTimeout: 30
    ReceiveMessageWaitTimeSeconds: 0
    MaximumMessageSize: 262144
  Topics: []
  Queues:
    - Name: $POOL_QUEUE
      VisibilityTimeout: 43200
YAML
    for ((i = 0; i < $2; i++)); do
      printf '    - Name: %s-%d\n    - Name: %s-%d-dlq\n' "$POOL_QUEUE" "$i" "$POOL_QUEUE" "$i"
    done
  } >"$conf"
}

# fill_pool URL POOL puts the pair numbers into the pool queue (SQS JSON
# protocol, 10 a call; goaws checks no signature).
fill_pool() {
  local i j entries code queue_url="http://$REGION.127.0.0.1:${1##*:}/$ACCOUNT/$POOL_QUEUE"
  for ((i = 0; i < $2; i += 10)); do
    entries=
    for ((j = i; j < i + 10 && j < $2; j++)); do
      entries+="${entries:+,}{\"Id\":\"e$j\",\"MessageBody\":\"$j\"}"
    done
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST \
      -H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: AmazonSQS.SendMessageBatch' \
      -d "{\"QueueUrl\":\"$queue_url\",\"Entries\":[$entries]}" "$1/") || true
    [[ $code == 200 ]] || return 1
  done
}

start() {
  mkdir -p "$dir"
  # One start at a time (go test runs packages in parallel).
  exec 9>"$dir/lock"
  if command -v flock >/dev/null 2>&1; then
    flock -w 300 9 || die "timed out waiting for another start"
  fi
  need_curl
  if running; then
    if [[ -n ${GOAWS_PORT:-} && $(<"$endpointfile") != *":$GOAWS_PORT" ]]; then
      log "already running at $(<"$endpointfile"), not on port $GOAWS_PORT (stop it first)"
    fi
    cat "$endpointfile"
    return
  fi
  if pid_alive; then
    log "stopping unresponsive server $(<"$pidfile")"
    stop >/dev/null
  fi
  build

  local port=${GOAWS_PORT:-}
  [[ -n $port ]] || port=$(free_port)
  [[ $port =~ ^[0-9]+$ ]] || die "bad port: $port"
  local url="http://127.0.0.1:$port"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port is already in use"
  fi
  local pool=${GOAWS_POOL:-500}
  [[ $pool =~ ^[0-9]+$ ]] || die "bad GOAWS_POOL: $pool"
  write_config "$port" "$pool"

  rm -f "$endpointfile"
  (
    exec 9>&- # the server must not hold the start lock
    cd "$dir"
    # Log level error: goaws logs every message at info and every empty
    # receive at warning.
    exec nohup "$bin" -config "$conf" -loglevel error Local >"$logfile" 2>&1 </dev/null
  ) &
  local pid=$!
  echo "$pid" >"$pidfile"

  local deadline=$((SECONDS + 30))
  until answers "$url"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$logfile" >&2 || true
      rm -f "$pidfile"
      die "server exited during start-up (log: $logfile)"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 20 "$logfile" >&2 || true
      stop >/dev/null
      die "server did not answer within 30s (log: $logfile)"
    fi
    sleep 0.1
  done
  if ! fill_pool "$url" "$pool"; then
    stop >/dev/null
    die "could not fill the queue pool (log: $logfile)"
  fi
  echo "$url" >"$endpointfile"
  log "started pid $pid"
  echo "$url"
}

dispatch "$@"
