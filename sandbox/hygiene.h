// Process hygiene: non-dumpable, parent-death signal, subreaper, signal state for exec, and
// killing every descendant when a task ends.
#pragma once

#include <sys/types.h>

#include <vector>

#include "base/status.h"

namespace forkbox::sandbox {

// PR_SET_DUMPABLE 0 (memory and environ unreadable, no ptrace attach) and PR_SET_PDEATHSIG
// SIGKILL, then rechecks that the parent is still `expected_parent` (it may have died before the
// prctl). Async-signal-safe; 0 or errno (ESRCH: the parent is already gone).
int SetNonDumpableAndDeathSignalRaw(pid_t expected_parent, const char** step);

// Async-signal-safe: unblocks every signal and resets ignored ones to the default, so an exec'd
// command does not inherit the caller's signal state (e.g. an ignored SIGPIPE).
void ResetSignalsRaw();

// The direct children of `parent`, read from /proc/*/stat.
std::vector<pid_t> ChildrenOf(pid_t parent);

}  // namespace forkbox::sandbox
