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

// Check() as it reads where user namespaces work, without the layer-2 probe (a child that sets
// up namespaces and mounts): for a handle whose first layer-2 command is the probe
// (Sandbox::ForTools), which probes only when that command fails.
Report CheckAssumingLayer2(const Policy& policy);

}  // namespace forkbox::sandbox
