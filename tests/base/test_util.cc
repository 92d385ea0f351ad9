#include "tests/base/test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace forkbox::testing {

std::string ReadAllFromFd(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    EXPECT_GE(n, 0) << "read: " << errno;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool MakeGitWorktree(const std::string& main, const std::string& worktree) {
  const std::string script = "git init -q '" + main + "' && git -C '" + main +
                             "' -c user.email=a@b -c user.name=n commit -q --allow-empty -m init "
                             "&& git -C '" +
                             main + "' worktree add -q '" + worktree + "' 2>/dev/null";
  return std::system(script.c_str()) == 0;
}

}  // namespace forkbox::testing
