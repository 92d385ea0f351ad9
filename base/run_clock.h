// Time a process ran or waited, but not time it was stopped. steady_clock runs on while a job is
// stopped (Ctrl-Z, SIGSTOP): a tool's or a task's deadline passed during the stop, and the tool was
// killed as timed out the moment the user's `fg` continued it.
#pragma once

#include <chrono>

namespace forkbox {

// One waiting loop's clock. The loop looks at it (Now) at least every kLook: it caps each wait
// at WaitMs. A stopped process cannot look, so a gap between two looks longer than kLook + kLate
// was a stop (or the machine's pause), and counts as kLook: a stop costs a deadline at most
// kLook. Not thread-safe: each loop owns its clock.
class RunClock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;
  using Source = TimePoint (*)();

  static constexpr std::chrono::milliseconds kLook{1000};
  static constexpr std::chrono::milliseconds kLate{1000};

  // Starts at zero; `source` is steady_clock but in tests.
  explicit RunClock(Source source = &std::chrono::steady_clock::now);

  // The run time since construction.
  Duration Now();
  // The timeout of a wait until `deadline` on this clock, in milliseconds: what is left, rounded
  // up, at most kLook; 0 once it passed.
  int WaitMs(Duration deadline);

 private:
  Source source_;
  TimePoint last_;  // The last look.
  Duration ran_{};  // Run time up to last_.
};

}  // namespace forkbox
