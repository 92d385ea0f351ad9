// The canonical message model's helpers.
#include <gtest/gtest.h>

#include "agent/message.h"

namespace forkbox::agent {
namespace {

TEST(MakeValidUtf8, ValidTextIsUntouched) {
  std::string s = "plain ascii, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80, \xF4\x8F\xBF\xBF";
  const std::string before = s;
  EXPECT_EQ(MakeValidUtf8(s), 0u);
  EXPECT_EQ(s, before);
}

TEST(MakeValidUtf8, ReplacesEachInvalidSequence) {
  struct Case {
    std::string in, out;
    size_t replaced;
  };
  const std::string r = "\xEF\xBF\xBD";
  const Case cases[] = {
      {"a\xFF"
       "b",
       "a" + r + "b", 1},      // Never valid byte.
      {"\x80\x80", r + r, 2},  // Lone continuations.
      {"\xC3", r, 1},          // Truncated at the end.
      {"\xE2\x82"
       "x",
       r + "x", 1},                            // Truncated 3-byte: one subpart.
      {"\xC0\xAF", r + r, 2},                  // Overlong '/'.
      {"\xE0\x80\xAF", r + r + r, 3},          // Overlong 3-byte.
      {"\xED\xA0\x80", r + r + r, 3},          // UTF-16 surrogate.
      {"\xF4\x90\x80\x80", r + r + r + r, 4},  // Above U+10FFFF.
      {"\xF0\x9F\x98"
       "\xC3\xA9",
       r + "\xC3\xA9", 1},                                        // Cut emoji then valid char.
      {std::string("nul\0ok", 6), std::string("nul\0ok", 6), 0},  // NUL is valid UTF-8.
  };
  for (const Case& c : cases) {
    std::string s = c.in;
    EXPECT_EQ(MakeValidUtf8(s), c.replaced) << testing::PrintToString(c.in);
    EXPECT_EQ(s, c.out) << testing::PrintToString(c.in);
  }
}

TEST(MakeValidUtf8, ResultIsAlwaysValid) {
  // Every 2-byte combination: after repair, a second pass finds nothing.
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; b += 7) {
      std::string s = {static_cast<char>(a), static_cast<char>(b), '\xE2'};
      MakeValidUtf8(s);
      std::string again = s;
      ASSERT_EQ(MakeValidUtf8(again), 0u) << a << "," << b;
    }
  }
}

TEST(Message, TextOfAndToolUsesOfKeepOrder) {
  Message m;
  m.role = Role::kAssistant;
  m.content.push_back(TextBlock{"Hello "});
  m.content.push_back(ToolUseBlock{"t1", "bash", {{"command", "ls"}}});
  m.content.push_back(ThinkingBlock{{{"type", "thinking"}}});
  m.content.push_back(TextBlock{"world"});
  m.content.push_back(ToolUseBlock{"t2", "read_file", {{"path", "a"}}});
  EXPECT_EQ(TextOf(m), "Hello world");
  const auto uses = ToolUsesOf(m);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].id, "t1");
  EXPECT_EQ(uses[1].name, "read_file");
  EXPECT_EQ(uses[1].input["path"], "a");
}

TEST(Message, StopReasonNames) {
  EXPECT_STREQ(StopReasonName(StopReason::kEndTurn), "end_turn");
  EXPECT_STREQ(StopReasonName(StopReason::kToolUse), "tool_use");
  EXPECT_STREQ(StopReasonName(StopReason::kMaxTokens), "max_tokens");
  EXPECT_STREQ(StopReasonName(StopReason::kStopSequence), "stop_sequence");
  EXPECT_STREQ(StopReasonName(StopReason::kPauseTurn), "pause_turn");
  EXPECT_STREQ(StopReasonName(StopReason::kRefusal), "refusal");
  EXPECT_STREQ(StopReasonName(StopReason::kContextWindow), "context_window");
  EXPECT_STREQ(StopReasonName(StopReason::kUnknown), "unknown");
}

}  // namespace
}  // namespace forkbox::agent
