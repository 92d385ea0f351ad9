// What an executable does before anything else runs.
#pragma once

#include "base/status.h"

namespace forkbox {

// Maps every code page of the executable and of libc into this process's page tables at once:
// one madvise(MADV_POPULATE_READ) per executable segment instead of a page fault per 64 KiB of
// code first touched. On a virtual machine a fault costs 10-30 us, and a one-shot run touches
// nearly all of forkbox's ~3 MiB of code. The pages come from the page cache and stay shared, so
// only the page tables grow (RssFile counts the whole segment).
//
// A hint, nothing depends on it: the executables call it from a constructor and ignore the
// result. A kernel older than 5.14 refuses the advice (EINVAL), and the pages fault in as before.
// Returns the first failing madvise as an error, or NotFound when no such segment was found.
Status PrefaultCode();

// Opens /dev/null read-only on each of fds 0, 1 and 2 that is closed (`forkbox ... >&-`), before
// anything else opens a file: else the first file opened (the git guard's journal) becomes
// stdout or stderr, and the answer, the banner and events are written into it. Read-only, so that
// a write to a closed stdout still fails (EBADF) and exits 1 as before. Fails only when
// /dev/null cannot be opened.
Status ReserveStandardFds();

}  // namespace forkbox
