#include "base/status.h"

#include <cerrno>
#include <cstring>

namespace forkbox {

const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "ok";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kNotFound:
      return "not found";
    case Status::Code::kPermissionDenied:
      return "permission denied";
    case Status::Code::kUnavailable:
      return "unavailable";
    case Status::Code::kResourceExhausted:
      return "resource exhausted";
    case Status::Code::kEndOfFile:
      return "end of file";
    case Status::Code::kTimeout:
      return "timeout";
    case Status::Code::kCancelled:
      return "cancelled";
    case Status::Code::kInternal:
      return "internal error";
  }
  return "unknown";
}

Status Status::FromErrno(int err, std::string_view what) {
  Code code = Code::kInternal;
  switch (err) {
    case EACCES:
    case EPERM:
      code = Code::kPermissionDenied;
      break;
    case ENOENT:
      code = Code::kNotFound;
      break;
    case ENOSYS:
    case EOPNOTSUPP:
      code = Code::kUnavailable;
      break;
    case ETIMEDOUT:
      code = Code::kTimeout;
      break;
    case EINVAL:
      code = Code::kInvalidArgument;
      break;
    default:
      break;
  }
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  msg += " (errno ";
  msg += std::to_string(err);
  msg += ")";
  return Status(code, std::move(msg));
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

}  // namespace forkbox
