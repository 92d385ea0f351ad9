#include "base/format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace forkbox {
namespace {

TEST(FormatSecondsTest, WholeSecondsHaveNoDecimal) {
  EXPECT_EQ(FormatSeconds(0), "0s");
  EXPECT_EQ(FormatSeconds(120000), "120s");
}

TEST(FormatSecondsTest, FractionsKeepOneDecimal) {
  EXPECT_EQ(FormatSeconds(1500), "1.5s");
  EXPECT_EQ(FormatSeconds(250), "0.2s");
}

TEST(JoinList, JoinsWithCommas) {
  EXPECT_EQ(JoinList({}), "");
  EXPECT_EQ(JoinList({"bash"}), "bash");
  EXPECT_EQ(JoinList({"bash", "task", "read_file"}), "bash, task, read_file");
}

// The one Plural (agent/provider.cc and parent/stats.cc each had their own): "s" unless exactly 1,
// whatever the word's type and the count's width.
TEST(Plural, AddsAnSUnlessThereIsOne) {
  EXPECT_EQ(Plural(1, "turn"), "1 turn");
  EXPECT_EQ(Plural(0, "turn"), "0 turns");
  EXPECT_EQ(Plural(3, std::string("tool call")), "3 tool calls");
  EXPECT_EQ(Plural(int64_t{1} << 40, "token"), "1099511627776 tokens");
  EXPECT_EQ(Plural(-1, "byte"), "-1 bytes");
}

}  // namespace
}  // namespace forkbox
