#include "base/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace forkbox {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) {
    // Linux always releases the descriptor, even when close() reports EINTR: never retry.
    ::close(fd_);
  }
  fd_ = fd;
}

Result<Pipe> MakePipe(int extra_flags) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | extra_flags) != 0) return Status::FromErrno(errno, "pipe2");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

Status SetNonBlocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return Status::FromErrno(errno, "fcntl(F_GETFL)");
  int want = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (want != flags && ::fcntl(fd, F_SETFL, want) != 0) {
    return Status::FromErrno(errno, "fcntl(F_SETFL)");
  }
  return Status::Ok();
}

}  // namespace forkbox
