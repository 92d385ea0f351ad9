// Supervises running forkbox-child processes in ONE epoll loop: each child's process (pidfd),
// its start-frame write (non-blocking, the frame wiped once written: it holds the API key), its
// report pipe (frame decoding and the protocol state machine: events, then exactly one result or
// error frame), its deadline (and a short one to exit once it reported its end or closed its
// report pipe; neither counts time the session was stopped), and SIGINT/SIGTERM through a
// signalfd. It knows nothing of what the
// model or the user are told: every child ends in exactly one ChildReport (parent/task_runner.cc
// presents it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/run_clock.h"
#include "base/status.h"
#include "ipc/frame.h"
#include "ipc/messages.h"
#include "parent/child_launcher.h"
#include "parent/event_loop.h"
#include "parent/signals.h"

namespace forkbox::parent {

// Why the supervisor ended a child itself, if it did.
enum class KillReason {
  kNone,       // The child ended on its own.
  kError,      // Protocol violation, a broken pipe or event loop.
  kTimeout,    // --task-timeout.
  kCancelled,  // SIGINT or SIGTERM.
};

// How one child ended: what it sent and what the supervisor saw.
struct ChildReport {
  std::optional<ipc::ResultMessage> result;
  std::optional<ipc::ErrorMessage> error;
  KillReason killed = KillReason::kNone;
  std::string kill_text;  // Why, with killed != kNone.
  // Non-empty: it reported its end but did not exit within the grace and was killed, after the
  // fact (what it reported stands; killed stays kNone): "did not exit within 2s".
  std::string killed_after_end;
  std::optional<int> wait_status;  // Unknown when waiting failed.
  int64_t last_turn = 0;           // From the events.
  int64_t input_tokens = 0;        // The usage of the last event (cumulative): a child that dies
  int64_t output_tokens = 0;       // before its result is charged what it spent.
  int64_t tool_calls = 0;          // From the events, as last_turn (cumulative).
  int64_t elapsed_ms = 0;
};

// A secret-bearing frame written to a non-blocking pipe in pieces; zeroed once written or
// dropped, so the key does not linger in freed heap memory.
class StartFrameWriter {
 public:
  explicit StartFrameWriter(std::string frame) : frame_(std::move(frame)) {}
  ~StartFrameWriter() { Wipe(); }
  StartFrameWriter(const StartFrameWriter&) = delete;
  StartFrameWriter& operator=(const StartFrameWriter&) = delete;
  // Writes what the pipe takes. True when finished: all written, or the pipe broke (the child's
  // exit status then says why). The frame is wiped when it returns true.
  bool WriteSome(int fd);
  void Wipe();
  // The frame's storage (for the test that it is zeroed): valid while this object lives.
  const char* storage() const { return frame_.data(); }

 private:
  std::string frame_;
  size_t written_ = 0;
};

class ChildSupervisor {
 public:
  using EventHandler = std::function<void(size_t id, const ipc::EventMessage&)>;
  using ExitHandler = std::function<void(size_t id, ChildReport report)>;

  ChildSupervisor(EventLoop& loop, BlockedSignals& signals, EventHandler on_event,
                  ExitHandler on_exit);
  ~ChildSupervisor();  // Kills and reaps whatever still runs.
  ChildSupervisor(const ChildSupervisor&) = delete;
  ChildSupervisor& operator=(const ChildSupervisor&) = delete;

  // Starts watching the signalfd.
  Status Start();
  // Supervises `child` under `id` until it exits (on_exit runs exactly once for it, possibly
  // before Add returns).
  void Add(size_t id, LaunchedChild child, std::string start_frame, int64_t timeout_ms);
  // Waits for the next event or deadline and handles it. A broken event loop kills every child.
  // An interrupt recorded on the handler's flag meanwhile (RecordStdoutFailure: an event could
  // not be written) is taken like a signal, before waiting and after.
  void RunOnce();
  size_t running() const { return running_.size(); }
  // The first SIGINT/SIGTERM/SIGHUP seen, or the flag's SIGPIPE (0: none); every child is then
  // killed.
  int interrupt_signal() const { return interrupt_signal_; }

 private:
  struct Child;
  void OnWritable(Child& c);
  void DrainReport(Child& c);
  bool Handle(Child& c, ipc::Message message);
  void OnExit(Child& c);
  void Kill(Child& c, KillReason reason, const std::string& why);
  // After a final message or EOF on the report pipe the child has a short grace to exit; past it
  // KillLingering kills it, keeping what it reported (no result: a protocol error).
  void ArmExitGrace(Child& c);
  void KillLingering(Child& c);
  void CloseControl(Child& c);
  void CloseReport(Child& c);
  void OnSignal();
  void Interrupt(int sig);
  void TakeRecordedInterrupt();
  int NextTimeoutMs();
  void CheckDeadlines();

  EventLoop& loop_;
  BlockedSignals& signals_;
  EventHandler on_event_;
  ExitHandler on_exit_;
  std::vector<std::unique_ptr<Child>> running_;
  RunClock clock_;  // The deadlines' clock: a stop of the session (Ctrl-Z) does not count.
  int interrupt_signal_ = 0;
  bool watching_signals_ = false;
};

}  // namespace forkbox::parent
