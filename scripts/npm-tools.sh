#!/usr/bin/env bash
# Installs and runs the third-party npm tools the tests use against
# Meridian (scripts/npm-tools/package.json: the MCP TypeScript SDK, Redocly
# CLI, Spectral, openapi-typescript, openapi-fetch, TypeScript,
# eventsource-parser). Versions
# are pinned by scripts/npm-tools/package-lock.json and installed from the
# npm registry into .tools/npm-tools/ (gitignored) with npm ci, again only
# when the lock changes. Node.js and npm come from Debian when missing;
# Redocly CLI needs Node 20.19 or later.
#
# Usage: scripts/npm-tools.sh install      prints the install folder as the last line
#        scripts/npm-tools.sh exec TOOL ARGS...   runs a tool's command (redocly, spectral, openapi-typescript, tsc)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/scripts/npm-tools"
dir="$root/.tools/npm-tools"
readonly MIN_NODE=20.19

log() { echo "npm-tools: $*" >&2; }

node_ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || return 1
  node -e 'const [a,b]=process.versions.node.split(".").map(Number); const [x,y]=process.argv[1].split(".").map(Number); process.exit(a>x||(a===x&&b>=y)?0:1)' "$MIN_NODE"
}

need_node() {
  node_ok && return
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  log "installing nodejs and npm from Debian"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >&2
  node_ok || { log "Node.js $MIN_NODE or later is required (have: $(node --version 2>/dev/null || echo none))"; exit 1; }
}

install() {
  need_node
  mkdir -p "$dir"
  if cmp -s "$src/package-lock.json" "$dir/package-lock.json" && [[ -d $dir/node_modules ]]; then
    echo "$dir"
    return
  fi
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  log "installing the npm tools into $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$dir"
}

case "${1:-}" in
  install) install ;;
  exec)
    shift
    tool=${1:?usage: $0 exec TOOL ARGS...}
    shift
    install >/dev/null
    # No telemetry or update checks: the tests run offline.
    export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1
    exec "$dir/node_modules/.bin/$tool" "$@"
    ;;
  *) echo "usage: $0 install | exec TOOL ARGS..." >&2; exit 2 ;;
esac
