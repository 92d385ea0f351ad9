#include "parent/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "agent/tools.h"
#include "base/file.h"
#include "parent/config.h"
#include "parent/config_file.h"
#include "parent/exit_codes.h"
#include "parent/terminal.h"

#ifndef FORKBOX_VERSION
#define FORKBOX_VERSION "unknown"
#endif

namespace forkbox::parent {
namespace {

constexpr char kEmptyValue[] = "the value is empty";

OutputFormat FormatNamed(const std::string& name) {
  if (name == "json") return OutputFormat::kJson;
  if (name == "stream-json") return OutputFormat::kStreamJson;
  return OutputFormat::kText;
}

// The requested format read without CLI11, so that a command line CLI11 rejects still gets its
// error in the format it asked for; nullopt when it asks for none.
std::optional<OutputFormat> FormatFromArgv(int argc, char** argv) {
  std::optional<OutputFormat> format;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "--json") format = OutputFormat::kJson;
    if (arg.starts_with("--output-format=")) format = FormatNamed(arg.substr(16));
    if (arg == "--output-format" && i + 1 < argc) format = FormatNamed(argv[i + 1]);
  }
  return format;
}

// CLI11's Range and capture_default_str format numbers through a std::stringstream, which copies
// the locale each time: with CLI11's pairwise name check of every option added, most of a
// one-shot run's start-up instructions. These write the same text: integers with std::to_chars,
// floating point as the stream's default ("%g"; the floating std::to_chars would link libm).
template <typename T>
std::string NumberText(T value) {
  char buf[32];
  if constexpr (std::is_floating_point_v<T>) {
    const int n = std::snprintf(buf, sizeof buf, "%g", static_cast<double>(value));
    return n > 0 && static_cast<size_t>(n) < sizeof buf ? std::string(buf, n) : std::string();
  } else {
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    return ec == std::errc() ? std::string(buf, end) : std::string();
  }
}

// CLI::Range(lo, hi) with the same help text ("INT in [1 - 64]"); its error names the range as
// the help does. Numeric options take default_str(NumberText(variable)) for capture_default_str().
template <typename T>
CLI::Validator Within(T lo, T hi) {
  const std::string range = "[" + NumberText(lo) + " - " + NumberText(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& input) {
        T value{};
        if (!CLI::detail::lexical_cast(input, value)) {
          return "Value " + input + " is not " +
                 (std::is_floating_point_v<T> ? "a number" : "an integer") + " in " + range;
        }
        // Written so that NaN, which strtod accepts and every comparison fails, is refused too.
        if (!(value >= lo && value <= hi)) return "Value " + input + " not in range " + range;
        return std::string();
      },
      std::string(std::is_floating_point_v<T> ? "FLOAT" : "INT") + " in " + range);
}

// A --tools (`keywords`: "default" too) or --disallowed-tools value: agent::ParseToolList's.
CLI::Validator ToolList(bool keywords) {
  return CLI::Validator(
      [keywords](std::string& value) {
        if (keywords && value == "default") return std::string();
        Result<std::vector<std::string>> names = agent::ParseToolList(value);
        return names.ok() ? std::string() : names.status().message();
      },
      "");
}

// The option a command-line word names as CLI11 reads it ("--x" of "--x=v", "-x" of "-xv"), or ""
// for a value or a prompt ("-", "-1": CLI11 takes a negative number as a value).
std::string OptionNamed(const std::string& arg) {
  std::string name, rest;
  if (CLI::detail::split_long(arg, name, rest)) return "--" + name;
  if (CLI::detail::split_short(arg, name, rest) &&
      !std::isdigit(static_cast<unsigned char>(name[0]))) {
    return "-" + name;
  }
  return "";
}

// Flags of claude -p and codex exec that forkbox does not take, and what forkbox does instead:
// refused by name before CLI11 parses, whose error would name the prompt first.
struct ForeignFlag {
  std::string_view spellings[4];
  bool never_asks;  // `instead` follows kNeverAsks.
  std::string_view instead;
};
constexpr char kHelpHint[] = "Run with --help for more information.";
constexpr char kNeverAsks[] =
    "forkbox never asks permission: every tool runs without asking, inside the sandbox";
constexpr ForeignFlag kForeignFlags[] = {
    {{"--allowedTools", "--allowed-tools"},
     true,
     "; choose the tools offered with --tools or --disallowedTools"},
    {{"--permission-mode", "--permission-prompt-tool"},
     true,
     " (--sandbox read-only: a session that writes no file)"},
    {{"--dangerously-skip-permissions", "--allow-dangerously-skip-permissions"},
     true,
     "; --sandbox off runs the tools unsandboxed"},
    {{"--dangerously-bypass-approvals-and-sandbox", "--yolo", "-a", "--ask-for-approval"},
     true,
     "; --sandbox off runs the tools unsandboxed"},
    {{"--full-auto"},
     true,
     " that lets them write the workdir (--sandbox on, codex's workspace-write): the default; "
     "drop the flag"},
    {{"--color"}, false, "forkbox prints no colour (on a terminal it escapes control characters)"},
    {{"-i", "--image"}, false, "forkbox sends text only; images are not supported"},
    {{"--output-schema", "--json-schema"},
     false,
     "forkbox does not constrain the answer's shape: describe it in the prompt"},
    {{"--input-format"},
     false,
     "forkbox reads the prompt as text (PROMPT, or stdin with - or -p), not as stream-json"},
    {{"--mcp-config", "--strict-mcp-config"},
     false,
     "forkbox has no MCP servers; its tools are bash, read_file, write_file, edit_file, task"},
    {{"--profile"},
     false,
     "forkbox has no profiles: flags, the environment and config.toml files set it up (forkbox "
     "config shows them); -p is --print here, as in claude -p"},
    {{"--config"},
     false,
     "forkbox takes a setting as its flag (--model o3) or as a key in a config.toml; -c is "
     "--continue here, as in claude -c"},
    {{"--max-budget-usd"}, false, "forkbox limits tokens, not dollars: --max-tokens-total N"},
    {{"--session-id"},
     false,
     "forkbox chooses a new session's id (--json prints it; forkbox sessions lists them); "
     "--resume ID resumes one"},
    {{"--fallback-model"},
     false,
     "forkbox retries the same model (--max-retries); it has no fallback"},
    {{"--settings", "--setting-sources"},
     false,
     "forkbox reads ~/.config/forkbox/config.toml and <workdir>/.forkbox/config.toml (forkbox "
     "config shows the result)"},
    {{"--agents", "--agent"},
     false,
     "forkbox's agent types come from agent files (forkbox agents)"},
    {{"--debug"}, false, "forkbox's -v/--verbose logs the requests and the children's stderr"},
    {{"--oss", "--local-provider"},
     false,
     "forkbox's --provider openai --base-url URL talks to a local OpenAI-compatible server"},
    {{"--effort"}, false, "forkbox's --thinking N gives Anthropic extended thinking N tokens"},
};

// The usage error for an option forkbox does not have (`name`, as OptionNamed gives it): what
// forkbox does instead for a known flag of claude -p or codex exec, else that it is unknown.
std::string UnknownOptionError(const std::string& name) {
  for (const ForeignFlag& flag : kForeignFlags) {
    for (std::string_view spelling : flag.spellings) {
      if (spelling != name) continue;
      return name + ": " + (flag.never_asks ? kNeverAsks : "") + std::string(flag.instead);
    }
  }
  return "unknown option " + name + "\n" + kHelpHint;
}

// Whether `arg` is an option of `app` whose value is the next word, whatever that word looks
// like (CLI11 takes `--tool-timeout -nan` and `--system-prompt "-x"` so).
bool ValueFollows(const CLI::App& app, const std::string& arg) {
  const std::string name = OptionNamed(arg);
  const CLI::Option* opt = name.empty() ? nullptr : app.get_option_no_throw(name);
  if (opt == nullptr || opt->get_items_expected_min() == 0) return false;
  return name.starts_with("--") ? arg.find('=') == std::string::npos : arg.size() == 2;
}

// The first option of argv[1..argc) (before any `--`) that `app` does not have, as a usage error
// naming it; "" when there is none.
std::string FirstUnknownOption(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    const std::string name = OptionNamed(arg);
    if (!name.empty() && app.get_option_no_throw(name) == nullptr) return UnknownOptionError(name);
    if (ValueFollows(app, arg)) ++i;
  }
  return "";
}

// What the words after a list option's value may add to it, as claude -p's lists take several
// arguments (`--disallowedTools Bash Edit`, `--add-dir ../apps ../lib`).
enum class ListWords { kNone, kTools, kDirectories };

ListWords ContinuedBy(const CLI::Option* opt) {
  if (opt == nullptr || opt->get_lnames().empty()) return ListWords::kNone;
  const std::string& name = opt->get_lnames()[0];
  if (name == "tools" || name == "disallowed-tools") return ListWords::kTools;
  return name == "writable" ? ListWords::kDirectories : ListWords::kNone;
}

// Whether `word` continues a --add-dir list: an existing directory does; a word shaped like a
// path (/x, ./x, ../x, ~x, x/, without a blank) that is none is an error, since as the prompt it
// would be sent to the model; any other word ends the list.
Result<bool> ContinuesDirectories(const std::string& word) {
  std::error_code ec;
  if (std::filesystem::is_directory(word, ec)) return true;
  const bool pathlike = word.find_first_of(" \t\n") == std::string::npos &&
                        (word.starts_with("/") || word.starts_with("./") ||
                         word.starts_with("../") || word.starts_with("~") || word.ends_with("/"));
  if (!pathlike) return false;
  return Status::InvalidArgument("'" + word +
                                 "' is not a directory (a PROMPT that looks like a path goes "
                                 "after --)");
}

// argv[1..argc) with each list option's following words that continue it (ContinuedBy) made
// its own: --tools joined into its one value, the others repeated. A word starting with "-", or
// `--`, ends a list. The error names the option and the word.
Result<std::vector<std::string>> ExpandLists(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    const std::string name = OptionNamed(args[i]);
    const CLI::Option* opt = name.starts_with("--") ? app.get_option_no_throw(name) : nullptr;
    const ListWords kind = ContinuedBy(opt);
    if (kind == ListWords::kNone) {
      if (ValueFollows(app, args[i])) ++i;
      continue;
    }
    if (args[i].find('=') == std::string::npos) {  // Its value is the next word.
      if (++i >= args.size()) break;
    }
    size_t value = i;
    while (i + 1 < args.size() && !args[i + 1].starts_with("-")) {
      const std::string& word = args[i + 1];
      Result<bool> more = kind == ListWords::kTools ? Result<bool>(agent::IsToolListWord(word))
                                                    : ContinuesDirectories(word);
      if (!more.ok()) return more.status().WithContext(name);
      if (!*more) break;
      if (opt->get_lnames()[0] == "tools") {
        args[value] += "," + word;
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(i + 1));
      } else {
        args.insert(args.begin() + static_cast<std::ptrdiff_t>(i + 1), name);
        i += 2;
      }
    }
  }
  return args;
}

// Command-line values that are not Options fields as they are.
struct Flags {
  std::string sandbox_mode = "on";
  bool json = false;
  std::string output_format = "text";
  double request_timeout_s = 0;
  double idle_timeout_s = 0;
  bool no_subagents = false;
  std::string tools = "default";
  std::vector<std::string> disallowed_tools;
  bool no_stream = false;
  bool no_persistence = false;
  bool skip_git_repo_check = false;  // Accepted, and means nothing more.
  std::string system_prompt_file;    // Read into Options::system_prompt by ApplyFlags.
  std::string append_system_prompt_file;
};

constexpr size_t kMaxPromptFileBytes = size_t{1} << 20;

// The text of a --*system-prompt-file FILE: a regular file (a FIFO is refused, never waited on),
// not empty, at most kMaxPromptFileBytes. Read unconfined and sent to the model, so through no
// link: one a tool planted in the workdir could lead to a credential store.
Status ReadPromptFile(const std::string& flag, const std::string& path, std::string* out) {
  if (path.empty()) return Status::Ok();
  Result<std::string> text = ReadRegularFileNoLinks(path, kMaxPromptFileBytes);
  if (!text.ok()) return text.status().WithContext(flag);
  if (text->empty()) return Status::InvalidArgument(flag + ": " + path + ": the file is empty");
  *out = std::move(*text);
  return Status::Ok();
}

// The prompt, where the answer goes, and the system prompt.
void AddPromptOptions(CLI::App& app, Options& o, Flags& f) {
  app.add_option("prompt", o.prompt, "The task; - reads it from stdin");
  app.add_flag("-p,--print", o.print,
               "Answer once and exit, as claude -p: the prompt is PROMPT, else stdin; stdin piped "
               "with a PROMPT is added below it as context");
  app.add_option("-o,--output-last-message", o.output_last_message,
                 "Also write the answer to FILE, as codex exec -o (emptied at the start; needs a "
                 "PROMPT)")
      ->check(NonEmpty());
  CLI::Option* system = app.add_option("--system-prompt", o.system_prompt,
                                       "Replaces forkbox's system prompt, as claude -p (not the "
                                       "subagents'; notes on read-only and turned-off tools stay)")
                            ->check(NonEmpty());
  app.add_option("--system-prompt-file", f.system_prompt_file,
                 "The same, read from FILE (command line only)")
      ->check(NonEmpty())
      ->excludes(system);
  CLI::Option* append =
      app.add_option("--append-system-prompt", o.append_system_prompt,
                     "Text added below forkbox's system prompt, as claude -p (not the subagents')")
          ->check(NonEmpty());
  app.add_option("--append-system-prompt-file", f.append_system_prompt_file,
                 "The same, read from FILE (command line only)")
      ->check(NonEmpty())
      ->excludes(append);
}

// In --help's order: the prompt's options first, then the session's limits and tools.
void AddSessionOptions(CLI::App& app, Options& o, Flags& f) {
  AddPromptOptions(app, o, f);
  app.add_option("-C,--workdir,--cd", o.workdir,
                 "Project directory (default: the current directory; -C and --cd as codex exec)")
      ->check(NonEmpty());
  app.add_flag("--skip-git-repo-check", f.skip_git_repo_check,
               "Accepted for codex exec scripts: forkbox runs in any directory, a git repository "
               "or not (command line only)");
  app.add_option("--max-turns", o.max_turns, "Parent turn limit")
      ->check(Within(1, 10000))
      ->default_str(NumberText(o.max_turns));
  app.add_option("--task-max-turns", o.task_max_turns, "Turn limit of each subagent")
      ->check(Within(1, 10000))
      ->default_str(NumberText(o.task_max_turns));
  app.add_option("--max-parallel", o.max_parallel, "Subagents running at once")
      ->check(Within(1, 64))
      ->default_str(NumberText(o.max_parallel));
  app.add_option("--task-timeout", o.task_timeout_s, "Seconds before a subagent is killed")
      ->check(Within(0.001, 86400.0))
      ->default_str(NumberText(o.task_timeout_s));
  app.add_option("--tool-timeout", o.tool_timeout_s, "Seconds before a tool command is killed")
      ->check(Within(0.001, 86400.0))
      ->default_str(NumberText(o.tool_timeout_s));
  app.add_option("--transcript-dir", o.transcript_dir, "Write one JSONL transcript per task here")
      ->check(NonEmpty());
  app.add_option("--child-path", o.child_path,
                 "forkbox-child binary (default: $FORKBOX_CHILD, else next to forkbox)")
      ->check(NonEmpty());
  app.add_flag("--no-subagents", f.no_subagents, "Baseline: base tools only, no task tool");
  app.add_option("--tools", f.tools,
                 "The tools offered, as claude -p --tools: some of bash, read_file, write_file, "
                 "edit_file, task (or Bash, Read, Write, Edit, Task or Agent), separated by "
                 "commas or given as the arguments that follow; \"\" none")
      ->check(ToolList(/*keywords=*/true))
      ->capture_default_str();
  app.add_option("--disallowed-tools,--disallowedTools", f.disallowed_tools,
                 "Tools never offered, the subagents' included (names as --tools; repeatable, "
                 "and the tool names that follow count too)")
      ->check(ToolList(/*keywords=*/false))
      ->allow_extra_args(false);
  auto* cont = app.add_flag("-c,--continue", o.continue_session,
                            "Resume the most recent session of this workdir");
  app.add_option("-r,--resume", o.resume, "Resume the session with this id (forkbox sessions)")
      ->check(NonEmpty("the session id is empty (forkbox sessions lists them)"))
      ->excludes(cont);
  app.add_flag("--no-session-persistence,--ephemeral", f.no_persistence,
               "Keep nothing of this session in $XDG_STATE_HOME/forkbox/sessions (--ephemeral as "
               "codex exec)");
  app.add_option("--standby", o.standby,
                 "Subagents kept started and sandboxed ahead of their tasks; 0 starts each one "
                 "when its task comes")
      ->check(Within(0, 64))
      ->default_str(NumberText(o.standby));
}

void AddSandboxOptions(CLI::App& app, Options& o, Flags& f) {
  app.add_flag("--allow-net", o.sandbox.allow_net, "Let tool commands use the network");
  app.add_option("--writable,--add-dir", o.sandbox.writable,
                 "Extra writable path (repeatable; --add-dir as claude -p: the directories "
                 "that follow count too)")
      ->allow_extra_args(false);
  app.add_option("--env", o.sandbox.env, "Pass environment variable NAME to tools (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--readable", o.sandbox.readable,
                 "Let tools read this credential store, outside the read scope by default "
                 "(repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--allow-broad-workdir", o.sandbox.allow_broad_workdir,
               "Accept a workdir of /, $HOME or an ancestor of a credential store");
  app.add_option("-s,--sandbox", f.sandbox_mode,
                 "on|off|read-only; off runs tools UNSANDBOXED, read-only lets nothing write a "
                 "file, the workdir included; codex exec's -s workspace-write is on, "
                 "danger-full-access is off")
      ->check(CLI::IsMember(
          std::vector<std::string>(sandbox::kSandboxModes.begin(), sandbox::kSandboxModes.end())))
      ->capture_default_str();
}

void AddOutputOptions(CLI::App& app, Options& o, Flags& f) {
  auto* quiet = app.add_flag("-q,--quiet", o.quiet, "No banner or progress on stderr");
  app.add_flag("-v,--verbose", o.provider.verbose, "Log requests and children's stderr")
      ->excludes(quiet);
  auto* json_flag = app.add_flag("--json", f.json, "Short for --output-format json");
  app.add_option("--output-format", f.output_format,
                 "text (the answer on stdout), json (one object with the answer and stats) or "
                 "stream-json (one JSON event per line, see docs/events.md)")
      ->check(CLI::IsMember({"text", "json", "stream-json"}))
      ->excludes(json_flag)
      ->capture_default_str();
  app.add_flag("--no-stream", f.no_stream, "Do not stream model replies");
}

// Issue 15: context window, extended thinking and token budgets.
void AddBudgetOptions(CLI::App& app, Options& o) {
  app.add_option("--context-window", o.provider.context_window,
                 "The model's context window in tokens (default: known models' own; old tool "
                 "results are folded before a request passes 80% of it)")
      ->check(Within(int64_t{1000}, int64_t{1} << 40));
  app.add_option("--thinking", o.provider.thinking_budget_tokens,
                 "Anthropic extended thinking with this token budget (at least 1024)")
      ->check(Within(int64_t{1024}, int64_t{1} << 30));
  app.add_option("--task-max-tokens", o.task_max_tokens,
                 "Input + output tokens one task may use; then it summarises and stops")
      ->check(Within(int64_t{1}, int64_t{1} << 50));
  app.add_option("--max-tokens-total", o.max_tokens_total,
                 "Input + output tokens the whole session (parent and tasks) may use")
      ->check(Within(int64_t{1}, int64_t{1} << 50));
}

void AddProviderOptions(CLI::App& app, Options& o, Flags& f) {
  app.add_option("--provider", o.provider.name, "anthropic or openai")->check(NonEmpty());
  app.add_option("-m,--model", o.provider.model, "Model name (default: the provider's)")
      ->check(NonEmpty());
  app.add_option("--base-url", o.provider.base_url, "API base URL")->check(NonEmpty());
  app.add_option("--max-tokens", o.provider.max_tokens, "Output token limit per model call")
      ->check(Within(int64_t{1}, int64_t{1} << 30))
      ->default_str(NumberText(o.provider.max_tokens));
  app.add_option("--max-retries", o.provider.max_retries, "Retries of a failed model call")
      ->check(Within(int64_t{0}, int64_t{100}))
      ->default_str(NumberText(o.provider.max_retries));
  f.request_timeout_s = static_cast<double>(o.provider.total_timeout_ms) / 1000.0;
  f.idle_timeout_s = static_cast<double>(o.provider.idle_timeout_ms) / 1000.0;
  app.add_option("--request-timeout", f.request_timeout_s,
                 "Seconds one model request may take in all (retries not counted)")
      ->check(Within(0.001, 86400.0))
      ->default_str(NumberText(f.request_timeout_s));
  app.add_option("--idle-timeout", f.idle_timeout_s,
                 "Seconds a model reply may stay silent before it is abandoned")
      ->check(Within(0.001, 86400.0))
      ->default_str(NumberText(f.idle_timeout_s));
  AddBudgetOptions(app, o);
}

Status ApplyFlags(const Flags& f, Options& o) {
  sandbox::ApplySandboxMode(f.sandbox_mode, &o.sandbox);
  Result<std::vector<std::string>> tools = agent::SelectTools(f.tools, f.disallowed_tools);
  if (!tools.ok()) return tools.status();
  o.tools = std::move(*tools);
  if (f.no_subagents) std::erase(o.tools, "task");
  o.subagents = std::find(o.tools.begin(), o.tools.end(), "task") != o.tools.end();
  o.provider.stream = !f.no_stream;
  o.provider.total_timeout_ms = static_cast<int64_t>(f.request_timeout_s * 1000.0);
  o.provider.idle_timeout_ms = static_cast<int64_t>(f.idle_timeout_s * 1000.0);
  o.output_format = f.json ? OutputFormat::kJson : FormatNamed(f.output_format);
  o.persist_session = !f.no_persistence;
  // A file named on the command line outranks a config file's text.
  FORKBOX_RETURN_IF_ERROR(
      ReadPromptFile("--system-prompt-file", f.system_prompt_file, &o.system_prompt));
  FORKBOX_RETURN_IF_ERROR(ReadPromptFile("--append-system-prompt-file", f.append_system_prompt_file,
                                         &o.append_system_prompt));
  // Absolute once, here: the children resolve them in another cwd.
  for (std::string& r : o.sandbox.readable) {
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(r, ec);
    if (!ec) r = abs.lexically_normal().string();
  }
  return Status::Ok();
}

// Options no config file sets and `forkbox config` does not list: they configure nothing.
bool CommandLineOnly(const std::string& name) {
  return name == "help" || name == "version" || name == "skip-git-repo-check";
}

// The config files' kinds of option; single-valued options take the last value (--max-turns 3
// --max-turns 4 is 4).
std::map<std::string, OptionKind> PrepareForConfig(CLI::App& app) {
  std::map<std::string, OptionKind> kinds;
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty()) continue;
    const std::string& name = opt->get_lnames()[0];
    if (CommandLineOnly(name)) continue;
    const std::string type = opt->get_type_name();
    const bool integer = type.starts_with("INT") || type.starts_with("UINT");
    OptionKind kind = opt->get_expected_max() == 0        ? OptionKind::kFlag
                      : opt->get_items_expected_max() > 1 ? OptionKind::kList
                      : integer                           ? OptionKind::kInteger
                      : type.starts_with("FLOAT")         ? OptionKind::kNumber
                                                          : OptionKind::kString;
    if (kind != OptionKind::kList) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    kinds[name] = kind;
  }
  return kinds;
}

// Config key -> where its value came from ("user config PATH:LINE").
using Sources = std::map<std::string, std::string>;
// The options decided so far, and by which entry (nullptr: the command line).
using Taken = std::map<const CLI::Option*, const ConfigEntry*>;

// Keys the environment can set too: their files' values rank below it, so they are resolved with
// it (agent::ResolveProviderSettings, ResolveChildPath), never given as flags.
bool SetBelowEnvironment(const ConfigEntry& e, Options& o) {
  const std::string& value = e.values.at(0);
  if (e.key == "provider") {
    o.provider_files.name = value;
    o.provider_files.name_from_project = e.project;
    if (!e.project) o.provider_files.user_name = value;
  } else if (e.key == "model") {
    o.provider_files.model = value;
  } else if (e.key == "base-url") {
    o.provider_files.base_url = value;
  } else if (e.key == "child-path") {
    o.child_path_file = value;
  } else {
    return false;
  }
  return true;
}

// The entry's value into its option, validated and stored as the flag's would be; an error names
// the file, the line and the key.
Status GiveValue(CLI::Option& opt, const ConfigEntry& e) {
  try {
    opt.add_result(e.values);
    opt.run_callback();
  } catch (const CLI::Error& error) {
    std::string why = error.what();
    if (why.starts_with(opt.get_name() + ": ")) why.erase(0, opt.get_name().size() + 2);
    return Status::InvalidArgument(e.where + ": key \"" + e.key + "\": " + why);
  }
  return Status::Ok();
}

// One entry, unless a flag or a higher file decided its option or one it excludes (--verbose
// drops quiet = true). Two keys of one file that exclude each other are an error. A list
// (writable, env, readable) adds its items to the flags'.
Status ApplyEntry(CLI::App& app, const ConfigEntry& e, Taken& taken, Options& o, Sources& sources) {
  CLI::Option* opt = app.get_option_no_throw("--" + e.key);
  if (opt == nullptr) return Status::Internal("config key \"" + e.key + "\" has no option");
  if (opt->get_items_expected_max() <= 1) {
    const std::set<CLI::Option*> excludes = opt->get_excludes();
    const ConfigEntry* clash = nullptr;
    for (const auto& [other, by] : taken) {
      if (other != opt && excludes.count(const_cast<CLI::Option*>(other)) == 0) continue;
      if (by == nullptr || by->project != e.project || other == opt) return Status::Ok();
      clash = by;
    }
    if (clash != nullptr) {
      return Status::InvalidArgument(e.where + ": key \"" + e.key + "\" excludes key \"" +
                                     clash->key + "\" (" + clash->where + "); keep one");
    }
    taken[opt] = &e;
  }
  sources[e.key] = e.where;
  if (SetBelowEnvironment(e, o)) {
    // Not given to the option, so its NonEmpty check is made here.
    if (!e.values.at(0).empty()) return Status::Ok();
    return Status::InvalidArgument(e.where + ": key \"" + e.key + "\": " + kEmptyValue);
  }
  return GiveValue(*opt, e);
}

// The files under the flags, the project's over the user's. Every entry that can be is applied,
// so that an error still takes the output format the files ask for; returns the first error.
Status ApplyConfig(CLI::App& app, const std::vector<ConfigEntry>& entries,
                   const std::set<const CLI::Option*>& given, Options& o, Sources& sources) {
  Taken taken;
  for (const CLI::Option* opt : given) taken[opt] = nullptr;
  Status first;
  for (auto e = entries.rbegin(); e != entries.rend(); ++e) {
    Status st = ApplyEntry(app, *e, taken, o, sources);
    if (first.ok()) first = std::move(st);
  }
  return first;
}

std::string SourceText(const agent::SettingSource& from, const std::string& key,
                       const Sources& sources) {
  switch (from.kind) {
    case agent::SettingSource::kGiven:
      return "flag";
    case agent::SettingSource::kEnvironment:
      return "environment (" + from.variable + ")";
    case agent::SettingSource::kFile:
      if (auto it = sources.find(key); it != sources.end()) return it->second;
      break;
    case agent::SettingSource::kDefault:
      break;
  }
  return "default";
}

// The settings the environment can set, as the run resolves them: key -> "value  (source)".
std::map<std::string, std::string> BelowEnvironment(const Options& o, const Sources& sources) {
  ipc::ProviderSettings provider = o.provider;
  agent::ProviderSources from;
  agent::ApplyEnvironmentDefaults(provider, o.provider_files, &from);
  std::map<std::string, std::string> out = {
      {"provider", provider.name + "  (" + SourceText(from.name, "provider", sources) + ")"},
      {"model", provider.model + "  (" + SourceText(from.model, "model", sources) + ")"},
      {"base-url",
       provider.base_url + "  (" + SourceText(from.base_url, "base-url", sources) + ")"}};
  if (Result<ChildPathChoice> child = ChooseChildPath(o); child.ok()) {
    out["child-path"] = child->path + "  (" + SourceText(child->from, "child-path", sources) + ")";
  }
  return out;
}

// Every long option's effective value and where it came from (`forkbox config`).
std::vector<std::pair<std::string, std::string>> Effective(
    const CLI::App& app, const std::set<const CLI::Option*>& given, const Options& o,
    const Sources& sources) {
  const std::map<std::string, std::string> below = BelowEnvironment(o, sources);
  std::vector<std::pair<std::string, std::string>> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty()) continue;
    const std::string& name = opt->get_lnames()[0];
    if (CommandLineOnly(name)) continue;
    if (auto it = below.find(name); it != below.end()) {
      out.emplace_back(name, it->second);
      continue;
    }
    std::string value;
    if (opt->get_items_expected_max() > 1) {
      for (const std::string& r : opt->results()) value += (value.empty() ? "" : ",") + r;
    } else if (!opt->results().empty()) {
      value = opt->results().back();  // The last one given wins.
    }
    if (opt->count() == 0) {
      value = opt->get_expected_max() == 0 ? "false" : opt->get_default_str();
    }
    const auto file = sources.find(name);
    std::string source = file != sources.end() ? file->second : "default";
    // A list adds the files' items to the flags'.
    if (given.count(opt) > 0) source = file != sources.end() ? "flag, " + source : "flag";
    // The text a --*system-prompt-file gave (ApplyFlags read it into the same field).
    if (const CLI::Option* from = app.get_option_no_throw("--" + name + "-file");
        from != nullptr && from->count() > 0) {
      value = name == "system-prompt" ? o.system_prompt : o.append_system_prompt;
      source = "--" + name + "-file " + from->results().back();
    }
    out.emplace_back(name, value + "  (" + source + ")");
  }
  return out;
}

// Every option, the help text around them and --version.
void AddOptions(CLI::App& app, Options& o, Flags& f) {
  app.footer(
      std::string(
          "\nWith PROMPT (or - for stdin) forkbox answers once; without it, on a terminal,\n"
          "it opens an interactive session (/context, /quit).\n\n"
          "forkbox sandbox -- CMD runs any command under the tool policy;\n"
          "forkbox sandbox --check prints what the sandbox enforces here.\n"
          "forkbox sessions lists the saved sessions (--continue, --resume ID).\n"
          "forkbox agents lists the subagent types (`subagent_type`) and their sandbox.\n"
          "forkbox config prints the effective settings and where each came from.\n\n"
          "Settings: flags > environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,\n"
          "OPENAI_API_KEY, OPENAI_BASE_URL, FORKBOX_PROVIDER, FORKBOX_MODEL, ANTHROPIC_MODEL,\n"
          "FORKBOX_CHILD) > <workdir>/.forkbox/config.toml > ~/.config/forkbox/config.toml.\n"
          "API keys are only read from the environment, never from the command line or a\n"
          "file. --model and model settings take Claude's aliases sonnet, opus and haiku.\n\n") +
      kExitCodesHelp);
  app.set_version_flag("--version", std::string("forkbox ") + FORKBOX_VERSION);
  AddSessionOptions(app, o, f);
  AddSandboxOptions(app, o, f);
  AddOutputOptions(app, o, f);
  AddProviderOptions(app, o, f);
}

// The output format the config files alone ask for, resolved as a run's on a fresh parser: for
// the error of a command line CLI11 refused (`workdir`: what it read of --workdir, if anything).
OutputFormat FilesFormat(const std::string& workdir) {
  Options o;
  Flags f;
  CLI::App app;
  AddOptions(app, o, f);
  std::vector<ConfigEntry> entries;
  Sources sources;
  // Their errors wait: the command line's comes first.
  (void)ReadConfigFiles(PrepareForConfig(app), workdir, &entries);
  (void)ApplyConfig(app, entries, {}, o, sources);
  (void)ApplyFlags(f, o);
  return o.output_format;
}

// `forkbox config` and `forkbox agents` take a session's flags but print text: a PROMPT, or a
// flag asking for JSON, is a usage error (as for `forkbox sessions`), not a request quietly
// ignored. Empty: none.
std::string SubcommandMisuse(CliCommand command, const CLI::App& app,
                             const std::set<const CLI::Option*>& given, const Options& o) {
  if (command == CliCommand::kRun) return "";
  const std::string name =
      std::string("forkbox ") + (command == CliCommand::kConfig ? "config" : "agents");
  if (o.has_prompt) return name + ": takes flags only, not a PROMPT (\"" + o.prompt + "\")\n";
  for (const char* flag : {"--json", "--output-format"}) {
    if (given.count(app.get_option(flag)) > 0) {
      return name + ": has no JSON output (" + flag + "); it prints text\n";
    }
  }
  return "";
}

// A usage error of the command line itself, in the output format it (else the files) asks for.
CliOutcome UsageError(const std::string& message, int argc, char** argv, const Options& o) {
  CliOutcome outcome;
  outcome.err = "forkbox: " + message + "\n";
  outcome.exit_code = kExitUsage;
  const std::optional<OutputFormat> asked = FormatFromArgv(argc, argv);
  outcome.format = asked ? *asked : FilesFormat(o.workdir);
  return outcome;
}

// `text` as a quoted word of an error message, cut to 40 bytes.
std::string Quoted(const std::string& text) {
  return "'" + (text.size() > 40 ? text.substr(0, 37) + "..." : text) + "'";
}

// What a codex exec user means and forkbox would misread: `forkbox exec PROMPT` ("exec" would be
// the prompt) and `-c key=value` (-c is --continue here, so the override would be the prompt).
// `extras`: the words CLI11 left over. Empty: neither.
std::string CodexMisreading(const CLI::App& app, const std::vector<std::string>& extras) {
  std::vector<std::string> words = app.get_option("prompt")->results();
  words.insert(words.end(), extras.begin(), extras.end());
  if (!words.empty() && words[0] == "exec") {
    return "exec: no such subcommand; forkbox [FLAGS] PROMPT answers once, as codex exec PROMPT "
           "does";
  }
  if (app.count("--continue") == 0) return "";
  for (const std::string& word : words) {
    const size_t eq = word.find('=');
    const bool key_value =
        eq != std::string::npos && eq > 0 && word.find_first_of(" \t\n") == std::string::npos &&
        std::all_of(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(eq), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
        });
    if (key_value) {
      return "-c " + Quoted(word) + ": -c is --continue here, as in claude -c; codex's -c " +
             "KEY=VALUE is a flag here (--model o3) or a key in a config.toml";
    }
  }
  return "";
}

// CLI11's error for the words it left over, in their order (it lists them backwards).
std::string ExtrasMessage(const CLI::App& app, const std::vector<std::string>& extras) {
  std::string listed;
  for (const std::string& word : extras) listed += (listed.empty() ? "" : " ") + Quoted(word);
  const std::vector<std::string>& prompt = app.get_option("prompt")->results();
  if (prompt.empty()) return "not expected: " + listed + "\n" + kHelpHint;
  return "one PROMPT only: " + listed + " came after the prompt " + Quoted(prompt[0]) +
         " (quote a prompt of several words as one argument)\n" + kHelpHint;
}

// Checks and parses the command line alone into `app` (its options write into `o`): an unknown
// option, an empty `--name=`, a list option's following words (ExpandLists), CLI11's own
// errors and help. The outcome to return at once, or nullopt to go on.
std::optional<CliOutcome> ParseArgs(CLI::App& app, int argc, char** argv, const Options& o) {
  if (std::string unknown = FirstUnknownOption(app, argc, argv); !unknown.empty()) {
    return UsageError(unknown, argc, argv, o);
  }
  if (std::optional<std::string> empty = EmptyInlineValue(argc, argv)) {
    return UsageError(*empty + ": " + kEmptyValue, argc, argv, o);
  }
  Result<std::vector<std::string>> args = ExpandLists(app, argc, argv);
  if (!args.ok()) return UsageError(args.status().message(), argc, argv, o);
  try {
    app.parse(std::vector<std::string>(args->rbegin(), args->rend()));  // CLI11 pops the back.
  } catch (const CLI::ExtrasError&) {
    std::string why = CodexMisreading(app, app.remaining());
    return UsageError(why.empty() ? ExtrasMessage(app, app.remaining()) : why, argc, argv, o);
  } catch (const CLI::ParseError& e) {
    CliOutcome outcome;
    std::ostringstream out, err;
    int code = app.exit(e, out, err);
    outcome.out = out.str();
    outcome.err = code == 0 || err.str().empty() ? err.str() : "forkbox: " + err.str();
    outcome.exit_code = code == 0 ? kExitOk : kExitUsage;
    const std::optional<OutputFormat> asked = FormatFromArgv(argc, argv);
    if (code != 0) outcome.format = asked ? *asked : FilesFormat(o.workdir);
    return outcome;
  }
  if (std::string why = CodexMisreading(app, {}); !why.empty()) {
    return UsageError(why, argc, argv, o);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> EmptyInlineValue(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() > 3 && arg.starts_with("--") && arg.find('=') == arg.size() - 1) {
      return std::string(arg.substr(0, arg.size() - 1));
    }
  }
  return std::nullopt;
}

CliOutcome ParseCommandLine(int argc, char** argv, CliCommand command) {
  Options o;
  Flags flags;
  CLI::App app{
      "forkbox: a sandboxed coding agent. The model works through bash, read_file, write_file,\n"
      "edit_file, and delegates subtasks with `task` to sandboxed child agents that run in\n"
      "parallel and return only a summary.",
      "forkbox"};
  AddOptions(app, o, flags);
  CliOutcome outcome;
  const std::map<std::string, OptionKind> kinds = PrepareForConfig(app);
  // The command line alone first: its errors are its own, and it decides what the files may not.
  if (std::optional<CliOutcome> refused = ParseArgs(app, argc, argv, o)) return *refused;
  std::set<const CLI::Option*> given;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() > 0) given.insert(opt);
  }
  std::vector<ConfigEntry> entries;
  Sources sources;
  Status read = ReadConfigFiles(kinds, o.workdir, &entries);
  Status applied = ApplyConfig(app, entries, given, o, sources);
  Status resolved = ApplyFlags(flags, o);
  outcome.format = o.output_format;
  if (Status bad = !read.ok() ? read : !applied.ok() ? applied : resolved; !bad.ok()) {
    outcome.err = "forkbox: " + bad.message() + "\n";
    outcome.exit_code = kExitUsage;
    return outcome;
  }
  o.has_prompt = app.count("prompt") > 0;
  if (std::string bad = SubcommandMisuse(command, app, given, o); !bad.empty()) {
    outcome.err = std::move(bad);
    outcome.exit_code = kExitUsage;
    return outcome;
  }
  if (command == CliCommand::kConfig) outcome.effective = Effective(app, given, o, sources);
  outcome.options = std::move(o);
  return outcome;
}

CLI::Validator NonEmpty(std::string why) {
  if (why.empty()) why = kEmptyValue;
  return CLI::Validator(
      [why = std::move(why)](std::string& value) { return value.empty() ? why : std::string(); },
      "");
}

int SubcommandParseExit(CLI::App& app, const CLI::ParseError& error) {
  std::ostringstream out, err;
  const int code = app.exit(error, out, err);
  WriteText(STDOUT_FILENO, out.str());
  if (code == 0) return kExitOk;
  WriteText(STDERR_FILENO, app.get_name() + ": " + err.str());
  return kExitUsage;
}

}  // namespace forkbox::parent
