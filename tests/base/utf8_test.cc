#include "base/utf8.h"

#include <gtest/gtest.h>

#include <random>
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

// Counting the starts Utf8CharStarts reports over any bytes gives the number of characters of the
// text MakeValidUtf8 makes of them: the cap on tool output counts what the model is sent.
TEST(Utf8Test, CharStartsCountTheCharactersOfTheRepairedText) {
  auto starts = [](std::string_view s) {
    Utf8CharStarts scan;
    size_t n = 0;
    for (char c : s) n += scan.Starts(c) ? 1 : 0;
    return n;
  };
  auto repaired_chars = [](std::string s) {
    MakeValidUtf8(s);
    size_t n = 0;
    for (char c : s) n += IsUtf8Continuation(c) ? 0 : 1;
    return n;
  };
  for (const std::string& s :
       {std::string(1000, '\x80'),
        std::string("\xE0\xA0"
                    "A"),
        std::string("\xF0\x90\x80"), std::string("\xED\xA0\x80"), std::string("\xC0\xAF"),
        std::string("a\xE2\x82\xAC"
                    "b"),
        std::string("\xF4\x90\x80\x80"), std::string("\xFF\xFE"), std::string("\xC2")}) {
    EXPECT_EQ(starts(s), repaired_chars(s)) << s.size();
  }
  EXPECT_EQ(starts(std::string(1000, '\x80')), 1000u) << "each stray byte is a character";
  // Random bytes, drawn mostly from the bytes the rules single out.
  const std::string pool = "A\x80\x8F\x90\x9F\xA0\xBF\xC0\xC2\xDF\xE0\xE1\xED\xEF\xF0\xF4\xF5\xFF";
  std::mt19937 rng(18);
  for (int round = 0; round < 20000; ++round) {
    std::string s(rng() % 12, '\0');
    for (char& c : s) c = round % 2 ? pool[rng() % pool.size()] : static_cast<char>(rng());
    ASSERT_EQ(starts(s), repaired_chars(s)) << "round " << round;
  }
}

}  // namespace
}  // namespace forkbox
