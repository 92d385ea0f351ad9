// Owned file descriptors (after Chromium's base::ScopedFD).
//
// UniqueFd is move-only and closes its descriptor exactly once. Every descriptor forkbox creates is
// O_CLOEXEC, so nothing leaks across exec unless it is deliberately dup2()ed into place in a
// freshly forked child.
#pragma once

#include <utility>

#include "base/status.h"

namespace forkbox {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  // Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }
  // Closes the held descriptor (if any) and takes ownership of fd.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// pipe2(O_CLOEXEC | extra_flags).
Result<Pipe> MakePipe(int extra_flags = 0);

// Sets or clears O_NONBLOCK.
Status SetNonBlocking(int fd, bool on);

}  // namespace forkbox
