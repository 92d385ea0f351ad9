// The child's two outputs: frames to the parent on fd 4, and the optional JSONL transcript.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "agent/message.h"
#include "base/status.h"
#include "ipc/messages.h"

namespace forkbox::child {

// Frames to the parent. A failed write means the parent is gone; the caller decides to stop.
// Every event frame carries the task's usage and tool calls so far (CountUsage after each model
// call, CountToolCall for each call), so the parent can charge and describe a task that dies
// before its result frame.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  // Adds one model call's usage (input counts cache reads and writes too, as ResultStats does).
  void CountUsage(const agent::Usage& usage);
  // One tool call the model made (the loop's LoopOutcome::tool_calls counts the same).
  void CountToolCall();
  // `tool` and `detail` are made one line (ipc::MakeLabel, ipc::MakeEventDetail).
  Status Event(int64_t turn, const std::string& tool, std::string_view detail);
  Status Result(const ipc::ResultMessage& result);
  // Best effort: also echoed to stderr, so a failure is never silent even without a parent. The
  // message is cut to ipc::kMaxErrorMessageBytes with a note, so the frame always fits.
  void Error(const std::string& code, const std::string& message);

 private:
  int fd_;
  int64_t input_tokens_ = 0;
  int64_t output_tokens_ = 0;
  int64_t tool_calls_ = 0;
};

// JSONL records to a descriptor the parent opened append-only. The parent never reads it back.
// A write failure is reported once on stderr and disables further writes (the task goes on).
class Transcript {
 public:
  Transcript() = default;  // Disabled.
  explicit Transcript(int fd) : fd_(fd) {}
  void Write(const nlohmann::json& record);
  bool enabled() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace forkbox::child
