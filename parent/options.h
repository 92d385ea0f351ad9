// The parsed command line of `forkbox` (parent/cli.h fills it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace forkbox::parent {

struct Options {
  std::string prompt;  // "-" reads stdin; empty with has_prompt == false: interactive.
  bool has_prompt = false;
  std::string workdir;  // Empty: the current directory.
  int max_turns = 40;
  int task_max_turns = 30;
  int max_parallel = 4;
  double task_timeout_s = 900;
  double tool_timeout_s = 120;
  bool allow_net = false;
  std::vector<std::string> writable;
  std::vector<std::string> env;
  std::string transcript_dir;
  bool quiet = false;
  bool verbose = false;
  bool json = false;
  // Empty: from the environment (agent::ApplyEnvironmentDefaults), then the provider default.
  std::string provider;
  std::string model;
  std::string base_url;
  int64_t max_tokens = 8192;
  int max_retries = 2;
  std::string child_path;  // Empty: $FORKBOX_CHILD, else forkbox-child next to /proc/self/exe.
  bool sandbox = true;     // --sandbox=off clears it (and warns loudly on every run).
  bool subagents = true;   // --no-subagents: the single-agent baseline.
  int standby = 2;         // Children kept sandboxed ahead of tasks; 0: start each on demand.
  bool stream = true;
};

}  // namespace forkbox::parent
