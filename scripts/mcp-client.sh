#!/usr/bin/env bash
# Runs the official MCP TypeScript SDK against a Meridian /mcp endpoint,
# for the interoperability test. The SDK version is pinned by
# scripts/mcp-client/package-lock.json and installed from the npm registry
# into .tools/mcp-client/ (gitignored); Node and npm come from Debian when
# missing.
#
# Usage: scripts/mcp-client.sh install
#        scripts/mcp-client.sh run URL API_KEY TOOL 'JSON_ARGUMENTS'
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/scripts/mcp-client"
dir="$root/.tools/mcp-client"

log() { echo "mcp-client: $*" >&2; }

need_node() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && return
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  log "installing nodejs and npm from Debian"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >&2
}

install() {
  need_node
  mkdir -p "$dir"
  if cmp -s "$src/package-lock.json" "$dir/package-lock.json" && [[ -d $dir/node_modules/@modelcontextprotocol/sdk ]]; then
    return
  fi
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  log "installing the MCP TypeScript SDK into $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
}

case "${1:-}" in
  install) install ;;
  run)
    shift
    install
    cp "$src/client.mjs" "$dir/client.mjs"
    exec node "$dir/client.mjs" "$@"
    ;;
  *) echo "usage: $0 install | run URL API_KEY TOOL JSON_ARGUMENTS" >&2; exit 2 ;;
esac
