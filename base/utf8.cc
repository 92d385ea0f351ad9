#include "base/utf8.h"

#include <cstdint>

namespace forkbox {
namespace {

// The sequence a lead byte starts: its length (0: the byte is a sequence of its own, ill-formed:
// a continuation byte, a C0/C1 overlong lead or F5..FF) and the allowed range of its second byte.
// Table 3-7 of the Unicode standard.
struct Lead {
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;
};
Lead LeadOf(uint8_t b0) {
  Lead l;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    l.len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    l.len = 3;
    if (b0 == 0xE0) l.lo = 0xA0;  // Overlong.
    if (b0 == 0xED) l.hi = 0x9F;  // Surrogates.
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    l.len = 4;
    if (b0 == 0xF0) l.lo = 0x90;  // Overlong.
    if (b0 == 0xF4) l.hi = 0x8F;  // Above U+10FFFF.
  }
  return l;
}

// Length (1..4) of the valid sequence at s[i], or 0. When 0, *consumed is the length of the
// maximal ill-formed subpart (Unicode's "substitution of maximal subparts": one U+FFFD each).
size_t Scan(std::string_view s, size_t i, size_t* consumed) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  *consumed = 1;
  if (b0 < 0x80) return 1;
  const Lead lead = LeadOf(b0);
  const size_t len = lead.len;
  const uint8_t lo = lead.lo, hi = lead.hi;
  if (len == 0) return 0;
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return 0;
    const uint8_t b = byte(i + k);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b & 0xC0) == 0x80;
    if (!ok) return 0;
    *consumed = k + 1;
  }
  return len;
}

}  // namespace

bool Utf8CharStarts::Starts(char c) {
  const auto b = static_cast<uint8_t>(c);
  if (need_ > 0 && b >= lo_ && b <= hi_) {
    --need_;
    lo_ = 0x80;
    hi_ = 0xBF;
    return false;
  }
  // A byte outside the pending sequence's range ends it (one maximal ill-formed subpart) and
  // starts anew.
  const Lead lead = b < 0x80 ? Lead{} : LeadOf(b);
  need_ = lead.len > 0 ? static_cast<int>(lead.len) - 1 : 0;
  lo_ = lead.lo;
  hi_ = lead.hi;
  return true;
}

size_t Utf8SequenceLength(std::string_view s, size_t i) {
  size_t consumed = 0;
  return Scan(s, i, &consumed);
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

size_t MakeValidUtf8(std::string& s) {
  size_t i = FindInvalidUtf8(s);
  if (i == std::string::npos) return 0;  // Most text is valid: copy only when something changes.
  std::string out = s.substr(0, i);
  size_t replaced = 0;
  while (i < s.size()) {
    size_t consumed = 0;
    const size_t n = Scan(s, i, &consumed);
    if (n > 0) {
      out.append(s, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++replaced;
      i += consumed;
    }
  }
  s = std::move(out);
  return replaced;
}

std::string_view TruncateUtf8(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Back up over continuation bytes to the start of the sequence that straddles the cut (at most
  // 3: a longer run is invalid anyway and is cut as single bytes).
  for (int k = 0; k < 3 && end > 0 && IsUtf8Continuation(text[end]); ++k) --end;
  if (IsUtf8Continuation(text[end])) end = max_bytes;
  return text.substr(0, end);
}

std::string CutUtf8WithNote(std::string text, size_t max_bytes, std::string_view what) {
  if (text.size() <= max_bytes) return text;
  const size_t cut = TruncateUtf8(text, max_bytes).size();
  const size_t dropped = text.size() - cut;
  text.resize(cut);
  text += "\n[... ";
  text += what;
  text += " truncated: " + std::to_string(dropped) + " bytes dropped ...]";
  return text;
}

}  // namespace forkbox
