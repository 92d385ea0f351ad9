// agent/cancel.h: a SIGINT that is already pending when a wait starts must end the wait (the
// check-then-wait race), and a true check must stop it before it starts. No timing: a signal is
// made pending while blocked, so it is delivered exactly when the wait unblocks it.
#include "agent/cancel.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

namespace forkbox::agent {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnSigint(int) { g_stop = 1; }

class CancelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_stop = 0;
    struct sigaction sa {};
    sa.sa_handler = OnSigint;
    ASSERT_EQ(sigaction(SIGINT, &sa, &old_action_), 0);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old_mask_), 0);
  }
  void TearDown() override {
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    sigaction(SIGINT, &old_action_, nullptr);
  }
  static bool Stop() { return g_stop != 0; }

  struct sigaction old_action_ {};
  sigset_t old_mask_;
};

TEST_F(CancelTest, APendingSignalEndsAnHourLongSleep) {
  ASSERT_EQ(raise(SIGINT), 0);  // Pending: blocked until the wait unblocks it.
  EXPECT_EQ(g_stop, 0);
  EXPECT_FALSE(SleepUnlessCancelled(std::chrono::hours(1), Stop));
  EXPECT_EQ(g_stop, 1);
}

TEST_F(CancelTest, APendingSignalEndsAnEndlessPoll) {
  ASSERT_EQ(raise(SIGINT), 0);
  bool cancelled = false;
  int n = PollUnlessCancelled(nullptr, 0, -1, Stop, &cancelled);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(errno, EINTR);
  EXPECT_FALSE(cancelled);  // The signal came during the wait: the caller checks again...
  n = PollUnlessCancelled(nullptr, 0, -1, Stop, &cancelled);
  EXPECT_EQ(n, 0);
  EXPECT_TRUE(cancelled);  // ...and stops before waiting.
}

TEST_F(CancelTest, NoCheckMeansAnOrdinaryTimedSleep) {
  EXPECT_TRUE(SleepUnlessCancelled(std::chrono::milliseconds(1), CancelCheck()));
  EXPECT_TRUE(SleepUnlessCancelled(std::chrono::milliseconds(1), Stop));
}

}  // namespace
}  // namespace forkbox::agent
