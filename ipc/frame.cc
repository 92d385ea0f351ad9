#include "ipc/frame.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/secret.h"
#include "base/utf8.h"

namespace forkbox::ipc {
namespace {

using nlohmann::json;

// Our messages nest 3 levels; anything much deeper is hostile (and nlohmann's DOM recursion
// in dump() is not bounded).
constexpr int kMaxJsonDepth = 32;
constexpr size_t kReadChunk = 16 * 1024;

uint32_t ReadLe32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

Status CheckLength(uint32_t n, size_t max_frame_bytes) {
  if (n < 2) {
    return Status::InvalidArgument("frame length " + std::to_string(n) +
                                   " is too small: a payload is a JSON object of at least 2 bytes");
  }
  if (n > max_frame_bytes) {
    return Status::ResourceExhausted("frame length " + std::to_string(n) + " exceeds the cap of " +
                                     std::to_string(max_frame_bytes) + " bytes");
  }
  return Status::Ok();
}

Status TotalCapError(size_t max_total_bytes) {
  return Status::ResourceExhausted("peer sent more than the cap of " +
                                   std::to_string(max_total_bytes) + " bytes in total");
}

// A SAX handler that only tracks where in the document the parser is, so an error can name the
// field ("provider.api_key"). Used on the error path only.
class PathTracker {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  bool null() { return Value(); }
  bool boolean(bool) { return Value(); }
  bool number_integer(number_integer_t) { return Value(); }
  bool number_unsigned(number_unsigned_t) { return Value(); }
  bool number_float(number_float_t, const string_t&) { return Value(); }
  bool string(string_t&) { return Value(); }
  bool binary(binary_t&) { return Value(); }
  bool start_object(std::size_t) {
    stack_.push_back(Level{true, "", 0, true});
    return true;
  }
  bool key(string_t& k) {
    stack_.back().key = k;
    stack_.back().expect_key = false;
    return true;
  }
  bool end_object() {
    stack_.pop_back();
    return Value();
  }
  bool start_array(std::size_t) {
    stack_.push_back(Level{false, "", 0, false});
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return Value();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    error_ = ex.what();
    where_ = Where();
    return false;
  }

  const std::string& error() const { return error_; }
  const std::string& where() const { return where_; }

 private:
  struct Level {
    bool is_object;
    std::string key;
    size_t index;
    bool expect_key;
  };
  bool Value() {
    if (!stack_.empty()) {
      if (stack_.back().is_object) {
        stack_.back().expect_key = true;
      } else {
        ++stack_.back().index;
      }
    }
    return true;
  }
  std::string Where() const {
    if (stack_.empty()) return "at the top level";
    std::string path;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Level& l = stack_[i];
      bool last = i + 1 == stack_.size();
      if (l.is_object) {
        if (last && l.expect_key) {
          return path.empty() ? "in a key of the top-level object"
                              : "in a key of object \"" + path + "\"";
        }
        if (!path.empty()) path += '.';
        path += l.key;
      } else {
        path += "[" + std::to_string(l.index) + "]";
      }
    }
    return "in field \"" + path + "\"";
  }

  std::vector<Level> stack_;
  std::string error_;
  std::string where_ = "at the top level";
};

// The location of a parse failure, e.g. "in field \"prompt\"", and nlohmann's description.
PathTracker Locate(std::string_view payload) {
  PathTracker tracker;
  try {
    json::sax_parse(payload.begin(), payload.end(), &tracker);
  } catch (const std::exception&) {
    // sax_parse reports errors through the handler; anything thrown here is unexpected, and
    // the caller already has an error to report.
  }
  return tracker;
}

// Zeroes every string value of `j` before it is freed (keys are protocol names, not secrets).
void WipeStrings(json& j) {
  if (j.is_string()) {
    WipeString(j.get_ref<std::string&>());
  } else if (j.is_structured()) {
    for (json& item : j) WipeStrings(item);
  }
}

// What nlohmann serializes into through its public operator<< (the text dump() makes, strict
// UTF-8 check included), appended to a frame that grows by AppendWiped: dump()'s own string
// frees each buffer it outgrows unwiped, a start frame's key in it.
class WipedAppendBuf : public std::streambuf {
 public:
  explicit WipedAppendBuf(std::string& out) : out_(out) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    AppendWiped(out_, std::string_view(&ch, 1));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    AppendWiped(out_, std::string_view(s, static_cast<size_t>(n)));
    return n;
  }

 private:
  std::string& out_;
};

}  // namespace

json ParseJsonBounded(std::string_view text, int max_depth, bool* too_deep,
                      std::optional<std::string>* repeated_key) {
  *too_deep = false;
  if (repeated_key != nullptr) repeated_key->reset();
  // With repeated_key: the keys of each object being read, the innermost last. Nothing is
  // discarded before the first refusal, so every object_start meets its object_end.
  std::vector<std::unordered_set<std::string>> keys;
  bool repeated = false;
  // nlohmann reports each value's depth to the callback; a false return discards it unbuilt.
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (*too_deep || repeated) return false;
    // `depth` counts the containers around the one that starts here.
    const bool opens =
        event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
    if (opens && depth >= max_depth) *too_deep = true;
    if (repeated_key == nullptr || *too_deep) return !*too_deep;
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end && !keys.empty()) {
      keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty() &&
               !keys.back().insert(parsed.get<std::string>()).second) {
      *repeated_key = parsed.get<std::string>();
      repeated = true;
    }
    return !repeated;
  };
  try {
    json j = json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/false);
    if (repeated) return json(json::value_t::discarded);
    return j;  // Moved, never copied: a start frame's DOM holds the API key (WipeStrings).
  } catch (const std::exception&) {  // The callback's json may throw (bad_alloc): not JSON then.
    return json(json::value_t::discarded);
  }
}

namespace {

// Strings are validated here, once, on the raw bytes (FromJson relies on it); the JSON parser
// then sees only valid UTF-8.
Result<Message> DecodePayload(std::string_view payload) {
  size_t bad = FindInvalidUtf8(payload);
  if (bad != std::string_view::npos) {
    return Status::InvalidArgument("frame payload is not valid UTF-8: bad byte 0x" +
                                   [&] {
                                     static const char* kHex = "0123456789abcdef";
                                     auto b = static_cast<unsigned char>(payload[bad]);
                                     return std::string{kHex[b >> 4], kHex[b & 15]};
                                   }() +
                                   " at offset " + std::to_string(bad) + " " +
                                   Locate(payload).where());
  }
  bool too_deep = false;
  std::optional<std::string> repeated_key;
  json j = ParseJsonBounded(payload, kMaxJsonDepth, &too_deep, &repeated_key);
  if (too_deep) {
    WipeStrings(j);
    return Status::InvalidArgument("frame payload nests deeper than " +
                                   std::to_string(kMaxJsonDepth) + " levels");
  }
  if (j.is_discarded()) {
    // Which of the two values the peer meant is not ours to guess (nlohmann keeps the last).
    if (repeated_key) {
      return Status::InvalidArgument("frame payload repeats the key \"" + MakeLabel(*repeated_key) +
                                     "\" in one object");
    }
    PathTracker t = Locate(payload);
    return Status::InvalidArgument("frame payload is not valid JSON " + t.where() + ": " +
                                   t.error());
  }
  if (!j.is_object()) {
    return Status::InvalidArgument("frame payload must be a JSON object, got " +
                                   std::string(j.type_name()));
  }
  Result<Message> message = FromJson(j);
  WipeStrings(j);  // The start frame's DOM holds the API key.
  return message;
}

// The dotted path of the first string (or key) that is not valid UTF-8, or "" when all are.
bool FindBadString(const json& j, const std::string& path, std::string* where) {
  if (j.is_string()) {
    size_t bad = FindInvalidUtf8(j.get_ref<const std::string&>());
    if (bad == std::string::npos) return false;
    *where = "field \"" + path + "\" at byte " + std::to_string(bad);
    return true;
  }
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      std::string sub = path.empty() ? key : path + "." + key;
      if (!IsValidUtf8(key)) {
        *where = path.empty() ? "a top-level key" : "a key of \"" + path + "\"";
        return true;
      }
      if (FindBadString(value, sub, where)) return true;
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      if (FindBadString(j[i], path + "[" + std::to_string(i) + "]", where)) return true;
    }
  }
  return false;
}

// Blocks SIGPIPE in the calling thread so a write to a closed pipe yields EPIPE without killing
// the process, whatever the caller's disposition; a SIGPIPE we caused is consumed, not delivered.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_set_);
    sigaddset(&pipe_set_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_mask_);
  }
  ~SigpipeGuard() {
    if (got_epipe_ && !was_pending_) {
      const struct timespec zero = {0, 0};
      while (sigtimedwait(&pipe_set_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;
  void NoteEpipe() { got_epipe_ = true; }

 private:
  sigset_t pipe_set_;
  sigset_t old_mask_;
  bool was_pending_ = false;
  bool got_epipe_ = false;
};

Status WaitFor(int fd, short events, const char* what) {
  struct pollfd p = {fd, events, 0};
  while (::poll(&p, 1, -1) < 0) {
    if (errno != EINTR) return Status::FromErrno(errno, std::string("poll(") + what + ")");
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> EncodeFrame(const json& payload, size_t max_frame_bytes) {
  if (!payload.is_object()) {
    return Status::InvalidArgument("frame payload must be a JSON object, got " +
                                   std::string(payload.type_name()));
  }
  std::string frame(kFrameHeaderBytes, '\0');
  try {
    WipedAppendBuf buf(frame);
    std::ostream out(&buf);
    out.exceptions(std::ios::badbit);  // A failed append (bad_alloc) is thrown, not swallowed.
    out << payload;                    // The one UTF-8 check of an outgoing frame (strict handler).
  } catch (const std::exception& e) {
    WipeString(frame);
    // Error path only: name the field.
    std::string where;
    if (FindBadString(payload, "", &where)) {
      return Status::InvalidArgument("cannot encode frame: invalid UTF-8 in " + where);
    }
    return Status::InvalidArgument(std::string("cannot encode frame: ") + e.what());
  }
  size_t n = frame.size() - kFrameHeaderBytes;
  if (n > max_frame_bytes || n > UINT32_MAX) {
    WipeString(frame);
    return Status::ResourceExhausted("frame payload of " + std::to_string(n) +
                                     " bytes exceeds the cap of " +
                                     std::to_string(max_frame_bytes) + " bytes");
  }
  for (size_t i = 0; i < kFrameHeaderBytes; ++i) {
    frame[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  }
  return frame;
}

Result<std::string> EncodeMessage(const Message& message, size_t max_frame_bytes) {
  json payload = ToJson(message);
  Result<std::string> frame = EncodeFrame(payload, max_frame_bytes);
  WipeStrings(payload);  // A start message's JSON holds the API key.
  if (!frame.ok()) {
    return frame.status().WithContext(std::string(MessageTypeName(message)) + " message");
  }
  return frame;
}

FrameDecoder::FrameDecoder(size_t max_frame_bytes, size_t max_total_bytes)
    : max_frame_bytes_(max_frame_bytes), max_total_bytes_(max_total_bytes) {}

FrameDecoder::~FrameDecoder() { ::explicit_bzero(buffer_.data(), buffer_.size()); }

Status FrameDecoder::Feed(std::string_view bytes) {
  if (!failed_.ok()) return failed_;
  if (!pending_.ok()) return pending_;
  // Drop consumed frames once they dominate the buffer, so memory stays proportional to what is
  // pending and compaction is amortized O(1) per byte.
  // Bytes up to the total cap are kept (frames wholly inside it stay deliverable, whatever the
  // chunking); the rest is refused.
  size_t accept = std::min(bytes.size(), total_bytes_left());
  total_bytes_ += accept;
  const bool compact = consumed_ > 0 && consumed_ >= buffer_.size() / 2;
  if (compact || buffer_.size() + accept > buffer_.capacity()) {
    // Move to a fresh buffer and zero the old one: no stale frame bytes are freed unwiped.
    std::string fresh;
    fresh.reserve(std::max(2 * (buffer_.size() - consumed_ + accept), size_t{256}));
    fresh.append(buffer_, consumed_);
    ::explicit_bzero(buffer_.data(), buffer_.size());
    buffer_.swap(fresh);
    checked_until_ -= consumed_;
    if (bad_header_at_ != SIZE_MAX) bad_header_at_ -= consumed_;
    consumed_ = 0;
  }
  buffer_.append(bytes.substr(0, accept));
  // Validate every length field as soon as it is complete, before the payload is waited for.
  while (buffer_.size() >= checked_until_ + kFrameHeaderBytes) {
    uint32_t n = ReadLe32(buffer_.data() + checked_until_);
    Status st = CheckLength(n, max_frame_bytes_);
    if (!st.ok()) {
      pending_ = st;
      bad_header_at_ = checked_until_;
      return pending_;
    }
    checked_until_ += kFrameHeaderBytes + n;
  }
  if (accept < bytes.size()) {
    pending_ = TotalCapError(max_total_bytes_);
    return pending_;
  }
  return Status::Ok();
}

Result<std::optional<Message>> FrameDecoder::Next() {
  if (!failed_.ok()) return failed_;
  size_t avail = buffer_.size() - consumed_;
  bool complete = false;
  uint32_t n = 0;
  if (consumed_ < bad_header_at_ && avail >= kFrameHeaderBytes) {
    n = ReadLe32(buffer_.data() + consumed_);
    complete = avail - kFrameHeaderBytes >= n;
  }
  if (!complete) {
    // Frames before a Feed error are still delivered; then the error is returned for good.
    if (!pending_.ok()) failed_ = pending_;
    if (!failed_.ok()) return failed_;
    return std::optional<Message>();
  }
  std::string_view payload(buffer_.data() + consumed_ + kFrameHeaderBytes, n);
  ++frames_;
  Result<Message> message = DecodePayload(payload);
  // A decoded frame's bytes are zeroed at once (a start frame carries the API key).
  ::explicit_bzero(buffer_.data() + consumed_, kFrameHeaderBytes + n);
  consumed_ += kFrameHeaderBytes + n;
  if (!message.ok()) {
    failed_ = message.status().WithContext("frame " + std::to_string(frames_));
    return failed_;
  }
  return std::optional<Message>(std::move(message).value());
}

Status FrameDecoder::Finish() const {
  if (!failed_.ok()) return failed_;
  if (!pending_.ok()) return pending_;
  size_t pos = consumed_;
  while (buffer_.size() - pos >= kFrameHeaderBytes) {
    size_t frame = kFrameHeaderBytes + ReadLe32(buffer_.data() + pos);
    if (buffer_.size() - pos < frame) {
      return Status::InvalidArgument("truncated frame: got " +
                                     std::to_string(buffer_.size() - pos) + " of " +
                                     std::to_string(frame) + " bytes");
    }
    pos += frame;
  }
  if (pos == buffer_.size()) return Status::Ok();
  return Status::InvalidArgument("truncated frame: got " + std::to_string(buffer_.size() - pos) +
                                 " of 4 bytes of the length field");
}

size_t FrameDecoder::bytes_needed() const {
  size_t avail = buffer_.size() - consumed_;
  if (avail < kFrameHeaderBytes) return kFrameHeaderBytes - avail;
  size_t frame = kFrameHeaderBytes + ReadLe32(buffer_.data() + consumed_);
  return avail < frame ? frame - avail : 0;
}

FrameReader::FrameReader(int fd, size_t max_frame_bytes, size_t max_total_bytes)
    : fd_(fd), decoder_(max_frame_bytes, max_total_bytes) {}

Result<Message> FrameReader::Read() {
  char buf[kReadChunk];
  for (;;) {
    Result<std::optional<Message>> next = decoder_.Next();
    if (!next.ok()) return next.status();
    if (next->has_value()) return std::move(**next);
    // Read no further than the current frame: the rest of the pipe belongs to the next Read().
    size_t want = std::min({decoder_.bytes_needed(), decoder_.total_bytes_left(), sizeof buf});
    if (decoder_.total_bytes_left() == 0) return TotalCapError(decoder_.max_total_bytes());
    ssize_t n = ::read(fd_, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        FORKBOX_RETURN_IF_ERROR(WaitFor(fd_, POLLIN, "POLLIN"));
        continue;
      }
      return Status::FromErrno(errno, "read from fd " + std::to_string(fd_));
    }
    if (n == 0) {
      if (decoder_.buffered_bytes() == 0) return Status::EndOfFile("peer closed the pipe");
      Status st = decoder_.Finish();
      return st.ok() ? Status::EndOfFile("peer closed the pipe") : st;
    }
    // A Feed error is returned by Next() above, after any frame that precedes it.
    (void)decoder_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    ::explicit_bzero(buf, static_cast<size_t>(n));
  }
}

Status WriteAll(int fd, std::string_view bytes) {
  SigpipeGuard guard;
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        FORKBOX_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, "POLLOUT"));
        continue;
      }
      int err = errno;
      if (err == EPIPE) guard.NoteEpipe();
      return Status::FromErrno(err, "write to fd " + std::to_string(fd));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status WriteMessage(int fd, const Message& message, size_t max_frame_bytes) {
  Result<std::string> frame = EncodeMessage(message, max_frame_bytes);
  if (!frame.ok()) return frame.status();
  Status written = WriteAll(fd, *frame);
  WipeString(*frame);  // A start frame holds the API key.
  return written;
}

}  // namespace forkbox::ipc
