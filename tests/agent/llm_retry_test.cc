// The retry policy: what is retried and how long to wait.
#include <gtest/gtest.h>

#include "agent/retry.h"

namespace forkbox::agent {
namespace {

using std::chrono::milliseconds;

std::chrono::system_clock::time_point At(time_t t) {
  return std::chrono::system_clock::from_time_t(t);
}

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

TEST(Retry, ParseRetryAfterSeconds) {
  const auto now = At(1'000'000'000);
  EXPECT_EQ(ParseRetryAfter("2", now), milliseconds(2000));
  EXPECT_EQ(ParseRetryAfter(" 0.25 ", now), milliseconds(250));
  EXPECT_EQ(ParseRetryAfter("0", now), milliseconds(0));
  EXPECT_EQ(ParseRetryAfter("", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-1", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("soon", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("1e3", now), std::nullopt);
}

TEST(Retry, ParseRetryAfterHttpDate) {
  // Wed, 21 Oct 2015 07:28:00 GMT == 1445412480.
  const time_t date = 1445412480;
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", At(date - 5)), milliseconds(5000));
  EXPECT_EQ(ParseRetryAfter("Wednesday, 21-Oct-15 07:28:00 GMT", At(date - 3)), milliseconds(3000));
  EXPECT_EQ(ParseRetryAfter("Wed Oct 21 07:28:00 2015", At(date - 1)), milliseconds(1000));
  // A date in the past is a negative wait, which ServerRequestedDelay ignores.
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", At(date + 10)), milliseconds(-10000));
  EXPECT_EQ(ParseRetryAfter("Wed, 32 Oct 2015 07:28:00 GMT", At(date)), std::nullopt);
}

TEST(Retry, ServerRequestedDelayPrefersMsAndBoundsTheWait) {
  const auto now = At(1'000'000'000);
  EXPECT_EQ(ServerRequestedDelay({{"retry-after-ms", "150"}, {"retry-after", "3"}}, now),
            milliseconds(150));
  EXPECT_EQ(ServerRequestedDelay({{"retry-after", "3"}}, now), milliseconds(3000));
  EXPECT_EQ(ServerRequestedDelay({{"retry-after-ms", "junk"}, {"retry-after", "1"}}, now),
            milliseconds(1000));
  EXPECT_EQ(ServerRequestedDelay({{"retry-after", "0"}}, now), std::nullopt);
  EXPECT_EQ(ServerRequestedDelay({{"retry-after", "61"}}, now), std::nullopt);
  EXPECT_EQ(ServerRequestedDelay({{"retry-after", "60"}}, now), milliseconds(60000));
  EXPECT_EQ(ServerRequestedDelay({}, now), std::nullopt);
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
