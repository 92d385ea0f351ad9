#include "parent/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

#include "parent/terminal.h"

namespace forkbox::parent {
namespace {

// Cuts to at most `width` bytes without splitting a UTF-8 sequence.
std::string Fit(std::string s, size_t width) {
  if (s.size() <= width) return s;
  size_t cut = width;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  s.resize(cut);
  return s;
}

}  // namespace

Progress::Progress(bool enabled, bool tty, int fd, EventStream* events)
    : enabled_(enabled), tty_(tty), fd_(fd), events_(events) {}

void Progress::Write(const std::string& s) { WriteText(fd_, s); }

void Progress::WriteRaw(const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd_, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr gone: progress is best effort.
    off += static_cast<size_t>(n);
  }
}

std::string Progress::LiveLine(int number, const Live& live) const {
  std::string line = "[task " + std::to_string(number) + "] " + live.description;
  if (live.turn > 0) line += " · turn " + std::to_string(live.turn);
  if (!live.tool.empty()) line += " · " + live.tool;
  if (!live.detail.empty()) line += ": " + live.detail;
  return line;
}

void Progress::Redraw(const std::string& permanent) {
  std::string out;
  if (drawn_ > 0) out += "\x1b[" + std::to_string(drawn_) + "F";  // Up to the first live line.
  out += "\x1b[J";                                                // Clear to the end.
  // Our own cursor controls are the only raw ones: the text in between is neutralised.
  out += NeutraliseControls(permanent);
  size_t width = 100;
  struct winsize ws = {};
  if (ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) width = ws.ws_col - 1;
  for (const auto& [number, live] : live_) {
    out += Fit(NeutraliseControls(LiveLine(number, live)), width) + "\n";
  }
  drawn_ = static_cast<int>(live_.size());
  WriteRaw(out);
}

void Progress::Note(const std::string& line) {
  if (!enabled_) return;
  if (tty_) {
    Redraw(line + "\n");
  } else {
    Write(line + "\n");
  }
}

void Progress::TaskStarted(int number, const std::string& description,
                           const std::string& tool_use_id) {
  live_[number] = Live{description, 0, "", "", tool_use_id, std::chrono::steady_clock::now()};
  if (events_ != nullptr) {
    events_->Emit({{"type", "system"},
                   {"subtype", "task_started"},
                   {"task_id", tool_use_id},
                   {"parent_tool_use_id", tool_use_id},
                   {"task_number", number},
                   {"description", description}});
  }
  if (!enabled_) return;
  if (tty_) {
    Redraw("");
  } else {
    Write("[task " + std::to_string(number) + "] started: " + description + "\n");
  }
}

void Progress::TaskUpdate(int number, int64_t turn, const std::string& tool,
                          const std::string& detail) {
  auto it = live_.find(number);
  if (it == live_.end()) return;
  it->second.turn = turn;
  it->second.tool = tool;
  it->second.detail = detail;
  if (events_ != nullptr) {
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - it->second.started);
    events_->Emit({{"type", "system"},
                   {"subtype", "task_progress"},
                   {"task_id", it->second.tool_use_id},
                   {"parent_tool_use_id", it->second.tool_use_id},
                   {"turn", turn},
                   {"tool", tool},
                   {"detail", detail},
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
  std::string text = "[task " + std::to_string(number) + "] " + line + "\n";
  if (tty_) {
    Redraw(text);
  } else {
    Write(text);
  }
}

void Progress::ToolResults(const std::vector<agent::ToolResultBlock>& results) {
  if (events_ == nullptr) return;
  agent::Message message{agent::Role::kUser, {}};
  for (const auto& r : results) message.content.push_back(r);
  events_->Emit(
      {{"type", "user"}, {"message", MessageJson(message)}, {"parent_tool_use_id", nullptr}});
}

}  // namespace forkbox::parent
