// What a session did, for /context, the stats line and --json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/message.h"

namespace forkbox::parent {

struct TaskRecord {
  int number = 0;  // 1-based over the session.
  std::string description;
  std::string agent_type;  // The `subagent_type` that ran it.
  bool ok = false;
  std::string error;  // The is_error text when !ok.
  int64_t turns = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t tool_calls = 0;
  int64_t tool_output_bytes = 0;  // Seen by the child, kept out of the parent's context.
  int64_t elapsed_ms = 0;
  std::string stop;  // The child's stop reason, or "error" / "timeout" / "cancelled".
  int64_t summary_bytes = 0;
};

struct SessionStats {
  int64_t parent_turns = 0;
  int64_t parent_tool_calls = 0;
  agent::Usage parent_usage;
  std::vector<TaskRecord> tasks;

  int64_t KeptOutBytes() const;
  int64_t ChildInputTokens() const;
  int64_t ChildOutputTokens() const;
};

// Bytes of the conversation as the model sees it (text, tool inputs, tool results).
int64_t ContextBytes(const std::vector<agent::Message>& messages);

// The --json object.
nlohmann::json StatsJson(const SessionStats& stats, const std::string& answer,
                         const std::string& stop, int64_t context_bytes);
// One human line: "stats: parent context 4.1 KB (~1.0k tokens) · 2 tasks ...".
std::string StatsLine(const SessionStats& stats, int64_t context_bytes);
std::string HumanBytes(int64_t bytes);

}  // namespace forkbox::parent
