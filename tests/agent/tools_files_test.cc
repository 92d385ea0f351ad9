#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
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

// An offset counts lines, so it cannot reach past the cut of a line longer than the cap: the hint
// names the byte where the rest starts instead of an offset that returns the same text forever.
TEST_F(FileToolsTest, ReadFileALineLongerThanTheCapPointsPastItsCut) {
  WriteFile(dir_.Join("long.txt"), std::string(3000, 'y') + "\nsecond\n");
  ctx_.max_output_chars = 1000;
  ToolOutput out = Run("read_file", {{"path", "long.txt"}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_THAT(out.content, StartsWith(std::string(1000, 'y') + "\n[..."));
  EXPECT_THAT(out.content, HasSubstr("line 1 alone is longer than 1000 characters"));
  EXPECT_THAT(out.content, HasSubstr("starts at byte 1000"));
  EXPECT_THAT(out.content, HasSubstr("tail -c +1001"));
  EXPECT_THAT(out.content, ::testing::Not(HasSubstr("offset=1 ")));
}

// A cut right after a whole line continues with the next one, also when invalid bytes were
// replaced (their marker used to hide the newline: offset=10, a line shown twice).
TEST_F(FileToolsTest, ReadFileCutAfterWholeLinesContinuesWithTheNextLine) {
  std::string text;
  for (int i = 1; i <= 20; ++i)
    text += std::string(i == 3 ? 98 : 99, 'x') + (i == 3 ? "\xFF" : "") + "\n";
  WriteFile(dir_.Join("lines.txt"), std::string(9000, 'a') + "\n" + text);
  ctx_.max_output_chars = 1000;
  ToolOutput out = Run("read_file", {{"path", "lines.txt"}, {"offset", 2}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_THAT(out.content, HasSubstr("1 invalid UTF-8 sequences replaced"));
  EXPECT_THAT(out.content, HasSubstr("after line 11"));
  EXPECT_THAT(out.content, HasSubstr("continue with offset=12 "));
}

// A file in the workdir hard-linked to one outside is replaced, not written through: the other
// name keeps its content. The control writes through the link directly and reaches outside.
TEST_F(FileToolsTest, WriteAndEditReplaceAHardLinkedFileInsteadOfWritingThroughIt) {
  const std::string outside = outside_.Join("shared.txt");
  WriteFile(outside, "outside line\n");
  ASSERT_EQ(::link(outside.c_str(), dir_.Join("hard.txt").c_str()), 0);
  ASSERT_EQ(::link(outside.c_str(), dir_.Join("hard2.txt").c_str()), 0);
  ASSERT_EQ(::chmod(outside.c_str(), 0640), 0);
  ToolOutput out = Run("write_file", {{"path", "hard.txt"}, {"content", "new\n"}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_THAT(out.content, HasSubstr("it had 3 hard links"));
  EXPECT_EQ(ReadFile(dir_.Join("hard.txt")), "new\n");
  out = Run("edit_file", {{"path", "hard2.txt"}, {"old_text", "outside"}, {"new_text", "edited"}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_THAT(out.content, HasSubstr("it had 2 hard links"));
  EXPECT_EQ(ReadFile(dir_.Join("hard2.txt")), "edited line\n");
  EXPECT_EQ(ReadFile(outside), "outside line\n");
  struct stat st {};
  ASSERT_EQ(::stat(dir_.Join("hard2.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "the copy keeps the mode";
  EXPECT_EQ(st.st_nlink, 1u);
  // Control: the same bytes written through a link land outside.
  ASSERT_EQ(::link(outside.c_str(), dir_.Join("hard3.txt").c_str()), 0);
  WriteFile(dir_.Join("hard3.txt"), "through\n");
  EXPECT_EQ(ReadFile(outside), "through\n");
}

// A symbolic link beneath the workdir is still followed: its target gets the content.
TEST_F(FileToolsTest, WriteFileThroughASymlinkWritesItsTarget) {
  WriteFile(dir_.Join("target.txt"), "old\n");
  ASSERT_EQ(::symlink("target.txt", dir_.Join("link.txt").c_str()), 0);
  ToolOutput out = Run("write_file", {{"path", "link.txt"}, {"content", "new\n"}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(ReadFile(dir_.Join("target.txt")), "new\n");
  EXPECT_TRUE(std::filesystem::is_symlink(dir_.Join("link.txt")));
}

// A write that fails half way (here the file size limit) leaves the old content whole and removes
// what the call created; in place, the file was truncated first.
TEST_F(FileToolsTest, AFailedWriteLeavesTheOldContentAndCreatesNothing) {
  const std::string old_text = "keep me " + std::string(100, 'k') + "\n";
  WriteFile(dir_.Join("f.txt"), old_text);
  // In a child of its own: the limit and the ignored SIGXFSZ must not stay with the test.
  auto run = [&] {
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small {};
    small.rlim_cur = small.rlim_max = 20;
    if (::setrlimit(RLIMIT_FSIZE, &small) != 0) _exit(2);
    ToolOutput edit =
        Run("edit_file", {{"path", "f.txt"}, {"old_text", "keep"}, {"new_text", "lost"}});
    ToolOutput write = Run("write_file", {{"path", "f.txt"}, {"content", old_text + "more"}});
    ToolOutput fresh =
        Run("write_file", {{"path", "n1/n2/new.txt"}, {"content", std::string(100, 'n')}});
    const auto entries = std::distance(std::filesystem::directory_iterator(dir_.path()),
                                       std::filesystem::directory_iterator());
    const bool ok = edit.is_error && write.is_error && fresh.is_error &&
                    ReadFile(dir_.Join("f.txt")) == old_text && entries == 1;
    _exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "");
  EXPECT_EQ(ReadFile(dir_.Join("f.txt")), old_text);
}

// Names the kernel could never open are refused before a parent directory is made for them.
TEST_F(FileToolsTest, WriteFileRefusesImpossibleNamesBeforeCreatingAnything) {
  std::string deep;
  for (int i = 0; i < 3000; ++i) deep += "d/";
  ToolOutput out = Run("write_file", {{"path", deep + "x"}, {"content", "x"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("longer than 4095 bytes"));
  out = Run("write_file", {{"path", "a/" + std::string(300, 'n')}, {"content", "x"}});
  EXPECT_THAT(out.content, HasSubstr("longer than 255 bytes"));
  out = Run("write_file", {{"path", "trail/"}, {"content", "x"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("is a directory"));
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path()));
}

// An absolute path names the file the kernel would open: doubled separators and "." components
// are not "outside the workdir". ".." still is, where it leads out.
TEST_F(FileToolsTest, AbsolutePathsWithDoubledSlashesNameTheFileBelow) {
  WriteFile(dir_.Join("three.txt"), "3\n");
  const std::string root = dir_.path();
  const size_t cut = root.find('/', 1);
  ASSERT_NE(cut, std::string::npos);
  for (const std::string& path : {root + "//three.txt", root + "/./three.txt",
                                  root.substr(0, cut) + "/" + root.substr(cut) + "/three.txt"}) {
    ToolOutput out = Run("read_file", {{"path", path}});
    EXPECT_FALSE(out.is_error) << path << ": " << out.content;
    EXPECT_EQ(out.content, "3\n");
  }
  ToolOutput out = Run(
      "read_file",
      {{"path", root + "/../" + std::filesystem::path(root).filename().string() + "/three.txt"}});
  EXPECT_TRUE(out.is_error);
}

}  // namespace
}  // namespace forkbox::agent
