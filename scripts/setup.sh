#!/usr/bin/env bash
# Installs everything the service and its tests need, idempotently: npm packages,
# the opa CLI (built from the Go module proxy at a pinned version) and redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."

OPA_VERSION=v1.22.3

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
  npm ci
fi

if [ ! -x .tools/bin/opa ]; then
  echo "building opa ${OPA_VERSION} from the Go module proxy into .tools/bin"
  GOBIN="$PWD/.tools/bin" go install "github.com/open-policy-agent/opa@${OPA_VERSION}"
fi
.tools/bin/opa version | head -1

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server is not installed; install it (apt-get install redis-server) and run again" >&2
    exit 1
  fi
fi
redis-server --version
