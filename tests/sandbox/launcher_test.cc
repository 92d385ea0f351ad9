// The parent's launcher (sandbox::EnterLauncher) at the library's level: in layer 2 the launcher is
// pid 1 of a fresh /proc, in layer 1 a plain child of the waiter; the waiter relays how it ended,
// its death comes to the launcher as SIGTERM, and each step that fails fails the call (never a
// layer-2 launcher on the host's /proc). Every case runs in a forked child, which becomes the
// waiter.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <functional>

#include "base/unique_fd.h"
#include "sandbox/sandbox.h"
#include "tests/sandbox/probe_util.h"

namespace forkbox::sandbox {
namespace {

using testing::MakeTempDir;

// Numeric entries of /proc: the processes this /proc shows.
int VisibleProcesses() {
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (std::isdigit(static_cast<unsigned char>(entry->d_name[0]))) ++count;
  }
  closedir(dir);
  return count;
}

// Forks; the child runs `setup` (false: exit 100), then EnterLauncher in `layer2` or not and, in
// the launcher, `launcher(result)`, whose value is the launcher's exit code. `waiter` (if set) gets
// the fork's pid, the waiter's, before it is waited for. Returns the fork's wait status: the
// waiter's, which relays the launcher's.
int RunAsLauncher(const std::function<bool()>& setup,
                  const std::function<int(Result<LauncherWaiter>&)>& launcher, bool layer2 = true,
                  const std::function<void(pid_t)>& waiter = {}) {
  Policy policy;
  policy.workdir = MakeTempDir("launcher");  // Here: the child's _exit removes nothing.
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!setup()) _exit(100);
    Result<LauncherWaiter> confined = EnterLauncher(policy, layer2, 1, 0);
    _exit(launcher(confined));
  }
  if (waiter) waiter(pid);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

bool NoSetup() { return true; }

// Makes the launcher's /proc mount fail (EPERM) and nothing else: the mount of "/" as private
// (MS_REC|MS_PRIVATE) still works, the proc mount's flags are refused.
bool RefuseProcMounts() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  bool ok = ctx != nullptr &&
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mount), 1,
                             SCMP_A3(SCMP_CMP_EQ, MS_NOSUID | MS_NODEV | MS_NOEXEC)) == 0 &&
            seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

TEST(EnterLauncher, TheLauncherIsPidOneOfAFreshProc) {
  // The control: this test process's /proc shows at least itself and its parent.
  ASSERT_GT(VisibleProcesses(), 1);
  const int status = RunAsLauncher(NoSetup, [](Result<LauncherWaiter>& confined) {
    if (!confined.ok()) return 10;
    if (!AwaitLauncherWaiter(std::move(confined->confined)).ok()) return 11;
    if (getpid() != 1) return 12;
    return VisibleProcesses() == 1 ? 0 : 13;  // Itself alone: the waiter is outside.
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

pid_t g_before_fork = 0;  // The waiter's pid, set in the forked child before EnterLauncher.

TEST(EnterLauncher, InLayer1TheLauncherIsAChildOfTheWaiterOnTheHostsProc) {
  const int status = RunAsLauncher(
      [] {
        g_before_fork = getpid();
        return true;
      },
      [](Result<LauncherWaiter>& confined) {
        if (!confined.ok()) return 10;
        if (!AwaitLauncherWaiter(std::move(confined->confined)).ok()) return 11;
        if (getpid() == g_before_fork || getppid() != g_before_fork) return 12;
        return VisibleProcesses() > 2 ? 0 : 13;  // The host's /proc: no namespace.
      },
      /*layer2=*/false);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

// A SIGKILL of forkbox's pid (the waiter) must still let the launcher end its session (kill what
// its tools left, put back git's trust surface): the waiter's death comes to it as SIGTERM, which
// it handles, never as SIGKILL. And the launcher tells that death from a SIGTERM the waiter
// relayed, which arrives alike (sandbox::WaiterDied): it takes SIGTERM, then, once the test says so
// ('C', sent after the waiter is a zombie), answers 'D' (died) or 'A' (alive). A launcher that got
// SIGKILL, or any signal it does not handle, answers nothing. SIGKILL of the waiter must give 'D';
// the control, SIGTERM to the waiter (relayed), 'A'. Both layers.
volatile sig_atomic_t g_got_term = 0;
void NoteTerm(int) { g_got_term = 1; }

char WaiterFateSeenByTheLauncher(bool layer2, int signal_to_waiter) {
  Result<Pipe> answer = MakePipe();
  Result<Pipe> check = MakePipe();
  if (!answer.ok() || !check.ok()) return '?';
  const int answer_fd = answer->write.get();
  const int check_fd = check->read.get();
  char got = 0;
  RunAsLauncher(
      [unused_answer = answer->read.get(), unused_check = check->write.get()] {
        close(unused_answer);
        close(unused_check);
        struct sigaction sa = {};
        sa.sa_handler = NoteTerm;
        return sigaction(SIGTERM, &sa, nullptr) == 0;
      },
      [answer_fd, check_fd, layer2](Result<LauncherWaiter>& launched) {
        if (!launched.ok()) return 10;
        if (launched->pid != getppid() && !layer2) return 11;  // Layer 1: the waiter's pid.
        if (!AwaitLauncherWaiter(std::move(launched->confined)).ok()) return 12;
        if (WaiterDied(launched->pidfd)) return 13;  // Alive so far.
        // Blocked until the sigsuspend below, which unblocks it atomically: a SIGTERM between
        // the flag's check and the sigsuspend would otherwise leave it waiting for another.
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        if (sigprocmask(SIG_BLOCK, &term, nullptr) != 0) return 16;
        const char ready = 'R';
        if (write(answer_fd, &ready, 1) != 1) return 14;
        char c = 0;
        while (read(check_fd, &c, 1) < 0 && errno == EINTR) {
        }
        sigset_t none;
        sigemptyset(&none);
        while (!g_got_term) sigsuspend(&none);
        const char seen = WaiterDied(launched->pidfd) ? 'D' : 'A';
        return write(answer_fd, &seen, 1) == 1 ? 0 : 15;
      },
      layer2,
      [&](pid_t waiter) {
        answer->write.reset();
        check->read.reset();
        char ready = 0;
        if (read(answer->read.get(), &ready, 1) != 1 || ready != 'R') return;
        kill(waiter, signal_to_waiter);
        siginfo_t info{};
        if (signal_to_waiter == SIGKILL) waitid(P_PID, waiter, &info, WEXITED | WNOWAIT);
        const char go = 'C';
        (void)!write(check->write.get(), &go, 1);
        pollfd pfd{answer->read.get(), POLLIN, 0};
        if (poll(&pfd, 1, 30'000) == 1) (void)!read(answer->read.get(), &got, 1);
        check->write.reset();
      });
  return got;
}

TEST(EnterLauncher, TheLauncherTellsTheWaitersDeathFromARelayedSigterm) {
  for (const bool layer2 : {true, false}) {
    EXPECT_EQ(WaiterFateSeenByTheLauncher(layer2, SIGKILL), 'D') << "layer2=" << layer2;
    EXPECT_EQ(WaiterFateSeenByTheLauncher(layer2, SIGTERM), 'A') << "layer2=" << layer2;
  }
}

TEST(EnterLauncher, TheWaiterRelaysTheLaunchersExitCodeAndDeathBySignal) {
  int status = RunAsLauncher(NoSetup, [](Result<LauncherWaiter>& confined) {
    return confined.ok() && AwaitLauncherWaiter(std::move(confined->confined)).ok() ? 42 : 10;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 42) << "status " << status;
  // pid 1 of a namespace ignores what it sends itself at the default action; a fault the kernel
  // forces ends it, and the waiter dies of the same signal. A trap instruction (SIGILL), which
  // the sanitizers leave to the kernel, unlike a bad store.
  status = RunAsLauncher(NoSetup, [](Result<LauncherWaiter>& confined) {
    if (!confined.ok() || !AwaitLauncherWaiter(std::move(confined->confined)).ok()) return 10;
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);  // No core file of a deliberate fault.
    __builtin_trap();
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGILL) << "status " << status;
}

// rt62 #6: a session a signal ended (SIGINT, SIGTERM, SIGHUP) must end forkbox's pid, the waiter,
// by that signal: a shell goes on with a loop whose command exited 130 after Ctrl-C. The launcher
// (in layer 2 a namespace init, which cannot die of a signal it sends itself) says so before it
// exits 128 + the signal, and the waiter dies of it. The controls: the same exit code unsaid stays
// an exit code; said, but another code won (a failed write of the result: 141), that code.
TEST(EnterLauncher, TheWaiterDiesOfTheSignalTheLauncherSaysTheSessionEndedBy) {
  struct Case {
    int told;  // 0: nothing said.
    int code;
  };
  for (const bool layer2 : {true, false}) {
    for (const Case c : {Case{SIGINT, 130}, Case{SIGTERM, 143}, Case{SIGHUP, 129}, Case{0, 130},
                         Case{SIGINT, 141}}) {
      const int status = RunAsLauncher(
          NoSetup,
          [c](Result<LauncherWaiter>& launched) {
            if (!launched.ok() || !AwaitLauncherWaiter(std::move(launched->confined)).ok()) {
              return 10;
            }
            if (c.told != 0 && !TellWaiterTheSessionEndsBy(c.told)) return 11;
            return c.code;
          },
          layer2);
      const std::string trace = "layer2=" + std::to_string(layer2) + " told " +
                                std::to_string(c.told) + ", exit " + std::to_string(c.code) +
                                ": status " + std::to_string(status);
      if (c.told != 0 && c.code == 128 + c.told) {
        EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == c.told) << trace;
      } else {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == c.code) << trace;
      }
    }
  }
  // Not the launcher (this process has no waiter): nothing to say, it must die of it itself.
  EXPECT_FALSE(TellWaiterTheSessionEndsBy(SIGINT));
}

void IgnoreSignal(int, siginfo_t*, void*) {}

// The waiter passes SIGINT, SIGTERM and SIGHUP on tagged, with a sequence number per signal
// (PassedOnByWaiter): a signal to forkbox's process group reaches the launcher directly too, and
// the launcher must tell the two copies apart to take such a signal once. The control: a SIGTERM
// the launcher sends itself is not taken for a passed-on one. Both layers.
TEST(EnterLauncher, TheWaiterTagsTheSignalsItPassesOn) {
  for (const bool layer2 : {true, false}) {
    Result<Pipe> ready = MakePipe();
    ASSERT_TRUE(ready.ok());
    const int ready_fd = ready->write.get();
    const int status = RunAsLauncher(
        [] {
          struct sigaction sa = {};
          sa.sa_sigaction = IgnoreSignal;
          sa.sa_flags = SA_SIGINFO;
          sigset_t term;
          sigemptyset(&term);
          sigaddset(&term, SIGTERM);
          // Handled (a namespace init gets from outside only what it handles), and blocked until
          // sigwaitinfo takes it.
          return sigaction(SIGTERM, &sa, nullptr) == 0 &&
                 sigprocmask(SIG_BLOCK, &term, nullptr) == 0;
        },
        [ready_fd](Result<LauncherWaiter>& launched) {
          if (!launched.ok() || !AwaitLauncherWaiter(std::move(launched->confined)).ok()) {
            return 10;
          }
          sigset_t term;
          sigemptyset(&term);
          sigaddset(&term, SIGTERM);
          siginfo_t info;
          uint16_t sequence = 0;
          for (const uint16_t expected : {1, 2}) {
            const char go = 'R';
            if (write(ready_fd, &go, 1) != 1) return 11;
            if (sigwaitinfo(&term, &info) != SIGTERM) return 12;
            if (!PassedOnByWaiter(info.si_code, info.si_value.sival_int, &sequence)) return 13;
            if (sequence != expected) return 14;
          }
          kill(getpid(), SIGTERM);
          if (sigwaitinfo(&term, &info) != SIGTERM) return 15;
          return PassedOnByWaiter(info.si_code, info.si_value.sival_int, &sequence) ? 16 : 0;
        },
        layer2,
        [&](pid_t waiter) {
          ready->write.reset();
          for (int i = 0; i < 2; ++i) {
            char go = 0;
            if (read(ready->read.get(), &go, 1) != 1) return;
            kill(waiter, SIGTERM);
          }
        });
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "layer2=" << layer2 << " status " << status;
  }
}

// A launcher that cannot mount its /proc must not go on with the host's (its bash would see every
// process of the host): the call fails, naming the step. The control: the same run without the
// refusal succeeds.
TEST(EnterLauncher, AFailedProcMountFailsTheCall) {
  for (const bool refuse : {true, false}) {
    const int status =
        RunAsLauncher(refuse ? RefuseProcMounts : NoSetup, [](Result<LauncherWaiter>& confined) {
          if (confined.ok())
            return AwaitLauncherWaiter(std::move(confined->confined)).ok() ? 0 : 11;
          return confined.status().message().find("mount proc /proc in the launcher") !=
                         std::string::npos
                     ? 3
                     : 12;
        });
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == (refuse ? 3 : 0))
        << "refuse=" << refuse << " status " << status;
  }
}

// The parent waits for the waiter's byte before its first model call: a waiter that died first
// (the pipe's end closed without it) is an error, never taken as confined.
TEST(AwaitLauncherWaiter, AWaiterThatDiedBeforeConfiningItselfIsAnError) {
  Result<Pipe> died = MakePipe();
  ASSERT_TRUE(died.ok());
  died->write.reset();
  Status st = AwaitLauncherWaiter(std::move(died->read));
  EXPECT_EQ(st.code(), Status::Code::kInternal);
  EXPECT_NE(st.message().find("died before it confined itself"), std::string::npos) << st.message();
  // The control: the byte written, as the waiter writes it once confined.
  Result<Pipe> confined = MakePipe();
  ASSERT_TRUE(confined.ok());
  const char done = 1;
  ASSERT_EQ(write(confined->write.get(), &done, 1), 1);
  EXPECT_TRUE(AwaitLauncherWaiter(std::move(confined->read)).ok());
  // No launcher (the sandbox off): nothing to wait for.
  EXPECT_TRUE(AwaitLauncherWaiter(UniqueFd()).ok());
}

}  // namespace
}  // namespace forkbox::sandbox
