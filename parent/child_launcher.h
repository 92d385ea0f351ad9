// Starting forkbox-child processes for tasks: on demand, or ahead of time as a standby.
//
// A standby child is spawned before any task exists and sent a prepare frame (no secrets): it
// execs, sandboxes itself and warms its TLS stack, then blocks reading fd 3. Handing a task to it
// is one pipe write of the start frame, instead of fork + exec + dynamic linking + sandbox set-up
// on the task's critical path. An unused standby is killed and reaped with the session (or dies
// with the parent through PDEATHSIG); it creates nothing on disk until it gets a task.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "parent/task_runner.h"

namespace forkbox::parent {

// A started forkbox-child and the parent's ends of its pipes (both O_CLOEXEC).
struct LaunchedChild {
  ChildProcess process;
  UniqueFd control;  // Write end of the child's fd 3 (non-blocking for a standby).
  UniqueFd report;   // Read end of the child's fd 4.
};

// fork + exec of config.child_path with fds 0-4 (stdin /dev/null, stdout and stderr to stderr
// with config.provider.verbose, else /dev/null), and `transcript` (if valid) on fd
// ipc::kChildTranscriptFd.
Result<LaunchedChild> LaunchChild(const TaskConfig& config, const UniqueFd& transcript);

// The prepare frame for a child that will run tasks of `config`.
ipc::PrepareMessage PrepareFor(const TaskConfig& config);

// Keeps up to `size` standby children, oldest (most likely warm) first. Not thread-safe.
// `config` must outlive it and must not set a transcript_dir_fd (a transcript fd is mapped at exec
// time, before the task exists).
class Standby {
 public:
  Standby(const TaskConfig& config, size_t size) : config_(config), size_(size) {}

  // Starts standby children until `size` are waiting. A failure to start one disables the
  // standby for the session (tasks then start on demand, where the same failure is reported per
  // task) and is returned so the caller can log it.
  Status Refill();

  // Hands over the oldest standby child, or nullopt when there is none or it already exited
  // (then every standby is killed, the standby is disabled for the session and *why says what
  // happened; tasks start on demand). Its start frame must agree with PrepareFor(config) and
  // carry no transcript_fd, or the child refuses the task.
  std::optional<LaunchedChild> Take(std::string* why);

  bool disabled() const { return disabled_; }
  // The waiting children's pids, oldest first (for tests and logs).
  std::vector<pid_t> waiting_pids() const;

 private:
  const TaskConfig& config_;
  const size_t size_;
  std::deque<LaunchedChild> children_;
  bool disabled_ = false;
};

}  // namespace forkbox::parent
