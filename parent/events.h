// --output-format stream-json: newline-delimited JSON events on stdout, one per line, written as
// they happen (docs/events.md has the schema and an example). The vocabulary follows Claude
// Code's stream-json where the concept is the same. Only what the parent itself has may appear:
// a child's messages and tool output never reach the parent, so they never reach the stream.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agent/message.h"

namespace forkbox::parent {

inline constexpr int kEventSchemaVersion = 1;

enum class OutputFormat { kText, kJson, kStreamJson };

// A random RFC 4122 version 4 UUID (getrandom).
std::string NewSessionId();

// Content blocks as Claude Code spells them: text, tool_use {id, name, input}, tool_result
// {tool_use_id, content, is_error}. A tool_use's input is the one sent to the model (SentInput).
nlohmann::json MessageJson(const agent::Message& message);
nlohmann::json UsageJson(const agent::Usage& usage);
// A reply's stop reason in the Messages API's words, which Claude Code passes on (end_turn,
// tool_use, max_tokens, refusal, model_context_window_exceeded...), whichever the provider; one
// forkbox does not know as the provider said it.
std::string ClaudeStopReason(const agent::Response& response);
// An assistant event's `message`, as Claude Code's (the Messages API's): `id` (the provider's;
// null when it sent none), `type` "message", `role`, `model` (the one that answered, as the reply
// names it; else `requested_model`), `content` (MessageJson), `stop_reason`, `usage` (this call's).
nlohmann::json AssistantMessageJson(const agent::Response& response,
                                    const std::string& requested_model);

// What every `result` object says in Claude Code's words (its SDKResultMessage), built by
// ResultJson alone: the session's result, and the error object of a run that had none.
struct ResultFields {
  std::string subtype;
  int exit_code = 0;
  bool is_error = true;
  std::string error;   // Why; "" for none (`error` null, `errors` []).
  std::string result;  // The answer; "" when there is none.
  int64_t duration_ms = 0;
  // What the run's model calls came to; nullopt when it is not known (null in the object).
  std::optional<int64_t> duration_api_ms = 0;
  std::optional<int64_t> num_turns = 0;
  std::optional<agent::Usage> usage = agent::Usage{};
  std::optional<double> total_cost_usd = 0.0;
  std::optional<std::string> stop_reason;  // The last reply's (ClaudeStopReason); none: null.
};
// type "result", the fields above, `permission_denials` [] (forkbox asks for no permission: a
// tool it does not offer is never called, and what the sandbox refuses is the tool's own error)
// and `errors` (Claude Code's list: [error] or []).
nlohmann::json ResultJson(const ResultFields& fields);

class EventStream {
 public:
  // on_write_failure: called with the errno of each event that could not be written whole.
  EventStream(int fd, std::string session_id, std::function<void(int err)> on_write_failure = {})
      : fd_(fd), session_id_(std::move(session_id)), on_failure_(std::move(on_write_failure)) {}
  // The event as written: with "schema", "session_id" and a "uuid" of its own (as each of Claude
  // Code's messages has), as one line of JSON ending in a newline.
  std::string Line(nlohmann::json event) const;
  // Writes Line(event) with a single write. With an
  // interrupt pending (Ctrl-C, SIGTERM, the waiter's death) it writes only what cannot block
  // (PIPE_BUF once poll says so), and the stream ends at the first write that could: a reader
  // that stopped reading held the session in write() forever, the signal unanswered (a SIGKILL of
  // forkbox's pid left the launcher blocked). The session then ends as the signal asks.
  void Emit(nlohmann::json event);
  const std::string& session_id() const { return session_id_; }

 private:
  // How much of `left` bytes to write next: all of them, or with an interrupt pending what cannot
  // block; 0 ends the stream.
  size_t NextWrite(size_t left);
  int fd_;
  std::string session_id_;
  std::function<void(int err)> on_failure_;
  bool ended_ = false;  // An interrupt ended the stream (NextWrite).
};

// The error object of json and stream-json modes for configuration and usage errors, and for a
// run a signal ended with no session to report it (exit code 128 + the signal): ResultJson's
// fields with `schema` and a `uuid`, no `session_id`. `session_ran`: a session made model calls
// that its process, killed, cannot report (num_turns, duration_api_ms, usage, total_cost_usd are
// then null); else no model call was made, and they are 0.
nlohmann::json ErrorResultJson(int exit_code, const std::string& message, bool session_ran = false);

}  // namespace forkbox::parent
