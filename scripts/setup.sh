#!/usr/bin/env bash
# Installs what the service and its tests need, idempotently (a second run does nothing):
#   - npm packages (`npm ci`) when node_modules is missing or older than package-lock.json;
#   - the opa CLI, built from the Go module proxy at a pinned version into .tools/bin
#     (never a downloaded release binary; the first build takes a few minutes);
#   - redis-server, Debian's chromium and protoc for the tests (apt-get, only as root; the
#     console's browser tests drive /usr/bin/chromium with playwright-core, which never
#     downloads a browser). `--for-start` skips them: the service itself runs without them;
#   - the service's build (dist/, what `npm start` runs) when missing or older than src/;
#   - the console's build (console/dist, served at /console) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# One setup at a time: tests that run `npm start` or pack the service may call this concurrently.
mkdir -p .tools
exec 9>.tools/setup.lock
flock 9

OPA_VERSION=v1.22.3
for_start=false
[ "${1:-}" = "--for-start" ] && for_start=true

say() { echo "[setup] $*" >&2; }

# --- npm packages -------------------------------------------------------------
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm packages (npm ci)"
  npm ci --no-audit --no-fund
fi

# --- opa ----------------------------------------------------------------------
opa=.tools/bin/opa
opa_version() { [ -x "$opa" ] && "$opa" version 2>/dev/null | sed -n 's/^Version: //p'; }
if [ "$(opa_version || true)" != "${OPA_VERSION#v}" ]; then
  if ! command -v go >/dev/null 2>&1; then
    say "Go is needed to build the opa CLI (${OPA_VERSION}) from the Go module proxy; install Go 1.22+ and run again"
    exit 1
  fi
  say "building opa ${OPA_VERSION} from the Go module proxy into .tools/bin (a few minutes the first time)"
  mkdir -p .tools/bin
  GOBIN="$PWD/.tools/bin" GOFLAGS=-mod=mod go install "github.com/open-policy-agent/opa@${OPA_VERSION}"
fi
say "opa $(opa_version)"

# --- redis-server (tests only) --------------------------------------------------
if [ "$for_start" = false ]; then
  command -v redis-server >/dev/null 2>&1 || bash scripts/apt-install.sh "the tests" redis-server
  say "$(redis-server --version | cut -d' ' -f1-3)"
  command -v chromium >/dev/null 2>&1 || bash scripts/apt-install.sh "the console's browser tests (Debian's /usr/bin/chromium)" chromium
  say "$(chromium --version 2>/dev/null | head -1)"
  # protoc with the well-known types (libprotobuf-dev puts them in /usr/include, which
  # protoc searches by itself): test/e2e/grpc-go.test.ts compiles a copy of proto/ alone.
  if ! command -v protoc >/dev/null 2>&1 || [ ! -f /usr/include/google/protobuf/timestamp.proto ]; then
    bash scripts/apt-install.sh "the tests (protoc with the well-known types)" protobuf-compiler libprotobuf-dev
  fi
  say "protoc $(protoc --version | cut -d' ' -f2)"
  # The Cerbos PDP, for the peers bench's equivalence test (test/e2e/bench-peers-equivalence.test.ts).
  bash scripts/fetch-cerbos.sh
fi

# --- the service's build ------------------------------------------------------------
# dist/ (npm run build) is what `npm start` runs: rebuilt when missing or older than its sources.
if [ ! -f dist/.build-stamp ] || [ -n "$(find src package.json tsconfig.json tsconfig.build.json -newer dist/.build-stamp -print -quit)" ]; then
  say "building the service (dist/)"
  bash scripts/build.sh
fi

# --- the console ----------------------------------------------------------------
# console/dist is rebuilt when missing or older than its sources (the console's own, and the
# generated API code it imports), so a pull never leaves `npm start` serving an old console.
if [ ! -f console/dist/index.html ] || [ -n "$(find console/src console/index.html console/vite.config.ts src/gen package.json -newer console/dist/index.html -print -quit)" ]; then
  say "building the console (console/dist)"
  npm run --silent build:console -- --logLevel warn
fi
