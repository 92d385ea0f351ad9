// Process hardening and interrupt handling for the parent.
//
// Two regimes:
//  - Outside the task phase (model calls, the prompt) SIGINT/SIGTERM go to a handler. In kExit
//    mode (one-shot) it _exit()s with 128+signo: no children exist then, so nothing is left
//    behind (standby children die with the parent through PDEATHSIG). In kFlag mode
//    (interactive, or while a base tool runs) it only records the signal; a model call in flight
//    and the parent's own bash command poll it (InterruptPending) and stop, and the session then
//    treats the turn as interrupted.
//  - During a task batch the signals are blocked and read from a signalfd in the event loop.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::parent {

// Non-dumpable (no ptrace/core of the parent's memory, which holds the API key), SIGPIPE ignored,
// a child subreaper (orphans of our tools are re-parented to us, not to init).
Status HardenProcess();

// SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed) all stop the session: running work
// is killed, every process forkbox started is killed, and it exits 128 + the signal number.
inline constexpr int kInterruptSignals[] = {SIGINT, SIGTERM, SIGHUP};
// "Ctrl-C", "SIGTERM", "SIGHUP".
const char* SignalName(int signo);

// SIGKILLs every child of this process (whatever was re-parented to it included) and reaps them,
// round after round, until none is left. Async-signal-safe (the exit-mode handler calls it); the
// session calls it once more when it ends.
void KillAndReapAllChildren();
// After one of the parent's own tool commands: kills and reaps every child except `keep` (the
// standby children), that is, whatever the command left re-parented to us (a `setsid -f` daemon).
void KillOrphans(const std::vector<pid_t>& keep);

enum class InterruptMode { kExit, kFlag };
Status InstallInterruptHandler(InterruptMode mode);
void SetInterruptMode(InterruptMode mode);
// The recorded signal (0: none), cleared by the call.
int TakeInterrupt();
// Whether a signal is recorded, without clearing it: the cancel check of model calls and of the
// parent's own tool commands (agent/cancel.h).
bool InterruptPending();
// Records a signal as if the handler saw it (the task phase forwards signalfd reads here).
void RecordInterrupt(int signo);

// Blocks SIGINT and SIGTERM for its lifetime and exposes them as a non-blocking signalfd.
class BlockedSignals {
 public:
  static Result<BlockedSignals> Create();
  BlockedSignals(BlockedSignals&&) noexcept;
  BlockedSignals& operator=(BlockedSignals&&) = delete;
  BlockedSignals(const BlockedSignals&) = delete;
  ~BlockedSignals();
  int fd() const { return fd_.get(); }
  // The next pending signal number, or 0 when none is pending.
  int Read();

 private:
  BlockedSignals(UniqueFd fd, sigset_t old_mask) : fd_(std::move(fd)), old_mask_(old_mask) {}
  UniqueFd fd_;
  sigset_t old_mask_;
  bool active_ = true;
};

}  // namespace forkbox::parent
