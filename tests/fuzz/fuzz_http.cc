// libFuzzer target: the HTTP module's response parser (agent/http_native.cc) end to end, over a
// real loopback connection. A server thread answers each request with the fuzz bytes and closes,
// in two writes, the second once the client has read the first (so that a read ends where the
// first byte says); the client is the module's table called in-process, a fresh client per input
// (no keep-alive across inputs: the server closes each connection). It must never crash or hang,
// and its result must hold together: success means a final status in 200..999 (1xx replies are
// interim); a failure has a kind and a message and is one a reply can cause (receive or
// protocol); the body never holds more bytes than the server sent, each streamed chunk is bytes
// the server sent, and a 2xx body streams into the sink while any other is collected. Where the
// client accepted the heads, an independent reading of the reply (Read) must agree on the final
// status and on the body the framing delimits: all of it on success, a prefix on a failure. The
// first byte places the split; the rest is the reply.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "agent/http_client.h"
#include "agent/http_module.h"

// Compiled into this target from agent/http_native.cc (tests/fuzz/CMakeLists.txt): the module's
// entry point, which the loader would find with dlsym.
extern "C" const forkbox::agent::http_module::Api* forkbox_http_module();
static_assert(std::string_view(forkbox::agent::http_module::kEntryPoint) == "forkbox_http_module");

namespace {

using forkbox::agent::HttpErrorKind;
using forkbox::agent::HttpResult;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "fuzz_http: %s\n", what);
  std::abort();
}

[[noreturn]] void Fail(const char* what, const HttpResult& r) {
  std::fprintf(stderr, "fuzz_http: %s (status %ld, error %s: '%s')\n", what, r.status,
               forkbox::agent::HttpErrorKindName(r.error_kind), r.transport_error.c_str());
  std::abort();
}

// Waits up to 5 s for `fd` to be ready for `events`.
bool Ready(int fd, short events) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, 5000);
    if (n >= 0) return n > 0;
    if (errno != EINTR) return false;
  }
}

void SendAll(int fd, std::string_view data) {
  while (!data.empty() && Ready(fd, POLLOUT)) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // The client is gone (it stopped reading and closed): fine.
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// The client's end of the connection, in this very process: the socket bound to `client_port`
// and connected to `server_port`; -1 if none.
int ClientSocket(uint16_t client_port, uint16_t server_port) {
  for (int fd = 0; fd < 1024; ++fd) {
    sockaddr_in local{};
    sockaddr_in peer{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
        local.sin_family != AF_INET || ntohs(local.sin_port) != client_port) {
      continue;
    }
    len = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
        ntohs(peer.sin_port) == server_port) {
      return fd;
    }
  }
  return -1;
}

// One listener on 127.0.0.1 (a port the kernel picks) and a thread that serves one connection
// per input: it reads the request, sends the armed reply and closes. Never destroyed.
class Server {
 public:
  Server() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener_, 8) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      Die("cannot listen on 127.0.0.1");
    }
    port_ = ntohs(addr.sin_port);
    std::thread([this] { Loop(); }).detach();
  }

  uint16_t port() const { return port_; }

  // The next connection gets `reply`, sent as [0, split) then [split, end).
  void Arm(std::string_view reply, size_t split) {
    std::lock_guard lock(mu_);
    reply_.assign(reply);
    split_ = split;
    post_returned_ = false;
    ++armed_;
    cv_.notify_all();
  }

  // The client is about to wait for bytes (its cancel check runs before every wait).
  void ClientWaits() {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }

  // The client's Post returned; its connection closes next.
  void PostReturned() {
    std::lock_guard lock(mu_);
    post_returned_ = true;
    cv_.notify_all();
  }

  // Until the server is done with the connection.
  void WaitServed() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return served_ == armed_; })) {
      Die("the server thread did not finish the connection within 10 s");
    }
  }

 private:
  void Loop() {
    for (;;) {
      std::string reply;
      size_t split = 0;
      uint64_t turn = 0;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return armed_ != served_; });
        reply = reply_;
        split = split_;
        turn = armed_;
      }
      sockaddr_in peer{};
      socklen_t len = sizeof(peer);
      const int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int one = 1;
        (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        Serve(fd, reply, split, ntohs(peer.sin_port));
        ::close(fd);
      }
      std::lock_guard lock(mu_);
      served_ = turn;
      cv_.notify_all();
    }
  }

  // Reads the request (head and Content-Length body): closing with unread bytes would reset the
  // connection. Then the reply in one or two writes, and the end of the stream.
  void Serve(int fd, const std::string& reply, size_t split, uint16_t client_port) {
    std::string request;
    size_t want = std::string::npos;
    while (request.size() < want) {
      if (!Ready(fd, POLLIN)) return;
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      request.append(buf, static_cast<size_t>(n));
      const size_t end = request.find("\r\n\r\n");
      if (want == std::string::npos && end != std::string::npos) {
        const size_t at = request.find("\r\nContent-Length: ");
        const size_t body = at < end ? std::strtoul(request.c_str() + at + 18, nullptr, 10) : 0;
        want = end + 4 + body;
      }
    }
    SendAll(fd, std::string_view(reply).substr(0, split));
    if (split > 0 && split < reply.size()) WaitUntilRead(client_port);
    SendAll(fd, std::string_view(reply).substr(split));
    ::shutdown(fd, SHUT_WR);
  }

  // Until the client has read all that was sent (its socket's receive queue is empty), so that
  // the rest comes in a read of its own; or it returned; at most 2 s. The client's cancel check
  // wakes this early. Under the lock, with post_returned_ false, the client's socket is open.
  void WaitUntilRead(uint16_t client_port) {
    std::unique_lock lock(mu_);
    const int client = post_returned_ ? -1 : ClientSocket(client_port, port_);
    for (int i = 0; client >= 0 && !post_returned_ && i < 2000; ++i) {
      int unread = 0;
      if (::ioctl(client, FIONREAD, &unread) != 0 || unread == 0) return;
      cv_.wait_for(lock, std::chrono::milliseconds(1));
    }
  }

  int listener_ = -1;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string reply_;
  size_t split_ = 0;
  uint64_t armed_ = 0;
  uint64_t served_ = 0;
  bool post_returned_ = false;
};

// --- The reply read independently of the client: a reference for what it must report. --------

// The next line of *rest without its LF (and one CR before it); false when no LF is left.
bool NextLine(std::string_view* rest, std::string_view* line) {
  const size_t nl = rest->find('\n');
  if (nl == std::string_view::npos) return false;
  *line = rest->substr(0, nl);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  rest->remove_prefix(nl + 1);
  return true;
}

// Case-insensitive equality (header names and transfer codings).
bool NoCaseEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// Without leading and trailing spaces and tabs.
std::string_view Stripped(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

struct Reference {
  bool head = false;   // The reply holds a final (non-1xx) head.
  long status = 0;     // Its status.
  bool whole = false;  // The reply holds the whole body its framing delimits:
  std::string body;    // that body (chunked coding decoded).
};

// For a reply whose heads the client accepted (it reported a status): the final head's status and
// the body its framing gives (no Content-Length nor Transfer-Encoding: up to the end). Lenient
// where the client is strict: only what the client accepted must agree.
Reference Read(std::string_view rest) {
  Reference ref;
  std::string_view line;
  std::optional<std::string_view> te;
  std::optional<std::string_view> length;
  do {
    te.reset();
    length.reset();
    if (!NextLine(&rest, &line) || line.size() < 12) return ref;
    ref.status = std::strtol(std::string(line.substr(9, 3)).c_str(), nullptr, 10);
    for (;;) {
      if (!NextLine(&rest, &line)) return ref;
      if (line.empty()) break;
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) return ref;
      const std::string_view name = line.substr(0, colon);
      if (NoCaseEquals(name, "transfer-encoding") && !te) te = Stripped(line.substr(colon + 1));
      if (NoCaseEquals(name, "content-length") && !length)
        length = Stripped(line.substr(colon + 1));
    }
  } while (ref.status < 200);
  ref.head = true;
  if (ref.status == 204 || ref.status == 304) {
    ref.whole = true;
    return ref;
  }
  const size_t comma = te ? te->rfind(',') : std::string_view::npos;
  if (te && NoCaseEquals(Stripped(comma == std::string_view::npos ? *te : te->substr(comma + 1)),
                         "chunked")) {
    for (;;) {
      if (!NextLine(&rest, &line)) return ref;
      uint64_t size = 0;
      for (size_t i = 0;
           i < line.size() && i < 15 && std::isxdigit(static_cast<unsigned char>(line[i])); ++i) {
        const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line[i])));
        size = size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
      }
      if (size == 0) break;  // The trailers that follow are not body.
      if (size > rest.size()) return ref;
      ref.body.append(rest.substr(0, size));
      rest.remove_prefix(size);
      if (!NextLine(&rest, &line)) return ref;
    }
  } else if (!te && length) {
    const uint64_t n = std::strtoull(std::string(*length).c_str(), nullptr, 10);
    if (n > rest.size()) return ref;
    ref.body.assign(rest.substr(0, n));
  } else {
    ref.body.assign(rest);
  }
  ref.whole = true;
  return ref;
}

void Check(const HttpResult& r, std::string_view reply, const std::string& streamed, int sent) {
  if (sent != 1) Fail("the request-sent hook did not run exactly once", r);
  if (r.error_kind == HttpErrorKind::kNone) {
    if (!r.transport_error.empty()) Fail("an error message without an error kind", r);
    if (r.status < 200 || r.status > 999) Fail("success with a status outside 200..999", r);
  } else {
    if (r.transport_error.empty()) Fail("an error without a message", r);
    // The server always answers and closes: a timeout would be a hang, any other kind a lie.
    if (r.error_kind != HttpErrorKind::kReceive && r.error_kind != HttpErrorKind::kProtocol) {
      Fail("an error the reply cannot cause", r);
    }
    if (r.status != 0 && (r.status < 200 || r.status > 999)) {
      Fail("a failure with a status outside 200..999", r);
    }
  }
  if (streamed.size() + r.body.size() > reply.size()) Fail("more body than the server sent", r);
  const bool success = r.status >= 200 && r.status < 300;
  if (success ? !r.body.empty() : !streamed.empty()) {
    Fail("a 2xx body was collected, or another one streamed", r);
  }
  if (r.retry_after && r.retry_after->count() <= 0) Fail("a Retry-After not in the future", r);
  if (r.status == 0) return;
  // The client accepted the heads: it must agree with the reference on the status, and its body
  // is the framing's body (complete on success, a prefix of it on a failure).
  const Reference ref = Read(reply);
  if (!ref.head || ref.status != r.status) Fail("a status that is not the final head's", r);
  const std::string& body = success ? streamed : r.body;
  if (r.error_kind == HttpErrorKind::kNone && (!ref.whole || body != ref.body)) {
    Fail("a body that is not the one the framing delimits", r);
  }
  if (ref.whole && ref.body.compare(0, body.size(), body) != 0) {
    Fail("a partial body that is not a prefix of the one the framing delimits", r);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static Server* const server = new Server;
  static const forkbox::agent::http_module::Api* const api = forkbox_http_module();
  static const std::string url = "http://127.0.0.1:" + std::to_string(server->port()) + "/v1/x";
  const std::string_view reply(reinterpret_cast<const char*>(data + 1), size - 1);
  server->Arm(reply, reply.size() * data[0] / 255);

  std::string error;
  void* client = api->create(&error);
  if (client == nullptr) Die(error.c_str());
  const forkbox::agent::HttpTimeouts timeouts{2000, 2000, 5000};
  std::string streamed;
  const forkbox::agent::HttpClient::BodySink sink = [&](std::string_view chunk) {
    if (chunk.empty() || reply.find(chunk) == std::string_view::npos) {
      Die("a streamed chunk that is not bytes the server sent");
    }
    streamed.append(chunk);
    return true;
  };
  const forkbox::agent::CancelCheck cancelled = [] {
    server->ClientWaits();
    return false;
  };
  int sent = 0;
  const std::function<void()> on_sent = [&] { ++sent; };
  const HttpResult result = api->post(client, timeouts, url, {"Content-Type: application/json"},
                                      "{\"x\":1}", sink, cancelled, on_sent);
  server->PostReturned();
  api->destroy(client);
  server->WaitServed();
  Check(result, reply, streamed, sent);
  return 0;
}
