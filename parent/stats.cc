#include "parent/stats.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "agent/pricing.h"
#include "base/format.h"
#include "base/saturate.h"

namespace forkbox::parent {

namespace {

// One figure summed over the session's tasks.
int64_t SumOverTasks(const std::vector<TaskRecord>& tasks, int64_t ipc::ResultStats::*field) {
  int64_t sum = 0;
  for (const auto& t : tasks) sum = SaturatingAdd(sum, t.stats.*field);
  return sum;
}

}  // namespace

int64_t SessionStats::KeptOutBytes() const {
  return SumOverTasks(tasks, &ipc::ResultStats::tool_output_bytes);
}
int64_t SessionStats::ChildInputTokens() const {
  return SumOverTasks(tasks, &ipc::ResultStats::input_tokens);
}
int64_t SessionStats::ChildCacheReadTokens() const {
  return SumOverTasks(tasks, &ipc::ResultStats::cache_read_input_tokens);
}
int64_t SessionStats::ChildCacheCreationTokens() const {
  return SumOverTasks(tasks, &ipc::ResultStats::cache_creation_input_tokens);
}
int64_t SessionStats::ChildOutputTokens() const {
  return SumOverTasks(tasks, &ipc::ResultStats::output_tokens);
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
                        {"model", t.model},
                        {"ok", t.ok},
                        {"stop", t.stats.stop_reason},
                        {"turns", t.stats.turns},
                        {"tokens",
                         {{"input", t.stats.input_tokens},
                          {"output", t.stats.output_tokens},
                          {"cache_read_input", t.stats.cache_read_input_tokens},
                          {"cache_creation_input", t.stats.cache_creation_input_tokens}}},
                        {"tool_calls", t.stats.tool_calls},
                        {"tool_output_bytes", t.stats.tool_output_bytes},
                        {"summary_bytes", t.summary_bytes},
                        {"elapsed_ms", t.stats.elapsed_ms}};
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
       {{"tokens",
         {{"input", stats.ChildInputTokens()},
          {"output", stats.ChildOutputTokens()},
          {"cache_read_input", stats.ChildCacheReadTokens()},
          {"cache_creation_input", stats.ChildCacheCreationTokens()}}},
        {"tool_output_bytes_kept_out", stats.KeptOutBytes()}}},
      {"task_count", stats.tasks.size()},
      {"tasks", std::move(tasks)},
      {"kept_out_bytes", stats.KeptOutBytes()},
  };
}

std::optional<double> SessionCostUsd(const SessionStats& stats, const std::string& model) {
  std::optional<double> total = agent::CostUsd(model, stats.parent_usage);
  for (const TaskRecord& t : stats.tasks) {
    // A task's input_tokens count its cache shares too; the canonical usage's do not.
    agent::Usage usage;
    usage.cache_read_input_tokens = t.stats.cache_read_input_tokens;
    usage.cache_creation_input_tokens = t.stats.cache_creation_input_tokens;
    usage.input_tokens = std::max<int64_t>(0, t.stats.input_tokens - usage.cache_read_input_tokens -
                                                  usage.cache_creation_input_tokens);
    usage.output_tokens = t.stats.output_tokens;
    const std::optional<double> cost = agent::CostUsd(t.model, usage);
    if (!total || !cost) return std::nullopt;
    *total += *cost;
  }
  return total;
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

namespace {

// part * 100 / whole for 0 <= part <= whole (0 for no whole), without overflowing for sums that
// saturated.
int64_t Percent(int64_t part, int64_t whole) {
  if (whole <= 0) return 0;
  if (part >= whole) return 100;
  constexpr int64_t kMaxExact = std::numeric_limits<int64_t>::max() / 100;
  return part <= kMaxExact ? part * 100 / whole : part / (whole / 100);
}

}  // namespace

// Cache reads and writes over the whole session (parent and children).
std::string CacheLine(const SessionStats& stats) {
  const agent::Usage& p = stats.parent_usage;
  const int64_t read = SaturatingAdd(p.cache_read_input_tokens, stats.ChildCacheReadTokens());
  const int64_t written =
      SaturatingAdd(p.cache_creation_input_tokens, stats.ChildCacheCreationTokens());
  // The children's input_tokens include their cache shares; the parent's do not.
  const int64_t input =
      SaturatingAdd(p.input_tokens + p.cache_read_input_tokens + p.cache_creation_input_tokens,
                    stats.ChildInputTokens());
  const int64_t percent = Percent(read, input);
  return "cache: " + Plural(read, "input token") + " read (" + std::to_string(percent) +
         "% of input), " + std::to_string(written) + " written";
}

std::string StatsLine(const SessionStats& stats, int64_t context_bytes) {
  const int64_t parent_tokens = stats.parent_usage.input_tokens + stats.parent_usage.output_tokens;
  return "parent context " + HumanBytes(context_bytes) + " (~" +
         Plural((context_bytes + 3) / 4, "token") + "), " +
         Plural(stats.parent_turns, "parent turn") + ", " + Plural(parent_tokens, "parent token") +
         "; " + Plural(static_cast<int64_t>(stats.tasks.size()), "task") + ", " +
         Plural(SaturatingAdd(stats.ChildInputTokens(), stats.ChildOutputTokens()), "child token") +
         "; " + HumanBytes(stats.KeptOutBytes()) +
         " of child tool output kept out of the parent's context; " + CacheLine(stats);
}

}  // namespace forkbox::parent
