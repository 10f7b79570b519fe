#!/usr/bin/env bash
# `npm run bench:peers`: Mandate beside OPA and Cerbos (bench/peers/run.ts says what is measured).
# Installs what the bench needs, idempotently (a second run does nothing), then runs it:
#   - what the service needs (scripts/setup.sh --for-start: npm packages, the pinned opa CLI);
#   - wrk, Debian's HTTP/1.1 load generator (apt-get, only as root);
#   - the Cerbos PDP (scripts/fetch-cerbos.sh: pinned version and checksum, into .tools/cerbos);
#   - peers-grpc-load, ghz built from the Go module proxy as a library
#     (bench/peers/grpc-load, pinned in its go.mod), into .tools/bin.
#   PEERS_DURATION=2s npm run bench:peers   a short smoke run (default 10s)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "[bench:peers] $*" >&2; }

bash scripts/setup.sh --for-start

command -v wrk >/dev/null 2>&1 || bash scripts/apt-install.sh "the peers bench" wrk

bash scripts/fetch-cerbos.sh

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
