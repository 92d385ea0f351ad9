#include "parent/parent.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <optional>

#include "agent/provider_settings.h"
#include "agent/tools.h"
#include "parent/agents_command.h"
#include "parent/cli.h"
#include "parent/config.h"
#include "parent/exit_codes.h"
#include "parent/progress.h"
#include "parent/session.h"
#include "parent/signals.h"
#include "parent/system_prompt.h"
#include "parent/task_runner.h"
#include "parent/tool_runner.h"
#include "sandbox/sandbox.h"

extern char** environ;

namespace forkbox::parent {
namespace {

void Err(const std::string& s) { std::fputs(s.c_str(), stderr); }

int Fail(int code, const std::string& message) {
  Err("forkbox: " + message + "\n");
  return code;
}

Result<std::string> ReadStdin() {
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (std::cin.bad()) return Status::Internal("reading the prompt from stdin failed");
  return text;
}

int Run(const Options& o) {
  // The prompt.
  std::string prompt;
  bool interactive = false;
  if (o.has_prompt && o.prompt == "-") {
    auto text = ReadStdin();
    if (!text.ok()) return Fail(kExitUsage, text.status().message());
    prompt = std::move(*text);
    if (prompt.find_first_not_of(" \t\r\n") == std::string::npos) {
      return Fail(kExitUsage, "the prompt read from stdin is empty");
    }
  } else if (o.has_prompt) {
    prompt = o.prompt;
    if (prompt.find_first_not_of(" \t\r\n") == std::string::npos) {
      return Fail(kExitUsage, "the prompt is empty");
    }
  } else if (isatty(STDIN_FILENO)) {
    interactive = true;
  } else {
    return Fail(kExitUsage,
                "no PROMPT and stdin is not a terminal; pass a prompt, or - to read it from "
                "stdin (see --help)");
  }
  if (interactive && o.json) return Fail(kExitUsage, "--json needs a PROMPT (one-shot mode)");

  // Configuration, validated before anything runs.
  auto workdir = ResolveWorkdir(o);
  if (!workdir.ok()) return Fail(kExitUsage, workdir.status().message());
  auto provider_config = ResolveProviderConfig(o);
  if (!provider_config.ok()) return Fail(kExitUsage, provider_config.status().message());
  std::optional<std::string> child_path;
  if (o.subagents) {
    auto path = ResolveChildPath(o);
    if (!path.ok()) return Fail(kExitUsage, path.status().message());
    child_path = *path;
  }
  std::string transcript_dir;
  if (!o.transcript_dir.empty()) {
    auto dir = PrepareTranscriptDir(o.transcript_dir);
    if (!dir.ok()) return Fail(kExitUsage, dir.status().message());
    transcript_dir = *dir;
  }

  // The sandbox: fail closed.
  ipc::SandboxSettings sandbox_settings = ToSandboxSettings(o);
  auto policy = sandbox::PolicyFromSettings(sandbox_settings, *workdir);
  if (!policy.ok()) return Fail(kExitUsage, policy.status().message());
  sandbox::Report report = sandbox::Check(*policy);
  if (o.sandbox && !report.enforceable) {
    std::string why = "sandbox unavailable on kernel " + report.kernel + ":\n";
    for (const auto& line : report.lines) {
      if (line.state == "unavailable") {
        why += "  " + line.protection + ": " + line.detail + "\n";
      }
    }
    why += "refusing to run tools unsandboxed; --sandbox=off overrides (DANGEROUS)";
    return Fail(kExitSandbox, why);
  }
  if (o.sandbox) {
    // As root, one pids cgroup for the session holds fork bombs; joining it once here spares
    // every task and tool spawn a slow cgroup v1 attach.
    Status joined = sandbox::JoinSessionProcessLimit(*policy, o.max_parallel);
    if (!joined.ok()) return Fail(kExitSandbox, joined.ToString());
  }
  auto tmpdir = sandbox::TaskTmpDir::Create(*workdir);
  if (!tmpdir.ok()) return Fail(kExitFailure, "tool temp dir: " + tmpdir.status().ToString());
  policy->tmpdir = tmpdir->path();

  agent::ModelError model_error;
  agent::ProviderHooks hooks;
  hooks.cancelled = InterruptPending;  // Ctrl-C in interactive mode stops the call in flight.
  std::unique_ptr<agent::Provider> provider =
      agent::MakeProvider(*provider_config, &model_error, hooks);
  if (!provider) return Fail(kExitUsage, model_error.ToString());

  Progress progress(!o.quiet, isatty(STDERR_FILENO) != 0);
  if (!o.sandbox) {
    Err("forkbox: WARNING: --sandbox=off: tool commands run UNSANDBOXED with your full user "
        "rights (files, network, secrets). Use only in a disposable environment.\n");
  }
  if (!o.quiet) {
    Err(std::string("forkbox ") + FORKBOX_VERSION_STRING + " · " + provider_config->name + " " +
        provider_config->model + " @ " + provider_config->base_url + " · " +
        (o.subagents ? "subagents on (max " + std::to_string(o.max_parallel) + " parallel)"
                     : "baseline: no subagents") +
        "\n");
    Err((o.sandbox ? report.Banner() : std::string("sandbox: OFF")) + "\n");
  }

  agent::ToolContext context;
  context.workdir = *workdir;
  context.policy = *policy;
  context.env = sandbox::ToolEnvironment(*policy, environ);
  context.timeout_ms = static_cast<int64_t>(o.tool_timeout_s * 1000.0);
  context.max_output_chars = 50'000;
  context.cancelled = InterruptPending;  // Ctrl-C kills the parent's own running bash command.

  std::optional<TaskConfig> tasks;
  if (o.subagents) {
    TaskConfig t;
    t.child_path = *child_path;
    t.provider = agent::ToProviderSettings(*provider_config);
    t.limits.max_turns = o.task_max_turns;
    t.limits.tool_timeout_ms = context.timeout_ms;
    t.limits.max_tool_output_chars = context.max_output_chars;
    t.workdir = *workdir;
    t.sandbox = sandbox_settings;
    t.transcript_dir = transcript_dir;
    t.child_env = context.env;  // Scrubbed: no keys; the key travels in the start frame only.
    t.verbose = o.verbose;
    t.max_parallel = o.max_parallel;
    t.timeout_ms = static_cast<int64_t>(o.task_timeout_s * 1000.0);
    t.standby = o.standby;
    t.agents = LoadAgents(*workdir);
    for (const std::string& w : t.agents.warnings) Err("forkbox: warning: agent file " + w + "\n");
    tasks = std::move(t);
  }

  InterruptMode outside = interactive ? InterruptMode::kFlag : InterruptMode::kExit;
  if (Status st = InstallInterruptHandler(outside); !st.ok()) {
    return Fail(kExitFailure, st.ToString());
  }
  SessionStats stats;
  std::optional<agent::ToolDef> task_tool;
  if (tasks) task_tool = agent::TaskToolDefFor(tasks->agents);
  ParentToolRunner runner(context, std::move(tasks), progress, stats, outside);
  agent::LoopOptions loop;
  loop.system = ParentSystemPrompt(*workdir, o.subagents);
  loop.tools = agent::BaseToolDefs();
  if (task_tool) loop.tools.push_back(std::move(*task_tool));
  loop.max_turns = o.max_turns;
  loop.max_tokens = o.max_tokens;
  Session session(*provider, loop, runner, stats);
  OutputOptions out{o.json, o.stream, o.quiet};
  if (interactive) return RunInteractive(session, out, progress);
  return RunOneShot(session, prompt, out, progress);
}

}  // namespace

int ParentMain(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "sandbox") == 0) {
    return sandbox::SandboxCommandMain(argc - 1, argv + 1);
  }
  if (argc >= 2 && std::strcmp(argv[1], "agents") == 0) {
    return AgentsCommandMain(argc - 1, argv + 1);
  }
  if (Status st = HardenProcess(); !st.ok()) return Fail(kExitFailure, st.ToString());
  CliOutcome cli = ParseCommandLine(argc, argv);
  std::fputs(cli.out.c_str(), stdout);
  std::fputs(cli.err.c_str(), stderr);
  if (!cli.options) return cli.exit_code;
  try {
    return Run(*cli.options);
  } catch (const std::exception& e) {
    return Fail(kExitFailure, std::string("internal error: ") + e.what());
  }
}

}  // namespace forkbox::parent
