// Dropping every capability: bounding, ambient, effective, permitted and inheritable, and locking
// the securebits so uid 0 regains nothing at execve. Async-signal-safe (raw syscalls only).
#pragma once

namespace forkbox::sandbox {

// Returns 0 or an errno value; `*step` names the call that failed.
int DropAllCapabilitiesRaw(const char** step);

// True when any capability is still in the effective, permitted or ambient set of this process.
bool HasAnyCapability();

}  // namespace forkbox::sandbox
