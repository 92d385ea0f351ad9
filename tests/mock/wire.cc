#include "tests/mock/wire.h"

#include <algorithm>
#include <cstdio>

#include "base/utf8.h"

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
    // A code point is never split (a lone stray byte still moves on).
    size_t end = start + TruncateUtf8(std::string_view(text).substr(start), max_bytes).size();
    if (end == start) end = std::min(text.size(), start + max_bytes);
    pieces.push_back(text.substr(start, end - start));
    start = end;
  }
  return pieces;
}

std::string ArgumentsText(const ToolCall& call) {
  if (call.input.is_string()) return call.input.get<std::string>();
  // Key order as given (ordered_json), like the wire formats' own dumps.
  return nlohmann::ordered_json(call.input)
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::ordered_json ArgumentsValue(const ToolCall& call, bool as_object) {
  if (as_object && call.input.is_object()) return nlohmann::ordered_json(call.input);
  return ArgumentsText(call);
}

std::string ThinkingSignature(const std::string& thinking) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : thinking) h = (h ^ c) * 1099511628211ull;
  char buf[40];
  std::snprintf(buf, sizeof buf, "EqMockSig%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace forkbox::mock
