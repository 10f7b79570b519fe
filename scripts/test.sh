#!/usr/bin/env bash
# Every check and test the project has, cheapest first: what `npm test` and CI run.
# Extra arguments go to vitest (e.g. `npm test -- test/e2e/contract.test.ts`).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
step() { echo; echo "== $* ($((SECONDS - started)) s)"; }

step "setup"
bash scripts/setup.sh

step "buf lint"
# Bare, at the root, as a user would run it: buf.yaml names only proto/ (the googleapis files
# vendored there are excluded from lint), so nothing under node_modules is read.
npx buf lint

step "buf breaking (WIRE_JSON, against main)"
bash scripts/buf-breaking.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step "generated code is fresh (buf generate into a temp dir, diff against src/gen)"
fresh="$work/gen"
npx buf generate --output "$fresh"
if ! diff -r "$fresh/src/gen" src/gen >"$work/gen.diff"; then
  echo "src/gen is stale: run \`npm run generate\` and commit the result" >&2
  head -40 "$work/gen.diff" >&2
  exit 1
fi

step "typecheck (tsc --noEmit)"
npx tsc --noEmit

step "lint (eslint)"
npm run --silent lint

step "layer boundaries (dependency-cruiser)"
# The layers and what each may import: the comment at the top of .dependency-cruiser.cjs.
npm run --silent check:boundaries

step "policies: opa fmt, opa test with coverage"
opa=.tools/bin/opa
if [ -z "$(find policies -name '*.rego' 2>/dev/null | head -1)" ]; then
  echo "no .rego under policies/ yet: nothing to check"
else
  inputs=(policies)
  [ -n "$(find test/policy-fixtures -type f 2>/dev/null | head -1)" ] && inputs+=(test/policy-fixtures)
  "$opa" fmt --fail -l policies
  if ! "$opa" test --fail-on-empty -v "${inputs[@]}" >"$work/opa-test.txt" 2>&1; then
    cat "$work/opa-test.txt" >&2
    exit 1
  fi
  grep -E '^(PASS|FAIL|ERROR|SKIPPED)' "$work/opa-test.txt" | tail -1 || true
  "$opa" test --fail-on-empty --coverage "${inputs[@]}" >"$work/opa-coverage.json"
  node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log("rego coverage: "+r.coverage.toFixed(1)+"%")' "$work/opa-coverage.json"
fi

step "vitest"
# The JSON report guards against a run that "passes" without running anything (vitest
# exits 0 when collection dies on an unhandled error).
npx vitest run --reporter=default --reporter=json --outputFile.json="$work/vitest.json" "$@"
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  if (!r.success || r.numTotalTests === 0 || r.numFailedTests > 0) {
    console.error(`vitest did not pass: success=${r.success}, ${r.numTotalTests} tests, ${r.numFailedTests} failed`);
    process.exit(1);
  }
  console.log(`vitest: ${r.numPassedTests} of ${r.numTotalTests} tests passed in ${r.testResults.length} files`);
' "$work/vitest.json"

step "console: type check, build, browser journeys (scripts/test-console.sh)"
npm run --silent test:console

echo
echo "== all checks passed in $((SECONDS - started)) s"
