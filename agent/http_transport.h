// The HTTP module's connection layer (agent/http_native.cc): one TCP connection, optionally
// wrapped in TLS (from the TLS module, agent/http_tls.h), with every wait bounded by the transfer's
// clocks and the cancel check. Built into forkbox-http.so only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "agent/http_client.h"
#include "agent/http_tls.h"
#include "agent/http_url.h"
#include "base/unique_fd.h"

namespace forkbox::agent::http_native {

// A failure as the module reports it: a kind and a message (kNone: no failure).
struct HttpFailure {
  HttpErrorKind kind = HttpErrorKind::kNone;
  std::string message;
  explicit operator bool() const { return kind != HttpErrorKind::kNone; }
};

// The clocks of one Post: total, connect (while connecting and during the TLS handshake), idle
// (no byte received for idle_ms), and the cancel check, polled at least once a second.
class TransferClock {
 public:
  TransferClock(const HttpTimeouts& timeouts, const CancelCheck* cancelled);
  void StartConnect();
  void EndConnect();
  void Heard();  // A byte arrived.
  // A deadline passed or the cancel check says stop (checked at most every 200 ms here).
  HttpFailure Check();
  // Waits until `fd` is ready for `events` (poll slices of <= 1 s; EINTR rechecks the cancel).
  HttpFailure Wait(int fd, short events);

 private:
  HttpFailure Expired(std::chrono::steady_clock::time_point now);
  HttpFailure PollCancel();
  using Time = std::chrono::steady_clock::time_point;
  HttpTimeouts timeouts_;
  const CancelCheck* cancelled_;
  Time total_end_;
  Time connect_end_ = Time::max();
  Time last_byte_;
  Time last_cancel_check_;
};

// The TLS module's table for https connections, handed over by the loader (http_module::Api::
// use_tls) once it loaded that module; until then an https connection fails with kTls. Process-
// wide, like the module itself; set before any https Post, read by each handshake.
void UseTls(const http_tls::Api* tls);
const http_tls::Api* UsedTls();

class Connection {
 public:
  // Resolves the URL's host (getaddrinfo, AF_UNSPEC; a name on a thread of its own, so that a
  // nameserver that never answers cannot hold the caller) and connects to each address in turn
  // until one answers, then does the TLS handshake for https; all under the connect timeout and
  // the cancel check.
  static std::unique_ptr<Connection> Open(const ParsedUrl& url, TransferClock& clock,
                                          HttpFailure* failure);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // True when it connects to the same place as `url` would.
  bool Serves(const ParsedUrl& url) const;
  HttpFailure WriteAll(std::string_view data, TransferClock& clock);
  // Reads up to `len` bytes; *got = 0 means the peer closed the connection.
  HttpFailure ReadSome(char* buf, size_t len, size_t* got, TransferClock& clock);

 private:
  Connection(UniqueFd fd, const ParsedUrl& url) : fd_(std::move(fd)), url_(url) {}
  HttpFailure Handshake(TransferClock& clock);
  UniqueFd fd_;
  ParsedUrl url_;
  const http_tls::Api* tls_ = nullptr;
  void* session_ = nullptr;  // The TLS session (owned, closed through tls_); null for plain HTTP.
};

}  // namespace forkbox::agent::http_native
