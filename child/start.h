// Reading and checking what the parent sends on fd 3. Two shapes (docs/protocol.md):
//   on demand:  start, EOF
//   standby:    prepare, start, EOF   (the child sandboxes itself between the two frames)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "agent/provider.h"
#include "base/status.h"
#include "ipc/frame.h"
#include "ipc/messages.h"

namespace forkbox::child {

// Largest summary a result frame may carry (the frame cap is 1 MiB; leave room for the rest).
inline constexpr int64_t kMaxSummaryBytesCap = 512 * 1024;

// What the agent's sandbox is built from: a prepare frame, or the same fields of a start frame.
struct SandboxPlan {
  std::string workdir;
  ipc::SandboxSettings sandbox;
  std::string model_url;  // The resolved base URL (the parent never sends an empty one).
  ipc::ChildSandboxHints hints;
};
SandboxPlan PlanOf(const ipc::StartMessage& start);
SandboxPlan PlanOf(const ipc::PrepareMessage& prepare);

// One reader for the life of fd 3 (capped at 1 MiB per frame and in total).
class ControlReader {
 public:
  explicit ControlReader(int fd);

  // The first frame: a prepare, or a start checked like ReadStartAfter's (minus the plan).
  Result<ipc::Message> ReadFirst();

  // The start frame after a prepare. Besides the usual checks (absolute workdir, non-empty
  // prompt, limits in range) it must agree with `plan` and carry no transcript_fd: the standby
  // closed every other descriptor when it sandboxed itself. kEndOfFile: the parent closed fd 3
  // without a task (it retired the standby).
  Result<ipc::StartMessage> ReadStartAfter(const SandboxPlan& plan);

 private:
  ipc::FrameReader reader_;
};

// The checks of a start frame on its own: non-empty prompt, absolute workdir, limits in range,
// a transcript fd that is open for writing.
Status CheckStart(const ipc::StartMessage& start);

// The provider for the task. The start message's key is zeroed here (a SecretString: every copy
// is zeroed when it goes); the provider keeps the one it needs. Its cancel check reaps orphans
// (polled during every model call, while no tool runs). `on_request_sent`: told once each request
// is on the wire (agent/provider.h).
Result<std::unique_ptr<agent::Provider>> MakeTaskProvider(ipc::StartMessage& start,
                                                          std::function<void()> on_request_sent);

}  // namespace forkbox::child
