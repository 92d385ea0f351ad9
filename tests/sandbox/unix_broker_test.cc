// The unix connect broker served from the caller's thread (BrokerThread::kCallers, as `forkbox
// sandbox` runs it): a failing poll in ServeUntil is reported and ends the broker. Forked children
// with an alarm as a guard: a broker that ignored the failure would spin, and the child dies of
// SIGALRM instead of hanging the suite.
#include "sandbox/unix_broker.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(UnixBrokerCallers, APollFailureIsReportedAndStopsTheBroker) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(ServeUntilThenFailThePoll());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "3: the control wait failed, 5: the poll failure was not reported, 6: not named, 7: the "
         "broker went on";
}

}  // namespace
}  // namespace forkbox::sandbox
