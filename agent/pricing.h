// What model calls cost at the providers' published list prices: the `total_cost_usd` of the
// json and stream-json results (Claude Code's field of that name). An estimate, as Claude Code's
// is: a gateway, a discount or a price change since the table was written is not seen.
#pragma once

#include <optional>
#include <string_view>

#include "agent/message.h"

namespace forkbox::agent {

// USD per million tokens.
struct TokenPrices {
  double input = 0;
  double output = 0;
  double cache_write = 0;  // A 5-minute prompt-cache write (forkbox writes no other).
  double cache_read = 0;
};

// The list prices of a model id forkbox knows, matched exactly (an alias or a dated snapshot:
// "claude-sonnet-4-5", "gpt-4.1-2025-04-14"); nullopt for any other id. Exact, not by prefix: a
// snapshot can cost another price than its family (gpt-4o-2024-05-13, claude-opus-4-5).
std::optional<TokenPrices> KnownPrices(std::string_view model);

// What `usage` (canonical: input_tokens without the cache shares) cost on `model`; nullopt when
// the model has no known price and the usage is not all zero (no price is made up; nothing
// spent costs 0 on any model).
std::optional<double> CostUsd(std::string_view model, const Usage& usage);

}  // namespace forkbox::agent
