#include "parent/stats.h"

#include <cstdio>
#include <type_traits>

namespace forkbox::parent {

int64_t SessionStats::KeptOutBytes() const {
  int64_t sum = 0;
  for (const auto& t : tasks) sum += t.tool_output_bytes;
  return sum;
}

int64_t SessionStats::ChildInputTokens() const {
  int64_t sum = 0;
  for (const auto& t : tasks) sum += t.input_tokens;
  return sum;
}

int64_t SessionStats::ChildOutputTokens() const {
  int64_t sum = 0;
  for (const auto& t : tasks) sum += t.output_tokens;
  return sum;
}

int64_t ContextBytes(const std::vector<agent::Message>& messages) {
  int64_t bytes = 0;
  for (const auto& m : messages) {
    for (const auto& block : m.content) {
      std::visit(
          [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            if constexpr (std::is_same_v<T, agent::TextBlock>) {
              bytes += static_cast<int64_t>(b.text.size());
            } else if constexpr (std::is_same_v<T, agent::ToolUseBlock>) {
              bytes += static_cast<int64_t>(b.name.size() + b.input.dump().size());
            } else if constexpr (std::is_same_v<T, agent::ToolResultBlock>) {
              bytes += static_cast<int64_t>(b.content.size());
            } else {
              bytes += static_cast<int64_t>(b.raw.dump().size());
            }
          },
          block);
    }
  }
  return bytes;
}

nlohmann::json StatsJson(const SessionStats& stats, const std::string& answer,
                         const std::string& stop, int64_t context_bytes) {
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& t : stats.tasks) {
    nlohmann::json j = {{"number", t.number},
                        {"description", t.description},
                        {"agent_type", t.agent_type},
                        {"ok", t.ok},
                        {"stop", t.stop},
                        {"turns", t.turns},
                        {"tokens", {{"input", t.input_tokens}, {"output", t.output_tokens}}},
                        {"tool_calls", t.tool_calls},
                        {"tool_output_bytes", t.tool_output_bytes},
                        {"summary_bytes", t.summary_bytes},
                        {"elapsed_ms", t.elapsed_ms}};
    if (!t.ok) j["error"] = t.error;
    tasks.push_back(std::move(j));
  }
  return {
      {"answer", answer},
      {"stop", stop},
      {"parent",
       {{"turns", stats.parent_turns},
        {"tool_calls", stats.parent_tool_calls},
        {"context_bytes", context_bytes},
        {"tokens",
         {{"input", stats.parent_usage.input_tokens},
          {"output", stats.parent_usage.output_tokens},
          {"cache_read_input", stats.parent_usage.cache_read_input_tokens},
          {"cache_creation_input", stats.parent_usage.cache_creation_input_tokens}}}}},
      {"children",
       {{"tokens", {{"input", stats.ChildInputTokens()}, {"output", stats.ChildOutputTokens()}}},
        {"tool_output_bytes_kept_out", stats.KeptOutBytes()}}},
      {"task_count", stats.tasks.size()},
      {"tasks", std::move(tasks)},
      {"kept_out_bytes", stats.KeptOutBytes()},
  };
}

std::string HumanBytes(int64_t bytes) {
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  } else if (bytes < 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  }
  return buf;
}

std::string StatsLine(const SessionStats& stats, int64_t context_bytes) {
  std::string line =
      "parent context " + HumanBytes(context_bytes) + " (~" +
      std::to_string((context_bytes + 3) / 4) + " tokens), " + std::to_string(stats.parent_turns) +
      " parent turns, " +
      std::to_string(stats.parent_usage.input_tokens + stats.parent_usage.output_tokens) +
      " parent tokens; " + std::to_string(stats.tasks.size()) + " tasks, " +
      std::to_string(stats.ChildInputTokens() + stats.ChildOutputTokens()) + " child tokens; " +
      HumanBytes(stats.KeptOutBytes()) + " of child tool output kept out of the parent's context";
  return line;
}

}  // namespace forkbox::parent
