// The --transcript-dir: opened once at start-up, then every task's transcript file is created
// relative to that descriptor with O_CREAT|O_EXCL|O_NOFOLLOW under a name nobody can predict
// (task-N-<UTC time>-<64 random bits>.jsonl). A symlink or file planted in the directory is never
// followed or appended to, and renaming the directory's path afterwards changes nothing.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::parent {

struct TranscriptDir {
  UniqueFd fd;       // O_DIRECTORY | O_CLOEXEC.
  std::string path;  // Canonical, for messages.
};

// Creates `dir` (and parents) when missing, opens it, and checks that files can be made in it: a
// directory on a kernel filesystem (/proc, /sys) is refused by name, and so is one where a probe
// file (made and removed at once) cannot be created. Errors name the directory.
Result<TranscriptDir> OpenTranscriptDir(const std::string& dir);

// Non-empty when the transcript directory at `path` lies inside or holds one of `writable_trees`
// (canonical: sandbox::PersistentWritableTrees): elsewhere it is outside every tool's read scope
// (sandbox::Settings::unreadable), but there tools can read every transcript in it, and inside
// the tree plant files there too.
std::string TranscriptDirWarning(const std::string& path,
                                 const std::vector<std::string>& writable_trees);

// A new append-only transcript file for task `number` in the directory `dir_fd`, whose path is
// `dir_path` (errors name it).
Result<UniqueFd> OpenTranscriptFile(int dir_fd, const std::string& dir_path, int number);

}  // namespace forkbox::parent
