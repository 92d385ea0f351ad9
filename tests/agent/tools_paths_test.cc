// Paths in the file tools: everything resolves beneath the workdir descriptor (openat2
// RESOLVE_BENEATH); "..", absolute paths elsewhere and symlinks that leave are refused, and only
// regular files are read or written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "agent/tools.h"
#include "tests/agent/tools_test_util.h"

namespace forkbox::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

class PathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.workdir = dir_.path();
    ctx_.timeout_ms = 10'000;
    Result<std::shared_ptr<const UniqueFd>> fd = OpenWorkdir(dir_.path());
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    ctx_.workdir_fd = *fd;
  }
  ToolOutput Read(const std::string& path) {
    return RunBaseTool(ToolUseBlock{"id", "read_file", {{"path", path}}}, ctx_);
  }
  ToolOutput Write(const std::string& path, const std::string& content = "new") {
    return RunBaseTool(ToolUseBlock{"id", "write_file", {{"path", path}, {"content", content}}},
                       ctx_);
  }
  TempDir dir_;
  TempDir outside_;
  ToolContext ctx_;
};

TEST_F(PathsTest, RelativeExistingAndMissingPathsResolveInside) {
  testing::WriteFile(dir_.Join("src/a.txt"), "x");
  EXPECT_EQ(Read("src/a.txt").content, "x");
  ToolOutput out = Write("src/new/deeper/b.txt");
  ASSERT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(testing::ReadFile(dir_.Join("src/new/deeper/b.txt")), "new");
  EXPECT_EQ(Read("./src/../src/a.txt").content, "x");
  EXPECT_THAT(Read(".").content, HasSubstr("is a directory"));
}

TEST_F(PathsTest, AbsolutePathInsideIsAccepted) {
  ASSERT_FALSE(Write(dir_.Join("x.txt")).is_error);
  EXPECT_EQ(testing::ReadFile(dir_.Join("x.txt")), "new");
}

TEST_F(PathsTest, DotDotEscapeIsRefused) {
  ToolOutput out = Write("../escape.txt");
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("outside the workdir"));
  out = Write("missing/../../escape.txt");
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("outside the workdir"));
  EXPECT_FALSE(
      std::filesystem::exists(std::filesystem::path(dir_.path()).parent_path() / "escape.txt"));
}

TEST_F(PathsTest, AbsolutePathOutsideIsRefused) {
  ToolOutput out = Read("/etc/passwd");
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("'/etc/passwd'"));
  EXPECT_THAT(out.content, HasSubstr("outside the workdir"));
}

TEST_F(PathsTest, SymlinkPointingOutsideIsRefused) {
  testing::WriteFile(outside_.Join("secret.txt"), "s");
  std::filesystem::create_directory_symlink(outside_.path(), dir_.Join("link"));
  ToolOutput out = Read("link/secret.txt");
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("outside the workdir"));
  // A new file under the link would land outside too.
  EXPECT_TRUE(Write("link/new.txt").is_error);
  EXPECT_FALSE(std::filesystem::exists(outside_.Join("new.txt")));
  // A relative link that climbs out is refused the same way.
  std::filesystem::create_symlink(
      "../" + std::filesystem::path(outside_.path()).filename().string(), dir_.Join("rel"));
  EXPECT_TRUE(Write("rel/new.txt").is_error);
  EXPECT_FALSE(std::filesystem::exists(outside_.Join("new.txt")));
}

TEST_F(PathsTest, RelativeSymlinkInsideIsFollowed) {
  testing::WriteFile(dir_.Join("real/f.txt"), "x");
  std::filesystem::create_directory_symlink("real", dir_.Join("alias"));
  EXPECT_EQ(Read("alias/f.txt").content, "x");
  ASSERT_FALSE(Write("alias/g.txt").is_error);
  EXPECT_EQ(testing::ReadFile(dir_.Join("real/g.txt")), "new");
}

TEST_F(PathsTest, MagicLinksAreRefused) {
  std::filesystem::create_symlink("/proc/self/cwd", dir_.Join("magic"));
  EXPECT_TRUE(Read("magic/x").is_error);
}

TEST_F(PathsTest, DanglingSymlinkIsRefused) {
  std::filesystem::create_symlink("not-yet", dir_.Join("dangling"));
  ToolOutput out = Write("dangling");
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("dangling symbolic link"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("not-yet")));
}

TEST_F(PathsTest, EmptyPathIsAnError) { EXPECT_THAT(Read("").content, HasSubstr("empty")); }

// A FIFO (with or without a writer) must never block a file tool: it is refused at once.
TEST_F(PathsTest, FifoIsRefusedNotWaitedOn) {
  ASSERT_EQ(::mkfifo(dir_.Join("fifo").c_str(), 0644), 0);
  for (const ToolOutput& out :
       {Read("fifo"), Write("fifo"),
        RunBaseTool(
            ToolUseBlock{
                "id", "edit_file", {{"path", "fifo"}, {"old_text", "a"}, {"new_text", "b"}}},
            ctx_)}) {
    EXPECT_TRUE(out.is_error);
    EXPECT_THAT(out.content, HasSubstr("not a regular file"));
  }
}

TEST_F(PathsTest, SocketAndDeviceAreRefused) {
  std::filesystem::create_symlink("/dev/null", dir_.Join("null"));  // Absolute: refused anyway.
  EXPECT_TRUE(Write("null").is_error);
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = dir_.Join("sock");
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ToolOutput out = Read("sock");
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("not a regular file"));
  ::close(s);
}

TEST_F(PathsTest, WithoutTheWorkdirDescriptorFileToolsRefuse) {
  ctx_.workdir_fd.reset();
  EXPECT_THAT(Read("a").content, HasSubstr("the workdir was not opened"));
}

}  // namespace
}  // namespace forkbox::agent
