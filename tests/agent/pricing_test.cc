// agent/pricing.h: the list prices of the models forkbox knows, and what usage costs on them.
#include "agent/pricing.h"

#include <gtest/gtest.h>

namespace forkbox::agent {
namespace {

// The defaults of both providers and an alias's dated snapshot carry their published prices.
TEST(PricingTest, KnownModelsCarryTheirPublishedPrices) {
  const std::optional<TokenPrices> sonnet = KnownPrices("claude-sonnet-4-5");
  ASSERT_TRUE(sonnet.has_value());
  EXPECT_EQ(sonnet->input, 3.0);
  EXPECT_EQ(sonnet->output, 15.0);
  EXPECT_EQ(sonnet->cache_write, 3.75);
  EXPECT_EQ(sonnet->cache_read, 0.30);
  const std::optional<TokenPrices> dated = KnownPrices("claude-sonnet-4-5-20250929");
  ASSERT_TRUE(dated.has_value());
  EXPECT_EQ(dated->output, 15.0);
  const std::optional<TokenPrices> gpt = KnownPrices("gpt-4.1");
  ASSERT_TRUE(gpt.has_value());
  EXPECT_EQ(gpt->input, 2.0);
  EXPECT_EQ(gpt->cache_read, 0.50);
  EXPECT_EQ(gpt->output, 8.0);
  EXPECT_EQ(KnownPrices("claude-opus-4-1")->input, 15.0);
  EXPECT_EQ(KnownPrices("claude-haiku-4-5")->output, 5.0);
}

// Matched exactly: a model of the same family at another price is not given a neighbour's price
// (a prefix match would price claude-opus-4-5 as Opus 4.1, gpt-4o-2024-05-13 as gpt-4o).
TEST(PricingTest, OnlyExactIdsArePriced) {
  for (const char* model : {"claude-opus-4-5", "claude-sonnet-4-5-x", "gpt-4o-2024-05-13",
                            "claude-sonnet", "llama3.1", "", "GPT-4.1"}) {
    EXPECT_FALSE(KnownPrices(model).has_value()) << model;
  }
}

// Each token kind at its own price; without a price, spent tokens cost null (never a made-up 0),
// and nothing spent costs 0.
TEST(PricingTest, CostCountsEachKindOfTokenAtItsPrice) {
  Usage usage;
  usage.input_tokens = 1'000'000;
  usage.output_tokens = 2'000'000;
  usage.cache_creation_input_tokens = 4'000'000;
  usage.cache_read_input_tokens = 10'000'000;
  const std::optional<double> cost = CostUsd("claude-sonnet-4-5", usage);
  ASSERT_TRUE(cost.has_value());
  EXPECT_DOUBLE_EQ(*cost, 3.0 + 2 * 15.0 + 4 * 3.75 + 10 * 0.30);
  EXPECT_DOUBLE_EQ(*CostUsd("gpt-4.1", usage), 2.0 + 2 * 8.0 + 4 * 2.0 + 10 * 0.50);
  EXPECT_FALSE(CostUsd("local-model", usage).has_value());
  EXPECT_EQ(CostUsd("local-model", Usage{}), 0.0);
  Usage output_only;
  output_only.output_tokens = 1;
  EXPECT_FALSE(CostUsd("local-model", output_only).has_value());
}

}  // namespace
}  // namespace forkbox::agent
