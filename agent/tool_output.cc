#include "agent/tool_output.h"

#include <algorithm>

#include "agent/message.h"
#include "agent/tools.h"

namespace forkbox::agent {
namespace {

// Counts characters the way the cut does: every byte that is not a continuation byte.
int64_t CountChars(std::string_view s) {
  return std::count_if(s.begin(), s.end(),
                       [](char c) { return IsCharStart(static_cast<unsigned char>(c)); });
}

// Byte offset where the last `chars` characters of `s` begin.
size_t TailStart(std::string_view s, int64_t chars) {
  if (chars <= 0) return s.size();
  size_t i = s.size();
  int64_t seen = 0;
  while (i > 0) {
    --i;
    if (IsCharStart(static_cast<unsigned char>(s[i])) && ++seen == chars) return i;
  }
  return 0;
}

std::string DroppedMarker(int64_t bytes) {
  return "[... output truncated: " + std::to_string(bytes) + " bytes dropped ...]";
}

}  // namespace

std::string CutOutput(std::string s, int64_t max_chars, int64_t dropped_extra_bytes) {
  if (max_chars < 0) max_chars = 0;
  size_t i = 0;
  int64_t chars = 0;
  while (i < s.size()) {
    if (IsCharStart(static_cast<unsigned char>(s[i]))) {
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
  // Fill the head up to its character limit (a character's continuation bytes stay with it).
  while (i < bytes.size()) {
    bool start = IsCharStart(static_cast<unsigned char>(bytes[i]));
    if (start && head_chars_ == head_chars_limit_) break;
    if (start) ++head_chars_;
    head_.push_back(bytes[i]);
    ++i;
  }
  if (i == bytes.size()) return;
  std::string_view rest = bytes.substr(i);
  tail_chars_seen_ += CountChars(rest);
  tail_.append(rest);
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
  if (dropped == 0 && head_chars_ + tail_chars_seen_ <= max_chars_) {
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
