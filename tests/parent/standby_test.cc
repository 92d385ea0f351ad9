// The standby child on its own (parent/child_launcher.h), with fake children: what it is sent,
// how a dead one is detected and reported, and that it never outlives its owner. No sleeps: a
// child's exit is awaited with waitid(WNOWAIT), which leaves it for the code under test to reap.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ipc/frame.h"
#include "parent/child_launcher.h"

namespace forkbox::parent {
namespace {

std::string FakeChild(const std::string& mode) {
  return std::string(FAKE_CHILD_DIR) + "/fake_child_" + mode;
}

class StandbyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-standby-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    config_.workdir = tmpl;
    config_.child_path = FakeChild("ok");
    config_.child_env = {"PATH=/usr/bin:/bin"};
    config_.provider.name = "anthropic";
    config_.provider.api_key = "sk-standby-test";
    config_.provider.base_url = "https://api.anthropic.com";  // Resolved, as the parent sends it.
    config_.sandbox.enabled = false;
  }
  void TearDown() override { std::filesystem::remove_all(config_.workdir); }

  // Blocks until `pid` has exited, without reaping it.
  static void AwaitExit(pid_t pid) {
    siginfo_t info{};
    ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  }

  ipc::StartMessage Start(const std::string& prompt) const {
    ipc::StartMessage m;
    m.prompt = prompt;
    m.provider = config_.provider;
    m.workdir = config_.workdir;
    m.sandbox = config_.sandbox;
    return m;
  }

  TaskConfig config_;
};

TEST_F(StandbyTest, PrepareFrameCarriesTheSandboxAndNoSecret) {
  config_.provider.base_url = "http://127.0.0.1:9/v1";  // Resolved once by the parent.
  ipc::PrepareMessage m = PrepareFor(config_);
  EXPECT_EQ(m.workdir, config_.workdir);
  EXPECT_EQ(m.sandbox, config_.sandbox);
  EXPECT_EQ(m.model_url, "http://127.0.0.1:9/v1");
  Result<std::string> frame = ipc::EncodeMessage(PrepareFor(config_));
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame->find("sk-standby-test"), std::string::npos);
}

TEST_F(StandbyTest, RefillKeepsThePoolFullAndTakeHandsOverTheOldest) {
  Standby standby(config_, 2);
  ASSERT_TRUE(standby.Refill().ok());
  std::vector<pid_t> pids = standby.waiting_pids();
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(standby.Refill().ok());  // Full: nothing new.
  EXPECT_EQ(standby.waiting_pids(), pids);

  std::string why;
  std::optional<LaunchedChild> child = standby.Take(&why);
  ASSERT_TRUE(child.has_value()) << why;
  EXPECT_EQ(child->process.pid(), pids[0]);
  EXPECT_EQ(standby.waiting_pids(), std::vector<pid_t>{pids[1]});
  ASSERT_TRUE(standby.Refill().ok());
  ASSERT_EQ(standby.waiting_pids().size(), 2u);
  EXPECT_EQ(standby.waiting_pids()[0], pids[1]);

  // The taken child was prepared before its task existed, and runs it.
  ASSERT_TRUE(SetNonBlocking(child->control.get(), false).ok());
  ASSERT_TRUE(ipc::WriteMessage(child->control.get(), Start("the task")).ok());
  child->control.reset();
  ipc::FrameReader reader(child->report.get());
  Result<ipc::Message> event = reader.Read();
  ASSERT_TRUE(event.ok()) << event.status().ToString();
  Result<ipc::Message> result = reader.Read();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  auto* r = std::get_if<ipc::ResultMessage>(&*result);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->summary.find("[the task]"), std::string::npos) << r->summary;
  EXPECT_NE(r->summary.find("key_in_frame=yes"), std::string::npos) << r->summary;
  EXPECT_NE(r->summary.find("prepared=yes"), std::string::npos) << r->summary;
  Result<int> status = child->process.Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0);
}

TEST_F(StandbyTest, ADeadStandbyIsReportedReapedAndNotReplaced) {
  config_.child_path = FakeChild("standbydies");
  Standby standby(config_, 2);
  ASSERT_TRUE(standby.Refill().ok());
  std::vector<pid_t> pids = standby.waiting_pids();
  ASSERT_EQ(pids.size(), 2u);
  AwaitExit(pids[0]);
  AwaitExit(pids[1]);
  std::string why;
  EXPECT_FALSE(standby.Take(&why).has_value());
  EXPECT_EQ(why, "the standby child sandbox: fake standby failure (exited with code 3)");
  EXPECT_TRUE(standby.disabled());
  for (pid_t pid : pids) {  // Both reaped: the second would most likely fail the same way.
    siginfo_t info{};
    EXPECT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
  }
  ASSERT_TRUE(standby.Refill().ok());
  EXPECT_TRUE(standby.waiting_pids().empty());  // Tasks now start on demand.
}

TEST_F(StandbyTest, AStandbyKilledWithoutAWordIsReportedByItsExit) {
  Standby standby(config_, 1);
  ASSERT_TRUE(standby.Refill().ok());
  std::vector<pid_t> pids = standby.waiting_pids();
  ASSERT_EQ(pids.size(), 1u);
  ASSERT_EQ(kill(pids[0], SIGKILL), 0);  // E.g. the OOM killer: no error frame.
  AwaitExit(pids[0]);
  std::string why;
  EXPECT_FALSE(standby.Take(&why).has_value());
  EXPECT_EQ(why, "the standby child exited before it was used (killed by signal 9 (Killed))");
  EXPECT_TRUE(standby.disabled());
}

TEST_F(StandbyTest, AChildThatCannotStartDisablesTheStandby) {
  config_.child_path = config_.workdir + "/no-such-child";
  Standby standby(config_, 1);
  Status st = standby.Refill();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("no-such-child"), std::string::npos) << st.ToString();
  EXPECT_TRUE(standby.disabled());
  std::string why;
  EXPECT_FALSE(standby.Take(&why).has_value());
}

TEST_F(StandbyTest, APrepareFrameBiggerThanThePipeDisablesTheStandby) {
  // 70 KiB of --writable paths: the frame cannot go in one non-blocking write, and the event
  // loop must never block on a child, so tasks start on demand instead.
  for (int i = 0; i < 700; ++i) config_.sandbox.writable.push_back("/" + std::string(99, 'w'));
  Standby standby(config_, 2);
  Status st = standby.Refill();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("does not fit in the pipe buffer"), std::string::npos)
      << st.ToString();
  EXPECT_TRUE(standby.disabled());
  EXPECT_TRUE(standby.waiting_pids().empty());
}

TEST_F(StandbyTest, OwnerKillsAndReapsAnUnusedStandby) {
  std::vector<pid_t> pids;
  {
    Standby standby(config_, 3);
    ASSERT_TRUE(standby.Refill().ok());
    pids = standby.waiting_pids();
    ASSERT_EQ(pids.size(), 3u);
    for (pid_t pid : pids) ASSERT_EQ(kill(pid, 0), 0);  // Alive, blocked on a start frame.
  }
  // Reaped by the destructor: the pids are no longer ours to wait for.
  for (pid_t pid : pids) {
    siginfo_t info{};
    EXPECT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
  }
}

}  // namespace
}  // namespace forkbox::parent
