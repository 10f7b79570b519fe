#!/usr/bin/env bash
# `npm run test:hostile`: the files under test/hostile/ at full scale, and the e2e files that cover the
# other hostile scenarios (each records its row; their assertions are those of `npm test`), then one
# table of the run's figures. `npm test` runs the same files at the short scale (HOSTILE_SCALE and
# HOSTILE_REPORT unset: nothing is recorded).
set -uo pipefail
cd "$(dirname "$0")/.."
report=$(mktemp)
trap 'rm -f "$report"' EXIT
HOSTILE_SCALE=full HOSTILE_REPORT="$report" npx vitest run test/hostile \
  test/e2e/evidence.test.ts test/e2e/postgres-outage.test.ts test/e2e/capabilities-redis-loss.test.ts \
  test/e2e/connection-limits.test.ts test/e2e/policy-time-limit.test.ts "$@"
status=$?
npx tsx test/hostile/print-table.ts "$report" || status=1
exit $status
