#include "base/run_clock.h"

#include <gtest/gtest.h>

#include <chrono>

namespace forkbox {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;

// The test's steady clock: each test sets it before making a RunClock.
RunClock::TimePoint g_now;
RunClock::TimePoint FakeNow() { return g_now; }

TEST(RunClock, CountsTheTimeBetweenLooksThatCameInTime) {
  g_now = RunClock::TimePoint(minutes(5));
  RunClock clock(&FakeNow);
  EXPECT_EQ(clock.Now(), milliseconds(0));
  g_now += milliseconds(300);
  EXPECT_EQ(clock.Now(), milliseconds(300));
  g_now += RunClock::kLook + RunClock::kLate;  // Late, yet no stop: counted whole.
  EXPECT_EQ(clock.Now(), milliseconds(300) + RunClock::kLook + RunClock::kLate);
}

// Ten minutes stopped (Ctrl-Z) between two looks count as one look; what ran after counts again.
// The control: the same ten minutes looked at every kLook count whole.
TEST(RunClock, AStopBetweenTwoLooksCountsAsOneLook) {
  g_now = RunClock::TimePoint(minutes(5));
  RunClock stopped(&FakeNow);
  g_now += milliseconds(200);
  EXPECT_EQ(stopped.Now(), milliseconds(200));
  g_now += minutes(10);
  EXPECT_EQ(stopped.Now(), milliseconds(200) + RunClock::kLook);
  g_now += milliseconds(50);
  EXPECT_EQ(stopped.Now(), milliseconds(250) + RunClock::kLook);

  g_now = RunClock::TimePoint(minutes(5));
  RunClock ran(&FakeNow);
  for (int i = 0; i < 600; ++i) {
    g_now += RunClock::kLook;
    (void)ran.Now();
  }
  EXPECT_EQ(ran.Now(), minutes(10));
}

// A wait lasts what is left of the deadline, rounded up, at most kLook, so that a stop is seen;
// 0 once it passed. A clock that went back (never, for steady_clock) counts nothing.
TEST(RunClock, WaitMsIsWhatIsLeftAtMostOneLook) {
  g_now = RunClock::TimePoint(minutes(5));
  RunClock clock(&FakeNow);
  const RunClock::Duration deadline = milliseconds(2500);
  EXPECT_EQ(clock.WaitMs(deadline), RunClock::kLook.count());
  g_now += milliseconds(2000);
  EXPECT_EQ(clock.WaitMs(deadline), 500);
  g_now += std::chrono::microseconds(499'100);
  EXPECT_EQ(clock.WaitMs(deadline), 1) << "0.9 ms left waits 1 ms, not 0 (a busy loop)";
  g_now -= milliseconds(100);
  EXPECT_EQ(clock.WaitMs(deadline), 1);
  g_now += milliseconds(101);
  EXPECT_EQ(clock.WaitMs(deadline), 0);
  g_now += minutes(10);
  EXPECT_EQ(clock.WaitMs(deadline), 0);
}

}  // namespace
}  // namespace forkbox
