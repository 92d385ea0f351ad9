// The sandbox settings the user chose (--sandbox, --allow-net, --writable, --env, the rlimits):
// one type from the parent's options through the start frame (ipc::SandboxSettings is this type)
// to the child's Policy. Plain data, no dependencies, so the wire protocol can carry it without
// depending on the sandbox library.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace forkbox::sandbox {

struct Settings {
  bool enabled = true;  // false only with the loud --sandbox=off opt-out.
  bool allow_net = false;
  std::vector<std::string> writable;  // Extra writable paths (--writable).
  std::vector<std::string> env;       // Extra environment variable names passed to tools (--env).
  // Paths tools may read although the read scope denies them (--readable; absolute).
  std::vector<std::string> readable;
  // Paths tools must not read besides the credential stores (absolute): the session's
  // --transcript-dir, which holds every tool output and task prompt of every session that wrote
  // there. Denied like a store (DeniedReadPaths; layer 2 mounts over it), so forkbox itself keeps
  // writing there only through descriptors opened before. ResolvePolicy drops one that lies in or
  // holds the workdir or a `writable` tree: tools write there, and in layer 1 a write rule also
  // grants reading. Sent to children.
  std::vector<std::string> unreadable;
  // --allow-broad-workdir: a workdir of "/", $HOME or an ancestor of a credential store is
  // accepted (see CheckWorkdirScope). The parent's decision; not sent to children.
  bool allow_broad_workdir = false;
  // --sandbox read-only (`codex -s read-only`): no Landlock ruleset grants a write beneath the
  // workdir or a `writable` path; only a temp dir made for the command (`tmpdir`; a session's is
  // made on /dev/shm once confined) and what dies with it (layer 2's private /tmp and /dev/shm)
  // stay writable. The session also stacks RestrictToReadOnly on its parent and runs each task
  // as a `write: none` agent. The parent's decision; not sent to children.
  bool read_only = false;
  int64_t rlimit_fsize_bytes = 1LL << 30;
  int64_t rlimit_as_bytes = 8LL << 30;
  int64_t rlimit_nofile = 1024;
  int64_t rlimit_nproc = 512;
  bool operator==(const Settings&) const = default;
};

// The --sandbox (-s) modes of `forkbox` and `forkbox sandbox`: forkbox's on, off and read-only,
// and codex's workspace-write (on) and danger-full-access (off).
inline constexpr std::array<const char*, 5> kSandboxModes = {
    "on", "off", "read-only", "workspace-write", "danger-full-access"};

// Sets `enabled` and `read_only` from `mode`, one of kSandboxModes.
inline void ApplySandboxMode(std::string_view mode, Settings* settings) {
  settings->enabled = mode != "off" && mode != "danger-full-access";
  settings->read_only = mode == "read-only";
}

}  // namespace forkbox::sandbox
