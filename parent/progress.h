// Progress on stderr. On a terminal: one live line per running task (description, turn, current
// tool), redrawn in place with ANSI cursor-up and clear-line. Otherwise: plain, append-only lines.
// Disabled (--quiet): prints nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/message.h"
#include "parent/events.h"
#include "parent/stats.h"

namespace forkbox::parent {

class Progress {
 public:
  // tty: stderr is a terminal (live lines); fd: where to write. events: with stream-json, the
  // tasks' system events (task_started, task_progress, task_notification keyed by the task's
  // tool_use id) and the tool results the parent receives (user messages); emitted also when
  // not enabled (--quiet).
  Progress(bool enabled, bool tty, int fd = 2, EventStream* events = nullptr);
  // A permanent line (printed above the live lines).
  void Note(const std::string& line);
  void TaskStarted(int number, const std::string& description, const std::string& tool_use_id);
  void TaskUpdate(int number, int64_t turn, const std::string& tool, const std::string& detail);
  // record: what the task did (the task_notification event).
  void TaskFinished(int number, const std::string& line, const TaskRecord& record);
  void ToolResults(const std::vector<agent::ToolResultBlock>& results);
  bool enabled() const { return enabled_; }

 private:
  struct Live {
    std::string description;
    int64_t turn = 0;
    std::string tool;
    std::string detail;
    std::string tool_use_id;
    std::chrono::steady_clock::time_point started;
  };
  std::string LiveLine(int number, const Live& live) const;
  void Redraw(const std::string& permanent);
  void Write(const std::string& s);     // Neutralised on a terminal (parent/terminal.h).
  void WriteRaw(const std::string& s);  // Already neutralised, with our own cursor controls.

  bool enabled_;
  bool tty_;
  int fd_;
  int drawn_ = 0;  // Live lines currently on screen.
  std::map<int, Live> live_;
  EventStream* events_;
};

}  // namespace forkbox::parent
