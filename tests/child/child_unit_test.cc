#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "child/runner.h"
#include "child/start.h"

namespace forkbox::child {
namespace {

TEST(DescribeCallTest, DescribesTheInputNeverOutput) {
  EXPECT_EQ(DescribeCall({"1", "bash", {{"command", "make -j2"}}}), "make -j2");
  EXPECT_EQ(DescribeCall({"1", "read_file", {{"path", "a.cc"}}}), "a.cc");
  EXPECT_EQ(DescribeCall({"1", "read_file", {{"path", "a.cc"}, {"offset", 10}, {"limit", 5}}}),
            "a.cc (lines 10+5)");
  EXPECT_EQ(DescribeCall({"1", "write_file", {{"path", "b.txt"}, {"content", "12345"}}}),
            "b.txt (5 bytes)");
  EXPECT_EQ(DescribeCall({"1", "edit_file", {{"path", "c.h"}, {"old_text", "x"}}}), "c.h");
}

}  // namespace
}  // namespace forkbox::child
