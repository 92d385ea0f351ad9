// The canonical message model shared by both providers. Providers convert it to and from their
// wire formats (agent/anthropic.h, agent/openai.h); nothing else knows a wire format.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/utf8.h"

namespace forkbox::agent {

enum class Role { kUser, kAssistant };

struct TextBlock {
  std::string text;
};

struct ToolUseBlock {
  std::string id;  // Opaque; synthesised ("call_<n>") when a local server omits it.
  std::string name;
  // An object for a well-formed call. A model's malformed arguments are kept as they came: the
  // raw text as a JSON string when it is not valid JSON, else the non-object value. The loop
  // answers such a call with an is_error result naming the problem (CheckToolCall) and never runs
  // it; the encoders send {} in its place (SentInput).
  nlohmann::json input = nlohmann::json::object();
};

struct ToolResultBlock {
  std::string tool_use_id;
  std::string content;  // Valid UTF-8 (see MakeValidUtf8).
  bool is_error = false;
};

// Anthropic thinking blocks are carried back unchanged (signature included).
struct ThinkingBlock {
  nlohmann::json raw;
};

using ContentBlock = std::variant<TextBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock>;

struct Message {
  Role role = Role::kUser;
  std::vector<ContentBlock> content;
};

struct ToolDef {
  std::string name;
  std::string description;
  nlohmann::json input_schema;  // JSON Schema object.
};

struct Usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cache_creation_input_tokens = 0;
  int64_t cache_read_input_tokens = 0;
};

enum class StopReason {
  kEndTurn,        // anthropic end_turn / openai stop
  kToolUse,        // tool_use / tool_calls
  kMaxTokens,      // max_tokens / length
  kStopSequence,   // stop_sequence
  kPauseTurn,      // pause_turn: send the content back and continue
  kRefusal,        // refusal / content_filter
  kContextWindow,  // model_context_window_exceeded
  kUnknown,
};
const char* StopReasonName(StopReason r);

struct Request {
  std::string system;
  std::vector<Message> messages;
  std::vector<ToolDef> tools;  // Empty: no tools offered (e.g. the forced final summary).
  int64_t max_tokens = 8192;
};

struct Response {
  Message message;  // role == kAssistant
  StopReason stop_reason = StopReason::kUnknown;
  std::string raw_stop_reason;
  Usage usage;
  std::string request_id;
  // As the reply named them ("msg_...", "chatcmpl-..."; the model that answered); empty when it
  // named none (some local servers).
  std::string id;
  std::string model;
};

// Helpers.
std::string TextOf(const Message& m);  // Concatenated text blocks.
std::vector<ToolUseBlock> ToolUsesOf(const Message& m);
// The input as the encoders send it back to the model: the object, or {} for a malformed call.
nlohmann::json SentInput(const ToolUseBlock& use);
// One UTF-8 implementation (base/utf8.h) for the whole agent.
using ::forkbox::MakeValidUtf8;

}  // namespace forkbox::agent
