// Progress on stderr. On a terminal: a live block, one line per running task (number, agent type
// and description, turn, elapsed time, tokens, current tool) and a count of queued tasks, redrawn
// in place. Every other line Progress prints is written after erasing the block, which is then
// redrawn below it, so the block never overwrites text: it starts at the beginning of a line
// (the session ends its streamed text's line before tasks run) and owns the lines below. Otherwise
// (no terminal, or TERM=dumb): plain, append-only lines. Disabled (--quiet): prints nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/message.h"
#include "ipc/messages.h"
#include "parent/events.h"
#include "parent/stats.h"

namespace forkbox::parent {

// One running task as the live block shows it.
struct TaskLine {
  int number = 0;
  std::string description;  // "<agent type>: <description>".
  int64_t turn = 0;
  std::string tool;    // The current tool; "" between tools.
  std::string detail;  // What it does (one line).
  int64_t elapsed_ms = 0;
  int64_t tokens = 0;  // Input + output so far.
};

// The live block's lines for a terminal `width` columns wide (a code point counts as one column):
// one per task, in order, then "N tasks queued" when any are. Each line is neutralised
// (parent/terminal.h) and at most `width` columns; what does not fit is cut from the end (the
// tool's detail first), and the description is shortened first so the figures stay visible.
std::vector<std::string> RenderProgressBlock(const std::vector<TaskLine>& tasks, int64_t queued,
                                             size_t width);

class Progress {
 public:
  // tty: stderr is a terminal that takes cursor controls (TakesCursorControls: live lines; not
  // under TERM=dumb); fd: where to write. events: with stream-json, the
  // tasks' system events (task_started, task_progress, task_notification keyed by the task's
  // tool_use id) and the tool results the parent receives (user messages); emitted also when
  // not enabled (--quiet).
  Progress(bool enabled, bool tty, int fd = 2, EventStream* events = nullptr);
  // A permanent line (printed above the live lines).
  void Note(const std::string& line);
  // `agent_type` is the task's subagent_type (stream-json `subagent_type`).
  void TaskStarted(int number, const std::string& agent_type, const std::string& description,
                   const std::string& tool_use_id);
  // A progress frame of the task's child: its turn, tool and usage so far.
  void TaskUpdate(int number, const ipc::EventMessage& event);
  // Tasks waiting for a free slot (--max-parallel).
  void SetQueued(int64_t queued);
  // Redraws the block so the elapsed times move (about once a second while tasks run).
  void Tick();
  // Whether Tick does anything: a live block on a terminal.
  bool live_block() const { return enabled_ && tty_; }
  // record: what the task did (the task_notification event).
  void TaskFinished(int number, const std::string& line, const TaskRecord& record);
  bool enabled() const { return enabled_; }

 private:
  struct Live {
    std::string description;  // "agent: description", as the lines show it.
    std::string agent_type;
    int64_t turn = 0;
    std::string tool;
    std::string detail;
    std::string tool_use_id;
    std::chrono::steady_clock::time_point started;
    int64_t tokens = 0;
  };
  std::string LiveLine(int number, const Live& live) const;
  void Redraw(const std::string& permanent);
  void Write(const std::string& s);     // Neutralised on a terminal (parent/terminal.h).
  void WriteRaw(const std::string& s);  // Already neutralised, with our own cursor controls.

  bool enabled_;
  bool tty_;
  int fd_;
  int drawn_ = 0;  // Live lines currently on screen.
  // JobStopsEnded() at the last redraw: after a stop the block is drawn anew below what the shell
  // printed ("Stopped", `fg`), not over it.
  uint32_t stops_seen_ = 0;
  std::map<int, Live> live_;
  int64_t queued_ = 0;
  EventStream* events_;
};

}  // namespace forkbox::parent
