// ChildProcess and Spawn: reaping, group kills, fd mapping, exec and step errors.
#include "base/process.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ipc/frame.h"
#include "tests/base/test_util.h"

namespace forkbox {
namespace {

using forkbox::testing::ReadAllFromFd;
using ::testing::HasSubstr;

SpawnOptions Sh(const std::string& script) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.env = {"PATH=/usr/bin:/bin"};
  return o;
}

// True when pid is gone entirely: not running, not a zombie child of ours.
bool FullyGone(pid_t pid) {
  siginfo_t info = {};
  errno = 0;
  int r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
  bool not_our_child = r < 0 && errno == ECHILD;
  return not_our_child && !std::filesystem::exists("/proc/" + std::to_string(pid));
}

// Blocks until a process (not necessarily our child) has exited, via its pidfd.
void WaitForExit(pid_t pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    ASSERT_EQ(errno, ESRCH) << "pidfd_open";  // Already gone.
    return;
  }
  UniqueFd pidfd(fd);
  struct pollfd p = {pidfd.get(), POLLIN, 0};
  while (::poll(&p, 1, -1) < 0) ASSERT_EQ(errno, EINTR);
}

pid_t ReadPid(int fd) {
  std::string line;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  return static_cast<pid_t>(std::stoi(line));
}

TEST(SpawnTest, RunsAProgramAndReportsItsExitCode) {
  Result<ChildProcess> child = Spawn(Sh("exit 3"));
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_GT(child->pid(), 0);
  EXPECT_GE(child->pidfd(), 0);
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 3);
  EXPECT_EQ(DescribeWaitStatus(*status), "exited with code 3");
  EXPECT_FALSE(child->running());
  Result<int> again = child->Wait();  // Reaped once; the status is remembered.
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *status);
  EXPECT_THAT(child->Signal(SIGTERM).message(), HasSubstr("already reaped"));
}

TEST(SpawnTest, SignalDeathIsDescribed) {
  Result<ChildProcess> child = Spawn(Sh("kill -9 $$"));
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 137);
  EXPECT_EQ(DescribeWaitStatus(*status), "killed by signal 9 (Killed)");
}

TEST(SpawnTest, ExecFailureIsARealStatus) {
  SpawnOptions o;
  o.argv = {"/nonexistent/forkbox-child"};
  Result<ChildProcess> child = Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(child.status().message(),
            "execve(/nonexistent/forkbox-child): No such file or directory (errno 2)");

  o.argv = {"/usr"};  // A directory: not executable, even for root.
  child = Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(child.status().message(), "execve(/usr): Permission denied (errno 13)");
}

// Written by the command below a keeper step, read by the keeper once the command exec'ed.
volatile int g_written_by_the_command = 0;

// A keeper step stays behind: the later steps and the exec run in a child (another pid) that
// borrows the keeper's memory until exec (what it writes, the keeper reads: in a copy it would
// not), and keep gets that child's pid. The spawned process is the keeper, here exiting with 100
// plus the command's status. Sanitizer builds copy the memory: the write stays the command's.
TEST(SpawnTest, AKeeperStepStaysBehindAndTheCommandBorrowsItsMemory) {
  g_written_by_the_command = 0;
  SpawnOptions o = Sh("exit 7");
  o.steps.push_back({"keeper", [](const char**) { return 0; },
                     [](pid_t command) {
                       int status = 0;
                       if (command == ::getpid() || ::waitpid(command, &status, 0) != command ||
                           !WIFEXITED(status)) {
                         ::_exit(2);
                       }
                       ::_exit(g_written_by_the_command == 42 ? 100 + WEXITSTATUS(status) : 1);
                     }});
  o.steps.push_back({"in the command", [](const char**) {
                       g_written_by_the_command = 42;
                       return 0;
                     }});
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  ASSERT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), kCloneCanShareMemory ? 107 : 1);
  EXPECT_EQ(g_written_by_the_command, 0) << "the spawned keeper copied the caller's memory";
}

// A later step's failure below a keeper reaches Spawn's caller, named.
TEST(SpawnTest, AStepBelowAKeeperFailsTheSpawn) {
  SpawnOptions o = Sh("exit 0");
  o.steps.push_back({"keeper", [](const char**) { return 0; },
                     [](pid_t command) {
                       int status = 0;
                       ::waitpid(command, &status, 0);
                       ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 3);
                     }});
  o.steps.push_back({"in the command", [](const char**) { return EACCES; }});
  Result<ChildProcess> child = Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().message(),
            "spawn /bin/sh: in the command: Permission denied (errno 13)");
}

TEST(SpawnTest, StepFailureNamesTheStep) {
  SpawnOptions o = Sh("exit 0");
  o.steps.push_back({"landlock_restrict_self", [](const char**) { return ENOSYS; }});
  Result<ChildProcess> child = Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(child.status().message(),
            "spawn /bin/sh: landlock_restrict_self: Function not implemented (errno 38)");
  o.steps[0] = {"mounts", [](const char** what) {
                  *what = "mount tmpfs /tmp";
                  return EPERM;
                }};
  child = Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_THAT(child.status().message(), HasSubstr("spawn /bin/sh: mount tmpfs /tmp: "));
}

TEST(SpawnTest, StepsRunInOrderInTheChildWithCarriedFds) {
  Result<Pipe> out = MakePipe();
  ASSERT_TRUE(out.ok());
  Result<Pipe> side = MakePipe();
  ASSERT_TRUE(side.ok());
  SpawnOptions o = Sh("echo exec; echo leaked >&5 2>/dev/null || echo closed");
  o.fds = {{out->write.get(), 1}};
  int carried = side->write.get();
  o.carry_fds = {&carried};
  // Runs after the fds are mapped (fd 1 is the pipe) and before exec; the carried fd is open
  // for the steps (close-on-exec, above the targets) and gone at exec.
  o.steps.push_back({"first", [](const char**) { return ::write(1, "1\n", 2) == 2 ? 0 : EIO; }});
  o.steps.push_back({"second", [&carried](const char**) {
                       if (carried <= 1 || ::write(carried, "c", 1) != 1) return EBADF;
                       return ::write(1, "2\n", 2) == 2 ? 0 : EIO;
                     }});
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  out->write.reset();
  side->write.reset();
  EXPECT_EQ(ReadAllFromFd(out->read.get()), "1\n2\nexec\nclosed\n");
  EXPECT_EQ(ReadAllFromFd(side->read.get()), "c");
}

// Where a step of a memory-sharing child ran: an address on its stack, written into our memory.
uintptr_t ChildStackAddress() {
  uintptr_t at = 0;
  SpawnOptions o;
  o.argv = {"/bin/true"};
  o.steps.push_back({"where", [&at](const char**) {
                       int local = 0;
                       at = reinterpret_cast<uintptr_t>(&local);
                       return 0;
                     }});
  Result<ChildProcess> child = Spawn(o);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  if (child.ok()) {
    Result<int> code = child->Wait();
    EXPECT_TRUE(code.ok() && ExitCodeFromWaitStatus(*code) == 0);
  }
  return at;
}

bool Mapped(uintptr_t address) {
  unsigned char in_core = 0;
  void* page = reinterpret_cast<void*>(address & ~static_cast<uintptr_t>(4095));
  return ::mincore(page, 4096, &in_core) == 0;  // ENOMEM: nothing mapped there.
}

// The memory-sharing clone lends one kept stack (a munmap after each child costs a TLB-shootdown
// IPI on a VM): still mapped once the child has exec'ed, and the next child runs on it again
// (a second stack would lie elsewhere while the first is still mapped).
TEST(SpawnTest, MemorySharingClonesReuseOneKeptStack) {
  if (!kCloneCanShareMemory) GTEST_SKIP() << "sanitizer build: the clone copies the memory";
  const uintptr_t first = ChildStackAddress();
  ASSERT_NE(first, 0U) << "the step did not run in our memory";
  EXPECT_TRUE(Mapped(first)) << "the child's stack was unmapped after it exec'ed";
  const uintptr_t second = ChildStackAddress();
  EXPECT_EQ(second, first) << "the second child got a stack of its own";
}

// Clones from two threads at once: one borrows the kept stack, the other maps one of its own
// (no lock: a clone waits for no other), and every child runs.
TEST(SpawnTest, ConcurrentMemorySharingClonesAllRun) {
  std::atomic<int> ok{0};
  auto spawn_many = [&ok] {
    for (int i = 0; i < 40; ++i) {
      Result<ChildProcess> child = Spawn(Sh("exit 3"));
      if (!child.ok()) continue;
      Result<int> code = child->Wait();
      if (code.ok() && ExitCodeFromWaitStatus(*code) == 3) ++ok;
    }
  };
  std::thread other(spawn_many);
  spawn_many();
  other.join();
  EXPECT_EQ(ok.load(), 80);
}

// while_starting runs in the caller while the child runs its steps: a step that waits for what
// the hook writes gets it, and only then does the child exec. (Were the hook run after the wait
// for execve, the step would time out: its poll is a guard against a hang, not a sleep.)
TEST(SpawnTest, WhileStartingRunsWhileTheStepsWaitForIt) {
  Result<Pipe> out = MakePipe();
  ASSERT_TRUE(out.ok());
  Result<Pipe> go = MakePipe();
  ASSERT_TRUE(go.ok());
  SpawnOptions o = Sh("echo exec");
  o.fds = {{out->write.get(), 1}};
  int go_read = go->read.get();
  o.carry_fds = {&go_read};
  o.steps.push_back({"wait for the hook", [&go_read](const char**) {
                       pollfd p = {go_read, POLLIN, 0};
                       char c = 0;
                       if (::poll(&p, 1, 30000) != 1 || ::read(go_read, &c, 1) != 1) return ETIME;
                       return c == 'g' && ::write(1, "got\n", 4) == 4 ? 0 : EIO;
                     }});
  bool ran = false;
  o.while_starting = [&](pid_t) {
    ran = true;
    return ::write(go->write.get(), "g", 1) == 1 ? Status::Ok() : Status::FromErrno(errno, "write");
  };
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_TRUE(ran);
  out->write.reset();
  EXPECT_EQ(ReadAllFromFd(out->read.get()), "got\nexec\n");
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0);
}

// A failing hook is the spawn's error, and the child it started is killed and reaped.
TEST(SpawnTest, WhileStartingFailureKillsTheChild) {
  Result<Pipe> out = MakePipe();
  ASSERT_TRUE(out.ok());
  SpawnOptions o = Sh("exec sleep 600");
  o.fds = {{out->write.get(), 1}};
  o.steps.push_back({"report pid", [](const char**) {
                       char line[32];
                       int n = std::snprintf(line, sizeof line, "%d\n", static_cast<int>(getpid()));
                       return ::write(1, line, static_cast<size_t>(n)) == n ? 0 : EIO;
                     }});
  pid_t pid = -1;
  o.while_starting = [&](pid_t) {
    pid = ReadPid(out->read.get());  // The child is running its steps.
    return Status::Internal("the hook failed");
  };
  Result<ChildProcess> child = Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().message(), "the hook failed");
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(FullyGone(pid)) << "the child of a failed spawn must be reaped";
}

// StartSpawn's children: each waits in a last step (poll as a guard against a hang, not a sleep)
// until the test calls Go(), then writes "stepped"; their stdout is Output().
class StartSpawnTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(out_.ok() && go_.ok()); }
  Result<PendingChild> StartWaiting(SpawnOptions o) {
    o.fds = {{out_->write.get(), 1}, {go_->read.get(), 3}};
    o.steps.push_back({"wait for go", [](const char**) {
                         pollfd p = {3, POLLIN, 0};
                         char c = 0;
                         if (::poll(&p, 1, 30000) != 1 || ::read(3, &c, 1) != 1) return ETIME;
                         return ::write(1, "stepped\n", 8) == 8 ? 0 : EIO;
                       }});
    return StartSpawn(std::move(o));
  }
  bool Go() { return ::write(go_->write.get(), "g", 1) == 1; }
  std::string Output() {
    out_->write.reset();
    return ReadAllFromFd(out_->read.get());
  }
  int out() const { return out_->read.get(); }

 private:
  Result<Pipe> out_ = MakePipe();
  Result<Pipe> go_ = MakePipe();
};

// StartSpawn returns while the child is still in its steps: the child waits for what the caller
// writes only after the call. (Were it to wait for the execve like Spawn, the step would time
// out and Finish would report it.) Finish then hands out the child, as Spawn does.
TEST_F(StartSpawnTest, TheCallerGoesOnWhileTheChildStartsAndFinishReturnsIt) {
  Result<PendingChild> pending = StartWaiting(Sh("echo exec; exit 4"));
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_TRUE(pending->pending());
  ASSERT_TRUE(Go());
  Result<ChildProcess> child = pending->Finish();
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_FALSE(pending->pending());
  EXPECT_EQ(Output(), "stepped\nexec\n");
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 4);
  EXPECT_FALSE(pending->Finish().ok()) << "a second Finish has nothing to hand out";
}

TEST_F(StartSpawnTest, ExecAndStepFailuresComeFromFinish) {
  SpawnOptions o;
  o.argv = {"/nonexistent/forkbox-child"};
  Result<PendingChild> pending = StartSpawn(o);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  Result<ChildProcess> child = pending->Finish();
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().message(),
            "execve(/nonexistent/forkbox-child): No such file or directory (errno 2)");

  o = Sh("exit 0");
  o.steps.push_back({"the failing step", [](const char**) { return EACCES; }});
  pending = StartSpawn(o);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  child = pending->Finish();
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().message(),
            "spawn /bin/sh: the failing step: Permission denied (errno 13)");
}

// A handle dropped before Finish kills and reaps its child, which is still in its steps here.
TEST_F(StartSpawnTest, AnUnfinishedHandleKillsAndReapsItsChild) {
  SpawnOptions o = Sh("exit 0");
  o.steps.push_back({"report pid", [](const char**) {
                       const pid_t me = ::getpid();
                       return ::write(1, &me, sizeof me) == sizeof me ? 0 : EIO;
                     }});
  pid_t pid = -1;
  {
    Result<PendingChild> pending = StartWaiting(std::move(o));  // No Go(): only a kill ends it.
    ASSERT_TRUE(pending.ok()) << pending.status().ToString();
    ASSERT_EQ(::read(out(), &pid, sizeof pid), static_cast<ssize_t>(sizeof pid));
  }
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(FullyGone(pid)) << "the child of a dropped handle must be killed and reaped";
}

// While one child holds the kept stack, a Spawn maps a stack of its own: both children run. (On
// one shared stack the waiting child would resume on a stack the other overwrote.)
TEST_F(StartSpawnTest, ASpawnWhileAChildIsPendingRunsOnAStackOfItsOwn) {
  Result<PendingChild> pending = StartWaiting(Sh("echo exec"));
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  for (int i = 0; i < 20; ++i) {
    Result<ChildProcess> other = Spawn(Sh("exit 3"));
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    Result<int> status = other->Wait();
    ASSERT_TRUE(status.ok());
    EXPECT_EQ(ExitCodeFromWaitStatus(*status), 3);
  }
  ASSERT_TRUE(Go());
  Result<ChildProcess> child = pending->Finish();
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(Output(), "stepped\nexec\n");
  ASSERT_TRUE(child->Wait().ok());
}

// What needs the caller to wait for the execve (or a copy of its memory) is refused up front.
TEST_F(StartSpawnTest, RefusesOptionsThatNeedTheCallerToWait) {
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  UniqueFd owned(fd);
  std::vector<SpawnOptions> refused(4, Sh("exit 0"));
  refused[0].carry_fds = {&fd};
  refused[1].steps.push_back({"keeper", [](const char**) { return 0; }, [](pid_t) {}});
  refused[2].while_starting = [](pid_t) { return Status::Ok(); };
  refused[3].clone_flags = CLONE_NEWNS;
  for (SpawnOptions& o : refused) {
    Result<PendingChild> pending = StartSpawn(std::move(o));
    ASSERT_FALSE(pending.ok());
    EXPECT_EQ(pending.status().code(), Status::Code::kInvalidArgument);
  }
  Result<PendingChild> control = StartSpawn(Sh("exit 0"));
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  EXPECT_TRUE(control->Finish().ok());
}

TEST(SpawnTest, CloneFlagsGiveTheChildNewNamespaces) {
  SpawnOptions o = Sh("test \"$(readlink /proc/self/ns/uts)\" != \"$0\"");
  char self_ns[64] = {};
  ASSERT_GT(::readlink("/proc/self/ns/uts", self_ns, sizeof self_ns - 1), 0);
  o.argv.push_back(self_ns);
  o.clone_flags = CLONE_NEWUSER | CLONE_NEWUTS;
  Result<ChildProcess> child = Spawn(o);
  if (!child.ok() && child.status().code() == Status::Code::kPermissionDenied) {
    GTEST_SKIP() << "no user namespaces here: " << child.status().ToString();
  }
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0);
}

TEST(SpawnTest, ChdirFailureNamesThePath) {
  SpawnOptions o = Sh("exit 0");
  o.cwd = "/nonexistent-dir";
  Result<ChildProcess> child = Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().message(),
            "spawn /bin/sh: chdir(/nonexistent-dir): No such file or directory (errno 2)");
}

TEST(SpawnTest, BadOptionsFailBeforeForking) {
  SpawnOptions empty;
  EXPECT_EQ(Spawn(empty).status().code(), Status::Code::kInvalidArgument);
  SpawnOptions o = Sh("exit 0");
  o.fds = {{12345, 3}};
  EXPECT_THAT(Spawn(o).status().message(), HasSubstr("source fd 12345 for target 3"));
  Result<Pipe> p = MakePipe();
  ASSERT_TRUE(p.ok());
  o.fds = {{p->read.get(), 3}, {p->write.get(), 3}};
  EXPECT_THAT(Spawn(o).status().message(), HasSubstr("target fd 3 is mapped twice"));
  o = Sh("exit 0");
  o.env = {"NOEQUALS"};
  EXPECT_THAT(Spawn(o).status().message(), HasSubstr("is not NAME=value"));
  o = Sh(std::string("exit\0 0", 7));
  EXPECT_THAT(Spawn(o).status().message(), HasSubstr("argv[2] contains a NUL byte"));
}

TEST(SpawnTest, MapsDescriptorsOntoThreeAndFour) {
  Result<Pipe> to_child = MakePipe();
  Result<Pipe> from_child = MakePipe();
  ASSERT_TRUE(to_child.ok() && from_child.ok());
  SpawnOptions o = Sh("read line <&3; echo \"got $line\" >&4");
  o.fds = {{to_child->read.get(), ipc::kChildControlReadFd},
           {from_child->write.get(), ipc::kChildReportWriteFd}};
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  to_child->read.reset();
  from_child->write.reset();
  ASSERT_TRUE(::write(to_child->write.get(), "hello\n", 6) == 6);
  EXPECT_EQ(ReadAllFromFd(from_child->read.get()), "got hello\n");
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0);
}

TEST(SpawnTest, OverlappingSourcesAndTargetsAreSwappedCorrectly) {
  Result<Pipe> a = MakePipe();
  Result<Pipe> b = MakePipe();
  ASSERT_TRUE(a.ok() && b.ok());
  // Put the sources on fds that are each other's targets: {X -> Y, Y -> X}.
  UniqueFd x(::fcntl(a->read.get(), F_DUPFD_CLOEXEC, 50));
  UniqueFd y(::fcntl(b->write.get(), F_DUPFD_CLOEXEC, 60));
  ASSERT_TRUE(x.valid() && y.valid());
  a->read.reset();
  b->write.reset();
  std::string script =
      "read v <&" + std::to_string(y.get()) + "; echo \"swapped $v\" >&" + std::to_string(x.get());
  SpawnOptions o;
  o.argv = {"/bin/bash", "-c", script};  // dash only knows single-digit fds.
  o.fds = {{x.get(), y.get()}, {y.get(), x.get()}};
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  x.reset();
  y.reset();
  ASSERT_TRUE(::write(a->write.get(), "v1\n", 3) == 3);
  EXPECT_EQ(ReadAllFromFd(b->read.get()), "swapped v1\n");
}

TEST(SpawnTest, SourceEqualToTargetSurvivesExec) {
  Result<Pipe> p = MakePipe();  // O_CLOEXEC: only the mapping keeps it open.
  ASSERT_TRUE(p.ok());
  int fd = p->write.get();
  SpawnOptions o = Sh("echo same >&" + std::to_string(fd));
  o.fds = {{fd, fd}};
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  p->write.reset();
  EXPECT_EQ(ReadAllFromFd(p->read.get()), "same\n");
}

TEST(SpawnTest, EnvironmentAndCwdAreExactlyAsGiven) {
  Result<Pipe> out = MakePipe();
  ASSERT_TRUE(out.ok());
  SpawnOptions o;
  o.argv = {"/usr/bin/env"};
  o.env = {"ONLY=this", "AND=that"};
  o.fds = {{out->write.get(), 1}};
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  out->write.reset();
  EXPECT_EQ(ReadAllFromFd(out->read.get()), "ONLY=this\nAND=that\n");

  Result<Pipe> out2 = MakePipe();
  ASSERT_TRUE(out2.ok());
  o = Sh("pwd");
  o.cwd = "/usr/share";
  o.fds = {{out2->write.get(), 1}};
  child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  out2->write.reset();
  EXPECT_EQ(ReadAllFromFd(out2->read.get()), "/usr/share\n");
}

TEST(SpawnTest, ChildStartsWithDefaultSignalsAndEmptyMask) {
  struct sigaction ign = {}, old = {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, &old);  // Like the parent binaries do.
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  Result<Pipe> out = MakePipe();
  ASSERT_TRUE(out.ok());
  SpawnOptions o;
  o.argv = {"/bin/grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status"};
  o.fds = {{out->write.get(), 1}};
  Result<ChildProcess> child = Spawn(o);
  ::sigaction(SIGPIPE, &old, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  out->write.reset();
  EXPECT_EQ(ReadAllFromFd(out->read.get()),
            "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

void ExpectStepsSeeEveryDispositionAtItsDefault(bool copy) {
  struct sigaction handler = {}, ign = {}, old_usr1 = {}, old_pipe = {};
  handler.sa_handler = [](int) {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGUSR1, &handler, &old_usr1);
  ::sigaction(SIGPIPE, &ign, &old_pipe);
  SpawnOptions o = Sh("exit 0");
  o.steps.push_back({"dispositions", [](const char** what) {
                       struct sigaction cur = {};
                       for (int sig : {SIGUSR1, SIGPIPE}) {
                         if (::sigaction(sig, nullptr, &cur) != 0) return errno;
                         if (cur.sa_handler != SIG_DFL) {
                           *what = sig == SIGUSR1 ? "SIGUSR1 kept its handler" : "SIGPIPE ignored";
                           return EPERM;
                         }
                       }
                       return 0;
                     }});
  if (copy) o.while_starting = [](pid_t) { return Status::Ok(); };  // Spawn copies the memory then.
  Result<ChildProcess> child = Spawn(o);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0);
}

// Handlers and ignored signals are reset before the steps run (a handler must never run on a
// child that borrows our memory); the set to reset comes from /proc/self/status, read by the
// caller for a child that borrows our memory and by the child on a copy (while_starting).
TEST(SpawnTest, StepsSeeEveryDispositionAtItsDefault) {
  for (const bool copy : {false, true}) {
    SCOPED_TRACE(copy ? "the child on a copy of our memory" : "the child borrowing our memory");
    ExpectStepsSeeEveryDispositionAtItsDefault(copy);
  }
}

// A /proc that is not procfs (here a tmpfs whose self/status says no signal is caught) is not
// believed: the caught SIGUSR1 is still reset before the steps. 0: reset; 1: kept; 2: no mount
// namespace here (skip).
int SpawnUnderAFakeProc() {
  if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
      ::mount("fake", "/proc", "tmpfs", 0, nullptr) != 0 || ::mkdir("/proc/self", 0755) != 0) {
    return 2;
  }
  FILE* status = std::fopen("/proc/self/status", "w");
  if (status == nullptr) return 2;
  std::fputs("Name:\tfake\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n", status);
  std::fclose(status);
  struct sigaction handler = {};
  handler.sa_handler = [](int) {};
  ::sigaction(SIGUSR1, &handler, nullptr);
  SpawnOptions o;
  o.argv = {"/bin/true"};
  o.steps.push_back({"dispositions", [](const char**) {
                       struct sigaction cur = {};
                       if (::sigaction(SIGUSR1, nullptr, &cur) != 0) return errno;
                       return cur.sa_handler == SIG_DFL ? 0 : EPERM;
                     }});
  Result<ChildProcess> child = Spawn(o);
  if (!child.ok()) return 1;
  return child->Wait().ok() ? 0 : 1;
}

TEST(SpawnTest, AProcThatIsNotProcfsResetsEverySignal) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(SpawnUnderAFakeProc());
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) GTEST_SKIP() << "no private mount namespace here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a planted /proc/self/status spared a handler";
}

TEST(ChildProcessTest, DestructorKillsAndReaps) {
  Result<Pipe> in = MakePipe();
  ASSERT_TRUE(in.ok());
  pid_t pid = -1;
  {
    SpawnOptions o;
    o.argv = {"/bin/cat"};  // Blocks on stdin, which we keep open.
    o.fds = {{in->read.get(), 0}};
    Result<ChildProcess> child = Spawn(o);
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    pid = child->pid();
    Result<std::optional<int>> early = child->TryWait();
    ASSERT_TRUE(early.ok());
    EXPECT_FALSE(early->has_value()) << "cat exited while its stdin was open";
    EXPECT_TRUE(child->running());
  }
  EXPECT_TRUE(FullyGone(pid)) << "pid " << pid << " left running or as a zombie";
}

TEST(ChildProcessTest, TryWaitSeesTheExitOnceThePidfdIsReadable) {
  Result<Pipe> in = MakePipe();
  ASSERT_TRUE(in.ok());
  SpawnOptions o;
  o.argv = {"/bin/cat"};
  o.fds = {{in->read.get(), 0}};
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  in->write.reset();  // EOF: cat exits.
  struct pollfd p = {child->pidfd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, -1), 1);
  Result<std::optional<int>> status = child->TryWait();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_TRUE(status->has_value());
  EXPECT_EQ(ExitCodeFromWaitStatus(**status), 0);
  EXPECT_FALSE(child->running());
}

TEST(ChildProcessTest, SignalReachesTheProcess) {
  Result<Pipe> in = MakePipe();
  ASSERT_TRUE(in.ok());
  SpawnOptions o;
  o.argv = {"/bin/cat"};
  o.fds = {{in->read.get(), 0}};
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  ASSERT_TRUE(child->Signal(SIGTERM).ok());
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(DescribeWaitStatus(*status), "killed by signal 15 (Terminated)");
}

TEST(ChildProcessTest, DestructorKillsTheWholeGroupIncludingAGrandchild) {
  Result<Pipe> report = MakePipe();
  Result<Pipe> hold = MakePipe();
  ASSERT_TRUE(report.ok() && hold.ok());
  pid_t leader = -1, grandchild = -1;
  {
    // The grandchild blocks reading fd 3 (kept open by us); the leader waits for it.
    SpawnOptions o = Sh("cat <&3 >/dev/null & echo $! >&4; wait");
    o.fds = {{hold->read.get(), 3}, {report->write.get(), 4}};
    o.new_session = true;
    Result<ChildProcess> child = Spawn(o);
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    report->write.reset();
    leader = child->pid();
    grandchild = ReadPid(report->read.get());
    EXPECT_EQ(::getpgid(grandchild), leader);
    EXPECT_EQ(::getsid(leader), leader);
  }
  EXPECT_TRUE(FullyGone(leader));
  WaitForExit(grandchild);  // Returns only once the grandchild is dead.
}

TEST(ChildProcessTest, WaitingForAGroupLeaderKillsItsLeftovers) {
  Result<Pipe> report = MakePipe();
  Result<Pipe> hold = MakePipe();
  ASSERT_TRUE(report.ok() && hold.ok());
  SpawnOptions o = Sh("cat <&3 >/dev/null & echo $! >&4");  // The leader exits at once.
  o.fds = {{hold->read.get(), 3}, {report->write.get(), 4}};
  o.new_session = true;
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  report->write.reset();
  pid_t grandchild = ReadPid(report->read.get());
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0);
  WaitForExit(grandchild);
}

TEST(ChildProcessTest, MoveTransfersOwnership) {
  Result<Pipe> in = MakePipe();
  ASSERT_TRUE(in.ok());
  SpawnOptions o;
  o.argv = {"/bin/cat"};
  o.fds = {{in->read.get(), 0}};
  Result<ChildProcess> a = Spawn(o);
  Result<ChildProcess> b = Spawn(o);
  ASSERT_TRUE(a.ok() && b.ok());
  pid_t pid_a = a->pid(), pid_b = b->pid();
  ChildProcess moved(std::move(*a));
  EXPECT_FALSE(a->running());
  EXPECT_TRUE(moved.running());
  moved = std::move(*b);  // Kills and reaps the first before taking the second.
  EXPECT_TRUE(FullyGone(pid_a));
  EXPECT_EQ(moved.pid(), pid_b);
  EXPECT_TRUE(moved.running());
}

TEST(WaitStatusTest, MapsExitAndSignalStatuses) {
  EXPECT_EQ(ExitCodeFromWaitStatus(0), 0);
  EXPECT_EQ(ExitCodeFromWaitStatus(42 << 8), 42);
  EXPECT_EQ(ExitCodeFromWaitStatus(SIGSEGV), 128 + SIGSEGV);
  EXPECT_EQ(DescribeWaitStatus(SIGSEGV | 0x80),
            "killed by signal 11 (Segmentation fault), core dumped");
}

}  // namespace
}  // namespace forkbox
