#include "agent/cancel.h"

#include <signal.h>

#include <cerrno>

namespace forkbox::agent {

int PollUnlessCancelled(pollfd* fds, nfds_t nfds, int timeout_ms, const CancelCheck& cancelled,
                        bool* was_cancelled) {
  *was_cancelled = false;
  timespec ts{};
  timespec* timeout = nullptr;
  if (timeout_ms >= 0) {
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = static_cast<long>(timeout_ms % 1000) * 1'000'000L;
    timeout = &ts;
  }
  if (!cancelled) return ::ppoll(fds, nfds, timeout, nullptr);
  sigset_t stop, before;
  sigemptyset(&stop);
  for (int sig : kStopSignals) sigaddset(&stop, sig);
  if (pthread_sigmask(SIG_BLOCK, &stop, &before) != 0) return ::ppoll(fds, nfds, timeout, nullptr);
  int n = 0;
  if (cancelled()) {
    *was_cancelled = true;
  } else {
    sigset_t during = before;  // The stop signals open only while waiting.
    for (int sig : kStopSignals) sigdelset(&during, sig);
    n = ::ppoll(fds, nfds, timeout, &during);
  }
  const int saved = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  errno = saved;
  return n;
}

bool SleepUnlessCancelled(std::chrono::milliseconds duration, const CancelCheck& cancelled) {
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + duration;
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(end - Clock::now()).count();
    bool was_cancelled = false;
    if (left <= 0) return !(cancelled && cancelled());
    PollUnlessCancelled(nullptr, 0, static_cast<int>(left), cancelled, &was_cancelled);
    if (was_cancelled) return false;
  }
}

}  // namespace forkbox::agent
