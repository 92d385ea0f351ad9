#include "child/start.h"

#include <fcntl.h>

#include <cerrno>
#include <string>
#include <variant>

#include "ipc/frame.h"

namespace forkbox::child {

SandboxPlan PlanOf(const ipc::StartMessage& start) {
  return {start.workdir, start.sandbox, start.provider.base_url};
}

SandboxPlan PlanOf(const ipc::PrepareMessage& prepare) {
  return {prepare.workdir, prepare.sandbox, prepare.model_url};
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

uint16_t PortFromUrl(const std::string& url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return 0;
  std::string scheme = url.substr(0, scheme_end);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint16_t fallback = scheme == "https" ? 443 : scheme == "http" ? 80 : 0;
  if (fallback == 0) return 0;
  std::string rest = url.substr(scheme_end + 3);
  std::string authority = rest.substr(0, rest.find_first_of("/?#"));
  if (size_t at = authority.rfind('@'); at != std::string::npos) authority.erase(0, at + 1);
  size_t colon;
  if (!authority.empty() && authority[0] == '[') {  // [IPv6]:port
    size_t close = authority.find(']');
    if (close == std::string::npos) return 0;
    colon = authority.find(':', close);
  } else {
    colon = authority.rfind(':');
  }
  if (colon == std::string::npos || colon + 1 == authority.size()) return fallback;
  std::string port = authority.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) return 0;
  long value = std::stol(port);
  if (value < 1 || value > 65535) return 0;
  return static_cast<uint16_t>(value);
}

}  // namespace forkbox::child
