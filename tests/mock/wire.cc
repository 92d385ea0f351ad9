#include "tests/mock/wire.h"

#include <algorithm>

namespace forkbox::mock {

const WireFormat& AnthropicWire();
const WireFormat& OpenAiWire();

const WireFormat& WireFor(Format format) {
  return format == Format::kAnthropic ? AnthropicWire() : OpenAiWire();
}

std::vector<std::string> SplitUtf8(const std::string& text, size_t max_bytes) {
  std::vector<std::string> pieces;
  max_bytes = std::max<size_t>(max_bytes, 4);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.size(), start + max_bytes);
    // Back up over continuation bytes (10xxxxxx) so a code point is never split.
    while (end < text.size() && end > start + 1 &&
           (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
      --end;
    }
    pieces.push_back(text.substr(start, end - start));
    start = end;
  }
  return pieces;
}

}  // namespace forkbox::mock
