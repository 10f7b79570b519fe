#!/usr/bin/env bash
# The Cerbos PDP, npm's @cerbos/cerbos-linux-x64 at a pinned version and checksum, unpacked into
# .tools/cerbos (the package is only the binary; it is not a dependency of the project), for the
# peers bench and its equivalence test. Idempotent: a second run does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

CERBOS_VERSION=0.55.0
CERBOS_SHA256=dab3152a1530bec16b945473e9aea9af493fee123c477c4196a990fad58656d1

say() { echo "[cerbos] $*" >&2; }

cerbos=.tools/cerbos/cerbos
if [ "$("$cerbos" --version 2>/dev/null | head -1 || true)" != "$CERBOS_VERSION" ]; then
  say "fetching the Cerbos PDP ${CERBOS_VERSION} (npm pack @cerbos/cerbos-linux-x64) into .tools/cerbos"
  rm -rf .tools/cerbos && mkdir -p .tools/cerbos
  (cd .tools/cerbos && npm pack --silent "@cerbos/cerbos-linux-x64@${CERBOS_VERSION}" >/dev/null)
  tarball=.tools/cerbos/cerbos-cerbos-linux-x64-${CERBOS_VERSION}.tgz
  if ! echo "${CERBOS_SHA256}  ${tarball}" | sha256sum --check --status; then
    say "the Cerbos package's checksum is not the pinned one (${CERBOS_SHA256}); refusing to run it"
    exit 1
  fi
  tar -xzf "$tarball" -C .tools/cerbos --strip-components=1 package/cerbos-linux-x64
  mv .tools/cerbos/cerbos-linux-x64 "$cerbos" && rm "$tarball"
fi
say "cerbos $("$cerbos" --version | head -1)"
