#include "child/start.h"

#include <fcntl.h>

#include <cerrno>
#include <string>
#include <variant>

#include "ipc/frame.h"

namespace forkbox::child {

Result<ipc::StartMessage> ReadStart(int fd) {
  ipc::FrameReader reader(fd, ipc::kDefaultMaxFrameBytes, ipc::kDefaultMaxFrameBytes + 4);
  Result<ipc::Message> msg = reader.Read();
  if (!msg.ok()) return msg.status().WithContext("reading the start frame on fd 3");
  auto* start = std::get_if<ipc::StartMessage>(&*msg);
  if (start == nullptr) {
    return Status::InvalidArgument(std::string("expected a start frame on fd 3, got a \"") +
                                   ipc::MessageTypeName(*msg) + "\" frame");
  }
  if (start->prompt.empty()) return Status::InvalidArgument("start frame: the prompt is empty");
  if (start->workdir.empty() || start->workdir[0] != '/') {
    return Status::InvalidArgument("start frame: workdir must be an absolute path, got \"" +
                                   start->workdir + "\"");
  }
  const ipc::Limits& l = start->limits;
  if (l.max_turns < 1 || l.tool_timeout_ms < 1 || l.max_tool_output_chars < 1 ||
      l.max_summary_bytes < 1) {
    return Status::InvalidArgument("start frame: every limit must be >= 1");
  }
  if (l.max_summary_bytes > kMaxSummaryBytesCap) {
    return Status::InvalidArgument("start frame: limits.max_summary_bytes must be at most " +
                                   std::to_string(kMaxSummaryBytesCap));
  }
  if (start->transcript_fd) {
    int t = *start->transcript_fd;
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
