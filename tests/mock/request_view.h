// One view of a model request in either wire format: the tools it offers, its system prompt,
// its user turns (tool results included) and its assistant turns. Scenario rules match on it.
// Building the view also validates the request the way the real API does.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace forkbox::mock {

enum class Format { kAnthropic, kOpenAi };
std::string FormatName(Format format);  // "anthropic" | "openai"

// An error the real API would answer with. `param`/`code` are used by the OpenAI shape only.
struct ApiError {
  int status = 400;
  std::string type;  // Empty: the provider's default for the status.
  std::string message;
  std::string param;
  std::string code;
};

struct ToolResultView {
  std::string tool_use_id;
  std::string text;
  bool is_error = false;
};

struct RequestView {
  Format format = Format::kAnthropic;
  std::string model;
  bool stream = false;
  bool include_usage = false;   // OpenAI stream_options.include_usage.
  int64_t thinking_budget = 0;  // Anthropic thinking.budget_tokens; 0: thinking not enabled.
  std::vector<std::string> tool_names;
  std::string system;  // All system text, joined with "\n".
  // One entry per user turn: its text and the text of its tool results, joined with "\n".
  // OpenAI tool messages count as part of the user turn that follows the assistant.
  std::vector<std::string> user_texts;
  int assistant_turns = 0;
  std::vector<ToolResultView> tool_results;

  bool HasTool(const std::string& name) const;
  std::string FirstUserText() const;
  std::string LastUserText() const;
};

// Parses `body` as a request of `format`, filling `view`. Returns the 400 the real API would
// send for an invalid request (bad JSON, missing fields, broken tool_use/tool_result pairing,
// roles out of order, empty text), or nullopt when the request is valid.
std::optional<ApiError> BuildRequestView(Format format, const std::string& body, RequestView* view);

}  // namespace forkbox::mock
