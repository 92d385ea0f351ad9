// What a wire format (Anthropic Messages, OpenAI Chat Completions) provides to the generic
// provider driver (agent/provider.cc): the request encoding and the response decoders.
//
// Decoders never throw: malformed, truncated or error replies come back as a CallResult whose
// ModelError says what happened, and `retryable` says whether a new attempt may help.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/message.h"
#include "agent/provider.h"
#include "agent/sse.h"
#include "base/secret.h"

namespace forkbox::agent {

// A decoded reply: a complete Response, or an error (with `retryable` for transient ones).
struct Decoded {
  CallResult result;
  bool retryable = false;
};

// Incremental decoder of one streamed reply. Feed raw body bytes as they arrive; assistant text
// goes to the sink as soon as its event is complete.
class StreamDecoder {
 public:
  virtual ~StreamDecoder() = default;
  // Returns false when the stream already failed (an error event, an oversized event, garbage):
  // the caller should stop the transfer and call Finish.
  virtual bool Feed(std::string_view bytes) = 0;
  // Called once the transfer ended. A stream without its final event is a truncated reply.
  virtual Decoded Finish() = 0;
};

// A failed decode of kind `kind`; `retryable`: whether a new attempt may help.
Decoded DecodeFailure(ModelError::Kind kind, std::string message, bool retryable,
                      std::string error_type = "");
// A reply that is not what its format promises (retryable: the next attempt may get a whole one).
// The message is made valid UTF-8: a parser's message may quote the reply's raw bytes.
Decoded Malformed(std::string message);

// How deep a model's JSON (an event, a body, a tool call's input) may nest. Far above any real
// tool input; deeper, a DOM's copy recursed until the parent's stack overflowed.
inline constexpr int kMaxModelJsonDepth = 64;
// Why ParseModelJson discarded a text.
struct JsonDiscard {
  bool too_deep = false;
  // Set: an object names this key twice (it may be "", a key as any other).
  std::optional<std::string> repeated_key;
  // To follow "is"/"are": "nested deeper than 64 levels", "JSON that repeats the key "path" in one
  // object" or "not valid JSON".
  std::string Describe() const;
};
// ipc::ParseJsonBounded at kMaxModelJsonDepth, refusing repeated keys: a discarded value when
// `text` is not JSON, nests deeper, or has an object that names a key twice (then *why, when
// given, says which). Every JSON a model server sends goes through here, so that no reader, a
// tool call's arguments above all ({"path":"a","path":"/etc/x"}), acts on a value picked from
// two.
nlohmann::json ParseModelJson(std::string_view text, JsonDiscard* why = nullptr);

// A reply's usage count: nullopt when `value` is not an integer, else clamped to
// [0, ipc::kMaxReportedCount]. Clamped, not refused: a count is bookkeeping, and refusing the
// reply would lose its content (a task's final summary); unclamped, a negative count undercut
// the token budget and a huge one failed the child's event frame in the parent.
std::optional<int64_t> UsageCount(const nlohmann::json& value);
// The first 120 bytes of `s`, made valid UTF-8, with "..." when cut: a reply quoted in an error.
std::string Excerpt(std::string_view s);
// A reply's name for itself (its id, its model) at `key` of `object`, made valid UTF-8: "" when
// absent, not a string, or over 256 bytes (no name the APIs give; passed on, it is not cut).
std::string ReplyName(const nlohmann::json& object, const char* key);

// `text` with `key` replaced by [REDACTED] wherever it appears, and so every piece of it that a
// cut left: a run of its first kMinRedactedKeyPiece characters or more. What a server reflects is
// quoted cut short in many places (Excerpt, the provider's error page excerpts, the HTTP client's
// protocol errors, an error message's 16 KiB limit), most of which never hold the key; every
// error, log line and request id the provider emits goes through this instead, so a cut that
// falls inside the key prints at most its first 7 characters ("sk-ant-"). A key shorter than that
// is replaced whole only; one shorter than 4 characters is left alone.
inline constexpr size_t kMinRedactedKeyPiece = 8;
std::string RedactKey(std::string_view text, std::string_view key);

// The StreamDecoder of a format whose replies stream as Server-Sent Events: Feed parses them and
// hands each complete event to OnEvent, until the stream fails (an oversized event, or OnEvent's
// Fail); Feed then returns false and failure() holds why.
class SseStreamDecoder : public StreamDecoder {
 public:
  explicit SseStreamDecoder(const TextSink& on_text) : on_text_(on_text) {}
  bool Feed(std::string_view bytes) final;

 protected:
  // Called for each event while the stream has not failed.
  virtual void OnEvent(const SseEvent& ev) = 0;
  void Fail(Decoded why) { failure_ = std::move(why); }
  const std::optional<Decoded>& failure() const { return failure_; }
  // Hands assistant text to the sink (none for empty text).
  void EmitText(const std::string& text) const {
    if (on_text_ && !text.empty()) on_text_(text);
  }

 private:
  TextSink on_text_;
  SseParser parser_;
  std::optional<Decoded> failure_;
};

class WireFormat {
 public:
  virtual ~WireFormat() = default;
  virtual std::string Url(const std::string& base_url) const = 0;
  // "Name: value" lines, one with the key (none when `api_key` is empty: OpenAI-compatible local
  // servers); wiped when they go. Built once per call, kept across its retries.
  virtual SecretLines Headers(const SecretString& api_key) const = 0;
  // Header names whose values are secrets (for redacted logging).
  virtual std::vector<std::string> SecretHeaders() const = 0;
  virtual nlohmann::json EncodeRequest(const Request& request,
                                       const ProviderConfig& config) const = 0;
  virtual Decoded DecodeBody(std::string_view body) const = 0;
  virtual std::unique_ptr<StreamDecoder> NewStreamDecoder(const TextSink& on_text) const = 0;
};

std::unique_ptr<WireFormat> MakeAnthropicWire();
std::unique_ptr<WireFormat> MakeOpenAiWire();

// Shared by both formats: fills error_type/message/request_id from a provider error body
// ({"error":{"type","message","code"},"request_id"}). Returns false if `body` is not such JSON.
// The message is cut to ipc::kMaxErrorMessageBytes with a note, the others to an Excerpt.
bool ParseErrorBody(std::string_view body, ModelError& error);
// True for a provider error type or HTTP status worth retrying when it arrives inside a stream.
bool IsRetryableStreamError(const std::string& error_type, int code);
// A tool's JSON schema as the APIs require it: an object with "type" (an empty or missing schema
// becomes {"type":"object","properties":{}}).
nlohmann::json ToolSchema(const nlohmann::json& schema);
// A new opaque tool-call id for servers that omit one: "call_<n>", unique in this process.
std::string SynthesizeToolCallId();

}  // namespace forkbox::agent
