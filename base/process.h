// A child-process handle that owns its pid and pidfd, and kills and reaps in its destructor, so no
// code path can leave a zombie or an orphan behind.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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
  // Gives the process up without killing or reaping it and returns its pidfd: for a spawner
  // whose child (clone CLONE_PARENT) is another process's to wait for.
  UniqueFd Release();

 private:
  void KillAndReap();
  Result<std::optional<int>> Reap(bool block);
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  bool own_group_ = false;
  bool reaped_ = false;
  int status_ = 0;
};

// One step the forked child runs between the fd set-up and execve, in list order. It must only
// make async-signal-safe calls (no allocation, no locks): the caller may be multithreaded, and a
// step may run in a child of clone() with namespace flags. Returns 0 or an errno value; on
// failure it may point *what at a more precise name of the failing call than `name`.
struct SpawnStep {
  SpawnStep() = default;
  SpawnStep(const char* step_name, std::function<int(const char** what)> step_run,
            std::function<void(pid_t command)> step_keep = {})
      : name(step_name), run(std::move(step_run)), keep(std::move(step_keep)) {}

  const char* name = "";
  std::function<int(const char** what)> run;
  // A keeper step (a namespace init that waits for the command): once `run` succeeded, the
  // process stays behind and calls keep(pid), which never returns, while a child that borrows its
  // memory until execve (CloneProcess, share_memory) runs the later steps, the chdir and the
  // exec; their failures still reach Spawn's caller. keep may run only once that child exec'ed or
  // died. The spawned process then never execs, so Spawn copies the caller's memory for it.
  std::function<void(pid_t command)> keep;
};

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the path to exec (execve, no PATH search, no shell).
  std::vector<std::string> env;   // "NAME=value" entries; the complete environment.
  std::string cwd;                // Empty: inherit. Entered after the steps (a step may remount).
  // Descriptors to place in the child: {source fd in the caller, target fd number in the child}.
  // Everything else above 2 that is not a target is closed (close_range) before the steps.
  std::vector<std::pair<int, int>> fds;
  // Descriptors the steps need (e.g. a Landlock ruleset): kept open, close-on-exec, above every
  // target; in the child *p is updated to the descriptor's new number before the steps run (when
  // the child shares the caller's memory, the caller's *p is that number after Spawn returns).
  std::vector<int*> carry_fds;
  bool new_session = false;  // setsid(): the child leads its own session and process group.
  // Extra clone(2) flags, e.g. CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID: the child starts in
  // fresh namespaces. 0 or CLONE_PARENT (and no keeper step): the child shares the caller's
  // memory until execve
  // (CLONE_VM | CLONE_VFORK on a stack of its own, like posix_spawn): no page tables of a large
  // caller are copied, and the calling thread waits until execve (it would wait for the error
  // pipe anyway).
  unsigned long clone_flags = 0;
  std::vector<SpawnStep> steps;
  // Runs in the caller right after the clone, while the child runs its steps (so never with
  // shared memory), before Spawn waits for the execve: work a step waits for (a sandbox's ruleset
  // filled while the namespaces are set up). Gets the child's pid. A failure is returned; the
  // child is killed and reaped.
  std::function<Status(pid_t child)> while_starting;
};

// AddressSanitizer cannot follow a child running on a stack of its own in the parent's memory (its
// no-return hook unpoisons the parent's stack bounds), so sanitizer builds copy the memory.
#if defined(FORKBOX_SANITIZE)
inline constexpr bool kCloneCanShareMemory = false;
#else
inline constexpr bool kCloneCanShareMemory = true;
#endif

// The one clone of a new process: it runs fn(arg), which never returns (execve or _exit), with
// the extra clone(2) `flags` (namespaces, CLONE_PARENT), SIGCHLD, and a pidfd in *pidfd.
// share_memory (and kCloneCanShareMemory): the child borrows the caller's memory on a stack of its
// own (CLONE_VM | CLONE_VFORK, posix_spawn's way), so no page table of a large caller is copied or
// write-protected, and the calling thread is suspended until the child execs or exits. Its writes,
// errno included, land in the caller's memory, so fn makes only raw, async-signal-safe calls
// (which it must anyway: the caller may be multithreaded), and the caller blocks signals around
// the call (no handler may run on the child's stack). Otherwise the memory is copied and the
// caller does not wait. Returns the pid or -1 with errno.
long CloneProcess(int (*fn)(void*), void* arg, unsigned long flags, bool share_memory, int* pidfd);

// clone + execve: the one fork+exec path. The child starts with default signal dispositions and
// an empty signal mask at exec (a parent's ignored SIGPIPE must not leak into tools), and applies,
// in order: setsid, the fd mapping, the steps, chdir, execve. Bad options (empty argv, NUL bytes,
// env entries without '=', closed source fds, a target mapped twice) fail before cloning. Step,
// chdir and exec failures come back through one CLOEXEC error pipe, so the caller gets a real
// Status naming the failing step instead of a mysterious exit code 127. The pidfd comes from
// clone(CLONE_PIDFD) and is owned by the returned ChildProcess.
Result<ChildProcess> Spawn(const SpawnOptions& options);

// A child from StartSpawn whose steps and execve may still be under way. It owns what the child
// reads (a copy of the options); destroyed unfinished, it kills and reaps the child first.
class PendingChild {
 public:
  PendingChild(PendingChild&&) noexcept;
  PendingChild& operator=(PendingChild&&) noexcept;
  ~PendingChild();

  // Waits until the child has exec'ed and returns it, as Spawn would; or its failure (a Status
  // naming the step, the child reaped). Once: the handle is empty afterwards.
  Result<ChildProcess> Finish();
  bool pending() const { return state_ != nullptr; }

 private:
  friend Result<PendingChild> StartSpawn(SpawnOptions options);
  struct State;
  explicit PendingChild(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Spawn for a caller with other work to do while the child starts: returns once it is cloned.
// With kCloneCanShareMemory the child borrows this process's memory on a stack of its own
// (CLONE_VM without CLONE_VFORK) and runs alongside the caller until its execve, so until
// Finish() this process must not unshare(CLONE_NEWUSER) (EINVAL: its memory is shared). The
// child's steps must not write the caller's memory. It also shares the calling thread's
// thread-local storage: on its way to execve it makes no call that can fail, so only a failing
// spawn sets that thread's errno. Options as Spawn's, without carry_fds, keeper steps,
// while_starting and clone flags (InvalidArgument): each needs the caller to wait, or a copy.
Result<PendingChild> StartSpawn(SpawnOptions options);

// Maps a raw wait status to a shell-style exit code: the exit status, or 128+N for signal N.
int ExitCodeFromWaitStatus(int wait_status);
// "exited with code 3" / "killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int wait_status);

// Dies of `sig` as its default action would have it, so that whoever waits for this process sees
// the death and not an exit code: the disposition is reset and `sig` unblocked first, and no core
// is written (RLIMIT_CORE 0; a wrapper relaying a command's SIGSEGV dumps none of its own memory).
// A signal whose default action does not end a process (or a PID namespace's init, which the
// kernel does not let die of its own signal) exits with 128 + sig instead. Async-signal-safe.
[[noreturn]] void DieOfSignalRaw(int sig);
// Stops this process as the default action of `sig` (SIGTSTP, SIGTTIN, SIGTTOU: job control)
// would, though the caller blocks `sig` or handles it; returns once continued, `sig` blocked again
// and left at its default action. The kernel discards it in an orphaned process group, as it does
// the terminal's. Async-signal-safe.
void StopAsDefaultRaw(int sig);
// Whether `sig` is ignored (SIG_IGN) in this process: as nohup leaves SIGHUP, and a shell SIGINT
// and SIGQUIT for a background job. forkbox keeps such a signal ignored: it neither handles it nor
// takes it through a signalfd (a blocked signal is queued even when ignored). Async-signal-safe.
bool SignalIgnored(int sig);
// Ends this process as `wait_status` says a process ended: its exit code, or DieOfSignalRaw of
// its signal. Async-signal-safe.
[[noreturn]] void EndAsRaw(int wait_status);

}  // namespace forkbox
