#include "base/format.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace forkbox
