#!/usr/bin/env bash
# The console's own checks (`npm run test:console`, a step of `npm test`): its type check, its
# production build (console/dist, which the service serves at /console), then its user journeys
# in Debian's Chromium driven by playwright-core against a real service (console/tests/).
# Screenshots land in console/test-output/ (gitignored). Extra arguments go to vitest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
npx tsc -p console
npx tsc -p console/tests
npm run --silent build:console -- --logLevel warn
npx vitest run --config console/vitest.config.ts "$@"
