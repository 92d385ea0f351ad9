// Prompt-cache billing like the real APIs (docs/mock.md): which share of a request's input tokens
// was read from cache, and which share was written to it.
//
// Anthropic: the prompt is tools, then system, then the messages' blocks. A cache entry is written
// for the prefix ending at each block carrying cache_control; a request reads the longest entry
// found by looking back at most 20 blocks from each of its breakpoints. OpenAI (automatic
// caching): every prefix ending at a message boundary is remembered; a request reads the longest
// one seen before, in steps of 128 tokens. Both: prefixes under 1024 tokens are never cached.
// Prefixes are compared as bytes of their canonical JSON without cache_control, per model.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "tests/mock/reply.h"
#include "tests/mock/request_view.h"

namespace forkbox::mock {

inline constexpr int64_t kMinCacheTokens = 1024;

struct CacheSplit {
  int64_t read_tokens = 0;
  int64_t write_tokens = 0;
};

class PromptCache {
 public:
  // Bills `body` (a valid request of `format`) and remembers its prefixes. Thread-safe.
  CacheSplit Bill(Format format, const nlohmann::json& body);

 private:
  std::mutex mu_;
  std::unordered_set<uint64_t> seen_;  // Prefix hashes (FNV-1a 64, chained).
};

// Splits a computed input total (usage.input_tokens, cache fields 0) into uncached input, cache
// reads and cache writes. Usage given by a scenario (any cache field set) is left as it is.
void ApplyCacheSplit(const CacheSplit& split, Usage* usage);

}  // namespace forkbox::mock
