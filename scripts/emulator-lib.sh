# Shared by the scripts that run a test emulator in the background
# (dynamodb-local.sh, goaws.sh). The sourcing script sets:
#   name          prefix of log lines
#   pidfile       where start records the server's pid
#   endpointfile  where start records its endpoint URL
#   proc_pattern  text of the server's command line, so a reused pid is
#                 not mistaken for it
# and defines answers URL (true when the server responds at URL) and start.
# It then calls dispatch "$@".

log() { echo "$name: $*" >&2; }
die() { log "$*"; exit 1; }

# pid_alive: the recorded pid runs, and (where /proc tells) it is our
# server, not an unrelated process that reused the pid.
pid_alive() {
  local pid
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  [[ ! -r /proc/$pid/cmdline ]] || tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$proc_pattern"
}

# running: the recorded server is alive and answers at the recorded endpoint.
running() {
  pid_alive && [[ -s $endpointfile ]] && answers "$(<"$endpointfile")"
}

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    return
  fi
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 40000))
    # A refused connection means nobody listens there.
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  die "no free port found"
}

stop() {
  if pid_alive; then
    local pid
    pid=$(<"$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    log "stopped pid $pid"
  fi
  rm -f "$pidfile" "$endpointfile"
}

endpoint() {
  running || die "not running (start it with: $0 start)"
  cat "$endpointfile"
}

dispatch() {
  case "${1:-}" in
  start) start ;;
  stop) stop ;;
  endpoint) endpoint ;;
  *)
    echo "usage: $0 start|stop|endpoint" >&2
    exit 2
    ;;
  esac
}
