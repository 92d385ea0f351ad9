// --output-format stream-json: newline-delimited JSON events on stdout, one per line, written as
// they happen (docs/events.md has the schema and an example). The vocabulary follows Claude
// Code's stream-json where the concept is the same. Only what the parent itself has may appear:
// a child's messages and tool output never reach the parent, so they never reach the stream.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "agent/message.h"

namespace forkbox::parent {

inline constexpr int kEventSchemaVersion = 1;

enum class OutputFormat { kText, kJson, kStreamJson };

// A random RFC 4122 version 4 UUID (getrandom).
std::string NewSessionId();

// Content blocks as Claude Code spells them: text, tool_use {id, name, input}, tool_result
// {tool_use_id, content, is_error}.
nlohmann::json MessageJson(const agent::Message& message);
nlohmann::json UsageJson(const agent::Usage& usage);

class EventStream {
 public:
  EventStream(int fd, std::string session_id) : fd_(fd), session_id_(std::move(session_id)) {}
  // Adds "schema" and "session_id", writes the event as one line with a single write (best
  // effort: a closed stdout does not stop the session).
  void Emit(nlohmann::json event);
  const std::string& session_id() const { return session_id_; }

 private:
  int fd_;
  std::string session_id_;
};

// The error object of json and stream-json modes for configuration and usage errors.
nlohmann::json ErrorResultJson(int exit_code, const std::string& message);

}  // namespace forkbox::parent
