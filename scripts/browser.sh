#!/usr/bin/env bash
# Installs what the console's browser tests drive: Debian's Chromium
# (/usr/bin/chromium, from the distribution's packages; nothing downloads a
# browser of its own) and the npm tools, playwright-core among them
# (scripts/npm-tools.sh). Then runs the end-to-end script against a
# running Meridian.
#
# Usage: scripts/browser.sh install             prints the npm tools folder as the last line
#        scripts/browser.sh run BASE_URL OUT_DIR  runs scripts/npm-tools/console-e2e.mjs
#   The run reads MERIDIAN_ADMIN_TOKEN (to open a fresh account) from the
#   environment, writes screenshots under OUT_DIR and prints one JSON line.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly CHROMIUM=/usr/bin/chromium

log() { echo "browser: $*" >&2; }

need_chromium() {
  [[ -x $CHROMIUM ]] && return
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  log "installing chromium from Debian"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >&2
  [[ -x $CHROMIUM ]] || { log "chromium did not install at $CHROMIUM"; exit 1; }
}

case "${1:-}" in
  install)
    need_chromium
    "$root/scripts/npm-tools.sh" install | tail -n1
    ;;
  run)
    shift
    need_chromium
    dir=$("$root/scripts/npm-tools.sh" install | tail -n1)
    # Beside node_modules, so playwright-core resolves.
    cp "$root/scripts/npm-tools/console-e2e.mjs" "$dir/console-e2e.mjs"
    CHROMIUM_PATH=$CHROMIUM exec node "$dir/console-e2e.mjs" "$@"
    ;;
  *) echo "usage: $0 install | run BASE_URL OUT_DIR" >&2; exit 2 ;;
esac
