// Runs `task` calls: one fork+exec of forkbox-child per task (never a shell), the start frame over
// fd 3, events/result over fd 4, at most max_parallel at once, all supervised by ONE epoll loop
// over the report pipes, the pidfds and a signalfd (SIGINT/SIGTERM are blocked meanwhile).
//
// Every failure of a child (crash, kill, timeout, garbage or oversized frames, exit without a
// result, an error frame, a failed spawn) becomes an error outcome with a clear reason; the
// parent never crashes. Children run in their own session: a timeout or an interrupt SIGKILLs
// the child's process group (its pid namespace takes the rest) and reaps it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_types.h"
#include "agent/budget.h"
#include "ipc/messages.h"
#include "parent/progress.h"
#include "parent/stats.h"

namespace forkbox::parent {

class Spawner;  // parent/spawner.h

struct TaskConfig {
  std::string child_path;          // Absolute.
  ipc::ProviderSettings provider;  // Resolved; with verbose the child's stderr goes to ours.
  ipc::TaskLimits limits;
  std::string workdir;
  ipc::SandboxSettings sandbox;
  ipc::ChildSandboxHints child_hints;  // Sent in start and prepare frames (ipc/messages.h).
  int transcript_dir_fd = -1;          // Borrowed (parent/transcripts.h); -1: no transcripts.
  std::string transcript_dir;          // Its path, for messages.
  std::vector<std::string>
      child_env;  // The child's complete environment (sandbox::ForkboxProcessEnvironment).
  int max_parallel = 4;
  int64_t timeout_ms = 900'000;
  // Children kept started and sandboxed ahead of tasks (parent/child_launcher.h); 0: none.
  // Ignored with transcripts.
  int standby = 2;
  agent::AgentCatalog agents;  // What `subagent_type` may name (agent/agent_types.h).
  // --max-tokens-total (agent/budget.h), shared with the parent's loop; null: none.
  std::shared_ptr<agent::TokenBudget> session_budget;
  // Starts the children once the parent is confined (parent/spawner.h). Null: this process
  // spawns them itself (tests that run unconfined).
  const Spawner* spawner = nullptr;
};

struct TaskSpec {
  int number = 0;  // Session-wide task number (progress, transcript names).
  std::string description;
  std::string prompt;
  std::string tool_use_id;  // The parent's `task` call (the stream-json events' key).
  agent::AgentType agent;   // Empty name: the start frame's default (`general`).
  int64_t max_tokens = 0;   // > 0: this task's budget instead of limits.max_tokens.
};

struct TaskOutcome {
  bool ok = false;
  std::string content;  // The summary, or "task failed: <reason>".
  TaskRecord record;
};

struct BatchResult {
  std::vector<TaskOutcome> outcomes;  // In the order of the specs.
  int interrupt_signal = 0;           // Non-zero: SIGINT/SIGTERM cancelled the batch.
};

class Standby;  // parent/child_launcher.h

// `standby`: may be null; otherwise a task takes a waiting child (parent/child_launcher.h) and the
// batch starts replacements once its own tasks are started.
BatchResult RunTasks(const TaskConfig& config, const std::vector<TaskSpec>& specs,
                     Progress& progress, Standby* standby);

}  // namespace forkbox::parent
