#include "agent/context.h"

#include <algorithm>
#include <map>
#include <variant>

namespace forkbox::agent {
namespace {

struct KnownModel {
  const char* prefix;
  int64_t window;
};

// Longest prefix first where prefixes overlap (gpt-4o before gpt-4, gpt-4.1 before gpt-4).
constexpr KnownModel kKnownModels[] = {
    {"claude-", 200'000},      {"gpt-5", 400'000},        {"gpt-4.1", 1'047'576},
    {"gpt-4o", 128'000},       {"gpt-4-turbo", 128'000},  {"gpt-4", 8'192},
    {"gpt-3.5-turbo", 16'385}, {"o1", 200'000},           {"o3", 200'000},
    {"o4-mini", 200'000},      {"llama3.1", 131'072},     {"llama3.2", 131'072},
    {"llama3", 8'192},         {"qwen2.5-coder", 32'768}, {"qwen3", 40'960},
    {"mistral", 32'768},       {"deepseek-", 128'000},
};

constexpr size_t kInputExcerpt = 160;

}  // namespace

int64_t KnownContextWindow(const std::string& model) {
  for (const KnownModel& k : kKnownModels) {
    if (model.starts_with(k.prefix)) return k.window;
  }
  return 0;
}

int64_t EstimateTokens(int64_t bytes) { return (std::max<int64_t>(bytes, 0) + 3) / 4; }

int64_t MessageBytes(const Message& m) {
  int64_t bytes = 0;
  for (const ContentBlock& block : m.content) {
    if (const auto* t = std::get_if<TextBlock>(&block)) {
      bytes += static_cast<int64_t>(t->text.size());
    } else if (const auto* u = std::get_if<ToolUseBlock>(&block)) {
      bytes += static_cast<int64_t>(u->name.size() + u->input.dump().size());
    } else if (const auto* r = std::get_if<ToolResultBlock>(&block)) {
      bytes += static_cast<int64_t>(r->content.size());
    } else {
      bytes += static_cast<int64_t>(std::get<ThinkingBlock>(block).raw.dump().size());
    }
  }
  return bytes;
}

std::string FoldedResult(const ToolUseBlock& call, int64_t original_bytes) {
  std::string input = call.input.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (input.size() > kInputExcerpt) {
    input = std::string(TruncateUtf8(input, kInputExcerpt)) + "...";
  }
  return std::string(kFoldedPrefix) + call.name + " " + input + ", originally " +
         std::to_string(original_bytes) + " bytes; run it again if you need it]";
}

int64_t FoldOldToolResults(std::vector<Message>& messages, int64_t bytes_to_free,
                           const std::vector<std::string>& keep) {
  size_t latest = messages.size();  // The last message holding tool results.
  for (size_t i = messages.size(); i > 0; --i) {
    const auto& c = messages[i - 1].content;
    if (std::any_of(c.begin(), c.end(), [](const ContentBlock& b) {
          return std::holds_alternative<ToolResultBlock>(b);
        })) {
      latest = i - 1;
      break;
    }
  }
  std::map<std::string, const ToolUseBlock*> calls;
  int64_t freed = 0;
  for (size_t i = 0; i < latest && freed < bytes_to_free; ++i) {
    for (ContentBlock& block : messages[i].content) {
      if (const auto* u = std::get_if<ToolUseBlock>(&block)) calls[u->id] = u;
      auto* r = std::get_if<ToolResultBlock>(&block);
      if (r == nullptr || r->content.starts_with(kFoldedPrefix)) continue;
      const auto call = calls.find(r->tool_use_id);
      if (call == calls.end()) continue;
      if (std::find(keep.begin(), keep.end(), call->second->name) != keep.end()) continue;
      const int64_t size = static_cast<int64_t>(r->content.size());
      std::string folded = FoldedResult(*call->second, size);
      if (static_cast<int64_t>(folded.size()) >= size) continue;
      freed += size - static_cast<int64_t>(folded.size());
      r->content = std::move(folded);
      if (freed >= bytes_to_free) break;
    }
  }
  return freed;
}

}  // namespace forkbox::agent
