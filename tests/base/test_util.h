// Helpers shared by the base tests (and re-exported to the ipc tests).
#pragma once

#include <string>

namespace forkbox::testing {

// Reads until EOF; fails the test on error.
std::string ReadAllFromFd(int fd);

}  // namespace forkbox::testing
