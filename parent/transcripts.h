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
  // Non-empty when the directory lies inside one of the writable trees: tools can plant files
  // there, and a task can read or rewrite the transcripts of the others.
  std::string warning;
};

// Creates `dir` (and parents) when missing, opens it, and checks it against `writable_trees`
// (canonical absolute paths: the workdir and the --writable paths).
Result<TranscriptDir> OpenTranscriptDir(const std::string& dir,
                                        const std::vector<std::string>& writable_trees);

// A new append-only transcript file for task `number` in the directory `dir_fd`.
Result<UniqueFd> OpenTranscriptFile(int dir_fd, int number);

}  // namespace forkbox::parent
