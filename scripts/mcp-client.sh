#!/usr/bin/env bash
# Runs the official MCP TypeScript SDK against a Meridian /mcp endpoint
# (scripts/npm-tools/mcp-client.mjs), for the interoperability test and
# for trying the server by hand. The SDK comes with the npm tools
# (scripts/npm-tools.sh).
#
# Usage: scripts/mcp-client.sh install
#        scripts/mcp-client.sh run URL API_KEY TOOL ['JSON_ARGUMENTS']
#        scripts/mcp-client.sh run URL API_KEY '[{"tool":"…","arguments":{…}},…]'
# Each call lists the tools first, as an agent does; the output is one JSON
# line, and the exit status is 1 when the SDK threw on a call.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

case "${1:-}" in
  install) "$root/scripts/npm-tools.sh" install >/dev/null ;;
  run)
    shift
    dir=$("$root/scripts/npm-tools.sh" install | tail -n1)
    # Beside node_modules, so the SDK's imports resolve.
    cp "$root/scripts/npm-tools/mcp-client.mjs" "$dir/mcp-client.mjs"
    exec node "$dir/mcp-client.mjs" "$@"
    ;;
  *) echo "usage: $0 install | run URL API_KEY TOOL [JSON_ARGUMENTS] | run URL API_KEY JSON_ARRAY_OF_CALLS" >&2; exit 2 ;;
esac
