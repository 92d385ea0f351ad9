#!/usr/bin/env bash
# forkbox in real containers: builds the image and measures, in each run mode, which sandbox layer
# forkbox gets and whether the escape probes, the positive battery, multiprocessing and the demo
# hold there. Prints one table, mode x check -> pass/FAIL. Not part of scripts/test.sh.
#
#   scripts/container-test.sh             as root on Debian 12 (installs docker.io, debootstrap and
#                                         podman when missing; starts dockerd when none answers)
#   scripts/container-test.sh --quick     only --check, multiprocessing and the one-shot run
#   scripts/container-test.sh --no-podman skip the rootless Podman rows
#
# Images: `debian:12` is built offline (debootstrap --variant=minbase + docker import) when absent,
# from the Debian mirror in /etc/apt/sources.list*; then `forkbox` (the Dockerfile's final stage)
# and `forkbox-test` (its `test` stage: build tree, escape suite, mock, user `agent`).
# Logs: $FORKBOX_CTR_STATE (default /tmp/forkbox-container-test)/logs/<mode>.log.
#
# The same file runs inside the test image as `container-test.sh --inside LAYER` (bind-mounted):
# there it runs the checks and prints `CHECK <name> pass|FAIL <detail>` lines.
set -euo pipefail

# --------------------------------------------------------------------------- inside the container
inside_check() {  # inside_check NAME COMMAND...: runs it, prints its CHECK line
  local name=$1 log
  shift
  log=$(mktemp)
  if "$@" >"$log" 2>&1; then
    echo "CHECK $name pass"
  else
    echo "CHECK $name FAIL"
    # gtest's failed tests first (all of them), then the end of the output.
    { grep -E '^\[  FAILED  \] [^ ]+,' "$log" || true; } | sed "s/, where.*//; s/^/  [$name] /" |
      sort -u
    sed "s/^/  [$name] /" "$log" | tail -n 40
  fi
  rm -f "$log"
}

# The escape suite's unsandboxed controls. Each must escape on the host (ctest runs them there);
# inside a container the runtime itself holds some (its seccomp profile: keyrings, personality;
# missing capabilities; no-new-privileges), which proves nothing about forkbox and is no failure
# of it: the cell is `pass` when every control escaped, else `rt:N`, N controls held by the
# runtime, named in the log. The sandboxed probes (the `probes` column) must pass everywhere.
controls_check() {
  local log held
  log=$(mktemp)
  if escape_suite 'Modes/EscapeTest.*Control' >"$log" 2>&1; then
    echo "CHECK controls pass"
  else
    held=$({ grep -E '^\[  FAILED  \] [^ ]+,' "$log" || true; } | sed 's/^\[  FAILED  \] //; s/,.*//' |
           sort -u)
    if [ -z "$held" ]; then  # The suite failed without a failed test: that is a failure.
      echo "CHECK controls FAIL"
      sed 's/^/  [controls] /' "$log" | tail -n 40
    else
      echo "CHECK controls rt:$(wc -l <<<"$held")"
      sed 's/^/  [controls] held by the runtime: /' <<<"$held"
    fi
  fi
  rm -f "$log"
}

# The layer `forkbox sandbox --check` reports must be the expected one.
layer_is() {
  local out
  out=$(forkbox sandbox --check 2>&1) || { echo "$out"; return 1; }
  echo "$out"
  local got
  got=$(grep -o -m1 'layer [12]' <<<"$out" | head -n1)
  [ "$got" = "layer $1" ] || { echo "expected layer $1, got '${got:-none}'"; return 1; }
}

# gtest over the escape suite, filtered; FORKBOX_ESCAPE_TMPDIR keeps root and user runs apart.
escape_suite() {
  FORKBOX_ESCAPE_TMPDIR=$(mktemp -d) /src/build/tests/escape/escape_test --gtest_brief=1 \
    --gtest_filter="$1"
}

# Python multiprocessing under the sandbox with one start method (SemLock and /dev/shm included).
multiprocessing_works() {
  local work
  work=$(mktemp -d)
  forkbox sandbox --workdir "$work" -- /usr/bin/python3 -c "
import multiprocessing as mp
if __name__ == '__main__':
    with mp.get_context('$1').Pool(2) as p:
        print('pool sum', sum(p.map(abs, range(-10, 0))))" | tee /dev/stderr | grep -qx 'pool sum 55'
}

run_inside() {
  local layer=$1 quick=$2
  export PATH="/src/build/bin:$PATH"
  cd /src
  echo "inside: uid $(id -u), $(grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status | xargs)"
  inside_check layer layer_is "$layer"
  if [ "$quick" = 0 ]; then
    # The suite's modes: Root/User (sandboxed), RootNoUserns/UserNoUserns (its emulated Docker
    # jail) and *Control (unsandboxed, must escape); as a user only the User modes run. The
    # controls are their own column: inside a container the runtime may already block a probe.
    local sandboxed='Modes/EscapeTest.*/Root:Modes/EscapeTest.*/User:Modes/EscapeTest.*NoUserns'
    inside_check probes escape_suite "$sandboxed"
    controls_check
    inside_check positive escape_suite 'Modes/SandboxWorks.*'
  fi
  inside_check mp-fork multiprocessing_works fork
  inside_check mp-forkserver multiprocessing_works forkserver
  if [ "$quick" = 0 ]; then
    inside_check demo env FORKBOX_BUILD_DIR=/src/build scripts/demo.sh
  fi
}

if [ "${1:-}" = "--inside" ]; then
  run_inside "$2" "${3:-0}"
  exit 0
fi

# --------------------------------------------------------------------------- on the host
cd "$(dirname "$0")/.."
root=$(pwd)
state=${FORKBOX_CTR_STATE:-/tmp/forkbox-container-test}
quick=0
with_podman=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-podman) with_podman=0 ;;
    *) echo "usage: scripts/container-test.sh [--quick] [--no-podman]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "container-test: run as root" >&2; exit 2; }
mkdir -p "$state/logs"
rm -f "$state"/logs/*.log
say() { printf '\033[1m==== %s\033[0m\n' "$*" >&2; }

# Debian's docker.io client: BuildKit is built in (newer static clients need the buildx plugin).
docker=/usr/bin/docker
dockerd_pid=""
mock_id=""
cleanup() {
  if [ -n "$mock_id" ]; then $docker rm -f "$mock_id" >/dev/null 2>&1 || true; fi
  if [ -n "$dockerd_pid" ]; then
    say "stopping the dockerd this script started (pid $dockerd_pid)"
    kill "$dockerd_pid" 2>/dev/null || true
    wait "$dockerd_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$state/logs/apt.log"
}

# No systemd here: start dockerd by hand when no daemon answers, and wait until it does.
ensure_daemon() {
  if $docker info >/dev/null 2>&1; then return 0; fi
  say "no Docker daemon answers: starting dockerd (log: $state/dockerd.log)"
  dockerd >"$state/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 1 120); do
    $docker info >/dev/null 2>&1 && return 0
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 0.5  # polling a daemon's readiness, not a test
  done
  tail -n 20 "$state/dockerd.log" >&2
  echo "container-test: dockerd did not come up (log: $state/dockerd.log)" >&2
  exit 1
}

# The Debian mirror this machine's apt uses (deb822 .sources or one-line format).
debian_mirror() {
  local url
  url=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
          2>/dev/null | grep -v '^\s*#' | grep -o -E 'https?://[^ ]+/debian/?( |$)' |
          grep -v security | head -n1 | tr -d ' ')
  echo "${url:-http://deb.debian.org/debian}"
}

ensure_base_image() {
  if $docker image inspect debian:12 >/dev/null 2>&1; then return 0; fi
  local mirror rootfs
  mirror=$(debian_mirror)
  rootfs="$state/rootfs"
  say "building debian:12 offline: debootstrap --variant=minbase bookworm from $mirror"
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$state/logs/debootstrap.log" 2>&1
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$mirror" "$mirror" \
    >"$rootfs/etc/apt/sources.list"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | $docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - debian:12 >/dev/null
  rm -rf "$rootfs"
}

build_images() {
  say "docker build: forkbox and forkbox-test (log: $state/logs/build.log)"
  if ! { DOCKER_BUILDKIT=1 $docker build --progress=plain -t forkbox . &&
         DOCKER_BUILDKIT=1 $docker build --progress=plain --target test -t forkbox-test .; } \
       >"$state/logs/build.log" 2>&1; then
    tail -n 40 "$state/logs/build.log" >&2
    echo "container-test: docker build failed" >&2
    exit 1
  fi
}

# --------------------------------------------------------------------------- the modes
declare -A result=()
inside_net=""  # the checks' network: Docker's default bridge; Podman's is set in podman_modes
rows=()
checks=(layer probes controls positive mp-fork mp-forkserver demo oneshot)
prompt="Build a login feature and write tests; which test framework did you use and did the tests pass?"

# The scripted model for the one-shot runs: forkbox-mock on the host's loopback.
start_mock() {
  mock_id=$($docker run -d --network host forkbox-test /src/build/bin/forkbox-mock \
              --scenario /src/examples/scenarios/demo.json --port 0)
  local line=""
  for _ in $(seq 1 120); do
    line=$($docker logs "$mock_id" 2>&1 | grep -m1 'listening on' || true)
    [ -n "$line" ] && break
    sleep 0.5  # polling a server's readiness, not a test
  done
  mock_port=${line##*:}
  case "$mock_port" in '' | *[!0-9]*) echo "container-test: mock did not start: $line" >&2; exit 1 ;; esac
}

# Which JSON output flag the image's forkbox has (issue 14 adds --output-format).
json_flag() {
  if $docker run --rm forkbox --help 2>&1 | grep -q -- '--output-format'; then
    echo "--output-format json"
  else
    echo "--json"
  fi
}

# The product image, one-shot, against the mock: forkbox must succeed, print JSON with an answer,
# and the tests its subagents wrote must pass.  oneshot ENGINE... :: HOST_UID OPTS...
oneshot() {
  local engine=() opts=() owner work
  while [ "$1" != "::" ]; do engine+=("$1"); shift; done
  shift
  owner=$1
  shift
  opts=("$@")
  work=$(mktemp -d "$state/work.XXXXXX")
  cp -r "$root/examples/login-demo/." "$work"
  chown -R "$owner" "$work"
  chmod 755 "$work"
  # shellcheck disable=SC2086
  "${engine[@]}" run --rm --network host "${opts[@]}" -v "$work:/work" -w /work \
    -e ANTHROPIC_API_KEY=demo-dummy-key -e "ANTHROPIC_BASE_URL=http://127.0.0.1:$mock_port" \
    forkbox --provider anthropic --workdir /work $json_out "$prompt" >"$work.json" &&
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["answer"].strip()' \
      "$work.json" &&
    (cd "$work" && python3 -m unittest -q test_login)
}

# run_mode ENGINE... :: NAME LAYER USER HOST_UID OPTS...: every check in one mode.
run_mode() {
  local engine=() name layer user owner log line
  while [ "$1" != "::" ]; do engine+=("$1"); shift; done
  shift
  name=$1 layer=$2 user=$3 owner=$4
  shift 4
  log="$state/logs/${name//\//-}.log"
  rows+=("$name")
  say "$name: ${engine[*]} run --user $user $* (expects layer $layer)"
  # shellcheck disable=SC2086
  "${engine[@]}" run --rm $inside_net "$@" --user "$user" \
    -v "$state/container-test.sh:/container-test.sh:ro" \
    forkbox-test bash /container-test.sh --inside "$layer" "$quick" >"$log" 2>&1 || true
  local check verdict
  while read -r _ check verdict _; do
    result["$name|$check"]=$verdict
  done < <(grep '^CHECK ' "$log")
  if oneshot "${engine[@]}" :: "$owner" --user "$user" "$@" >>"$log" 2>&1; then
    result["$name|oneshot"]=pass
  else
    result["$name|oneshot"]=FAIL
  fi
}

print_table() {
  local row c cell failed=0
  printf '\n%-26s' "mode"
  for c in "${checks[@]}"; do printf ' %s' "$c"; done
  printf '\n'
  for row in "${rows[@]}"; do
    printf '%-26s' "$row"
    for c in "${checks[@]}"; do  # every check name is at least as wide as "pass"
      cell=${result["$row|$c"]:--}
      [ "$cell" = FAIL ] && failed=1
      printf " %-${#c}s" "$cell"
    done
    printf '\n'
  done
  # shellcheck disable=SC2016
  printf '\nlayer: `forkbox sandbox --check` reports the layer the mode is documented to give.\n'
  printf 'oneshot: the forkbox image itself (%s) against the mock; the rest run in forkbox-test.\n' \
    "$json_out"
  printf 'logs: %s/logs/<mode>.log\n' "$state"
  return $failed
}

docker_modes() {
  local prof="$state/docker-seccomp.json" agent
  cp docs/docker-seccomp.json "$prof"
  agent=$($docker run --rm --entrypoint id forkbox -u agent)
  run_mode $docker :: docker-default/agent 1 agent "$agent"
  run_mode $docker :: docker-default/root 1 root 0
  # The old README recipe: namespaces are allowed, but the masked /proc refuses the proc mount.
  run_mode $docker :: docker-unconfined/root 1 root 0 --security-opt seccomp=unconfined
  run_mode $docker :: docker-profile-only/agent 1 agent "$agent" --security-opt "seccomp=$prof"
  run_mode $docker :: docker-layer2/agent 2 agent "$agent" \
    --security-opt "seccomp=$prof" --security-opt systempaths=unconfined
  run_mode $docker :: docker-layer2/root 2 root 0 \
    --security-opt "seccomp=$prof" --security-opt systempaths=unconfined
  # examples/k8s/job.yaml's securityContext, read from the manifest and run as Docker options
  # (Kubernetes cannot run here): as written (layer 2) and with its layer-1 variant.
  local k8s=()
  mapfile -t k8s < <(k8s_options examples/k8s/job.yaml "$prof" layer2)
  [ "${k8s[0]:-}" = --user ] || { echo "container-test: cannot map examples/k8s/job.yaml" >&2; exit 1; }
  run_mode $docker :: k8s-job-as-written 2 "${k8s[1]}" "${k8s[1]}" "${k8s[@]:2}"
  mapfile -t k8s < <(k8s_options examples/k8s/job.yaml "$prof" layer1)
  run_mode $docker :: k8s-job-runtime-default 1 "${k8s[1]}" "${k8s[1]}" "${k8s[@]:2}"
}

# The Job's pod and container securityContext as `docker run` options, one per line (the first
# two lines: --user and its uid:gid). VARIANT layer1 swaps in the documented layer-1 settings
# (seccompProfile RuntimeDefault, no procMount, no hostUsers). Fails on settings it cannot map.
k8s_options() {
  python3 - "$@" <<'PY'
import sys, yaml
path, profile, variant = sys.argv[1:]
job = next(d for d in yaml.safe_load_all(open(path)) if d and d.get("kind") == "Job")
pod = job["spec"]["template"]["spec"]
psc, (ctr,) = pod["securityContext"], pod["containers"]
csc = ctr["securityContext"]
assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0, "must run as non-root"
assert csc["allowPrivilegeEscalation"] is False, "allowPrivilegeEscalation must be false"
assert csc["capabilities"]["drop"] == ["ALL"] and not csc["capabilities"].get("add"), "drop ALL"
assert any(e["name"] == "ANTHROPIC_API_KEY" and "secretKeyRef" in e.get("valueFrom", {})
           for e in ctr["env"]), "the API key must come from a Secret"
assert "--output-format json" in " ".join(ctr["args"]), "results as --output-format json"
seccomp, proc = psc["seccompProfile"]["type"], csc.get("procMount", "Default")
if variant == "layer1":
    seccomp, proc = "RuntimeDefault", "Default"
else:
    assert pod.get("hostUsers") is False, "procMount Unmasked needs hostUsers: false"
user = f'{psc["runAsUser"]}:{psc["runAsGroup"]}'
opts = ["--user", user, "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
opts += {"RuntimeDefault": [], "Localhost": ["--security-opt", f"seccomp={profile}"]}[seccomp]
opts += {"Default": [], "Unmasked": ["--security-opt", "systempaths=unconfined"]}[proc]
print("\n".join(opts))
PY
}

# Rootless Podman as an unprivileged host user. /dev/net/tun may be closed to users (slirp4netns
# then fails): the checks run with --network none, the one-shot runs with the host's network.
podman_modes() {
  local user=forkbox-podman uid start agent_host
  id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
  uid=$(id -u "$user")
  mkdir -p "$state/xdg-$uid"
  chown "$user" "$state/xdg-$uid"
  chmod 700 "$state/xdg-$uid"
  local podman=(runuser -u "$user" -- env "XDG_RUNTIME_DIR=$state/xdg-$uid" "HOME=/home/$user"
                podman --cgroup-manager=cgroupfs --events-backend=file)
  say "loading forkbox and forkbox-test into $user's rootless Podman storage"
  $docker save forkbox forkbox-test -o "$state/images.tar"
  chmod 644 "$state/images.tar"
  (cd / && "${podman[@]}" load -i "$state/images.tar") >"$state/logs/podman-load.log" 2>&1
  rm -f "$state/images.tar"
  # Container uid 0 is the host user; container uid N>0 is subuid start + N - 1.
  start=$(grep "^$user:" /etc/subuid | cut -d: -f2)
  agent_host=$((start + 1000 - 1))
  inside_net="--network none"
  run_mode "${podman[@]}" :: podman-default/agent 1 agent "$agent_host"
  run_mode "${podman[@]}" :: podman-default/root 1 root "$uid"
  run_mode "${podman[@]}" :: podman-unmask/agent 2 agent "$agent_host" --security-opt unmask=ALL
  run_mode "${podman[@]}" :: podman-unmask/root 2 root "$uid" --security-opt unmask=ALL
}

install_missing docker.io debootstrap python3-yaml
[ "$with_podman" = 1 ] && install_missing podman uidmap
ensure_daemon
ensure_base_image
build_images
cp scripts/container-test.sh "$state/container-test.sh"
chmod 755 "$state" "$state/container-test.sh"
json_out=$(json_flag)
start_mock
docker_modes
[ "$with_podman" = 1 ] && podman_modes
print_table
