#!/usr/bin/env bash
# Installs what the console's browser tests drive: Debian's Chromium
# (/usr/bin/chromium, from the distribution's packages; nothing downloads a
# browser of its own) and the npm tools, playwright-core among them
# (scripts/npm-tools.sh). Then runs the end-to-end script against a
# running Meridian.
#
# Usage: scripts/browser.sh install             prints the npm tools folder as the last line
#        scripts/browser.sh run BASE_URL OUT_DIR  runs scripts/npm-tools/console-e2e.mjs
#        scripts/browser.sh script NAME ARGS...   runs scripts/npm-tools/NAME with ARGS
#   The run reads MERIDIAN_ADMIN_TOKEN (to open a fresh account) from the
#   environment, writes screenshots under OUT_DIR and prints one JSON line;
#   console-monitors-e2e.mjs reads MERIDIAN_CONSOLE_TOKEN (TestConsoleMonitorsInChromium).
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
    exec "$0" script console-e2e.mjs "$@"
    ;;
  script)
    name=${2:?usage: $0 script NAME ARGS...}
    shift 2
    [[ $name =~ ^[a-z0-9-]+\.mjs$ && -f $root/scripts/npm-tools/$name ]] || { log "no browser script $name"; exit 2; }
    need_chromium
    dir=$("$root/scripts/npm-tools.sh" install | tail -n1)
    # Beside node_modules, so playwright-core resolves; with the shared helpers.
    cp "$root/scripts/npm-tools/browser-lib.mjs" "$root/scripts/npm-tools/$name" "$dir/"
    CHROMIUM_PATH=$CHROMIUM exec node "$dir/$name" "$@"
    ;;
  *) echo "usage: $0 install | run BASE_URL OUT_DIR | script NAME ARGS..." >&2; exit 2 ;;
esac
