#!/usr/bin/env bash
# `npm run bench:peers`: Mandate beside OPA and Cerbos (bench/peers/run.ts says what is measured).
# Installs what the bench needs, idempotently (a second run does nothing), then runs it:
#   - what the service needs (scripts/setup.sh --for-start: npm packages, the pinned opa CLI);
#   - wrk, Debian's HTTP/1.1 load generator (apt-get, only as root);
#   - the Cerbos PDP, npm's @cerbos/cerbos-linux-x64 at a pinned version, unpacked into
#     .tools/cerbos (the package is only the binary; it is not a dependency of the project);
#   - peers-grpc-load, ghz built from the Go module proxy as a library
#     (bench/peers/grpc-load, pinned in its go.mod), into .tools/bin.
#   PEERS_DURATION=2s npm run bench:peers   a short smoke run (default 10s)
set -euo pipefail
cd "$(dirname "$0")/.."

CERBOS_VERSION=0.55.0
CERBOS_SHA256=dab3152a1530bec16b945473e9aea9af493fee123c477c4196a990fad58656d1

say() { echo "[bench:peers] $*" >&2; }

bash scripts/setup.sh --for-start

if ! command -v wrk >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing wrk (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk >/dev/null
  else
    say "the bench needs wrk on PATH: install it (e.g. sudo apt-get install wrk) and run again"
    exit 1
  fi
fi

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

driver=.tools/bin/peers-grpc-load
if [ ! -x "$driver" ] || [ -n "$(find bench/peers/grpc-load -newer "$driver" -type f)" ]; then
  if ! command -v go >/dev/null 2>&1; then
    say "Go is needed to build the gRPC load generator (ghz) from the Go module proxy; install Go 1.23+ and run again"
    exit 1
  fi
  say "building peers-grpc-load (ghz) from the Go module proxy into .tools/bin"
  mkdir -p .tools/bin
  (cd bench/peers/grpc-load && go build -o "../../../$driver" .)
fi

exec node --import tsx --expose-gc bench/peers/run.ts
