// One small interface to the model, with two real implementations over agent::HttpClient:
// Anthropic Messages and OpenAI-compatible Chat Completions.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "agent/cancel.h"
#include "agent/message.h"
#include "ipc/messages.h"

namespace forkbox::agent {

// The provider settings, one type from the command line to the child's provider
// (agent/provider_settings.h resolves and validates it).
using ProviderConfig = ipc::ProviderSettings;

// Why a call failed, after retries.
struct ModelError {
  enum class Kind {
    kHttp,        // Non-retryable HTTP status (or retries exhausted on a retryable one).
    kTransport,   // Connection failure / timeout after retries.
    kMalformed,   // Unparseable or truncated reply after retries.
    kOverloaded,  // In-stream overloaded error after retries.
    kConfig,      // Bad configuration (unknown provider, missing key for Anthropic, bad URL).
    kCancelled,
    kContextOverflow,  // HTTP 400 saying the prompt exceeds the model's context window.
  };
  Kind kind = Kind::kHttp;
  std::string provider;  // "anthropic" | "openai"; the ToString prefix.
  int http_status = 0;
  std::string error_type;  // The provider's error type, e.g. "rate_limit_error".
  std::string message;     // The provider's message or the HTTP client's error; never the key.
  std::string request_id;
  int attempts = 0;
  // One line for the user: "anthropic: HTTP 401 authentication_error: invalid x-api-key
  // (request_id req_123) after 1 attempt".
  std::string ToString() const;
};

// Outcome of one Complete call.
struct CallResult {
  bool ok() const { return !error.has_value(); }
  Response response;
  std::optional<ModelError> error;
};

// Streaming callback: receives assistant text fragments as they arrive (the parent prints them).
// Fragments of an attempt that later fails are followed by a retry; callers that print must be
// prepared for that (the parent prints a notice).
using TextSink = std::function<void(std::string_view fragment)>;

class Provider {
 public:
  virtual ~Provider() = default;
  virtual CallResult Complete(const Request& request, const TextSink& on_text) = 0;
  virtual const ProviderConfig& config() const = 0;
};

// A failed attempt about to be retried (for the user: retries must never be silent waits).
struct RetryNotice {
  int http_status = 0;        // 0: a transport failure or a broken reply.
  std::string reason;         // The error, one line, key redacted.
  int64_t wait_ms = 0;        // How long before the next attempt.
  bool server_asked = false;  // The wait comes from retry-after / retry-after-ms.
  int next_attempt = 0;       // 2 for the first retry.
  int attempts = 0;           // max_retries + 1.
};

// How the retry backoff waits and draws jitter (default: really sleeps; a test seam), and when to
// give up.
struct ProviderHooks {
  std::function<void(std::chrono::milliseconds)> sleep;
  std::function<double()> jitter;                  // In (0.75, 1].
  std::function<void(std::string_view line)> log;  // Verbose log lines; default: stderr.
  // The user's "stop" (the parent's Ctrl-C). Polled during a request (by the HTTP client, at least
  // once a second) and before and during retry waits; true ends the call with Kind::kCancelled.
  // With it and no `sleep`, retry waits end early when it turns true.
  CancelCheck cancelled;
  // Told before each retry wait; may be empty.
  std::function<void(const RetryNotice&)> on_retry;
  // Told once per attempt as soon as the request is fully written to the connection, before
  // its reply is awaited (work that must not delay a request can start here); may be empty.
  std::function<void()> on_request_sent;
};
// Creates the provider (one keep-alive connection per Provider object) for settings taken as they
// are (resolve them first: agent/provider_settings.h). Settings that ValidateProviderSettings
// refuses, or an HTTP stack that cannot load, are an InvalidArgument whose message reads like
// the configuration ModelError ("<provider> configuration error: ..."). Not thread-safe: one
// Provider per thread.
Result<std::unique_ptr<Provider>> MakeProvider(const ProviderConfig& config,
                                               const ProviderHooks& hooks = {});

}  // namespace forkbox::agent
