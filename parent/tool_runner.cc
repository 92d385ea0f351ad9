#include "parent/tool_runner.h"

#include "agent/agent_types.h"
#include "base/file.h"
#include "base/utf8.h"
#include "ipc/messages.h"
#include "parent/agents_command.h"
#include "parent/child_launcher.h"
#include "parent/spawner.h"

namespace forkbox::parent {
namespace {

// Answers every call that has no result yet.
void AnswerInterrupted(const std::vector<agent::ToolUseBlock>& calls,
                       std::vector<agent::ToolResultBlock>& results) {
  for (size_t i = 0; i < calls.size(); ++i) {
    if (results[i].tool_use_id.empty()) {
      results[i] = {calls[i].id, "interrupted by the user; not run to completion", true};
    }
  }
}

std::string CallDetail(const agent::ToolUseBlock& call) {
  for (const char* key : {"command", "path"}) {
    auto it = call.input.find(key);
    if (it != call.input.end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

// Why a task call's prompt cannot start a task, for the model; empty when it can. Checked before
// any child starts, so that a prompt the start frame cannot carry is refused in plain words, with
// no task reported started.
std::string TaskPromptProblem(const nlohmann::json& input) {
  auto prompt = input.find("prompt");
  if (prompt == input.end() || !prompt->is_string() || prompt->get<std::string>().empty()) {
    return "task: invalid input: 'prompt' must be a non-empty string";
  }
  // As the start frame carries it: quotes, backslashes and control characters escaped.
  const size_t bytes =
      prompt->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  if (bytes - 2 <= ipc::kMaxTaskPromptBytes) return "";
  return "task: the prompt is too long: " + std::to_string(bytes - 2) +
         " bytes (as sent, escapes included), over the limit of " +
         std::to_string(ipc::kMaxTaskPromptBytes) + " bytes (" +
         std::to_string(ipc::kMaxTaskPromptBytes / 1024) +
         " KiB) a subagent's prompt may hold. No subagent was started. Write long material to a "
         "file in the working directory and give the subagent its path in a shorter prompt.";
}

}  // namespace

ParentToolRunner::ParentToolRunner(agent::ToolContext context, std::optional<TaskConfig> tasks,
                                   Progress& progress, SessionStats& stats,
                                   sandbox::GuardJournal* journal)
    : context_(std::move(context)),
      tasks_(std::move(tasks)),
      progress_(progress),
      stats_(stats),
      journal_(journal) {}

ParentToolRunner::~ParentToolRunner() = default;

std::vector<pid_t> ParentToolRunner::OwnedChildren() const {
  std::vector<pid_t> owned = standby_ ? standby_->waiting_pids() : std::vector<pid_t>{};
  if (tasks_ && tasks_->spawner != nullptr) owned.push_back(tasks_->spawner->pid());
  return owned;
}

void ParentToolRunner::RecordGitSurface() {
  if (git_surface_recorded_) return;
  git_surface_recorded_ = true;
  if (!context_.sandbox || !context_.sandbox->policy().enabled) return;
  const sandbox::Policy& policy = context_.sandbox->policy();
  // The tools write through the session's descriptor: the guard must watch that directory.
  std::optional<FileIdentity> workdir;
  if (context_.workdir_fd && *context_.workdir_fd) workdir = IdentityOf(context_.workdir_fd->get());
  Result<sandbox::GitSurfaceGuard> guard = sandbox::GitSurfaceGuard::Take(
      policy.workdir, policy.user_git_config, nullptr, policy.writable, workdir);
  if (guard.ok()) git_guard_.emplace(std::move(*guard));
  if (!guard.ok()) Unguard(guard.status().message());
  JournalGitSurface();
}

void ParentToolRunner::Unguard(const std::string& why) {
  unguarded_ = why;
  progress_.Note("git trust surface NOT guarded, so only read_file runs: " + why);
}

void ParentToolRunner::CheckGitGuardInPlace() {
  if (!git_guard_ || !unguarded_.empty()) return;
  if (Status st = git_guard_->InPlace(); !st.ok()) Unguard(st.message());
}

void ParentToolRunner::JournalGitSurface() {
  if (!git_guard_ || journal_ == nullptr || !journal_->active()) return;
  if (Status st = journal_->Write(*git_guard_); !st.ok()) {
    progress_.Note("git trust surface not journaled any more: " + st.message());
    journal_->Clear();  // No stale record for the next start to put back.
    journal_ = nullptr;
  }
}

void ParentToolRunner::StartStandby() {
  if (standby_started_) return;
  standby_started_ = true;
  if (!tasks_ || tasks_->standby <= 0 || tasks_->transcript_dir_fd >= 0) return;
  standby_ = std::make_unique<Standby>(*tasks_, static_cast<size_t>(tasks_->standby));
  if (Status st = standby_->Refill(); !st.ok() && tasks_->provider.verbose) {
    progress_.Note("starting children on demand: " + st.ToString());
  }
}

std::vector<agent::ToolResultBlock> ParentToolRunner::Run(
    const std::vector<agent::ToolUseBlock>& calls, int /*turn*/) {
  RecordGitSurface();
  std::vector<agent::ToolResultBlock> results(calls.size());
  interrupt_signal_ = TakeInterrupt();  // Ctrl-C after the model call's check.
  size_t i = 0;
  while (i < calls.size() && interrupt_signal_ == 0) {
    if (!agent::ChangesNoFile(calls[i].name)) CheckGitGuardInPlace();
    if (!unguarded_.empty() && !agent::ChangesNoFile(calls[i].name)) {
      results[i] = agent::ToolResultBlock{
          calls[i].id,
          "refused: " + calls[i].name + " may change files, and git's trust surface is not " +
              "guarded (" + unguarded_ + "), so nothing it left there could be undone",
          true};
      ++i;
      continue;
    }
    if (tasks_ && calls[i].name == "task") {
      size_t end = i;
      while (end < calls.size() && calls[end].name == "task") ++end;
      RunTaskBatch(calls, i, end, results);
      GuardGitSurface(results, end);
      i = end;
      continue;
    }
    const agent::ToolUseBlock& call = calls[i];
    progress_.Note(call.name + ": " + ipc::MakeEventDetail(CallDetail(call)));
    agent::ToolOutput out = agent::RunBaseTool(call, context_);
    // Nothing the command started outlives it, detached daemons included (we are a subreaper).
    if (sandbox::KillOrphans(OwnedChildren()) < 0) {
      const char* why = sandbox::KillFailureText(errno);
      progress_.Note("processes " + call.name + " left may still run: " + why);
    }
    ++stats_.parent_tool_calls;
    results[i] = agent::ToolResultBlock{call.id, std::move(out.content), out.is_error};
    // Tools run one at a time and nothing of theirs outlives them: after one that changes no
    // file the surface is as the last guard left it, and the guard's two walks of the workdir
    // would only cost time (12 ms a call in the bench's checkout of 1,385 directories).
    if (!agent::ChangesNoFile(call.name)) GuardGitSurface(results, i + 1);
    ++i;
    interrupt_signal_ = TakeInterrupt();
  }
  if (interrupt_signal_ != 0) AnswerInterrupted(calls, results);
  return results;
}

void ParentToolRunner::GuardGitSurface(std::vector<agent::ToolResultBlock>& results, size_t end) {
  if (!git_guard_ || end == 0) return;
  std::vector<std::string> undone = git_guard_->Restore();
  JournalGitSurface();  // Restore's new record, if it changed.
  if (undone.empty()) return;
  std::string text =
      "\n[forkbox: this changed git's trust surface (hooks, config, commondir...: code git "
      "would run outside the sandbox) or the project's agent config (.forkbox/, .claude/: what "
      "the next session and Claude Code trust; only the user edits them); undone:";
  for (std::string& line : undone) {
    MakeValidUtf8(line);
    text += "\n  " + line;
    progress_.Note("git trust surface: " + ipc::MakeEventDetail(line));
  }
  agent::ToolResultBlock& last = results[end - 1];
  if (!last.tool_use_id.empty()) last.content += text + "]";
}

void ParentToolRunner::RunTaskBatch(const std::vector<agent::ToolUseBlock>& calls, size_t begin,
                                    size_t end, std::vector<agent::ToolResultBlock>& results) {
  std::vector<TaskSpec> specs;
  std::vector<size_t> where;  // specs[k] answers calls[where[k]].
  for (size_t i = begin; i < end; ++i) {
    const auto& input = calls[i].input;
    ++stats_.parent_tool_calls;
    if (std::string problem = TaskPromptProblem(input); !problem.empty()) {
      results[i] = agent::ToolResultBlock{calls[i].id, std::move(problem), true};
      continue;
    }
    Result<agent::AgentType> type = ResolveSubagentType(tasks_->agents, input);
    if (!type.ok()) {
      results[i] = agent::ToolResultBlock{calls[i].id, type.status().message(), true};
      continue;
    }
    TaskSpec spec;
    spec.agent = std::move(*type);
    spec.number = next_task_number_++;
    spec.prompt = input.at("prompt").get<std::string>();
    spec.tool_use_id = calls[i].id;
    auto description = input.find("description");
    if (description != input.end() && description->is_string()) {
      spec.description = ipc::MakeEventDetail(description->get<std::string>());
    }
    if (spec.description.empty()) spec.description = ipc::MakeEventDetail(spec.prompt);
    specs.push_back(std::move(spec));
    where.push_back(i);
  }
  if (specs.empty()) return;
  StartStandby();
  agent::TokenBudget* budget = tasks_->session_budget.get();
  if (budget != nullptr) {
    // Half of what is left, shared by the batch: the parent keeps room to answer afterwards.
    const int64_t share = budget->Remaining() / (2 * static_cast<int64_t>(specs.size()));
    const int64_t cap = tasks_->limits.max_tokens;
    for (TaskSpec& spec : specs) {
      spec.max_tokens = budget->Reserve(cap > 0 ? std::min(cap, share) : share);
    }
  }
  BatchResult batch = RunTasks(*tasks_, specs, progress_, standby_.get());
  for (size_t k = 0; k < batch.outcomes.size(); ++k) {
    TaskOutcome& o = batch.outcomes[k];
    if (budget != nullptr) {
      const int64_t used = o.record.stats.input_tokens + o.record.stats.output_tokens;
      // A child that died without reporting may have spent all of its share.
      budget->Release(specs[k].max_tokens, o.ok || used > 0 ? used : specs[k].max_tokens);
    }
    // The start frame's model (ApplyAgentType), which prices the task's tokens.
    o.record.model = agent::ResolveAgentModel(specs[k].agent, tasks_->provider.name,
                                              tasks_->provider.model, nullptr);
    stats_.tasks.push_back(o.record);
    results[where[k]] = agent::ToolResultBlock{calls[where[k]].id, std::move(o.content), !o.ok};
  }
  if (batch.interrupt_signal != 0) interrupt_signal_ = batch.interrupt_signal;
}

}  // namespace forkbox::parent
