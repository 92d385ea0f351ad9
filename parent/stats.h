// What a session did, for /context, the stats line and --json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent/message.h"
#include "base/format.h"
#include "ipc/messages.h"

namespace forkbox::parent {

struct TaskRecord {
  int number = 0;  // 1-based over the session.
  std::string description;
  std::string agent_type;  // The `subagent_type` that ran it.
  std::string model;       // The model it ran on (its agent type's, else the session's).
  bool ok = false;
  std::string error;  // The is_error text when !ok.
  // The child's own figures as its result frame reported them. Without a result: the turns seen
  // in its events, the elapsed time, and stop_reason "error", "timeout" or "cancelled".
  ipc::ResultStats stats;
  int64_t summary_bytes = 0;
};

struct SessionStats {
  int64_t parent_turns = 0;
  int64_t parent_tool_calls = 0;
  agent::Usage parent_usage;
  int64_t api_ms = 0;  // Wall time spent in the parent's model calls.
  std::vector<TaskRecord> tasks;

  int64_t KeptOutBytes() const;
  int64_t ChildInputTokens() const;
  int64_t ChildOutputTokens() const;
  int64_t ChildCacheReadTokens() const;  // Shares of ChildInputTokens.
  int64_t ChildCacheCreationTokens() const;
};

// Bytes of the conversation as the model sees it (text, tool inputs, tool results).
int64_t ContextBytes(const std::vector<agent::Message>& messages);

// The --json object.
nlohmann::json StatsJson(const SessionStats& stats, const std::string& answer,
                         const std::string& stop, int64_t context_bytes);
// What the session's model calls cost at list prices (agent/pricing.h): the parent's on `model`
// and each task's on its own. nullopt when one of them spent tokens on a model without a known
// price: no cost is made up.
std::optional<double> SessionCostUsd(const SessionStats& stats, const std::string& model);
// One human line: "stats: parent context 4.1 KB (~1.0k tokens) · 2 tasks ...".
std::string StatsLine(const SessionStats& stats, int64_t context_bytes);
std::string HumanBytes(int64_t bytes);

}  // namespace forkbox::parent
