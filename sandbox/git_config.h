// Reading git's config files where the sandbox must know what git will trust: the lines a fresh
// repository's config may hold (GitSurfaceGuard::ConfigIsSafe) and the paths a config makes git
// run hooks from or read more config from (the guard's plan, namespaces.cc).
#ifndef FORKBOX_SANDBOX_GIT_CONFIG_H_
#define FORKBOX_SANDBOX_GIT_CONFIG_H_

#include <functional>
#include <string>
#include <vector>

namespace forkbox::sandbox {

std::string Trim(const std::string& s);  // Blanks, tabs and CRs at both ends.
std::string Lower(std::string s);        // ASCII only, as git folds names.

// The section of a `[name]` or `[name "sub"]` header line ("name" or "name.*"), or "" when it is
// anything else.
std::string SectionOf(const std::string& line);

// Every `key = value` line of git config `text`, in order: the section ("core", "includeif": a
// subsection dropped) and the key lowercased, the value as git reads it (quotes and a comment
// dropped, a value ending in a backslash continued on the next line, a `[header]` there
// included; a leading UTF-8 byte order mark skipped). The one reading of config lines here;
// loose as GitConfigPaths says.
struct GitConfigEntry {
  std::string section;
  std::string key;
  std::string value;
};
std::vector<GitConfigEntry> GitConfigEntries(const std::string& text);

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

// What the user's own git config makes git trust in every repository: core.hooksPath (a relative
// `.githooks` names a directory in each worktree, where a planted pre-commit runs at the next
// commit) and the files it includes. Read from every file git may take as global or system
// config: $GIT_CONFIG_GLOBAL, ~/.gitconfig, $XDG_CONFIG_HOME/git/config (~/.config/git/config),
// $GIT_CONFIG_SYSTEM and /etc/gitconfig, and the files they include, four levels deep. The
// union, whatever GIT_CONFIG_NOSYSTEM or GIT_CONFIG_GLOBAL say here: the user's next git runs in
// another environment, and a path guarded for nothing only guards more.
// `home`: $HOME then, what `~/` in any config names (a repository's too: namespaces.cc), so that a
// plan made after this process's HOME changed still follows the home the policy was resolved with.
struct UserGitConfig {
  std::vector<std::string> hooks_paths;  // Lexically normal; a relative one as written.
  std::vector<std::string> includes;     // Absolute.
  std::string home;                      // As read; "" when HOME was unset.
};
// `getenv` gives a variable's value, or nullptr when it is unset. Read once per policy, by
// ResolvePolicy before any confinement (Policy::user_git_config), and passed to what plans the
// surface: the guard, at every tool call, and layer 2's binds.
UserGitConfig ReadUserGitConfig(const std::function<const char*(const char*)>& getenv);

}  // namespace forkbox::sandbox

#endif  // FORKBOX_SANDBOX_GIT_CONFIG_H_
