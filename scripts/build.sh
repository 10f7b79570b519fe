#!/usr/bin/env bash
# `npm run build`: the service and the `mandate` CLI compiled from src/ to dist/ (tsc), with the
# files they read at run time beside them (SQL migrations, the Redis Lua script, the policy
# worker). `npm start` and `mandate serve` run dist/, so nothing compiles TypeScript at run time.
# dist/.build-stamp marks a finished build: scripts/setup.sh rebuilds when src/ is newer.
set -euo pipefail
cd "$(dirname "$0")/.."

rm -rf dist
npx tsc -p tsconfig.build.json
(cd src && find . -type f ! -name '*.ts' -exec cp --parents {} ../dist/ \;)
chmod +x dist/cli/main.js
touch dist/.build-stamp
