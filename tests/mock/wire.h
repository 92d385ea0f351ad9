// The two wire formats the mock speaks: how a resolved Reply becomes a JSON body or a list of
// SSE events, and how errors look. Byte-faithful to the providers' documented transcripts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/mock/reply.h"
#include "tests/mock/request_view.h"

namespace forkbox::mock {

// Per-response facts shared by every event of one reply.
struct WireContext {
  std::string model;
  std::string message_id;      // msg_... / chatcmpl-...
  int64_t created = 0;         // Unix seconds (OpenAI "created").
  bool include_usage = false;  // OpenAI stream_options.include_usage.
};

class WireFormat {
 public:
  virtual ~WireFormat() = default;
  virtual Format format() const = 0;
  virtual std::string RequestIdHeader() const = 0;  // "request-id" | "x-request-id"
  virtual std::string RequestId(uint64_t seq) const = 0;
  virtual std::string MessageId(uint64_t seq) const = 0;
  virtual std::string ToolCallId(uint64_t seq, size_t index) const = 0;
  // `reply` is resolved: ids, stop_reason and usage are filled in.
  virtual std::string Body(const Reply& reply, const WireContext& ctx) const = 0;
  // Complete SSE events in order, each ending in "\n\n"; the last one is the stop event
  // (message_stop / data: [DONE]).
  virtual std::vector<std::string> StreamEvents(const Reply& reply,
                                                const WireContext& ctx) const = 0;
  virtual std::string StreamErrorEvent(const ApiError& error) const = 0;
  virtual std::string ErrorBody(const ApiError& error, const std::string& request_id) const = 0;
  // The provider's error type and a default message for an HTTP status.
  virtual std::string DefaultErrorType(int status) const = 0;
  virtual std::string DefaultErrorMessage(int status) const = 0;
};

const WireFormat& WireFor(Format format);

// Splits UTF-8 text into pieces of at most `max_bytes` (never inside a code point).
std::vector<std::string> SplitUtf8(const std::string& text, size_t max_bytes);

// A tool call's arguments as sent: the compact JSON of an object input, or a string input
// verbatim (a model's broken JSON, e.g. llama.cpp's cut `{"command": "ls`).
std::string ArgumentsText(const ToolCall& call);
// The arguments as sent: ArgumentsText, or the object itself with Reply::arguments_object.
nlohmann::ordered_json ArgumentsValue(const ToolCall& call, bool as_object);

// The signature the mock gives a thinking block: a hash of its text, so that a client that sends
// the block back changed (or unsigned) is caught.
std::string ThinkingSignature(const std::string& thinking);

}  // namespace forkbox::mock
