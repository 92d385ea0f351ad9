#include "child/start.h"

#include <fcntl.h>

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

#include "ipc/frame.h"
#include "sandbox/sandbox.h"

namespace forkbox::child {

SandboxPlan PlanOf(const ipc::StartMessage& start) {
  return {start.workdir, start.sandbox, start.provider.base_url, start.hints};
}

SandboxPlan PlanOf(const ipc::PrepareMessage& prepare) {
  return {prepare.workdir, prepare.sandbox, prepare.model_url, prepare.hints};
}

Status CheckStart(const ipc::StartMessage& start) {
  if (start.prompt.empty()) return Status::InvalidArgument("start frame: the prompt is empty");
  if (start.workdir.empty() || start.workdir[0] != '/') {
    return Status::InvalidArgument("start frame: workdir must be an absolute path, got \"" +
                                   start.workdir + "\"");
  }
  const ipc::TaskLimits& l = start.limits;
  if (l.max_turns < 1 || l.tool_timeout_ms < 1 || l.max_tool_output_chars < 1 ||
      l.max_summary_bytes < 1) {
    return Status::InvalidArgument("start frame: every limit must be >= 1");
  }
  if (l.max_summary_bytes > kMaxSummaryBytesCap) {
    return Status::InvalidArgument("start frame: limits.max_summary_bytes must be at most " +
                                   std::to_string(kMaxSummaryBytesCap));
  }
  if (start.transcript_fd) {
    int t = *start.transcript_fd;
    if (t <= ipc::kChildReportWriteFd) {
      return Status::InvalidArgument("start frame: transcript_fd " + std::to_string(t) +
                                     " collides with stdio or the protocol pipes");
    }
    int flags = ::fcntl(t, F_GETFL);
    if (flags < 0) {
      return Status::FromErrno(errno, "start frame: transcript_fd " + std::to_string(t));
    }
    if ((flags & O_ACCMODE) == O_RDONLY) {
      return Status::InvalidArgument("start frame: transcript_fd " + std::to_string(t) +
                                     " is not open for writing");
    }
  }
  return Status::Ok();
}

ControlReader::ControlReader(int fd)
    : reader_(fd, ipc::kDefaultMaxFrameBytes, 2 * (ipc::kDefaultMaxFrameBytes + 4)) {}

Result<ipc::Message> ControlReader::ReadFirst() {
  Result<ipc::Message> msg = reader_.Read();
  if (!msg.ok()) return msg.status().WithContext("reading the start frame on fd 3");
  if (std::holds_alternative<ipc::PrepareMessage>(*msg)) return msg;
  auto* start = std::get_if<ipc::StartMessage>(&*msg);
  if (start == nullptr) {
    return Status::InvalidArgument(
        std::string("expected a start or prepare frame on fd 3, got a \"") +
        ipc::MessageTypeName(*msg) + "\" frame");
  }
  FORKBOX_RETURN_IF_ERROR(CheckStart(*start));
  return msg;
}

Result<ipc::StartMessage> ControlReader::ReadStartAfter(const SandboxPlan& plan) {
  Result<ipc::Message> msg = reader_.Read();
  if (!msg.ok()) {
    if (msg.status().code() == Status::Code::kEndOfFile) return msg.status();
    return msg.status().WithContext("reading the start frame on fd 3 after prepare");
  }
  auto* start = std::get_if<ipc::StartMessage>(&*msg);
  if (start == nullptr) {
    return Status::InvalidArgument(std::string("expected a start frame on fd 3 after prepare, "
                                               "got a \"") +
                                   ipc::MessageTypeName(*msg) + "\" frame");
  }
  const std::string why =
      "start frame disagrees with the prepare frame this child was "
      "sandboxed from: ";
  if (start->transcript_fd) {
    return Status::InvalidArgument(why +
                                   "a standby child cannot take a transcript_fd (it closed "
                                   "its other descriptors when it sandboxed itself)");
  }
  FORKBOX_RETURN_IF_ERROR(CheckStart(*start));
  SandboxPlan got = PlanOf(*start);
  if (got.workdir != plan.workdir) {
    return Status::InvalidArgument(why + "workdir \"" + got.workdir + "\" vs \"" + plan.workdir +
                                   "\"");
  }
  if (!(got.sandbox == plan.sandbox)) {
    return Status::InvalidArgument(why + "the sandbox settings differ");
  }
  if (got.model_url != plan.model_url) {
    return Status::InvalidArgument(why + "model URL \"" + got.model_url + "\" vs \"" +
                                   plan.model_url + "\"");
  }
  return std::move(*start);
}

Result<std::unique_ptr<agent::Provider>> MakeTaskProvider(ipc::StartMessage& start,
                                                          std::function<void()> on_request_sent) {
  agent::ProviderHooks hooks;
  hooks.on_request_sent = std::move(on_request_sent);
  // Polled by the HTTP client during every model call: no tool runs then, so orphans are reaped.
  hooks.cancelled = [] {
    sandbox::ReapOrphans();
    return false;
  };
  Result<std::unique_ptr<agent::Provider>> provider = agent::MakeProvider(start.provider, hooks);
  start.provider.api_key.clear();
  return provider;
}

}  // namespace forkbox::child
