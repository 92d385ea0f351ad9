#include "agent/tools.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <iterator>
#include <utility>

#include "agent/tool_bash.h"
#include "agent/tool_files.h"
#include "base/format.h"

namespace forkbox::agent {
namespace {

nlohmann::json Schema(nlohmann::json properties, std::vector<std::string> required) {
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}

// The names of a tool list: split at commas and spaces outside parentheses (a Claude rule such as
// `Bash(git log:*)` holds spaces).
std::vector<std::string_view> SplitToolList(std::string_view list) {
  std::vector<std::string_view> names;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    const bool separator = std::string_view(", \t\n").find(c) != std::string_view::npos;
    if (i < list.size() && (depth > 0 || !separator)) continue;
    if (i > start) names.push_back(list.substr(start, i - start));
    start = i + 1;
  }
  return names;
}

// Claude Code's names for forkbox's tools (Agent: its name for Task since 2.1.63).
constexpr std::pair<std::string_view, std::string_view> kClaudeNames[] = {
    {"Bash", "bash"},      {"Read", "read_file"}, {"Write", "write_file"},
    {"Edit", "edit_file"}, {"Task", "task"},      {"Agent", "task"}};
// Claude Code's tools that forkbox does not have: a list naming one is an error that says so.
constexpr std::string_view kClaudeOnlyTools[] = {
    "AskUserQuestion", "BashOutput", "EnterPlanMode", "ExitPlanMode", "Glob",         "Grep",
    "KillShell",       "LS",         "MultiEdit",     "NotebookEdit", "NotebookRead", "Skill",
    "SlashCommand",    "TaskOutput", "TaskStop",      "TodoRead",     "TodoWrite",    "ToolSearch",
    "WebFetch",        "WebSearch"};
constexpr char kToolNamesHelp[] =
    "forkbox's tools: bash, read_file, write_file, edit_file, task; or Claude Code's names "
    "Bash, Read, Write, Edit, Task (or Agent)";

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

// A tool name of forkbox's or of Claude Code's (theirs or one forkbox lacks), in any case.
bool IsAnyToolName(std::string_view name) {
  const auto same = [name](std::string_view known) { return SameIgnoringCase(name, known); };
  return std::any_of(std::begin(kSessionToolNames), std::end(kSessionToolNames), same) ||
         std::any_of(std::begin(kClaudeNames), std::end(kClaudeNames),
                     [&](const auto& pair) { return same(pair.first); }) ||
         std::any_of(std::begin(kClaudeOnlyTools), std::end(kClaudeOnlyTools), same);
}

// The error for a name that is none of forkbox's tools.
Status NotAForkboxTool(std::string_view name) {
  const std::string quoted = "'" + std::string(name) + "'";
  if (name.find('(') != std::string_view::npos) {
    return Status::InvalidArgument(quoted +
                                   ": rules for some commands of a tool are not supported; "
                                   "forkbox offers or removes whole tools");
  }
  if (name.starts_with("mcp__")) {
    return Status::InvalidArgument(quoted + ": an MCP tool; forkbox has no MCP servers (" +
                                   kToolNamesHelp + ")");
  }
  if (std::find(std::begin(kClaudeOnlyTools), std::end(kClaudeOnlyTools), name) !=
      std::end(kClaudeOnlyTools)) {
    return Status::InvalidArgument(quoted + " is a Claude Code tool forkbox does not have (" +
                                   kToolNamesHelp + ")");
  }
  return Status::InvalidArgument("unknown tool " + quoted + " (" + kToolNamesHelp + ")");
}

}  // namespace

Result<std::vector<std::string>> ParseToolList(std::string_view list) {
  std::vector<bool> named(std::size(kSessionToolNames), false);
  for (std::string_view name : SplitToolList(list)) {
    for (const auto& [claude, ours] : kClaudeNames) {
      if (name == claude) name = ours;
    }
    const auto* known = std::find(std::begin(kSessionToolNames), std::end(kSessionToolNames), name);
    if (known == std::end(kSessionToolNames)) return NotAForkboxTool(name);
    named[known - std::begin(kSessionToolNames)] = true;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < named.size(); ++i) {
    if (named[i]) out.emplace_back(kSessionToolNames[i]);
  }
  return out;
}

bool IsToolListWord(std::string_view word) {
  const std::vector<std::string_view> names = SplitToolList(word);
  if (names.empty()) return false;
  return std::all_of(names.begin(), names.end(), [](std::string_view name) {
    if (name.starts_with("mcp__")) return true;
    const size_t paren = name.find('(');
    if (paren != std::string_view::npos && !name.ends_with(")")) return false;
    return IsAnyToolName(name.substr(0, paren));
  });
}

Result<std::vector<std::string>> SelectTools(const std::string& tools,
                                             const std::vector<std::string>& disallowed) {
  std::vector<std::string> offered(std::begin(kSessionToolNames), std::end(kSessionToolNames));
  if (tools != "default") {
    Result<std::vector<std::string>> listed = ParseToolList(tools);
    if (!listed.ok()) return listed.status().WithContext("--tools");
    offered = std::move(*listed);
  }
  for (const std::string& list : disallowed) {
    Result<std::vector<std::string>> removed = ParseToolList(list);
    if (!removed.ok()) return removed.status().WithContext("--disallowed-tools");
    std::erase_if(offered, [&](const std::string& name) {
      return std::find(removed->begin(), removed->end(), name) != removed->end();
    });
  }
  return offered;
}

std::string RemovedToolsNote(const std::vector<std::string>& removed) {
  if (removed.empty()) return "";
  return "The user has turned off these tools for this session: " + JoinList(removed) +
         ". Work with the tools you have.";
}

bool WritesFiles(const std::string& tool_name) {
  return tool_name == "write_file" || tool_name == "edit_file";
}

std::vector<ToolDef> BaseToolDefs() {
  std::vector<ToolDef> defs;
  defs.push_back(
      {"bash",
       "Run a shell command with `bash -c` in the working directory. stdout and stderr are merged; "
       "the exit code is reported. There is no stdin. Long outputs are cut (head and tail kept). "
       "The command is killed (with its whole process group) when it exceeds the timeout, and "
       "background processes are killed when it exits.",
       Schema({{"command", {{"type", "string"}, {"description", "The command to run."}}}},
              {"command"})});
  defs.push_back(
      {"read_file",
       "Read a text file inside the working directory. Lines are numbered from 1: `offset` is the "
       "1-based line to start at, `limit` the number of lines to read. Long files are cut with a "
       "note saying which offset to continue from. Binary files are not shown.",
       Schema({{"path",
                {{"type", "string"},
                 {"description", "File path, relative to the working directory or absolute."}}},
               {"offset",
                {{"type", "integer"},
                 {"minimum", 1},
                 {"description", "1-based line number to start reading at (default 1)."}}},
               {"limit",
                {{"type", "integer"},
                 {"minimum", 1},
                 {"description", "Maximum number of lines to read (default: to the end)."}}}},
              {"path"})});
  defs.push_back(
      {"write_file",
       "Create or overwrite a file inside the working directory with the given content. Missing "
       "parent directories are created.",
       Schema({{"path",
                {{"type", "string"},
                 {"description", "File path, relative to the working directory or absolute."}}},
               {"content", {{"type", "string"}, {"description", "The complete file content."}}}},
              {"path", "content"})});
  defs.push_back(
      {"edit_file",
       "Replace one exact occurrence of old_text with new_text in a file inside the working "
       "directory. old_text must match exactly once (including whitespace); it is an error when it "
       "is not found or found more than once.",
       Schema({{"path",
                {{"type", "string"},
                 {"description", "File path, relative to the working directory or absolute."}}},
               {"old_text",
                {{"type", "string"}, {"description", "The exact text to replace (non-empty)."}}},
               {"new_text", {{"type", "string"}, {"description", "The replacement text."}}}},
              {"path", "old_text", "new_text"})});
  return defs;
}

ToolDef TaskToolDef() {
  return {
      "task",
      "Delegate a self-contained task to a fresh, sandboxed subagent with its own empty "
      "context and the tools bash, read_file, write_file and edit_file. Only its final "
      "summary comes back. Give it everything it needs in the prompt. Several task calls in "
      "one turn run in parallel.",
      Schema(
          {{"prompt",
            {{"type", "string"}, {"description", "The complete instructions for the subagent."}}},
           {"description",
            {{"type", "string"},
             {"description", "A short (3-8 word) label for the task, shown to the user."}}}},
          {"prompt", "description"})};
}

ToolOutput RunBaseTool(const ToolUseBlock& call, const ToolContext& ctx) {
  if (!call.input.is_object()) {
    return ToolOutput{call.name + ": the tool input must be a JSON object", true, 0};
  }
  try {
    if (call.name == "bash") return RunBashTool(call.input, ctx);
    if (call.name == "read_file") return RunReadFileTool(call.input, ctx);
    if (call.name == "write_file") return RunWriteFileTool(call.input, ctx);
    if (call.name == "edit_file") return RunEditFileTool(call.input, ctx);
  } catch (const std::exception& e) {
    // A tool never takes its caller down: the failure becomes an is_error result.
    return ToolOutput{call.name + ": internal error: " + e.what(), true, 0};
  }
  return ToolOutput{"unknown tool '" + call.name +
                        "'; the available tools are bash, read_file, write_file and edit_file",
                    true, 0};
}

bool ChangesNoFile(const std::string& name) { return name == "read_file"; }

}  // namespace forkbox::agent
