// The file tools cannot be raced out of the workdir: a racer swaps a directory and a symbolic
// link to an outside directory (renameat2 RENAME_EXCHANGE) thousands of times while write_file
// writes through that path. openat2(RESOLVE_BENEATH) beneath the workdir descriptor never lands
// outside. The control, a path-checked open (resolve, check the prefix, then open by name), does.
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

// The old way: resolve the parent by name, check it is inside, then open by name.
bool PathCheckedWrite(const std::string& workdir, const std::string& rel) {
  char resolved[PATH_MAX];
  const std::string full = workdir + "/" + rel;
  const std::string parent = full.substr(0, full.rfind('/'));
  if (::realpath(parent.c_str(), resolved) == nullptr) return false;
  if (std::string(resolved).rfind(workdir, 0) != 0) return false;  // Refused: outside.
  UniqueFd fd(::open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  return static_cast<bool>(fd);
}

constexpr int kAttempts = 20000;

TEST(FileToolRaceTest, ControlPathCheckedOpenEscapes) {
  TempDir work, outside;
  Racer racer(work.path(), outside.path());
  bool escaped = false;
  for (int i = 0; i < kAttempts && !escaped; ++i) {
    PathCheckedWrite(work.path(), "d/x");
    escaped = Exists(outside.Join("x"));
  }
  EXPECT_TRUE(escaped) << "the racer never won against a path-checked open (" << racer.swaps()
                       << " swaps)";
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
