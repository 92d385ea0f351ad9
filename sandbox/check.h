// Shared by the entry points: what the kernel offers, and the fail-closed refusal.
#pragma once

#include <string>

#include "base/status.h"
#include "sandbox/sandbox.h"

namespace forkbox::sandbox {

// uname -r.
std::string KernelRelease();

// OK with the Landlock ABI in *abi when Landlock and seccomp can be enforced; otherwise
// kUnavailable naming the missing protection, the kernel and the --sandbox=off opt-out.
Status CheckEnforceable(int* abi);

}  // namespace forkbox::sandbox
