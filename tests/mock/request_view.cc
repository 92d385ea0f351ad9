#include "tests/mock/request_view.h"

#include <set>
#include <utility>

#include "tests/mock/wire.h"

namespace forkbox::mock {
namespace {

using nlohmann::json;

std::optional<ApiError> Invalid(std::string message, std::string param = "",
                                std::string code = "") {
  return ApiError{400, "invalid_request_error", std::move(message), std::move(param),
                  std::move(code)};
}

// obj[key] when it is a string, else "" (json::value would throw on another type).
std::string StringField(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

bool BoolField(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

void AppendLine(std::string* out, const std::string& text) {
  if (text.empty()) return;
  if (!out->empty()) out->push_back('\n');
  out->append(text);
}

// Text of a string, or of the text parts of an array of content parts/blocks.
std::string TextOf(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (!content.is_array()) return out;
  for (const json& part : content) {
    if (part.is_object() && StringField(part, "type") == "text" && part.contains("text") &&
        part["text"].is_string()) {
      AppendLine(&out, part["text"].get<std::string>());
    }
  }
  return out;
}

// Ids joined with ", " for an error message.
std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ", ") + id;
  return out;
}

// ---- Anthropic Messages ----

std::optional<ApiError> CheckAnthropicBlock(const json& block, const std::string& where,
                                            const std::string& role) {
  if (!block.is_object() || !block.contains("type") || !block["type"].is_string()) {
    return Invalid(where + ".type: Field required");
  }
  const std::string type = block["type"].get<std::string>();
  if (type == "text") {
    if (!block.contains("text") || !block["text"].is_string()) {
      return Invalid(where + ".text: Field required");
    }
    if (block["text"].get<std::string>().empty()) {
      return Invalid(where + ".text: text content blocks must be non-empty");
    }
  } else if (type == "tool_use") {
    if (role != "assistant")
      return Invalid(where + ": tool_use blocks are only allowed in assistant messages");
    if (!block.contains("id") || !block["id"].is_string())
      return Invalid(where + ".id: Field required");
    if (!block.contains("name") || !block["name"].is_string()) {
      return Invalid(where + ".name: Field required");
    }
    if (!block.contains("input") || !block["input"].is_object()) {
      return Invalid(where + ".input: Input should be a valid dictionary");
    }
  } else if (type == "tool_result") {
    if (role != "user")
      return Invalid(where + ": tool_result blocks are only allowed in user messages");
    if (!block.contains("tool_use_id") || !block["tool_use_id"].is_string()) {
      return Invalid(where + ".tool_use_id: Field required");
    }
    if (block.contains("content")) {
      const json& c = block["content"];
      if (!c.is_string() && !c.is_array()) {
        return Invalid(where + ".content: Input should be a valid string or list");
      }
      if (c.is_array()) {
        for (size_t k = 0; k < c.size(); ++k) {
          const std::string sub = where + ".content." + std::to_string(k);
          if (!c[k].is_object()) return Invalid(sub + ": Input should be a valid dictionary");
          if (StringField(c[k], "type") == "text") {
            if (auto e = CheckAnthropicBlock(c[k], sub, "user")) return e;
          }
        }
      }
    }
    if (block.contains("is_error") && !block["is_error"].is_boolean()) {
      return Invalid(where + ".is_error: Input should be a valid boolean");
    }
  } else if (type == "thinking") {
    // Thinking blocks must come back exactly as the API sent them.
    if (StringField(block, "signature") != ThinkingSignature(StringField(block, "thinking"))) {
      return Invalid(where + ".signature: Invalid `signature` in `thinking` block");
    }
  } else if (type != "image" && type != "document" && type != "redacted_thinking" &&
             type != "search_result") {
    return Invalid(where + ".type: Input tag '" + type +
                   "' does not match any of the expected tags");
  }
  return std::nullopt;
}

// Extended thinking: a valid config, and in a tool loop the last assistant message must start
// with its (signed) thinking block.
std::optional<ApiError> CheckThinking(const json& body, const json& messages, RequestView* view) {
  if (!body.contains("thinking")) return std::nullopt;
  const json& t = body["thinking"];
  if (!t.is_object() || StringField(t, "type") == "disabled") return std::nullopt;
  if (StringField(t, "type") != "enabled") return Invalid("thinking.type: Input tag mismatch");
  if (!t.contains("budget_tokens") || !t["budget_tokens"].is_number_integer() ||
      t["budget_tokens"].get<int64_t>() < 1024) {
    return Invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024");
  }
  view->thinking_budget = t["budget_tokens"].get<int64_t>();
  if (body["max_tokens"].get<int64_t>() <= view->thinking_budget) {
    return Invalid("`max_tokens` must be greater than `thinking.budget_tokens`");
  }
  const json& last = messages.back();
  if (StringField(last, "role") != "user" || !last.contains("content") ||
      !last["content"].is_array() || last["content"].empty() ||
      StringField(last["content"][0], "type") != "tool_result" || messages.size() < 2) {
    return std::nullopt;
  }
  const json& assistant = messages[messages.size() - 2];
  // Not an object: the message checks below answer for it (json::value would throw here).
  if (!assistant.is_object()) return std::nullopt;
  const json content = assistant.value("content", json());
  const std::string first = content.is_array() && !content.empty() ? StringField(content[0], "type")
                                                                   : std::string("text");
  if (first == "thinking" || first == "redacted_thinking") return std::nullopt;
  return Invalid("messages." + std::to_string(messages.size() - 2) +
                 ".content.0.type: Expected `thinking` or `redacted_thinking`, but found `" +
                 first +
                 "`. When `thinking` is enabled, a final `assistant` message must start with a "
                 "thinking block.");
}

// model, max_tokens and stream.
std::optional<ApiError> ReadAnthropicSettings(const json& body, RequestView* view) {
  if (!body.contains("model") || !body["model"].is_string())
    return Invalid("model: Field required");
  view->model = body["model"].get<std::string>();
  if (!body.contains("max_tokens")) return Invalid("max_tokens: Field required");
  if (!body["max_tokens"].is_number_integer() || body["max_tokens"].get<int64_t>() < 1) {
    return Invalid("max_tokens: Input should be a valid integer greater than or equal to 1");
  }
  if (body.contains("stream")) {
    if (!body["stream"].is_boolean()) return Invalid("stream: Input should be a valid boolean");
    view->stream = body["stream"].get<bool>();
  }
  return std::nullopt;
}

std::optional<ApiError> ReadAnthropicSystem(const json& body, RequestView* view) {
  if (!body.contains("system")) return std::nullopt;
  const json& s = body["system"];
  if (!s.is_string() && !s.is_array())
    return Invalid("system: Input should be a valid string or list");
  if (s.is_array()) {
    for (size_t i = 0; i < s.size(); ++i) {
      if (!s[i].is_object() || StringField(s[i], "type") != "text") {
        return Invalid("system." + std::to_string(i) + ".type: Input should be 'text'");
      }
      if (auto e = CheckAnthropicBlock(s[i], "system." + std::to_string(i), "system")) return e;
    }
  }
  view->system = TextOf(s);
  return std::nullopt;
}

std::optional<ApiError> ReadAnthropicTools(const json& body, RequestView* view) {
  if (!body.contains("tools")) return std::nullopt;
  if (!body["tools"].is_array()) return Invalid("tools: Input should be a valid list");
  std::set<std::string> names;
  for (size_t i = 0; i < body["tools"].size(); ++i) {
    const json& t = body["tools"][i];
    const std::string where = "tools." + std::to_string(i);
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
      return Invalid(where + ".name: Field required");
    }
    // Client tools need a schema; server tools (with a "type") do not.
    if (!t.contains("type") && (!t.contains("input_schema") || !t["input_schema"].is_object())) {
      return Invalid(where + ".input_schema: Field required");
    }
    const std::string name = t["name"].get<std::string>();
    if (!names.insert(name).second) return Invalid("tools: Tool names must be unique.");
    view->tool_names.push_back(name);
  }
  return std::nullopt;
}

// messages[i] is a dictionary with a valid role that alternates with the previous message's.
std::optional<ApiError> CheckAnthropicRole(const json& messages, size_t i, std::string* role_out) {
  const json& m = messages[i];
  const std::string where = "messages." + std::to_string(i);
  if (!m.is_object()) return Invalid(where + ": Input should be a valid dictionary");
  if (!m.contains("role") || !m["role"].is_string())
    return Invalid(where + ".role: Field required");
  const std::string role = m["role"].get<std::string>();
  if (role != "user" && role != "assistant") {
    return Invalid(where + ".role: Input should be 'user' or 'assistant'");
  }
  if (i == 0 && role != "user")
    return Invalid("messages: first message must use the \"user\" role");
  if (i > 0 && StringField(messages[i - 1], "role") == role) {
    return Invalid(
        "messages: roles must alternate between \"user\" and \"assistant\", but found "
        "multiple \"" +
        role + "\" roles in a row");
  }
  *role_out = role;
  return std::nullopt;
}

std::optional<ApiError> CheckAnthropicContent(const json& m, const std::string& where,
                                              bool final_assistant) {
  if (!m.contains("content")) return Invalid(where + ".content: Field required");
  const json& content = m["content"];
  if (!content.is_string() && !content.is_array()) {
    return Invalid(where + ".content: Input should be a valid string or list");
  }
  if ((content.is_string() && content.get<std::string>().empty()) ||
      (content.is_array() && content.empty())) {
    if (!final_assistant) {
      return Invalid(where +
                     ": all messages must have non-empty content except for the "
                     "optional final assistant message");
    }
  }
  return std::nullopt;
}

// What one message's content holds: its text, the tools it calls and the calls it answers.
struct AnthropicTurn {
  std::string text;
  std::vector<std::string> tool_use_ids;
  std::set<std::string> answered;
};

std::optional<ApiError> ReadToolResult(const json& b, const std::string& where,
                                       const std::vector<std::string>& pending_tool_use_ids,
                                       AnthropicTurn* turn, RequestView* view) {
  const std::string id = b["tool_use_id"].get<std::string>();
  bool known = false;
  for (const auto& p : pending_tool_use_ids) known = known || p == id;
  if (!known) {
    return Invalid(where + ": unexpected `tool_use_id` found in `tool_result` blocks: " + id +
                   ". Each `tool_result` block must have a corresponding `tool_use` "
                   "block in the previous message.");
  }
  turn->answered.insert(id);
  ToolResultView r{id, b.contains("content") ? TextOf(b["content"]) : "", BoolField(b, "is_error")};
  AppendLine(&turn->text, r.text);
  view->tool_results.push_back(std::move(r));
  return std::nullopt;
}

std::optional<ApiError> ReadAnthropicBlocks(const json& content, const std::string& where,
                                            const std::string& role,
                                            const std::vector<std::string>& pending_tool_use_ids,
                                            AnthropicTurn* turn, RequestView* view) {
  turn->text = content.is_string() ? content.get<std::string>() : "";
  if (!content.is_array()) return std::nullopt;
  for (size_t k = 0; k < content.size(); ++k) {
    const std::string bwhere = where + ".content." + std::to_string(k);
    if (auto e = CheckAnthropicBlock(content[k], bwhere, role)) return e;
    const json& b = content[k];
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      AppendLine(&turn->text, b["text"].get<std::string>());
    } else if (type == "tool_use") {
      turn->tool_use_ids.push_back(b["id"].get<std::string>());
    } else if (type == "tool_result") {
      if (auto e = ReadToolResult(b, bwhere, pending_tool_use_ids, turn, view)) return e;
    }
  }
  return std::nullopt;
}

std::optional<ApiError> UnansweredToolUse(const std::string& where, const std::string& ids) {
  return Invalid(
      where + ": `tool_use` ids were found without `tool_result` blocks immediately after: " + ids +
      ". Each `tool_use` block must have a corresponding `tool_result` block in the "
      "next message.");
}

// Every tool_use must be answered by a tool_result in the very next (user) message.
std::optional<ApiError> ReadAnthropicMessages(const json& messages, RequestView* view) {
  std::vector<std::string> pending_tool_use_ids;  // From the previous assistant message.
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages." + std::to_string(i);
    std::string role;
    if (auto e = CheckAnthropicRole(messages, i, &role)) return e;
    const bool final_assistant = role == "assistant" && i + 1 == messages.size();
    if (auto e = CheckAnthropicContent(m, where, final_assistant)) return e;
    AnthropicTurn turn;
    if (auto e =
            ReadAnthropicBlocks(m["content"], where, role, pending_tool_use_ids, &turn, view)) {
      return e;
    }
    if (role == "user") {
      std::vector<std::string> missing;
      for (const auto& id : pending_tool_use_ids) {
        if (!turn.answered.count(id)) missing.push_back(id);
      }
      const std::string missing_ids = JoinIds(missing);
      if (!missing_ids.empty()) return UnansweredToolUse(where, missing_ids);
      view->user_texts.push_back(turn.text);
      pending_tool_use_ids.clear();
    } else {
      ++view->assistant_turns;
      pending_tool_use_ids = turn.tool_use_ids;
    }
  }
  if (!pending_tool_use_ids.empty()) {
    return UnansweredToolUse("messages." + std::to_string(messages.size() - 1),
                             JoinIds(pending_tool_use_ids));
  }
  return std::nullopt;
}

std::optional<ApiError> BuildAnthropic(const json& body, RequestView* view) {
  if (auto e = ReadAnthropicSettings(body, view)) return e;
  if (auto e = ReadAnthropicSystem(body, view)) return e;
  if (auto e = ReadAnthropicTools(body, view)) return e;
  if (!body.contains("messages")) return Invalid("messages: Field required");
  const json& messages = body["messages"];
  if (!messages.is_array()) return Invalid("messages: Input should be a valid list");
  if (messages.empty()) return Invalid("messages: at least one message is required");
  if (auto e = CheckThinking(body, messages, view)) return e;
  return ReadAnthropicMessages(messages, view);
}

// ---- OpenAI Chat Completions ----

std::optional<ApiError> Missing(const std::string& param) {
  return Invalid("Missing required parameter: '" + param + "'.", param,
                 "missing_required_parameter");
}

// The errors for a parameter `name` that must be a non-empty array.
std::optional<ApiError> CheckNonEmptyArray(const json& value, const std::string& name) {
  if (!value.is_array()) {
    return Invalid("Invalid type for '" + name + "': expected an array.", name, "invalid_type");
  }
  if (value.empty()) {
    return Invalid("Invalid '" + name +
                       "': empty array. Expected an array with minimum length 1, but got an "
                       "empty array instead.",
                   name, "empty_array");
  }
  return std::nullopt;
}

// model, stream and stream_options.
std::optional<ApiError> ReadOpenAiSettings(const json& body, RequestView* view) {
  if (!body.contains("model") || !body["model"].is_string()) {
    return Invalid("you must provide a model parameter");
  }
  view->model = body["model"].get<std::string>();
  if (body.contains("stream") && !body["stream"].is_null()) {
    if (!body["stream"].is_boolean()) {
      return Invalid("Invalid type for 'stream': expected a boolean.", "stream", "invalid_type");
    }
    view->stream = body["stream"].get<bool>();
  }
  if (!body.contains("stream_options") || body["stream_options"].is_null()) return std::nullopt;
  if (!view->stream) {
    return Invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                   "stream_options", "invalid_value");
  }
  const json& so = body["stream_options"];
  if (!so.is_object()) {
    return Invalid("Invalid type for 'stream_options': expected an object.", "stream_options",
                   "invalid_type");
  }
  if (so.contains("include_usage") && !so["include_usage"].is_boolean()) {
    return Invalid("Invalid type for 'stream_options.include_usage': expected a boolean.",
                   "stream_options.include_usage", "invalid_type");
  }
  view->include_usage = BoolField(so, "include_usage");
  return std::nullopt;
}

std::optional<ApiError> ReadOpenAiTools(const json& body, RequestView* view) {
  if (!body.contains("tools")) return std::nullopt;
  const json& tools = body["tools"];
  if (auto e = CheckNonEmptyArray(tools, "tools")) return e;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) {
      return Missing(where + ".function");
    }
    if (!t["function"].contains("name") || !t["function"]["name"].is_string()) {
      return Missing(where + ".function.name");
    }
    view->tool_names.push_back(t["function"]["name"].get<std::string>());
  }
  return std::nullopt;
}

// A message object with one of the supported roles.
std::optional<ApiError> CheckOpenAiRole(const json& m, const std::string& where,
                                        std::string* role_out) {
  if (!m.is_object())
    return Invalid("Invalid type for '" + where + "': expected an object.", where, "invalid_type");
  if (!m.contains("role")) return Missing(where + ".role");
  const std::string role = m["role"].is_string() ? m["role"].get<std::string>() : "";
  if (role != "tool" && role != "assistant" && role != "user" && role != "system" &&
      role != "developer" && role != "function") {
    return Invalid("Invalid value: '" + role +
                       "'. Supported values are: 'system', 'assistant', "
                       "'user', 'function', 'tool', and 'developer'.",
                   where + ".role", "invalid_value");
  }
  *role_out = role;
  return std::nullopt;
}

// An assistant message's tool_calls; their ids go to `open_calls`.
std::optional<ApiError> ReadOpenAiToolCalls(const json& calls, const std::string& where,
                                            std::vector<std::string>* open_calls) {
  if (auto e = CheckNonEmptyArray(calls, where + ".tool_calls")) return e;
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string cw = where + ".tool_calls[" + std::to_string(k) + "]";
    const json& c = calls[k];
    if (!c.is_object() || !c.contains("id") || !c["id"].is_string()) return Missing(cw + ".id");
    if (!c.contains("type")) return Missing(cw + ".type");
    if (!c.contains("function") || !c["function"].is_object()) return Missing(cw + ".function");
    if (!c["function"].contains("name") || !c["function"]["name"].is_string()) {
      return Missing(cw + ".function.name");
    }
    if (!c["function"].contains("arguments")) return Missing(cw + ".function.arguments");
    if (!c["function"]["arguments"].is_string()) {
      return Invalid("Invalid type for '" + cw +
                         ".function.arguments': expected a string, "
                         "but got " +
                         std::string(c["function"]["arguments"].type_name()) + " instead.",
                     cw + ".function.arguments", "invalid_type");
    }
    open_calls->push_back(c["id"].get<std::string>());
  }
  return std::nullopt;
}

// Reads the messages in order: an assistant's tool calls must be answered by tool messages before
// any other message, and consecutive user and tool messages make one user turn.
class OpenAiMessageReader {
 public:
  explicit OpenAiMessageReader(RequestView* view) : view_(view) {}

  std::optional<ApiError> Read(const json& messages) {
    for (size_t i = 0; i < messages.size(); ++i) {
      if (auto e = ReadMessage(messages[i], i)) return e;
    }
    return Unanswered();
  }

 private:
  std::optional<ApiError> Unanswered() const {
    if (open_calls_.empty()) return std::nullopt;
    return Invalid(
        "An assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'. The following tool_call_ids did not have "
        "response messages: " +
            JoinIds(open_calls_),
        "messages.[" + std::to_string(open_calls_at_) + "].role");
  }

  void AddToUserTurn(const std::string& text) {
    if (in_user_turn_) {
      AppendLine(&view_->user_texts.back(), text);
    } else {
      view_->user_texts.push_back(text);
    }
    in_user_turn_ = true;
  }

  std::optional<ApiError> ReadMessage(const json& m, size_t i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    std::string role;
    if (auto e = CheckOpenAiRole(m, where, &role)) return e;
    if (role != "tool") {
      if (auto e = Unanswered()) return e;
    }
    // Like the local servers that reject them: reasoning is never sent back.
    for (const char* key : {"reasoning_content", "reasoning"}) {
      if (role == "assistant" && m.contains(key)) {
        return Invalid("Unrecognized request argument supplied: " + where + "." + key,
                       where + "." + key, "unknown_parameter");
      }
    }
    const bool has_content = m.contains("content") && !m["content"].is_null();
    if (has_content && !m["content"].is_string() && !m["content"].is_array()) {
      return Invalid(
          "Invalid type for '" + where + ".content': expected one of a string or array of objects.",
          where + ".content", "invalid_type");
    }
    if (role == "system" || role == "developer") {
      if (!has_content) return Missing(where + ".content");
      AppendLine(&view_->system, TextOf(m["content"]));
      return std::nullopt;
    }
    if (role == "user") {
      if (!has_content) return Missing(where + ".content");
      AddToUserTurn(TextOf(m["content"]));
      return std::nullopt;
    }
    if (role == "tool") return ReadTool(m, i, where, has_content);
    // assistant (or legacy function)
    in_user_turn_ = false;
    if (role == "function") return std::nullopt;
    return ReadAssistant(m, i, where, has_content);
  }

  std::optional<ApiError> ReadTool(const json& m, size_t i, const std::string& where,
                                   bool has_content) {
    if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string()) {
      return Invalid(
          "Missing parameter 'tool_call_id': messages with role 'tool' must have a "
          "'tool_call_id'.",
          "messages.[" + std::to_string(i) + "].tool_call_id");
    }
    const std::string id = m["tool_call_id"].get<std::string>();
    auto it = open_calls_.begin();
    while (it != open_calls_.end() && *it != id) ++it;
    if (it == open_calls_.end()) {
      return Invalid(
          "Invalid parameter: messages with role 'tool' must be a response to a "
          "preceeding message with 'tool_calls'.",
          "messages.[" + std::to_string(i) + "].role");
    }
    open_calls_.erase(it);
    if (!has_content) return Missing(where + ".content");
    ToolResultView r{id, TextOf(m["content"]), false};
    AddToUserTurn(r.text);
    view_->tool_results.push_back(std::move(r));
    return std::nullopt;
  }

  std::optional<ApiError> ReadAssistant(const json& m, size_t i, const std::string& where,
                                        bool has_content) {
    ++view_->assistant_turns;
    const bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (!has_content && !has_calls) return Missing(where + ".content");
    if (!has_calls) return std::nullopt;
    if (auto e = ReadOpenAiToolCalls(m["tool_calls"], where, &open_calls_)) return e;
    open_calls_at_ = i;
    return std::nullopt;
  }

  RequestView* view_;
  std::vector<std::string> open_calls_;  // Ids of the last assistant tool_calls not yet answered.
  size_t open_calls_at_ = 0;
  bool in_user_turn_ = false;
};

std::optional<ApiError> BuildOpenAi(const json& body, RequestView* view) {
  if (auto e = ReadOpenAiSettings(body, view)) return e;
  if (auto e = ReadOpenAiTools(body, view)) return e;
  if (!body.contains("messages")) return Missing("messages");
  const json& messages = body["messages"];
  if (auto e = CheckNonEmptyArray(messages, "messages")) return e;
  return OpenAiMessageReader(view).Read(messages);
}

}  // namespace

std::string FormatName(Format format) {
  return format == Format::kAnthropic ? "anthropic" : "openai";
}

bool RequestView::HasTool(const std::string& name) const {
  for (const auto& t : tool_names) {
    if (t == name) return true;
  }
  return false;
}

std::string RequestView::FirstUserText() const {
  return user_texts.empty() ? "" : user_texts.front();
}

std::string RequestView::LastUserText() const {
  return user_texts.empty() ? "" : user_texts.back();
}

std::optional<ApiError> BuildRequestView(Format format, const std::string& body,
                                         RequestView* view) {
  *view = RequestView{};
  view->format = format;
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    if (format == Format::kOpenAi) {
      return Invalid(
          "We could not parse the JSON body of your request. (HINT: This likely means "
          "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
          "payload, but what was sent was not valid JSON.)");
    }
    return Invalid("There was an error parsing the body of your request: not valid JSON");
  }
  if (!parsed.is_object()) {
    return Invalid(format == Format::kOpenAi ? "Invalid type for body: expected an object."
                                             : "Input should be a valid dictionary");
  }
  return format == Format::kAnthropic ? BuildAnthropic(parsed, view) : BuildOpenAi(parsed, view);
}

}  // namespace forkbox::mock
