#!/usr/bin/env bash
# Installs the Debian 12 packages forkbox needs to build, test and benchmark. Idempotent: runs
# `apt-get update` only when something is missing. Not root: prints the apt command instead.
#   scripts/setup.sh            everything to build, test and benchmark
#   scripts/setup.sh --runtime  only what the installed binaries need (the Dockerfile's final stage)
set -euo pipefail

RUNTIME_PACKAGES=(libssl3 libseccomp2 libyaml-cpp0.7 libedit2 ca-certificates bash git python3)
PACKAGES=(
  build-essential cmake pkg-config git ca-certificates
  libssl-dev nlohmann-json3-dev libseccomp-dev libcli11-dev
  libgtest-dev libgmock-dev libcpp-httplib-dev
  libyaml-cpp-dev libtomlplusplus-dev libedit-dev
  clang libclang-rt-14-dev clang-format
  python3 make procps util-linux
  bubblewrap
)

if [ "${1:-}" = "--runtime" ]; then
  PACKAGES=("${RUNTIME_PACKAGES[@]}")
elif [ -n "${1:-}" ]; then
  echo "usage: scripts/setup.sh [--runtime]" >&2
  exit 2
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run as root:  $cmd" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
