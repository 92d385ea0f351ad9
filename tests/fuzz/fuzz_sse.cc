// libFuzzer target: the SSE parser on arbitrary bytes with arbitrary chunking must never crash and
// must produce the same events however the input is split (differential against one whole feed).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "agent/sse.h"

namespace {

std::vector<forkbox::agent::SseEvent> Parse(std::string_view input, const std::vector<size_t>& cuts,
                                            bool* partial) {
  forkbox::agent::SseParser parser;
  std::vector<forkbox::agent::SseEvent> events;
  auto sink = [&](const forkbox::agent::SseEvent& e) { events.push_back(e); };
  size_t pos = 0;
  for (size_t cut : cuts) {
    parser.Feed(input.substr(pos, cut - pos), sink);
    pos = cut;
  }
  parser.Feed(input.substr(pos), sink);
  *partial = parser.HasPartialEvent();
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte seeds the chunk sizes; the rest is the stream.
  const unsigned seed = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<size_t> cuts;
  size_t pos = 0, step = seed % 7 + 1;
  while (pos + step < input.size()) {
    pos += step;
    cuts.push_back(pos);
    step = (step * 5 + seed) % 13 + 1;
  }
  bool whole_partial = false, split_partial = false;
  const auto whole = Parse(input, {}, &whole_partial);
  const auto split = Parse(input, cuts, &split_partial);
  if (whole.size() != split.size() || whole_partial != split_partial) std::abort();
  for (size_t i = 0; i < whole.size(); ++i) {
    if (whole[i].data != split[i].data || whole[i].event != split[i].event ||
        whole[i].id != split[i].id) {
      std::abort();
    }
  }
  return 0;
}
