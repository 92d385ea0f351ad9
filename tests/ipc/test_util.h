// Helpers shared by the ipc tests.
#pragma once

#include <string>

#include "ipc/messages.h"
#include "ipc/unique_fd.h"

namespace forkbox::ipc::testing {

// Messages with every field set to a non-default value.
StartMessage SampleStart();
EventMessage SampleEvent();
ResultMessage SampleResult();
ErrorMessage SampleError();
PrepareMessage SamplePrepare();  // Agrees with SampleStart().

// Reads until EOF; fails the test on error.
std::string ReadAllFromFd(int fd);

}  // namespace forkbox::ipc::testing
