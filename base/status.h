// Errors as values for ipc/ and sandbox/ (in the spirit of leveldb's Status).
//
// Status carries a code and a human-readable message that already names the cause: the failing
// call, the path or fd, and strerror(errno). errno is mapped to a message in exactly one place,
// Status::FromErrno. Result<T> holds either a T or a non-OK Status (std::expected is C++23).
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace forkbox {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // Bad input from a peer or a user: malformed frame, bad JSON, bad path.
    kNotFound,
    kPermissionDenied,   // Refused by policy (sandbox, path escape).
    kUnavailable,        // A kernel feature or resource is missing (Landlock, seccomp, userns).
    kResourceExhausted,  // A size cap was hit.
    kEndOfFile,          // Clean EOF before a frame started.
    kTimeout,
    kCancelled,
    kInternal,  // A syscall failed unexpectedly; the message names it and the errno.
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(Code code, std::string message) { return Status(code, std::move(message)); }
  static Status InvalidArgument(std::string m) {
    return Status(Code::kInvalidArgument, std::move(m));
  }
  static Status PermissionDenied(std::string m) {
    return Status(Code::kPermissionDenied, std::move(m));
  }
  static Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
  static Status ResourceExhausted(std::string m) {
    return Status(Code::kResourceExhausted, std::move(m));
  }
  static Status EndOfFile(std::string m) { return Status(Code::kEndOfFile, std::move(m)); }
  static Status Timeout(std::string m) { return Status(Code::kTimeout, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

  // The one place errno becomes text: "<what>: <strerror(err)> (errno <err>)". The code is
  // derived from err (EACCES/EPERM -> kPermissionDenied, ENOENT -> kNotFound, ENOSYS/EOPNOTSUPP
  // -> kUnavailable, ETIMEDOUT -> kTimeout, else kInternal).
  static Status FromErrno(int err, std::string_view what);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // The code's name and the message, e.g. "permission denied: landlock_restrict_self: ...".
  std::string ToString() const;
  // Returns a copy whose message is "<context>: <message>", keeping the code.
  Status WithContext(std::string_view context) const;

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

const char* CodeName(Status::Code code);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like std::expected.
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result needs a value or a non-OK Status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // OK when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace forkbox

// Propagates a non-OK Status out of a function returning Status or Result<T>.
#define FORKBOX_RETURN_IF_ERROR(expr) \
  do {                                \
    ::forkbox::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)
