// Helpers shared by the base tests (and re-exported to the ipc, sandbox and parent tests).
#pragma once

#include <optional>
#include <string>

namespace forkbox::testing {

// Reads until EOF; fails the test on error.
std::string ReadAllFromFd(int fd);

// A repository at `main` with one commit and its worktree at `worktree` (git on PATH); false
// when git failed.
bool MakeGitWorktree(const std::string& main, const std::string& worktree);

// What a writer puts into the FIFO at `path`, up to its close; nullopt when `stop_fd` polls
// readable first (the pidfd of the process whose command should write, or an eventfd its runner
// signals at its end) or on an error. Unlike an ifstream's open, it never blocks on a FIFO that
// nobody will open: a run that failed early fails the test instead of hanging it. Never through
// a link, and nothing but a FIFO (nullopt): the FIFO may lie where a sandboxed command writes.
std::optional<std::string> ReadFifoUnless(const std::string& path, int stop_fd);

// Writes `text` to the FIFO at `path` once a reader has it open; false when `stop_fd` polls
// readable first or on an error. Polls for the reader every 10 ms: a FIFO gives no event when
// its reader comes. As ReadFifoUnless, never through a link or into anything but a FIFO.
bool WriteFifoUnless(const std::string& path, const std::string& text, int stop_fd);

}  // namespace forkbox::testing
