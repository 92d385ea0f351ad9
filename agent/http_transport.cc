#include "agent/http_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <memory>

namespace forkbox::agent::http_native {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string ErrnoText(int err, std::string_view what) {
  return Status::FromErrno(err, what).message();
}

std::string Duration(int64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

}  // namespace

TransferClock::TransferClock(const HttpTimeouts& timeouts, const CancelCheck* cancelled)
    : timeouts_(timeouts), cancelled_(cancelled) {
  const Time now = steady_clock::now();
  total_end_ = now + milliseconds(timeouts.total_ms);
  last_byte_ = now;
  last_cancel_check_ = now;
}

void TransferClock::StartConnect() {
  connect_end_ = steady_clock::now() + milliseconds(timeouts_.connect_ms);
}
void TransferClock::EndConnect() { connect_end_ = Time::max(); }
void TransferClock::Heard() { last_byte_ = steady_clock::now(); }

HttpFailure TransferClock::Expired(Time now) {
  if (now >= connect_end_) {
    return {HttpErrorKind::kConnectTimeout,
            "no connection within " + Duration(timeouts_.connect_ms) + " (connect timeout)"};
  }
  if (now >= last_byte_ + milliseconds(timeouts_.idle_ms)) {
    return {HttpErrorKind::kIdleTimeout,
            "no response byte for " + Duration(timeouts_.idle_ms) + " (idle timeout)"};
  }
  if (now >= total_end_) {
    return {HttpErrorKind::kTotalTimeout,
            "the request took longer than " + Duration(timeouts_.total_ms) + " (total timeout)"};
  }
  return {};
}

HttpFailure TransferClock::PollCancel() {
  last_cancel_check_ = steady_clock::now();
  if (cancelled_ != nullptr && *cancelled_ && (*cancelled_)()) {
    return {HttpErrorKind::kCancelled, "cancelled"};
  }
  return {};
}

HttpFailure TransferClock::Check() {
  const Time now = steady_clock::now();
  if (HttpFailure f = Expired(now)) return f;
  if (now - last_cancel_check_ >= milliseconds(200)) return PollCancel();
  return {};
}

HttpFailure TransferClock::Wait(int fd, short events) {
  for (;;) {
    if (HttpFailure f = PollCancel()) return f;
    const Time now = steady_clock::now();
    if (HttpFailure f = Expired(now)) return f;
    const Time end = std::min({connect_end_, last_byte_ + milliseconds(timeouts_.idle_ms),
                               total_end_, now + milliseconds(1000)});
    const auto slice = std::chrono::ceil<milliseconds>(end - now).count();
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(slice, 1)));
    if (n > 0) return {};
    if (n < 0 && errno != EINTR) return {HttpErrorKind::kReceive, ErrnoText(errno, "poll")};
  }
}

// --- Connection ------------------------------------------------------------------------------

namespace {

std::string AddressText(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text,
              sizeof(text));
    return "[" + std::string(text) + "]";
  }
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof(text));
  return text;
}

// One non-blocking connect under the clock; the error names the address.
UniqueFd ConnectOne(const addrinfo& ai, uint16_t port, TransferClock& clock, HttpFailure* failure) {
  const std::string where =
      "connect to " + AddressText(ai.ai_addr) + ":" + std::to_string(port) + " failed";
  UniqueFd fd(::socket(ai.ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    *failure = {HttpErrorKind::kConnect, ErrnoText(errno, where)};
    return {};
  }
  const int one = 1;
  if (::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
      ::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0) {
    *failure = {HttpErrorKind::kConnect, ErrnoText(errno, "setsockopt")};
    return {};
  }
  if (::connect(fd.get(), ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      *failure = {HttpErrorKind::kConnect, ErrnoText(errno, where)};
      return {};
    }
    if ((*failure = clock.Wait(fd.get(), POLLOUT))) return {};
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      *failure = {HttpErrorKind::kConnect, ErrnoText(err, where)};
      return {};
    }
  }
  return fd;
}

struct AddrInfoFree {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrList = std::unique_ptr<addrinfo, AddrInfoFree>;

HttpFailure LookupFailure(const std::string& host, int rc, int err) {
  return {HttpErrorKind::kResolve,
          "cannot resolve " + host + ": " +
              (rc == EAI_SYSTEM ? ErrnoText(err, "getaddrinfo") : gai_strerror(rc))};
}

// One name lookup, owned jointly by the caller and the thread that runs it: whichever lets go
// last frees it, so a caller that gave up (timeout, cancel) never waits for the resolver.
struct Lookup {
  std::string host;
  std::string port;
  addrinfo hints{};
  int rc = 0;
  int err = 0;
  AddrList found;
  std::atomic<bool> finished{false};
  UniqueFd done;  // An eventfd, readable once `finished` is set.

  void Run() {
    addrinfo* list = nullptr;
    rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &list);
    err = errno;
    found.reset(list);
    finished.store(true, std::memory_order_release);
  }
};

void* RunLookup(void* arg) {
  const std::unique_ptr<std::shared_ptr<Lookup>> owner(static_cast<std::shared_ptr<Lookup>*>(arg));
  Lookup& lookup = **owner;
  lookup.Run();
  const uint64_t one = 1;
  // An eventfd write of 1 fails only on counter overflow, and this is its only write.
  (void)!::write(lookup.done.get(), &one, sizeof(one));
  return nullptr;
}

// Starts `lookup` on a detached thread with every signal blocked (handlers stay on the caller's
// threads). False when no thread could be started.
bool StartLookup(const std::shared_ptr<Lookup>& lookup) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  sigset_t all;
  sigset_t before;
  sigfillset(&all);
  auto* arg = new std::shared_ptr<Lookup>(lookup);
  bool started = false;
  if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
      pthread_sigmask(SIG_SETMASK, &all, &before) == 0) {
    pthread_t thread;
    started = pthread_create(&thread, &attr, &RunLookup, arg) == 0;
    (void)pthread_sigmask(SIG_SETMASK, &before, nullptr);  // Puts back the mask it just read.
  }
  (void)pthread_attr_destroy(&attr);  // Cannot fail on Linux.
  if (!started) delete arg;
  return started;
}

// Resolves `url`'s host into `out`. An IP literal resolves in place (AI_NUMERICHOST never
// blocks). A name resolves on a thread of its own while this one waits under the clock: a
// nameserver that never answers costs the connect timeout, not glibc's retries (5 s for each
// attempt and server), and the cancel check still ends the wait. Where no thread can be started
// the name resolves in place, unbounded, as a plain getaddrinfo would.
HttpFailure Resolve(const ParsedUrl& url, TransferClock& clock, AddrList* out) {
  auto lookup = std::make_shared<Lookup>();
  lookup->host = url.host;
  lookup->port = std::to_string(url.port);
  lookup->hints.ai_family = AF_UNSPEC;
  lookup->hints.ai_socktype = SOCK_STREAM;
  lookup->hints.ai_flags = AI_NUMERICSERV | (url.ip_literal ? AI_NUMERICHOST : 0);
  if (!url.ip_literal) lookup->done.reset(::eventfd(0, EFD_CLOEXEC));
  if (!lookup->done || !StartLookup(lookup)) {
    lookup->Run();
  } else if (HttpFailure f = clock.Wait(lookup->done.get(), POLLIN)) {
    return f;  // The thread finishes on its own and frees the lookup.
  }
  if (!lookup->finished.load(std::memory_order_acquire)) {
    return {HttpErrorKind::kInternal, "the resolver thread woke its caller before it finished"};
  }
  if (lookup->rc != 0) return LookupFailure(url.host, lookup->rc, lookup->err);
  *out = std::move(lookup->found);
  return {};
}

}  // namespace

std::unique_ptr<Connection> Connection::Open(const ParsedUrl& url, TransferClock& clock,
                                             HttpFailure* failure) {
  clock.StartConnect();
  AddrList list;
  if ((*failure = Resolve(url, clock, &list))) return nullptr;
  UniqueFd fd;
  for (const addrinfo* ai = list.get(); ai != nullptr && !fd; ai = ai->ai_next) {
    fd = ConnectOne(*ai, url.port, clock, failure);
    const HttpErrorKind kind = failure->kind;
    if (!fd && kind != HttpErrorKind::kConnect) return nullptr;  // Timeout or cancel: stop.
  }
  if (!fd) return nullptr;
  *failure = {};
  std::unique_ptr<Connection> conn(new Connection(std::move(fd), url));
  if (url.tls && (*failure = conn->Handshake(clock))) return nullptr;
  clock.EndConnect();
  return conn;
}

Connection::~Connection() {
  if (session_ != nullptr) tls_->close(session_);
}

bool Connection::Serves(const ParsedUrl& url) const {
  return url.tls == url_.tls && url.host == url_.host && url.port == url_.port;
}

namespace {

// Waits as a TLS step asked; a failure of the step becomes `kind`'s failure.
HttpFailure AfterTlsStep(http_tls::Io io, const std::string& error, HttpErrorKind kind, int fd,
                         TransferClock& clock) {
  switch (io) {
    case http_tls::Io::kWantRead:
      return clock.Wait(fd, POLLIN);
    case http_tls::Io::kWantWrite:
      return clock.Wait(fd, POLLOUT);
    case http_tls::Io::kVerifyFailed:
      return {HttpErrorKind::kTlsVerify, error};
    case http_tls::Io::kFailed:
      return {kind, error};
    case http_tls::Io::kDone:
    case http_tls::Io::kClosed:
      break;
  }
  return {};
}

}  // namespace

HttpFailure Connection::Handshake(TransferClock& clock) {
  tls_ = UsedTls();
  if (tls_ == nullptr) {
    return {HttpErrorKind::kTls,
            "TLS is not set up in this process (the TLS module is not loaded)"};
  }
  std::string error;
  session_ = tls_->open(fd_.get(), url_.host, url_.ip_literal, &error);
  if (session_ == nullptr) return {HttpErrorKind::kTls, error};
  for (;;) {
    const http_tls::Io io = tls_->handshake(session_, &error);
    if (io == http_tls::Io::kDone) return {};
    if (HttpFailure f = AfterTlsStep(io, error, HttpErrorKind::kTls, fd_.get(), clock)) return f;
  }
}

HttpFailure Connection::WriteAll(std::string_view data, TransferClock& clock) {
  while (!data.empty()) {
    if (HttpFailure f = clock.Check()) return f;
    size_t n = 0;
    if (session_ == nullptr) {
      const ssize_t sent = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (sent >= 0) n = static_cast<size_t>(sent);
      if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return {HttpErrorKind::kSend, ErrnoText(errno, "sending the request failed")};
      }
      if (n == 0) {
        if (HttpFailure f = clock.Wait(fd_.get(), POLLOUT)) return f;
      }
    } else {
      std::string error;
      const http_tls::Io io = tls_->write(session_, data.data(), data.size(), &n, &error);
      if (io != http_tls::Io::kDone) {
        n = 0;
        if (HttpFailure f = AfterTlsStep(io, "sending the request failed: " + error,
                                         HttpErrorKind::kSend, fd_.get(), clock)) {
          return f;
        }
      }
    }
    data.remove_prefix(n);
  }
  return {};
}

HttpFailure Connection::ReadSome(char* buf, size_t len, size_t* got, TransferClock& clock) {
  for (;;) {
    if (HttpFailure f = clock.Check()) return f;
    if (session_ == nullptr) {
      const ssize_t n = ::recv(fd_.get(), buf, len, 0);
      if (n >= 0) {
        *got = static_cast<size_t>(n);
        return {};
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return {HttpErrorKind::kReceive, ErrnoText(errno, "receiving the response failed")};
      }
      if (HttpFailure f = clock.Wait(fd_.get(), POLLIN)) return f;
      continue;
    }
    std::string error;
    const http_tls::Io io = tls_->read(session_, buf, len, got, &error);
    if (io == http_tls::Io::kDone) return {};
    if (io == http_tls::Io::kClosed) {
      *got = 0;
      return {};
    }
    if (HttpFailure f = AfterTlsStep(io, "receiving the response failed: " + error,
                                     HttpErrorKind::kReceive, fd_.get(), clock)) {
      return f;
    }
  }
}

namespace {
std::atomic<const http_tls::Api*> used_tls{nullptr};
}  // namespace

void UseTls(const http_tls::Api* tls) { used_tls.store(tls, std::memory_order_release); }

const http_tls::Api* UsedTls() { return used_tls.load(std::memory_order_acquire); }

}  // namespace forkbox::agent::http_native
