// The live progress block as data: RenderProgressBlock, a pure function from the running tasks,
// the queue and the terminal width to the lines drawn.
#include "parent/progress.h"

#include <gtest/gtest.h>

namespace forkbox::parent {
namespace {

size_t Columns(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

TaskLine Running() {
  TaskLine t;
  t.number = 2;
  t.description = "explore: find the test framework";
  t.turn = 3;
  t.tool = "bash";
  t.detail = "pytest -q tests/test_login.py";
  t.elapsed_ms = 14'900;
  t.tokens = 12'345;
  return t;
}

TEST(ProgressBlockTest, OneLinePerTaskWithTurnToolElapsedAndTokens) {
  const auto lines = RenderProgressBlock({Running()}, 0, 200);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "[task 2] explore: find the test framework · turn 3 · 14s · 12.3k tokens · bash: "
            "pytest -q tests/test_login.py");
}

TEST(ProgressBlockTest, QueuedTasksAreCountedWithTheRightPlural) {
  TaskLine idle = Running();
  idle.number = 1;
  idle.tool.clear();
  idle.detail.clear();
  idle.turn = 0;
  idle.elapsed_ms = 125'000;
  idle.tokens = 1;
  auto lines = RenderProgressBlock({idle, Running()}, 1, 200);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "[task 1] explore: find the test framework · turn 0 · 2m05s · 1 token");
  EXPECT_EQ(lines[2], "1 task queued");
  lines = RenderProgressBlock({}, 3, 200);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "3 tasks queued");
  EXPECT_TRUE(RenderProgressBlock({}, 0, 200).empty());
}

TEST(ProgressBlockTest, NarrowTerminalsShortenTheDescriptionFirstAndNeverOverflow) {
  for (size_t width : {20u, 40u, 60u, 80u}) {
    const auto lines = RenderProgressBlock({Running()}, 0, width);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_LE(Columns(lines[0]), width) << lines[0];
    EXPECT_EQ(lines[0].rfind("[task 2] ", 0), 0u) << lines[0];
  }
  // At 80 columns the figures and the tool stay; the description gave way.
  const std::string line = RenderProgressBlock({Running()}, 0, 80)[0];
  EXPECT_NE(line.find("turn 3 · 14s · 12.3k tokens · bash"), std::string::npos) << line;
  EXPECT_EQ(line.find("find the test framework"), std::string::npos) << line;
  EXPECT_NE(line.find("…"), std::string::npos) << line;
}

TEST(ProgressBlockTest, ControlBytesFromTheModelAreNeutralised) {
  TaskLine t = Running();
  t.description = "general: \x1b]0;pwned\x07 title";
  t.detail = "echo \x1b[2J";
  const std::string line = RenderProgressBlock({t}, 0, 200)[0];
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_NE(line.find("\\x1b]0;pwned\\x07 title"), std::string::npos) << line;
}

// Audit A(c): a newline in what a child or the model wrote must not add a line to the block (the
// redraw moves the cursor up by the count of lines it drew).
TEST(ProgressBlockTest, NewlinesFromAChildOrTheModelStayOnOneLine) {
  TaskLine t = Running();
  t.description = "general: two\nlines";
  t.tool = "L1\nL2\r\nL3";
  t.detail = "tab\there\nand a break";
  const auto lines = RenderProgressBlock({t}, 0, 500);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find_first_of("\n\r\t"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("two lines"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace forkbox::parent
