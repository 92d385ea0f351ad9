// What the mock sends back for one request: a model reply, or a fault injected instead of it.
// Plain data shared by the scenario rules and SetHandler callbacks.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace forkbox::mock {

struct ToolCall {
  std::string name;
  nlohmann::json input = nlohmann::json::object();
  std::string id;  // Empty: the mock makes one up (toolu_... / call_...).
};

// Token counts; a value of 0 is computed from sizes (see docs/mock.md).
struct Usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cache_creation_input_tokens = 0;  // Never computed: 0 unless given.
  int64_t cache_read_input_tokens = 0;      // Never computed: 0 unless given.
};

struct Fault {
  enum class Kind {
    kStatus,          // HTTP `status` with the provider's error body and retry headers.
    kHtml,            // An nginx-style HTML error page with `status` (default 502).
    kCutStream,       // Close the connection in the middle of an event / of the body.
    kNoStop,          // A clean stream without its stop event (message_stop / [DONE]).
    kMalformedJson,   // HTTP 200 whose JSON (body or one stream event) does not parse.
    kDropConnection,  // Close the socket without sending any response byte.
    kStreamError,     // HTTP 200, then an in-stream error (overloaded) instead of the end.
    kSlowStream,      // The normal reply, with `event_delay_ms` between events / body pieces.
  };
  Kind kind = Kind::kStatus;
  int status = 0;           // 0: a default per kind (status 500, html 502, stream_error 529).
  std::string retry_after;  // Header values; empty: header not sent.
  std::string retry_after_ms;
  std::string should_retry;  // x-should-retry
  std::string error_type;    // Empty: the provider's type for the status.
  std::string message;       // Empty: a default message for the status.
  std::string request_id;    // kStatus, kStreamError: the request id sent instead of the mock's.
  std::string content_encoding;  // kHtml: a content-encoding header (a proxy that gzips).
  int event_delay_ms = 0;        // kSlowStream: pause between events (default 200).
};

// Parses "status", "cut_stream", ...; nullopt for an unknown name.
std::optional<Fault::Kind> FaultKindFromName(const std::string& name);
std::string FaultKindName(Fault::Kind kind);

struct Reply {
  std::string text;
  std::vector<ToolCall> tool_calls;
  // Canonical: end_turn|tool_use|max_tokens|stop_sequence|pause_turn|refusal|context_window.
  // Empty: tool_use when there are tool calls, else end_turn.
  std::string stop_reason;
  std::string stop_sequence;  // Sent with stop_reason stop_sequence.
  Usage usage;
  // Anthropic: a thinking block (signed with ThinkingSignature) first, sent only when the request
  // enabled thinking. OpenAI: `reasoning_content` deltas / message field (local servers).
  std::string thinking;
  std::string reasoning;
  bool arguments_object = false;  // OpenAI: `arguments` as a JSON object (llama.cpp).
  bool no_usage = false;          // OpenAI: no usage at all, even when asked for.
  int delay_ms = 0;               // Pause before the first byte of the response.
  int event_delay_ms = 0;         // Pause between stream events.
  std::optional<Fault> fault;     // When set, sent instead of the reply.
};

}  // namespace forkbox::mock
