// The retry policy: what is retried and how long to wait.
#include <gtest/gtest.h>

#include "agent/retry.h"

namespace forkbox::agent {
namespace {

using std::chrono::milliseconds;

TEST(Retry, RetryableStatuses) {
  for (long s : {408L, 409L, 429L, 500L, 502L, 503L, 504L, 529L}) {
    EXPECT_TRUE(IsRetryableStatus(s)) << s;
  }
  for (long s : {200L, 400L, 401L, 403L, 404L, 413L, 422L}) EXPECT_FALSE(IsRetryableStatus(s)) << s;
}

TEST(Retry, ShouldRetryHeader) {
  EXPECT_EQ(ShouldRetryHeader({}), std::nullopt);
  EXPECT_EQ(ShouldRetryHeader({{"x-should-retry", "true"}}), true);
  EXPECT_EQ(ShouldRetryHeader({{"x-should-retry", "false"}}), false);
  EXPECT_EQ(ShouldRetryHeader({{"x-should-retry", " true "}}), true);
  EXPECT_EQ(ShouldRetryHeader({{"x-should-retry", "maybe"}}), std::nullopt);
}

// Retry-After itself is parsed by the HTTP client (seconds and HTTP dates, see http_native_test and
// llm_mock_test's RetryAfterSecondsOn429); the policy here picks and bounds the wait.
TEST(Retry, ServerRequestedDelayPrefersMsAndBoundsTheWait) {
  const std::optional<milliseconds> none;
  EXPECT_EQ(ServerRequestedDelay({{"retry-after-ms", "150"}}, milliseconds(3000)),
            milliseconds(150));
  EXPECT_EQ(ServerRequestedDelay({}, milliseconds(3000)), milliseconds(3000));
  EXPECT_EQ(ServerRequestedDelay({{"retry-after-ms", "junk"}}, milliseconds(1000)),
            milliseconds(1000));
  EXPECT_EQ(ServerRequestedDelay({{"retry-after-ms", " 2.5 "}}, none), milliseconds(3));
  EXPECT_EQ(ServerRequestedDelay({}, milliseconds(0)), std::nullopt);
  EXPECT_EQ(ServerRequestedDelay({}, milliseconds(61000)), std::nullopt);
  EXPECT_EQ(ServerRequestedDelay({}, milliseconds(60000)), milliseconds(60000));
  EXPECT_EQ(ServerRequestedDelay({}, none), std::nullopt);
}

TEST(Retry, BackoffDoublesFromHalfASecondAndCapsAtEight) {
  EXPECT_EQ(BackoffDelay(0, 1.0), milliseconds(500));
  EXPECT_EQ(BackoffDelay(1, 1.0), milliseconds(1000));
  EXPECT_EQ(BackoffDelay(2, 1.0), milliseconds(2000));
  EXPECT_EQ(BackoffDelay(4, 1.0), milliseconds(8000));
  EXPECT_EQ(BackoffDelay(5, 1.0), milliseconds(8000));
  EXPECT_EQ(BackoffDelay(1000, 1.0), milliseconds(8000));
  EXPECT_EQ(BackoffDelay(1, 0.8), milliseconds(800));
}

TEST(Retry, RealJitterIsInRange) {
  const RetryClock clock = RetryClock::Real();
  for (int i = 0; i < 1000; ++i) {
    const double j = clock.jitter();
    ASSERT_GT(j, 0.75);
    ASSERT_LE(j, 1.0);
  }
}

}  // namespace
}  // namespace forkbox::agent
