#!/usr/bin/env bash
# usage: scripts/apt-install.sh "WHAT NEEDS THEM" PACKAGE...
# Installs Debian packages a setup step found missing: with apt-get as root, else it says which
# packages to install and fails. (scripts/setup.sh and scripts/bench-peers.sh call it.)
set -euo pipefail
what="$1"
shift
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[setup] installing $* (apt-get) for $what" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
else
  echo "[setup] $what needs $*: install it (e.g. sudo apt-get install $*) and run again" >&2
  exit 1
fi
