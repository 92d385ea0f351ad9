// Where forkbox keeps what it writes for the user across runs: the prompt history, the saved
// sessions and the git guard's journal. One resolution for the writers (parent/session_store.h,
// parent/line_editor.h) and the read scope, which hides it from tools (sandbox/env.cc): it holds
// what the user typed and every tool output of every project.
//
// Where links stop being followed. The user's state directory ($XDG_STATE_HOME, else
// $HOME/.local/state) is the user's layout, shared with other programs: a link there (state on
// another disk, a dotfiles farm) is ordinary and cannot be told from a planted one, so it is
// resolved once, as the kernel resolves it, and made (mkdir -p, usual modes) when missing but
// never chmod-ed; never HOME itself, though: beneath a HOME that does not exist nothing is made.
// The `forkbox` directory in it and everything beneath are forkbox's own: made by forkbox 0700, so
// a link there is never forkbox's doing; it is where a tool that can write the state directory (a
// workdir of $HOME, --writable ~/.local) would plant one to make a later, unconfined forkbox chmod,
// write or delete elsewhere. From that name down nothing is reached through a link: each name is
// opened relative to its parent's descriptor (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), a
// link is refused and named, never followed. To keep forkbox's state elsewhere, set XDG_STATE_HOME,
// not a link. (A tool that can rewrite the user's state directory itself can rewrite ~/.local/bin
// too: that is --allow-broad-workdir's risk.)
#pragma once

#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox {

// $XDG_STATE_HOME/forkbox when XDG_STATE_HOME is absolute, else $HOME/.local/state/forkbox.
// Touches nothing on disk. An error when neither variable holds an absolute path.
Result<std::string> ForkboxStateDir();

// One of forkbox's own directories, open: everything in it is opened relative to `fd`.
struct OwnedDir {
  UniqueFd fd;       // O_RDONLY | O_DIRECTORY, reached through no link below the user's dir.
  std::string path;  // Canonical (no link, no "..") when it was opened; for messages and scopes.
};

// ForkboxStateDir(), opened as the header says. create: the user's directory is made when
// missing and `forkbox` 0700 in it (fchmod 0700 when wider); else a missing one is kNotFound. A
// link (or any non-directory) at `forkbox` is kPermissionDenied, naming what was found and what
// to do; nothing is made or changed through it. Any other failure (no HOME, a HOME that does not
// exist, a file where a directory should be) is an error naming the path and the cause. What
// only keeps something there (a new session, the history, the git guard's journal) says so and
// goes on without it; what needs what is there (--continue, --resume, `sessions`) fails.
Result<OwnedDir> OpenForkboxStateDir(bool create);

// The directory `name` (one component) in forkbox's own directory `parent`, as above: made 0700
// when `create` and missing, opened through no link, fchmod-ed 0700 when `create` and wider.
Result<OwnedDir> OpenOwnedDir(const OwnedDir& parent, const std::string& name, bool create);

// A link (or other non-file) found at `name` in `dir` where forkbox keeps its own file or
// directory: "<path>: a symbolic link (to X) where forkbox keeps its own ..., not followed ...",
// kPermissionDenied. `err` is the open's errno (ELOOP, ENOTDIR, ...); other errnos are worded as
// FromErrno.
Status RefusedOwnName(int err, int dir, const std::string& dir_path, const std::string& name);

}  // namespace forkbox
