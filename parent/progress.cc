#include "parent/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "base/format.h"
#include "parent/signals.h"
#include "parent/terminal.h"

namespace forkbox::parent {
namespace {

using Clock = std::chrono::steady_clock;

// Cuts to at most `width` code points (one column each, as far as the block is concerned).
std::string Fit(const std::string& s, size_t width) {
  size_t columns = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // A continuation byte.
    if (columns == width) return s.substr(0, i);
    ++columns;
  }
  return s;
}

// A child's or the model's text as one progress line: line breaks and tabs (which
// NeutraliseControls keeps) become spaces, or they would break the block's line count and the
// one-line-per-update log.
std::string OneLine(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  return text;
}

size_t Columns(const std::string& s) {
  size_t columns = 0;
  for (char c : s) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return columns;
}

// "14s", "2m05s".
std::string Elapsed(int64_t ms) {
  const int64_t s = ms / 1000;
  if (s < 60) return std::to_string(s) + "s";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                static_cast<long long>(s % 60));
  return buf;
}

// "950 tokens", "12.3k tokens".
std::string Tokens(int64_t n) {
  if (n < 1000) return Plural(n, "token");
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fk tokens", static_cast<double>(n) / 1000.0);
  return buf;
}

std::string RenderTaskLine(const TaskLine& t, size_t width) {
  const std::string head = "[task " + std::to_string(t.number) + "] ";
  std::string figures = " · turn " + std::to_string(t.turn) + " · " + Elapsed(t.elapsed_ms) +
                        " · " + Tokens(t.tokens);
  std::string activity;
  if (!t.tool.empty()) activity = " · " + t.tool + (t.detail.empty() ? "" : ": " + t.detail);
  std::string description = OneLine(NeutraliseControls(t.description));
  activity = OneLine(NeutraliseControls(activity));
  // The description gives way first (down to a few columns), then the activity is cut at the end.
  const size_t fixed = Columns(head) + Columns(figures) + Columns(Fit(activity, 20));
  const size_t room = width > fixed ? width - fixed : 0;
  if (Columns(description) > std::max<size_t>(room, 12)) {
    description = Fit(description, std::max<size_t>(room, 12) - 1) + "…";
  }
  return Fit(head + description + figures + activity, width);
}

}  // namespace

std::vector<std::string> RenderProgressBlock(const std::vector<TaskLine>& tasks, int64_t queued,
                                             size_t width) {
  std::vector<std::string> lines;
  for (const TaskLine& t : tasks) lines.push_back(RenderTaskLine(t, width));
  if (queued > 0) lines.push_back(Fit(Plural(queued, "task") + " queued", width));
  return lines;
}

Progress::Progress(bool enabled, bool tty, int fd, EventStream* events)
    : enabled_(enabled), tty_(tty), fd_(fd), stops_seen_(JobStopsEnded()), events_(events) {}

void Progress::Write(const std::string& s) { WriteText(fd_, s); }

void Progress::WriteRaw(const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd_, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // Best effort, but a reader gone from stderr stops the session.
      if (n < 0 && fd_ == STDERR_FILENO) RecordStderrFailure(errno);
      return;
    }
    off += static_cast<size_t>(n);
  }
}

std::string Progress::LiveLine(int number, const Live& live) const {
  std::string line = "[task " + std::to_string(number) + "] " + live.description;
  if (live.turn > 0) line += " · turn " + std::to_string(live.turn);
  if (!live.tool.empty()) line += " · " + live.tool;
  if (!live.detail.empty()) line += ": " + live.detail;
  return OneLine(line);
}

void Progress::Redraw(const std::string& permanent) {
  if (const uint32_t stops = JobStopsEnded(); stops != stops_seen_) {
    stops_seen_ = stops;
    drawn_ = 0;
  }
  std::string out;
  if (drawn_ > 0) out += "\x1b[" + std::to_string(drawn_) + "F";  // Up to the first live line.
  out += "\x1b[J";                                                // Clear to the end.
  // Our own cursor controls are the only raw ones: the text in between is neutralised.
  out += NeutraliseControls(permanent);
  size_t width = 100;
  struct winsize ws = {};
  if (ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) width = ws.ws_col - 1;
  std::vector<TaskLine> tasks;
  const auto now = Clock::now();
  for (const auto& [number, live] : live_) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - live.started).count();
    tasks.push_back({number, live.description, live.turn, live.tool, live.detail, ms, live.tokens});
  }
  const std::vector<std::string> lines = RenderProgressBlock(tasks, queued_, width);
  for (const std::string& line : lines) out += line + "\n";
  drawn_ = static_cast<int>(lines.size());
  WriteRaw(out);
}

void Progress::SetQueued(int64_t queued) {
  if (queued == queued_) return;
  queued_ = queued;
  if (live_block()) Redraw("");
}

void Progress::Tick() {
  if (live_block() && !live_.empty()) Redraw("");
}

void Progress::Note(const std::string& line) {
  if (!enabled_) return;
  if (tty_) {
    Redraw(line + "\n");
  } else {
    Write(line + "\n");
  }
}

void Progress::TaskStarted(int number, const std::string& agent_type,
                           const std::string& description, const std::string& tool_use_id) {
  const std::string shown = agent_type + ": " + description;
  live_[number] = Live{shown, agent_type, 0, "", "", tool_use_id, Clock::now(), 0};
  if (events_ != nullptr) {
    events_->Emit({{"type", "system"},
                   {"subtype", "task_started"},
                   {"task_id", tool_use_id},
                   {"parent_tool_use_id", tool_use_id},
                   {"task_number", number},
                   {"subagent_type", agent_type},
                   {"description", description}});
  }
  if (!enabled_) return;
  if (tty_) {
    Redraw("");
  } else {
    Write("[task " + std::to_string(number) + "] started: " + shown + "\n");
  }
}

void Progress::TaskUpdate(int number, const ipc::EventMessage& event) {
  auto it = live_.find(number);
  if (it == live_.end()) return;
  it->second.turn = event.turn;
  it->second.tool = event.tool;
  it->second.detail = event.detail;
  it->second.tokens = event.input_tokens + event.output_tokens;
  if (events_ != nullptr) {
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - it->second.started);
    events_->Emit(
        {{"type", "system"},
         {"subtype", "task_progress"},
         {"task_id", it->second.tool_use_id},
         {"parent_tool_use_id", it->second.tool_use_id},
         {"turn", event.turn},
         {"tool", event.tool},
         {"detail", event.detail},
         {"usage", {{"input_tokens", event.input_tokens}, {"output_tokens", event.output_tokens}}},
         {"elapsed_ms", elapsed.count()}});
  }
  if (!enabled_) return;
  if (tty_) {
    Redraw("");
  } else {
    Write(LiveLine(number, it->second) + "\n");
  }
}

void Progress::TaskFinished(int number, const std::string& line, const TaskRecord& record) {
  auto it = live_.find(number);
  if (events_ != nullptr && it != live_.end()) {
    const ipc::ResultStats& s = record.stats;
    events_->Emit({{"type", "system"},
                   {"subtype", "task_notification"},
                   {"task_id", it->second.tool_use_id},
                   {"parent_tool_use_id", it->second.tool_use_id},
                   {"subagent_type", it->second.agent_type},
                   {"status", record.ok ? "completed" : "failed"},
                   {"stop_reason", s.stop_reason},
                   {"summary", line},
                   {"num_turns", s.turns},
                   {"duration_ms", s.elapsed_ms},
                   {"usage",
                    {{"input_tokens", s.input_tokens},
                     {"output_tokens", s.output_tokens},
                     {"cache_read_input_tokens", s.cache_read_input_tokens},
                     {"cache_creation_input_tokens", s.cache_creation_input_tokens}}},
                   {"tool_output_bytes", s.tool_output_bytes}});
  }
  if (it != live_.end()) live_.erase(it);
  if (!enabled_) return;
  std::string text = "[task " + std::to_string(number) + "] " + OneLine(line) + "\n";
  if (tty_) {
    Redraw(text);
  } else {
    Write(text);
  }
}

}  // namespace forkbox::parent
