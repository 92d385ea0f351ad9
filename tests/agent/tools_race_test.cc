// The file tools cannot be raced out of the workdir: a racer swaps a directory and a symbolic
// link to an outside directory (renameat2 RENAME_EXCHANGE) thousands of times while write_file
// writes through that path. openat2(RESOLVE_BENEATH) beneath the workdir descriptor never lands
// outside. The control, a path-checked open (resolve, check the prefix, then open by name), does
// when the swap falls between its check and its open; the control makes that swap itself, so it
// escapes on every run instead of only when the scheduler happens to cooperate.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include "agent/tools.h"
#include "base/unique_fd.h"
#include "tests/agent/tools_test_util.h"

namespace forkbox::agent {
namespace {

using testing::TempDir;

// Swaps workdir/d (a directory) and workdir/l (a symlink to `outside`) until stopped.
class Racer {
 public:
  Racer(const std::string& workdir, const std::string& outside) {
    std::filesystem::create_directory(workdir + "/d");
    std::filesystem::create_directory_symlink(outside, workdir + "/l");
    dir_ = UniqueFd(::open(workdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    EXPECT_TRUE(dir_);
    thread_ = std::thread([this] {
      while (!stop_.load(std::memory_order_relaxed)) {
        if (::renameat2(dir_.get(), "d", dir_.get(), "l", RENAME_EXCHANGE) == 0) ++swaps_;
      }
    });
  }
  ~Racer() {
    stop_ = true;
    thread_.join();
  }
  long swaps() const { return swaps_.load(); }

 private:
  UniqueFd dir_;
  std::atomic<bool> stop_{false};
  std::atomic<long> swaps_{0};
  std::thread thread_;
};

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// The old way: resolve the parent by name, check it is inside, then open by name. `between` runs
// in the window a racer would hit.
template <typename Between>
bool PathCheckedWrite(const std::string& workdir, const std::string& rel, Between between) {
  char resolved[PATH_MAX];
  const std::string full = workdir + "/" + rel;
  const std::string parent = full.substr(0, full.rfind('/'));
  if (::realpath(parent.c_str(), resolved) == nullptr) return false;
  if (std::string(resolved).rfind(workdir, 0) != 0) return false;  // Refused: outside.
  between();
  UniqueFd fd(::open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  return static_cast<bool>(fd);
}

constexpr int kAttempts = 20000;

TEST(FileToolRaceTest, ControlPathCheckedOpenEscapes) {
  TempDir work, outside;
  std::filesystem::create_directory(work.Join("d"));
  std::filesystem::create_directory_symlink(outside.path(), work.Join("l"));
  UniqueFd dir(::open(work.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir);
  // The check sees d as a directory inside; the racer's one swap lands before the open.
  const bool opened = PathCheckedWrite(work.path(), "d/x", [&] {
    ASSERT_EQ(::renameat2(dir.get(), "d", dir.get(), "l", RENAME_EXCHANGE), 0);
  });
  EXPECT_TRUE(opened);
  EXPECT_TRUE(Exists(outside.Join("x"))) << "a swap between check and open must escape";
}

TEST(FileToolRaceTest, WriteFileNeverLandsOutside) {
  TempDir work, outside;
  ToolContext ctx;
  ctx.workdir = work.path();
  Result<std::shared_ptr<const UniqueFd>> fd = OpenWorkdir(work.path());
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ctx.workdir_fd = *fd;
  Racer racer(work.path(), outside.path());
  int written = 0, refused = 0;
  for (int i = 0; i < kAttempts; ++i) {
    ToolOutput out =
        RunBaseTool(ToolUseBlock{"id", "write_file", {{"path", "d/x"}, {"content", "x"}}}, ctx);
    (out.is_error ? refused : written)++;
    ASSERT_FALSE(Exists(outside.Join("x"))) << "escaped after " << i << " calls";
  }
  EXPECT_GT(written, 0);
  EXPECT_GT(refused, 0);  // The racer did put the symlink in the way.
  EXPECT_GT(racer.swaps(), 1000);
}

}  // namespace
}  // namespace forkbox::agent
