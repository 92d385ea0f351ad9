#include "agent/pricing.h"

#include <algorithm>
#include <iterator>

namespace forkbox::agent {
namespace {

// Anthropic: https://docs.claude.com/en/docs/about-claude/pricing, "Model pricing" (base input,
// 5m cache writes, cache hits & refreshes, output), as published on 2025-11-15. Sonnet's higher
// rate above 200K input tokens applies only to the 1M-token context beta, which forkbox does not
// request (its window for claude- models is 200K: agent/context.cc).
constexpr TokenPrices kOpus4{15.0, 75.0, 18.75, 1.50};  // Opus 4 and 4.1.
constexpr TokenPrices kSonnet{3.0, 15.0, 3.75, 0.30};   // Sonnet 3.7, 4 and 4.5.
constexpr TokenPrices kHaiku45{1.0, 5.0, 1.25, 0.10};   // Haiku 4.5.
constexpr TokenPrices kHaiku35{0.80, 4.0, 1.0, 0.08};   // Haiku 3.5.
constexpr TokenPrices kHaiku3{0.25, 1.25, 0.30, 0.03};  // Haiku 3.
// OpenAI: https://platform.openai.com/docs/pricing, "Standard" (input, cached input, output), as
// published in November 2025 (o3 after its cut of 2025-06-10). A cache write costs no more than
// input there, and Chat Completions reports none.
constexpr TokenPrices kGpt5{1.25, 10.0, 1.25, 0.125};
constexpr TokenPrices kGpt5Mini{0.25, 2.0, 0.25, 0.025};
constexpr TokenPrices kGpt5Nano{0.05, 0.40, 0.05, 0.005};
constexpr TokenPrices kGpt41{2.0, 8.0, 2.0, 0.50};
constexpr TokenPrices kGpt41Mini{0.40, 1.60, 0.40, 0.10};
constexpr TokenPrices kGpt41Nano{0.10, 0.40, 0.10, 0.025};
constexpr TokenPrices kGpt4o{2.50, 10.0, 2.50, 1.25};
constexpr TokenPrices kGpt4oMini{0.15, 0.60, 0.15, 0.075};
constexpr TokenPrices kO3{2.0, 8.0, 2.0, 0.50};
constexpr TokenPrices kO4Mini{1.10, 4.40, 1.10, 0.275};

struct PricedModel {
  std::string_view id;
  TokenPrices prices;
};

// Each alias and dated snapshot by its exact id (KnownPrices).
constexpr PricedModel kPricedModels[] = {
    {"claude-opus-4-1", kOpus4},
    {"claude-opus-4-1-20250805", kOpus4},
    {"claude-opus-4-0", kOpus4},
    {"claude-opus-4-20250514", kOpus4},
    {"claude-sonnet-4-5", kSonnet},
    {"claude-sonnet-4-5-20250929", kSonnet},
    {"claude-sonnet-4-0", kSonnet},
    {"claude-sonnet-4-20250514", kSonnet},
    {"claude-3-7-sonnet-latest", kSonnet},
    {"claude-3-7-sonnet-20250219", kSonnet},
    {"claude-haiku-4-5", kHaiku45},
    {"claude-haiku-4-5-20251001", kHaiku45},
    {"claude-3-5-haiku-latest", kHaiku35},
    {"claude-3-5-haiku-20241022", kHaiku35},
    {"claude-3-haiku-20240307", kHaiku3},
    {"gpt-5", kGpt5},
    {"gpt-5-2025-08-07", kGpt5},
    {"gpt-5-mini", kGpt5Mini},
    {"gpt-5-mini-2025-08-07", kGpt5Mini},
    {"gpt-5-nano", kGpt5Nano},
    {"gpt-5-nano-2025-08-07", kGpt5Nano},
    {"gpt-4.1", kGpt41},
    {"gpt-4.1-2025-04-14", kGpt41},
    {"gpt-4.1-mini", kGpt41Mini},
    {"gpt-4.1-mini-2025-04-14", kGpt41Mini},
    {"gpt-4.1-nano", kGpt41Nano},
    {"gpt-4.1-nano-2025-04-14", kGpt41Nano},
    {"gpt-4o", kGpt4o},
    {"gpt-4o-2024-08-06", kGpt4o},
    {"gpt-4o-2024-11-20", kGpt4o},
    {"gpt-4o-mini", kGpt4oMini},
    {"gpt-4o-mini-2024-07-18", kGpt4oMini},
    {"o3", kO3},
    {"o3-2025-04-16", kO3},
    {"o4-mini", kO4Mini},
    {"o4-mini-2025-04-16", kO4Mini},
};

}  // namespace

std::optional<TokenPrices> KnownPrices(std::string_view model) {
  const auto* it = std::find_if(std::begin(kPricedModels), std::end(kPricedModels),
                                [&](const PricedModel& m) { return m.id == model; });
  if (it == std::end(kPricedModels)) return std::nullopt;
  return it->prices;
}

std::optional<double> CostUsd(std::string_view model, const Usage& usage) {
  const std::optional<TokenPrices> p = KnownPrices(model);
  if (!p) {
    const bool spent = usage.input_tokens != 0 || usage.output_tokens != 0 ||
                       usage.cache_creation_input_tokens != 0 || usage.cache_read_input_tokens != 0;
    if (spent) return std::nullopt;
    return 0.0;
  }
  const auto per_token = [](int64_t tokens, double per_million) {
    return static_cast<double>(tokens) * per_million / 1e6;
  };
  return per_token(usage.input_tokens, p->input) + per_token(usage.output_tokens, p->output) +
         per_token(usage.cache_creation_input_tokens, p->cache_write) +
         per_token(usage.cache_read_input_tokens, p->cache_read);
}

}  // namespace forkbox::agent
