#!/usr/bin/env bash
# Every check and test the project has, in the order that fails fastest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

echo "== buf lint"
npx buf lint proto

echo "== buf breaking (WIRE_JSON, against main)"
if git rev-parse --verify -q main >/dev/null && git ls-tree -d main proto >/dev/null 2>&1 && [ -n "$(git ls-tree main proto)" ]; then
  npx buf breaking proto --against '.git#branch=main,subdir=proto'
else
  echo "no proto/ on main yet: nothing to compare against"
fi

echo "== generated code is fresh"
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
npx buf generate --output "$fresh"
if ! diff -r "$fresh/src/gen" src/gen >/dev/null; then
  echo "src/gen is stale: run npm run generate and commit the result" >&2
  diff -r "$fresh/src/gen" src/gen | head -20 >&2
  exit 1
fi

echo "== typecheck"
npx tsc --noEmit

echo "== policies: opa fmt and opa test"
.tools/bin/opa fmt --fail -l policies
opa_inputs=(policies)
[ -d test/policy-fixtures ] && opa_inputs+=(test/policy-fixtures)
.tools/bin/opa test --fail-on-empty -v "${opa_inputs[@]}" | tail -5
.tools/bin/opa test --coverage "${opa_inputs[@]}" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log("rego coverage:",JSON.parse(s).coverage.toFixed(1)+"%"))'

echo "== vitest"
npx vitest run "$@"
