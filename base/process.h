// A child-process handle that owns its pid and pidfd, and kills and reaps in its destructor, so no
// code path can leave a zombie or an orphan behind.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox {

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(pid_t pid, UniqueFd pidfd, bool own_group);
  // If not yet reaped: SIGKILL (to the whole process group when own_group) and waitid().
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Readable (POLLIN) once the process has exited: suitable for poll/epoll.
  int pidfd() const { return pidfd_.get(); }
  bool running() const { return pid_ > 0 && !reaped_; }

  // Non-blocking reap. nullopt while still running; otherwise the raw wait status. Once reaped,
  // returns the same status again. When own_group, whatever is left of the group is SIGKILLed
  // just before the leader is reaped (while its zombie still pins the group id), so no
  // grandchild outlives it.
  Result<std::optional<int>> TryWait();
  // Blocking reap (same group rule); returns the raw wait status. Retries EINTR.
  Result<int> Wait();
  // Signals the process (via its pidfd) or, when own_group, its whole process group. Fails once
  // the process was reaped.
  Status Signal(int sig);

 private:
  void KillAndReap();
  Result<std::optional<int>> Reap(bool block);
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  bool own_group_ = false;
  bool reaped_ = false;
  int status_ = 0;
};

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the path to exec (execve, no PATH search, no shell).
  std::vector<std::string> env;   // "NAME=value" entries; the complete environment.
  std::string cwd;                // Empty: inherit.
  // Descriptors to place in the child: {source fd in the caller, target fd number in the child}.
  // Everything else above 2 that is not a target is closed (close_range) before exec.
  std::vector<std::pair<int, int>> fds;
  bool new_session = false;  // setsid(): the child leads its own session and process group.
  // Runs in the forked child after the fds are in place and before execve. It must only make
  // async-signal-safe calls (the caller may be multithreaded). A non-OK return aborts the exec;
  // the child then writes the message to the error pipe and _exit(127)s, and Spawn returns it.
  std::function<Status()> pre_exec;
};

// fork + execve. The child starts with default signal dispositions and an empty signal mask (a
// parent's ignored SIGPIPE must not leak into tools), exactly the mapped fds above 2, and
// setsid/cwd/pre_exec applied in that order. Bad options (empty argv, NUL bytes, env entries
// without '=', closed source fds, a target mapped twice) fail before forking. Exec failures (and
// pre_exec failures) are reported back through a CLOEXEC pipe, so the caller gets a real Status
// instead of a mysterious exit code 127.
Result<ChildProcess> Spawn(const SpawnOptions& options);

// Maps a raw wait status to a shell-style exit code: the exit status, or 128+N for signal N.
int ExitCodeFromWaitStatus(int wait_status);
// "exited with code 3" / "killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int wait_status);

}  // namespace forkbox
