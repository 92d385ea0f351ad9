// The frame format of the parent<->child pipes. One frame:
//
//   offset  size  field
//   0       4     payload length N, unsigned 32-bit, little-endian (byte 0 is the lowest byte)
//   4       N     payload: one JSON object, UTF-8 (RFC 8259), no BOM, no trailing bytes
//
// Constraints a reader enforces before it allocates anything:
//   - 2 <= N <= max_frame_bytes (default kDefaultMaxFrameBytes, 1 MiB). N == 0 or N > cap is an
//     error; the length field is never trusted to size a buffer beyond the cap.
//   - The payload must be valid UTF-8 and parse as a JSON object with a string "type" field.
//   - A reader also caps the total bytes it accepts from one peer (max_total_bytes); past it,
//     every further read fails.
// EOF exactly between frames is kEndOfFile ("peer closed the pipe"); EOF inside the length
// field or inside a payload is kInvalidArgument ("truncated frame: got X of Y bytes").
// Frames are written whole with a retrying write loop (partial writes, EINTR); a pipe write of
// one frame may still interleave with nothing else because each pipe has a single writer.
//
// The child's fixed descriptors (documented in docs/protocol.md):
//   fd 3: parent -> child (the child reads exactly one start frame)
//   fd 4: child -> parent (events, then one result or error)
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "ipc/messages.h"

namespace forkbox::ipc {

inline constexpr int kChildControlReadFd = 3;  // parent -> child
inline constexpr int kChildReportWriteFd = 4;  // child -> parent
inline constexpr int kChildTranscriptFd = 5;   // The task's transcript file, when kept.
// The workdir (O_PATH), opened once by the parent at start-up: the child's tools resolve beneath
// it and its sandbox is built on the directory it names now, never on the workdir's name.
inline constexpr int kChildWorkdirFd = 6;
inline constexpr size_t kFrameHeaderBytes = 4;
inline constexpr size_t kDefaultMaxFrameBytes = 1 << 20;
inline constexpr size_t kDefaultMaxTotalBytes = 64 << 20;

// Parses `text` as JSON with at most `max_depth` containers nested, without recursion (nlohmann
// parses iteratively; a DOM's copy and dump() recurse, and 100,000 nested arrays from a model
// overflowed the stack). Deeper values are discarded unbuilt and *too_deep is set; text that is not
// JSON gives a discarded value. With `repeated_key`, an object that names a key twice gives a
// discarded value too, and *repeated_key names the key (optional: the key may be ""): nlohmann
// would keep the last value silently, and a reader that acts on the value (a tool's path, a
// frame's summary) must not guess which one was meant. Never throws.
nlohmann::json ParseJsonBounded(std::string_view text, int max_depth, bool* too_deep,
                                std::optional<std::string>* repeated_key = nullptr);

// Encodes one frame. Fails when the payload exceeds max_frame_bytes. Secrets: no buffer the frame
// grew out of is freed unwiped, nor is the frame on a failure, nor (EncodeMessage) the JSON the
// message was turned into; the frame returned is the caller's to wipe (WipeString) when it holds
// one (a start frame: the parent's StartFrameWriter). WriteMessage wipes its own.
Result<std::string> EncodeFrame(const nlohmann::json& payload,
                                size_t max_frame_bytes = kDefaultMaxFrameBytes);
Result<std::string> EncodeMessage(const Message& message,
                                  size_t max_frame_bytes = kDefaultMaxFrameBytes);

// Incremental decoder for non-blocking readers: feed whatever bytes arrived, then pull whole
// messages. Errors are sticky: after a Feed error every further Feed fails, and Next() returns
// the complete frames that came before the bad bytes, then the error, forever. So what Next()
// yields never depends on how the bytes were chunked.
class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes = kDefaultMaxFrameBytes,
                        size_t max_total_bytes = kDefaultMaxTotalBytes);
  // Secrets: every byte the decoder buffered is zeroed before its memory is freed or reused (a
  // returned frame at once; the rest on growth, compaction and destruction).
  ~FrameDecoder();
  // Appends bytes. Fails on the total cap (bytes up to it are kept) or an invalid length field
  // (checked as soon as its 4 bytes are in, before the payload arrives; nothing is ever sized
  // by the length field).
  Status Feed(std::string_view bytes);
  // The next complete, validated message; nullopt when more bytes are needed. Payload errors
  // (invalid UTF-8, not JSON, nesting deeper than 32, failed FromJson) name the frame's index.
  Result<std::optional<Message>> Next();
  // Call at EOF: OK when no partial frame is buffered, otherwise the truncation error.
  Status Finish() const;
  size_t buffered_bytes() const { return buffer_.size() - consumed_; }
  // Bytes still missing to complete the next frame (0 when one is buffered), so a blocking
  // reader never reads into a frame it was not asked for.
  size_t bytes_needed() const;
  // How many more bytes Feed accepts before the total cap fails it.
  size_t total_bytes_left() const { return max_total_bytes_ - total_bytes_; }
  size_t max_total_bytes() const { return max_total_bytes_; }
  // Everything the buffer holds, returned frames included: a test checks that a decoded start
  // frame's key is no longer in it while the decoder lives on (as it does for a whole task).
  std::string_view raw_buffer() const { return buffer_; }

 private:
  size_t max_frame_bytes_;
  size_t max_total_bytes_;
  size_t total_bytes_ = 0;
  std::string buffer_;
  size_t consumed_ = 0;       // Start of the first frame not yet returned by Next().
  size_t checked_until_ = 0;  // Start of the first frame whose length field is not yet checked.
  size_t frames_ = 0;         // Frames decoded so far, for error messages.
  Status pending_;  // A Feed error, returned by Next() once the frames before it are pulled.
  size_t bad_header_at_ = SIZE_MAX;  // Offset of a length field that failed its check.
  Status failed_;
};

// Blocking reader over an fd (the child's start frame). Retries EINTR; never reads past the
// caps.
class FrameReader {
 public:
  explicit FrameReader(int fd, size_t max_frame_bytes = kDefaultMaxFrameBytes,
                       size_t max_total_bytes = kDefaultMaxTotalBytes);
  Result<Message> Read();

 private:
  int fd_;
  FrameDecoder decoder_;
};

// Writes one whole frame, retrying partial writes and EINTR (and waiting with poll when fd is
// non-blocking). A closed reader is an EPIPE Status, never a death: SIGPIPE is blocked in the
// calling thread around the write and a SIGPIPE it raised is consumed.
Status WriteMessage(int fd, const Message& message, size_t max_frame_bytes = kDefaultMaxFrameBytes);
Status WriteAll(int fd, std::string_view bytes);

}  // namespace forkbox::ipc
