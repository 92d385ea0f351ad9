#include "agent/anthropic.h"

#include <algorithm>
#include <limits>
#include <map>

#include "agent/sse.h"

namespace forkbox::agent {

namespace {

using nlohmann::json;

json DumpSafe(const std::string& s) {
  // Strings must be valid UTF-8 for JSON; the loop already cleans tool output, this is the
  // backstop.
  std::string copy = s;
  MakeValidUtf8(copy);
  return copy;
}

json EncodeBlock(const ContentBlock& block) {
  if (const auto* text = std::get_if<TextBlock>(&block)) {
    if (text->text.empty()) return nullptr;  // The API rejects empty text blocks.
    return {{"type", "text"}, {"text", DumpSafe(text->text)}};
  }
  if (const auto* use = std::get_if<ToolUseBlock>(&block)) {
    return {{"type", "tool_use"}, {"id", use->id}, {"name", use->name}, {"input", SentInput(*use)}};
  }
  if (const auto* result = std::get_if<ToolResultBlock>(&block)) {
    json j = {{"type", "tool_result"}, {"tool_use_id", result->tool_use_id}};
    if (!result->content.empty()) j["content"] = DumpSafe(result->content);
    if (result->is_error) j["is_error"] = true;
    return j;
  }
  return std::get<ThinkingBlock>(block).raw;
}

void AddUsage(const json& u, Usage& usage) {
  if (!u.is_object()) return;
  // Cumulative counts: a later message_delta overwrites, never adds.
  auto take = [&](const char* key, int64_t& field) {
    if (auto it = u.find(key); it != u.end()) field = UsageCount(*it).value_or(field);
  };
  take("input_tokens", usage.input_tokens);
  take("output_tokens", usage.output_tokens);
  take("cache_creation_input_tokens", usage.cache_creation_input_tokens);
  take("cache_read_input_tokens", usage.cache_read_input_tokens);
}

// Converts one complete reply content block. Unknown block types (thinking, redacted_thinking,
// server tool blocks) are carried back unchanged.
bool DecodeBlock(const json& b, std::vector<ContentBlock>& out, std::string* error) {
  if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) {
    *error = "content block without a type";
    return false;
  }
  const std::string type = b["type"];
  if (type == "text") {
    if (!b.contains("text") || !b["text"].is_string()) {
      *error = "text block without text";
      return false;
    }
    std::string text = b["text"];
    if (!text.empty()) out.emplace_back(TextBlock{std::move(text)});
    return true;
  }
  if (type == "tool_use") {
    ToolUseBlock use;
    if (b.contains("id") && b["id"].is_string()) use.id = b["id"];
    if (use.id.empty()) use.id = SynthesizeToolCallId();
    if (!b.contains("name") || !b["name"].is_string() || b["name"].get<std::string>().empty()) {
      *error = "tool_use block without a name";
      return false;
    }
    use.name = b["name"];
    // A non-object input is the model's mistake, kept for the loop to answer.
    if (b.contains("input") && !b["input"].is_null()) use.input = b["input"];
    out.emplace_back(std::move(use));
    return true;
  }
  out.emplace_back(ThinkingBlock{b});
  return true;
}

Decoded ErrorFromJson(const json& j) {
  ModelError e;
  ParseErrorBody(j.dump(), e);
  const bool retryable = IsRetryableStreamError(e.error_type, 0);
  Decoded d = DecodeFailure(
      e.error_type == "overloaded_error" ? ModelError::Kind::kOverloaded : ModelError::Kind::kHttp,
      e.message.empty() ? "error event without a message" : e.message, retryable, e.error_type);
  d.result.error->request_id = e.request_id;
  return d;
}

class AnthropicStream : public SseStreamDecoder {
 public:
  using SseStreamDecoder::SseStreamDecoder;

  Decoded Finish() override {
    if (failure()) return *failure();
    if (!stopped_) {
      return Malformed(started_ ? "stream ended before message_stop (truncated reply)"
                                : "stream ended before message_start (empty or truncated reply)");
    }
    if (raw_stop_.empty()) return Malformed("stream ended without a stop_reason");
    Decoded d;
    Response& r = d.result.response;
    r.message.role = Role::kAssistant;
    r.raw_stop_reason = raw_stop_;
    r.stop_reason = AnthropicStopReason(raw_stop_);
    r.usage = usage_;
    r.id = id_;
    r.model = model_;
    for (auto& [index, slot] : slots_) {
      if (!slot.closed && r.stop_reason != StopReason::kMaxTokens) {
        return Malformed("content block " + std::to_string(index) + " never closed");
      }
      if (slot.is_tool) {
        json input = json::object();
        if (!slot.partial_json.empty()) {
          input = ParseModelJson(slot.partial_json);
          if (input.is_discarded() || !input.is_object()) {
            // A max_tokens cut can end a tool call mid-JSON: that call never runs.
            if (r.stop_reason == StopReason::kMaxTokens) continue;
            // Otherwise the model's mistake goes back to it (DecodeBlock marks the call).
            input = input.is_discarded() ? json(slot.partial_json) : std::move(input);
          }
        } else if (!slot.closed) {
          continue;
        }
        slot.block["input"] = std::move(input);
      } else if (slot.has_json && !slot.partial_json.empty()) {
        json input = ParseModelJson(slot.partial_json);
        if (!input.is_discarded()) slot.block["input"] = std::move(input);
      }
      std::string error;
      if (!DecodeBlock(slot.block, r.message.content, &error)) return Malformed(error);
    }
    return d;
  }

 private:
  struct Slot {
    json block;
    std::string partial_json;
    bool is_tool = false;
    bool has_json = false;
    bool closed = false;
  };

  void OnEvent(const SseEvent& ev) override {
    if (stopped_) return;
    try {
      JsonDiscard why;
      const json j = ParseModelJson(ev.data, &why);
      if (j.is_discarded()) throw std::runtime_error(why.Describe());
      std::string type = ev.event;
      if (j.is_object() && j.contains("type") && j["type"].is_string()) type = j["type"];
      if (type == "ping") return;
      if (type == "error") {
        Fail(ErrorFromJson(j));
        return;
      }
      if (!j.is_object()) throw std::runtime_error("event data is not an object");
      if (type == "message_start") {
        started_ = true;
        const json& m = j.at("message");
        if (m.contains("usage")) AddUsage(m["usage"], usage_);
        if (m.contains("stop_reason") && m["stop_reason"].is_string()) raw_stop_ = m["stop_reason"];
        id_ = ReplyName(m, "id");
        model_ = ReplyName(m, "model");
      } else if (type == "content_block_start") {
        OnBlockStart(j);
      } else if (type == "content_block_delta") {
        OnBlockDelta(j);
      } else if (type == "content_block_stop") {
        Need();
        SlotAt(BlockIndex(j)).closed = true;
      } else if (type == "message_delta") {
        Need();
        if (j.contains("delta") && j["delta"].is_object()) {
          const json& delta = j["delta"];
          if (delta.contains("stop_reason") && delta["stop_reason"].is_string()) {
            raw_stop_ = delta["stop_reason"];
          }
        }
        if (j.contains("usage")) AddUsage(j["usage"], usage_);
      } else if (type == "message_stop") {
        Need();
        stopped_ = true;
      }
      // Unknown event types are ignored, as the API's versioning policy asks.
    } catch (const std::exception& e) {
      Fail(
          Malformed("malformed stream event (" + std::string(e.what()) + "): " + Excerpt(ev.data)));
    }
  }

  void OnBlockStart(const json& j) {
    Need();
    const int index = BlockIndex(j);
    Slot slot;
    slot.block = j.at("content_block");
    if (!slot.block.is_object()) throw std::runtime_error("content_block is not an object");
    slot.is_tool = slot.block.value("type", "") == "tool_use";
    if (slot.block.value("type", "") == "text") {
      const std::string text = slot.block.value("text", "");
      EmitText(text);
    }
    slots_[index] = std::move(slot);
  }

  void OnBlockDelta(const json& j) {
    Need();
    Slot& slot = SlotAt(BlockIndex(j));
    const json& delta = j.at("delta");
    const std::string dtype = delta.at("type");
    if (dtype == "text_delta") {
      const std::string& text = delta.at("text").get_ref<const std::string&>();
      AppendTo(slot.block, "text", text);
      EmitText(text);
    } else if (dtype == "input_json_delta") {
      slot.partial_json += delta.at("partial_json").get_ref<const std::string&>();
      slot.has_json = true;
    } else if (dtype == "thinking_delta") {
      AppendTo(slot.block, "thinking", delta.at("thinking").get_ref<const std::string&>());
    } else if (dtype == "signature_delta") {
      AppendTo(slot.block, "signature", delta.at("signature").get_ref<const std::string&>());
    }
    // citations_delta and future delta types: ignored.
  }

  // Appends in place: rebuilding the whole string per delta made a long reply quadratic. A field
  // that is not a string throws (a malformed event), as value() did.
  static void AppendTo(json& block, const char* key, const std::string& piece) {
    json& field = block[key];
    if (field.is_null()) field = std::string();
    field.get_ref<std::string&>() += piece;
  }

  void Need() const {
    if (!started_) throw std::runtime_error("event before message_start");
  }
  // A block's index: a JSON integer that fits an int (get<int> of a float or a huge number is a
  // narrowing cast). An unsigned beyond INT64_MAX reads as negative here, so it is refused too.
  static int BlockIndex(const json& event) {
    const json& index = event.at("index");
    const int64_t value = index.is_number_integer() ? index.get<int64_t>() : -1;
    if (value < 0 || value > std::numeric_limits<int>::max()) {
      throw std::runtime_error("block index is not a small non-negative integer");
    }
    return static_cast<int>(value);
  }

  Slot& SlotAt(int index) {
    auto it = slots_.find(index);
    if (it == slots_.end()) throw std::runtime_error("delta for unknown block index");
    return it->second;
  }

  std::map<int, Slot> slots_;  // By index: the reply's block order.
  Usage usage_;
  std::string raw_stop_;
  std::string id_;  // message_start's.
  std::string model_;
  bool started_ = false;
  bool stopped_ = false;
};

class AnthropicWire : public WireFormat {
 public:
  std::string Url(const std::string& base_url) const override { return base_url + "/v1/messages"; }
  SecretLines Headers(const SecretString& api_key) const override {
    // Each line made in place and moved in: a braced list would copy each one, the key's too.
    SecretLines h;
    h.Add("x-api-key: " + api_key.str());
    h.Add("anthropic-version: 2023-06-01");
    h.Add("content-type: application/json");
    h.Add("accept: application/json");
    return h;
  }
  std::vector<std::string> SecretHeaders() const override { return {"x-api-key"}; }
  json EncodeRequest(const Request& request, const ProviderConfig& config) const override {
    return AnthropicEncodeRequest(request, config);
  }
  Decoded DecodeBody(std::string_view body) const override { return AnthropicDecodeBody(body); }
  std::unique_ptr<StreamDecoder> NewStreamDecoder(const TextSink& on_text) const override {
    return NewAnthropicStreamDecoder(on_text);
  }
};

}  // namespace

StopReason AnthropicStopReason(std::string_view raw) {
  static const std::map<std::string_view, StopReason> kMap = {
      {"end_turn", StopReason::kEndTurn},
      {"tool_use", StopReason::kToolUse},
      {"max_tokens", StopReason::kMaxTokens},
      {"stop_sequence", StopReason::kStopSequence},
      {"pause_turn", StopReason::kPauseTurn},
      {"refusal", StopReason::kRefusal},
      {"model_context_window_exceeded", StopReason::kContextWindow},
  };
  auto it = kMap.find(raw);
  return it == kMap.end() ? StopReason::kUnknown : it->second;
}

// Prompt caching on the conversation: a breakpoint on the last block of the last message moves
// with each request, so every turn reads the previous turn's prefix from cache. With the system
// prompt's and the tools' that is 3 breakpoints (the API allows 4). Thinking blocks cannot carry
// one; the prefix before the breakpoint stays byte-identical between turns.
void MarkConversationBreakpoint(json& messages) {
  if (messages.empty()) return;
  json& last = messages.back()["content"].back();
  if (last.value("type", "") == "thinking" || last.value("type", "") == "redacted_thinking") return;
  last["cache_control"] = {{"type", "ephemeral"}};
}

json AnthropicEncodeRequest(const Request& request, const ProviderConfig& config) {
  json body = json::object();
  body["model"] = config.model;
  int64_t max_tokens = request.max_tokens > 0 ? request.max_tokens : config.max_tokens;
  if (request.max_tokens > 0 && config.max_tokens > 0) {
    max_tokens = std::min(request.max_tokens, config.max_tokens);
  }
  if (config.thinking_budget_tokens > 0) {
    // Extended thinking: the budget counts toward max_tokens, which must stay above it (a capped
    // summary call gets its cap on top of the budget).
    body["thinking"] = {{"type", "enabled"}, {"budget_tokens", config.thinking_budget_tokens}};
    if (max_tokens <= config.thinking_budget_tokens) max_tokens += config.thinking_budget_tokens;
  }
  body["max_tokens"] = max_tokens;
  if (!request.system.empty()) {
    if (config.prompt_caching) {
      body["system"] = json::array({{{"type", "text"},
                                     {"text", DumpSafe(request.system)},
                                     {"cache_control", {{"type", "ephemeral"}}}}});
    } else {
      body["system"] = DumpSafe(request.system);
    }
  }
  json messages = json::array();
  for (const Message& m : request.messages) {
    json content = json::array();
    // tool_result blocks must come first in a user message.
    for (int pass = 0; pass < 2; ++pass) {
      for (const ContentBlock& block : m.content) {
        const bool is_result = std::holds_alternative<ToolResultBlock>(block);
        if (is_result != (pass == 0)) continue;
        json j = EncodeBlock(block);
        if (!j.is_null()) content.push_back(std::move(j));
      }
    }
    if (content.empty()) continue;  // Nothing sendable (e.g. only empty text).
    messages.push_back(
        {{"role", m.role == Role::kUser ? "user" : "assistant"}, {"content", std::move(content)}});
  }
  if (config.prompt_caching) MarkConversationBreakpoint(messages);
  body["messages"] = std::move(messages);
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const ToolDef& t : request.tools) {
      json schema = ToolSchema(t.input_schema);
      tools.push_back({{"name", t.name}, {"description", t.description}, {"input_schema", schema}});
    }
    if (config.prompt_caching) tools.back()["cache_control"] = {{"type", "ephemeral"}};
    body["tools"] = std::move(tools);
  }
  if (config.stream) body["stream"] = true;
  return body;
}

Decoded AnthropicDecodeBody(std::string_view body) {
  JsonDiscard why;
  const json j = ParseModelJson(body, &why);
  if (j.is_discarded()) {
    return Malformed("reply is " + why.Describe() + ": " + Excerpt(body));
  }
  if (!j.is_object()) return Malformed("reply is not a JSON object: " + Excerpt(body));
  if (j.value("type", json()) == "error" || j.contains("error")) return ErrorFromJson(j);
  auto content = j.find("content");
  if (content == j.end() || !content->is_array()) {
    return Malformed("reply has no content array: " + Excerpt(body));
  }
  auto stop = j.find("stop_reason");
  if (stop == j.end() || !stop->is_string()) return Malformed("reply has no stop_reason");
  Decoded d;
  Response& r = d.result.response;
  r.message.role = Role::kAssistant;
  r.raw_stop_reason = *stop;
  r.stop_reason = AnthropicStopReason(r.raw_stop_reason);
  for (const json& b : *content) {
    std::string error;
    if (!DecodeBlock(b, r.message.content, &error)) return Malformed(error);
  }
  if (auto usage = j.find("usage"); usage != j.end()) AddUsage(*usage, r.usage);
  r.id = ReplyName(j, "id");
  r.model = ReplyName(j, "model");
  return d;
}

std::unique_ptr<StreamDecoder> NewAnthropicStreamDecoder(const TextSink& on_text) {
  return std::make_unique<AnthropicStream>(on_text);
}

std::unique_ptr<WireFormat> MakeAnthropicWire() { return std::make_unique<AnthropicWire>(); }

}  // namespace forkbox::agent
