// TCP sockets on 127.0.0.1 at a port the kernel picks, for the in-test HTTP and TLS servers, and
// the one request such a server reads.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"

namespace forkbox::loopback {

// Bound, and listening with `backlog` unless it is negative (then a connect there is refused
// while the socket holds the port); sets *port. An invalid fd, and a test failure, on any error.
inline UniqueFd Listen(int backlog, int* port) {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (!sock || ::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      (backlog >= 0 && ::listen(sock.get(), backlog) != 0) ||
      ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "cannot bind on 127.0.0.1";
    return UniqueFd();
  }
  *port = ntohs(addr.sin_port);
  return sock;
}

// A port nobody listens on, held by the returned socket.
inline UniqueFd BoundNotListening(int* port) { return Listen(-1, port); }

// Reads one request (head and Content-Length body) from `fd`; "" when the peer closed first.
inline std::string ReadRequest(int fd) {
  std::string got;
  char buf[4096];
  size_t need = std::string::npos;
  while (got.size() < need) {
    const size_t end = got.find("\r\n\r\n");
    if (need == std::string::npos && end != std::string::npos) {
      const size_t cl = got.find("Content-Length: ");
      need = end + 4 + (cl != std::string::npos && cl < end ? std::stoul(got.substr(cl + 16)) : 0);
      continue;
    }
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return "";
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// Answers `replies`, one per connection, in order, and keeps the requests it read. Its thread's
// frees are not scanned (the scanner watches the thread that made it).
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> replies) : replies_(std::move(replies)) {
    listener_ = Listen(static_cast<int>(replies_.size()), &port_);
    if (listener_) thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Valid once the provider is done with it (the thread only appends before it answers).
  const std::vector<std::string>& requests() const { return requests_; }

 private:
  void Serve() {
    for (const std::string& reply : replies_) {
      UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) return;
      requests_.push_back(ReadRequest(conn.get()));
      (void)!::send(conn.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
    }
  }
  std::vector<std::string> replies_;
  std::vector<std::string> requests_;
  UniqueFd listener_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace forkbox::loopback
