#!/usr/bin/env bash
# buf breaking (WIRE_JSON, buf.yaml) of proto/ against the main branch. Skips with a loud
# warning only when there is no main to compare against (not a git checkout, or neither a
# local main nor an origin/main that can be fetched); when main exists it always runs.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The baseline is the main branch: the local branch, else the remote-tracking one (CI
# checkouts often have only origin/main, possibly shallow: then it is fetched).
against=""
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  if git rev-parse -q --verify 'refs/heads/main^{commit}' >/dev/null; then
    against=refs/heads/main
  elif git rev-parse -q --verify 'refs/remotes/origin/main^{commit}' >/dev/null; then
    against=refs/remotes/origin/main
  elif git remote get-url origin >/dev/null 2>&1 && git fetch -q --depth=1 origin main:refs/remotes/origin/main 2>/dev/null; then
    against=refs/remotes/origin/main
  fi
fi
if [ -z "$against" ]; then
  echo "WARNING: no main branch here (not a git checkout, no main, no origin/main): buf breaking NOT run" >&2
elif [ -z "$(git ls-tree "$against" proto)" ]; then
  echo "main has no proto/ yet: nothing to compare against"
else
  # main's protos (from git) with main's buf.yaml; the third-party protos its workspace names
  # come from npm packages, which git does not hold, so main's tree borrows our node_modules.
  base="$work/main"
  mkdir -p "$base"
  git archive "$against" proto $(git ls-tree --name-only "$against" buf.yaml) | tar -x -C "$base"
  [ -f "$base/buf.yaml" ] || cp buf.yaml "$base/"
  ln -s "$PWD/node_modules" "$base/node_modules"
  buf="$PWD/node_modules/.bin/buf"
  (cd "$base" && "$buf" build proto -o "$work/main.binpb")
  "$buf" breaking proto --against "$work/main.binpb"
  echo "no breaking change against ${against#refs/*/} ($(git rev-parse --short "$against"))"
fi
