// A pids cgroup that caps the number of processes of one task. It is what holds a fork bomb for
// uid 0, to which RLIMIT_NPROC never applies (the kernel exempts the global root user even with
// every capability dropped and inside a user namespace mapped to it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::sandbox {

class PidsCgroup {
 public:
  // The writable pids hierarchy ("" when there is none): cgroup v1's pids controller, or the
  // cgroup v2 root when it delegates pids.
  static std::string Hierarchy();

  // Creates <hierarchy>/forkbox/task-<pid>-<n> with pids.max = max_pids and opens its
  // cgroup.procs for the child. Removes stale, empty task cgroups left by earlier tasks first.
  // Holds the cgroup's lock (lock_fd(), as JoinSession's): a keeper that must outlive this process
  // to end the command keeps it, so that EndLeftovers leaves the cgroup to the keeper.
  static Result<PidsCgroup> Create(int64_t max_pids);

  // Moves the calling process into <hierarchy>/forkbox/task-<pid>-session
  // with pids.max = max_pids. Everything it spawns afterwards inherits that cgroup, so no spawn
  // pays a cgroup v1 attach of its own. A no-op once the process sits in a forkbox cgroup (an
  // empty descriptor then). The cgroup is collected like a task's once we are gone. Returns its
  // lock (a shared flock of its directory, O_CLOEXEC): EndLeftovers leaves the cgroup alone while
  // the lock is held, so every process that looks after the session keeps it (a fork shares it).
  static Result<UniqueFd> JoinSession(int64_t max_pids);
  // True when the calling process already sits in a forkbox pids cgroup (session or task).
  static bool InForkboxCgroup();
  // Kills the processes left in the cgroups of forkbox processes that are gone, and removes those
  // cgroups: a SIGKILL of every forkbox process at once leaves the tools' daemons there, which in
  // layer 1 (no PID namespace) nothing else takes down. A cgroup whose lock is still held (a
  // flock of its directory: JoinSession's and Create's, kept by the session's launcher or the
  // command's keeper, which end the rest themselves) is still looked after: it is left alone. The
  // lock is probed, so this holds in any PID namespace. At most two seconds per cgroup. One line
  // per cgroup that held any ("killed 2 processes a killed forkbox left running
  // (/sys/fs/cgroup/pids/forkbox/task-9-session)"). Nothing without a hierarchy (not root: other
  // users' tools are held by RLIMIT_NPROC, not a cgroup).
  static std::vector<std::string> EndLeftovers();

  PidsCgroup() = default;
  // Closes the fd and removes the cgroup if it is already empty (else a later Create does).
  ~PidsCgroup();
  PidsCgroup(PidsCgroup&& other) noexcept;
  PidsCgroup& operator=(PidsCgroup&& other) noexcept;

  const std::string& path() const { return path_; }
  int procs_fd() const { return procs_.get(); }
  int lock_fd() const { return lock_.get(); }

 private:
  std::string path_;
  UniqueFd procs_;
  UniqueFd lock_;  // LOCK_SH on the directory (EndLeftovers).
};

// Async-signal-safe: moves the calling process into the cgroup whose cgroup.procs is `procs_fd`.
// 0 or errno.
int JoinCgroupRaw(int procs_fd);

// The other fork-bomb limit for uid 0, without a cgroup attach (a cgroup v1 attach waits for an
// RCU grace period, 5-20 ms per command): the pid_max of a tool's own PID namespace, which the
// kernel keeps per namespace since Linux 6.14. With pid_max = max_pids + 1 at most max_pids
// processes live in the namespace (the kernel never hands out a pid at or above it; nested
// namespaces take a pid here too). Usable when the kernel is >= 6.14 and max_pids + 1 is at
// least the kernel's minimum pid_max (301). The tools cannot raise it: Landlock refuses writes
// under /proc/sys. Returns the pid_max to write, or 0 when a pids cgroup is needed instead.
int64_t PidNamespaceMaxFor(int64_t max_pids);

// PidNamespaceMaxFor for a process that gets a fresh PID namespace (`layer2`) as uid 0, where
// RLIMIT_NPROC does not apply; 0 otherwise (a non-root user is held by RLIMIT_NPROC).
int64_t RootPidNamespaceMax(bool layer2, int64_t max_pids);

// Async-signal-safe: writes `pid_max` to /proc/sys/kernel/pid_max of the calling process's PID
// namespace (its owner, before dropping capabilities). 0 or errno; `*step` names the call.
int LimitPidNamespaceRaw(int64_t pid_max, const char** step);

}  // namespace forkbox::sandbox
