// Helpers shared by the ipc tests.
#pragma once

#include <string>

#include "base/unique_fd.h"
#include "ipc/messages.h"
#include "tests/base/test_util.h"

namespace forkbox::ipc::testing {

// Messages with every field set to a non-default value.
StartMessage SampleStart();
EventMessage SampleEvent();
ResultMessage SampleResult();
ErrorMessage SampleError();
PrepareMessage SamplePrepare();  // Agrees with SampleStart().

using ::forkbox::testing::ReadAllFromFd;

}  // namespace forkbox::ipc::testing
