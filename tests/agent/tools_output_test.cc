#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "agent/tool_output.h"
#include "agent/tools.h"
#include "tests/agent/tools_test_util.h"

namespace forkbox::agent {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(CutOutputTest, ShortTextIsUnchanged) { EXPECT_EQ(CutOutput("hello", 5), "hello"); }

TEST(CutOutputTest, CutsAtCharacterBoundaryAndCountsDroppedBytes) {
  std::string s;
  for (int i = 0; i < 10; ++i) s += "\xC3\xA9";  // é, 2 bytes each.
  std::string out = CutOutput(s, 4, 7);
  EXPECT_THAT(out, StartsWith("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\n"));
  // 6 characters = 12 bytes cut, plus 7 reported by the caller.
  EXPECT_THAT(out, HasSubstr("19 bytes dropped"));
}

TEST(BoundedOutputTest, SmallOutputPassesThrough) {
  BoundedOutput out(100);
  out.Append("abc");
  out.Append("def\n");
  EXPECT_EQ(out.total_bytes(), 7);
  EXPECT_EQ(out.Finish(), "abcdef\n");
}

TEST(BoundedOutputTest, HugeOutputKeepsHeadAndTailWithinCap) {
  const int64_t cap = 1000;
  BoundedOutput out(cap);
  std::string chunk(4096, 'x');
  out.Append("BEGIN");
  int64_t total = 5;
  for (int i = 0; i < 2500; ++i) {  // ~10 MB.
    out.Append(chunk);
    total += static_cast<int64_t>(chunk.size());
  }
  out.Append("END");
  total += 3;
  EXPECT_EQ(out.total_bytes(), total);
  std::string s = out.Finish();
  EXPECT_THAT(s, StartsWith("BEGIN"));
  EXPECT_THAT(s, EndsWith("END"));
  size_t marker = s.find("[... output truncated: ");
  ASSERT_NE(marker, std::string::npos);
  std::string head = s.substr(0, marker);
  std::string rest = s.substr(s.find("...]\n", marker) + 5);
  // Everything shown plus everything dropped is everything produced.
  std::string expected = std::to_string(total - static_cast<int64_t>(head.size() - 1) -
                                        static_cast<int64_t>(rest.size())) +
                         " bytes dropped";
  EXPECT_THAT(s, HasSubstr(expected));
  EXPECT_LE(testing::CountChars(head) + testing::CountChars(rest), cap + 1);
}

TEST(BoundedOutputTest, MultiByteCharactersAreNeverSplit) {
  BoundedOutput out(10);
  std::string s;
  for (int i = 0; i < 100; ++i) s += "\xE2\x82\xAC";  // €
  // Feed byte by byte to split every character across Append calls.
  for (char c : s) out.Append(std::string(1, c));
  std::string r = out.Finish();
  std::string copy = r;
  EXPECT_EQ(MakeValidUtf8(copy), 0u) << r;
  EXPECT_THAT(r, HasSubstr("bytes dropped"));
}

TEST(BoundedOutputTest, InvalidUtf8IsReplacedAndReported) {
  BoundedOutput out(100);
  out.Append("ok \xFF\xFE end");
  std::string r = out.Finish();
  EXPECT_THAT(r, HasSubstr("ok \xEF\xBF\xBD\xEF\xBF\xBD end"));
  EXPECT_THAT(r, HasSubstr("2 invalid UTF-8 sequences replaced"));
}

// Stray continuation bytes are characters of the output (each becomes U+FFFD). They were not
// counted: 11.5 MB of 0x80 came through uncut as 34 MB of JSON, which the API refused.
TEST(BoundedOutputTest, StrayContinuationBytesCountAndAreCut) {
  BoundedOutput out(1000);
  const std::string chunk(64 * 1024, '\x80');
  for (int i = 0; i < 40; ++i) out.Append(chunk);
  std::string r = out.Finish();
  EXPECT_THAT(r, HasSubstr("bytes dropped"));
  EXPECT_LE(testing::CountChars(r), 1000 + 200) << "the cap and the two markers";
}

TEST(CutOutputTest, StrayContinuationBytesCount) {
  EXPECT_THAT(CutOutput(std::string(5000, '\x80'), 100), HasSubstr("4900 bytes dropped"));
}

}  // namespace
}  // namespace forkbox::agent
