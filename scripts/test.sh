#!/usr/bin/env bash
# The one test command. On a fresh Debian 12 machine it installs what it needs (scripts/setup.sh),
# then builds and runs the whole CTest suite twice: a plain build and an AddressSanitizer +
# UndefinedBehaviorSanitizer build. It then runs the libFuzzer targets for a bounded time and checks
# the formatting. Any failure fails the command.
#
#   scripts/test.sh              everything
#   FORKBOX_TEST_QUICK=1 ...     plain build only (a fast local loop)
set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-$(nproc)}

step() { printf '\n==== %s\n' "$*"; }

step "setup"
if [ "$(id -u)" -eq 0 ]; then
  scripts/setup.sh
else
  scripts/setup.sh || { echo "test: run the apt command above first" >&2; exit 1; }
fi

step "format check"
scripts/format.sh --check

run_suite() {  # name, cmake args...
  local dir=$1; shift
  step "configure $dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  step "build $dir"
  cmake --build "$dir" -j"$jobs"
  step "ctest $dir"
  (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 600) | tee "$dir/ctest.log"
  summaries+=("$dir:" "$(grep -E '^[0-9]+% tests passed' "$dir/ctest.log" | tail -n 1)")
}
summaries=()

run_suite build
if [ "${FORKBOX_TEST_QUICK:-0}" != "1" ]; then
  run_suite build-asan -DFORKBOX_SANITIZE=ON

  step "fuzz (bounded)"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DFORKBOX_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzzers
  mkdir -p build-fuzz/findings
  for fz in build-fuzz/tests/fuzz/fuzz_*; do
    [ -x "$fz" ] || continue
    name=$(basename "$fz")
    corpus="$root/tests/fuzz/corpus/${name#fuzz_}"
    work=$(mktemp -d)
    cp -r "$corpus"/. "$work"/ 2>/dev/null || true
    findings="$root/build-fuzz/findings/$name-"
    log="$work.log"
    echo "fuzz: $name for ${FORKBOX_FUZZ_SECONDS:-30}s"
    if ! "$fz" -max_total_time="${FORKBOX_FUZZ_SECONDS:-30}" -print_final_stats=0 \
        -artifact_prefix="$findings" "$work" >"$log" 2>&1; then
      tail -n 60 "$log"
      echo "fuzz: $name found a crash; the input is saved as ${findings}*" >&2
      rm -rf "$work" "$log"
      exit 1
    fi
    tail -n 2 "$log"
    rm -rf "$work" "$log"
  done

fi

# CTest's closing lines come last, so that they are what a reader (or CI) sees at the end.
step "summary"
printf '%s\n' "${summaries[@]}"
