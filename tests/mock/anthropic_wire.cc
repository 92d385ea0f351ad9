// Anthropic Messages: POST /v1/messages, as in docs.anthropic.com (messages, streaming, errors).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/mock/wire.h"

namespace forkbox::mock {
namespace {

using ojson = nlohmann::ordered_json;

std::string Dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

std::string StopReason(const std::string& canonical) {
  return canonical == "context_window" ? "model_context_window_exceeded" : canonical;
}

ojson UsageJson(const Usage& u, int64_t output_tokens) {
  ojson usage;
  usage["input_tokens"] = u.input_tokens;
  usage["cache_creation_input_tokens"] = u.cache_creation_input_tokens;
  usage["cache_read_input_tokens"] = u.cache_read_input_tokens;
  usage["output_tokens"] = output_tokens;
  return usage;
}

ojson StopSequence(const Reply& r) {
  return r.stop_reason == "stop_sequence" && !r.stop_sequence.empty() ? ojson(r.stop_sequence)
                                                                      : ojson(nullptr);
}

ojson MessageJson(const Reply& r, const WireContext& ctx, bool stream_start) {
  ojson m;
  m["id"] = ctx.message_id;
  m["type"] = "message";
  m["role"] = "assistant";
  m["model"] = ctx.model;
  m["content"] = ojson::array();
  if (!stream_start) {
    if (!r.thinking.empty()) {
      m["content"].push_back({{"type", "thinking"},
                              {"thinking", r.thinking},
                              {"signature", ThinkingSignature(r.thinking)}});
    }
    if (!r.text.empty()) m["content"].push_back({{"type", "text"}, {"text", r.text}});
    for (const ToolCall& c : r.tool_calls) {
      m["content"].push_back(
          {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", ojson(c.input)}});
    }
  }
  m["stop_reason"] = stream_start ? ojson(nullptr) : ojson(StopReason(r.stop_reason));
  m["stop_sequence"] = stream_start ? ojson(nullptr) : StopSequence(r);
  m["usage"] = UsageJson(r.usage, stream_start ? 1 : r.usage.output_tokens);
  return m;
}

std::string Event(const std::string& name, const ojson& data) {
  return "event: " + name + "\ndata: " + Dump(data) + "\n\n";
}

class Anthropic final : public WireFormat {
 public:
  Format format() const override { return Format::kAnthropic; }
  std::string RequestIdHeader() const override { return "request-id"; }
  std::string RequestId(uint64_t seq) const override { return Id("req_011CMock", seq); }
  std::string MessageId(uint64_t seq) const override { return Id("msg_01Mock", seq); }
  std::string ToolCallId(uint64_t seq, size_t index) const override {
    return Id("toolu_01Mock", seq * 100 + index);
  }

  std::string Body(const Reply& r, const WireContext& ctx) const override {
    return Dump(MessageJson(r, ctx, false));
  }

  std::vector<std::string> StreamEvents(const Reply& r, const WireContext& ctx) const override {
    std::vector<std::string> events;
    events.push_back(Event("message_start",
                           {{"type", "message_start"}, {"message", MessageJson(r, ctx, true)}}));
    int index = 0;
    if (!r.thinking.empty()) AddThinking(r.thinking, index++, events);
    if (!r.text.empty()) {
      events.push_back(
          Event("content_block_start", {{"type", "content_block_start"},
                                        {"index", index},
                                        {"content_block", {{"type", "text"}, {"text", ""}}}}));
      // The documented transcript has a ping right after the first block starts.
      events.push_back("event: ping\ndata: {\"type\": \"ping\"}\n\n");
      for (const std::string& piece :
           SplitUtf8(r.text, std::max<size_t>(16, (r.text.size() + 31) / 32))) {
        events.push_back(
            Event("content_block_delta", {{"type", "content_block_delta"},
                                          {"index", index},
                                          {"delta", {{"type", "text_delta"}, {"text", piece}}}}));
      }
      events.push_back(
          Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}}));
      ++index;
    }
    for (const ToolCall& c : r.tool_calls) {
      events.push_back(Event(
          "content_block_start",
          {{"type", "content_block_start"},
           {"index", index},
           {"content_block",
            {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", ojson::object()}}}}));
      if (index == 0) events.push_back("event: ping\ndata: {\"type\": \"ping\"}\n\n");
      const std::string json = ArgumentsText(c);
      std::vector<std::string> pieces{""};  // The first partial_json is "" as on the wire.
      for (std::string& p : SplitUtf8(json, (json.size() + 2) / 3)) pieces.push_back(std::move(p));
      for (const std::string& piece : pieces) {
        events.push_back(
            Event("content_block_delta",
                  {{"type", "content_block_delta"},
                   {"index", index},
                   {"delta", {{"type", "input_json_delta"}, {"partial_json", piece}}}}));
      }
      events.push_back(
          Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}}));
      ++index;
    }
    if (index == 0) events.push_back("event: ping\ndata: {\"type\": \"ping\"}\n\n");
    events.push_back(
        Event("message_delta",
              {{"type", "message_delta"},
               {"delta",
                {{"stop_reason", StopReason(r.stop_reason)}, {"stop_sequence", StopSequence(r)}}},
               {"usage", UsageJson(r.usage, r.usage.output_tokens)}}));
    events.push_back(Event("message_stop", {{"type", "message_stop"}}));
    return events;
  }

  std::string StreamErrorEvent(const ApiError& e) const override {
    return Event("error", {{"type", "error"},
                           {"error",
                            {{"type", e.type.empty() ? "overloaded_error" : e.type},
                             {"message", e.message.empty() ? "Overloaded" : e.message}}}});
  }

  std::string ErrorBody(const ApiError& e, const std::string& request_id) const override {
    ojson body;
    body["type"] = "error";
    body["error"] = {{"type", e.type.empty() ? DefaultErrorType(e.status) : e.type},
                     {"message", e.message.empty() ? DefaultErrorMessage(e.status) : e.message}};
    body["request_id"] = request_id;
    return Dump(body);
  }

  std::string DefaultErrorType(int status) const override {
    switch (status) {
      case 400:
        return "invalid_request_error";
      case 401:
        return "authentication_error";
      case 402:
        return "billing_error";
      case 403:
        return "permission_error";
      case 404:
        return "not_found_error";
      case 413:
        return "request_too_large";
      case 429:
        return "rate_limit_error";
      case 504:
        return "timeout_error";
      case 529:
        return "overloaded_error";
      default:
        return status >= 500 ? "api_error" : "invalid_request_error";
    }
  }

  std::string DefaultErrorMessage(int status) const override {
    switch (status) {
      case 401:
        return "invalid x-api-key";
      case 403:
        return "Your API key does not have permission to use the specified resource.";
      case 404:
        return "Not found";
      case 413:
        return "Request exceeds the maximum allowed number of bytes.";
      case 429:
        return "Number of requests has exceeded your rate limit.";
      case 500:
        return "Internal server error";
      case 504:
        return "Request timed out";
      case 529:
        return "Overloaded";
      default:
        return "mock error " + std::to_string(status);
    }
  }

 private:
  // A thinking block as the API streams it: thinking_delta pieces, then one signature_delta.
  static void AddThinking(const std::string& thinking, int index,
                          std::vector<std::string>& events) {
    events.push_back(
        Event("content_block_start",
              {{"type", "content_block_start"},
               {"index", index},
               {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}}));
    for (const std::string& piece : SplitUtf8(thinking, (thinking.size() + 2) / 3)) {
      events.push_back(Event("content_block_delta",
                             {{"type", "content_block_delta"},
                              {"index", index},
                              {"delta", {{"type", "thinking_delta"}, {"thinking", piece}}}}));
    }
    events.push_back(Event(
        "content_block_delta",
        {{"type", "content_block_delta"},
         {"index", index},
         {"delta", {{"type", "signature_delta"}, {"signature", ThinkingSignature(thinking)}}}}));
    events.push_back(
        Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}}));
  }

  static std::string Id(const char* prefix, uint64_t seq) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%014llu", prefix, static_cast<unsigned long long>(seq));
    return buf;
  }
};

}  // namespace

const WireFormat& AnthropicWire() {
  static const Anthropic wire;
  return wire;
}

}  // namespace forkbox::mock
