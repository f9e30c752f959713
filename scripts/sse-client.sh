#!/usr/bin/env bash
# Reads a Meridian server-sent event stream (stream=1) with a third-party
# SSE parser, eventsource-parser from npm (scripts/npm-tools/sse-client.mjs),
# for the streaming tests and for trying a stream by hand. The parser comes
# with the npm tools (scripts/npm-tools.sh).
#
# Usage: scripts/sse-client.sh install
#        scripts/sse-client.sh run URL API_KEY [--abort-after-legs N] [--header 'Name: value']...
# The output is one JSON line for the response (status, content type,
# request id), then one per event and comment, then an end line; the exit
# status is 1 on a parser error, 3 when the answer is not an event stream.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

case "${1:-}" in
  install) "$root/scripts/npm-tools.sh" install >/dev/null ;;
  run)
    shift
    dir=$("$root/scripts/npm-tools.sh" install | tail -n1)
    # Beside node_modules, so the parser's import resolves.
    cp "$root/scripts/npm-tools/sse-client.mjs" "$dir/sse-client.mjs"
    exec node "$dir/sse-client.mjs" "$@"
    ;;
  *) echo "usage: $0 install | run URL API_KEY [--abort-after-legs N] [--header 'Name: value']..." >&2; exit 2 ;;
esac
