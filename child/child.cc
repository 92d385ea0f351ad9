#include "child/child.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "agent/http_client.h"
#include "agent/loop.h"
#include "agent/provider.h"
#include "agent/provider_settings.h"
#include "agent/tools.h"
#include "child/agent_profile.h"
#include "child/reporter.h"
#include "child/runner.h"
#include "child/start.h"
#include "ipc/frame.h"
#include "sandbox/sandbox.h"

extern char** environ;

namespace forkbox::child {
namespace {

using Clock = std::chrono::steady_clock;

// The summary is all the parent will ever see of this task, and nobody can answer a question:
// say so, so the model ends with a self-contained report instead of a chatty last message.
std::string SystemPrompt(const std::string& workdir) {
  return "You are a coding subagent at " + workdir +
         ". Complete the given task, then summarize your findings.\n\n"
         "Your final message is the only thing the parent agent will see of your work: make it "
         "concise but complete (what you did, what you found, with file paths and line numbers "
         "where they matter, and anything left undone). Nobody can answer questions, so do not "
         "ask any. Your tools work only inside " +
         workdir + ".";
}

void Wipe(std::string& secret) {
  if (!secret.empty()) ::explicit_bzero(secret.data(), secret.size());
  secret.clear();
}

nlohmann::json StartRecord(const ipc::StartMessage& s) {
  // Everything but the API key.
  return {{"type", "start"},
          {"pid", ::getpid()},
          {"prompt", s.prompt},
          {"workdir", s.workdir},
          {"provider",
           {{"name", s.provider.name},
            {"base_url", s.provider.base_url},
            {"model", s.provider.model},
            {"max_tokens", s.provider.max_tokens},
            {"max_retries", s.provider.max_retries},
            {"stream", s.provider.stream}}},
          {"limits",
           {{"max_turns", s.limits.max_turns},
            {"tool_timeout_ms", s.limits.tool_timeout_ms},
            {"max_tool_output_chars", s.limits.max_tool_output_chars},
            {"max_summary_bytes", s.limits.max_summary_bytes}}},
          {"sandbox",
           {{"enabled", s.sandbox.enabled},
            {"allow_net", s.sandbox.allow_net},
            {"writable", s.sandbox.writable},
            {"env", s.sandbox.env}}},
          {"agent",
           {{"type", s.agent.type},
            {"tools", s.agent.tools},
            {"write", s.agent.write},
            {"network", s.agent.network}}}};
}

// Closes every descriptor above 2 except fd 4, the transcript fd, and fd 3 while a standby child
// still waits on it for its start frame.
void CloseUnexpectedFds(std::optional<int> transcript_fd, bool keep_control) {
  const int first = ipc::kChildReportWriteFd + 1;
  if (transcript_fd && *transcript_fd >= first) {
    if (*transcript_fd > first) ::close_range(first, *transcript_fd - 1, 0);
    ::close_range(*transcript_fd + 1, ~0U, 0);
  } else {
    ::close_range(first, ~0U, 0);
  }
  if (keep_control) {
    ::fcntl(ipc::kChildControlReadFd, F_SETFD, FD_CLOEXEC);
  } else {
    ::close_range(ipc::kChildControlReadFd, ipc::kChildControlReadFd, 0);
  }
  // Tools must not inherit them (Spawn closes them too; this is belt and braces).
  ::fcntl(ipc::kChildReportWriteFd, F_SETFD, FD_CLOEXEC);
  if (transcript_fd) ::fcntl(*transcript_fd, F_SETFD, FD_CLOEXEC);
}

class Task {
 public:
  int Run();

 private:
  int Fail(const std::string& code, const std::string& message, int exit_code) {
    sandbox::KillAllDescendants();
    transcript_.Write({{"type", "error"}, {"code", code}, {"message", message}});
    reporter_.Error(code, message);
    return exit_code;
  }

  Reporter reporter_{ipc::kChildReportWriteFd};
  Transcript transcript_;
  Clock::time_point start_time_ = Clock::now();
};

int Task::Run() {
  ControlReader control(ipc::kChildControlReadFd);
  Result<ipc::Message> first = control.ReadFirst();
  if (!first.ok()) {
    CloseUnexpectedFds(std::nullopt, false);
    return Fail("bad_start", first.status().ToString(), kExitBadStart);
  }
  // A standby child (prepare frame first) sandboxes itself before any task exists, then waits.
  const bool standby = std::holds_alternative<ipc::PrepareMessage>(*first);
  std::optional<ipc::StartMessage> start;
  SandboxPlan plan;
  if (standby) {
    plan = PlanOf(std::get<ipc::PrepareMessage>(*first));
  } else {
    start = std::move(std::get<ipc::StartMessage>(*first));
    plan = PlanOf(*start);
  }
  std::optional<int> transcript_fd;
  if (start && start->transcript_fd) transcript_fd.emplace(*start->transcript_fd);
  CloseUnexpectedFds(transcript_fd, standby);
  if (transcript_fd) transcript_ = Transcript(*transcript_fd);
  if (start) transcript_.Write(StartRecord(*start));

  Result<sandbox::Policy> policy = sandbox::PolicyFromSettings(plan.sandbox, plan.workdir);
  if (!policy.ok()) return Fail("sandbox", policy.status().ToString(), kExitSandbox);
  policy->enabled = plan.sandbox.enabled;
  policy->model_port = PortFromUrl(plan.model_url);

  std::string banner = "off";
  if (policy->enabled) {
    std::vector<int> keep = {ipc::kChildReportWriteFd};
    if (transcript_fd) keep.push_back(*transcript_fd);
    if (standby) keep.push_back(ipc::kChildControlReadFd);
    Result<sandbox::Report> entered = sandbox::EnterAgentSandbox(*policy, keep);
    if (!entered.ok()) {
      return Fail("sandbox", "cannot sandbox the subagent: " + entered.status().ToString(),
                  kExitSandbox);
    }
    banner = entered->Banner();
  } else {
    std::fprintf(stderr,
                 "forkbox-child: WARNING: the sandbox is OFF (--sandbox=off): tool commands run "
                 "with this process's full privileges and can reach the network and every file "
                 "it can.\n");
  }
  if (standby) {
    // Warm the TLS stack now, off the task's clock; then wait for the task.
    if (std::string error; !agent::WarmUpHttp(&error)) return Fail("model", error, kExitModel);
    Result<ipc::StartMessage> task = control.ReadStartAfter(plan);
    if (!task.ok() && task.status().code() == Status::Code::kEndOfFile) {
      return kExitOk;  // Retired unused: no task, nothing to report.
    }
    ::close(ipc::kChildControlReadFd);
    start_time_ = Clock::now();
    if (!task.ok()) return Fail("bad_start", task.status().ToString(), kExitBadStart);
    start = std::move(*task);
  }
  transcript_.Write({{"type", "sandbox"}, {"banner", banner}, {"agent", start->agent.type}});
  Result<std::vector<agent::ToolDef>> tool_defs = AgentToolDefs(start->agent);
  if (!tool_defs.ok()) return Fail("bad_start", tool_defs.status().ToString(), kExitBadStart);
  if (Status st = NarrowSandbox(start->agent, &*policy); !st.ok()) {
    return Fail("sandbox", "cannot narrow the sandbox to the agent: " + st.ToString(),
                kExitSandbox);
  }
  // The task's temp dir, created inside the sandbox (the workdir is writable): a standby that is
  // killed unused leaves nothing behind. A write: none agent gets none (it could not write it).
  sandbox::TaskTmpDir tmp;
  if (start->agent.write != "none") {
    Result<sandbox::TaskTmpDir> created = sandbox::TaskTmpDir::Create(policy->workdir);
    if (!created.ok()) return Fail("sandbox", created.status().ToString(), kExitSandbox);
    tmp = std::move(*created);
    policy->tmpdir = tmp.path();
  }

  agent::ProviderConfig config = agent::FromProviderSettings(start->provider);
  Wipe(start->provider.api_key);
  agent::ModelError config_error;
  std::unique_ptr<agent::Provider> provider = agent::MakeProvider(config, &config_error);
  Wipe(config.api_key);
  if (!provider) return Fail("model", config_error.ToString(), kExitModel);

  agent::ToolContext ctx;
  ctx.workdir = policy->workdir;
  ctx.env = sandbox::ToolEnvironment(*policy, environ);
  ctx.policy = *policy;
  ctx.timeout_ms = start->limits.tool_timeout_ms;
  ctx.max_output_chars = start->limits.max_tool_output_chars;

  bool parent_gone = false;
  auto send_event = [&](int64_t turn, const std::string& tool, const std::string& detail) {
    if (parent_gone) return;
    if (Status st = reporter_.Event(turn, tool, detail); !st.ok()) {
      // Nobody is listening: stop spending tokens.
      std::fprintf(stderr, "forkbox-child: the parent is gone (%s); stopping\n",
                   st.ToString().c_str());
      parent_gone = true;
      sandbox::KillAllDescendants();
      ::_exit(kExitParentGone);
    }
  };
  ChildToolRunner runner(std::move(ctx), [&](int turn, const agent::ToolUseBlock& call) {
    send_event(turn, call.name, DescribeCall(call));
  });

  AllowedToolsRunner allowed_runner(runner, start->agent.tools);

  agent::LoopOptions options;
  options.system = AgentSystemPrompt(SystemPrompt(policy->workdir), start->agent);
  options.tools = std::move(*tool_defs);  // Never `task`: no recursion.
  options.max_turns = static_cast<int>(start->limits.max_turns);
  options.max_tokens = start->provider.max_tokens;
  options.force_final_summary = true;
  options.max_final_text_bytes = start->limits.max_summary_bytes;

  agent::LoopObserver observer;
  observer.on_response = [&](int turn, const agent::Response& r) {
    size_t calls = agent::ToolUsesOf(r.message).size();
    send_event(turn, "",
               calls > 0 ? "model turn: " + std::to_string(calls) + " tool call(s)"
                         : std::string("model turn: ") + agent::StopReasonName(r.stop_reason));
  };
  observer.on_transcript = [&](const nlohmann::json& record) { transcript_.Write(record); };

  std::vector<agent::Message> messages;
  messages.push_back(agent::Message{agent::Role::kUser, {agent::TextBlock{start->prompt}}});
  agent::LoopOutcome outcome =
      agent::RunLoop(*provider, messages, options, allowed_runner, observer);
  provider.reset();
  sandbox::KillAllDescendants();

  if (outcome.stop == "model_error") {
    std::string why = outcome.error ? outcome.error->ToString() : "unknown model error";
    return Fail("model",
                "model error after " + std::to_string(outcome.turns) + " turn(s) and " +
                    std::to_string(outcome.tool_calls) + " tool call(s): " + why,
                kExitModel);
  }
  ipc::ResultMessage result;
  result.summary = std::move(outcome.final_text);
  result.stats.turns = outcome.turns;
  result.stats.input_tokens = outcome.usage.input_tokens + outcome.usage.cache_read_input_tokens +
                              outcome.usage.cache_creation_input_tokens;
  result.stats.output_tokens = outcome.usage.output_tokens;
  result.stats.tool_calls = outcome.tool_calls;
  result.stats.tool_output_bytes = runner.tool_output_bytes();
  result.stats.elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_time_).count();
  result.stats.stop_reason = outcome.stop;
  transcript_.Write({{"type", "result"},
                     {"summary", result.summary},
                     {"stop_reason", result.stats.stop_reason},
                     {"turns", result.stats.turns},
                     {"tool_calls", result.stats.tool_calls},
                     {"tool_output_bytes", result.stats.tool_output_bytes},
                     {"elapsed_ms", result.stats.elapsed_ms}});
  if (Status st = reporter_.Result(result); !st.ok()) {
    std::fprintf(stderr, "forkbox-child: could not send the result: %s\n", st.ToString().c_str());
    return kExitParentGone;
  }
  return kExitOk;
}

}  // namespace

int ChildMain(int, char**) {
  // A dead parent must surface as EPIPE on fd 4, not kill us before we clean up.
  ::signal(SIGPIPE, SIG_IGN);
  // Die with the parent; keep /proc/<pid>/{mem,environ} away from the tools even with the
  // sandbox off (the API key lives in this process's memory).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // Orphaned tool processes come to us, so KillAllDescendants finds them even with the sandbox
  // off (EnterAgentSandbox makes us a subreaper or a PID-namespace init too).
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    std::fprintf(stderr, "forkbox-child: %s\n",
                 Status::FromErrno(errno, "prctl(PR_SET_CHILD_SUBREAPER)").ToString().c_str());
  }
  if (::fcntl(ipc::kChildReportWriteFd, F_GETFD) < 0) {
    std::fprintf(stderr,
                 "forkbox-child: fd %d (the report pipe) is not open; forkbox-child is started by "
                 "forkbox, not by hand\n",
                 ipc::kChildReportWriteFd);
    return kExitBadStart;
  }
  try {
    return Task().Run();
  } catch (const std::exception& e) {
    sandbox::KillAllDescendants();
    Reporter(ipc::kChildReportWriteFd)
        .Error("internal", std::string("unexpected exception: ") + e.what());
    return kExitInternal;
  }
}

}  // namespace forkbox::child
