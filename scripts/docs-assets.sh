#!/usr/bin/env bash
# Fetches the API reference's renderer into the binary's embed folder:
# Redoc's standalone bundle (gzipped) and its LICENSE, from the npm package at the
# version and integrity pinned below, into shared/apidocs/redoc/
# (gitignored: the repository holds no copy of third-party files). make
# run, make build and make test run it first; it does nothing when the
# pinned version is already there. Node.js and npm come from Debian when
# missing.
#
# Redoc 3's package cannot be installed with npm ci (its one dependency is
# not on the registry and the standalone bundle does not need it), so the
# package itself is fetched with npm pack and its sha512 checked here.
#
# One change is made to the bundle: its sidebar shows Redocly's logo from
# cdn.redoc.ly, the only thing it loads from another origin; the two logo
# URLs become an empty data: image (Redoc then hides the image; the "API
# docs by" link stays). The script fails if the URLs are not found, so an
# upgrade looks again.
#
# Usage: scripts/docs-assets.sh        prints the folder as the last line
set -euo pipefail

readonly REDOC_VERSION=3.0.1
readonly REDOC_INTEGRITY=sha512-KDfoKaYW19LCl4YStgBnwlaNjYEFfs5zCNt1s1WZ2YM5u8d26Yuzd2l43fZO851ZsgIMe/D640fDJkD8eaRQKQ==

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="$root/shared/apidocs/redoc"
stamp="$REDOC_VERSION $REDOC_INTEGRITY"

log() { echo "docs-assets: $*" >&2; }

if [[ -f $dest/redoc.standalone.js.gz && -f $dest/LICENSE && $(cat "$dest/VERSION" 2>/dev/null) == "$stamp" ]]; then
  echo "$dest"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  log "installing nodejs and npm from Debian"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "fetching redoc@$REDOC_VERSION from npm"
(cd "$work" && npm pack "redoc@$REDOC_VERSION" --silent --no-audit --no-fund >/dev/null)
tarball="$work/redoc-$REDOC_VERSION.tgz"
got="sha512-$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tarball")"
if [[ $got != "$REDOC_INTEGRITY" ]]; then
  log "redoc-$REDOC_VERSION.tgz has integrity $got, not the pinned $REDOC_INTEGRITY"
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/bundles/redoc.standalone.js package/LICENSE

bundle="$work/package/bundles/redoc.standalone.js"
for logo in https://cdn.redoc.ly/redoc/logo-mini-full.svg https://cdn.redoc.ly/redoc/logo-mini.svg; do
  if [[ $(grep -o "$logo\`" "$bundle" | wc -l) -ne 1 ]]; then
    log "redoc $REDOC_VERSION: expected the logo URL $logo once in the bundle; look at what it loads again"
    exit 1
  fi
  sed -i "s#$logo\`#data:,\`#" "$bundle"
done
if grep -q 'cdn\.redoc\.ly/redoc/logo' "$bundle"; then
  log "the bundle still names a logo on cdn.redoc.ly"
  exit 1
fi

# Kept gzipped (-n: no name or time, so builds stay reproducible): 2.3 MB
# of script is some 600 KB in every binary that embeds it, and is sent
# as it is to every browser (they all accept gzip).
mkdir -p "$dest"
gzip -9 -n -c "$bundle" >"$dest/redoc.standalone.js.gz.tmp"
cp "$work/package/LICENSE" "$dest/LICENSE"
rm -f "$dest/redoc.standalone.js"
mv "$dest/redoc.standalone.js.gz.tmp" "$dest/redoc.standalone.js.gz"
echo "$stamp" >"$dest/VERSION"
log "Redoc $REDOC_VERSION is in $dest"
echo "$dest"
