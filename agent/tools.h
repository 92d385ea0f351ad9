// The four base tools (bash, read_file, write_file, edit_file) shared by the parent and the child,
// and the parent-only `task` tool's definition. Tool names and input fields are a contract.
//
// Every tool returns a ToolOutput; a tool never throws and never crashes its caller. Failures are
// is_error results the model can recover from.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cancel.h"
#include "agent/message.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/sandbox.h"

namespace forkbox::agent {

struct ToolContext {
  std::string workdir;  // Absolute, canonical: how absolute paths name it, and for messages.
  // The workdir, opened once at start-up (OpenWorkdir); its identity never changes after that.
  // File tools resolve every path beneath it with openat2(RESOLVE_BENEATH |
  // RESOLVE_NO_MAGICLINKS), so no "..", symlink or concurrent rename can lead them outside.
  std::shared_ptr<const UniqueFd> workdir_fd;
  // Spawns the bash tool's commands under the tool policy (unconfined only when built from a
  // policy with enabled == false: --sandbox=off). Null: bash refuses to run.
  std::shared_ptr<const sandbox::Sandbox> sandbox;
  std::vector<std::string> env;  // The scrubbed tool environment (sandbox::ToolEnvironment).
  int64_t timeout_ms = 120'000;
  int64_t max_output_chars = 50'000;
  // The parent's "Ctrl-C was pressed": a running bash command is then killed with its process
  // group and reported as interrupted. Empty in the child (it is killed from outside instead).
  CancelCheck cancelled;
};

struct ToolOutput {
  std::string content;  // Valid UTF-8, at most max_output_chars plus the cut marker.
  bool is_error = false;
  int64_t raw_bytes = 0;  // Bytes the tool produced before any cut (for "kept out" stats).
};

// bash {command}; read_file {path, offset?, limit?}; write_file {path, content};
// edit_file {path, old_text, new_text}.
std::vector<ToolDef> BaseToolDefs();
// The base tools whose only use is to write a file (write_file, edit_file): a read-only agent
// (`--sandbox read-only`, `write: none`) is not offered them.
bool WritesFiles(const std::string& tool_name);
// What a read-only agent's system prompt says of it.
inline constexpr char kReadOnlyNote[] =
    "You are a read-only agent: the sandbox makes every file, the project included, read-only for "
    "you and for every command you run. Only the temp dir named by $TMPDIR is writable, and it is "
    "removed when you finish.";
// task {prompt, description}.
ToolDef TaskToolDef();

// Every tool a session can offer, by forkbox's names: the four base tools, then the parent's task.
inline constexpr const char* kSessionToolNames[] = {"bash", "read_file", "write_file", "edit_file",
                                                    "task"};
// A --tools or --disallowed-tools value: names separated by commas or spaces, each forkbox's or
// Claude Code's (Bash, Read, Write, Edit, Task or Agent), as forkbox's names in kSessionToolNames
// order, without repeats. kInvalidArgument names an unknown tool, a Claude Code tool forkbox does
// not have (Grep), an MCP tool (mcp__...) or a Claude permission rule such as `Bash(git log:*)`:
// forkbox offers or removes whole tools, never more or fewer than the list says.
Result<std::vector<std::string>> ParseToolList(std::string_view list);
// Whether `word` reads as a tool list rather than a prompt: every name in it (as ParseToolList
// splits) is a tool name of forkbox's or of Claude Code's, forkbox's or not, in any case, a
// Claude rule `Name(...)` of one, or an MCP tool `mcp__...`. The set is closed, so a sentence
// never is one. Says nothing of whether ParseToolList accepts it.
bool IsToolListWord(std::string_view word);
// The tools a session offers: `tools` ("default": every one; "": none; else a ParseToolList) less
// those of each `disallowed` list.
Result<std::vector<std::string>> SelectTools(const std::string& tools,
                                             const std::vector<std::string>& disallowed);
// What a system prompt says of the tools in `removed` (empty: nothing to say).
std::string RemovedToolsNote(const std::vector<std::string>& removed);

// Runs one base tool. Unknown tool names and invalid inputs are is_error results.
ToolOutput RunBaseTool(const ToolUseBlock& call, const ToolContext& ctx);

// Whether the base tool `name` never changes a file (read_file: it starts no process and opens
// read-only): a caller that checks the workdir after each call (the parent's git trust-surface
// guard, a walk of the workdir) may skip it there.
bool ChangesNoFile(const std::string& name);

// Opens the workdir (O_PATH | O_DIRECTORY) for ToolContext::workdir_fd. Call once at start-up.
Result<std::shared_ptr<const UniqueFd>> OpenWorkdir(const std::string& workdir);

// Cuts `s` to at most max_chars characters (UTF-8 code points, never splitting one) and appends
// "\n[... output truncated: N bytes dropped ...]" when anything was cut.
std::string CutOutput(std::string s, int64_t max_chars, int64_t dropped_extra_bytes = 0);

}  // namespace forkbox::agent
