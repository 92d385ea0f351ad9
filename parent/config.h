// Turns Options plus the environment into the validated settings the session runs with.
// Every function fails with a message naming the bad setting; nothing silently falls back.
#pragma once

#include <string>

#include "base/status.h"
#include "ipc/messages.h"
#include "parent/options.h"
#include "sandbox/sandbox.h"

namespace forkbox::parent {

// The absolute, canonical working directory (default: the current directory).
Result<std::string> ResolveWorkdir(const Options& options);

// --child-path, else $FORKBOX_CHILD, else forkbox-child next to /proc/self/exe. Must be executable.
Result<std::string> ResolveChildPath(const Options& options);

}  // namespace forkbox::parent
