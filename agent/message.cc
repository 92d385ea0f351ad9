#include "agent/message.h"

#include <variant>

namespace forkbox::agent {

const char* StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kEndTurn:
      return "end_turn";
    case StopReason::kToolUse:
      return "tool_use";
    case StopReason::kMaxTokens:
      return "max_tokens";
    case StopReason::kStopSequence:
      return "stop_sequence";
    case StopReason::kPauseTurn:
      return "pause_turn";
    case StopReason::kRefusal:
      return "refusal";
    case StopReason::kContextWindow:
      return "context_window";
    case StopReason::kUnknown:
      break;
  }
  return "unknown";
}

std::string TextOf(const Message& m) {
  std::string out;
  for (const ContentBlock& block : m.content) {
    if (const auto* text = std::get_if<TextBlock>(&block)) out += text->text;
  }
  return out;
}

std::vector<ToolUseBlock> ToolUsesOf(const Message& m) {
  std::vector<ToolUseBlock> out;
  for (const ContentBlock& block : m.content) {
    if (const auto* use = std::get_if<ToolUseBlock>(&block)) out.push_back(*use);
  }
  return out;
}

nlohmann::json SentInput(const ToolUseBlock& use) {
  return use.input.is_object() ? use.input : nlohmann::json::object();
}

}  // namespace forkbox::agent
