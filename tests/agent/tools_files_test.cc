#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "agent/tools.h"
#include "tests/agent/tools_test_util.h"

namespace forkbox::agent {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using ::testing::StartsWith;
using testing::WriteFile;

class FileToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.workdir = dir_.path();
    Result<std::shared_ptr<const UniqueFd>> fd = OpenWorkdir(dir_.path());
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    ctx_.workdir_fd = *fd;
  }
  ToolOutput Run(const std::string& name, nlohmann::json input) {
    return RunBaseTool(ToolUseBlock{"id", name, std::move(input)}, ctx_);
  }
  testing::TempDir dir_;
  testing::TempDir outside_;
  ToolContext ctx_;
};

TEST_F(FileToolsTest, ReadFileWholeFile) {
  WriteFile(dir_.Join("a.txt"), "line1\nline2\n");
  ToolOutput out = Run("read_file", {{"path", "a.txt"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(out.content, "line1\nline2\n");
}

TEST_F(FileToolsTest, ReadFileOffsetIsOneBasedAndLimitCountsLines) {
  WriteFile(dir_.Join("a.txt"), "l1\nl2\nl3\nl4\nl5\n");
  ToolOutput out = Run("read_file", {{"path", "a.txt"}, {"offset", 2}, {"limit", 2}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_THAT(out.content, StartsWith("l2\nl3\n"));
  EXPECT_THAT(out.content, HasSubstr("continue with offset=4"));
  out = Run("read_file", {{"path", "a.txt"}, {"offset", 5}});
  EXPECT_EQ(out.content, "l5\n");
  out = Run("read_file", {{"path", "a.txt"}, {"offset", "3"}, {"limit", 1}});
  EXPECT_THAT(out.content, StartsWith("l3\n"));
}

TEST_F(FileToolsTest, ReadFileBadOffsetsAreErrors) {
  WriteFile(dir_.Join("a.txt"), "l1\nl2\n");
  ToolOutput out = Run("read_file", {{"path", "a.txt"}, {"offset", 0}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("numbered from 1"));
  out = Run("read_file", {{"path", "a.txt"}, {"offset", 9}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("past the end"));
  EXPECT_THAT(out.content, HasSubstr("2 line(s)"));
  out = Run("read_file", {{"path", "a.txt"}, {"limit", "many"}});
  EXPECT_TRUE(out.is_error);
  // A whole float is a number a model may send; one that int64_t cannot hold is refused before
  // any cast (whose result would be undefined: UBSan names it).
  out = Run("read_file", {{"path", "a.txt"}, {"offset", 2.0}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(out.content, "l2\n");
  for (double bad : {1e300, -1e300, 2.5, 1e19}) {
    out = Run("read_file", {{"path", "a.txt"}, {"offset", bad}});
    EXPECT_TRUE(out.is_error) << bad;
    EXPECT_THAT(out.content, HasSubstr("'offset' must be a positive integer")) << bad;
  }
}

TEST_F(FileToolsTest, ReadFileBinaryGetsAMessageNotBytes) {
  std::string bin(
      "\x7f"
      "ELF\0\0\x01\x02",
      8);
  WriteFile(dir_.Join("prog"), bin + std::string(100, '\0'));
  ToolOutput out = Run("read_file", {{"path", "prog"}});
  EXPECT_THAT(out.content, HasSubstr("binary file"));
  EXPECT_EQ(out.content.find('\0'), std::string::npos);
  WriteFile(dir_.Join("latin1.txt"), "caf\xE9 au lait\n");
  out = Run("read_file", {{"path", "latin1.txt"}});
  EXPECT_THAT(out.content, HasSubstr("binary file"));
}

TEST_F(FileToolsTest, ReadFileLargeFileIsCutWithContinueHint) {
  std::string big;
  for (int i = 1; i <= 20000; ++i) big += "line " + std::to_string(i) + "\n";
  WriteFile(dir_.Join("big.txt"), big);
  ctx_.max_output_chars = 1000;
  ToolOutput out = Run("read_file", {{"path", "big.txt"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_THAT(out.content, StartsWith("line 1\nline 2\n"));
  EXPECT_THAT(out.content, HasSubstr("output truncated at 1000 characters"));
  EXPECT_THAT(out.content, HasSubstr("continue with offset="));
  EXPECT_LT(out.content.size(), 1200u);
}

TEST_F(FileToolsTest, ReadFileErrorsAreClear) {
  ToolOutput out = Run("read_file", {{"path", "nope.txt"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("not found"));
  std::filesystem::create_directory(dir_.Join("sub"));
  out = Run("read_file", {{"path", "sub"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("is a directory"));
  out = Run("read_file",
            {{"path", "../" + std::filesystem::path(outside_.path()).filename().string()}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("outside the workdir"));
}

TEST_F(FileToolsTest, WriteFileCreatesParentDirectories) {
  ToolOutput out = Run("write_file", {{"path", "new/dir/f.txt"}, {"content", "hello\n"}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(ReadFile(dir_.Join("new/dir/f.txt")), "hello\n");
  out = Run("write_file", {{"path", "new/dir/f.txt"}, {"content", "bye"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("overwrote"));
  EXPECT_EQ(ReadFile(dir_.Join("new/dir/f.txt")), "bye");
}

TEST_F(FileToolsTest, WriteFileEscapeIsRefusedAndNothingIsWritten) {
  std::filesystem::create_directory_symlink(outside_.path(), dir_.Join("out"));
  ToolOutput out = Run("write_file", {{"path", "out/pwned.txt"}, {"content", "x"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("outside the workdir"));
  EXPECT_FALSE(std::filesystem::exists(outside_.Join("pwned.txt")));
  out = Run("write_file", {{"path", outside_.Join("abs.txt")}, {"content", "x"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_FALSE(std::filesystem::exists(outside_.Join("abs.txt")));
  out = Run("write_file", {{"path", "f.txt"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("'content'"));
}

TEST_F(FileToolsTest, EditFileReplacesExactlyOnce) {
  WriteFile(dir_.Join("m.py"), "def f():\n    return 1\n");
  ToolOutput out =
      Run("edit_file", {{"path", "m.py"}, {"old_text", "return 1"}, {"new_text", "return 2"}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_THAT(out.content, HasSubstr("line 2"));
  EXPECT_EQ(ReadFile(dir_.Join("m.py")), "def f():\n    return 2\n");
}

TEST_F(FileToolsTest, EditFileMissingTextSaysNotFound) {
  WriteFile(dir_.Join("m.py"), "abc\n");
  ToolOutput out = Run("edit_file", {{"path", "m.py"}, {"old_text", "xyz"}, {"new_text", "q"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("not found"));
  EXPECT_EQ(ReadFile(dir_.Join("m.py")), "abc\n");
}

TEST_F(FileToolsTest, EditFileAmbiguousTextSaysHowManyTimes) {
  WriteFile(dir_.Join("m.py"), "x = 1\nx = 1\nx = 1\n");
  ToolOutput out =
      Run("edit_file", {{"path", "m.py"}, {"old_text", "x = 1"}, {"new_text", "x = 2"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("found 3 times"));
  EXPECT_EQ(ReadFile(dir_.Join("m.py")), "x = 1\nx = 1\nx = 1\n");
}

TEST_F(FileToolsTest, EditFileRejectsEmptyOldTextAndMissingFile) {
  WriteFile(dir_.Join("m.py"), "abc\n");
  EXPECT_TRUE(Run("edit_file", {{"path", "m.py"}, {"old_text", ""}, {"new_text", "x"}}).is_error);
  ToolOutput out = Run("edit_file", {{"path", "none.py"}, {"old_text", "a"}, {"new_text", "b"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("not found"));
}

TEST_F(FileToolsTest, NonObjectInputIsAnError) {
  ToolOutput out = RunBaseTool(ToolUseBlock{"id", "read_file", nlohmann::json::array()}, ctx_);
  EXPECT_TRUE(out.is_error);
}

}  // namespace
}  // namespace forkbox::agent
