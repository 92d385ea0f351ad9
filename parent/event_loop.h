// A minimal epoll dispatcher: one thread, level-triggered, a handler per registered fd.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::parent {

class EventLoop {
 public:
  using Handler = std::function<void(uint32_t events)>;
  static Result<EventLoop> Create();
  EventLoop(EventLoop&&) noexcept = default;
  EventLoop& operator=(EventLoop&&) noexcept = default;

  Status Add(int fd, uint32_t events, Handler handler);
  Status Modify(int fd, uint32_t events);
  // Unregisters fd before the caller closes it; a pending event for it is dropped.
  void Remove(int fd);
  bool empty() const { return by_fd_.empty(); }
  // Waits up to timeout_ms (-1: forever) and runs the handlers of the ready fds. EINTR is OK.
  Status RunOnce(int timeout_ms);

 private:
  explicit EventLoop(UniqueFd epfd) : epfd_(std::move(epfd)) {}
  UniqueFd epfd_;
  uint64_t next_token_ = 1;
  std::map<int, uint64_t> by_fd_;
  std::map<uint64_t, Handler> handlers_;
};

}  // namespace forkbox::parent
