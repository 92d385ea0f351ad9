# forkbox in a container (Debian 12). Uses the same setup script as the README, so it cannot drift.
#   docker build -t forkbox .
#   docker run --rm -it -v "$PWD:/work" -w /work -e ANTHROPIC_API_KEY forkbox "your prompt"
# Landlock and seccomp need no privileges, so layer 1 of the sandbox holds in a default container.
# Layer 2 (user, mount and PID namespaces) needs a runtime that allows unprivileged user namespaces,
# e.g. `--security-opt seccomp=unconfined` or a profile that permits unshare(CLONE_NEWUSER).
FROM debian:12 AS build
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && cmake --build build -j"$(nproc)" --target forkbox forkbox-child \
 && cmake --install build --prefix /opt/forkbox

FROM debian:12
COPY scripts/setup.sh /tmp/setup.sh
RUN /tmp/setup.sh --runtime && rm -rf /var/lib/apt/lists/* /tmp/setup.sh
COPY --from=build /opt/forkbox/bin/ /usr/local/bin/
RUN useradd --create-home agent
USER agent
ENTRYPOINT ["/usr/local/bin/forkbox"]
