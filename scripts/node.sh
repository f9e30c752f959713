#!/usr/bin/env bash
# Makes sure Node.js is on this machine for the CDK tests: the CDK's Go
# bindings (jsii) run the CDK in a Node process, also to synthesize
# offline. Installs nodejs from Debian when node is missing or older than
# MIN_NODE_MAJOR, then prints the version in use as the last line.
#
# Usage: scripts/node.sh
set -euo pipefail

readonly MIN_NODE_MAJOR=18

log() { echo "node: $*" >&2; }

major() { node --version 2>/dev/null | sed -n 's/^v\([0-9][0-9]*\)\..*/\1/p'; }

have=$(major || true)
if [[ -z $have || $have -lt $MIN_NODE_MAJOR ]]; then
  log "installing nodejs from Debian (found: ${have:-none}; the CDK needs ${MIN_NODE_MAJOR} or later)"
  sudo=
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs >&2
  have=$(major || true)
  [[ -n $have && $have -ge $MIN_NODE_MAJOR ]] || { log "node ${MIN_NODE_MAJOR} or later is required (have: ${have:-none})"; exit 1; }
fi
node --version
