#include "base/fd_passing.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace forkbox {

int SendWithFdsRaw(int sock, const void* data, size_t size, const int* fds, size_t count) {
  if (count > kMaxPassedFds) return EINVAL;
  iovec iov{const_cast<void*>(data), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  std::memset(control, 0, sizeof(control));
  if (count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  return static_cast<size_t>(n) == size ? 0 : EIO;
}

Status SendWithFds(int sock, const void* data, size_t size, const std::vector<int>& fds) {
  if (fds.size() > kMaxPassedFds) return Status::InvalidArgument("too many descriptors");
  if (int err = SendWithFdsRaw(sock, data, size, fds.data(), fds.size())) {
    return Status::FromErrno(err, "sendmsg");
  }
  return Status::Ok();
}

Status RecvWithFds(int sock, void* data, size_t cap, size_t max_fds, int flags, size_t* size,
                   std::vector<UniqueFd>* fds) {
  if (max_fds > kMaxPassedFds) return Status::InvalidArgument("too many descriptors");
  iovec iov{data, cap};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * max_fds);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::FromErrno(errno, "recvmsg");
  bool foreign = false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      foreign = true;
      continue;
    }
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->emplace_back(fd);
    }
  }
  *size = static_cast<size_t>(n);
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    return Status::InvalidArgument("truncated datagram or descriptor list");
  }
  if (foreign) return Status::InvalidArgument("control message other than SCM_RIGHTS");
  return Status::Ok();
}

}  // namespace forkbox
