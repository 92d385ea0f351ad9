#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "sandbox/sandbox.h"
#include "tests/sandbox/probe_util.h"

namespace forkbox::sandbox {
namespace {

using testing::FileExists;
using testing::ReadFile;

TEST(TaskTmpDir, LivesInAGitIgnoredDotFolderAndIsRemoved) {
  std::string work = testing::MakeTempDir("tmpdir");
  std::string path;
  {
    Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    path = dir->path();
    EXPECT_EQ(path.rfind(work + "/.forkbox-tmp/", 0), 0u) << path;
    EXPECT_EQ(ReadFile(work + "/.forkbox-tmp/.gitignore"), "*\n");
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    // A tool leaves a read-only tree behind.
    ASSERT_EQ(mkdir((path + "/ro").c_str(), 0755), 0);
    std::ofstream(path + "/ro/file") << "x";
    ASSERT_EQ(chmod((path + "/ro").c_str(), 0500), 0);
  }
  EXPECT_FALSE(FileExists(path));
  EXPECT_FALSE(FileExists(work + "/.forkbox-tmp")) << "no trace left when no task uses it";
}

TEST(TaskTmpDir, TwoTasksGetDistinctDirectoriesAndMovesTransferOwnership) {
  std::string work = testing::MakeTempDir("tmpdir2");
  Result<TaskTmpDir> a = TaskTmpDir::Create(work);
  Result<TaskTmpDir> b = TaskTmpDir::Create(work);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->path(), b->path());
  std::string a_path = a->path();
  {
    TaskTmpDir moved = std::move(*a);
    EXPECT_EQ(moved.path(), a_path);
    EXPECT_TRUE(a->path().empty());
  }
  EXPECT_FALSE(FileExists(a_path));
  EXPECT_TRUE(FileExists(b->path()));
  EXPECT_EQ(ReadFile(work + "/.forkbox-tmp/.gitignore"), "*\n") << "still used by b";
}

TEST(TaskTmpDir, RejectsABadWorkdir) {
  EXPECT_FALSE(TaskTmpDir::Create("relative").ok());
  EXPECT_FALSE(TaskTmpDir::Create("/nonexistent/forkbox").ok());
}

}  // namespace
}  // namespace forkbox::sandbox
