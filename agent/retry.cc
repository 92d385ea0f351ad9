#include "agent/retry.h"

#include <algorithm>
#include <charconv>
#include <random>
#include <thread>

namespace forkbox::agent {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Non-negative decimal number of seconds (or ms), digits with an optional fraction.
std::optional<double> ParseNumber(std::string_view s) {
  s = Trim(s);
  if (s.empty() || s.size() > 32) return std::nullopt;
  bool dot = false, digit = false;
  for (char c : s) {
    if (c == '.' && !dot) {
      dot = true;
    } else if (c >= '0' && c <= '9') {
      digit = true;
    } else {
      return std::nullopt;
    }
  }
  if (!digit) return std::nullopt;
  return std::strtod(std::string(s).c_str(), nullptr);
}

const std::string* Find(const HeaderMap& headers, const std::string& name) {
  auto it = headers.find(name);
  return it == headers.end() ? nullptr : &it->second;
}

}  // namespace

bool IsRetryableStatus(long status) {
  return status == 408 || status == 409 || status == 429 || status >= 500;
}

std::optional<bool> ShouldRetryHeader(const HeaderMap& headers) {
  const std::string* value = Find(headers, "x-should-retry");
  if (value == nullptr) return std::nullopt;
  const std::string_view v = Trim(*value);
  if (v == "true") return true;
  if (v == "false") return false;
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> ServerRequestedDelay(
    const HeaderMap& headers, std::optional<std::chrono::milliseconds> retry_after) {
  std::optional<std::chrono::milliseconds> wait;
  if (const std::string* ms = Find(headers, "retry-after-ms")) {
    if (auto n = ParseNumber(*ms); n && *n <= 1e12) {
      // Half away from zero, as std::llround (no libm); a negative wait is no wait.
      wait = std::chrono::milliseconds(*n > 0 ? static_cast<int64_t>(*n + 0.5) : 0);
    }
  }
  if (!wait) wait = retry_after;
  if (wait && wait->count() > 0 && *wait <= std::chrono::seconds(60)) return wait;
  return std::nullopt;
}

std::chrono::milliseconds BackoffDelay(int retry, double jitter) {
  // A shift, not std::pow: the executables link no libm (one shared library less per start).
  const double seconds =
      std::min(0.5 * static_cast<double>(uint64_t{1} << std::clamp(retry, 0, 30)), 8.0);
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * jitter * 1000.0));
}

RetryClock RetryClock::Real() {
  RetryClock clock;
  clock.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  clock.jitter = [] {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    // (0.75, 1]: 1 - U[0, 0.25).
    return 1.0 - std::uniform_real_distribution<double>(0.0, 0.25)(rng);
  };
  clock.now = [] { return std::chrono::system_clock::now(); };
  return clock;
}

}  // namespace forkbox::agent
