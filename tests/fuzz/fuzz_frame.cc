// libFuzzer target over the frame decoder: arbitrary bytes, fed in pseudo-random chunkings
// (derived from the input so crashes reproduce), with small and default caps. Every decoded
// message must re-encode and decode to itself; nothing may crash, hang or over-allocate.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "base/utf8.h"
#include "ipc/frame.h"
#include "ipc/messages.h"

namespace {

using forkbox::Result;
using forkbox::Status;
using forkbox::ipc::FrameDecoder;
using forkbox::ipc::Message;

uint64_t Fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : bytes) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  return h;
}

void Check(bool condition) {
  if (!condition) std::abort();
}

void CheckRoundTrip(const Message& m) {
  Result<std::string> frame = forkbox::ipc::EncodeMessage(m);
  Check(frame.ok());
  FrameDecoder decoder;
  Check(decoder.Feed(*frame).ok());
  Result<std::optional<Message>> again = decoder.Next();
  Check(again.ok() && again->has_value() && **again == m);
  Check(decoder.Finish().ok());
}

// Feeds input in chunks of 1..max_chunk bytes, pulling messages after each chunk.
std::vector<Message> Decode(std::string_view input, uint64_t seed, size_t max_chunk,
                            size_t max_frame, size_t max_total) {
  FrameDecoder decoder(max_frame, max_total);
  std::vector<Message> out;
  while (!input.empty()) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t n = 1 + static_cast<size_t>(seed >> 33) % max_chunk;
    n = n > input.size() ? input.size() : n;
    Status fed = decoder.Feed(input.substr(0, n));
    input.remove_prefix(n);
    for (;;) {
      Result<std::optional<Message>> next = decoder.Next();
      if (!next.ok()) {
        Check(!decoder.Feed("x").ok() && !decoder.Finish().ok());  // Sticky.
        Check(!decoder.Next().ok());
        return out;
      }
      if (!next->has_value()) break;
      out.push_back(std::move(**next));
    }
    Check(fed.ok());  // After a Feed error, Next() ends in that error, never in "need more".
  }
  Status finish = decoder.Finish();
  Check(finish.ok() == (decoder.buffered_bytes() == 0));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  uint64_t seed = Fnv1a(input);
  std::vector<Message> whole = Decode(input, seed, input.size() + 1, 1 << 20, 64 << 20);
  std::vector<Message> small = Decode(input, seed, 7, 1 << 20, 64 << 20);
  Check(whole == small);  // The chunking never changes what decodes.
  for (const Message& m : small) CheckRoundTrip(m);
  // Tight caps must fail cleanly, never crash.
  (void)Decode(input, seed ^ 1, 3, 64, 256);

  std::string detail = forkbox::ipc::MakeEventDetail(input);
  Check(detail.size() <= forkbox::ipc::kMaxEventDetailBytes);
  Check(forkbox::IsValidUtf8(detail));
  return 0;
}
