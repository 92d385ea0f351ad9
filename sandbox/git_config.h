// Reading git's config files where the sandbox must know what git will trust: the lines a fresh
// repository's config may hold (GitSurfaceGuard::ConfigIsSafe) and the paths a config makes git
// run hooks from or read more config from (the guard's plan, namespaces.cc).
#ifndef FORKBOX_SANDBOX_GIT_CONFIG_H_
#define FORKBOX_SANDBOX_GIT_CONFIG_H_

#include <string>
#include <vector>

namespace forkbox::sandbox {

std::string Trim(const std::string& s);  // Blanks, tabs and CRs at both ends.
std::string Lower(std::string s);        // ASCII only, as git folds names.

// The section of a `[name]` or `[name "sub"]` header line ("name" or "name.*"), or "" when it is
// anything else.
std::string SectionOf(const std::string& line);

// A path a config file names: where git runs hooks from, or another config file it reads.
struct GitConfigPath {
  std::string path;      // Lexically normal, absolute; links not resolved.
  bool include = false;  // include.path / includeIf.*.path: a config file of its own.
};

// The paths in git config `text` (from the file `config_path`): core.hooksPath (relative: to
// `hooks_cwd`, where git runs hooks: the worktree's root, a bare repository's git dir),
// include.path and includeIf.*.path (relative: to the file's directory); `~/` is `home`.
// Loose where git is strict (any includeIf condition counts; a header with a key on its line is
// read): a false match only guards more.
std::vector<GitConfigPath> GitConfigPaths(const std::string& text, const std::string& config_path,
                                          const std::string& hooks_cwd, const std::string& home);

}  // namespace forkbox::sandbox

#endif  // FORKBOX_SANDBOX_GIT_CONFIG_H_
