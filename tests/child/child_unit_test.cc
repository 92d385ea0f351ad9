#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "child/runner.h"
#include "child/start.h"

namespace forkbox::child {
namespace {

TEST(PortFromUrlTest, ExplicitAndDefaultPorts) {
  EXPECT_EQ(PortFromUrl("http://127.0.0.1:8123"), 8123);
  EXPECT_EQ(PortFromUrl("http://127.0.0.1:8123/v1"), 8123);
  EXPECT_EQ(PortFromUrl("https://api.anthropic.com"), 443);
  EXPECT_EQ(PortFromUrl("HTTP://example.com/v1"), 80);
  EXPECT_EQ(PortFromUrl("http://user:pw@host:9000/x"), 9000);
  EXPECT_EQ(PortFromUrl("http://[::1]:7000/v1"), 7000);
  EXPECT_EQ(PortFromUrl("http://[::1]/v1"), 80);
}

TEST(PortFromUrlTest, GarbageGivesZero) {
  EXPECT_EQ(PortFromUrl("localhost:8080"), 0);
  EXPECT_EQ(PortFromUrl("ftp://host"), 0);
  EXPECT_EQ(PortFromUrl("http://host:99999"), 0);
  EXPECT_EQ(PortFromUrl("http://host:12ab"), 0);
}

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
