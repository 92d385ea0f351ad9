#include "parent/task_runner.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <ctime>
#include <deque>
#include <memory>
#include <optional>

#include "ipc/frame.h"
#include "base/process.h"
#include "base/unique_fd.h"
#include "parent/child_launcher.h"
#include "parent/event_loop.h"
#include "parent/signals.h"

namespace forkbox::parent {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

std::string Seconds(int64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(ms) / 1000.0);
  return buf;
}

std::string Turns(int64_t turns) {
  return std::to_string(turns) + (turns == 1 ? " turn" : " turns");
}

// One running child.
struct Running {
  size_t index = 0;
  ChildProcess process;
  UniqueFd control;  // Write end of fd 3, non-blocking, until the start frame is written.
  std::string start_frame;
  size_t start_written = 0;
  UniqueFd report;  // Read end of fd 4, non-blocking.
  ipc::FrameDecoder decoder;
  Clock::time_point started;
  Clock::time_point deadline;
  int64_t last_turn = 0;
  std::optional<ipc::ResultMessage> result;
  std::optional<ipc::ErrorMessage> error;
  std::string failure;  // Set by the supervisor: protocol error, timeout, cancel.
  std::string stop_override;
  std::optional<int> wait_status;
  bool done = false;
};

class Batch {
 public:
  Batch(const TaskConfig& config, const std::vector<TaskSpec>& specs, Progress& progress,
        EventLoop& loop, BlockedSignals& signals, Standby* standby)
      : config_(config),
        specs_(specs),
        progress_(progress),
        loop_(loop),
        signals_(signals),
        standby_(standby) {
    result_.outcomes.resize(specs.size());
  }

  BatchResult Run() {
    for (size_t i = 0; i < specs_.size(); ++i) queue_.push_back(i);
    Status st = loop_.Add(signals_.fd(), EPOLLIN, [this](uint32_t) { OnSignal(); });
    if (!st.ok()) {
      for (size_t i : queue_) FailWithoutStart(i, "event loop: " + st.ToString());
      return std::move(result_);
    }
    while (true) {
      while (!queue_.empty() && running_.size() < static_cast<size_t>(config_.max_parallel) &&
             result_.interrupt_signal == 0) {
        size_t i = queue_.front();
        queue_.pop_front();
        StartTask(i);
      }
      RefillStandby();
      if (running_.empty()) break;
      Status s = loop_.RunOnce(NextTimeoutMs());
      if (!s.ok()) {
        // epoll itself broke: nothing can be supervised any more; kill everything.
        for (auto& r : running_) Fail(*r, "parent event loop failed: " + s.ToString(), "error");
      }
      CheckDeadlines();
      Reap();
    }
    loop_.Remove(signals_.fd());
    for (size_t i : queue_) {
      TaskOutcome& o = result_.outcomes[i];
      o.record = BaseRecord(i);
      o.record.stop = "cancelled";
      o.content = "task cancelled: interrupted before it started";
      o.record.error = o.content;
    }
    return std::move(result_);
  }

 private:
  TaskRecord BaseRecord(size_t i) const {
    TaskRecord r;
    r.number = specs_[i].number;
    r.description = specs_[i].description;
    r.agent_type = specs_[i].agent.name.empty() ? agent::kDefaultAgentType : specs_[i].agent.name;
    return r;
  }

  void FailWithoutStart(size_t i, const std::string& why) {
    TaskOutcome& o = result_.outcomes[i];
    o.ok = false;
    o.content = "task failed: " + why;
    o.record = BaseRecord(i);
    o.record.stop = "error";
    o.record.error = o.content;
    progress_.TaskFinished(specs_[i].number, "failed: " + why);
  }

  Result<UniqueFd> OpenTranscript(size_t i) {
    char stamp[32];
    std::time_t now = std::time(nullptr);
    struct tm tm_utc;
    gmtime_r(&now, &tm_utc);
    std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm_utc);
    std::string path = config_.transcript_dir + "/task-" + std::to_string(specs_[i].number) + "-" +
                       stamp + ".jsonl";
    int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return Status::FromErrno(errno, "open transcript " + path);
    return UniqueFd(fd);
  }

  void StartTask(size_t i) {
    const TaskSpec& spec = specs_[i];
    progress_.TaskStarted(spec.number, BaseRecord(i).agent_type + ": " + spec.description);
    auto r = std::make_unique<Running>();
    r->index = i;
    r->started = Clock::now();
    const int64_t timeout_ms =
        spec.agent.timeout_ms > 0 ? spec.agent.timeout_ms : config_.timeout_ms;
    r->deadline = r->started + std::chrono::milliseconds(timeout_ms);

    ipc::StartMessage start;
    start.prompt = spec.prompt;
    start.provider = config_.provider;
    start.limits = config_.limits;
    start.workdir = config_.workdir;
    start.sandbox = config_.sandbox;
    if (!spec.agent.name.empty()) agent::ApplyAgentType(spec.agent, &start);

    std::optional<LaunchedChild> child;
    if (standby_ != nullptr) {
      std::string why;
      child = standby_->Take(&why);
      if (!why.empty() && config_.verbose) {
        progress_.Note("standby child unusable, starting children on demand: " + why);
      }
    }
    if (!child) {
      UniqueFd transcript;
      if (!config_.transcript_dir.empty()) {
        auto t = OpenTranscript(i);
        if (!t.ok()) {
          FailWithoutStart(i, t.status().ToString());
          return;
        }
        transcript = std::move(*t);
        start.transcript_fd = kTranscriptChildFd;
      }
      auto launched = LaunchChild(config_, transcript);
      if (!launched.ok()) {
        FailWithoutStart(i, launched.status().ToString());
        return;
      }
      child = std::move(*launched);
    }
    auto frame = ipc::EncodeMessage(start);
    if (!frame.ok()) {
      FailWithoutStart(i, "start frame: " + frame.status().ToString());
      return;
    }
    r->process = std::move(child->process);
    r->control = std::move(child->control);
    r->report = std::move(child->report);
    r->start_frame = std::move(*frame);

    Running* raw = r.get();
    Status st = SetNonBlocking(raw->control.get(), true);
    if (st.ok()) st = SetNonBlocking(raw->report.get(), true);
    if (st.ok()) {
      st = loop_.Add(raw->control.get(), EPOLLOUT, [this, raw](uint32_t) { OnWritable(*raw); });
    }
    if (st.ok()) {
      st = loop_.Add(raw->report.get(), EPOLLIN, [this, raw](uint32_t) { OnReadable(*raw); });
    }
    if (st.ok()) {
      st = loop_.Add(raw->process.pidfd(), EPOLLIN, [this, raw](uint32_t) { OnExit(*raw); });
    }
    running_.push_back(std::move(r));
    if (!st.ok()) {
      Fail(*raw, "supervision setup failed: " + st.ToString(), "error");
      return;
    }
    OnWritable(*raw);  // Usually the whole frame fits the pipe: the child starts right away.
  }

  // After the starts (a fork must not delay a start frame): the next task finds a child waiting.
  void RefillStandby() {
    if (standby_ == nullptr || result_.interrupt_signal != 0) return;
    if (Status st = standby_->Refill(); !st.ok() && config_.verbose) {
      progress_.Note("starting children on demand: " + st.ToString());
    }
  }

  void CloseControl(Running& r) {
    if (!r.control) return;
    loop_.Remove(r.control.get());
    r.control.reset();
  }

  void CloseReport(Running& r) {
    if (!r.report) return;
    loop_.Remove(r.report.get());
    r.report.reset();
  }

  void OnWritable(Running& r) {
    while (r.start_written < r.start_frame.size()) {
      ssize_t n = write(r.control.get(), r.start_frame.data() + r.start_written,
                        r.start_frame.size() - r.start_written);
      if (n > 0) {
        r.start_written += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      // EPIPE: the child is gone before it read its start frame; its exit status tells why.
      break;
    }
    CloseControl(r);
    std::string().swap(r.start_frame);  // Holds the key: drop it as soon as it is sent.
  }

  // Reads whatever is available; returns at EAGAIN or EOF.
  void DrainReport(Running& r) {
    char buf[65536];
    while (r.report) {
      ssize_t n = read(r.report.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n < 0) {
        Fail(r, Status::FromErrno(errno, "read from child").ToString(), "error");
        return;
      }
      if (n == 0) {
        if (Status st = r.decoder.Finish(); !st.ok() && r.failure.empty()) {
          r.failure = "protocol error from child: " + st.message();
          r.stop_override = "error";
        }
        CloseReport(r);
        return;
      }
      if (Status st = r.decoder.Feed(std::string_view(buf, static_cast<size_t>(n))); !st.ok()) {
        Fail(r, "protocol error from child: " + st.message(), "error");
        return;
      }
      while (true) {
        auto next = r.decoder.Next();
        if (!next.ok()) {
          Fail(r, "protocol error from child: " + next.status().message(), "error");
          return;
        }
        if (!next->has_value()) break;
        if (!Handle(r, std::move(**next))) return;
      }
    }
  }

  // Returns false when the message was a protocol violation (the child is then killed).
  bool Handle(Running& r, ipc::Message message) {
    if (auto* ev = std::get_if<ipc::EventMessage>(&message)) {
      if (r.result || r.error) {
        Fail(r, "protocol error from child: event after the final message", "error");
        return false;
      }
      r.last_turn = std::max(r.last_turn, ev->turn);
      progress_.TaskUpdate(specs_[r.index].number, ev->turn, ev->tool, ev->detail);
      return true;
    }
    if (r.result || r.error) {
      Fail(r, "protocol error from child: more than one final message", "error");
      return false;
    }
    if (auto* res = std::get_if<ipc::ResultMessage>(&message)) {
      r.result = std::move(*res);
      return true;
    }
    if (auto* err = std::get_if<ipc::ErrorMessage>(&message)) {
      r.error = std::move(*err);
      return true;
    }
    Fail(r,
         std::string("protocol error from child: unexpected ") + ipc::MessageTypeName(message) +
             " message",
         "error");
    return false;
  }

  void OnReadable(Running& r) { DrainReport(r); }

  void OnExit(Running& r) {
    // A zombie keeps its pid, so killing its group now cannot hit an unrelated process.
    (void)r.process.Signal(SIGKILL);
    auto waited = r.process.TryWait();
    if (!waited.ok()) {
      r.failure = "waiting for the child failed: " + waited.status().ToString();
      r.wait_status = 0;
    } else if (waited->has_value()) {
      r.wait_status = **waited;
    } else {
      return;  // Spurious wakeup.
    }
    loop_.Remove(r.process.pidfd());
    CloseControl(r);
    DrainReport(r);  // What it wrote before it died.
    CloseReport(r);  // A leftover descendant holding fd 4 must not keep us waiting.
    Finish(r);
  }

  // Kills the child; the pidfd event then finishes the task.
  void Fail(Running& r, const std::string& why, const std::string& stop) {
    if (r.failure.empty()) {
      r.failure = why;
      r.stop_override = stop;
    }
    CloseControl(r);
    CloseReport(r);
    (void)r.process.Signal(SIGKILL);
  }

  void Finish(Running& r) {
    r.done = true;
    TaskOutcome& o = result_.outcomes[r.index];
    TaskRecord& rec = o.record;
    rec = BaseRecord(r.index);
    rec.elapsed_ms = MsSince(r.started);
    rec.turns = r.last_turn;
    std::string exit_text = r.wait_status ? DescribeWaitStatus(*r.wait_status) : "unknown";
    if (r.result && r.stop_override != "error") {
      const ipc::ResultStats& s = r.result->stats;
      rec.ok = true;
      rec.turns = s.turns;
      rec.input_tokens = s.input_tokens;
      rec.output_tokens = s.output_tokens;
      rec.tool_calls = s.tool_calls;
      rec.tool_output_bytes = s.tool_output_bytes;
      rec.stop = s.stop_reason;
      rec.summary_bytes = static_cast<int64_t>(r.result->summary.size());
      o.ok = true;
      o.content = r.result->summary;
      if (o.content.empty()) o.content = "(the subagent returned an empty summary)";
      if (s.stop_reason != "completed" && !s.stop_reason.empty()) {
        o.content += "\n[subagent stopped: " + s.stop_reason + " after " + Turns(s.turns) + "]";
      }
      progress_.TaskFinished(specs_[r.index].number,
                             "done: " + Turns(s.turns) + ", " + Seconds(rec.elapsed_ms) + ", " +
                                 HumanBytes(s.tool_output_bytes) + " of tool output kept out");
      return;
    }
    std::string why;
    if (!r.failure.empty()) {
      why = r.failure;
      if (r.stop_override != "cancelled") why += "; child " + exit_text;
      rec.stop = r.stop_override.empty() ? "error" : r.stop_override;
    } else if (r.error) {
      why = r.error->code + ": " + r.error->message;
      rec.stop = "error";
    } else {
      why = "child " + exit_text + " without a result";
      rec.stop = "error";
    }
    why += " after " + Turns(rec.turns);
    o.ok = false;
    o.content = (rec.stop == "cancelled" ? "task cancelled: " : "task failed: ") + why;
    rec.error = o.content;
    progress_.TaskFinished(specs_[r.index].number, o.content);
  }

  int NextTimeoutMs() const {
    auto now = Clock::now();
    auto nearest = Clock::time_point::max();
    for (const auto& r : running_) {
      if (r->failure.empty()) nearest = std::min(nearest, r->deadline);
    }
    if (nearest == Clock::time_point::max()) return -1;
    if (nearest <= now) return 0;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(nearest - now).count() + 1;
    return static_cast<int>(std::min<int64_t>(ms, 60'000));
  }

  void CheckDeadlines() {
    auto now = Clock::now();
    for (auto& r : running_) {
      if (!r->done && r->failure.empty() && now >= r->deadline) {
        const agent::AgentType& type = specs_[r->index].agent;
        std::string limit = type.timeout_ms > 0 ? Seconds(type.timeout_ms) + " (the " + type.name +
                                                      " agent's timeout)"
                                                : Seconds(config_.timeout_ms) + " (--task-timeout)";
        Fail(*r, "timed out after " + limit + "; killed", "timeout");
      }
    }
  }

  void Reap() {
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [](const std::unique_ptr<Running>& r) { return r->done; }),
                   running_.end());
  }

  void OnSignal() {
    int sig;
    while ((sig = signals_.Read()) != 0) {
      if (result_.interrupt_signal == 0) result_.interrupt_signal = sig;
    }
    if (result_.interrupt_signal == 0) return;
    std::string why = std::string("interrupted by ") +
                      (result_.interrupt_signal == SIGINT ? "Ctrl-C" : "SIGTERM");
    for (auto& r : running_) {
      if (!r->done) Fail(*r, why, "cancelled");
    }
  }

  const TaskConfig& config_;
  const std::vector<TaskSpec>& specs_;
  Progress& progress_;
  EventLoop& loop_;
  BlockedSignals& signals_;
  Standby* standby_;
  std::deque<size_t> queue_;
  std::vector<std::unique_ptr<Running>> running_;
  BatchResult result_;
};

}  // namespace

BatchResult RunTasks(const TaskConfig& config, const std::vector<TaskSpec>& specs,
                     Progress& progress, Standby* standby) {
  BatchResult failed;
  auto fail_all = [&](const std::string& why) {
    for (const auto& spec : specs) {
      TaskOutcome o;
      o.content = "task failed: " + why;
      o.record.number = spec.number;
      o.record.description = spec.description;
      o.record.stop = "error";
      o.record.error = o.content;
      failed.outcomes.push_back(std::move(o));
    }
    return std::move(failed);
  };
  auto signals = BlockedSignals::Create();
  if (!signals.ok()) return fail_all(signals.status().ToString());
  // A signal that arrived just before blocking is pending on the handler's flag: honour it.
  if (int sig = TakeInterrupt(); sig != 0) {
    BatchResult r = fail_all("interrupted before it started");
    for (auto& o : r.outcomes) o.record.stop = "cancelled";
    r.interrupt_signal = sig;
    return r;
  }
  auto loop = EventLoop::Create();
  if (!loop.ok()) return fail_all(loop.status().ToString());
  Batch batch(config, specs, progress, *loop, *signals, standby);
  return batch.Run();
}

}  // namespace forkbox::parent
