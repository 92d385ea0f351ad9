#include "tests/base/test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>

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

}  // namespace forkbox::testing
