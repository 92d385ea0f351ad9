#include "parent/cli.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "parent/config_file.h"
#include "parent/exit_codes.h"

#ifndef FORKBOX_VERSION
#define FORKBOX_VERSION "unknown"
#endif

namespace forkbox::parent {
namespace {

OutputFormat FormatNamed(const std::string& name) {
  if (name == "json") return OutputFormat::kJson;
  if (name == "stream-json") return OutputFormat::kStreamJson;
  return OutputFormat::kText;
}

// The requested format read without CLI11, so that a command line CLI11 rejects still gets its
// error in the format it asked for.
OutputFormat FormatFromArgv(int argc, char** argv) {
  OutputFormat format = OutputFormat::kText;
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

// Command-line values that are not Options fields as they are.
struct Flags {
  std::string sandbox_mode = "on";
  bool json = false;
  std::string output_format = "text";
  double request_timeout_s = 0;
  double idle_timeout_s = 0;
  bool no_subagents = false;
  bool no_stream = false;
  bool no_persistence = false;
};

void AddSessionOptions(CLI::App& app, Options& o, Flags& f) {
  app.add_option("prompt", o.prompt, "The task; - reads it from stdin");
  app.add_option("--workdir", o.workdir, "Project directory (default: the current directory)");
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
  app.add_option("--transcript-dir", o.transcript_dir, "Write one JSONL transcript per task here");
  app.add_option("--child-path", o.child_path,
                 "forkbox-child binary (default: $FORKBOX_CHILD, else next to forkbox)");
  app.add_flag("--no-subagents", f.no_subagents, "Baseline: base tools only, no task tool");
  auto* cont = app.add_flag("-c,--continue", o.continue_session,
                            "Resume the most recent session of this workdir");
  app.add_option("-r,--resume", o.resume, "Resume the session with this id (forkbox sessions)")
      ->excludes(cont);
  app.add_flag("--no-session-persistence", f.no_persistence,
               "Keep nothing of this session in $XDG_STATE_HOME/forkbox/sessions");
  app.add_option("--standby", o.standby,
                 "Subagents kept started and sandboxed ahead of their tasks; 0 starts each one "
                 "when its task comes")
      ->check(Within(0, 64))
      ->default_str(NumberText(o.standby));
}

void AddSandboxOptions(CLI::App& app, Options& o, Flags& f) {
  app.add_flag("--allow-net", o.sandbox.allow_net, "Let tool commands use the network");
  app.add_option("--writable", o.sandbox.writable, "Extra writable path (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--env", o.sandbox.env, "Pass environment variable NAME to tools (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--readable", o.sandbox.readable,
                 "Let tools read this credential store, outside the read scope by default "
                 "(repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--allow-broad-workdir", o.sandbox.allow_broad_workdir,
               "Accept a workdir of /, $HOME or an ancestor of a credential store");
  app.add_option("--sandbox", f.sandbox_mode, "on|off; off runs tools UNSANDBOXED")
      ->check(CLI::IsMember({"on", "off"}))
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
  app.add_option("--provider", o.provider.name, "anthropic or openai");
  app.add_option("--model", o.provider.model, "Model name (default: the provider's)");
  app.add_option("--base-url", o.provider.base_url, "API base URL");
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

void ApplyFlags(const Flags& f, Options& o) {
  o.sandbox.enabled = f.sandbox_mode == "on";
  o.subagents = !f.no_subagents;
  o.provider.stream = !f.no_stream;
  o.provider.total_timeout_ms = static_cast<int64_t>(f.request_timeout_s * 1000.0);
  o.provider.idle_timeout_ms = static_cast<int64_t>(f.idle_timeout_s * 1000.0);
  o.output_format = f.json ? OutputFormat::kJson : FormatNamed(f.output_format);
  o.persist_session = !f.no_persistence;
  // Absolute once, here: the children resolve them in another cwd.
  for (std::string& r : o.sandbox.readable) {
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(r, ec);
    if (!ec) r = abs.lexically_normal().string();
  }
}

std::string WorkdirFromArgv(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.starts_with("--workdir=")) return arg.substr(10);
    if (arg == "--workdir" && i + 1 < argc) return argv[i + 1];
  }
  return "";
}

bool OnCommandLine(int argc, char** argv, const CLI::Option& opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    for (const std::string& name : opt.get_lnames()) {
      if (arg == "--" + name || arg.starts_with("--" + name + "=")) return true;
    }
    for (const std::string& name : opt.get_snames()) {
      if (arg == "-" + name) return true;
    }
  }
  return false;
}

// The config files' kinds of option; single-valued options take the last value (a flag
// overrides a config file).
std::map<std::string, OptionKind> PrepareForConfig(CLI::App& app) {
  std::map<std::string, OptionKind> kinds;
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty()) continue;
    const std::string& name = opt->get_lnames()[0];
    if (name == "help" || name == "version") continue;
    const std::string type = opt->get_type_name();
    const bool number =
        type.starts_with("INT") || type.starts_with("UINT") || type.starts_with("FLOAT");
    OptionKind kind = opt->get_expected_max() == 0        ? OptionKind::kFlag
                      : opt->get_items_expected_max() > 1 ? OptionKind::kList
                      : number                            ? OptionKind::kNumber
                                                          : OptionKind::kString;
    if (kind != OptionKind::kList) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    kinds[name] = kind;
  }
  return kinds;
}

std::vector<std::pair<std::string, std::string>> Effective(const CLI::App& app, int argc,
                                                           char** argv, const ConfigArgs& config) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty()) continue;
    const std::string& name = opt->get_lnames()[0];
    if (name == "help" || name == "version") continue;
    std::string value;
    if (opt->get_items_expected_max() > 1) {
      for (const std::string& r : opt->results()) value += (value.empty() ? "" : ",") + r;
    } else if (!opt->results().empty()) {
      value = opt->results().back();  // The last one given wins.
    }
    if (opt->count() == 0) {
      value = opt->get_expected_max() == 0 ? "false" : opt->get_default_str();
    }
    std::string source = "default";
    const std::string env = EnvironmentFor(name);
    if (OnCommandLine(argc, argv, *opt)) {
      source = "flag";
    } else if (!env.empty() && std::getenv(env.c_str()) != nullptr) {
      source = "environment (" + env + ")";
    } else if (auto it = config.sources.find(name); it != config.sources.end()) {
      source = it->second;
    }
    out.emplace_back(name, value + "  (" + source + ")");
  }
  return out;
}

}  // namespace

CliOutcome ParseCommandLine(int argc, char** argv) {
  Options o;
  Flags flags;
  CLI::App app{
      "forkbox: a sandboxed coding agent. The model works through bash, read_file, write_file,\n"
      "edit_file, and delegates subtasks with `task` to sandboxed child agents that run in\n"
      "parallel and return only a summary.",
      "forkbox"};
  app.footer(std::string(
                 "\nWith PROMPT (or - for stdin) forkbox answers once; without it, on a terminal,\n"
                 "it opens an interactive session (/context, /quit).\n\n"
                 "forkbox sandbox -- CMD runs any command under the tool policy;\n"
                 "forkbox sandbox --check prints what the sandbox enforces here.\n"
                 "forkbox sessions lists the saved sessions (--continue, --resume ID).\n"
                 "forkbox agents lists the subagent types (`subagent_type`) and their sandbox.\n"
                 "forkbox config prints the effective settings and where each came from.\n\n"
                 "Provider settings: flags > environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,\n"
                 "OPENAI_API_KEY, OPENAI_BASE_URL, FORKBOX_PROVIDER, FORKBOX_MODEL). API keys are\n"
                 "only read from the environment, never from the command line.\n\n") +
             kExitCodesHelp);
  app.set_version_flag("--version", std::string("forkbox ") + FORKBOX_VERSION);
  AddSessionOptions(app, o, flags);
  AddSandboxOptions(app, o, flags);
  AddOutputOptions(app, o, flags);
  AddProviderOptions(app, o, flags);

  CliOutcome outcome;
  outcome.format = FormatFromArgv(argc, argv);
  Result<ConfigArgs> config = ReadConfigFiles(PrepareForConfig(app), WorkdirFromArgv(argc, argv));
  if (!config.ok()) {
    outcome.err = "forkbox: " + config.status().message() + "\n";
    outcome.exit_code = kExitUsage;
    return outcome;
  }
  // The config files' arguments first: a flag given again overrides them.
  std::vector<std::string> args = {argv[0]};
  args.insert(args.end(), config->args.begin(), config->args.end());
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> pointers;
  for (std::string& a : args) pointers.push_back(a.data());
  try {
    app.parse(static_cast<int>(pointers.size()), pointers.data());
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    int code = app.exit(e, out, err);
    outcome.out = out.str();
    outcome.err = err.str();
    outcome.exit_code = code == 0 ? kExitOk : kExitUsage;
    return outcome;
  }
  o.has_prompt = app.count("prompt") > 0;
  ApplyFlags(flags, o);
  outcome.effective = Effective(app, argc, argv, *config);
  outcome.options = std::move(o);
  return outcome;
}

}  // namespace forkbox::parent
