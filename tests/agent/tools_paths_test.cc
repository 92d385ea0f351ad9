#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "agent/tools.h"
#include "tests/agent/tools_test_util.h"

namespace forkbox::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

class PathsTest : public ::testing::Test {
 protected:
  bool Resolve(const std::string& path) {
    resolved_.clear();
    error_.clear();
    return ResolveInWorkdir(dir_.path(), path, &resolved_, &error_);
  }
  TempDir dir_;
  TempDir outside_;
  std::string resolved_;
  std::string error_;
};

TEST_F(PathsTest, RelativeExistingAndMissingPathsResolveInside) {
  testing::WriteFile(dir_.Join("src/a.txt"), "x");
  ASSERT_TRUE(Resolve("src/a.txt")) << error_;
  EXPECT_EQ(resolved_, dir_.Join("src/a.txt"));
  ASSERT_TRUE(Resolve("src/new/deeper/b.txt")) << error_;
  EXPECT_EQ(resolved_, dir_.Join("src/new/deeper/b.txt"));
  ASSERT_TRUE(Resolve("./src/../src/a.txt")) << error_;
  EXPECT_EQ(resolved_, dir_.Join("src/a.txt"));
  ASSERT_TRUE(Resolve(".")) << error_;
  EXPECT_EQ(resolved_, dir_.path());
}

TEST_F(PathsTest, AbsolutePathInsideIsAccepted) {
  ASSERT_TRUE(Resolve(dir_.Join("x.txt"))) << error_;
  EXPECT_EQ(resolved_, dir_.Join("x.txt"));
}

TEST_F(PathsTest, DotDotEscapeIsRefused) {
  EXPECT_FALSE(Resolve("../escape.txt"));
  EXPECT_THAT(error_, HasSubstr("outside the workdir"));
  EXPECT_FALSE(Resolve("missing/../../escape.txt"));
  EXPECT_THAT(error_, HasSubstr("outside the workdir"));
  EXPECT_TRUE(resolved_.empty());
}

TEST_F(PathsTest, AbsolutePathOutsideIsRefused) {
  EXPECT_FALSE(Resolve("/etc/passwd"));
  EXPECT_THAT(error_, HasSubstr("'/etc/passwd'"));
  EXPECT_THAT(error_, HasSubstr("outside the workdir"));
}

TEST_F(PathsTest, SymlinkPointingOutsideIsRefused) {
  testing::WriteFile(outside_.Join("secret.txt"), "s");
  std::filesystem::create_directory_symlink(outside_.path(), dir_.Join("link"));
  EXPECT_FALSE(Resolve("link/secret.txt"));
  EXPECT_THAT(error_, HasSubstr(outside_.Join("secret.txt")));
  // A new file under the link would land outside too.
  EXPECT_FALSE(Resolve("link/new.txt"));
}

TEST_F(PathsTest, SymlinkPointingInsideResolvesToTarget) {
  testing::WriteFile(dir_.Join("real/f.txt"), "x");
  std::filesystem::create_directory_symlink(dir_.Join("real"), dir_.Join("alias"));
  ASSERT_TRUE(Resolve("alias/f.txt")) << error_;
  EXPECT_EQ(resolved_, dir_.Join("real/f.txt"));
}

TEST_F(PathsTest, DanglingSymlinkIsRefused) {
  std::filesystem::create_symlink(outside_.Join("not-yet"), dir_.Join("dangling"));
  EXPECT_FALSE(Resolve("dangling"));
  EXPECT_THAT(error_, HasSubstr("dangling symbolic link"));
}

TEST_F(PathsTest, EmptyPathIsAnError) {
  EXPECT_FALSE(Resolve(""));
  EXPECT_THAT(error_, HasSubstr("empty"));
}

}  // namespace
}  // namespace forkbox::agent
