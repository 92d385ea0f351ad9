// Process hardening and interrupt handling for the parent.
//
// Two regimes:
//  - Outside the task phase SIGINT/SIGTERM/SIGHUP go to a handler. In kFlag mode (the whole
//    session, one-shot and interactive) it only records the signal; a model call in flight, a
//    retry wait and the parent's own bash command poll it (InterruptPending) and stop, and the
//    session ends the turn as interrupted (one-shot: through its result, with 128 + the signal).
//    In kExit mode it dies of the signal after killing every child (DieOfSignal): for what cannot
//    poll the flag, the start-up before the session (sandbox set-up, waiting for the spawner) and
//    the one-shot result's write (a full pipe blocks). A PID namespace's init (the sandboxed
//    launcher) gets only the signals it handles, so a handler is in place from the start.
//  - During a task batch the signals are blocked and read from a signalfd in the event loop.
// Both take a signal sent to forkbox's whole process group once, though the launcher gets it
// directly and again through its waiter (sandbox::PassedOnByWaiter).
// A session a signal ended ends by that signal, after its clean-up and its output: forkbox's pid
// dies of it, as a shell expects of a child it stopped (bash goes on with a loop whose command
// exited 130 on Ctrl-C: it takes that the command handled the signal). The shell still says
// 128 + the signal ($?).
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <termios.h>

#include <cstdint>
#include <vector>

#include "agent/cancel.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::parent {

// Non-dumpable (no ptrace/core of the parent's memory, which holds the API key), SIGPIPE and
// SIGXFSZ ignored (a failed write is an error to report, not a death), a child subreaper (orphans
// of our tools are re-parented to us, not to init).
Status HardenProcess();

// SIGINT (Ctrl-C), SIGTERM, SIGHUP (the terminal closed) and SIGQUIT (Ctrl-\) all stop the session
// (agent::kStopSignals): running work is killed, every process forkbox started is killed, and it
// dies of the signal (128 + the signal number as a shell reports it). One that forkbox's caller
// left ignored (nohup's SIGHUP, a background job's SIGINT) stays ignored (SignalIgnored).
inline constexpr const int (&kInterruptSignals)[4] = agent::kStopSignals;
// "Ctrl-C", "SIGTERM", "SIGHUP", "SIGQUIT" (and for SIGPIPE "a failed write to stdout", or stderr).
const char* SignalName(int signo);

// sandbox::KillAllDescendants (the one kill of a process tree: every descendant, re-parented
// orphans included, reaped), and a line on stderr when some may still run (then false: still
// there after every round, or /proc unreadable). Async-signal-safe: the exit-mode handler calls it;
// the session calls it once more when it ends. (After one of its own tool commands the parent calls
// sandbox::KillOrphans, which keeps the standby children.)
bool KillAndReapAllChildren();

// Ends this process by `signo` (one of kInterruptSignals): in the sandboxed launcher, an exit with
// 128 + signo that its waiter, forkbox's pid, takes as a death by the signal
// (sandbox::TellWaiterTheSessionEndsBy: a namespace init cannot die of a signal it sends itself);
// elsewhere DieOfSignalRaw. Async-signal-safe.
[[noreturn]] void DieOfSignal(int signo);
// The session ends because of `signo`: returns the exit code that says it (128 + signo) and, for
// kInterruptSignals, records the fact, so that ExitIfEndedBySignal dies of the signal
// instead of exiting with that code.
int EndBySignal(int signo);
// Dies of the signal EndBySignal recorded (DieOfSignal) when `code` is the one it returned: the
// session's last step, once its output is written and its children are gone. Returns otherwise
// (another code won: a failed write of the result, a SIGKILL of forkbox's pid).
void ExitIfEndedBySignal(int code);

// Ctrl-Z (SIGTSTP; SIGTTIN and SIGTTOU, a background job at the terminal) stops the whole session,
// every tool and task with it (each leads a process group of its own, which the terminal's signal
// does not reach), and SIGCONT continues them all. For a session without a launcher
// (--sandbox=off); a sandboxed one's waiter does it (sandbox::EnterLauncher). One its caller left
// ignored stays ignored.
Status InstallJobControlHandler();

// How many job stops of the session ended so far (Ctrl-Z, then the shell's `fg`). The shell had
// the terminal meanwhile, in its own mode: the interactive prompt and the progress block each
// compare the count with the one they last saw, and put their mode back or draw themselves anew
// below what the shell printed. Sandboxed, the waiter counts them (sandbox::JobStopsEnded) and
// then sends SIGCONT; with --sandbox=off, the job-control handler counts them.
uint32_t JobStopsEnded();
// The terminal as the interactive prompt leaves it while the session works: `in_fd` quiet (no
// echo, no kernel line editing: `quiet`), bracketed paste on through `out_fd` (`paste`). A job
// stop hands the terminal to the shell, which leaves it in its own mode: each continue (the
// SIGCONT handler, InstallContinueHandler) puts this back at once, so keys typed while the session
// still works are neither echoed into its output nor a paste split into lines. Cleared while the
// prompt reads: libedit has its own mode then, and the prompt redraws itself (JobStopsEnded).
void SetIdleTerminal(int in_fd, int out_fd, const termios& quiet, bool paste);
void ClearIdleTerminal();
// A SIGCONT handler (SA_RESTART) for the interactive prompt: it puts the idle terminal back
// (SetIdleTerminal), and makes the prompt's wait return EINTR once a stop ended (a PID
// namespace's init gets SIGCONT only with a handler).
Status InstallContinueHandler();

enum class InterruptMode { kExit, kFlag };
Status InstallInterruptHandler(InterruptMode mode);
void SetInterruptMode(InterruptMode mode);
// The recorded signal (0: none), cleared by the call.
int TakeInterrupt();
// Whether a signal is recorded, without clearing it: the cancel check of model calls and of the
// parent's own tool commands (agent/cancel.h).
bool InterruptPending();
// Records a signal as if the handler saw it.
void RecordInterrupt(int signo);

// A write of the session's output to stdout (the answer, the events) failed with `err`: the
// session stops as if interrupted (a pending SIGPIPE, which every cancel check sees and a task
// batch takes) and ends with kExitBrokenPipe for EPIPE, else kExitFailure. The first one is kept.
void RecordStdoutFailure(int err);
// The same for a write to stderr (progress, narration, notes) that failed with EPIPE: its reader
// is gone (`forkbox ... 2>&1 | head`), which ends any CLI by SIGPIPE; the run would otherwise go
// on calling the model for nobody. Another error on stderr changes nothing.
void RecordStderrFailure(int err);
// The first failed write that stops the session: its errno (0: none) and its stream.
struct OutputFailure {
  int err = 0;
  const char* stream = "stdout";
};
OutputFailure FirstOutputFailure();

// Blocks SIGINT and SIGTERM for its lifetime and exposes them as a non-blocking signalfd.
class BlockedSignals {
 public:
  static Result<BlockedSignals> Create();
  BlockedSignals(BlockedSignals&&) noexcept;
  BlockedSignals& operator=(BlockedSignals&&) = delete;
  BlockedSignals(const BlockedSignals&) = delete;
  ~BlockedSignals();
  int fd() const { return fd_.get(); }
  // The next pending signal number, or 0 when none is pending. A copy of one signal that came
  // twice (directly and through the waiter: a signal to the process group) is read once.
  int Read();

 private:
  BlockedSignals(UniqueFd fd, sigset_t old_mask) : fd_(std::move(fd)), old_mask_(old_mask) {}
  UniqueFd fd_;
  sigset_t old_mask_;
  bool active_ = true;
};

}  // namespace forkbox::parent
