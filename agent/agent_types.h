// Agent types: which subagent a `task` starts. Two built-ins (`general`, `explore`), overridable by
// Markdown files with YAML frontmatter (Claude Code's format) read from four directories,
// highest precedence first:
//   <workdir>/.forkbox/agents/*.md   project forkbox
//   <workdir>/.claude/agents/*.md    project claude
//   ~/.config/forkbox/agents/*.md    user forkbox
//   ~/.claude/agents/*.md            user claude
// Frontmatter keys: name, description, tools (a list or a comma-separated string), model,
// max_turns (or maxTurns), timeout (seconds), sandbox {write: workdir|none, network: off|inherit},
// disallowedTools. The body is the agent's prompt, added to the subagent's base prompt.
//
// A file can only narrow what the user's flags allow: `network: inherit` means --allow-net
// applies, `off` (the default) means none; `write: none` leaves no Landlock write right anywhere.
// There is no key for paths, base URLs or binaries. Unknown keys and foreign tool names are
// ignored with a note; a file that cannot be parsed is skipped with a warning naming it and the
// line. Loading never fails: bad files only produce warnings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/message.h"
#include "base/status.h"
#include "ipc/messages.h"

namespace forkbox::agent {

inline constexpr char kDefaultAgentType[] = "general";
inline constexpr int64_t kMaxAgentFileBytes = 256 * 1024;
inline constexpr size_t kMaxAgentFilesPerDir = 64;  // Each one grows every parent request.
// Every request of the parent model carries each agent's name and description (the task tool's
// description): one description may be 4 KiB (Claude Code's generated ones, with their
// <example> blocks, fit), and the agent files' entries 32 KiB in all (about 8k tokens). A longer
// description is refused (the file skipped); an agent past the total is skipped.
inline constexpr size_t kMaxAgentDescriptionBytes = 4 * 1024;
inline constexpr size_t kMaxAgentCatalogBytes = 32 * 1024;

enum class WriteAccess { kWorkdir, kNone };
enum class NetworkAccess { kOff, kInherit };

struct AgentType {
  std::string name;
  std::string description;
  std::vector<std::string> tools;  // Base tool names, in BaseToolDefs() order.
  std::string model;               // As written; empty or "inherit": the session's model.
  int64_t max_turns = 0;           // 0: --task-max-turns. Only ever lowers it.
  int64_t timeout_ms = 0;          // 0: --task-timeout. Only ever lowers it.
  WriteAccess write = WriteAccess::kWorkdir;
  NetworkAccess network = NetworkAccess::kOff;
  std::string prompt;                  // Added to the subagent's base system prompt.
  std::string source = "built-in";     // The file it came from.
  std::vector<std::string> notes;      // "FILE:LINE: ..." for ignored keys and tool names.
  std::vector<std::string> overrides;  // Sources of same-named definitions it shadows.
};

// One directory of agent files and its precedence label ("project forkbox", ...).
struct AgentDir {
  std::string path;
  std::string label;
  // Non-empty: a file whose real path leaves this tree is skipped with a warning, so a cloned
  // project cannot point its agent files (by symlink) at the user's other files.
  std::string confine_to;
};

// The four directories, highest precedence first; the project ones are confined to `workdir`.
// An empty `home` leaves out the user ones.
std::vector<AgentDir> AgentDirs(const std::string& workdir, const std::string& home);

struct AgentCatalog {
  std::vector<AgentType> agents;      // `general` first, then by name.
  std::vector<std::string> warnings;  // "FILE:LINE: skipped: ..." and unreadable directories.

  const AgentType* Find(std::string_view name) const;  // nullptr when unknown.
  std::vector<std::string> Names() const;
};

std::vector<AgentType> BuiltinAgentTypes();

// Parses one agent file. Errors say "FILE:LINE: why". `path` also names the agent when the
// frontmatter has no `name` (the file's stem, with a note).
Result<AgentType> ParseAgentFile(const std::string& path, std::string_view text);

// The built-ins plus every *.md in `dirs` (highest precedence first, as AgentDirs returns). Files
// are taken in that order (by name within a directory) while their entries in the task tool
// (name and description) stay within kMaxAgentCatalogBytes; a file past it is skipped with a
// warning naming it and the limit (a same-named file of lower precedence may then take its place,
// as when a file is broken). A file shadowed by a higher one costs nothing.
AgentCatalog LoadAgentCatalog(const std::vector<AgentDir>& dirs);

// The `task` tool with `subagent_type`: an enum of the catalog's names (default `general`), each
// agent's description in the tool's description.
ToolDef TaskToolDefFor(const AgentCatalog& catalog);

// The model a task of `type` runs on: the session's for an empty or "inherit" model; Claude Code's
// aliases (sonnet, opus, haiku) map to Anthropic model names on the anthropic provider and fall
// back to the session's model elsewhere, with `*note` saying so.
std::string ResolveAgentModel(const AgentType& type, const std::string& provider,
                              const std::string& session_model, std::string* note);

// Whether tool commands of `type` may use the network, given the user's --allow-net.
bool EffectiveAllowNet(const AgentType& type, bool user_allow_net);

// "write workdir, network off" / "... network inherit (--allow-net: on)".
std::string DescribeSandbox(const AgentType& type, bool user_allow_net, bool sandbox_enabled);

// `--sandbox read-only`: every agent of the session becomes `write: none` without the tools that
// only write files (WritesFiles), with a note saying why. Applied to the session's catalog, so
// that the task tool, the start frames and `forkbox agents` all show and send the same.
void MakeReadOnly(AgentCatalog* catalog);

// --tools and --disallowed-tools (`offered`: SelectTools'): every agent loses the tools the
// session does not offer, its prompt saying which (RemovedToolsNote) and `forkbox agents` too.
void RestrictTools(AgentCatalog* catalog, const std::vector<std::string>& offered);

// What the start frame carries: the agent part, and the model and turn limit it overrides.
void ApplyAgentType(const AgentType& type, ipc::StartMessage* start);

}  // namespace forkbox::agent
