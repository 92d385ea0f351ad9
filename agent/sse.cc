#include "agent/sse.h"

namespace forkbox::agent {

bool SseParser::Feed(std::string_view bytes, const Callback& on_event) {
  if (overflowed_) return false;
  if (!started_) {
    // A UTF-8 BOM may precede the stream, and may itself arrive split.
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    head_.append(bytes);
    if (head_.size() < kBom.size() && kBom.starts_with(head_)) return true;
    started_ = true;
    std::string head = std::move(head_);
    head_.clear();
    if (head.starts_with(kBom)) head.erase(0, kBom.size());
    return FeedLines(head, on_event);
  }
  return FeedLines(bytes, on_event);
}

bool SseParser::FeedLines(std::string_view bytes, const Callback& on_event) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (bytes[i] == '\n') {
        ++i;
        continue;
      }
    }
    const size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(i));
      break;
    }
    line_.append(bytes.substr(i, end - i));
    if (bytes[end] == '\r') skip_lf_ = true;
    i = end + 1;
    ProcessLine(on_event);
    if (overflowed_) return false;
  }
  if (line_.size() + pending_.data.size() > kMaxEventBytes) {
    overflowed_ = true;
    return false;
  }
  return true;
}

void SseParser::ProcessLine(const Callback& on_event) {
  std::string_view line = line_;
  if (line.empty()) {
    // Blank line: dispatch.
    if (has_data_) {
      if (!pending_.data.empty() && pending_.data.back() == '\n') pending_.data.pop_back();
      on_event(pending_);
    }
    pending_ = SseEvent{};
    has_data_ = false;
    any_field_ = false;
    line_.clear();
    return;
  }
  if (line.front() == ':') {  // Comment (e.g. ": keep-alive").
    line_.clear();
    return;
  }
  std::string_view field = line, value;
  if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  any_field_ = true;
  if (field == "data") {
    if (pending_.data.size() + value.size() > kMaxEventBytes) {
      overflowed_ = true;
    } else {
      pending_.data.append(value);
      pending_.data.push_back('\n');
      has_data_ = true;
    }
  } else if (field == "event") {
    pending_.event.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) pending_.id.assign(value);
  }
  // "retry" and unknown fields are ignored.
  line_.clear();
}

bool SseParser::HasPartialEvent() const { return !head_.empty() || !line_.empty() || any_field_; }

}  // namespace forkbox::agent
