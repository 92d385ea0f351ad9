#include "parent/event_loop.h"

#include <sys/epoll.h>

#include <cerrno>

namespace forkbox::parent {

Result<EventLoop> EventLoop::Create() {
  int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "epoll_create1");
  return EventLoop(UniqueFd(fd));
}

Status EventLoop::Add(int fd, uint32_t events, Handler handler) {
  uint64_t token = next_token_++;
  struct epoll_event ev = {};
  ev.events = events;
  ev.data.u64 = token;
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return Status::FromErrno(errno, "epoll_ctl(ADD, fd " + std::to_string(fd) + ")");
  }
  by_fd_[fd] = token;
  handlers_[token] = std::move(handler);
  return Status::Ok();
}

Status EventLoop::Modify(int fd, uint32_t events) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return Status::InvalidArgument("fd not registered");
  struct epoll_event ev = {};
  ev.events = events;
  ev.data.u64 = it->second;
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    return Status::FromErrno(errno, "epoll_ctl(MOD)");
  }
  return Status::Ok();
}

void EventLoop::Remove(int fd) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr);
  handlers_.erase(it->second);
  by_fd_.erase(it);
}

Status EventLoop::RunOnce(int timeout_ms) {
  struct epoll_event events[32];
  int n = epoll_wait(epfd_.get(), events, 32, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return Status::Ok();
    return Status::FromErrno(errno, "epoll_wait");
  }
  for (int i = 0; i < n; ++i) {
    auto it = handlers_.find(events[i].data.u64);
    if (it == handlers_.end()) continue;  // Removed by an earlier handler in this batch.
    Handler handler = it->second;         // A copy: the handler may remove itself.
    handler(events[i].events);
  }
  return Status::Ok();
}

}  // namespace forkbox::parent
