// The parent's ToolRunner: base tools run one by one under the sandbox (agent::RunBaseTool);
// consecutive `task` calls run in parallel as one batch (parent/task_runner.h). Results come back
// in call order. An interrupt (SIGINT/SIGTERM) ends Run after the running tasks were killed and
// reaped: calls not finished are answered as interrupted and interrupt_signal() names the signal,
// so agent::RunLoop stops with LoopStop::kInterrupted.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "agent/loop.h"
#include "agent/tools.h"
#include "parent/progress.h"
#include "parent/signals.h"
#include "parent/stats.h"
#include "parent/task_runner.h"
#include "sandbox/git_surface.h"
#include "sandbox/guard_journal.h"

namespace forkbox::parent {

class ParentToolRunner : public agent::ToolRunner {
 public:
  // tasks: nullopt for the --no-subagents baseline (a `task` call is then an unknown tool).
  // The session runs in InterruptMode::kFlag: a base tool polls the flag, a task batch reads the
  // signals from a signalfd.
  // The standby children start with StartStandby and git's trust surface is recorded with
  // RecordGitSurface, not here. `journal` (may be null) keeps the guard's record on disk, for the
  // next start should every forkbox process die at once (sandbox::GuardJournal); it outlives this.
  ParentToolRunner(agent::ToolContext context, std::optional<TaskConfig> tasks, Progress& progress,
                   SessionStats& stats, sandbox::GuardJournal* journal = nullptr);
  ~ParentToolRunner() override;  // Kills and reaps the standby children.
  // With tasks, tasks->standby > 0 and no transcripts: starts the standby children (once; later
  // calls do nothing), so a task does not wait for fork + exec + sandbox set-up. A one-shot run
  // calls it when its first model request is on the wire (the children's start-up must not
  // compete with that request for the CPU), an interactive one right away; a task batch calls it
  // too, in case neither did.
  void StartStandby();
  // With the sandbox on: records git's trust surface (once; later calls do nothing), which each
  // tool call and task batch then restores. It walks the workdir (nested repositories, five
  // levels), milliseconds in a built checkout, so a one-shot run calls it once its first model
  // request is on the wire and an interactive one right away; Run calls it first, so it always
  // comes before any tool. A record that fails (sandbox::GitSurfaceGuard::Take) leaves nothing
  // to put back: from then on every call but read_file is refused, and says why. So does a
  // workdir whose name leads elsewhere, at the record or at any later call that may change files.
  void RecordGitSurface();
  std::vector<agent::ToolResultBlock> Run(const std::vector<agent::ToolUseBlock>& calls,
                                          int turn) override;
  int interrupt_signal() const override { return interrupt_signal_; }

 private:
  // The guard's record to the journal, if any; a failure is noted once.
  void JournalGitSurface();
  // From now on only read_file runs, because of `why`; said on the progress line.
  void Unguard(const std::string& why);
  // Unguard once the workdir's name no longer leads to the directory guarded (moved or swapped
  // from outside): the guard's search for new surface goes by name (GitSurfaceGuard::InPlace).
  void CheckGitGuardInPlace();
  // Undoes what the calls [begin, end) left in git's trust surface and says so in the last result
  // and on the progress line.
  void GuardGitSurface(std::vector<agent::ToolResultBlock>& results, size_t end);
  // The children a command's leftovers must not be mistaken for: the standby children and the
  // spawner (started before confinement; killing it would leave every later task unstartable).
  std::vector<pid_t> OwnedChildren() const;
  void RunTaskBatch(const std::vector<agent::ToolUseBlock>& calls, size_t begin, size_t end,
                    std::vector<agent::ToolResultBlock>& results);

  agent::ToolContext context_;
  int interrupt_signal_ = 0;
  std::optional<TaskConfig> tasks_;
  std::unique_ptr<Standby> standby_;  // Refers to *tasks_: declared after it.
  bool standby_started_ = false;
  Progress& progress_;
  SessionStats& stats_;
  int next_task_number_ = 1;
  bool git_surface_recorded_ = false;
  std::optional<sandbox::GitSurfaceGuard> git_guard_;  // With the sandbox on: the record.
  std::string unguarded_;           // Why the record failed (with the sandbox on), else empty.
  sandbox::GuardJournal* journal_;  // May be null.
};

}  // namespace forkbox::parent
