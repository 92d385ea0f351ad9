// Starts the real `forkbox` binary against a mock model for the benchmark helper and the proof
// tests, with stdout and stderr captured in memory files (never a pipe that could fill up and
// stall the parent while a test holds its model reply).
#pragma once

#include <string>
#include <vector>

#include "base/process.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::bench {

struct ForkboxArgs {
  std::string bin_dir;   // Holds forkbox and forkbox-child.
  std::string base_url;  // The mock's Anthropic base URL.
  std::string workdir;
  std::string prompt;
  std::vector<std::string> extra;  // More options, e.g. --no-subagents.
};

struct ForkboxRun {
  ChildProcess process;  // Own process group: killed with its whole tree if not reaped.
  UniqueFd out;          // memfd receiving stdout.
  UniqueFd err;          // memfd receiving stderr.
};

// Runs `forkbox --provider anthropic --base-url URL --child-path BIN/forkbox-child --workdir W
// --quiet --json EXTRA... PROMPT` with a minimal environment and a dummy API key.
Result<ForkboxRun> LaunchForkbox(const ForkboxArgs& args);

// The whole content of a memory file written by the child (read with pread from offset 0).
std::string ReadCaptured(const UniqueFd& fd);

// A fresh private directory under /var/tmp, removed with its contents by the destructor.
class ScratchDir {
 public:
  static Result<ScratchDir> Create(const std::string& prefix);
  ScratchDir() = default;
  ~ScratchDir();
  ScratchDir(ScratchDir&& other) noexcept;
  ScratchDir& operator=(ScratchDir&& other) noexcept;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace forkbox::bench
