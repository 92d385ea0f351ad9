// Helpers shared by the base tests (and re-exported to the ipc, sandbox and parent tests).
#pragma once

#include <string>

namespace forkbox::testing {

// Reads until EOF; fails the test on error.
std::string ReadAllFromFd(int fd);

// A repository at `main` with one commit and its worktree at `worktree` (git on PATH); false
// when git failed.
bool MakeGitWorktree(const std::string& main, const std::string& worktree);

}  // namespace forkbox::testing
