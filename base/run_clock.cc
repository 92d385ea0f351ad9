#include "base/run_clock.h"

#include <algorithm>

namespace forkbox {

RunClock::RunClock(Source source) : source_(source), last_(source()) {}

RunClock::Duration RunClock::Now() {
  const TimePoint now = source_();
  Duration gap = std::max(now - last_, Duration::zero());
  if (gap > kLook + kLate) gap = kLook;
  ran_ += gap;
  last_ = now;
  return ran_;
}

int RunClock::WaitMs(Duration deadline) {
  const Duration left = deadline - Now();
  if (left <= Duration::zero()) return 0;
  return static_cast<int>(
      std::min(std::chrono::ceil<std::chrono::milliseconds>(left), kLook).count());
}

}  // namespace forkbox
