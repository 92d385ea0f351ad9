// The parsed command line of `forkbox` (parent/cli.h fills it). The provider and sandbox settings
// are the wire types themselves: the CLI fills them, parent/config.h resolves them once, and they
// travel to every child as they are.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "agent/provider_settings.h"
#include "agent/tools.h"
#include "ipc/messages.h"
#include "parent/events.h"

namespace forkbox::parent {

struct Options {
  std::string prompt;  // "-" reads stdin; empty with has_prompt == false: interactive.
  bool has_prompt = false;
  // -p/--print, as `claude -p`: one answer, never an interactive session. Without a PROMPT the
  // prompt is stdin; with one, piped stdin is added below it as <stdin> context.
  bool print = false;
  // -o/--output-last-message, as `codex exec -o`: the one-shot answer is also written to this
  // file (opened, and emptied, before the sandbox; written only when there is an answer).
  std::string output_last_message;
  // --system-prompt (or the text of --system-prompt-file), as `claude -p`: replaces the parent's
  // own system prompt (empty: forkbox's). What forkbox must say of the session (read-only, the
  // tools turned off) still follows it; the subagents keep theirs.
  std::string system_prompt;
  // --append-system-prompt (or the text of --append-system-prompt-file), as `claude -p`: added
  // below the parent's system prompt.
  std::string append_system_prompt;
  std::string workdir;  // Empty: the current directory.
  int max_turns = 40;
  int task_max_turns = 30;
  int max_parallel = 4;
  double task_timeout_s = 900;
  double tool_timeout_s = 120;
  std::string transcript_dir;
  bool quiet = false;
  OutputFormat output_format = OutputFormat::kText;  // --output-format; --json is json.
  // Unresolved: empty name, key, base URL and model come from the environment, the config files
  // (provider_files) and the provider's defaults (agent::ResolveProviderSettings). --sandbox=off
  // clears sandbox.enabled (and warns loudly on every run).
  ipc::ProviderSettings provider;
  // sandbox.read_only (--sandbox read-only, as `codex exec -s read-only`): the sandbox is on and
  // nothing the session runs may write a file (the parent, its tools, every task as a
  // `write: none` agent).
  ipc::SandboxSettings sandbox;
  // Empty: $FORKBOX_CHILD, else child_path_file, else forkbox-child next to /proc/self/exe.
  std::string child_path;
  // The config files' values of the settings the environment also sets: they rank below it
  // (flags > environment > files), so they are resolved with it, not as flags.
  agent::ProviderFileSettings provider_files;
  std::string child_path_file;
  bool subagents = true;  // --no-subagents (or no `task` in `tools`): the single-agent baseline.
  // The tools the session offers (agent::SelectTools of --tools and --disallowed-tools, as
  // claude -p): the parent's, and each task's agent keeps only these (agent::RestrictTools).
  std::vector<std::string> tools = {std::begin(agent::kSessionToolNames),
                                    std::end(agent::kSessionToolNames)};
  int standby = 2;  // Children kept sandboxed ahead of tasks; 0: start each on demand.
  bool continue_session = false;  // --continue: the latest session of this workdir.
  std::string resume;             // --resume ID.
  bool persist_session = true;    // --no-session-persistence clears it.
  int64_t task_max_tokens = 0;    // --task-max-tokens: each task's budget; 0: none.
  int64_t max_tokens_total = 0;   // --max-tokens-total: the session's budget; 0: none.
};

}  // namespace forkbox::parent
