// Issue 13, "real work runs" from a deep workdir: the task temp dir lives in
// <workdir>/.forkbox-tmp/task-XXXXXX, too long for Python's forkserver socket
// ($TMPDIR/pymp-*/listener-* in a 108-byte sun_path), so tools get the short link
// /dev/shm/forkbox-XXXXXXXXXX as TMPDIR (sandbox/sandbox.h, TaskTmpDir). Every start method,
// ProcessPoolExecutor and shared_memory run in every sandboxed mode, and nothing is left behind.
// The control modes run the same Python with TMPDIR inside the deep workdir: forkserver fails
// with "AF_UNIX path too long", which proves the test reaches the limit.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "tests/escape/fixture.h"

namespace forkbox::escape {
namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The targets of every /dev/shm/forkbox-* link that points below `root`.
std::string LinksInto(const std::string& root) {
  std::string found;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return found;
  while (dirent* e = readdir(dir)) {
    const std::string path = std::string("/dev/shm/") + e->d_name;
    char buf[4096];
    ssize_t n = readlink(path.c_str(), buf, sizeof buf);
    if (n > 0 && std::string(buf, static_cast<size_t>(n)).rfind(root, 0) == 0) {
      found += path + " ";
    }
  }
  closedir(dir);
  return found;
}

class ShortTmpTest : public EscapeTest {
 protected:
  // A workdir of at least 100 characters below the test's tree (a deep checkout).
  void UseDeepWorkdir() {
    std::string deep = work_ + "/home/alice/src/github.com/acme-corporation/some-project";
    while (deep.size() < 100) deep += "/sub";
    ASSERT_EQ(system(("mkdir -p '" + deep + "'").c_str()), 0);
    ChownTree(root_, uid(), gid());
    work_ = deep;
  }
};

TEST_P(ShortTmpTest, MultiprocessingFromADeepWorkdir) {
  ASSERT_NO_FATAL_FAILURE(UseDeepWorkdir());
  WriteFile(work_ + "/mp.py", kMultiprocessingPy);
  // What the task dir's socket path would be: over the limit.
  const std::string long_tmp = work_ + "/.forkbox-tmp/task-XXXXXX";
  ASSERT_GT((long_tmp + "/pymp-XXXXXXXX/listener-XXXXXXXX").size(), 107u);
  ChownTree(root_, uid(), gid());
  if (!sandboxed()) {
    RunResult r = Shell("cd '" + work_ + "' && mkdir -p '" + long_tmp + "' && TMPDIR='" + long_tmp +
                        "' /usr/bin/python3 mp.py forkserver");
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    EXPECT_TRUE(Contains(r.err, "AF_UNIX path too long")) << "control\n" << r.Describe();
    return;
  }
  RunResult r = Shell("cd '" + work_ +
                      "' && echo TMPDIR=$TMPDIR && /usr/bin/python3 mp.py fork spawn forkserver");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "TMPDIR=/dev/shm/forkbox-")) << r.Describe();
  for (const char* m : {"fork", "spawn", "forkserver"}) {
    EXPECT_TRUE(Contains(r.out, std::string(m) + " ok 14 14")) << m << "\n" << r.Describe();
  }
  EXPECT_TRUE(Contains(r.out, "shm ok 7")) << r.Describe();
  EXPECT_FALSE(Exists(work_ + "/.forkbox-tmp")) << "the task temp dir was not removed";
  EXPECT_EQ(LinksInto(root_), "") << "short links left in /dev/shm";
}

// The short link reaches only the task temp dir: writing outside the workdir through /tmp stays
// refused in every layer (layer 2: the write lands in the private /tmp and is gone).
TEST_P(ShortTmpTest, TmpOutsideStaysUnwritable) {
  const std::string marker = "/tmp/forkbox-escape-" + token_;
  RunResult r = Shell("echo x > '" + marker + "'; echo y > \"$TMPDIR/inside\" && echo inside ok");
  if (!sandboxed()) {
    EXPECT_TRUE(Exists(marker)) << "control: the write to /tmp must work\n" << r.Describe();
    return;
  }
  EXPECT_FALSE(Exists(marker)) << "ESCAPE: wrote " << marker << "\n" << r.Describe();
  EXPECT_TRUE(Contains(r.out, "inside ok")) << r.Describe();
  EXPECT_FALSE(Exists(work_ + "/.forkbox-tmp"));
  EXPECT_EQ(LinksInto(root_), "");
}

INSTANTIATE_TEST_SUITE_P(Modes, ShortTmpTest, ::testing::ValuesIn(AllModes()), ModeName);

}  // namespace
}  // namespace forkbox::escape
