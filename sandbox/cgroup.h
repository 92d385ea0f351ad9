// A pids cgroup that caps the number of processes of one task. It is what holds a fork bomb for
// uid 0, to which RLIMIT_NPROC never applies (the kernel exempts the global root user even with
// every capability dropped and inside a user namespace mapped to it).
#pragma once

#include <cstdint>
#include <string>

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
  static Result<PidsCgroup> Create(int64_t max_pids);

  // Moves the calling process into <hierarchy>/forkbox/task-<pid>-session
  // with pids.max = max_pids. Everything it spawns afterwards inherits that cgroup, so no spawn
  // pays a cgroup v1 attach of its own. A no-op once the process sits in a forkbox cgroup. The
  // cgroup is collected like a task's once we are gone.
  static Status JoinSession(int64_t max_pids);
  // True when the calling process already sits in a forkbox pids cgroup (session or task).
  static bool InForkboxCgroup();

  PidsCgroup() = default;
  // Closes the fd and removes the cgroup if it is already empty (else a later Create does).
  ~PidsCgroup();
  PidsCgroup(PidsCgroup&& other) noexcept;
  PidsCgroup& operator=(PidsCgroup&& other) noexcept;

  const std::string& path() const { return path_; }
  int procs_fd() const { return procs_.get(); }

 private:
  std::string path_;
  UniqueFd procs_;
};

// Async-signal-safe: moves the calling process into the cgroup whose cgroup.procs is `procs_fd`.
// 0 or errno.
int JoinCgroupRaw(int procs_fd);

}  // namespace forkbox::sandbox
