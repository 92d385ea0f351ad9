// --output-format stream-json: newline-delimited JSON events on stdout, one per line, written as
// they happen (docs/events.md has the schema and an example). The vocabulary follows Claude
// Code's stream-json where the concept is the same. Only what the parent itself has may appear:
// a child's messages and tool output never reach the parent, so they never reach the stream.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
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

class EventStream {
 public:
  // on_write_failure: called with the errno of each event that could not be written whole.
  EventStream(int fd, std::string session_id, std::function<void(int err)> on_write_failure = {})
      : fd_(fd), session_id_(std::move(session_id)), on_failure_(std::move(on_write_failure)) {}
  // Adds "schema" and "session_id", writes the event as one line with a single write. With an
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
// run a signal ended with no session to report it (exit code 128 + the signal).
nlohmann::json ErrorResultJson(int exit_code, const std::string& message);

}  // namespace forkbox::parent
