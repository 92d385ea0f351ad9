// OpenAI Chat Completions: POST /v1/chat/completions, as in platform.openai.com's API reference.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/mock/wire.h"

namespace forkbox::mock {
namespace {

using ojson = nlohmann::ordered_json;

std::string Dump(const ojson& j, int indent = -1) {
  return j.dump(indent, ' ', false, ojson::error_handler_t::replace);
}

std::string FinishReason(const std::string& canonical) {
  if (canonical == "tool_use") return "tool_calls";
  if (canonical == "max_tokens" || canonical == "context_window") return "length";
  if (canonical == "refusal") return "content_filter";
  return "stop";  // end_turn, stop_sequence, pause_turn
}

ojson UsageJson(const Usage& u) {
  // OpenAI's prompt_tokens include cached tokens; cached_tokens is the cache-read share.
  const int64_t prompt = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
  ojson usage;
  usage["prompt_tokens"] = prompt;
  usage["completion_tokens"] = u.output_tokens;
  usage["total_tokens"] = prompt + u.output_tokens;
  usage["prompt_tokens_details"] = {{"cached_tokens", u.cache_read_input_tokens},
                                    {"audio_tokens", 0}};
  usage["completion_tokens_details"] = {{"reasoning_tokens", 0},
                                        {"audio_tokens", 0},
                                        {"accepted_prediction_tokens", 0},
                                        {"rejected_prediction_tokens", 0}};
  return usage;
}

class OpenAi final : public WireFormat {
 public:
  Format format() const override { return Format::kOpenAi; }
  std::string RequestIdHeader() const override { return "x-request-id"; }
  std::string RequestId(uint64_t seq) const override { return Id("req_mock", seq); }
  std::string MessageId(uint64_t seq) const override { return Id("chatcmpl-Mock", seq); }
  std::string ToolCallId(uint64_t seq, size_t index) const override {
    return Id("call_Mock", seq * 100 + index);
  }

  std::string Body(const Reply& r, const WireContext& ctx) const override {
    ojson message;
    message["role"] = "assistant";
    message["content"] = r.text.empty() && !r.tool_calls.empty() ? ojson(nullptr) : ojson(r.text);
    if (!r.tool_calls.empty()) {
      message["tool_calls"] = ojson::array();
      for (const ToolCall& c : r.tool_calls) {
        message["tool_calls"].push_back(
            {{"id", c.id},
             {"type", "function"},
             {"function",
              {{"name", c.name}, {"arguments", ArgumentsValue(c, r.arguments_object)}}}});
      }
    }
    if (!r.reasoning.empty()) message["reasoning_content"] = r.reasoning;
    message["refusal"] = nullptr;
    message["annotations"] = ojson::array();
    ojson body = Head(ctx, "chat.completion");
    body["choices"] = ojson::array({{{"index", 0},
                                     {"message", message},
                                     {"logprobs", nullptr},
                                     {"finish_reason", FinishReason(r.stop_reason)}}});
    if (!r.no_usage) body["usage"] = UsageJson(r.usage);
    body["service_tier"] = "default";
    body["system_fingerprint"] = "fp_mock";
    return Dump(body);
  }

  std::vector<std::string> StreamEvents(const Reply& r, const WireContext& ctx) const override {
    std::vector<std::string> events;
    ojson role = {{"role", "assistant"},
                  {"content", r.text.empty() ? ojson(nullptr) : ojson("")},
                  {"refusal", nullptr}};
    events.push_back(Chunk(ctx, role, nullptr));
    for (const std::string& piece : SplitUtf8(r.reasoning, (r.reasoning.size() + 2) / 3)) {
      events.push_back(Chunk(ctx, {{"reasoning_content", piece}}, nullptr));
    }
    for (const std::string& piece :
         SplitUtf8(r.text, std::max<size_t>(16, (r.text.size() + 31) / 32))) {
      events.push_back(Chunk(ctx, {{"content", piece}}, nullptr));
    }
    for (size_t k = 0; k < r.tool_calls.size(); ++k) {
      const ToolCall& c = r.tool_calls[k];
      if (r.arguments_object) {  // llama.cpp --tool-args-object: the whole call in one chunk.
        events.push_back(Chunk(
            ctx,
            {{"tool_calls",
              ojson::array(
                  {{{"index", k},
                    {"id", c.id},
                    {"type", "function"},
                    {"function", {{"name", c.name}, {"arguments", ArgumentsValue(c, true)}}}}})}},
            nullptr));
        continue;
      }
      events.push_back(Chunk(
          ctx,
          {{"tool_calls", ojson::array({{{"index", k},
                                         {"id", c.id},
                                         {"type", "function"},
                                         {"function", {{"name", c.name}, {"arguments", ""}}}}})}},
          nullptr));
      const std::string args = ArgumentsText(c);
      for (const std::string& piece : SplitUtf8(args, (args.size() + 2) / 3)) {
        events.push_back(Chunk(
            ctx,
            {{"tool_calls", ojson::array({{{"index", k}, {"function", {{"arguments", piece}}}}})}},
            nullptr));
      }
    }
    events.push_back(Chunk(ctx, ojson::object(), FinishReason(r.stop_reason)));
    if (ctx.include_usage && !r.no_usage) {
      ojson usage = Head(ctx, "chat.completion.chunk");
      usage["system_fingerprint"] = "fp_mock";
      usage["choices"] = ojson::array();
      usage["usage"] = UsageJson(r.usage);
      events.push_back("data: " + Dump(usage) + "\n\n");
    }
    events.push_back("data: [DONE]\n\n");
    return events;
  }

  std::string StreamErrorEvent(const ApiError& e) const override {
    ojson body;
    body["error"] = ErrorJson(e);
    return "data: " + Dump(body) + "\n\n";
  }

  std::string ErrorBody(const ApiError& e, const std::string&) const override {
    ojson body;
    body["error"] = ErrorJson(e);
    return Dump(body, 4) + "\n";  // OpenAI pretty-prints its error bodies.
  }

  std::string DefaultErrorType(int status) const override {
    if (status == 429) return "requests";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
  }

  std::string DefaultErrorMessage(int status) const override {
    switch (status) {
      case 401:
        return "Incorrect API key provided. You can find your API key at "
               "https://platform.openai.com/account/api-keys.";
      case 404:
        return "The model does not exist or you do not have access to it.";
      case 429:
        return "Rate limit reached for requests. Please try again later.";
      case 500:
        return "The server had an error while processing your request. Sorry about that!";
      case 503:
      case 529:
        return "The server is overloaded or not ready yet.";
      default:
        return "mock error " + std::to_string(status);
    }
  }

 private:
  ojson ErrorJson(const ApiError& e) const {
    ojson err;
    err["message"] = e.message.empty() ? DefaultErrorMessage(e.status) : e.message;
    err["type"] = e.type.empty() ? DefaultErrorType(e.status) : e.type;
    err["param"] = e.param.empty() ? ojson(nullptr) : ojson(e.param);
    std::string code = e.code;
    if (code.empty() && e.status == 401) code = "invalid_api_key";
    if (code.empty() && e.status == 429) code = "rate_limit_exceeded";
    err["code"] = code.empty() ? ojson(nullptr) : ojson(code);
    return err;
  }

  static ojson Head(const WireContext& ctx, const char* object) {
    ojson head;
    head["id"] = ctx.message_id;
    head["object"] = object;
    head["created"] = ctx.created;
    head["model"] = ctx.model;
    return head;
  }

  static std::string Chunk(const WireContext& ctx, const ojson& delta, const ojson& finish) {
    ojson chunk = Head(ctx, "chat.completion.chunk");
    chunk["system_fingerprint"] = "fp_mock";
    chunk["choices"] = ojson::array(
        {{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}});
    if (ctx.include_usage) chunk["usage"] = nullptr;
    return "data: " + Dump(chunk) + "\n\n";
  }

  static std::string Id(const char* prefix, uint64_t seq) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%014llu", prefix, static_cast<unsigned long long>(seq));
    return buf;
  }
};

}  // namespace

const WireFormat& OpenAiWire() {
  static const OpenAi wire;
  return wire;
}

}  // namespace forkbox::mock
