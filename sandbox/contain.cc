#include "sandbox/contain.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <string_view>

#include "base/fd_passing.h"
#include "base/file.h"
#include "base/path.h"
#include "sandbox/caps.h"
#include "sandbox/cgroup.h"
#include "sandbox/git_surface.h"
#include "sandbox/guard_journal.h"
#include "sandbox/hygiene.h"
#include "sandbox/landlock.h"
#include "sandbox/seccomp_policy.h"

namespace forkbox::sandbox {
namespace {

constexpr unsigned long kNamespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID;
// Writable for layer-1 tools and shared with the host (AddFreshRulesRaw).
constexpr char kLayer1SharedWritable[] = "/dev/shm";

// Descriptors a keeper or init keeps besides stderr to undo what its command left for a dead
// spawner (ContainPlan::orphaned): the temp dir's, the journal's, a git guard's one per writable
// tree; and the command's cgroup lock; each -1 when none. One more slot for
// CloseAboveStderrExcept's `also`.
struct KeptFds {
  static constexpr size_t kSlots = 6 + kMaxWritablePaths;
  int fds[kSlots];
  KeptFds() { std::fill(std::begin(fds), std::end(fds), -1); }
};

KeptFds KeptFdsOf(const ContainPlan& p) {
  KeptFds kept;
  if (p.orphaned.tmp != nullptr) {
    kept.fds[0] = p.orphaned.tmp->descriptors()[0];
    kept.fds[1] = p.orphaned.tmp->descriptors()[1];
    kept.fds[2] = p.orphaned.tmp->descriptors()[2];
  }
  if (p.orphaned.journal != nullptr) kept.fds[3] = p.orphaned.journal->descriptor();
  kept.fds[4] = p.cgroup_lock_fd;  // Until it has ended the command (PidsCgroup::EndLeftovers).
  const GitSurfaceGuard* git = p.orphaned.git;
  for (size_t i = 0; git != nullptr && i < git->descriptors() && 5 + i < KeptFds::kSlots - 1; ++i) {
    kept.fds[5 + i] = git->descriptor(i);
  }
  return kept;
}

// Closes every descriptor from 3 on but those in `kept` and `also` (-1: none).
void CloseAboveStderrExceptRaw(const KeptFds& kept, int also = -1) {
  int keep[KeptFds::kSlots];
  std::copy(std::begin(kept.fds), std::end(kept.fds), std::begin(keep));
  keep[KeptFds::kSlots - 1] = also;
  std::sort(std::begin(keep), std::end(keep));
  unsigned from = 3;
  for (const int fd : keep) {
    if (fd < 3 || static_cast<unsigned>(fd) < from) continue;
    const unsigned k = static_cast<unsigned>(fd);
    if (k > from) syscall(SYS_close_range, from, k - 1, 0U);
    from = k + 1;
  }
  syscall(SYS_close_range, from, ~0U, 0U);
}

// Which of fds 0-2 a keeper keeps.
enum class KeptStdio { kNone, kStderr, kStdoutAndStderr };

// Every keeper runs under no_new_privs and the base seccomp filter before it waits on anything.
// It keeps no descriptor but `stdio`'s and `kept`; `confined_fd` (>= 3, or -1) gets one byte
// once it is confined, and is closed (the caller blocks SIGPIPE: RunWaiter).
void ConfineKeeperRaw(std::span<const sock_filter> filter, KeptStdio stdio, int confined_fd = -1,
                      const KeptFds& kept = {}) {
  const unsigned last_closed = stdio == KeptStdio::kNone     ? 2U
                               : stdio == KeptStdio::kStderr ? 1U
                                                             : 0U;
  syscall(SYS_close_range, 0U, last_closed, 0U);
  CloseAboveStderrExceptRaw(kept, confined_fd);
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) _exit(127);
  const char* step = "";
  DropAllCapabilitiesRaw(&step);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(127);
  if (!filter.empty() && seccomp::InstallRaw(filter, false) != 0) _exit(127);
  if (confined_fd < 3) return;
  const char done = 1;
  if (write(confined_fd, &done, 1) < 0 && errno == EPIPE) {
    // The launcher failed and exited first. The SIGPIPE of this write is our own, not one sent
    // to forkbox: taken here (a waiter blocks every signal), it is not relayed as forkbox's
    // death by SIGPIPE in place of the launcher's exit code.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    const timespec now{0, 0};
    (void)sigtimedwait(&pipe, nullptr, &now);
  }
  close(confined_fd);
}

void WriteStderrRaw(const char* a, const char* b, const char* c) {
  for (const char* s : {a, b, c}) {
    ssize_t ignored = write(2, s, strlen(s));
    (void)ignored;
  }
}

// Once nothing of the command is left: removes the trust-surface paths that did not exist before
// it ran (a planted .git/commondir redirects the user's next git command outside the sandbox; a
// .claude/settings.json's hooks run at the next `claude`) and says so on the command's stderr.
// The init is single-threaded: RemoveTreeAt's allocations are safe here.
void RemovePlantedRaw(const MountPlan& mounts) {
  for (const std::string& path : mounts.absent) {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    const size_t slash = path.rfind('/');  // Absolute: a workdir of / gives "/.claude".
    const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
    const UniqueFd parent(open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    const int err = parent ? RemoveTreeAt(parent.get(), path.c_str() + slash + 1) : errno;
    WriteStderrRaw("forkbox: ", path.c_str(),
                   err == 0 ? ": created by the command and removed (git or an agent would trust "
                              "it)\n"
                            : ": created by the command and could NOT be removed; delete it "
                              "before running git or an agent\n");
  }
}

// `forkbox sandbox`'s spawner died before it could undo what its command left: once nothing of
// the command is left, its keeper or init puts back git's trust surface and removes the temp dir,
// from its own copy of the spawner's memory (a single-threaded process's: malloc is safe here),
// and says what it put back on the command's stderr.
void UndoForDeadSpawner(const ContainPlan& p) {
  if (p.orphaned.git != nullptr) {
    try {
      for (const std::string& line : p.orphaned.git->Restore(GitSurfaceGuard::After::kDone)) {
        WriteStderrRaw("forkbox sandbox: git trust surface changed by the command: ", line.c_str(),
                       "\n");
      }
    } catch (const std::exception& e) {
      WriteStderrRaw("forkbox sandbox: git trust surface NOT restored after forkbox's death: ",
                     e.what(), "\n");
    }
  }
  if (p.orphaned.journal != nullptr) p.orphaned.journal->Clear();  // Nothing left to put back.
  if (p.orphaned.tmp != nullptr) p.orphaned.tmp->Remove();
}

// A tool's namespace init cloned into its namespaces is pid 1 of the new PID namespace, so it can
// mount that namespace's /proc itself: it sets up the mounts and confines itself (capabilities,
// no_new_privs, the base filter) before the command is cloned, which inherits all of it. One set-up
// and one base-filter install per command instead of one in each process.
bool InitSetsUp(const ContainPlan& p) {
  return p.layer2 && p.keeper == Keeper::kInit && !p.unshare;
}

// Filters the command inherits from its init or layer-1 keeper: the first, unless it is the
// broker's (its listener must be the command's own).
size_t InheritedFilters(const ContainPlan& p) {
  const bool first_is_listener = p.broker_socket >= 0 && p.filters.size() == 1;
  const bool keeper_confined = InitSetsUp(p) || p.layer1_keeper;
  return keeper_confined && !p.filters.empty() && !first_is_listener ? 1 : 0;
}

// What a tool's namespace init gets when the process that spawned it dies (PDEATHSIG): not SIGKILL,
// so that it can still remove what the command planted (a SIGKILL of `forkbox sandbox`). A signal
// nobody sends a command's group. The init keeps it blocked and takes it in RunInit.
int InitDeathSignal() { return SIGRTMAX; }

// For `forkbox sandbox` (Sandbox::AfterCommand::status): how the command ended, beyond the exit
// code its init or keeper gives it.
void RecordCommandStatusRaw(const ContainPlan& p, int status) {
  if (p.orphaned.status != nullptr) p.orphaned.status->RecordRaw(status);
}

// PID-namespace init of a tool command: reaps everything and exits with the command's status.
// Signals without a handler are not delivered to a namespace init, so the command (pid 2) gets
// the caller's process-group signals and the init ignores them. When the command is gone, or the
// spawning process died (InitDeathSignal), every process in the namespace is killed and reaped
// before the planted-file check. The init runs with every signal blocked (Spawn's child), so it
// takes SIGCHLD and the death signal synchronously: none is lost between two waits.
[[noreturn]] void RunInit(pid_t command, const ContainPlan& p) {
  ConfineKeeperRaw(p.filters.empty() || InheritedFilters(p) > 0 ? std::span<const sock_filter>()
                                                                : p.filters.front(),
                   KeptStdio::kStderr, /*confined_fd=*/-1, KeptFdsOf(p));
  sigset_t wake;
  sigemptyset(&wake);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, InitDeathSignal());
  // Blocked already (Spawn's child, ForkKeeperRaw); this keeps RunInit right without relying on it.
  if (sigprocmask(SIG_BLOCK, &wake, nullptr) != 0) _exit(127);
  int exit_code = 127;
  bool orphaned = false;
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, __WALL | WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;  // ECHILD: the command and everything it left are gone.
    if (pid == command) {
      exit_code = ExitCodeFromWaitStatus(status);
      RecordCommandStatusRaw(p, status);
      kill(-1, SIGKILL);
    }
    if (pid > 0) continue;
    siginfo_t info;  // Children left: wait for one to end, or for the spawner's death.
    if (sigwaitinfo(&wake, &info) == InitDeathSignal()) {
      orphaned = true;
      kill(-1, SIGKILL);
    }
  }
  RemovePlantedRaw(p.mounts);
  if (orphaned) UndoForDeadSpawner(p);
  _exit(exit_code);
}

// `forkbox sandbox`'s command in layer 1 (ContainPlan::layer1_keeper): the keeper waits for it
// and exits with its status (what it left goes on to the spawner, a subreaper too, which kills
// it). If the spawner dies first (InitDeathSignal, e.g. its SIGKILL), the keeper kills the command
// and everything below it, round after round, as orphans come to it: layer 1 has no PID
// namespace that would take them down; then it undoes what the spawner would have
// (UndoForDeadSpawner).
// Confined before the command was cloned (base filter, no capability, no_new_privs:
// BecomeLayer1KeeperRaw), so that the command's start and a short command's end wait for none of
// it; here it keeps no descriptor but stderr and those of ContainPlan::orphaned.
[[noreturn]] void RunLayer1Keeper(pid_t command, const ContainPlan& p) {
  syscall(SYS_close_range, 0U, 1U, 0U);
  CloseAboveStderrExceptRaw(KeptFdsOf(p));
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) _exit(127);
  sigset_t wake;
  sigemptyset(&wake);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, InitDeathSignal());
  if (sigprocmask(SIG_BLOCK, &wake, nullptr) != 0) _exit(127);
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, __WALL | WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid == command) {
      RecordCommandStatusRaw(p, status);
      _exit(ExitCodeFromWaitStatus(status));
    }
    if (pid > 0) continue;  // An orphan of the command that ended.
    if (pid < 0) _exit(127);
    siginfo_t info;
    if (sigwaitinfo(&wake, &info) != InitDeathSignal()) continue;
    KillDescendantsRaw({});
    UndoForDeadSpawner(p);
    _exit(128 + SIGKILL);
  }
}

int ConfineInitRaw(const ContainPlan& p, const char** step);

// The keeper step of ContainPlan::layer1_keeper: its death signal blocked (RunLayer1Keeper takes
// it), set, the spawner checked alive after that, and a subreaper, so the command's orphans come
// to it; then confined as a namespace init is (ConfineInitRaw: the command inherits the base
// filter). Leaves its own pidfd in the plan for the command.
int BecomeLayer1KeeperRaw(ContainPlan& p, const char** step) {
  sigset_t death;
  sigemptyset(&death);
  sigaddset(&death, InitDeathSignal());
  *step = "sigprocmask(the command's keeper's death signal)";
  if (sigprocmask(SIG_BLOCK, &death, nullptr) != 0) return errno;
  *step = "prctl(PR_SET_PDEATHSIG) of the command's keeper";
  if (prctl(PR_SET_PDEATHSIG, InitDeathSignal(), 0, 0, 0) != 0) return errno;
  pollfd spawner{p.spawner_pidfd, POLLIN, 0};
  *step = "the spawner already exited";
  if (poll(&spawner, 1, 0) != 0) return ESRCH;
  *step = "prctl(PR_SET_CHILD_SUBREAPER) of the command's keeper";
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return errno;
  // The command dies with its keeper (ConfineRaw's UnderKeeperRaw): it borrows this memory.
  *step = "pidfd_open(the command's keeper)";
  p.keeper_pidfd = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
  if (p.keeper_pidfd < 0) return errno;
  return ConfineInitRaw(p, step);
}

// What the launcher and its waiter share: one page, MAP_SHARED, mapped in both for their lives.
struct SharedWithWaiter {
  // The signal the launcher said the session ended by (TellWaiterTheSessionEndsBy); it sets it.
  std::atomic<int> ended_by{0};
  // How many job stops of the session ended (JobStopsEnded); the waiter counts them.
  std::atomic<uint32_t> stops_ended{0};
};
static_assert(std::atomic<int>::is_always_lock_free);  // Shared between two processes.
static_assert(std::atomic<uint32_t>::is_always_lock_free);
SharedWithWaiter* g_shared = nullptr;  // In the launcher; null elsewhere.
pid_t g_launcher_pid = 0;              // The launcher's own getpid(), set in it after the fork.

// The signal the session ended by, when the launcher said so and then exited as it said
// (128 + the signal); else 0.
int SessionEndedByRaw(const SharedWithWaiter* shared, int status) {
  if (shared == nullptr || !WIFEXITED(status)) return 0;
  const int sig = shared->ended_by.load();
  if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP && sig != SIGQUIT) return 0;
  return WEXITSTATUS(status) == 128 + sig ? sig : 0;
}

// Passes SIGINT, SIGTERM, SIGHUP or SIGQUIT on, tagged with its sequence number: a signal sent to
// the whole process group reached the launcher directly too, and the launcher pairs such a copy
// with this one (PassedOnByWaiter). The waiter is single-threaded: the counts are its own.
void SendOnRaw(pid_t launcher, int sig) {
  static uint16_t sent[NSIG];
  ++sent[sig];
  sigval value{};
  value.sival_int = kPassedOnTag | sent[sig];
  sigqueue(launcher, sig, value);
}

// What the launcher's waiter does with a signal sent to forkbox's pid. In layer 2 the launcher is
// pid 1 of its PID namespace: a signal from outside reaches it only if it has a handler (SIGINT,
// SIGTERM, SIGHUP and SIGQUIT, parent/signals.h), and never stops it but SIGSTOP. A signal that
// ends forkbox ends the launcher by SIGTERM, never SIGKILL: its teardown puts back the git trust
// surface and kills what its tools left (layer 1 has no namespace to do that).
// What forkbox ignored before the fork (its caller's nohup, a shell's background job; forkbox's own
// SIGPIPE and SIGXFSZ) it ignores: blocked here, such a signal is still queued.
// `proc`: the host's /proc, opened before the launcher's PID namespace got its own (job control
// walks the session's tree through it: the waiter is in no PID namespace whose /proc shows it).
// `shared`: the page shared with the launcher, where the end of a job stop is counted.
void PassOnRaw(pid_t launcher, int sig, int code, int proc, SharedWithWaiter* shared) {
  if (sig != SIGCONT && SignalIgnored(sig)) return;
  switch (sig) {
    case SIGURG:
    case SIGWINCH:  // Ignored by default; the terminal sends SIGWINCH to the launcher's group.
      return;
    case SIGINT:
      // The terminal's Ctrl-C went to the whole foreground group, the launcher included.
      if (code != SI_KERNEL) SendOnRaw(launcher, sig);
      return;
    case SIGTERM:
    case SIGHUP:
    case SIGQUIT:
      SendOnRaw(launcher, sig);
      return;
    case SIGCONT:
      kill(launcher, sig);
      return;
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
      // Job control: the whole session stops, the launcher first, then its tools, tasks and what
      // they started (each leads a process group of its own, which the terminal's signal does
      // not reach), then this process, so the shell sees the job stopped; all go on together.
      StopAsJobRaw(sig, proc);
      // Counted, then said: a SIGCONT that comes while one is pending is lost, the count is not
      // (the launcher's prompt redraws itself once per stop: JobStopsEnded).
      if (shared != nullptr) shared->stops_ended.fetch_add(1);
      kill(launcher, SIGCONT);
      return;
    default:
      // Any other signal ends forkbox as its default action would: the launcher's session first.
      kill(launcher, SIGTERM);
      while (waitpid(launcher, nullptr, 0) < 0 && errno == EINTR) {
      }
      DieOfSignalRaw(sig);
  }
}

// What a waiter does with the signals sent to it.
enum class Relay {
  // The agent's (a task child): SIGTERM, SIGINT, SIGHUP and SIGQUIT become SIGKILL of the agent.
  kKill,
  // The launcher's: forkbox's pid, the one its caller signals and waits for; PassOnRaw.
  kPassOn,
};

// A waiter, outside the PID namespace whose init (`init`) it started. Signals are taken
// synchronously (sigwaitinfo, no handler and no global): a namespace init gets from outside only
// the signals it handles, and SIGKILL. Exits as the init did.
// `confined_fd`: as ConfineKeeperRaw takes it. `on_killed`: as EnterLauncher takes it. `shared`:
// the page shared with the launcher (g_shared), whose session may end by a signal; null for an
// agent. `proc`: as PassOnRaw takes it, kept; -1 for an agent.
[[noreturn]] void RunWaiter(pid_t init, std::span<const sock_filter> filter, Relay relay,
                            int confined_fd = -1, const LauncherKilled& on_killed = {},
                            SharedWithWaiter* shared = nullptr, int proc = -1) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&set, sig);
  if (relay == Relay::kPassOn) sigfillset(&set);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  KeptFds kept;
  kept.fds[0] = proc;
  ConfineKeeperRaw(filter, on_killed ? KeptStdio::kStdoutAndStderr : KeptStdio::kNone, confined_fd,
                   kept);
  for (;;) {
    int status = 0;
    // Every child: the launcher's waiter may have the layer-2 probe's (ReleaseLayer2ProbeChild).
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == init) {
      // What the init left running came to us (a subreaper; in layer 1 a SIGKILL of the launcher
      // alone leaves its tools' daemons): it dies before the death is relayed.
      (void)KillDescendantsRaw({});
      // A fork of a single-threaded process: on_killed may allocate.
      if (WIFSIGNALED(status) && on_killed) on_killed(init, WTERMSIG(status));
      if (const int sig = SessionEndedByRaw(shared, status); sig != 0) DieOfSignalRaw(sig);
      EndAsRaw(status);  // As the init ended: the real cause is seen above.
    }
    if (pid > 0) continue;
    if (pid < 0 && errno != EINTR) _exit(127);
    siginfo_t info;
    if (sigwaitinfo(&set, &info) <= 0 || info.si_signo == SIGCHLD) continue;
    if (relay == Relay::kKill) {
      kill(init, SIGKILL);
    } else {
      PassOnRaw(init, info.si_signo, info.si_code, proc, shared);
    }
  }
}

// The launcher's namespaces: PID and mount, and a user namespace unless root may make the first
// two without one (then the spawner keeps root's rights in the initial one, as without them).
int UnshareLauncherRaw(const MountPlan& maps, const char** step) {
  if (geteuid() == 0) {
    *step = "unshare(CLONE_NEWNS|CLONE_NEWPID)";
    if (unshare(CLONE_NEWNS | CLONE_NEWPID) == 0) return 0;
    if (errno != EPERM) return errno;  // EPERM: no CAP_SYS_ADMIN here; a user namespace gives it.
  }
  *step = "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)";
  if (unshare(static_cast<int>(kNamespaces)) != 0) return errno;
  return WriteIdMapsRaw(maps, step);
}

// In the launcher, pid 1 now: its mount namespace gets the /proc of its PID namespace, which
// everything it starts inherits (and which its pid numbers, /proc/self, mean).
int MountLauncherProcRaw(const char** step) {
  *step = "mount(/, MS_REC|MS_PRIVATE) in the launcher";
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  *step = "mount proc /proc in the launcher";
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) return errno;
  return 0;
}

// The mounts and, as root, the PID namespace's cap: needs the namespace's capabilities.
int SetUpNamespaceRaw(const ContainPlan& p, const char** step) {
  if (int err = SetUpMountsRaw(p.mounts, step)) return err;
  return p.pid_max > 0 ? LimitPidNamespaceRaw(p.pid_max, step) : 0;
}

// What InitSetsUp's init does before the command is cloned; ConfineRaw's later drop and
// no_new_privs in the command are then no-ops, and RestrictRaw skips the inherited filter.
int ConfineInitRaw(const ContainPlan& p, const char** step) {
  if (int err = DropAllCapabilitiesRaw(step)) return err;
  *step = "prctl(PR_SET_NO_NEW_PRIVS) of the namespace init";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (InheritedFilters(p) == 0) return 0;
  *step = "seccomp(SET_MODE_FILTER) of the namespace init";
  return seccomp::InstallRaw(p.filters.front(), p.all_threads);
}

// In the process that goes on below a keeper: `death_signal` comes when the keeper dies, which
// must still be there.
int UnderKeeperRaw(int keeper, const char** step, int death_signal = SIGKILL) {
  *step = "prctl(PR_SET_PDEATHSIG) under the namespace keeper";
  if (prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0) != 0) return errno;
  pollfd pfd{keeper, POLLIN, 0};
  *step = "namespace keeper already exited";
  if (poll(&pfd, 1, 0) != 0) return ESRCH;
  close(keeper);
  return 0;
}

// Layer 2: fresh user, mount and PID namespaces; the calling process stays behind as the keeper
// and the child, in the new PID namespace, goes on (returning 0). Both keepers and inits die with
// their parent. The mounts are the caller's next step, except for a tool's init (InitSetsUp).
// A tool's init (kInit) does not fork here: it returns, and Spawn's keeper step clones the command
// (AddContainStep), which calls UnderKeeperRaw with the pidfd left in the plan.
int ForkKeeperRaw(ContainPlan& p, const char** step) {
  if (p.spawner_pidfd >= 0) {
    // A tool's init takes its death signal in RunInit: blocked from now on.
    const bool init = p.keeper == Keeper::kInit;
    sigset_t death;
    sigemptyset(&death);
    sigaddset(&death, InitDeathSignal());
    *step = "sigprocmask(the namespace init's death signal)";
    if (init && sigprocmask(SIG_BLOCK, &death, nullptr) != 0) return errno;
    *step = "prctl(PR_SET_PDEATHSIG) of the namespace init";
    if (prctl(PR_SET_PDEATHSIG, init ? InitDeathSignal() : SIGKILL, 0, 0, 0) != 0) return errno;
    pollfd spawner{p.spawner_pidfd, POLLIN, 0};
    *step = "the spawner already exited";
    if (poll(&spawner, 1, 0) != 0) return ESRCH;
  }
  *step = "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)";
  if (p.unshare && unshare(static_cast<int>(kNamespaces)) != 0) return errno;
  if (int err = WriteIdMapsRaw(p.mounts, step)) return err;
  if (InitSetsUp(p)) {
    if (int err = SetUpNamespaceRaw(p, step)) return err;
    if (int err = ConfineInitRaw(p, step)) return err;
  }
  *step = "pidfd_open(namespace keeper)";
  int keeper = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
  if (keeper < 0) return errno;
  if (p.keeper == Keeper::kInit) {
    p.keeper_pidfd = keeper;
    return 0;
  }
  std::span<const sock_filter> filter =
      p.filters.empty() ? std::span<const sock_filter>() : p.filters.front();
  // The agent is a normal (possibly later multithreaded) process: glibc's fork keeps its thread
  // state right.
  *step = "fork (namespace keeper)";
  pid_t pid = fork();
  if (pid < 0) return errno;
  if (pid > 0) RunWaiter(pid, filter, Relay::kKill);
  return UnderKeeperRaw(keeper, step);
}

int EnterNamespacesRaw(ContainPlan& p, const char** step) {
  if (p.keeper == Keeper::kNone) {
    *step = "unshare(CLONE_NEWUSER|CLONE_NEWNS)";
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return errno;
    if (int err = WriteIdMapsRaw(p.mounts, step)) return err;
    return SetUpMountsRaw(p.mounts, step);
  }
  if (!p.entered) {
    if (int err = ForkKeeperRaw(p, step)) return err;
  }
  return InitSetsUp(p) ? 0 : SetUpNamespaceRaw(p, step);
}

// Installs the brokered tool filter and hands its listener to the spawning process; the tool
// keeps no copy (it could otherwise answer its own notifications).
int SendListenerRaw(std::span<const sock_filter> filter, int broker_socket) {
  int listener = -1;
  if (int err = seccomp::InstallWithListenerRaw(filter, &listener)) return err;
  const char data = 'L';
  int err = SendWithFdsRaw(broker_socket, &data, 1, &listener, 1);
  close(listener);
  close(broker_socket);
  return err;
}

// The rules for what the mount namespace in force has fresh: async-signal-safe.
// `handled`: the ruleset's filesystem rights (without the read rights: no read rule).
int AddFreshRulesRaw(int ruleset_fd, uint64_t handled, bool private_tmp, const char** step) {
  if (private_tmp) {
    // The private tmpfs of /tmp and /dev/shm (either may be absent on a minimal system).
    for (const char* tmp : {"/tmp", "/dev/shm"}) {
      *step = "landlock_add_rule(private tmpfs)";
      int err = landlock::AddWritablePathRaw(ruleset_fd, handled, tmp);
      if (err != 0 && err != ENOENT) return err;
    }
    // Fresh mounts the read scope built before them cannot know: the PID namespace's /proc and
    // the emptied /run (only what is bound back there, e.g. resolv.conf).
    for (const char* fresh : {"/proc", "/run"}) {
      if ((handled & landlock::kReadRights) == 0) break;
      *step = "landlock_add_rule(fresh mount, read)";
      int err = landlock::AddReadPathRaw(ruleset_fd, fresh);
      if (err != 0 && err != ENOENT) return err;
    }
    return 0;
  }
  // Layer 1: POSIX semaphores and shared memory (multiprocessing's SemLock) live only in
  // /dev/shm, so it is writable, shared with the user's other processes (a container's own).
  *step = "landlock_add_rule(/dev/shm, layer 1)";
  int err = landlock::AddWritablePathRaw(ruleset_fd, handled, kLayer1SharedWritable);
  return err == ENOENT ? 0 : err;
}

constexpr uint64_t kRulesetFilled = 1;
constexpr uint64_t kRulesetFailed = 2;

// Waits for FillPendingRuleset in the spawner: only a filled ruleset is ever enforced. The
// spawner's pidfd is watched too: a spawner killed before its write (SIGKILL, the OOM killer)
// would otherwise leave this read, and the init in its vfork wait for this exec, blocked forever.
int AwaitRulesetRaw(int ready_fd, int spawner_pidfd, const char** step) {
  *step = "waiting for the spawner to fill the tool's Landlock ruleset";
  pollfd watched[2] = {{ready_fd, POLLIN, 0}, {spawner_pidfd, POLLIN, 0}};
  const nfds_t count = spawner_pidfd >= 0 ? 2 : 1;
  for (;;) {
    if (poll(watched, count, -1) < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (watched[0].revents != 0) break;  // Said, even if the spawner has exited since.
    if (count == 2 && watched[1].revents != 0) {
      *step = "the spawner exited before it filled the tool's Landlock ruleset";
      return ESRCH;
    }
  }
  uint64_t value = 0;
  ssize_t n = -1;
  do {
    n = read(ready_fd, &value, sizeof value);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  close(ready_fd);
  return n == sizeof value && value == kRulesetFilled ? 0 : ECANCELED;
}

int RestrictRaw(const ContainPlan& p, const char** step) {
  if (p.ruleset_ready_fd >= 0) {
    if (int err = AwaitRulesetRaw(p.ruleset_ready_fd, p.spawner_pidfd, step)) return err;
    // The caller may have moved us off its CPU before the fill it has now told us of
    // (FillOffCallerCpu): the command runs on every CPU the caller may.
    *step = "sched_setaffinity(the caller's CPUs)";
    if (p.restore_cpus && sched_setaffinity(0, sizeof p.caller_cpus, &p.caller_cpus) != 0) {
      return errno;
    }
  }
  if (p.add_fresh_rules) {
    if (int err =
            AddFreshRulesRaw(p.ruleset_fd, landlock::FsRightsForAbi(p.abi), p.private_tmp, step)) {
      return err;
    }
  }
  *step = "landlock_restrict_self";
  if (int err = landlock::RestrictSelfRaw(p.ruleset_fd)) return err;
  for (size_t i = InheritedFilters(p); i < p.filters.size(); ++i) {
    *step = "seccomp(SET_MODE_FILTER)";
    if (p.broker_socket >= 0 && i + 1 == p.filters.size()) {
      *step = "seccomp(SET_MODE_FILTER, NEW_LISTENER) for the unix connect broker";
      if (int err = SendListenerRaw(p.filters[i], p.broker_socket)) return err;
    } else if (int err = seccomp::InstallRaw(p.filters[i], p.all_threads)) {
      return err;
    }
  }
  return 0;
}

Limits LimitsOf(const Settings& policy) {
  return Limits{policy.rlimit_fsize_bytes, policy.rlimit_as_bytes, policy.rlimit_nofile,
                policy.rlimit_nproc};
}

// LimitsOf for forkbox's own processes (the agents, the launcher): in sanitizer builds without
// RLIMIT_AS, since ASan's shadow memory alone exceeds any sane one. Tools keep theirs.
Limits OwnLimitsOf(const Settings& policy) {
  Limits limits = LimitsOf(policy);
#if defined(FORKBOX_SANITIZE)
  limits.as_bytes = 0;
#endif
  return limits;
}

Status AddFilter(seccomp::Program program, ContainPlan& p) {
  Result<std::span<const sock_filter>> compiled = seccomp::Compiled(program);
  if (!compiled.ok()) return compiled.status();
  p.filters.push_back(*compiled);
  return Status::Ok();
}

// The trees a ruleset lets write: WritableTrees, or for a read-only policy the temp dir alone (a
// rule of its own even inside the workdir: opened by path, where a planted link fails the
// ruleset; no mount is made for it).
std::vector<std::string> RulesetWritable(const Policy& policy) {
  if (!policy.read_only) return WritableTrees(policy);
  if (policy.tmpdir.empty()) return {};
  return {policy.tmpdir};
}

landlock::RulesetSpec SpecOf(const Policy& policy, landlock::Mode mode, const ContainPlan& p,
                             const std::vector<std::string>& own_writable = {},
                             bool scope_signals = true, bool read_scope_inherited = false) {
  landlock::RulesetSpec spec;
  spec.read_scope_inherited = read_scope_inherited;
  spec.abi = p.abi;
  spec.mode = mode;
  spec.writable = RulesetWritable(policy);
  spec.write_only = own_writable;
  spec.scope_signals = scope_signals;
  spec.denied_reads = DeniedReadPaths(policy);
  spec.readable = policy.readable;
  spec.read_grants = policy.read_grants;
  spec.allow_net = policy.allow_net;
  spec.model_port = mode == landlock::Mode::kAgent ? policy.model_port : 0;
  return spec;
}

Status BuildRuleset(const Policy& policy, landlock::Mode mode, ContainPlan& p,
                    const std::vector<std::string>& own_writable = {}, bool scope_signals = true,
                    bool read_scope_inherited = false) {
  Result<UniqueFd> ruleset = landlock::BuildRuleset(
      SpecOf(policy, mode, p, own_writable, scope_signals, read_scope_inherited));
  if (!ruleset.ok()) return ruleset.status();
  p.ruleset = std::move(*ruleset);
  p.ruleset_fd = p.ruleset.get();
  return Status::Ok();
}

// The tool's ruleset, empty for now: FillPendingRuleset fills it while the namespaces are set up.
Status PlanPendingRuleset(const Policy& policy, ContainPlan& p) {
  landlock::RulesetSpec spec = SpecOf(policy, landlock::Mode::kTool, p);
  Result<UniqueFd> ruleset = landlock::CreateEmptyRuleset(spec);
  if (!ruleset.ok()) return ruleset.status();
  UniqueFd ready(eventfd(0, EFD_CLOEXEC));
  if (!ready) return Status::FromErrno(errno, "eventfd(tool ruleset filled)");
  p.ruleset = std::move(*ruleset);
  p.ruleset_fd = p.ruleset.get();
  p.ruleset_ready = std::move(ready);
  p.ruleset_ready_fd = p.ruleset_ready.get();
  p.pending_rules = std::move(spec);
  return Status::Ok();
}

// True when `path` (canonical) is a hidden credential file or lies in a hidden store.
bool IsHidden(const MountPlan& plan, const std::string& path) {
  return std::any_of(plan.hidden_dirs.begin(), plan.hidden_dirs.end(),
                     [&path](const std::string& dir) { return PathWithin(path, dir); }) ||
         std::find(plan.hidden_files.begin(), plan.hidden_files.end(), path) !=
             plan.hidden_files.end();
}

// Layer 2 hides /tmp behind a private tmpfs; a --readable path below it (canonical since
// ResolvePolicy) is bound back read-only, or the flag would do nothing there. One that does not
// exist is skipped, as its Landlock rule is.
Status KeepReadableTmpPathsVisible(const Policy& policy, MountPlan& plan) {
  for (const std::string& path : policy.readable) {
    struct stat st;
    if (path.rfind("/tmp/", 0) != 0 || stat(path.c_str(), &st) != 0) continue;
    if (std::find(plan.visible.begin(), plan.visible.end(), path) != plan.visible.end()) continue;
    if (!AddVisible(plan, path, path)) {
      return Status::InvalidArgument("--readable: more than " + std::to_string(kMaxWritablePaths) +
                                     " paths under /tmp");
    }
  }
  return Status::Ok();
}

Status PlanNamespaceMounts(const Policy& policy, ContainPlan& p,
                           const MountPlan* git_surface = nullptr) {
  std::vector<std::string> writable = WritableTrees(policy);
  Result<MountPlan> mounts =
      PlanMounts(writable.front(), std::vector<std::string>(writable.begin() + 1, writable.end()),
                 policy.user_git_config, git_surface);
  if (!mounts.ok()) return mounts.status();
  p.mounts = std::move(*mounts);
  p.mounts.trees_read_only = policy.read_only;
  if (!policy.tmpdir_short.empty()) {
    p.mounts.tmp_link = policy.tmpdir_short;
    p.mounts.tmp_link_target = policy.tmpdir;
  }
  for (std::string& path : CredentialPaths(policy)) {
    std::error_code ec;
    bool dir = std::filesystem::is_directory(path, ec);
    (dir ? p.mounts.hidden_dirs : p.mounts.hidden_files).push_back(std::move(path));
  }
  return KeepReadableTmpPathsVisible(policy, p.mounts);
}

// Layer 2 hides /tmp behind a private tmpfs. A program that lives under /tmp (a build tree there)
// must stay runnable: every "/tmp/..." token of argv naming an executable regular file is bound
// back, read-only, that file alone. Data files and directories stay private. A token that is a
// link is bound from its target, unless the target lies in a hidden credential store (the bind
// would carry it past the mounts and the read scope).
void KeepTmpProgramsVisible(const std::vector<std::string>& argv, MountPlan& plan) {
  for (const std::string& arg : argv) {
    for (size_t at = arg.find("/tmp/"); at != std::string::npos; at = arg.find("/tmp/", at + 1)) {
      if (at > 0 && std::string_view(" \t'\"=:;(").find(arg[at - 1]) == std::string_view::npos) {
        continue;
      }
      size_t end = arg.find_first_of(" \t'\";)&|\n", at);
      std::string token = arg.substr(at, end == std::string::npos ? std::string::npos : end - at);
      struct stat st;
      if (stat(token.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) {
        continue;
      }
      char real[PATH_MAX];
      if (realpath(token.c_str(), real) == nullptr || IsHidden(plan, real)) continue;
      AddVisible(plan, real, token);
    }
  }
}

}  // namespace

std::vector<std::string> WritableTrees(const Policy& policy) {
  std::vector<std::string> writable = {policy.workdir};
  writable.insert(writable.end(), policy.writable.begin(), policy.writable.end());
  // The task temp dir inside the workdir is the workdir's: a tree of its own would be a rule
  // opened by path (through whatever a tool swapped `.forkbox-tmp` for: a symbolic link out of the
  // workdir) and, in layer 2, a mount pinning it (its removal failed with EBUSY).
  const bool inside = PathBelow(policy.tmpdir, policy.workdir).has_value();
  if (!policy.tmpdir.empty() && !inside) writable.push_back(policy.tmpdir);
  return writable;
}

bool InDevShm(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path shm = std::filesystem::canonical(kLayer1SharedWritable, ec);
  return !ec && PathWithin(path, shm.string());
}

std::vector<std::string> PersistentWritableTrees(const Policy& policy, int layer) {
  std::vector<std::string> trees = WritableTrees(policy);
  if (layer == 2) return trees;
  std::error_code ec;
  std::filesystem::path shm = std::filesystem::canonical(kLayer1SharedWritable, ec);
  if (!ec) trees.push_back(shm.string());  // Absent: no rule is added either (AddFreshRulesRaw).
  return trees;
}

Result<ContainPlan> PrepareTool(const Policy& policy, int abi, bool layer2, bool inside_agent,
                                const std::vector<std::string>& argv, int cgroup_procs_fd,
                                int shared_ruleset_fd, const MountPlan* git_surface) {
  ContainPlan p;
  p.abi = abi;
  p.limits = LimitsOf(policy);
  p.cgroup_procs_fd = inside_agent ? -1 : cgroup_procs_fd;
  p.layer2 = layer2 && !inside_agent;
  // Inside a layer-2 agent the tmpfs are the agent's own, private to the task.
  p.private_tmp = layer2;
  p.keeper = Keeper::kInit;
  if (p.layer2) {
    FORKBOX_RETURN_IF_ERROR(PlanNamespaceMounts(policy, p, git_surface));
    KeepTmpProgramsVisible(argv, p.mounts);
  }
  // Inside an agent sandbox the base filter is inherited; the tool layer stacks on top.
  if (!inside_agent) FORKBOX_RETURN_IF_ERROR(AddFilter(seccomp::Program::kBase, p));
  // Every tool socket() and connect() goes through the spawning process's connect broker, which
  // checks every unix path (sandbox/unix_broker.h), in both layers; with --allow-net it makes and
  // connects the inet sockets too. The brokered filter is the last one installed.
  FORKBOX_RETURN_IF_ERROR(AddFilter(
      policy.allow_net ? seccomp::Program::kToolNetBrokered : seccomp::Program::kToolBrokered, p));
  p.brokered = true;
  if (shared_ruleset_fd >= 0 && !p.layer2) {
    p.ruleset_fd = shared_ruleset_fd;
    p.add_fresh_rules = false;
    return p;
  }
  FORKBOX_RETURN_IF_ERROR(p.layer2 ? PlanPendingRuleset(policy, p)
                                   : BuildRuleset(policy, landlock::Mode::kTool, p));
  return p;
}

namespace {

// FillPendingRuleset, with `before_telling` run between the fill and the word to the command.
template <typename BeforeTelling>
Status FillThenTell(ContainPlan& p, BeforeTelling before_telling) {
  if (!p.pending_rules) return Status::Ok();
  Status filled = landlock::FillRuleset(p.ruleset.get(), *p.pending_rules);
  p.pending_rules.reset();
  before_telling();
  const uint64_t value = filled.ok() ? kRulesetFilled : kRulesetFailed;
  if (write(p.ruleset_ready.get(), &value, sizeof value) != sizeof value && filled.ok()) {
    return Status::FromErrno(errno, "write(tool ruleset filled)");
  }
  return filled;
}

}  // namespace

Status FillPendingRuleset(ContainPlan& p) {
  return FillThenTell(p, [] {});
}

Result<UniqueFd> ToolRuleset(const Policy& policy, int abi, bool layer2, bool inside_agent) {
  if (layer2 && !inside_agent) return UniqueFd();
  ContainPlan p;
  p.abi = abi;
  // Inside an agent: the agent confined itself with this policy's read scope (EnterAgentSandbox;
  // handles only narrow the write and network side after that), so it is not repeated here.
  FORKBOX_RETURN_IF_ERROR(BuildRuleset(policy, landlock::Mode::kTool, p, {}, true, inside_agent));
  landlock::RulesetSpec handled;
  handled.abi = abi;
  handled.read_scope_inherited = inside_agent;
  const char* step = "";
  if (int err = AddFreshRulesRaw(p.ruleset_fd, landlock::HandledFsRights(handled), layer2, &step)) {
    return Status::FromErrno(err, step);
  }
  return std::move(p.ruleset);
}

Result<ContainPlan> PrepareAgent(const Policy& policy, int abi, bool layer2, int cgroup_procs_fd) {
  ContainPlan p;
  p.abi = abi;
  p.limits = OwnLimitsOf(policy);
  p.cgroup_procs_fd = cgroup_procs_fd;
  p.layer2 = layer2;
  p.private_tmp = layer2;
  p.unshare = layer2;
  p.subreaper = !layer2;
  p.keeper = Keeper::kWaiter;
  p.all_threads = true;
  if (layer2) FORKBOX_RETURN_IF_ERROR(PlanNamespaceMounts(policy, p));
  // AF_UNIX in both layers: the tools' connect broker runs in the agent (layer 1 too).
  FORKBOX_RETURN_IF_ERROR(AddFilter(seccomp::Program::kAgentBaseNetUnix, p));
  FORKBOX_RETURN_IF_ERROR(BuildRuleset(policy, landlock::Mode::kAgent, p));
  return p;
}

Status EnterAgentNamespaces(const Settings& settings) {
  ContainPlan p;
  p.limits = OwnLimitsOf(settings);
  p.layer2 = true;
  p.unshare = true;
  p.keeper = Keeper::kWaiter;
  p.mounts = IdMapsOnly();
  FORKBOX_RETURN_IF_ERROR(AddFilter(seccomp::Program::kBase, p));
  FORKBOX_RETURN_IF_ERROR(AwaitSingleThreaded());
  const char* step = "";
  int err = SetNonDumpableAndDeathSignalRaw(getppid(), &step);
  if (err == 0) err = ApplyLimitsRaw(p.limits, &step);
  if (err == 0) err = ForkKeeperRaw(p, &step);
  if (err != 0) return Status::FromErrno(err, step);
  return Status::Ok();
}

Result<LauncherWaiter> EnterLauncher(const Policy& policy, bool layer2, int64_t concurrent_tasks,
                                     int64_t standby, const LauncherKilled& on_killed) {
  // What the session may run at once: rlimit_nproc processes for each task and for the parent's
  // own tools, plus the standbys, the spawner and the parent.
  const int64_t tasks = concurrent_tasks < 1 ? 1 : concurrent_tasks;
  const int64_t pid_max =
      RootPidNamespaceMax(layer2, policy.rlimit_nproc * (tasks + 1) + standby + 2);
  Result<std::span<const sock_filter>> base = seccomp::Compiled(seccomp::Program::kBase);
  if (!base.ok()) return base.status();
  FORKBOX_RETURN_IF_ERROR(AwaitSingleThreaded());
  const MountPlan maps = IdMapsOnly();
  const char* step = "";
  if (layer2) {
    if (int err = UnshareLauncherRaw(maps, &step)) return Status::FromErrno(err, step);
  }
  ReleaseLayer2ProbeChild();
  LauncherWaiter out;
  out.pid = getpid();
  UniqueFd waiter(static_cast<int>(syscall(SYS_pidfd_open, out.pid, 0)));
  if (!waiter) return Status::FromErrno(errno, "pidfd_open(the launcher's waiter)");
  out.pidfd.reset(fcntl(waiter.get(), F_DUPFD_CLOEXEC, 3));
  if (!out.pidfd) return Status::FromErrno(errno, "dup(the launcher's waiter's pidfd)");
  Result<Pipe> confined = MakePipe();
  if (!confined.ok()) return confined.status().WithContext("the launcher's waiter");
  // Still the host's /proc: in layer 2 the launcher mounts its namespace's over it (the mount
  // namespace is the waiter's too).
  UniqueFd proc(open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!proc) return Status::FromErrno(errno, "open /proc (the launcher's waiter)");
  // Kept for the life of both processes: the launcher may write it from a signal handler.
  void* page = mmap(nullptr, sizeof(SharedWithWaiter), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return Status::FromErrno(errno, "mmap (the launcher's end)");
  auto* shared = new (page) SharedWithWaiter();
  // Every signal blocked until the launcher knows itself: its stop handler, run before that,
  // found no waiter to tell, and pid 1 cannot die of its own signal (it exited 143, rt63 P7).
  // The waiter blocks them all anyway.
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  // Single-threaded: glibc's fork keeps the launcher's (later multithreaded) state right.
  pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    sigprocmask(SIG_SETMASK, &old, nullptr);
    munmap(page, sizeof(SharedWithWaiter));
    return Status::FromErrno(err, "fork (the launcher's waiter)");
  }
  if (pid > 0) {
    RunWaiter(pid, *base, Relay::kPassOn, confined->write.get(), on_killed, shared, proc.get());
  }
  proc.reset();
  g_shared = shared;
  g_launcher_pid = getpid();
  sigprocmask(SIG_SETMASK, &old, nullptr);  // What came meanwhile is handled now.
  confined->write.reset();
  // The waiter's death (SIGKILL of forkbox's pid) ends the session as SIGTERM does: the launcher
  // kills what its tools left and puts back the git trust surface before it exits.
  if (int err = UnderKeeperRaw(waiter.get(), &step, SIGTERM)) return Status::FromErrno(err, step);
  (void)waiter.release();  // Closed by UnderKeeperRaw.
  out.confined = std::move(confined->read);
  if (!layer2) return out;
  if (int err = MountLauncherProcRaw(&step)) return Status::FromErrno(err, step);
  if (pid_max > 0) {
    if (int err = LimitPidNamespaceRaw(pid_max, &step)) return Status::FromErrno(err, step);
  }
  return out;
}

bool WaiterDied(const UniqueFd& pidfd) {
  if (!pidfd) return false;
  pollfd pfd{pidfd.get(), POLLIN, 0};
  return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN) != 0;
}

bool TellWaiterTheSessionEndsBy(int signo) {
  if (g_shared == nullptr || getpid() != g_launcher_pid) return false;
  g_shared->ended_by.store(signo);
  return true;
}

uint32_t JobStopsEnded() {
  return g_shared != nullptr && getpid() == g_launcher_pid ? g_shared->stops_ended.load() : 0;
}

bool PassedOnByWaiter(int code, int value, uint16_t* sequence) {
  if (code != SI_QUEUE || (value & ~0xffff) != kPassedOnTag) return false;
  *sequence = static_cast<uint16_t>(value & 0xffff);
  return true;
}

Status AwaitLauncherWaiter(UniqueFd confined) {
  if (!confined) return Status::Ok();
  char done = 0;
  ssize_t n = -1;
  while ((n = read(confined.get(), &done, 1)) < 0 && errno == EINTR) {
  }
  if (n < 0) return Status::FromErrno(errno, "read(the launcher's waiter confined)");
  if (n == 0) return Status::Internal("the launcher's waiter died before it confined itself");
  return Status::Ok();
}

Result<ContainPlan> PrepareLauncher(const Policy& policy, int abi, bool layer2,
                                    const std::vector<std::string>& own_writable) {
  ContainPlan p;
  p.abi = abi;
  p.limits = OwnLimitsOf(policy);
  p.layer2 = layer2;
  p.private_tmp = layer2;
  p.unshare = layer2;
  p.subreaper = true;
  p.keeper = Keeper::kNone;
  p.all_threads = true;
  if (layer2) {
    FORKBOX_RETURN_IF_ERROR(PlanNamespaceMounts(policy, p));
    p.mounts.mount_proc = false;
  }
  // As an agent: AF_UNIX for its bash's connect broker (both layers).
  FORKBOX_RETURN_IF_ERROR(AddFilter(seccomp::Program::kAgentBaseNetUnix, p));
  FORKBOX_RETURN_IF_ERROR(BuildRuleset(policy, landlock::Mode::kAgent, p, own_writable,
                                       /*scope_signals=*/false));
  return p;
}

namespace {

// The pipeline up to the namespaces: a tool's keeper step in layer 2. RLIMIT_AS is the
// command's alone (ConfineRaw): its init may still allocate to put back git's trust surface after
// the spawner's death (UndoForDeadSpawner), also in a sanitizer build.
int EnterRaw(ContainPlan& p, const char** step) {
  if (p.cgroup_procs_fd >= 0) {
    *step = "join pids cgroup";
    if (int err = JoinCgroupRaw(p.cgroup_procs_fd)) return err;
  }
  Limits shared = p.limits;
  shared.as_bytes = 0;
  if (int err = ApplyLimitsRaw(shared, step)) return err;
  return p.layer2 ? EnterNamespacesRaw(p, step) : 0;
}

// The rest, in the process that goes on (a tool's command below its init).
int ConfineRaw(ContainPlan& p, const char** step) {
  if (p.keeper_pidfd >= 0) {
    if (int err = UnderKeeperRaw(p.keeper_pidfd, step)) return err;
  }
  if (p.limits.as_bytes > 0) {
    Limits as_only;
    as_only.as_bytes = p.limits.as_bytes;
    if (int err = ApplyLimitsRaw(as_only, step)) return err;
  }
  if (p.subreaper) {
    *step = "prctl(PR_SET_CHILD_SUBREAPER)";
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return errno;
  }
  if (int err = DropAllCapabilitiesRaw(step)) return err;
  *step = "prctl(PR_SET_NO_NEW_PRIVS)";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  return RestrictRaw(p, step);
}

}  // namespace

int ContainRaw(ContainPlan& p, const char** step) {
  *step = "a tool's namespace init is Spawn's keeper step (AddContainStep)";
  if (p.layer2 && p.keeper == Keeper::kInit) return EINVAL;
  if (int err = EnterRaw(p, step)) return err;
  return ConfineRaw(p, step);
}

namespace {

// The while_starting hook: fills the plan's ruleset while `child` sets up its namespaces. A new
// child is queued on its parent's CPU and runs once the parent blocks, so the two would not
// overlap (the child waited 1.5-2 ms here: `perf sched timehist`): the child is moved to the
// caller's other CPUs for the fill, and given the caller's CPUs back after it. A command it cloned
// meanwhile takes them back itself (RestrictRaw). Both moves are hints: where one fails, the two
// only overlap less, or the child (a namespace init, which only waits) keeps fewer CPUs.
Status FillOffCallerCpu(pid_t child, ContainPlan& p) {
  cpu_set_t others = p.caller_cpus;
  const int here = sched_getcpu();
  const bool moved = p.restore_cpus && here >= 0 && here < CPU_SETSIZE && CPU_ISSET(here, &others);
  if (moved) {
    CPU_CLR(here, &others);
    (void)sched_setaffinity(child, sizeof others, &others);
  }
  // The init gets its CPUs back before the command is told to go on: the command, and what it
  // reads of the init, never sees the init on fewer.
  return FillThenTell(p, [&] {
    if (moved) (void)sched_setaffinity(child, sizeof p.caller_cpus, &p.caller_cpus);
  });
}

}  // namespace

Status AddContainStep(ContainPlan& p, SpawnOptions& options) {
  if (p.layer2 || p.layer1_keeper) {
    p.spawner.reset(static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0)));
    if (!p.spawner) return Status::FromErrno(errno, "pidfd_open(self)");
    p.spawner_pidfd = p.spawner.get();
    options.carry_fds.push_back(&p.spawner_pidfd);
  }
  options.carry_fds.push_back(&p.ruleset_fd);
  if (p.ruleset_ready_fd >= 0) options.carry_fds.push_back(&p.ruleset_ready_fd);
  if (p.cgroup_procs_fd >= 0) options.carry_fds.push_back(&p.cgroup_procs_fd);
  if (p.cgroup_lock_fd >= 0) options.carry_fds.push_back(&p.cgroup_lock_fd);
  if (p.broker_socket >= 0) options.carry_fds.push_back(&p.broker_socket);
  // Off the critical path: the namespaces are set up while this process fills the ruleset.
  if (p.pending_rules) {
    p.restore_cpus = sched_getaffinity(0, sizeof p.caller_cpus, &p.caller_cpus) == 0 &&
                     CPU_COUNT(&p.caller_cpus) >= 2;
    options.while_starting = [&p](pid_t child) { return FillOffCallerCpu(child, p); };
  }
  options.clone_flags = p.layer2 && !p.unshare ? kNamespaces : 0;
  if (!p.layer2) {
    if (p.layer1_keeper) {
      options.steps.push_back(
          SpawnStep{"the command's keeper",
                    [&p](const char** what) { return BecomeLayer1KeeperRaw(p, what); },
                    [&p](pid_t command) { RunLayer1Keeper(command, p); }});
    }
    options.steps.push_back(
        SpawnStep{"contain", [&p](const char** what) { return ContainRaw(p, what); }});
    return Status::Ok();
  }
  // The namespace init sets up and stays behind; the command goes on in a child borrowing the
  // init's memory until its exec (no page table copied), and inherits the init's confinement.
  options.steps.push_back(SpawnStep{"contain",
                                    [&p](const char** what) { return EnterRaw(p, what); },
                                    [&p](pid_t command) { RunInit(command, p); }});
  options.steps.push_back(
      SpawnStep{"contain (the command)", [&p](const char** what) { return ConfineRaw(p, what); }});
  return Status::Ok();
}

}  // namespace forkbox::sandbox
