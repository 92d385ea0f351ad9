#include "base/file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/unique_fd.h"

namespace forkbox {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-file-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(FileTest, ReadsARegularFile) {
  Result<std::string> text = ReadRegularFile(Write("a", "one\ntwo\n"), 100);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "one\ntwo\n");
}

// A FIFO with no writer would block a plain open forever; here it is refused at once.
TEST_F(FileTest, AFifoIsRefusedWithoutBlocking) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Result<std::string> text = ReadRegularFile(fifo, 100);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(), fifo + ": not a regular file");
}

TEST_F(FileTest, ADeviceIsRefused) {
  Result<std::string> text = ReadRegularFile("/dev/zero", 100);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
}

TEST_F(FileTest, ALinkIsRefusedWithNoFollowAndFollowedWithout) {
  const std::string target = Write("target", "secret");
  const std::string link = dir_ + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  Result<std::string> refused = ReadRegularFile(link, 100, O_NOFOLLOW);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInternal) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("(errno " + std::to_string(ELOOP) + ")"),
            std::string::npos)
      << refused.status().ToString();
  Result<std::string> followed = ReadRegularFile(link, 100);  // The control.
  ASSERT_TRUE(followed.ok()) << followed.status().ToString();
  EXPECT_EQ(*followed, "secret");
}

TEST_F(FileTest, MoreThanTheCapIsResourceExhausted) {
  const std::string path = Write("big", std::string(101, 'x'));
  Result<std::string> text = ReadRegularFile(path, 100);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), Status::Code::kResourceExhausted);
  ASSERT_TRUE(ReadRegularFile(path, 101).ok());
}

TEST_F(FileTest, OpenForAppendKeepsTheStat) {
  const std::string path = Write("log", "x");
  struct stat st;
  Result<UniqueFd> fd = OpenRegularFile(path, O_WRONLY | O_APPEND | O_NOFOLLOW, &st);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(st.st_size, 1);
  ASSERT_EQ(write(fd->get(), "y", 1), 1);
  EXPECT_EQ(*ReadRegularFile(path, 10), "xy");
}

// The one openat2 wrapper: O_CLOEXEC always, a mode only where a file is created (openat2 refuses
// one otherwise), the resolve flags kept, and a failure is an empty descriptor with errno.
TEST_F(FileTest, OpenAt2AddsCloexecAndKeepsTheResolveFlags) {
  const UniqueFd dir(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir);
  const mode_t old_mask = ::umask(0);
  UniqueFd made = OpenAt2(dir.get(), "made", O_WRONLY | O_CREAT | O_EXCL, RESOLVE_BENEATH, 0640);
  ::umask(old_mask);
  ASSERT_TRUE(made) << strerror(errno);
  EXPECT_NE(::fcntl(made.get(), F_GETFD) & FD_CLOEXEC, 0);
  struct stat st;
  ASSERT_EQ(::fstat(made.get(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_TRUE(OpenAt2(dir.get(), "made", O_RDONLY, RESOLVE_BENEATH, 0640)) << strerror(errno);

  ASSERT_EQ(::symlink("made", (dir_ + "/link").c_str()), 0);
  errno = 0;
  EXPECT_FALSE(OpenAt2(dir.get(), "../x", O_RDONLY, RESOLVE_BENEATH));
  EXPECT_EQ(errno, EXDEV);
  EXPECT_FALSE(OpenAt2(dir.get(), "link", O_RDONLY, RESOLVE_NO_SYMLINKS));
  EXPECT_EQ(errno, ELOOP);
  EXPECT_TRUE(OpenAt2(dir.get(), "link", O_RDONLY, 0)) << "the control: followed without";
}

// A directory held since start-up is reopened by name only when the name still leads to it: the
// same directory reopens; one moved away, replaced by another, or behind a link now is kNotFound,
// worded for the user; an open that fails otherwise (a name too long) keeps its errno's code and
// says it, never taken for a moved directory.
TEST_F(FileTest, ReopenDirectoryOpensOnlyTheDirectoryItHeld) {
  const std::string work = dir_ + "/work";
  ASSERT_EQ(mkdir(work.c_str(), 0700), 0);
  UniqueFd held(open(work.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(held);
  const FileIdentity id = IdentityOf(held.get());
  ASSERT_NE(id.ino, 0u);

  Result<UniqueFd> same = ReopenDirectory(work, id, "the workdir");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(IdentityOf(same->get()).ino, id.ino);

  ASSERT_EQ(rename(work.c_str(), (dir_ + "/moved").c_str()), 0);
  ASSERT_EQ(mkdir(work.c_str(), 0700), 0);  // Another directory under the name.
  Result<UniqueFd> replaced = ReopenDirectory(work, id, "the workdir");
  ASSERT_FALSE(replaced.ok());
  EXPECT_EQ(replaced.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(replaced.status().message(),
            work + " no longer leads to the workdir (moved, removed or replaced)");

  ASSERT_EQ(rmdir(work.c_str()), 0);
  ASSERT_EQ(symlink((dir_ + "/moved").c_str(), work.c_str()), 0);  // A link to the real one.
  Result<UniqueFd> linked = ReopenDirectory(work, id, "the workdir");
  ASSERT_FALSE(linked.ok()) << "followed a link";
  EXPECT_EQ(linked.status().code(), Status::Code::kNotFound);

  const std::string too_long = dir_ + "/" + std::string(300, 'x');
  Result<UniqueFd> failed = ReopenDirectory(too_long, id, "the workdir");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().code(), Status::Code::kNotFound);
  EXPECT_NE(failed.status().message().find(std::strerror(ENAMETOOLONG)), std::string::npos)
      << failed.status().ToString();
  EXPECT_EQ(failed.status().message().find("no longer leads to"), std::string::npos);
}

}  // namespace
}  // namespace forkbox
