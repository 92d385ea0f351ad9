#include "parent/task_runner.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <deque>
#include <optional>

#include "base/format.h"
#include "base/process.h"
#include "base/unique_fd.h"
#include "ipc/child_exit.h"
#include "ipc/frame.h"
#include "parent/child_launcher.h"
#include "parent/child_supervisor.h"
#include "parent/event_loop.h"
#include "parent/signals.h"
#include "parent/transcripts.h"

namespace forkbox::parent {
namespace {

const char* StopName(KillReason reason) {
  switch (reason) {
    case KillReason::kTimeout:
      return "timeout";
    case KillReason::kCancelled:
      return "cancelled";
    case KillReason::kNone:
    case KillReason::kError:
      break;
  }
  return "error";
}

std::string AgentTypeOf(const TaskSpec& spec) {
  return spec.agent.name.empty() ? std::string(agent::kDefaultAgentType) : spec.agent.name;
}

TaskOutcome FailedOutcome(const TaskSpec& spec, KillReason reason, const std::string& why) {
  TaskOutcome o;
  o.record.number = spec.number;
  o.record.description = spec.description;
  o.record.agent_type = AgentTypeOf(spec);
  o.record.stats.stop_reason = StopName(reason);
  o.content = (reason == KillReason::kCancelled ? "task cancelled: " : "task failed: ") + why;
  o.record.error = o.content;
  return o;
}

// " after 2 turns and 1 tool call": a task's counts, which the parent says once in its text (the
// child's text names none: they were said twice).
std::string AfterCounts(int64_t turns, int64_t tool_calls) {
  std::string text = " after " + Plural(turns, "turn");
  if (tool_calls > 0) text += " and " + Plural(tool_calls, "tool call");
  return text;
}

// A result's summary within the limit the parent sent (the child's own cut adds a note; a longer
// one is cut here too). Cut rather than refused: the summary is the whole task's product, and
// its beginning still serves the model.
TaskOutcome PresentResult(const TaskSpec& spec, ChildReport report, int64_t max_summary_bytes,
                          Progress& progress) {
  TaskOutcome o;
  o.ok = true;
  o.record.number = spec.number;
  o.record.description = spec.description;
  o.record.agent_type = AgentTypeOf(spec);
  o.record.ok = true;
  o.record.stats = report.result->stats;
  o.record.stats.elapsed_ms = report.elapsed_ms;
  o.record.summary_bytes = static_cast<int64_t>(report.result->summary.size());
  const ipc::ResultStats& s = report.result->stats;
  o.content = ipc::EnforceCut(std::move(report.result->summary),
                              static_cast<size_t>(max_summary_bytes), "summary");
  if (o.content.empty()) o.content = "(the subagent returned an empty summary)";
  if (s.stop_reason != "completed" && !s.stop_reason.empty()) {
    o.content += "\n[subagent stopped: " + s.stop_reason + AfterCounts(s.turns, s.tool_calls) + "]";
  }
  // Not a failure: the result is whole, but a process that hung after it may have left
  // something unfinished, so both the model and the user are told.
  std::string late;
  if (!report.killed_after_end.empty()) {
    late = "; killed after its result: it " + report.killed_after_end;
    o.content += "\n[note: the subagent's process was killed after it delivered this result: it " +
                 report.killed_after_end + "]";
  }
  if (s.stop_reason == "context_window") {
    // Its context overflowed: whatever it summarised is partial, and the model must know.
    o.ok = o.record.ok = false;
    o.record.error = o.content;
  }
  progress.TaskFinished(spec.number,
                        "done: " + Plural(s.turns, "turn") + ", " +
                            FormatSeconds(report.elapsed_ms) + ", " +
                            HumanBytes(s.tool_output_bytes) + " of tool output kept out" + late,
                        o.record);
  return o;
}

// "exited with code 4 (model error)": the child's exit code says why when no frame did.
std::string DescribeChildExit(const std::optional<int>& wait_status) {
  if (!wait_status) return "unknown";
  std::string text = DescribeWaitStatus(*wait_status);
  if (WIFEXITED(*wait_status)) {
    if (const char* meaning = ipc::ChildExitMeaning(WEXITSTATUS(*wait_status))) {
      text += std::string(" (") + meaning + ")";
    }
  }
  return text;
}

TaskOutcome PresentFailure(const TaskSpec& spec, const ChildReport& report, Progress& progress) {
  const std::string exit_text = DescribeChildExit(report.wait_status);
  std::string why;
  KillReason reason = report.killed;
  if (reason != KillReason::kNone) {
    // Protocol errors may quote the child's bytes: bounded as its error messages are.
    why = ipc::EnforceCut(report.kill_text, ipc::kMaxErrorMessageBytes, "error message");
    if (reason != KillReason::kCancelled) why += "; child " + exit_text;
  } else if (report.error) {
    why = report.error->code + ": " +
          ipc::EnforceCut(report.error->message, ipc::kMaxErrorMessageBytes, "error message");
    if (!report.killed_after_end.empty())
      why += "; child killed after it: it " + report.killed_after_end;
  } else {
    why = "child " + exit_text + " without a result";
  }
  // The counts, from the events, said here once for every failure (a child's message names none).
  if (report.last_turn > 0) why += AfterCounts(report.last_turn, report.tool_calls);
  TaskOutcome o = FailedOutcome(spec, reason, why);
  o.record.stats.turns = report.last_turn;
  o.record.stats.input_tokens = report.input_tokens;
  o.record.stats.output_tokens = report.output_tokens;
  o.record.stats.tool_calls = report.tool_calls;
  o.record.stats.elapsed_ms = report.elapsed_ms;
  progress.TaskFinished(spec.number, o.content, o.record);
  return o;
}

// What the model (the tool result) and the user (progress) are told about a finished child.
TaskOutcome Present(const TaskSpec& spec, ChildReport report, int64_t max_summary_bytes,
                    Progress& progress) {
  if (report.result && report.killed != KillReason::kError) {
    return PresentResult(spec, std::move(report), max_summary_bytes, progress);
  }
  return PresentFailure(spec, report, progress);
}

// Queueing, standby children, transcripts and start frames; the supervisor runs the children.
class Batch {
 public:
  Batch(const TaskConfig& config, const std::vector<TaskSpec>& specs, Progress& progress,
        EventLoop& loop, BlockedSignals& signals, Standby* standby)
      : config_(config),
        specs_(specs),
        progress_(progress),
        loop_(loop),
        standby_(standby),
        supervisor_(
            loop, signals,
            [this](size_t i, const ipc::EventMessage& ev) {
              progress_.TaskUpdate(specs_[i].number, ev);
            },
            [this](size_t i, ChildReport report) {
              result_.outcomes[i] = Present(specs_[i], std::move(report),
                                            config_.limits.max_summary_bytes, progress_);
            }) {
    result_.outcomes.resize(specs.size());
  }

  BatchResult Run() {
    for (size_t i = 0; i < specs_.size(); ++i) queue_.push_back(i);
    if (Status st = supervisor_.Start(); !st.ok()) {
      for (size_t i : queue_) FailWithoutStart(i, "event loop: " + st.ToString());
      return std::move(result_);
    }
    UniqueFd ticker = StartTicker();
    while (true) {
      while (!queue_.empty() && supervisor_.running() < static_cast<size_t>(config_.max_parallel) &&
             supervisor_.interrupt_signal() == 0) {
        size_t i = queue_.front();
        queue_.pop_front();
        StartTask(i);
      }
      progress_.SetQueued(static_cast<int64_t>(queue_.size()));
      RefillStandby();
      if (supervisor_.running() == 0) break;
      supervisor_.RunOnce();
    }
    if (ticker) loop_.Remove(ticker.get());
    progress_.SetQueued(0);
    for (size_t i : queue_) {
      result_.outcomes[i] =
          FailedOutcome(specs_[i], KillReason::kCancelled, "interrupted before it started");
    }
    result_.interrupt_signal = supervisor_.interrupt_signal();
    return std::move(result_);
  }

 private:
  void FailWithoutStart(size_t i, const std::string& why) {
    result_.outcomes[i] = FailedOutcome(specs_[i], KillReason::kError, why);
    progress_.TaskFinished(specs_[i].number, "failed: " + why, result_.outcomes[i].record);
  }

  // A standby child when one is waiting, else a new one (with the transcript, if any).
  Result<LaunchedChild> ChildFor(size_t i, ipc::StartMessage& start) {
    if (standby_ != nullptr) {
      std::string why;
      std::optional<LaunchedChild> child = standby_->Take(&why);
      if (!why.empty() && config_.provider.verbose) {
        progress_.Note("standby child unusable, starting children on demand: " + why);
      }
      if (child) return std::move(*child);
    }
    UniqueFd transcript;
    if (config_.transcript_dir_fd >= 0) {
      auto t =
          OpenTranscriptFile(config_.transcript_dir_fd, config_.transcript_dir, specs_[i].number);
      if (!t.ok()) return t.status();
      transcript = std::move(*t);
      start.transcript_fd = ipc::kChildTranscriptFd;
    }
    return LaunchChild(config_, transcript);
  }

  void StartTask(size_t i) {
    const TaskSpec& spec = specs_[i];
    progress_.TaskStarted(spec.number, AgentTypeOf(spec), spec.description, spec.tool_use_id);
    ipc::StartMessage start;
    start.prompt = spec.prompt;
    start.provider = config_.provider;
    start.limits = config_.limits;
    if (spec.max_tokens > 0) start.limits.max_tokens = spec.max_tokens;
    start.workdir = config_.workdir;
    start.sandbox = config_.sandbox;
    start.hints = config_.child_hints;
    if (!spec.agent.name.empty()) agent::ApplyAgentType(spec.agent, &start);
    Result<LaunchedChild> child = ChildFor(i, start);
    if (!child.ok()) return FailWithoutStart(i, child.status().ToString());
    auto frame = ipc::EncodeMessage(start);
    start.provider.api_key.clear();
    if (!frame.ok()) return FailWithoutStart(i, "start frame: " + frame.status().ToString());
    // An agent type's timeout only narrows the user's --task-timeout.
    const int64_t timeout_ms = spec.agent.timeout_ms > 0
                                   ? std::min(spec.agent.timeout_ms, config_.timeout_ms)
                                   : config_.timeout_ms;
    supervisor_.Add(i, std::move(*child), std::move(*frame), timeout_ms);
  }

  // A one-second timerfd in the loop that moves the live block's elapsed times; none without a
  // live block (or when it cannot be had: the block then moves with the events only).
  UniqueFd StartTicker() {
    if (!progress_.live_block()) return UniqueFd();
    UniqueFd fd(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    const itimerspec every_second = {{1, 0}, {1, 0}};
    if (!fd || timerfd_settime(fd.get(), 0, &every_second, nullptr) != 0) return UniqueFd();
    const int raw = fd.get();
    Status st = loop_.Add(raw, EPOLLIN, [this, raw](uint32_t) {
      uint64_t expirations;
      while (::read(raw, &expirations, sizeof(expirations)) > 0) {
      }
      progress_.Tick();
    });
    return st.ok() ? std::move(fd) : UniqueFd();
  }

  // After the starts (a fork must not delay a start frame): the next task finds a child waiting.
  void RefillStandby() {
    if (standby_ == nullptr || supervisor_.interrupt_signal() != 0) return;
    if (Status st = standby_->Refill(); !st.ok() && config_.provider.verbose) {
      progress_.Note("starting children on demand: " + st.ToString());
    }
  }

  const TaskConfig& config_;
  const std::vector<TaskSpec>& specs_;
  Progress& progress_;
  EventLoop& loop_;
  Standby* standby_;
  std::deque<size_t> queue_;
  BatchResult result_;
  ChildSupervisor supervisor_;  // Last: it calls back into the members above.
};

}  // namespace

BatchResult RunTasks(const TaskConfig& config, const std::vector<TaskSpec>& specs,
                     Progress& progress, Standby* standby) {
  auto fail_all = [&](KillReason reason, const std::string& why) {
    BatchResult failed;
    for (const auto& spec : specs) failed.outcomes.push_back(FailedOutcome(spec, reason, why));
    return failed;
  };
  auto signals = BlockedSignals::Create();
  if (!signals.ok()) return fail_all(KillReason::kError, signals.status().ToString());
  // A signal that arrived just before blocking is pending on the handler's flag: honour it.
  if (int sig = TakeInterrupt(); sig != 0) {
    BatchResult r = fail_all(KillReason::kCancelled, "interrupted before it started");
    r.interrupt_signal = sig;
    return r;
  }
  auto loop = EventLoop::Create();
  if (!loop.ok()) return fail_all(KillReason::kError, loop.status().ToString());
  Batch batch(config, specs, progress, *loop, *signals, standby);
  return batch.Run();
}

}  // namespace forkbox::parent
