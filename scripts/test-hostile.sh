#!/usr/bin/env bash
# `npm run test:hostile`: the files under test/hostile/ at full scale, then one table of the run's figures.
# `npm test` runs the same files at the short scale (HOSTILE_SCALE unset).
set -uo pipefail
cd "$(dirname "$0")/.."
report=$(mktemp)
trap 'rm -f "$report"' EXIT
HOSTILE_SCALE=full HOSTILE_REPORT="$report" npx vitest run test/hostile "$@"
status=$?
npx tsx test/hostile/print-table.ts "$report" || status=1
exit $status
