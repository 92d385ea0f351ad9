# forkbox in a container (Debian 12). Uses the same setup script as the README, so it cannot drift.
#   docker build -t forkbox .
#   docker run --rm -it -v "$PWD:/work" -w /work -e ANTHROPIC_API_KEY forkbox "your prompt"   (layer 1)
# Measured by scripts/container-test.sh (the README's "In containers" section has the table):
# - a default `docker run` gives layer 1 (Landlock + seccomp need no privileges; Docker's seccomp
#   profile refuses unshare(CLONE_NEWUSER), so there are no namespaces);
# - layer 2 (user, mount and PID namespaces) needs both
#     --security-opt seccomp=docs/docker-seccomp.json   (allows the namespace syscalls)
#     --security-opt systempaths=unconfined             (Docker masks /proc paths; the kernel then
#                                                         refuses a fresh proc mount in a new userns)
FROM debian:12 AS build
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && nice cmake --build build -j"$(nproc)" --target forkbox forkbox-child \
 && cmake --install build --prefix /opt/forkbox

# The image scripts/container-test.sh runs its checks in: the build stage (it has cc, make, git and
# python3 for the positive battery) plus the escape suite, the mock model and the same non-root
# user as the final image. Only built with `--target test`.
FROM build AS test
RUN nice cmake --build build -j"$(nproc)" \
      --target escape_test escape_probe escape_run_as escape_no_userns forkbox-mock \
 && useradd --create-home agent \
 && useradd --system --no-create-home forkbox-escape \
 && chown -R agent:agent /src
USER agent

FROM debian:12
COPY scripts/setup.sh /tmp/setup.sh
RUN /tmp/setup.sh --runtime && rm -rf /var/lib/apt/lists/* /tmp/setup.sh
COPY --from=build /opt/forkbox/ /usr/local/
RUN useradd --create-home agent
USER agent
ENTRYPOINT ["/usr/local/bin/forkbox"]
