// Process hygiene: non-dumpable, parent-death signal, subreaper, signal state for exec, and
// killing every descendant when a task ends.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <span>
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

// Returns once this process has one thread, at most `limit` later (kTimeout then, naming the
// count). unshare(CLONE_NEWUSER) and landlock_restrict_self need a single-threaded
// process, and a joined thread is still counted for a moment: pthread_join returns when the
// thread clears its tid, before the kernel takes it out of the thread group (unshare failed
// with EINVAL about once in 200 tries right after a join, more under load).
Status AwaitSingleThreaded(std::chrono::milliseconds limit = std::chrono::seconds(2));

// The direct children of `parent`, read from /proc/*/stat.
std::vector<pid_t> ChildrenOf(pid_t parent);

// Async-signal-safe and allocation-free (a keeper's, after a fork): SIGKILLs every descendant of
// this process, children and theirs, except those in `keep` and below them, and reaps them, round
// after round (orphans come back to this process: a subreaper or a namespace init) until none is
// left. Each round kills the whole tree found in one pass over /proc, not one level: a chain
// whose last link keeps forking regrows at the bottom as fast as a level a round is peeled off the
// top (a red-team chain of 512 outlived 10,000 such rounds, and then the git guard's put-back).
// Returns how many it signalled, or -1 with errno: EAGAIN when some were still there after
// kMaxKillRounds, or why /proc could not be opened (EMFILE...: it cannot look for them, so
// it does not report none).
int KillDescendantsRaw(std::span<const pid_t> keep);

}  // namespace forkbox::sandbox
