// A TCP listener on 127.0.0.1 at a port the kernel picks, for the in-test HTTP and TLS servers.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/unique_fd.h"

namespace forkbox::loopback {

// Listening with `backlog`; sets *port. An invalid fd, and a test failure, when any step fails.
inline UniqueFd Listen(int backlog, int* port) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (!listener || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listener.get(), backlog) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "cannot listen on 127.0.0.1";
    return UniqueFd();
  }
  *port = ntohs(addr.sin_port);
  return listener;
}

}  // namespace forkbox::loopback
