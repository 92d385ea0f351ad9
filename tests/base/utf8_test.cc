#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace forkbox {
namespace {

TEST(Utf8Test, AcceptsValidSequencesOfEveryLength) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9"));          // é
  EXPECT_TRUE(IsValidUtf8("\xE2\x9C\x93"));      // ✓
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x9A\x80"));  // 🚀
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
}

TEST(Utf8Test, RejectsMalformedSequencesAtTheirOffset) {
  struct Case {
    std::string bytes;
    size_t offset;
  };
  const Case cases[] = {
      {"ab\x80", 2},              // Lone continuation byte.
      {"\xC3", 0},                // Truncated 2-byte sequence.
      {"x\xE2\x9C", 1},           // Truncated 3-byte sequence.
      {"\xC0\xAF", 0},            // Overlong '/'.
      {"\xC1\xBF", 0},            // Overlong.
      {"\xE0\x80\xAF", 0},        // Overlong 3-byte.
      {"\xF0\x80\x80\xAF", 0},    // Overlong 4-byte.
      {"\xED\xA0\x80", 0},        // UTF-16 surrogate U+D800.
      {"ok\xF4\x90\x80\x80", 2},  // Above U+10FFFF.
      {"\xF5\x80\x80\x80", 0},    // Invalid lead byte.
      {"\xFF", 0},
      {"\xC3\x28", 0},  // Lead followed by a non-continuation.
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FindInvalidUtf8(c.bytes), c.offset)
        << "input bytes: " << ::testing::PrintToString(c.bytes);
  }
}

TEST(Utf8Test, TruncateNeverSplitsASequence) {
  const std::string text =
      "ab\xE2\x9C\x93"
      "cd";  // a b ✓ c d
  EXPECT_EQ(TruncateUtf8(text, 100), text);
  EXPECT_EQ(TruncateUtf8(text, 2), "ab");
  EXPECT_EQ(TruncateUtf8(text, 3), "ab");
  EXPECT_EQ(TruncateUtf8(text, 4), "ab");
  EXPECT_EQ(TruncateUtf8(text, 5), "ab\xE2\x9C\x93");
  EXPECT_EQ(TruncateUtf8(text, 0), "");
}

}  // namespace
}  // namespace forkbox
