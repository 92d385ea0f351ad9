#include "base/utf8.h"

#include <cstdint>

namespace forkbox {
// Table 3-7 of the Unicode standard.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // Allowed range of the second byte.
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // Overlong.
    if (b0 == 0xED) hi = 0x9F;  // Surrogates.
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // Overlong.
    if (b0 == 0xF4) hi = 0x8F;  // Above U+10FFFF.
  } else {
    return 0;  // Continuation byte, C0/C1 overlong lead, or F5..FF.
  }
  if (s.size() - i < len) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return len;
}

size_t FindInvalidUtf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t len = Utf8SequenceLength(bytes, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string_view TruncateUtf8(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Back up over continuation bytes to the start of the sequence that straddles the cut (at most
  // 3: a longer run is invalid anyway and is cut as single bytes).
  for (int k = 0; k < 3 && end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80; ++k) {
    --end;
  }
  if ((static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) end = max_bytes;
  return text.substr(0, end);
}

}  // namespace forkbox
