#include "agent/wire.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "base/utf8.h"
#include "ipc/frame.h"
#include "ipc/messages.h"

namespace forkbox::agent {

namespace {

// The fields as sent, uncapped.
bool ReadErrorBody(std::string_view body, ModelError& error) {
  const nlohmann::json j = ParseModelJson(body);
  if (!j.is_object()) return false;
  const auto err = j.find("error");
  if (err == j.end()) return false;
  if (err->is_object()) {
    if (auto t = err->find("type"); t != err->end() && t->is_string()) error.error_type = *t;
    if (auto m = err->find("message"); m != err->end() && m->is_string()) error.message = *m;
    if (auto c = err->find("code"); c != err->end()) {
      // OpenAI: a string code ("context_length_exceeded"); llama.cpp: the HTTP status number.
      if (c->is_string() && error.error_type.empty()) error.error_type = *c;
      if (c->is_string() && error.error_type != c->get<std::string>()) {
        error.error_type += "/" + c->get<std::string>();
      }
    }
  } else if (err->is_string()) {
    error.message = *err;  // Some servers send {"error": "text"}.
  } else {
    return false;
  }
  if (auto id = j.find("request_id"); id != j.end() && id->is_string()) error.request_id = *id;
  return true;
}

}  // namespace

bool ParseErrorBody(std::string_view body, ModelError& error) {
  if (!ReadErrorBody(body, error)) return false;
  // A misbehaving endpoint may send megabytes: the message is bounded as a child's error frame
  // is; the type and the request id are labels, cut shorter.
  error.message =
      CutUtf8WithNote(std::move(error.message), ipc::kMaxErrorMessageBytes, "error message");
  error.error_type = Excerpt(error.error_type);
  error.request_id = Excerpt(error.request_id);
  return true;
}

Decoded DecodeFailure(ModelError::Kind kind, std::string message, bool retryable,
                      std::string error_type) {
  Decoded d;
  ModelError e;
  e.kind = kind;
  e.error_type = std::move(error_type);
  e.message = std::move(message);
  d.result.error = std::move(e);
  d.retryable = retryable;
  return d;
}

Decoded Malformed(std::string message) {
  MakeValidUtf8(message);
  return DecodeFailure(ModelError::Kind::kMalformed, std::move(message), /*retryable=*/true);
}

nlohmann::json ParseModelJson(std::string_view text, JsonDiscard* why) {
  JsonDiscard discard;
  nlohmann::json j =
      ipc::ParseJsonBounded(text, kMaxModelJsonDepth, &discard.too_deep, &discard.repeated_key);
  const bool too_deep = discard.too_deep;
  if (why != nullptr) *why = std::move(discard);
  return too_deep ? nlohmann::json(nlohmann::json::value_t::discarded) : std::move(j);
}

std::string JsonDiscard::Describe() const {
  if (too_deep) return "nested deeper than " + std::to_string(kMaxModelJsonDepth) + " levels";
  if (repeated_key) {
    return "JSON that repeats the key " + Excerpt(nlohmann::json(*repeated_key).dump()) +
           " in one object";
  }
  return "not valid JSON";
}

std::optional<int64_t> UsageCount(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    // Read unsigned: 2^64-1 as int64_t is -1.
    return static_cast<int64_t>(
        std::min<uint64_t>(value.get<uint64_t>(), uint64_t{ipc::kMaxReportedCount}));
  }
  if (!value.is_number_integer()) return std::nullopt;
  return std::clamp<int64_t>(value.get<int64_t>(), 0, ipc::kMaxReportedCount);
}

std::string Excerpt(std::string_view s) {
  std::string out(s.substr(0, 120));
  MakeValidUtf8(out);
  return s.size() > 120 ? out + "..." : out;
}

std::string ReplyName(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  if (it == object.end() || !it->is_string() || it->get_ref<const std::string&>().size() > 256) {
    return "";
  }
  std::string name = *it;
  MakeValidUtf8(name);
  return name;
}

std::string RedactKey(std::string_view text, std::string_view key) {
  if (key.size() < 4) return std::string(text);
  const std::string_view head = key.substr(0, std::min(key.size(), kMinRedactedKeyPiece));
  std::string out;
  size_t from = 0;
  for (size_t at = text.find(head); at != std::string_view::npos; at = text.find(head, from)) {
    size_t n = head.size();
    while (n < key.size() && at + n < text.size() && text[at + n] == key[n]) ++n;
    out.append(text.substr(from, at - from));
    out += "[REDACTED]";
    from = at + n;
  }
  out.append(text.substr(from));
  return out;
}

bool SseStreamDecoder::Feed(std::string_view bytes) {
  if (failure_) return false;
  const bool ok = parser_.Feed(bytes, [this](const SseEvent& ev) {
    if (!failure_) OnEvent(ev);
  });
  if (!ok && !failure_) failure_ = Malformed("stream event larger than the parser's limit");
  return !failure_;
}

bool IsRetryableStreamError(const std::string& error_type, int code) {
  return error_type == "overloaded_error" || error_type == "api_error" ||
         error_type == "server_error" || error_type == "rate_limit_error" || code == 429 ||
         code == 408 || code >= 500;
}

nlohmann::json ToolSchema(const nlohmann::json& schema) {
  nlohmann::json out = schema.is_object() ? schema : nlohmann::json::object();
  if (!out.contains("type")) out["type"] = "object";
  if (out["type"] == "object" && !out.contains("properties")) {
    out["properties"] = nlohmann::json::object();
  }
  return out;
}

std::string SynthesizeToolCallId() {
  static std::atomic<uint64_t> next{1};
  return "call_" + std::to_string(next.fetch_add(1));
}

}  // namespace forkbox::agent
