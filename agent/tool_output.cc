#include "agent/tool_output.h"

#include <algorithm>
#include <vector>

#include "agent/message.h"
#include "agent/tools.h"

namespace forkbox::agent {
namespace {

// Byte offset where the last `chars` characters of `s` begin (its characters counted from its
// first byte, as Utf8CharStarts does).
size_t TailStart(std::string_view s, int64_t chars) {
  if (chars <= 0) return s.size();
  std::vector<size_t> starts;
  Utf8CharStarts scan;
  for (size_t i = 0; i < s.size(); ++i) {
    if (scan.Starts(s[i])) starts.push_back(i);
  }
  if (static_cast<int64_t>(starts.size()) <= chars) return 0;
  return starts[starts.size() - static_cast<size_t>(chars)];
}

std::string DroppedMarker(int64_t bytes) {
  return "[... output truncated: " + std::to_string(bytes) + " bytes dropped ...]";
}

}  // namespace

std::string CutOutput(std::string s, int64_t max_chars, int64_t dropped_extra_bytes) {
  if (max_chars < 0) max_chars = 0;
  size_t i = 0;
  int64_t chars = 0;
  Utf8CharStarts scan;
  while (i < s.size()) {
    if (scan.Starts(s[i])) {
      if (chars == max_chars) break;
      ++chars;
    }
    ++i;
  }
  int64_t dropped = static_cast<int64_t>(s.size() - i) + dropped_extra_bytes;
  if (dropped <= 0) return s;
  s.resize(i);
  s += "\n" + DroppedMarker(dropped);
  return s;
}

BoundedOutput::BoundedOutput(int64_t max_chars)
    : max_chars_(std::max<int64_t>(max_chars, 0)), head_chars_limit_(max_chars_ / 2) {}

void BoundedOutput::Append(std::string_view bytes) {
  total_bytes_ += static_cast<int64_t>(bytes.size());
  size_t i = 0;
  // Byte by byte until more characters came than the cap allows: the head up to its limit, then
  // the tail. After that only the last characters matter, which Finish finds, so the rest is
  // appended whole.
  for (; i < bytes.size() && !over_cap_; ++i) {
    const bool start = chars_.Starts(bytes[i]);
    if (!in_tail_ && start && head_chars_ == head_chars_limit_) in_tail_ = true;
    if (!in_tail_) {
      head_chars_ += start ? 1 : 0;
      head_.push_back(bytes[i]);
      continue;
    }
    tail_chars_ += start ? 1 : 0;
    tail_.push_back(bytes[i]);
    over_cap_ = head_chars_ + tail_chars_ > max_chars_;
  }
  tail_.append(bytes.substr(i));
  // 4 bytes per character always hold the last max_chars characters; trim in big steps so the
  // erase cost stays amortised.
  const size_t keep = static_cast<size_t>(max_chars_) * 4 + 4;
  if (tail_.size() > 2 * keep) {
    size_t cut = tail_.size() - keep;
    tail_trimmed_bytes_ += static_cast<int64_t>(cut);
    tail_.erase(0, cut);
  }
}

std::string BoundedOutput::Finish() {
  std::string out;
  int64_t dropped = tail_trimmed_bytes_;
  if (dropped == 0 && !over_cap_) {
    out = head_ + tail_;
  } else {
    size_t start = TailStart(tail_, max_chars_ - head_chars_);
    dropped += static_cast<int64_t>(start);
    out = head_;
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += DroppedMarker(dropped);
    out += '\n';
    out.append(tail_, start, std::string::npos);
  }
  head_.clear();
  tail_.clear();
  size_t replaced = MakeValidUtf8(out);
  if (replaced > 0) {
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += "[" + std::to_string(replaced) +
           " invalid UTF-8 sequences replaced with U+FFFD: the output is not valid UTF-8 text]";
  }
  return out;
}

}  // namespace forkbox::agent
