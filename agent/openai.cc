#include "agent/openai.h"

#include <algorithm>
#include <map>

#include "agent/sse.h"

namespace forkbox::agent {

namespace {

using nlohmann::json;

std::string Clean(const std::string& s) {
  std::string copy = s;
  MakeValidUtf8(copy);
  return copy;
}

Decoded ErrorFromJson(const json& j) {
  ModelError e;
  ParseErrorBody(j.dump(), e);
  int code = 0;
  if (j.contains("error") && j["error"].is_object()) {
    const json& err = j["error"];
    if (err.contains("code") && err["code"].is_number_integer()) code = err["code"].get<int>();
  }
  Decoded d;
  d.retryable = IsRetryableStreamError(e.error_type, code);
  e.kind = e.error_type.find("overloaded") != std::string::npos ? ModelError::Kind::kOverloaded
                                                                : ModelError::Kind::kHttp;
  e.http_status = code;
  if (e.message.empty()) e.message = "error reply without a message";
  d.result.error = std::move(e);
  return d;
}

void ReadUsage(const json& u, Usage& usage) {
  if (!u.is_object()) return;
  auto num = [&](const json& obj, const char* key) -> int64_t {
    auto it = obj.find(key);
    return it != obj.end() ? UsageCount(*it).value_or(0) : 0;
  };
  int64_t cached = 0;
  if (auto details = u.find("prompt_tokens_details"); details != u.end() && details->is_object()) {
    cached = num(*details, "cached_tokens");
  }
  // prompt_tokens includes cached tokens; the canonical input_tokens (Anthropic's) does not.
  usage.input_tokens = std::max<int64_t>(0, num(u, "prompt_tokens") - cached);
  usage.cache_read_input_tokens = cached;
  usage.output_tokens = num(u, "completion_tokens");
}

// What a reply accumulates, streamed or not; Build turns it into a Response.
struct Accumulator {
  struct Call {
    std::string id;
    std::string name;
    std::string arguments;
  };
  std::string text;
  std::string refusal;
  std::vector<Call> calls;
  std::string finish;
  Usage usage;
  std::string id;  // The reply's (every chunk of a stream repeats it): the first one named.
  std::string model;

  void NameFrom(const json& reply) {
    if (id.empty()) id = ReplyName(reply, "id");
    if (model.empty()) model = ReplyName(reply, "model");
  }

  // One tool call (whole or a stream fragment). `position` is its place in this chunk's array,
  // used when a server omits the index.
  void AddCall(const json& tc, size_t position, bool streaming) {
    if (!tc.is_object()) throw std::runtime_error("tool call is not an object");
    size_t index = calls.size();
    if (auto it = tc.find("index"); it != tc.end() && it->is_number_integer()) {
      const int64_t i = it->get<int64_t>();
      if (i < 0 || i > 1024) throw std::runtime_error("tool call index out of range");
      index = static_cast<size_t>(i);
    } else if (!streaming) {
      index = position;
    } else {
      // No index: a new call when it has an id or a name, else more of the last one.
      const bool starts =
          tc.contains("id") || (tc.contains("function") && tc["function"].contains("name"));
      index = starts || calls.empty() ? calls.size() : calls.size() - 1;
    }
    if (index >= calls.size()) calls.resize(index + 1);
    Call& call = calls[index];
    if (auto id = tc.find("id"); id != tc.end() && id->is_string() && call.id.empty())
      call.id = *id;
    auto fn = tc.find("function");
    if (fn == tc.end() || !fn->is_object()) return;
    if (auto name = fn->find("name"); name != fn->end() && name->is_string() && call.name.empty()) {
      call.name = *name;
    }
    if (auto args = fn->find("arguments"); args != fn->end()) {
      if (args->is_string()) {
        call.arguments += args->get<std::string>();
      } else if (args->is_object()) {
        call.arguments = args->dump();  // llama.cpp --tool-args-object.
      } else if (!args->is_null()) {
        call.arguments = args->dump();  // Not an object: the loop tells the model so.
      }
    }
  }

  Decoded Build() {
    if (finish.empty()) return Malformed("reply has no finish_reason");
    Decoded d;
    Response& r = d.result.response;
    r.message.role = Role::kAssistant;
    r.raw_stop_reason = finish;
    r.stop_reason = OpenAiStopReason(finish);
    r.usage = usage;
    r.id = id;
    r.model = model;
    if (!text.empty()) r.message.content.emplace_back(TextBlock{text});
    if (!refusal.empty()) {
      r.message.content.emplace_back(TextBlock{refusal});
      r.stop_reason = StopReason::kRefusal;
    }
    size_t n = 0;
    std::vector<std::string> ids;
    for (Call& call : calls) {
      ++n;
      if (call.name.empty() && call.arguments.empty() && call.id.empty()) continue;  // Index gap.
      if (call.name.empty()) {
        if (r.stop_reason == StopReason::kMaxTokens) continue;
        return Malformed("tool call " + std::to_string(n) + " has no function name");
      }
      ToolUseBlock use;
      if (!call.arguments.empty()) {
        json input = ParseModelJson(call.arguments);
        if (input.is_null()) input = json::object();
        if (input.is_discarded() || !input.is_object()) {
          // A length cut can end a tool call mid-JSON: that call never runs.
          if (r.stop_reason == StopReason::kMaxTokens) continue;
          // Otherwise it is the model's mistake, kept for the loop to answer.
          if (input.is_discarded()) input = call.arguments;
        }
        use.input = std::move(input);
      }
      // Missing or repeated ids (local servers): each call needs its own for its result.
      const bool seen =
          std::any_of(ids.begin(), ids.end(), [&](const std::string& id) { return id == call.id; });
      use.id = call.id.empty() || seen ? SynthesizeToolCallId() : call.id;
      ids.push_back(use.id);
      use.name = call.name;
      r.message.content.emplace_back(std::move(use));
    }
    // Some servers (older Ollama) say "stop" while calling tools.
    if (r.stop_reason == StopReason::kEndTurn && !ToolUsesOf(r.message).empty()) {
      r.stop_reason = StopReason::kToolUse;
    }
    return d;
  }
};

class OpenAiStream : public SseStreamDecoder {
 public:
  using SseStreamDecoder::SseStreamDecoder;

  Decoded Finish() override {
    if (failure()) return *failure();
    if (!done_) {
      return Malformed(chunks_ > 0 ? "stream ended before [DONE] (truncated reply)"
                                   : "stream ended without any chunk (empty reply)");
    }
    return acc_.Build();
  }

 private:
  void OnEvent(const SseEvent& ev) override {
    if (done_) return;
    if (ev.data == "[DONE]") {
      done_ = true;
      return;
    }
    try {
      JsonDiscard why;
      const json j = ParseModelJson(ev.data, &why);
      if (j.is_discarded()) throw std::runtime_error(why.Describe());
      if (!j.is_object()) throw std::runtime_error("chunk is not an object");
      if (j.contains("error") && !j["error"].is_null()) {
        Fail(ErrorFromJson(j));
        return;
      }
      ++chunks_;
      acc_.NameFrom(j);
      if (auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
        ReadUsage(*usage, acc_.usage);
      }
      auto choices = j.find("choices");
      if (choices == j.end() || choices->is_null()) return;
      if (!choices->is_array()) throw std::runtime_error("choices is not an array");
      for (const json& choice : *choices) {
        if (choice.contains("index") && choice["index"].is_number_integer() &&
            choice["index"].get<int64_t>() != 0) {
          continue;  // We ask for one choice.
        }
        if (auto fr = choice.find("finish_reason"); fr != choice.end() && fr->is_string()) {
          acc_.finish = *fr;
        }
        auto delta = choice.find("delta");
        if (delta == choice.end() || !delta->is_object()) continue;
        if (auto c = delta->find("content"); c != delta->end() && c->is_string()) {
          const std::string& text = c->get_ref<const std::string&>();
          acc_.text += text;
          EmitText(text);
        }
        if (auto rf = delta->find("refusal"); rf != delta->end() && rf->is_string()) {
          acc_.refusal += rf->get<std::string>();
        }
        if (auto tcs = delta->find("tool_calls"); tcs != delta->end() && tcs->is_array()) {
          for (size_t i = 0; i < tcs->size(); ++i) acc_.AddCall((*tcs)[i], i, /*streaming=*/true);
        }
      }
    } catch (const std::exception& e) {
      Fail(
          Malformed("malformed stream chunk (" + std::string(e.what()) + "): " + Excerpt(ev.data)));
    }
  }

  Accumulator acc_;
  int chunks_ = 0;
  bool done_ = false;
};

class OpenAiWire : public WireFormat {
 public:
  std::string Url(const std::string& base_url) const override {
    return base_url + "/chat/completions";
  }
  SecretLines Headers(const SecretString& api_key) const override {
    SecretLines h;
    h.Add("content-type: application/json");
    h.Add("accept: application/json");
    if (!api_key.empty()) h.Add("authorization: Bearer " + api_key.str());
    return h;
  }
  std::vector<std::string> SecretHeaders() const override { return {"authorization"}; }
  json EncodeRequest(const Request& request, const ProviderConfig& config) const override {
    return OpenAiEncodeRequest(request, config);
  }
  Decoded DecodeBody(std::string_view body) const override { return OpenAiDecodeBody(body); }
  std::unique_ptr<StreamDecoder> NewStreamDecoder(const TextSink& on_text) const override {
    return NewOpenAiStreamDecoder(on_text);
  }
};

}  // namespace

StopReason OpenAiStopReason(std::string_view raw) {
  if (raw == "stop") return StopReason::kEndTurn;
  if (raw == "tool_calls" || raw == "function_call") return StopReason::kToolUse;
  if (raw == "length") return StopReason::kMaxTokens;
  if (raw == "content_filter") return StopReason::kRefusal;
  return StopReason::kUnknown;
}

namespace {

// One message as Chat Completions wants it: a user or assistant message, preceded by one "tool"
// message per tool result (they must directly follow the assistant message that made the calls).
void AppendOpenAiMessage(const Message& m, json& messages) {
  std::string text;
  json tool_calls = json::array();
  for (const ContentBlock& block : m.content) {
    if (const auto* t = std::get_if<TextBlock>(&block)) {
      text += t->text;
    } else if (const auto* use = std::get_if<ToolUseBlock>(&block)) {
      tool_calls.push_back(
          {{"id", use->id},
           {"type", "function"},
           {"function", {{"name", use->name}, {"arguments", SentInput(*use).dump()}}}});
    } else if (const auto* result = std::get_if<ToolResultBlock>(&block)) {
      std::string content = Clean(result->content);
      if (result->is_error) content = "Error: " + content;
      messages.push_back(
          {{"role", "tool"}, {"tool_call_id", result->tool_use_id}, {"content", content}});
    }
    // Thinking blocks are Anthropic-only and are not sent.
  }
  if (m.role == Role::kUser) {
    if (!text.empty()) messages.push_back({{"role", "user"}, {"content", Clean(text)}});
  } else if (!text.empty() || !tool_calls.empty()) {
    json msg = {{"role", "assistant"}};
    msg["content"] = text.empty() ? json(nullptr) : json(Clean(text));
    if (!tool_calls.empty()) msg["tool_calls"] = std::move(tool_calls);
    messages.push_back(std::move(msg));
  }
}

json OpenAiTools(const std::vector<ToolDef>& defs) {
  json tools = json::array();
  for (const ToolDef& t : defs) {
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", t.name},
                       {"description", t.description},
                       {"parameters", ToolSchema(t.input_schema)}}}});
  }
  return tools;
}

}  // namespace

json OpenAiEncodeRequest(const Request& request, const ProviderConfig& config) {
  json body = json::object();
  body["model"] = config.model;
  int64_t max_tokens = request.max_tokens > 0 ? request.max_tokens : config.max_tokens;
  if (request.max_tokens > 0 && config.max_tokens > 0) {
    max_tokens = std::min(request.max_tokens, config.max_tokens);
  }
  const bool official = config.base_url.find("://api.openai.com") != std::string::npos;
  body[official ? "max_completion_tokens" : "max_tokens"] = max_tokens;
  json messages = json::array();
  if (!request.system.empty()) {
    messages.push_back({{"role", "system"}, {"content", Clean(request.system)}});
  }
  for (const Message& m : request.messages) AppendOpenAiMessage(m, messages);
  body["messages"] = std::move(messages);
  if (!request.tools.empty()) body["tools"] = OpenAiTools(request.tools);
  if (config.stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

Decoded OpenAiDecodeBody(std::string_view body) {
  JsonDiscard why;
  const json j = ParseModelJson(body, &why);
  if (j.is_discarded()) {
    return Malformed("reply is " + why.Describe() + ": " + Excerpt(body));
  }
  if (!j.is_object()) return Malformed("reply is not a JSON object: " + Excerpt(body));
  if (j.contains("error") && !j["error"].is_null()) return ErrorFromJson(j);
  try {
    Accumulator acc;
    acc.NameFrom(j);
    if (auto usage = j.find("usage"); usage != j.end()) ReadUsage(*usage, acc.usage);
    const json& choices = j.at("choices");
    if (!choices.is_array() || choices.empty()) return Malformed("reply has no choices");
    const json& choice = choices.at(0);
    if (auto fr = choice.find("finish_reason"); fr != choice.end() && fr->is_string()) {
      acc.finish = *fr;
    }
    const json& message = choice.at("message");
    if (!message.is_object()) return Malformed("choice message is not an object");
    if (auto c = message.find("content"); c != message.end() && c->is_string()) acc.text = *c;
    if (auto rf = message.find("refusal"); rf != message.end() && rf->is_string()) {
      acc.refusal = *rf;
    }
    if (auto tcs = message.find("tool_calls"); tcs != message.end() && tcs->is_array()) {
      for (size_t i = 0; i < tcs->size(); ++i) acc.AddCall((*tcs)[i], i, /*streaming=*/false);
    }
    return acc.Build();
  } catch (const std::exception& e) {
    return Malformed("malformed reply (" + std::string(e.what()) + "): " + Excerpt(body));
  }
}

std::unique_ptr<StreamDecoder> NewOpenAiStreamDecoder(const TextSink& on_text) {
  return std::make_unique<OpenAiStream>(on_text);
}

std::unique_ptr<WireFormat> MakeOpenAiWire() { return std::make_unique<OpenAiWire>(); }

}  // namespace forkbox::agent
