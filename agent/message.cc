#include "agent/message.h"

#include <variant>

namespace forkbox::agent {

const char* StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kEndTurn:
      return "end_turn";
    case StopReason::kToolUse:
      return "tool_use";
    case StopReason::kMaxTokens:
      return "max_tokens";
    case StopReason::kStopSequence:
      return "stop_sequence";
    case StopReason::kPauseTurn:
      return "pause_turn";
    case StopReason::kRefusal:
      return "refusal";
    case StopReason::kContextWindow:
      return "context_window";
    case StopReason::kUnknown:
      break;
  }
  return "unknown";
}

std::string TextOf(const Message& m) {
  std::string out;
  for (const ContentBlock& block : m.content) {
    if (const auto* text = std::get_if<TextBlock>(&block)) out += text->text;
  }
  return out;
}

std::vector<ToolUseBlock> ToolUsesOf(const Message& m) {
  std::vector<ToolUseBlock> out;
  for (const ContentBlock& block : m.content) {
    if (const auto* use = std::get_if<ToolUseBlock>(&block)) out.push_back(*use);
  }
  return out;
}

namespace {

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence at s[i], or 0 with *consumed set to the length of the maximal
// ill-formed subpart (Unicode's "substitution of maximal subparts": one U+FFFD per subpart).
size_t ValidSequenceLength(const std::string& s, size_t i, size_t* consumed) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  *consumed = 1;
  if (b0 < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // Allowed range of the second byte.
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 == 0xE0) {
    len = 3, lo = 0xA0;  // No overlongs.
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    len = 3;
  } else if (b0 == 0xED) {
    len = 3, hi = 0x9F;  // No surrogates.
  } else if (b0 == 0xF0) {
    len = 4, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    len = 4;
  } else if (b0 == 0xF4) {
    len = 4, hi = 0x8F;  // Nothing above U+10FFFF.
  } else {
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return 0;
    const auto b = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : IsContinuation(b);
    if (!ok) return 0;
    *consumed = k + 1;
  }
  return len;
}

}  // namespace

size_t MakeValidUtf8(std::string& s) {
  size_t i = 0;
  // Fast path: most text is valid; copy only when something must change.
  size_t consumed = 0;
  while (i < s.size()) {
    const size_t n = ValidSequenceLength(s, i, &consumed);
    if (n == 0) break;
    i += n;
  }
  if (i == s.size()) return 0;
  std::string out = s.substr(0, i);
  size_t replaced = 0;
  while (i < s.size()) {
    const size_t n = ValidSequenceLength(s, i, &consumed);
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

}  // namespace forkbox::agent
