#include "parent/events.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <type_traits>

#include "parent/signals.h"

namespace forkbox::parent {
namespace {

// When forkbox started (static initialisation): the duration an error object reports.
const std::chrono::steady_clock::time_point kStarted = std::chrono::steady_clock::now();

template <typename T>
nlohmann::json OrNull(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

std::string NewSessionId() {
  unsigned char b[16] = {};
  size_t got = 0;
  while (got < sizeof(b)) {
    ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // Cannot happen for 16 bytes after boot; the id is then less random.
    got += static_cast<size_t>(n);
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0F) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3F) | 0x80);
  char out[37];
  std::snprintf(out, sizeof(out),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

nlohmann::json MessageJson(const agent::Message& message) {
  nlohmann::json content = nlohmann::json::array();
  for (const auto& block : message.content) {
    std::visit(
        [&](const auto& b) {
          using T = std::decay_t<decltype(b)>;
          if constexpr (std::is_same_v<T, agent::TextBlock>) {
            content.push_back({{"type", "text"}, {"text", b.text}});
          } else if constexpr (std::is_same_v<T, agent::ToolUseBlock>) {
            content.push_back({{"type", "tool_use"},
                               {"id", b.id},
                               {"name", b.name},
                               {"input", agent::SentInput(b)}});
          } else if constexpr (std::is_same_v<T, agent::ToolResultBlock>) {
            content.push_back({{"type", "tool_result"},
                               {"tool_use_id", b.tool_use_id},
                               {"content", b.content},
                               {"is_error", b.is_error}});
          }
        },
        block);
  }
  const char* role = message.role == agent::Role::kAssistant ? "assistant" : "user";
  return {{"role", role}, {"content", std::move(content)}};
}

nlohmann::json UsageJson(const agent::Usage& usage) {
  return {{"input_tokens", usage.input_tokens},
          {"output_tokens", usage.output_tokens},
          {"cache_creation_input_tokens", usage.cache_creation_input_tokens},
          {"cache_read_input_tokens", usage.cache_read_input_tokens}};
}

std::string ClaudeStopReason(const agent::Response& response) {
  switch (response.stop_reason) {
    case agent::StopReason::kContextWindow:
      return "model_context_window_exceeded";
    case agent::StopReason::kUnknown:
      return response.raw_stop_reason;
    default:
      return agent::StopReasonName(response.stop_reason);
  }
}

nlohmann::json AssistantMessageJson(const agent::Response& response,
                                    const std::string& requested_model) {
  nlohmann::json message = MessageJson(response.message);
  message["id"] = response.id.empty() ? nlohmann::json(nullptr) : nlohmann::json(response.id);
  message["type"] = "message";
  message["model"] = response.model.empty() ? requested_model : response.model;
  message["stop_reason"] = ClaudeStopReason(response);
  message["usage"] = UsageJson(response.usage);
  return message;
}

nlohmann::json ResultJson(const ResultFields& f) {
  const bool failed = !f.error.empty();
  return {{"type", "result"},
          {"subtype", f.subtype},
          {"is_error", f.is_error},
          {"result", f.result},
          {"duration_ms", f.duration_ms},
          {"duration_api_ms", OrNull(f.duration_api_ms)},
          {"num_turns", OrNull(f.num_turns)},
          {"usage", f.usage ? UsageJson(*f.usage) : nlohmann::json(nullptr)},
          {"total_cost_usd", OrNull(f.total_cost_usd)},
          {"stop_reason", OrNull(f.stop_reason)},
          {"permission_denials", nlohmann::json::array()},
          {"errors", failed ? nlohmann::json::array({f.error}) : nlohmann::json::array()},
          {"exit_code", f.exit_code},
          {"error", failed ? nlohmann::json(f.error) : nlohmann::json(nullptr)}};
}

size_t EventStream::NextWrite(size_t left) {
  if (ended_) return 0;
  if (!InterruptPending()) return left;
  pollfd p{fd_, POLLOUT, 0};
  if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0) return std::min<size_t>(left, PIPE_BUF);
  ended_ = true;
  return 0;
}

std::string EventStream::Line(nlohmann::json event) const {
  event["schema"] = kEventSchemaVersion;
  event["session_id"] = session_id_;
  event["uuid"] = NewSessionId();
  // Replace, never throw: a message may quote a reply's bytes that are not UTF-8.
  return event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void EventStream::Emit(nlohmann::json event) {
  const std::string line = Line(std::move(event));
  std::string_view rest = line;
  while (!rest.empty()) {
    const size_t size = NextWrite(rest.size());
    if (size == 0) return;
    ssize_t n = ::write(fd_, rest.data(), size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (on_failure_) on_failure_(n < 0 ? errno : EIO);
      return;
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

nlohmann::json ErrorResultJson(int exit_code, const std::string& message, bool session_ran) {
  const bool interrupted = exit_code > 128;  // 128 + the signal that ended the run.
  ResultFields f;
  f.subtype = exit_code == 2   ? "error_usage"
              : exit_code == 4 ? "error_sandbox"
              : interrupted    ? "error_interrupted"
                               : "error_startup";
  f.exit_code = exit_code;
  f.error = message;
  f.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - kStarted)
                      .count();
  if (session_ran) {
    f.duration_api_ms.reset();
    f.num_turns.reset();
    f.usage.reset();
    f.total_cost_usd.reset();
  }
  nlohmann::json j = ResultJson(f);
  j["schema"] = kEventSchemaVersion;
  j["uuid"] = NewSessionId();
  return j;
}

}  // namespace forkbox::parent
