// Strict UTF-8 (RFC 3629) checks, done by hand on raw bytes so a hostile payload is rejected
// before any JSON parser sees it: no overlong forms, no surrogates, nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace forkbox {

// Length (1..4) of the valid UTF-8 sequence starting at s[i] (i < s.size()), or 0 when invalid.
size_t Utf8SequenceLength(std::string_view s, size_t i);

// Byte offset of the first byte that does not start a valid sequence, or npos when all valid.
size_t FindInvalidUtf8(std::string_view bytes);
inline bool IsValidUtf8(std::string_view bytes) {
  return FindInvalidUtf8(bytes) == std::string_view::npos;
}

// Replaces each maximal ill-formed subpart with U+FFFD; returns how many were replaced.
size_t MakeValidUtf8(std::string& s);

// Tells, byte by byte, where the characters of the text MakeValidUtf8 makes of a byte stream begin:
// each valid sequence and each maximal ill-formed subpart (one U+FFFD). Counting the starts counts
// the repaired text's characters exactly, whatever the bytes (a run of stray continuation bytes is
// that many characters), and no character spans more than 4 bytes.
class Utf8CharStarts {
 public:
  bool Starts(char c);

 private:
  int need_ = 0;                         // Continuation bytes the pending sequence still expects.
  unsigned char lo_ = 0x80, hi_ = 0xBF;  // The next one's allowed range.
};

// True for 10xxxxxx, the bytes that continue a multi-byte sequence (counting characters means
// counting the other bytes).
inline bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The longest prefix of at most max_bytes that does not split a multi-byte sequence.
// Expects valid UTF-8; invalid bytes count as one-byte sequences.
std::string_view TruncateUtf8(std::string_view text, size_t max_bytes);

// `text` when it fits max_bytes; otherwise its TruncateUtf8 prefix followed by the note
// "\n[... <what> truncated: <n> bytes dropped ...]" (at most kMaxCutNoteBytes + what.size()
// bytes), so whoever reads the text knows it was cut.
std::string CutUtf8WithNote(std::string text, size_t max_bytes, std::string_view what);
inline constexpr size_t kMaxCutNoteBytes = 64;

}  // namespace forkbox
