// The unix connect broker served from the caller's thread (BrokerThread::kCallers, as `forkbox
// sandbox` runs it): a failing poll in ServeUntil is reported and ends the broker. Forked children
// with an alarm as a guard: a broker that ignored the failure would spin, and the child dies of
// SIGALRM instead of hanging the suite.
#include "sandbox/unix_broker.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace forkbox::sandbox {
namespace {

// 0 on success, else the number of the check that failed.
int ServeUntilThenFailThePoll() {
  alarm(30);
  UnixBroker broker(/*scope_self=*/false, BrokerThread::kCallers);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return 1;
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  if (write(write_end.get(), "x", 1) != 1) return 2;
  // Control: a wait within the limits returns once the pipe is readable.
  pollfd ready{read_end.get(), POLLIN, 0};
  if (Status st = broker.ServeUntil({&ready, 1}); !st.ok() || (ready.revents & POLLIN) == 0) {
    return 3;
  }
  // More descriptors than RLIMIT_NOFILE allows: poll(2) fails with EINVAL.
  const rlimit low{64, 64};
  if (setrlimit(RLIMIT_NOFILE, &low) != 0) return 4;
  std::vector<pollfd> many(100, pollfd{-1, 0, 0});
  Status failed = broker.ServeUntil(many);
  if (failed.ok()) return 5;
  if (failed.message().find("unix connect broker: poll") == std::string::npos) return 6;
  // The broker stopped: a new tool's listener is refused, not left unanswered.
  Status serve =
      broker.Serve(UniqueFd(dup(read_end.get())), BrokerPolicy{}, UniqueFd(), UniqueFd());
  if (serve.ok() || serve.message().find("stopped") == std::string::npos) return 7;
  return 0;
}

// Serves `listener` (taken) for the command `command` with a /dev/null report: 0, else 2 or 3.
int ServeFor(UnixBroker& broker, int listener, pid_t command) {
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, command, 0)));
  UniqueFd report(open("/dev/null", O_WRONLY | O_CLOEXEC));
  if (!pidfd || !report) return 2;
  return broker.Serve(UniqueFd(listener), BrokerPolicy{}, std::move(report), std::move(pidfd)).ok()
             ? 0
             : 3;
}

// Runs `body` in a forked child (its limits, alarm and forks stay there) and returns its exit
// code, or -1 (with a failure) when it did not exit.
int ExitCodeInChild(int (*body)()) {
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return -1;
  }
  if (pid == 0) _exit(body());
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    ADD_FAILURE() << "waitpid failed";
    return -1;
  }
  if (!WIFEXITED(status)) {
    ADD_FAILURE() << "killed by signal " << WTERMSIG(status);
    return -1;
  }
  return WEXITSTATUS(status);
}

TEST(UnixBrokerCallers, APollFailureIsReportedAndStopsTheBroker) {
  EXPECT_EQ(ExitCodeInChild(ServeUntilThenFailThePoll), 0)
      << "3: the control wait failed, 5: the poll failure was not reported, 6: not named, 7: the "
         "broker went on";
}

// How many descriptors the epoll sets of this process hold (fdinfo's "tfd:" lines).
int EpollRegistrations() {
  int n = 0;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(fd.path(), ec).string() != "anon_inode:[eventpoll]") continue;
    std::ifstream info("/proc/self/fdinfo/" + fd.path().filename().string());
    for (std::string line; std::getline(info, line);) n += line.rfind("tfd:", 0) == 0 ? 1 : 0;
  }
  return n;
}

// 0 on success, else the number of the check that failed.
int AGoneToolLeavesNothingInTheEpollSet() {
  alarm(30);
  UnixBroker broker(/*scope_self=*/false, BrokerThread::kCallers);
  int listener[2], gate[2], until[2], hold[2], closed[2];
  if (pipe2(listener, O_CLOEXEC) != 0 || pipe2(gate, O_CLOEXEC) != 0 ||
      pipe2(until, O_CLOEXEC) != 0 || pipe2(hold, O_CLOEXEC) != 0 ||
      pipe2(closed, O_CLOEXEC) != 0) {
    return 1;
  }
  char byte = 0;
  const pid_t command = fork();  // Runs until the gate opens.
  if (command == 0) {
    close(listener[1]);  // Only this process's copy may keep the "filter" in use.
    if (write(closed[1], "x", 1) != 1) _exit(1);
    _exit(read(gate[0], &byte, 1) == 1 ? 0 : 1);
  }
  // Its copy gone before ours goes: else the hang-up could come after the wait below.
  if (read(closed[0], &byte, 1) != 1) return 9;
  if (int bad = ServeFor(broker, listener[0], command)) return bad;
  if (EpollRegistrations() != 2) return 4;  // The listener and the command's pidfd.
  close(listener[1]);  // No process uses the "filter": the tool is gone at the next wait.
  // A fork holds a copy of every descriptor, the broker's pidfd too, as a spawn of another thread
  // does until its exec: a close alone then leaves the pidfd registered.
  const pid_t holder = fork();
  if (holder == 0) _exit(read(hold[0], &byte, 1) == 1 ? 0 : 1);
  if (write(until[1], "x", 1) != 1) return 5;
  pollfd ready{until[0], POLLIN, 0};
  if (!broker.ServeUntil({&ready, 1}).ok()) return 6;
  const int left = EpollRegistrations();
  if (write(gate[1], "x", 1) != 1 || write(hold[1], "x", 1) != 1) return 7;
  waitpid(command, nullptr, 0);
  waitpid(holder, nullptr, 0);
  return left == 0 ? 0 : 8;
}

// A tool's listener and command pidfd leave the broker's epoll set with the tool: otherwise the
// command's end, still seen through a copy some fork holds, pointed at the freed tool (a
// use-after-free that crashed forkbox-child in long tasks).
TEST(UnixBrokerCallers, AGoneToolLeavesNothingInTheEpollSet) {
  EXPECT_EQ(ExitCodeInChild(AGoneToolLeavesNothingInTheEpollSet), 0)
      << "4: not both registered, 6: the wait failed, 8: a descriptor stayed in the epoll set, "
         "9: the command did not start";
}

// 0 on success, else the number of the check that failed.
int AToolWhoseListenerAndCommandEndTogether() {
  alarm(30);
  UnixBroker broker(/*scope_self=*/false, BrokerThread::kCallers);
  int listener[2], until[2];
  if (pipe2(listener, O_CLOEXEC) != 0 || pipe2(until, O_CLOEXEC) != 0) return 1;
  const pid_t command = fork();
  if (command == 0) _exit(0);
  if (int bad = ServeFor(broker, listener[0], command)) return bad;
  // The hang-up first, then the command's end: both come in one batch, in that order.
  close(listener[1]);
  siginfo_t info{};
  if (waitid(P_PID, command, &info, WEXITED | WNOWAIT) != 0) return 4;
  if (write(until[1], "x", 1) != 1) return 5;
  pollfd ready{until[0], POLLIN, 0};
  if (!broker.ServeUntil({&ready, 1}).ok()) return 6;
  waitpid(command, nullptr, 0);
  return EpollRegistrations() == 0 ? 0 : 7;
}

// Both of a tool's events in one batch, its listener's hang-up first: the tool is freed there, and
// its command's event after it must not be read through it (ASan saw that read in `forkbox
// sandbox`; a plain build passes either way).
TEST(UnixBrokerCallers, AToolWhoseListenerAndCommandEndTogetherIsReadBeforeItIsFreed) {
  EXPECT_EQ(ExitCodeInChild(AToolWhoseListenerAndCommandEndTogether), 0)
      << "6: the wait failed, 7: a descriptor stayed in the epoll set";
}

}  // namespace
}  // namespace forkbox::sandbox
