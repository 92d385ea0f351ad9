#include "child/child.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "agent/http_client.h"
#include "agent/loop.h"
#include "agent/provider.h"
#include "agent/tools.h"
#include "base/background.h"
#include "base/saturate.h"
#include "child/agent_profile.h"
#include "child/reporter.h"
#include "child/runner.h"
#include "child/spawner.h"
#include "child/start.h"
#include "ipc/frame.h"
#include "sandbox/namespaces.h"
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

// Closes every descriptor above 2 except fd 4, the transcript fd, the workdir fd
// (ipc::kChildWorkdirFd) and fd 3 while a standby child still waits on it for its start frame.
void CloseUnexpectedFds(std::optional<int> transcript_fd, bool keep_control) {
  std::vector<int> keep = {ipc::kChildWorkdirFd};
  if (transcript_fd && *transcript_fd > ipc::kChildReportWriteFd) keep.push_back(*transcript_fd);
  std::sort(keep.begin(), keep.end());
  unsigned next = ipc::kChildReportWriteFd + 1;
  for (int fd : keep) {
    if (static_cast<unsigned>(fd) > next) ::close_range(next, fd - 1, 0);
    next = std::max(next, static_cast<unsigned>(fd) + 1);
  }
  ::close_range(next, ~0U, 0);
  if (keep_control) {
    ::fcntl(ipc::kChildControlReadFd, F_SETFD, FD_CLOEXEC);
  } else {
    ::close_range(ipc::kChildControlReadFd, ipc::kChildControlReadFd, 0);
  }
  // Tools must not inherit them (Spawn closes them too; this is belt and braces).
  ::fcntl(ipc::kChildReportWriteFd, F_SETFD, FD_CLOEXEC);
  ::fcntl(ipc::kChildWorkdirFd, F_SETFD, FD_CLOEXEC);
  if (transcript_fd) ::fcntl(*transcript_fd, F_SETFD, FD_CLOEXEC);
}

// The workdir the parent fixed at its start-up (ipc::kChildWorkdirFd), never re-resolved by
// name: its current path (for the sandbox rules, built by path) is read off the descriptor and
// checked to name the same directory. Started by hand, without that fd: `name`, opened once here.
Result<std::pair<std::string, UniqueFd>> InheritedWorkdir(const std::string& name) {
  struct stat held;
  if (::fstat(ipc::kChildWorkdirFd, &held) != 0) {
    if (errno != EBADF) return Status::FromErrno(errno, "fstat(workdir fd)");
    Result<std::shared_ptr<const UniqueFd>> opened = agent::OpenWorkdir(name);
    if (!opened.ok()) return opened.status();
    return std::make_pair(name, UniqueFd(::fcntl((*opened)->get(), F_DUPFD_CLOEXEC, 3)));
  }
  if (!S_ISDIR(held.st_mode)) return Status::InvalidArgument("fd 6 is not the workdir");
  char buf[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(ipc::kChildWorkdirFd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return Status::FromErrno(errno, "readlink " + link);
  std::string path(buf, static_cast<size_t>(n));
  struct stat named;
  if (path[0] != '/' || ::stat(path.c_str(), &named) != 0 || named.st_dev != held.st_dev ||
      named.st_ino != held.st_ino) {
    return Status::PermissionDenied("the workdir moved while the child resolved it: " + path);
  }
  return std::make_pair(path, UniqueFd(ipc::kChildWorkdirFd));
}

// Reaps exited processes re-parented to this agent (it is their subreaper or PID-namespace init)
// without blocking. Called only while no tool process is running (between tool calls and while a
// model call is in flight), so no ChildProcess handle owns any of them.
void ReapOrphans() { sandbox::ReapOrphans(); }

// Sandbox::Prewarm on a thread of its own, joined when it goes. Its result is not needed: a failure
// comes back from the first Spawn, which makes whatever is missing (also when no thread could start
// and nothing ran).
using PrewarmThread = std::optional<Background<Status>>;

// What a task reports when it cannot run: the error frame's code, its text, the exit code.
struct Failure {
  const char* code;
  std::string message;
  int exit_code;
};

agent::LoopOptions LoopOptionsFor(const ipc::StartMessage& start, const std::string& workdir,
                                  std::vector<agent::ToolDef> tools) {
  agent::LoopOptions options;
  options.system = AgentSystemPrompt(SystemPrompt(workdir), start.agent);
  options.tools = std::move(tools);  // The agent's base tools; never `task`: no recursion.
  options.max_turns = static_cast<int>(start.limits.max_turns);
  options.max_tokens = start.provider.max_tokens;
  options.force_final_summary = true;
  options.max_final_text_bytes = start.limits.max_summary_bytes;
  options.max_total_tokens = start.limits.max_tokens;
  return options;
}

class Task {
 public:
  int Run();

 private:
  int Fail(const Failure& f) {
    sandbox::KillAllDescendants();
    transcript_.Write({{"type", "error"}, {"code", f.code}, {"message", f.message}});
    reporter_.Error(f.code, f.message);
    return f.exit_code;
  }
  // The first frame: a start frame (on demand) or a prepare frame (standby).
  Status ReadFirst(ControlReader& control);
  // Layer 2 verified by the parent: the namespaces and the waiter's fork now, while this process
  // is small, before the HTTP module maps its libraries (sandbox::EnterAgentNamespaces).
  Status EnterNamespacesEarly();
  // Builds the policy and enters the agent sandbox; sets banner_. `http` is loading the HTTP
  // stack meanwhile: the sandbox is prepared alongside (with the parent's hints: the model port
  // and the layer-2 verdict) and `http` joined before the entry needs a single-threaded process.
  // A failure of the HTTP stack sets http_failed_ (a "model" failure, not a "sandbox" one).
  Status EnterSandbox(Background<Status>& http);
  // The workdir and the policy, with the model's port (the parent's, else parsed from the URL).
  Status ResolvePolicy();
  // Waits for `http`; its failure sets http_failed_.
  Status JoinHttp(Background<Status>& http);
  // A standby's wait for its start frame. kEndOfFile: retired unused.
  Status AwaitStart(ControlReader& control);
  int RunTask();
  agent::ToolContext ToolContextFor() const;
  Status PrepareTools(ChildToolRunner& runner, PrewarmThread& prewarm);
  ipc::ResultMessage ResultOf(agent::LoopOutcome& outcome, const ChildToolRunner& runner);
  // Sends an event frame unless the parent is gone; a failed write marks it gone (the loop then
  // stops at its next step and the task unwinds normally, removing its temp dir).
  void SendEvent(int64_t turn, const std::string& tool, const std::string& detail);

  Reporter reporter_{ipc::kChildReportWriteFd};
  Transcript transcript_;
  Clock::time_point start_time_ = Clock::now();
  bool standby_ = false;
  bool parent_gone_ = false;
  bool http_failed_ = false;
  bool namespaces_entered_ = false;
  std::optional<ipc::StartMessage> start_;
  std::optional<int> transcript_fd_;
  SandboxPlan plan_;
  sandbox::Policy policy_;
  std::shared_ptr<const UniqueFd> workdir_fd_;
  std::shared_ptr<sandbox::Sandbox> sandbox_;
  std::string banner_ = "off";
  sandbox::TaskTmpDir tmp_;  // The tools' temp dir; goes with the task.
};

Status Task::ReadFirst(ControlReader& control) {
  Result<ipc::Message> first = control.ReadFirst();
  if (!first.ok()) {
    CloseUnexpectedFds(std::nullopt, false);
    return first.status();
  }
  // A standby child (prepare frame first) sandboxes itself before any task exists, then waits.
  standby_ = std::holds_alternative<ipc::PrepareMessage>(*first);
  if (standby_) {
    plan_ = PlanOf(std::get<ipc::PrepareMessage>(*first));
  } else {
    start_ = std::move(std::get<ipc::StartMessage>(*first));
    plan_ = PlanOf(*start_);
    if (start_->transcript_fd) transcript_fd_.emplace(*start_->transcript_fd);
  }
  CloseUnexpectedFds(transcript_fd_, standby_);
  if (transcript_fd_) transcript_ = Transcript(*transcript_fd_);
  if (start_) transcript_.Write(StartRecord(*start_));
  return Status::Ok();
}

Status Task::EnterNamespacesEarly() {
  if (!plan_.sandbox.enabled || !plan_.hints.layer2_verified) return Status::Ok();
  FORKBOX_RETURN_IF_ERROR(sandbox::EnterAgentNamespaces(plan_.sandbox));
  namespaces_entered_ = true;
  return Status::Ok();
}

Status Task::ResolvePolicy() {
  Result<std::pair<std::string, UniqueFd>> workdir = InheritedWorkdir(plan_.workdir);
  if (!workdir.ok()) return workdir.status();
  Result<sandbox::Policy> policy = sandbox::ResolvePolicy(plan_.sandbox, workdir->first);
  if (!policy.ok()) return policy.status();
  if (plan_.sandbox.enabled) {
    FORKBOX_RETURN_IF_ERROR(sandbox::CheckPathsUnchanged(plan_.sandbox, *policy));
  }
  policy_ = std::move(*policy);
  policy_.enabled = plan_.sandbox.enabled;
  // The file tools resolve beneath this descriptor.
  workdir_fd_ = std::make_shared<const UniqueFd>(std::move(workdir->second));
  if (plan_.hints.model_port != 0) {
    policy_.model_port = static_cast<uint16_t>(plan_.hints.model_port);
    return Status::Ok();
  }
  // No port from the parent: parse the URL (agent/http_url.h; no module needed). The layer-2
  // probe (a clone into new namespaces, allowed to a multi-threaded process, unlike unshare)
  // overlaps the load.
  if (policy_.enabled && !plan_.hints.layer2_verified) sandbox::Layer2Available();
  Result<uint16_t> port = agent::UrlPort(plan_.model_url);
  if (!port.ok()) {
    http_failed_ = true;
    return port.status();
  }
  policy_.model_port = *port;
  return Status::Ok();
}

Status Task::EnterSandbox(Background<Status>& http) {
  FORKBOX_RETURN_IF_ERROR(ResolvePolicy());
  // Everything the sandbox only reads and allocates is prepared while the module loads.
  const sandbox::AgentLayer2 layer2 = namespaces_entered_ ? sandbox::AgentLayer2::kEntered
                                      : plan_.hints.layer2_verified
                                          ? sandbox::AgentLayer2::kVerified
                                          : sandbox::AgentLayer2::kProbe;
  Result<sandbox::PreparedAgentSandbox> prepared = sandbox::PrepareAgentSandbox(policy_, layer2);
  if (!prepared.ok()) return prepared.status().WithContext("cannot sandbox the subagent");
  // The HTTP module and libssl/libcrypto are mapped before the sandbox narrows what we may
  // read, and before it needs a single-threaded process (and closes descriptors).
  FORKBOX_RETURN_IF_ERROR(JoinHttp(http));
  std::vector<int> keep = {ipc::kChildReportWriteFd, workdir_fd_->get()};
  if (transcript_fd_) keep.push_back(*transcript_fd_);
  if (standby_) keep.push_back(ipc::kChildControlReadFd);
  Result<sandbox::Sandbox> entered = sandbox::EnterAgentSandbox(std::move(*prepared), keep);
  if (!entered.ok()) return entered.status().WithContext("cannot sandbox the subagent");
  if (policy_.enabled) {
    banner_ = entered->report().Banner();
  } else {
    std::fprintf(stderr,
                 "forkbox-child: WARNING: the sandbox is OFF (--sandbox=off): tool commands run "
                 "with this process's full privileges and can reach the network and every file "
                 "it can.\n");
  }
  sandbox_ = std::make_shared<sandbox::Sandbox>(std::move(*entered));
  // The file tools go through the sandbox's mounts (a read-only .git/config in layer 2).
  Result<UniqueFd> inside = sandbox::ReopenInside(*workdir_fd_, policy_.workdir);
  if (!inside.ok()) return inside.status().WithContext("cannot sandbox the subagent");
  workdir_fd_ = std::make_shared<const UniqueFd>(std::move(*inside));
  return Status::Ok();
}

Status Task::JoinHttp(Background<Status>& http) {
  Status loaded = http.Get();
  if (!loaded.ok()) http_failed_ = true;
  return loaded;
}

Status Task::AwaitStart(ControlReader& control) {
  // Warm the TLS stack now, off the task's clock; then wait for the task.
  FORKBOX_RETURN_IF_ERROR(agent::WarmUpHttp(plan_.model_url));
  Result<ipc::StartMessage> task = control.ReadStartAfter(plan_);
  if (!task.ok() && task.status().code() == Status::Code::kEndOfFile) return task.status();
  ::close(ipc::kChildControlReadFd);
  start_time_ = Clock::now();
  if (!task.ok()) return task.status();
  start_ = std::move(*task);
  return Status::Ok();
}

void Task::SendEvent(int64_t turn, const std::string& tool, const std::string& detail) {
  if (parent_gone_) return;
  if (Status st = reporter_.Event(turn, tool, detail); !st.ok()) {
    // Nobody is listening: stop spending tokens.
    std::fprintf(stderr, "forkbox-child: the parent is gone (%s); stopping\n",
                 st.ToString().c_str());
    parent_gone_ = true;
  }
}

int Task::Run() {
  ControlReader control(ipc::kChildControlReadFd);
  if (Status st = ReadFirst(control); !st.ok()) {
    return Fail({"bad_start", st.ToString(), kExitBadStart});
  }
  if (Status st = EnterNamespacesEarly(); !st.ok()) {
    return Fail({"sandbox", "cannot sandbox the subagent: " + st.ToString(), kExitSandbox});
  }
  // Started only now: ReadFirst closes descriptors, which must not race the loader's own.
  // The TLS set-up (https only) opens no file that the sandbox's close of descriptors could pull
  // away (the CA store is read and closed).
  Background<Status> http = agent::StartWarmUpHttp(plan_.model_url);
  if (Status st = EnterSandbox(http); !st.ok()) {
    if (http_failed_) return Fail({"model", st.message(), kExitModel});
    return Fail({"sandbox", st.ToString(), kExitSandbox});
  }
  if (standby_) {
    Status st = AwaitStart(control);
    if (st.code() == Status::Code::kEndOfFile) return kExitOk;  // Retired: nothing to report.
    if (!st.ok()) {
      const bool tls = st.code() == Status::Code::kInternal;
      if (tls) return Fail({"model", st.message(), kExitModel});
      return Fail({"bad_start", st.ToString(), kExitBadStart});
    }
  }
  transcript_.Write({{"type", "sandbox"}, {"banner", banner_}, {"agent", start_->agent.type}});
  if (Status st = NarrowSandbox(start_->agent, sandbox_.get(), &tmp_); !st.ok()) {
    return Fail(
        {"sandbox", "cannot narrow the sandbox to the agent: " + st.ToString(), kExitSandbox});
  }
  return RunTask();
}

// Once per task, before its first tool call: the task's temp dir, created inside the sandbox (the
// workdir is writable: a standby that is killed unused leaves nothing behind; a write: none
// agent's was made on /dev/shm before it narrowed, NarrowSandbox), the tools' environment
// (TMPDIR), then the tool ruleset and the connect broker's thread (Sandbox::Prewarm, on
// `prewarm`).
Status Task::PrepareTools(ChildToolRunner& runner, PrewarmThread& prewarm) {
  if (start_->agent.write != "none") {
    Result<sandbox::TaskTmpDir> created = sandbox::TaskTmpDir::Create(policy_.workdir);
    if (!created.ok()) return created.status();
    tmp_ = std::move(*created);
    sandbox_->set_tmpdir(tmp_);
  }
  tmp_.ApplyTo(&policy_);
  runner.set_env(sandbox::ToolEnvironment(policy_, environ));
  // The policy is final. A failure here comes back from the first call's Spawn.
  prewarm.emplace([sandbox = sandbox_] { return sandbox->Prewarm(); });
  return Status::Ok();
}

// The tools' context but their environment (PrepareTools sets it).
agent::ToolContext Task::ToolContextFor() const {
  agent::ToolContext ctx;
  ctx.workdir = policy_.workdir;
  ctx.workdir_fd = workdir_fd_;
  ctx.sandbox = sandbox_;
  ctx.timeout_ms = start_->limits.tool_timeout_ms;
  ctx.max_output_chars = start_->limits.max_tool_output_chars;
  return ctx;
}

int Task::RunTask() {
  Result<std::vector<agent::ToolDef>> tool_defs = AgentToolDefs(start_->agent);
  if (!tool_defs.ok()) return Fail({"bad_start", tool_defs.status().ToString(), kExitBadStart});
  // PrepareTools runs once the first request is on the wire, while its reply is awaited, not on
  // its clock (else before the first tool call). The temp dir goes with the Task; the prewarm
  // thread is joined before that, after the provider.
  PrewarmThread prewarm;
  std::optional<Status> tools_ready;
  std::optional<ChildToolRunner> runner;
  auto prepare_tools = [&] {
    if (!tools_ready) tools_ready = PrepareTools(*runner, prewarm);
    return tools_ready->ok();
  };
  runner.emplace(ToolContextFor(),
                 [this, &prepare_tools](int turn, const agent::ToolUseBlock& call) {
                   ReapOrphans();
                   if (!prepare_tools())
                     return false;  // Stops the loop; the failure is reported below.
                   SendEvent(turn, call.name, DescribeCall(call));
                   return !parent_gone_;
                 });
  Result<std::unique_ptr<agent::Provider>> provider =
      MakeTaskProvider(*start_, [&prepare_tools] { prepare_tools(); });
  if (!provider.ok()) return Fail({"model", provider.status().message(), kExitModel});

  agent::LoopObserver observer;
  observer.on_response = [&](int turn, const agent::Response& r) {
    reporter_.CountUsage(r.usage);
    size_t calls = agent::ToolUsesOf(r.message).size();
    SendEvent(turn, "",
              calls > 0 ? "model turn: " + std::to_string(calls) + " tool call(s)"
                        : std::string("model turn: ") + agent::StopReasonName(r.stop_reason));
  };
  observer.on_transcript = [&](const nlohmann::json& record) { transcript_.Write(record); };
  // Before the call runs: its event (the runner's) already counts it.
  observer.on_tool_call = [&](int, const agent::ToolUseBlock&) { reporter_.CountToolCall(); };

  std::vector<agent::Message> messages;
  messages.push_back(agent::Message{agent::Role::kUser, {agent::TextBlock{start_->prompt}}});
  agent::LoopOutcome outcome = agent::RunLoop(
      **provider, messages, LoopOptionsFor(*start_, policy_.workdir, std::move(*tool_defs)),
      *runner, observer);
  provider->reset();
  sandbox::KillAllDescendants();
  if (tools_ready && !tools_ready->ok()) {
    return Fail({"sandbox", tools_ready->ToString(), kExitSandbox});
  }
  if (parent_gone_) return kExitParentGone;
  if (outcome.stop == agent::LoopStop::kModelError) {
    std::string why = outcome.error ? outcome.error->ToString() : "unknown model error";
    // The parent names a failed task's turns and tool calls in its error text, counted from the
    // events (the message names none: they were said twice). A failed call sends no event: this
    // one makes the count include its turn.
    SendEvent(outcome.turns, "", "model error");
    return Fail({"model", why, kExitModel});
  }
  ipc::ResultMessage result = ResultOf(outcome, *runner);
  if (Status st = reporter_.Result(result); !st.ok()) {
    std::fprintf(stderr, "forkbox-child: could not send the result: %s\n", st.ToString().c_str());
    return kExitParentGone;
  }
  return kExitOk;
}

ipc::ResultMessage Task::ResultOf(agent::LoopOutcome& outcome, const ChildToolRunner& runner) {
  ipc::ResultMessage result;
  result.summary = std::move(outcome.final_text);
  result.stats.turns = outcome.turns;
  // Capped at the frame's bound: a model's absurd usage must not cost the task its result.
  const auto capped = [](int64_t n) { return std::min(n, ipc::kMaxReportedCount); };
  const agent::Usage& u = outcome.usage;
  result.stats.input_tokens = capped(
      SaturatingAdd(u.input_tokens, u.cache_read_input_tokens + u.cache_creation_input_tokens));
  result.stats.output_tokens = capped(u.output_tokens);
  result.stats.cache_read_input_tokens = capped(u.cache_read_input_tokens);
  result.stats.cache_creation_input_tokens = capped(u.cache_creation_input_tokens);
  result.stats.tool_calls = outcome.tool_calls;
  result.stats.tool_output_bytes = runner.tool_output_bytes();
  result.stats.elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_time_).count();
  result.stats.stop_reason = agent::LoopStopName(outcome.stop);
  transcript_.Write({{"type", "result"},
                     {"summary", result.summary},
                     {"stop_reason", result.stats.stop_reason},
                     {"turns", result.stats.turns},
                     {"tool_calls", result.stats.tool_calls},
                     {"tool_output_bytes", result.stats.tool_output_bytes},
                     {"elapsed_ms", result.stats.elapsed_ms}});
  return result;
}

// A start-up step failed with errno: says which, before any task is read.
int BadStart(const char* step) {
  std::fprintf(stderr, "forkbox-child: %s\n", Status::FromErrno(errno, step).ToString().c_str());
  return kExitBadStart;
}

}  // namespace

int ChildMain(int argc, char** argv) {
  if (IsSpawner(argc, argv)) return SpawnerMain(argc, argv);
  // A dead parent must surface as EPIPE on fd 4, and a transcript past `ulimit -f` as EFBIG,
  // not kill us before we clean up.
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
  // Die with the parent; keep /proc/<pid>/{mem,environ} away from the tools even with the
  // sandbox off (the API key lives in this process's memory). Without either, no task runs.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return BadStart("prctl(PR_SET_PDEATHSIG)");
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return BadStart("prctl(PR_SET_DUMPABLE, 0)");
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
