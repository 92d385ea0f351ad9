#include "tests/mock/prompt_cache.h"

#include <algorithm>
#include <string>
#include <vector>

namespace forkbox::mock {
namespace {

using nlohmann::json;

constexpr int kLookbackBlocks = 20;  // Anthropic checks this many blocks before a breakpoint.
constexpr int64_t kOpenAiStep = 128;

// One cacheable unit of a prompt: its canonical bytes and whether it carries a breakpoint.
struct Segment {
  std::string bytes;
  bool breakpoint = false;
};

// A prefix as the cache sees it: chained hash and size in tokens (bytes / 4, like the totals).
struct Prefix {
  uint64_t hash = 0;
  int64_t tokens = 0;
  bool breakpoint = false;
};

Segment MakeSegment(const std::string& tag, json value) {
  Segment s;
  if (value.is_object()) {
    s.breakpoint = value.contains("cache_control");
    value.erase("cache_control");
  }
  s.bytes = tag + "\x1f" + value.dump(-1, ' ', false, json::error_handler_t::replace);
  return s;
}

std::vector<Segment> AnthropicSegments(const json& body) {
  std::vector<Segment> out;
  for (const json& tool : body.value("tools", json::array()))
    out.push_back(MakeSegment("tool", tool));
  const json system = body.value("system", json());
  if (system.is_string()) {
    out.push_back(MakeSegment("system", system));
  } else if (system.is_array()) {
    for (const json& block : system) out.push_back(MakeSegment("system", block));
  }
  for (const json& m : body.value("messages", json::array())) {
    const std::string role = m.value("role", "");
    const json content = m.value("content", json());
    if (content.is_string()) {
      out.push_back(MakeSegment(role, content));
      continue;
    }
    bool first = true;
    for (const json& block : content) {
      out.push_back(MakeSegment(first ? role : "+", block));
      first = false;
    }
  }
  return out;
}

std::vector<Segment> OpenAiSegments(const json& body) {
  std::vector<Segment> out;
  if (body.contains("tools")) out.push_back(MakeSegment("tools", body["tools"]));
  for (const json& m : body.value("messages", json::array())) out.push_back(MakeSegment("m", m));
  return out;
}

std::vector<Prefix> Prefixes(const std::string& model, const std::vector<Segment>& segments) {
  uint64_t h = 1469598103934665603ull;
  auto feed = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  };
  feed(model);
  size_t bytes = 0;
  std::vector<Prefix> out;
  for (const Segment& s : segments) {
    feed("\x1e");
    feed(s.bytes);
    bytes += s.bytes.size();
    out.push_back(Prefix{h, static_cast<int64_t>(bytes / 4), s.breakpoint});
  }
  return out;
}

}  // namespace

CacheSplit PromptCache::Bill(Format format, const json& body) {
  if (!body.is_object()) return {};
  const std::string model = body.value("model", "");
  const bool anthropic = format == Format::kAnthropic;
  const std::vector<Prefix> p =
      Prefixes(model, anthropic ? AnthropicSegments(body) : OpenAiSegments(body));
  CacheSplit split;
  std::lock_guard lock(mu_);
  if (!anthropic) {
    for (const Prefix& x : p) {
      if (x.tokens >= kMinCacheTokens && seen_.contains(x.hash)) {
        split.read_tokens = std::max(split.read_tokens, x.tokens);
      }
    }
    if (split.read_tokens > 0) {
      split.read_tokens =
          kMinCacheTokens + (split.read_tokens - kMinCacheTokens) / kOpenAiStep * kOpenAiStep;
    }
    for (const Prefix& x : p) {
      if (x.tokens >= kMinCacheTokens) seen_.insert(x.hash);
    }
    return split;
  }
  int64_t last_breakpoint_tokens = 0;
  for (size_t b = 0; b < p.size(); ++b) {
    if (!p[b].breakpoint) continue;
    last_breakpoint_tokens = p[b].tokens;
    const size_t stop = b >= kLookbackBlocks ? b - kLookbackBlocks + 1 : 0;
    for (size_t k = b + 1; k-- > stop;) {
      if (p[k].tokens >= kMinCacheTokens && seen_.contains(p[k].hash)) {
        split.read_tokens = std::max(split.read_tokens, p[k].tokens);
        break;
      }
    }
  }
  if (last_breakpoint_tokens >= kMinCacheTokens) {
    split.write_tokens = std::max<int64_t>(0, last_breakpoint_tokens - split.read_tokens);
  }
  for (const Prefix& x : p) {
    if (x.breakpoint && x.tokens >= kMinCacheTokens) seen_.insert(x.hash);
  }
  return split;
}

void ApplyCacheSplit(const CacheSplit& split, Usage* usage) {
  if (usage->cache_read_input_tokens != 0 || usage->cache_creation_input_tokens != 0) return;
  const int64_t total = usage->input_tokens;
  const int64_t read = std::min(split.read_tokens, total);
  const int64_t write = std::min(split.write_tokens, total - read);
  usage->cache_read_input_tokens = read;
  usage->cache_creation_input_tokens = write;
  usage->input_tokens = std::max<int64_t>(total - read - write, 0);
}

}  // namespace forkbox::mock
