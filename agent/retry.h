// The retry policy of the model clients, as the official SDKs implement it: which failures are
// retried, and how long to wait before the next attempt.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace forkbox::agent {

// Response headers with lower-cased names.
using HeaderMap = std::map<std::string, std::string>;

// 408, 409, 429 and every status >= 500 (which includes 529 overloaded).
bool IsRetryableStatus(long status);

// The `x-should-retry` header: "true"/"false" when present (it wins over the status), else nullopt.
std::optional<bool> ShouldRetryHeader(const HeaderMap& headers);

// The wait the server asked for: the `retry-after-ms` header, else `retry_after` (the
// `Retry-After` header as the HTTP client parsed it, delta seconds or an HTTP date: HttpResult).
// Honoured only when 0 < wait <= 60 s (as the SDKs do); nullopt otherwise.
std::optional<std::chrono::milliseconds> ServerRequestedDelay(
    const HeaderMap& headers, std::optional<std::chrono::milliseconds> retry_after);

// 0.5 s * 2^retry, capped at 8 s, times `jitter` (expected in (0.75, 1]). `retry` counts from 0.
std::chrono::milliseconds BackoffDelay(int retry, double jitter);

// Injectable time for tests: how to wait and where jitter comes from.
struct RetryClock {
  std::function<void(std::chrono::milliseconds)> sleep;  // Default: std::this_thread::sleep_for.
  std::function<double()> jitter;                        // Default: uniform in (0.75, 1].
  std::function<std::chrono::system_clock::time_point()> now;  // Default: system_clock::now.
  static RetryClock Real();
};

}  // namespace forkbox::agent
