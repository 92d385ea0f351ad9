// An incremental Server-Sent Events parser (the WHATWG event-stream format) for model streams.
//
// Bytes may arrive split anywhere: mid-line, mid-CRLF, mid-UTF-8. Lines end with CRLF, LF or CR;
// `data:` works with or without the space; several data lines join with "\n"; comment lines
// (":...") and unknown fields are ignored. An event is dispatched at its blank line and only if it
// had a data field. Operates on bytes; the caller decodes JSON from whole events only.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace forkbox::agent {

struct SseEvent {
  std::string event;  // The `event:` field; empty when absent (the spec's "message").
  std::string data;
  std::string id;
};

class SseParser {
 public:
  using Callback = std::function<void(const SseEvent&)>;
  // An event bigger than this is refused (a broken or hostile server must not exhaust memory).
  static constexpr size_t kMaxEventBytes = 64 * 1024 * 1024;

  // Parses `bytes`, calling `on_event` for each completed event. Returns false once the event size
  // limit was exceeded; the parser then ignores further input.
  bool Feed(std::string_view bytes, const Callback& on_event);
  // True when input ended inside an event (a partial line or data without its blank line): the
  // stream was cut.
  bool HasPartialEvent() const;
  bool overflowed() const { return overflowed_; }

 private:
  bool FeedLines(std::string_view bytes, const Callback& on_event);
  void ProcessLine(const Callback& on_event);

  std::string head_;  // The first bytes, until we know whether they start with a BOM.

  std::string line_;
  SseEvent pending_;
  bool has_data_ = false;
  bool any_field_ = false;
  bool skip_lf_ = false;  // The previous chunk ended with CR: a leading LF belongs to it.
  bool started_ = false;  // Past the optional leading BOM.
  bool overflowed_ = false;
};

}  // namespace forkbox::agent
