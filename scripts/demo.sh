#!/usr/bin/env bash
# The forkbox demo: the parent delegates a login feature to two sandboxed subagents running in
# parallel, which really write the files and really run the tests, beside a read-only `explore`
# subagent that finds how passwords are stored; then it answers from their summaries alone.
#
#   scripts/demo.sh                  scripted stand-in model (the bundled mock server)
#   ANTHROPIC_API_KEY=... scripts/demo.sh
#                                    the same run against the real Anthropic API
#   OPENAI_BASE_URL=http://host:port/v1 [OPENAI_API_KEY=...] scripts/demo.sh
#                                    the same run against an OpenAI-compatible server
#
# Builds what it needs into build/ (like scripts/test.sh). FORKBOX_DEMO_ARGS adds forkbox options
# (e.g. "--verbose"). Exits 0 when forkbox succeeded and the project's tests pass afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${FORKBOX_BUILD_DIR:-$root/build}
prompt="Build a login feature and write tests; which test framework did you use and did the tests pass?"

say() { printf '\033[1m==== %s\033[0m\n' "$*" >&2; }

# --- build if needed
if [ ! -f "$build/CMakeCache.txt" ]; then
  say "first run: installing dependencies and configuring $build"
  scripts/setup.sh
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
say "building forkbox, forkbox-child and forkbox-mock"
if ! cmake --build "$build" -j"$(nproc)" --target forkbox forkbox-child forkbox-mock \
    >"$build/demo-build.log" 2>&1; then
  tail -n 40 "$build/demo-build.log" >&2
  echo "demo: build failed (full log: $build/demo-build.log)" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/forkbox-demo.XXXXXX")
mock_pid=""
cleanup() {
  if [ -n "$mock_pid" ]; then kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the model: real when configured, otherwise the scripted stand-in
mode=mock
if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  mode=anthropic
elif [ -n "${OPENAI_BASE_URL:-}" ]; then
  mode=openai
fi
provider_args=()
if [ "$mode" = mock ]; then
  say "starting the scripted stand-in model (examples/scenarios/demo.json)"
  # Readiness without sleeping: the mock prints its "listening on" line once it serves.
  coproc MOCK { exec "$build/bin/forkbox-mock" --scenario examples/scenarios/demo.json \
                  --port 0 --port-file "$tmp/port" --log "$tmp/requests.jsonl" 2>&1; }
  mock_pid=$MOCK_PID
  line=""
  if ! read -r line <&"${MOCK[0]}"; then
    echo "demo: the mock server did not start" >&2
    exit 1
  fi
  port=${line##*:}
  case "$port" in '' | *[!0-9]*) echo "demo: unexpected mock output: $line" >&2; exit 1 ;; esac
  # Keep draining so the mock never blocks on stdout (subshells cannot use coproc fds: dup it).
  exec {mock_out}<&"${MOCK[0]}"
  cat <&"$mock_out" >"$tmp/mock.out" &
  exec {mock_out}<&-
  export ANTHROPIC_BASE_URL="http://127.0.0.1:$port"
  export ANTHROPIC_API_KEY="demo-dummy-key"
  unset OPENAI_BASE_URL OPENAI_API_KEY FORKBOX_PROVIDER FORKBOX_MODEL
  provider_args=(--provider anthropic)
elif [ "$mode" = openai ]; then
  say "using the OpenAI-compatible server at $OPENAI_BASE_URL"
  provider_args=(--provider openai)
else
  say "using the real Anthropic API (ANTHROPIC_API_KEY is set)"
  provider_args=(--provider anthropic)
fi

# --- a fresh copy of the sample project
work="$tmp/login-demo"
cp -r examples/login-demo "$work"
say "project: a copy of examples/login-demo in $work ($(ls "$work" | tr '\n' ' '))"
say "prompt: $prompt"

# --- the run: real fork/exec of forkbox-child, sandbox, pipes
set +e
# shellcheck disable=SC2086
"$build/bin/forkbox" --workdir "$work" --json "${provider_args[@]}" ${FORKBOX_DEMO_ARGS:-} \
  "$prompt" >"$tmp/result.json"
status=$?
set -e
if [ $status -ne 0 ]; then
  echo "demo: forkbox exited with $status" >&2
  [ -s "$tmp/result.json" ] && cat "$tmp/result.json" >&2
  [ $status -eq 4 ] && echo "demo: the sandbox is not available on this kernel (see: $build/bin/forkbox sandbox --check)" >&2
  exit $status
fi

say "answer"
python3 - "$tmp/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["answer"].strip())
PY

say "stats"
python3 - "$tmp/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r["parent"]
def kib(n): return f"{n} bytes" if n < 1024 else f"{n / 1024:.1f} KiB"
print(f"parent: {p['turns']} turns, {p['tokens']['input']} input + {p['tokens']['output']} output tokens,"
      f" context {kib(p['context_bytes'])} (~{(p['context_bytes'] + 3) // 4} tokens)")
for t in r["tasks"]:
    state = "ok" if t["ok"] else "FAILED: " + t.get("error", "")
    print(f"  task {t['number']} ({t.get('agent_type', 'general')}) \"{t['description']}\": {t['turns']} turns, "
          f"{t['tokens']['input'] + t['tokens']['output']} tokens, {t['elapsed_ms'] / 1000:.1f}s, "
          f"stop {t['stop']}, saw {kib(t['tool_output_bytes'])} of tool output, returned a "
          f"{kib(t['summary_bytes'])} summary -- {state}")
print(f"children saw {kib(r['kept_out_bytes'])} of tool output that never entered the parent's "
      f"context; the parent only holds their summaries.")
PY

say "what the subagents left in the project"
ls -la "$work" | grep -E 'login|test_|explore' >&2 || true
if [ -e "$work/explore-probe.txt" ]; then
  echo "demo: the read-only explore agent wrote explore-probe.txt" >&2
  exit 1
elif [ "$mode" = mock ]; then
  echo "no explore-probe.txt: the explore agent's write was refused by the kernel" >&2
fi
if (cd "$work" && python3 -m unittest -q test_login >"$tmp/check.log" 2>&1); then
  echo "python3 -m unittest test_login in the project copy: $(tail -n 1 "$tmp/check.log")" >&2
else
  cat "$tmp/check.log" >&2
  echo "demo: the tests the subagents wrote do not pass" >&2
  exit 1
fi

if [ "$mode" = mock ]; then
  cat >&2 <<'NOTE'

NOTE: the model in this run is a SCRIPTED STAND-IN (the bundled mock server replaying
examples/scenarios/demo.json): its replies, including the summaries, are canned text. Everything
else was real: forkbox fork+exec'ed three forkbox-child processes, which sandboxed themselves and
ran in parallel: two general agents wrote login.py and test_login.py with real tool calls and ran
the tests with bash under the sandbox; the explore agent (write: none) searched with bash and its
write was refused by Landlock. To drive a real model with the same command:
  ANTHROPIC_API_KEY=sk-ant-... scripts/demo.sh
  OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_API_KEY=... scripts/demo.sh   # OpenAI-compatible
NOTE
fi
