#include "parent/events.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <type_traits>

#include "parent/signals.h"

namespace forkbox::parent {

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

size_t EventStream::NextWrite(size_t left) {
  if (ended_) return 0;
  if (!InterruptPending()) return left;
  pollfd p{fd_, POLLOUT, 0};
  if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0) return std::min<size_t>(left, PIPE_BUF);
  ended_ = true;
  return 0;
}

void EventStream::Emit(nlohmann::json event) {
  event["schema"] = kEventSchemaVersion;
  event["session_id"] = session_id_;
  std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
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

nlohmann::json ErrorResultJson(int exit_code, const std::string& message) {
  const bool interrupted = exit_code > 128;  // 128 + the signal that ended the run.
  const char* subtype = exit_code == 2   ? "error_usage"
                        : exit_code == 4 ? "error_sandbox"
                        : interrupted    ? "error_interrupted"
                                         : "error_startup";
  return {{"type", "result"},       {"subtype", subtype}, {"is_error", true},
          {"exit_code", exit_code}, {"error", message},   {"schema", kEventSchemaVersion}};
}

}  // namespace forkbox::parent
