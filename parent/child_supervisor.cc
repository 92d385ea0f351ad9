#include "parent/child_supervisor.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "base/process.h"
#include "base/run_clock.h"
#include "base/secret.h"
#include "base/unique_fd.h"

namespace forkbox::parent {
namespace {

using Clock = std::chrono::steady_clock;

// How long a child may take to exit after its final message or the end of its report pipe. It
// only has to clean up (its tools, its temp dir); one that stays alive longer is killed, so that
// it cannot hold the whole batch until --task-timeout.
constexpr auto kExitGrace = std::chrono::seconds(2);

}  // namespace

bool StartFrameWriter::WriteSome(int fd) {
  while (written_ < frame_.size()) {
    ssize_t n = ::write(fd, frame_.data() + written_, frame_.size() - written_);
    if (n > 0) {
      written_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return false;
    break;  // EPIPE: the child is gone before it read its start frame.
  }
  Wipe();
  return true;
}

void StartFrameWriter::Wipe() {
  WipeString(frame_);  // Keeps the (zeroed) storage until destruction.
}

struct ChildSupervisor::Child {
  size_t id = 0;
  ChildProcess process;
  UniqueFd control;  // Write end of fd 3, non-blocking, until the start frame is written.
  std::unique_ptr<StartFrameWriter> start_frame;
  UniqueFd report;  // Read end of fd 4, non-blocking.
  ipc::FrameDecoder decoder;
  Clock::time_point started;  // For elapsed_ms, which counts a stop too.
  // On the supervisor's RunClock: a stop of the session (Ctrl-Z) does not count.
  RunClock::Duration deadline{};
  int64_t timeout_ms = 0;
  RunClock::Duration exit_deadline = RunClock::Duration::max();  // Armed by ArmExitGrace.
  ChildReport out;
  bool done = false;
};

ChildSupervisor::ChildSupervisor(EventLoop& loop, BlockedSignals& signals, EventHandler on_event,
                                 ExitHandler on_exit)
    : loop_(loop),
      signals_(signals),
      on_event_(std::move(on_event)),
      on_exit_(std::move(on_exit)) {}

ChildSupervisor::~ChildSupervisor() {
  if (watching_signals_) loop_.Remove(signals_.fd());
  for (auto& c : running_) {
    CloseControl(*c);
    CloseReport(*c);
    if (!c->done) loop_.Remove(c->process.pidfd());
  }
  // ChildProcess kills and reaps in its destructor.
}

Status ChildSupervisor::Start() {
  FORKBOX_RETURN_IF_ERROR(loop_.Add(signals_.fd(), EPOLLIN, [this](uint32_t) { OnSignal(); }));
  watching_signals_ = true;
  return Status::Ok();
}

void ChildSupervisor::Add(size_t id, LaunchedChild child, std::string start_frame,
                          int64_t timeout_ms) {
  auto owned = std::make_unique<Child>();
  Child& c = *owned;
  c.id = id;
  c.started = Clock::now();
  c.timeout_ms = timeout_ms;
  c.deadline = clock_.Now() + std::chrono::milliseconds(timeout_ms);
  c.process = std::move(child.process);
  c.control = std::move(child.control);
  c.report = std::move(child.report);
  c.start_frame = std::make_unique<StartFrameWriter>(std::move(start_frame));
  running_.push_back(std::move(owned));
  Status st = SetNonBlocking(c.control.get(), true);
  if (st.ok()) st = SetNonBlocking(c.report.get(), true);
  if (st.ok()) st = loop_.Add(c.control.get(), EPOLLOUT, [this, &c](uint32_t) { OnWritable(c); });
  if (st.ok()) st = loop_.Add(c.report.get(), EPOLLIN, [this, &c](uint32_t) { DrainReport(c); });
  if (st.ok()) {
    st = loop_.Add(c.process.pidfd(), EPOLLIN, [this, &c](uint32_t) { OnExit(c); });
    if (!st.ok()) {
      // No exit event will come: kill and reap right here.
      Kill(c, KillReason::kError, "supervision setup failed: " + st.ToString());
      Result<int> status = c.process.Wait();
      c.out.wait_status = status.ok() ? std::optional<int>(*status) : std::nullopt;
      c.done = true;
      on_exit_(c.id, std::move(c.out));
      return;
    }
  }
  if (!st.ok()) {
    Kill(c, KillReason::kError, "supervision setup failed: " + st.ToString());
    return;
  }
  OnWritable(c);  // Usually the whole frame fits the pipe: the child starts right away.
}

void ChildSupervisor::RunOnce() {
  TakeRecordedInterrupt();
  Status s = loop_.RunOnce(NextTimeoutMs());
  if (!s.ok()) {
    // epoll itself broke: nothing can be supervised any more; kill everything.
    for (auto& c : running_)
      Kill(*c, KillReason::kError, "parent event loop failed: " + s.ToString());
  }
  CheckDeadlines();
  TakeRecordedInterrupt();
  std::erase_if(running_, [](const std::unique_ptr<Child>& c) { return c->done; });
}

void ChildSupervisor::CloseControl(Child& c) {
  if (c.start_frame) c.start_frame->Wipe();
  if (!c.control) return;
  loop_.Remove(c.control.get());
  c.control.reset();
}

void ChildSupervisor::CloseReport(Child& c) {
  if (!c.report) return;
  loop_.Remove(c.report.get());
  c.report.reset();
}

void ChildSupervisor::OnWritable(Child& c) {
  if (c.control && c.start_frame->WriteSome(c.control.get())) CloseControl(c);
}

// Reads whatever is available; returns at EAGAIN or EOF.
void ChildSupervisor::DrainReport(Child& c) {
  char buf[65536];
  while (c.report) {
    ssize_t n = ::read(c.report.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n < 0)
      return Kill(c, KillReason::kError, Status::FromErrno(errno, "read from child").ToString());
    if (n == 0) {
      if (Status st = c.decoder.Finish(); !st.ok() && c.out.killed == KillReason::kNone) {
        c.out.killed = KillReason::kError;
        c.out.kill_text = "protocol error from child: " + st.message();
      }
      ArmExitGrace(c);
      return CloseReport(c);
    }
    if (Status st = c.decoder.Feed(std::string_view(buf, static_cast<size_t>(n))); !st.ok()) {
      return Kill(c, KillReason::kError, "protocol error from child: " + st.message());
    }
    while (true) {
      auto next = c.decoder.Next();
      if (!next.ok()) {
        return Kill(c, KillReason::kError, "protocol error from child: " + next.status().message());
      }
      if (!next->has_value()) break;
      if (!Handle(c, std::move(**next))) return;
    }
  }
}

// The protocol: any number of events, then exactly one result or error frame. Returns false on
// a violation (the child is then killed).
bool ChildSupervisor::Handle(Child& c, ipc::Message message) {
  const bool final_seen = c.out.result || c.out.error;
  if (auto* ev = std::get_if<ipc::EventMessage>(&message)) {
    if (final_seen) {
      Kill(c, KillReason::kError, "protocol error from child: event after the final message");
      return false;
    }
    c.out.last_turn = std::max(c.out.last_turn, ev->turn);
    c.out.input_tokens = std::max(c.out.input_tokens, ev->input_tokens);
    c.out.output_tokens = std::max(c.out.output_tokens, ev->output_tokens);
    c.out.tool_calls = std::max(c.out.tool_calls, ev->tool_calls);
    on_event_(c.id, *ev);
    return true;
  }
  if (final_seen) {
    Kill(c, KillReason::kError, "protocol error from child: more than one final message");
    return false;
  }
  if (auto* res = std::get_if<ipc::ResultMessage>(&message)) {
    c.out.result = std::move(*res);
    ArmExitGrace(c);
    return true;
  }
  if (auto* err = std::get_if<ipc::ErrorMessage>(&message)) {
    c.out.error = std::move(*err);
    ArmExitGrace(c);
    return true;
  }
  Kill(c, KillReason::kError,
       std::string("protocol error from child: unexpected ") + ipc::MessageTypeName(message) +
           " message");
  return false;
}

void ChildSupervisor::OnExit(Child& c) {
  // A zombie keeps its pid, so killing its group now cannot hit an unrelated process.
  (void)c.process.Signal(SIGKILL);
  auto waited = c.process.TryWait();
  if (!waited.ok()) {
    if (c.out.killed == KillReason::kNone) c.out.killed = KillReason::kError;
    if (c.out.kill_text.empty()) {
      c.out.kill_text = "waiting for the child failed: " + waited.status().ToString();
    }
  } else if (waited->has_value()) {
    c.out.wait_status = **waited;
  } else {
    return;  // Spurious wakeup.
  }
  loop_.Remove(c.process.pidfd());
  CloseControl(c);
  DrainReport(c);  // What it wrote before it died.
  CloseReport(c);  // A leftover descendant holding fd 4 must not keep us waiting.
  c.done = true;
  c.out.elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.started).count();
  on_exit_(c.id, std::move(c.out));
}

// Kills the child; the pidfd event then reports it. The first reason wins.
void ChildSupervisor::Kill(Child& c, KillReason reason, const std::string& why) {
  if (c.out.killed == KillReason::kNone) {
    c.out.killed = reason;
    c.out.kill_text = why;
  }
  CloseControl(c);
  CloseReport(c);
  (void)c.process.Signal(SIGKILL);
}

void ChildSupervisor::ArmExitGrace(Child& c) {
  c.exit_deadline = std::min<RunClock::Duration>(c.exit_deadline, clock_.Now() + kExitGrace);
}

// The child reported its end (or closed its report pipe) but did not exit within kExitGrace.
void ChildSupervisor::KillLingering(Child& c) {
  c.exit_deadline = RunClock::Duration::max();  // Once: the pidfd event reports the kill.
  const std::string late =
      "did not exit within " + FormatSeconds(std::chrono::milliseconds(kExitGrace).count());
  if (c.out.result || c.out.error) {
    // What it reported stands; only the process goes, and the report says so.
    c.out.killed_after_end = late;
    c.deadline = RunClock::Duration::max();
    CloseControl(c);
    CloseReport(c);
    (void)c.process.Signal(SIGKILL);
    return;
  }
  Kill(c, KillReason::kError, "child closed its report pipe without a result and " + late);
}

int ChildSupervisor::NextTimeoutMs() {
  auto nearest = RunClock::Duration::max();
  for (const auto& c : running_) {
    if (c->done) continue;
    nearest = std::min(nearest, c->exit_deadline);
    if (c->out.killed == KillReason::kNone) nearest = std::min(nearest, c->deadline);
  }
  return nearest == RunClock::Duration::max() ? -1 : clock_.WaitMs(nearest);
}

void ChildSupervisor::CheckDeadlines() {
  const RunClock::Duration now = clock_.Now();
  for (auto& c : running_) {
    if (c->done) continue;
    if (now >= c->exit_deadline) {
      KillLingering(*c);
    } else if (c->out.killed == KillReason::kNone && now >= c->deadline) {
      Kill(*c, KillReason::kTimeout,
           "timed out after " + FormatSeconds(c->timeout_ms) + " (--task-timeout); killed");
    }
  }
}

void ChildSupervisor::OnSignal() {
  for (int sig; (sig = signals_.Read()) != 0;) Interrupt(sig);
}

// The handler is blocked while the batch runs: the flag holds only what the session recorded.
void ChildSupervisor::TakeRecordedInterrupt() {
  if (InterruptPending()) Interrupt(TakeInterrupt());
}

void ChildSupervisor::Interrupt(int sig) {
  if (interrupt_signal_ != 0) return;
  interrupt_signal_ = sig;
  const std::string why = std::string("interrupted by ") + SignalName(interrupt_signal_);
  for (auto& c : running_) {
    if (!c->done) Kill(*c, KillReason::kCancelled, why);
  }
}

}  // namespace forkbox::parent
