// The native HTTP client (agent/http_native.cc) against small scripted servers on 127.0.0.1: a
// thread accepts connections and runs one handler per connection, writing raw bytes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <functional>
#include <future>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "agent/http_client.h"
#include "agent/provider.h"
#include "base/unique_fd.h"
#include "tests/agent/loopback_listener.h"

namespace forkbox::agent {
namespace {

using testing::HasSubstr;

void Send(int fd, const std::string& bytes) {
  (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

// Accepts one connection per handler, in order, and runs it on the server's thread.
class ScriptServer {
 public:
  using Handler = std::function<void(int fd)>;
  explicit ScriptServer(std::vector<Handler> handlers) : handlers_(std::move(handlers)) {
    listener_ = loopback::Listen(8, &port_);
    if (!listener_) return;
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptServer() {
    ::shutdown(listener_.get(), SHUT_RDWR);  // Wakes an accept that no client will satisfy.
    if (thread_.joinable()) thread_.join();
  }
  std::string url(const std::string& path = "/v1/x") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int port() const { return port_; }
  int accepts() const { return accepts_.load(); }

 private:
  void Serve() {
    for (Handler& handler : handlers_) {
      UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) return;
      ++accepts_;
      handler(conn.get());
    }
  }
  std::vector<Handler> handlers_;
  UniqueFd listener_;
  int port_ = 0;
  std::atomic<int> accepts_{0};
  std::thread thread_;
};

// A handler that reads one request and answers `reply`.
ScriptServer::Handler Reply(std::string reply) {
  return [reply](int fd) {
    if (!loopback::ReadRequest(fd).empty()) Send(fd, reply);
  };
}

std::unique_ptr<HttpClient> Client(HttpTimeouts timeouts = {}) {
  Result<std::unique_ptr<HttpClient>> client = HttpClient::Create(timeouts);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

HttpResult Post(HttpClient& client, const std::string& url, const HttpClient::BodySink& sink = {}) {
  return client.Post(url, {"Content-Type: application/json", "X-Api-Key: secret"}, "{}", sink);
}

TEST(HttpNativeTest, ContentLengthBodyAndTheRequestItSends) {
  std::string request;
  ScriptServer server({[&](int fd) {
    request = loopback::ReadRequest(fd);
    Send(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello");
  }});
  auto client = Client();
  HttpResult r = Post(*client, server.url("/v1/messages?beta=1"));
  EXPECT_EQ(r.transport_error, "");
  EXPECT_EQ(r.error_kind, HttpErrorKind::kNone);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.headers["content-type"], "text/plain");
  EXPECT_EQ(request, "POST /v1/messages?beta=1 HTTP/1.1\r\nHost: 127.0.0.1:" +
                         std::to_string(server.port()) +
                         "\r\nContent-Type: application/json\r\nX-Api-Key: secret\r\n"
                         "Content-Length: 2\r\n\r\n{}");
}

TEST(HttpNativeTest, ChunkedWithExtensionsAndTrailersStreamsToTheSink) {
  ScriptServer server(
      {Reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5;name=value\r\nhello\r\n6 ; x\r\n world\r\n"
             "0\r\nX-Trailer: t\r\n\r\n")});
  auto client = Client();
  std::string streamed;
  HttpResult r = Post(*client, server.url(), [&](std::string_view chunk) {
    streamed += chunk;
    return true;
  });
  EXPECT_EQ(r.transport_error, "");
  EXPECT_EQ(streamed, "hello world");
  EXPECT_EQ(r.body, "");
}

TEST(HttpNativeTest, BodyToConnectionCloseAndNoReuseAfterIt) {
  ScriptServer server(
      {Reply("HTTP/1.1 200 OK\r\n\r\nall of it"), Reply("HTTP/1.0 200 OK\r\n\r\nx")});
  auto client = Client();
  HttpResult r = Post(*client, server.url());
  EXPECT_EQ(r.transport_error, "");
  EXPECT_EQ(r.body, "all of it");
  HttpResult second = Post(*client, server.url());
  EXPECT_EQ(second.transport_error, "");
  EXPECT_FALSE(second.reused_connection);
  EXPECT_EQ(server.accepts(), 2);
}

TEST(HttpNativeTest, InterimContinueIsSkipped) {
  ScriptServer server(
      {Reply("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
             "X-Request-Id: abc\r\nContent-Length: 2\r\n\r\nok")});
  auto client = Client();
  HttpResult r = Post(*client, server.url());
  EXPECT_EQ(r.transport_error, "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(r.headers["x-request-id"], "abc");
}

TEST(HttpNativeTest, NoContentHasNoBodyAndKeepsTheConnection) {
  ScriptServer server({[](int fd) {
    for (const char* reply :
         {"HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz"}) {
      if (loopback::ReadRequest(fd).empty()) return;
      Send(fd, reply);
    }
  }});
  auto client = Client();
  HttpResult first = Post(*client, server.url());
  EXPECT_EQ(first.transport_error, "");
  EXPECT_EQ(first.status, 204);
  HttpResult second = Post(*client, server.url());
  EXPECT_EQ(second.body, "z");
  EXPECT_TRUE(second.reused_connection);
}

// Over IPv6 when the machine has it: the Host header carries the brackets.
TEST(HttpNativeTest, Ipv6HostHeader) {
  UniqueFd listener(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  socklen_t len = sizeof(addr);
  if (!listener || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  ASSERT_EQ(::listen(listener.get(), 1), 0);
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin6_port));
  std::string request;
  std::thread server([&] {
    UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    request = loopback::ReadRequest(conn.get());
    Send(conn.get(), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  });
  auto client = Client();
  HttpResult r = Post(*client, "http://[::1]:" + port + "/v1");
  server.join();
  EXPECT_EQ(r.transport_error, "");
  EXPECT_THAT(request, HasSubstr("POST /v1 HTTP/1.1\r\nHost: [::1]:" + port + "\r\n"));
}

TEST(HttpNativeTest, KeepAliveReusesOneConnection) {
  ScriptServer server({[](int fd) {
    for (int i = 0; i < 2; ++i) {
      if (loopback::ReadRequest(fd).empty()) return;
      Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n" + std::to_string(i));
    }
  }});
  auto client = Client();
  HttpResult first = Post(*client, server.url());
  HttpResult second = Post(*client, server.url());
  EXPECT_EQ(first.body, "0");
  EXPECT_FALSE(first.reused_connection);
  EXPECT_EQ(second.transport_error, "");
  EXPECT_EQ(second.body, "1");
  EXPECT_TRUE(second.reused_connection);
  EXPECT_EQ(server.accepts(), 1);
}

TEST(HttpNativeTest, AnIdleConnectionTheServerClosedIsReplacedOnce) {
  std::promise<void> closed;
  ScriptServer server({[&](int fd) {
                         if (loopback::ReadRequest(fd).empty()) return;
                         Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
                         ::shutdown(fd, SHUT_RDWR);
                         closed.set_value();
                       },
                       Reply("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb")});
  auto client = Client();
  EXPECT_EQ(Post(*client, server.url()).body, "a");
  closed.get_future().wait();
  HttpResult second = Post(*client, server.url());
  EXPECT_EQ(second.transport_error, "");
  EXPECT_EQ(second.body, "b");
  EXPECT_FALSE(second.reused_connection);
  EXPECT_EQ(server.accepts(), 2);
}

TEST(HttpNativeTest, ANewConnectionThatFailsIsNotRetried) {
  ScriptServer server(
      {[](int fd) { loopback::ReadRequest(fd); }, Reply("HTTP/1.1 200 OK\r\n\r\n")});
  auto client = Client();
  HttpResult r = Post(*client, server.url());
  EXPECT_EQ(r.error_kind, HttpErrorKind::kReceive);
  EXPECT_THAT(r.transport_error, HasSubstr("empty reply"));
  EXPECT_EQ(server.accepts(), 1);
}

TEST(HttpNativeTest, TruncatedBodyIsAnError) {
  ScriptServer server({Reply("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd")});
  auto client = Client();
  HttpResult r = Post(*client, server.url());
  EXPECT_EQ(r.error_kind, HttpErrorKind::kReceive);
  EXPECT_THAT(r.transport_error, HasSubstr("closed after 4 of 10 body bytes"));
  EXPECT_EQ(r.status, 200);
}

// A response the client refuses: a protocol error whose text names what was wrong.
void ExpectProtocolError(const HttpResult& r, const std::string& what) {
  EXPECT_EQ(r.error_kind, HttpErrorKind::kProtocol) << r.transport_error;
  EXPECT_THAT(r.transport_error, HasSubstr(what));
}
TEST(HttpNativeTest, MalformedStatusLineIsAProtocolError) {
  ScriptServer server({Reply("HTTP/2 200\r\n\r\n")});
  auto client = Client();
  HttpResult r = Post(*client, server.url());
  ExpectProtocolError(r, "malformed status line from the server: 'HTTP/2 200'");
}

TEST(HttpNativeTest, OversizedHeadersAreRefused) {
  ScriptServer server(
      {Reply("HTTP/1.1 200 OK\r\nX-Big: " + std::string(70 * 1024, 'a') + "\r\n\r\n"), Reply([] {
         std::string many = "HTTP/1.1 200 OK\r\n";
         for (int i = 0; i < 101; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
         return many + "Content-Length: 0\r\n\r\n";
       }())});
  auto client = Client();
  HttpResult big = Post(*client, server.url());
  ExpectProtocolError(big, "exceed 64 KiB");
  HttpResult many = Post(*client, server.url());
  ExpectProtocolError(many, "more than 100 response headers");
}

TEST(HttpNativeTest, BadAndOverflowingChunkSizes) {
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  ScriptServer server({Reply(head + "zz\r\nhello\r\n0\r\n\r\n"),
                       Reply(head + "10000000000000000\r\nx\r\n0\r\n\r\n")});
  auto client = Client();
  HttpResult bad = Post(*client, server.url());
  ExpectProtocolError(bad, "bad chunk size: 'zz'");
  HttpResult huge = Post(*client, server.url());
  ExpectProtocolError(huge, "chunk size too large");
}

// The server reads the request and holds the connection until the test is done with it.
ScriptServer::Handler Hold(std::shared_future<void> until) {
  return [until](int fd) {
    loopback::ReadRequest(fd);
    until.wait();
  };
}

TEST(HttpNativeTest, IdleTimeout) {
  std::promise<void> done;
  ScriptServer server({Hold(done.get_future().share())});
  HttpTimeouts timeouts;
  timeouts.idle_ms = 300;
  auto client = Client(timeouts);
  HttpResult r = Post(*client, server.url());
  done.set_value();
  EXPECT_TRUE(r.idle_timeout);
  EXPECT_EQ(r.error_kind, HttpErrorKind::kIdleTimeout);
  EXPECT_EQ(r.transport_error, "no response byte for 300 ms (idle timeout)");
}

TEST(HttpNativeTest, TotalTimeoutWhileBytesKeepComing) {
  std::atomic<bool> stop{false};
  ScriptServer server({[&](int fd) {
    loopback::ReadRequest(fd);
    Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
    // A byte every 50 ms: never idle, never done; ends when the client hangs up.
    for (int i = 0; i < 400 && !stop; ++i) {
      if (::send(fd, "x", 1, MSG_NOSIGNAL) != 1) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }});
  HttpTimeouts timeouts;
  timeouts.idle_ms = 5000;
  timeouts.total_ms = 600;
  auto client = Client(timeouts);
  HttpResult r = Post(*client, server.url());
  stop = true;
  EXPECT_EQ(r.error_kind, HttpErrorKind::kTotalTimeout);
  EXPECT_THAT(r.transport_error, HasSubstr("(total timeout)"));
  EXPECT_FALSE(r.idle_timeout);
}

// A streamed 200 that never ends (a hostile or broken server) stops at 64 MiB: the parent keeps
// what it decodes, and a 384 MiB stream took it to ~960 MB before. The control: a stream of 1 MiB
// arrives whole.
TEST(HttpNativeTest, AStreamedBodyStopsAt64MiB) {
  for (const size_t mib : {size_t{1}, size_t{80}}) {
    SCOPED_TRACE(mib);
    ScriptServer server({[mib](int fd) {
      loopback::ReadRequest(fd);
      Send(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
      const std::string piece(1 << 20, 'x');
      for (size_t i = 0; i < mib; ++i) {
        if (::send(fd, piece.data(), piece.size(), MSG_NOSIGNAL) < 0) return;  // It hung up.
      }
    }});
    auto client = Client();
    size_t streamed = 0;
    HttpResult r = Post(*client, server.url(), [&](std::string_view chunk) {
      streamed += chunk.size();
      return true;
    });
    if (mib == 1) {
      EXPECT_EQ(r.error_kind, HttpErrorKind::kNone) << r.transport_error;
      EXPECT_EQ(streamed, size_t{1} << 20);
    } else {
      EXPECT_EQ(r.error_kind, HttpErrorKind::kTooLarge) << r.transport_error;
      EXPECT_THAT(r.transport_error, HasSubstr("exceeds 64 MiB"));
      EXPECT_LE(streamed, size_t{64} << 20);
    }
  }
}

// A non-2xx body is read up to kMaxErrorBodyBytes and no further, whatever its framing: an
// endless 500 took a process to 1.8 GB before (collected up to 256 MiB, then copied). The
// control: a body of exactly the cap arrives whole and uncut.
TEST(HttpNativeTest, AnErrorBodyStopsAtItsCap) {
  const std::string piece(64 * 1024, 'e');
  const auto endless = [&](const std::string& head, bool chunked) {
    return [&piece, head, chunked](int fd) {
      loopback::ReadRequest(fd);
      Send(fd, head);
      const std::string size_line = chunked ? "10000\r\n" : "";
      const std::string end = chunked ? "\r\n" : "";
      for (int i = 0; i < 300 * 16; ++i) {  // 300 MiB unless the client hangs up first.
        const std::string chunk = size_line + piece + end;
        if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0) return;
      }
    };
  };
  const std::string status = "HTTP/1.1 500 Internal Server Error\r\n";
  for (const std::string framing : {"close", "length", "chunked"}) {
    SCOPED_TRACE(framing);
    const std::string head = framing == "close"    ? status + "Connection: close\r\n\r\n"
                             : framing == "length" ? status + "Content-Length: 314572800\r\n\r\n"
                                                   : status + "Transfer-Encoding: chunked\r\n\r\n";
    ScriptServer server({endless(head, framing == "chunked")});
    auto client = Client();
    HttpResult r = Post(*client, server.url());
    EXPECT_EQ(r.error_kind, HttpErrorKind::kNone) << r.transport_error;
    EXPECT_EQ(r.status, 500);
    EXPECT_EQ(r.body.size(), kMaxErrorBodyBytes);
    EXPECT_EQ(r.body.find_first_not_of('e'), std::string::npos);
    EXPECT_TRUE(r.body_cut);
  }
  ScriptServer exact({Reply(status + "Content-Length: " + std::to_string(kMaxErrorBodyBytes) +
                            "\r\n\r\n" + std::string(kMaxErrorBodyBytes, 'e'))});
  auto client = Client();
  HttpResult r = Post(*client, exact.url());
  EXPECT_EQ(r.error_kind, HttpErrorKind::kNone) << r.transport_error;
  EXPECT_EQ(r.body.size(), kMaxErrorBodyBytes);
  EXPECT_FALSE(r.body_cut);
}

TEST(HttpNativeTest, CancelStopsAWaitingRequest) {
  std::promise<void> done;
  ScriptServer server({Hold(done.get_future().share())});
  auto client = Client();
  std::atomic<bool> sent{false};
  client->SetRequestSentHook([&] { sent = true; });
  client->SetCancelCheck([&] { return sent.load(); });
  const auto start = std::chrono::steady_clock::now();
  HttpResult r = Post(*client, server.url());
  done.set_value();
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.error_kind, HttpErrorKind::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(HttpNativeTest, AHostNameResolvesOnTheResolverThread) {
  ScriptServer server({Reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")});
  auto client = Client();
  HttpResult r = Post(*client, "http://localhost:" + std::to_string(server.port()) + "/v1/x");
  EXPECT_EQ(r.transport_error, "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
}

// In a forked child whose clone of a thread fails with EAGAIN (clone3 reports ENOSYS, so glibc
// falls back to clone, whose flags a filter can see), as at a process limit: the name then
// resolves in place and the request goes through. Exits 0 on success.
int ResolveWithoutThreads(int port) {
  const sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAGAIN),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(filter)), const_cast<sock_filter*>(filter)};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    return 10;
  }
  pthread_t thread;
  if (::pthread_create(
          &thread, nullptr, [](void*) -> void* { return nullptr; }, nullptr) != EAGAIN) {
    return 11;  // The precondition: no thread can start here.
  }
  Result<std::unique_ptr<HttpClient>> client = HttpClient::Create({});
  if (!client.ok()) return 12;
  HttpResult r = Post(**client, "http://localhost:" + std::to_string(port) + "/v1/x");
  return r.transport_error.empty() && r.status == 200 && r.body == "ok" ? 0 : 13;
}

TEST(HttpNativeTest, WhereNoThreadCanStartTheNameResolvesInPlace) {
  ScriptServer server({Reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")});
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) _exit(ResolveWithoutThreads(server.port()));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: no filter, 11: a thread started, 12: no client, "
                                       "13: the request failed";
  EXPECT_EQ(server.accepts(), 1);
}

// --- A nameserver that never answers --------------------------------------------------------
// Each case runs in a forked child with network and mount namespaces of its own (and a user
// namespace when not root): lo is up, a UDP socket on 127.0.0.1:53 receives queries and answers
// none, and /etc/resolv.conf is bind-mounted to name only it, with glibc's retries at their
// longest (30 s, 5 attempts). The child reports "key=value" lines on a pipe.

constexpr char kDeadName[] = "model.forkbox-dead-resolver.test";

bool WriteFile(const char* path, const std::string& text) {
  UniqueFd fd(::open(path, O_WRONLY | O_CLOEXEC));
  return fd && ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

std::string Why(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Enters the namespaces and starts the dead nameserver in *dns; "" or what failed.
std::string EnterDeadNameserver(UniqueFd* dns) {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (uid != 0) {
    if (::unshare(CLONE_NEWUSER) != 0) return Why("unshare(CLONE_NEWUSER)");
    if (!WriteFile("/proc/self/setgroups", "deny") ||
        !WriteFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !WriteFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) {
      return Why("the id maps");
    }
  }
  if (::unshare(CLONE_NEWNS | CLONE_NEWNET) != 0) return Why("unshare(CLONE_NEWNS|CLONE_NEWNET)");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return Why("mount");
  UniqueFd ctl(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ifreq ifr{};
  std::strcpy(ifr.ifr_name, "lo");
  if (!ctl || ::ioctl(ctl.get(), SIOCGIFFLAGS, &ifr) != 0) return Why("SIOCGIFFLAGS");
  ifr.ifr_flags |= IFF_UP;
  if (::ioctl(ctl.get(), SIOCSIFFLAGS, &ifr) != 0) return Why("SIOCSIFFLAGS");
  dns->reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(53);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!*dns || ::bind(dns->get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Why("bind 127.0.0.1:53");
  }
  char conf[] = "/tmp/forkbox-resolv-XXXXXX";
  UniqueFd file(::mkstemp(conf));
  const std::string text = "nameserver 127.0.0.1\noptions timeout:30 attempts:5\n";
  const bool written =
      file && ::write(file.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool mounted = written && ::mount(conf, "/etc/resolv.conf", nullptr, MS_BIND, nullptr) == 0;
  const std::string failed = mounted ? "" : Why("bind-mounting /etc/resolv.conf");
  if (file) ::unlink(conf);
  return failed;
}

bool QueryArrived(int dns) {
  pollfd p{dns, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// Forks; the child enters the dead-nameserver namespaces and runs `body`, whose lines come back.
// Skips the test where the namespaces cannot be made (no user namespaces in a jail, say).
std::string WithDeadNameserver(const std::function<std::string(int dns)>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return "pipe failed";
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    read_end.reset();
    UniqueFd dns;
    const std::string failed = EnterDeadNameserver(&dns);
    const std::string report = failed.empty() ? body(dns.get()) : "skip=" + failed + "\n";
    (void)!::write(write_end.get(), report.data(), report.size());
    ::_exit(0);
  }
  write_end.reset();
  // A child still silent after 30 s is stuck in the lookup (glibc's own bound here is 150 s).
  pollfd p{read_end.get(), POLLIN, 0};
  std::string report = "hung=still waiting after 30 s\n";
  if (::poll(&p, 1, 30'000) == 1) {
    report.clear();
    char buf[4096];
    for (ssize_t n; (n = ::read(read_end.get(), buf, sizeof(buf))) > 0;) report.append(buf, n);
  } else {
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_THAT(report, testing::Not(HasSubstr("hung=")));
  return report;
}

// What a Post to kDeadName reports, as lines.
std::string PostToTheDeadName(const HttpTimeouts& timeouts, CancelCheck cancel) {
  Result<std::unique_ptr<HttpClient>> client = HttpClient::Create(timeouts);
  if (!client.ok()) return "error=" + client.status().ToString() + "\n";
  (*client)->SetCancelCheck(std::move(cancel));
  const auto start = std::chrono::steady_clock::now();
  const HttpResult r = (*client)->Post(std::string("http://") + kDeadName + ":8080/v1/x",
                                       {"Content-Type: application/json"}, "{}", {});
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  return std::string("kind=") + HttpErrorKindName(r.error_kind) + "\nerror=" + r.transport_error +
         "\nms=" + std::to_string(ms) + "\n";
}

// The control: getaddrinfo itself, started on a thread before the Post; "done=0" once the Post
// has given up means it was still waiting on the dead nameserver.
std::atomic<bool>* StartPlainLookup() {
  auto* done = new std::atomic<bool>(false);  // Leaked: the child exits with the thread running.
  std::thread([done] {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(kDeadName, "8080", &hints, &found) == 0) ::freeaddrinfo(found);
    done->store(true);
  }).detach();
  return done;
}

TEST(HttpNativeTest, ANameserverThatNeverAnswersCostsTheConnectTimeout) {
  const std::string report = WithDeadNameserver([](int dns) {
    std::atomic<bool>* plain_done = StartPlainLookup();
    HttpTimeouts timeouts;
    timeouts.connect_ms = 1000;
    std::string lines = PostToTheDeadName(timeouts, {});
    return lines + "query=" + std::to_string(QueryArrived(dns)) +
           "\nplain_done=" + std::to_string(plain_done->load()) + "\n";
  });
  if (report.rfind("skip=", 0) == 0) GTEST_SKIP() << report;
  EXPECT_THAT(report, HasSubstr("kind=connect-timeout\n"));
  EXPECT_THAT(report, HasSubstr("error=no connection within 1 s (connect timeout)\n"));
  EXPECT_THAT(report, HasSubstr("query=1\n")) << "the lookup never reached the dead nameserver";
  // Control: the same lookup without the bound is still waiting.
  EXPECT_THAT(report, HasSubstr("plain_done=0\n"));
}

// The cancel check says stop from its second call on (after a wait of up to 1 s, the transfer's
// poll slice) and once the lookup reached the nameserver.
TEST(HttpNativeTest, CancelEndsAWaitOnANameserverThatNeverAnswers) {
  const std::string report = WithDeadNameserver([](int dns) {
    std::atomic<bool>* plain_done = StartPlainLookup();
    HttpTimeouts timeouts;
    timeouts.connect_ms = 60'000;
    int calls = 0;
    std::string lines =
        PostToTheDeadName(timeouts, [dns, &calls] { return ++calls >= 2 && QueryArrived(dns); });
    return lines + "calls=" + std::to_string(calls) +
           "\nplain_done=" + std::to_string(plain_done->load()) + "\n";
  });
  if (report.rfind("skip=", 0) == 0) GTEST_SKIP() << report;
  EXPECT_THAT(report, HasSubstr("kind=cancelled\n")) << report;
  EXPECT_THAT(report, testing::Not(HasSubstr("calls=1\n"))) << report;
  EXPECT_THAT(report, HasSubstr("plain_done=0\n"));
}

std::string HttpDate(time_t at) {
  char date[64];
  struct tm tm {};
  ::gmtime_r(&at, &tm);
  ::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return date;
}

TEST(HttpNativeTest, RetryAfterSecondsAndDates) {
  const std::string head = "HTTP/1.1 429 Too Many\r\nContent-Length: 0\r\nRetry-After: ";
  ScriptServer server(
      {Reply(head + "7\r\n\r\n"), Reply(head + HttpDate(::time(nullptr) + 30) + "\r\n\r\n"),
       Reply(head + HttpDate(::time(nullptr) - 30) + "\r\n\r\n"),
       Reply(head + HttpDate(::time(nullptr) + 400 * 24 * 3600) + "\r\n\r\n"),
       // Past 2262: beyond the clock's nanoseconds (a signed overflow fuzz_http found; the
       // sanitizer build aborts on it).
       Reply(head + "Fri, 31 Dec 2300 23:59:59 GMT\r\n\r\n"), Reply(head + "31536001\r\n\r\n")});
  auto client = Client();
  HttpResult seconds = Post(*client, server.url());
  ASSERT_TRUE(seconds.retry_after.has_value());
  EXPECT_EQ(*seconds.retry_after, std::chrono::seconds(7));
  EXPECT_EQ(seconds.headers["retry-after"], "7");
  HttpResult date = Post(*client, server.url());
  ASSERT_TRUE(date.retry_after.has_value()) << date.transport_error;
  EXPECT_GE(*date.retry_after, std::chrono::seconds(27));
  EXPECT_LE(*date.retry_after, std::chrono::seconds(30));
  HttpResult past = Post(*client, server.url());
  EXPECT_EQ(past.status, 429);
  EXPECT_FALSE(past.retry_after.has_value());
  // More than a year ahead, as a date or in seconds: not a delay to honour.
  for (const char* what : {"400 days", "year 2300", "a year and a second"}) {
    HttpResult far = Post(*client, server.url());
    EXPECT_EQ(far.status, 429) << what;
    EXPECT_FALSE(far.retry_after.has_value()) << what;
  }
}

TEST(HttpNativeTest, TheSinkStopsTheTransferAndErrorBodiesAreCollected) {
  ScriptServer server({Reply("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
                       Reply("HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nfail")});
  auto client = Client();
  int calls = 0;
  auto sink = [&](std::string_view) {
    ++calls;
    return false;
  };
  HttpResult r = Post(*client, server.url(), sink);
  EXPECT_TRUE(r.aborted_by_caller);
  EXPECT_EQ(r.error_kind, HttpErrorKind::kAborted);
  EXPECT_EQ(calls, 1);
  HttpResult error = Post(*client, server.url(), sink);
  EXPECT_EQ(error.transport_error, "");
  EXPECT_EQ(error.status, 500);
  EXPECT_EQ(error.body, "fail");
  EXPECT_EQ(calls, 1);  // A non-2xx body never reaches the sink.
}

TEST(HttpNativeTest, ConnectionRefusedSaysWhere) {
  int bound = 0;
  UniqueFd taken = loopback::BoundNotListening(&bound);
  ASSERT_TRUE(taken.valid());
  const std::string port = std::to_string(bound);
  auto client = Client();
  HttpResult r = Post(*client, "http://127.0.0.1:" + port + "/");
  EXPECT_EQ(r.error_kind, HttpErrorKind::kConnect);
  EXPECT_THAT(r.transport_error,
              HasSubstr("connect to 127.0.0.1:" + port + " failed: Connection refused"));
}

TEST(HttpNativeTest, CredentialsInTheUrlAreNeverSent) {
  ScriptServer server({Reply("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")});
  auto client = Client();
  HttpResult r = Post(*client, "http://user:pw@127.0.0.1:" + std::to_string(server.port()) + "/");
  EXPECT_EQ(r.error_kind, HttpErrorKind::kUrl);
  EXPECT_THAT(r.transport_error, HasSubstr("credentials"));
  EXPECT_EQ(server.accepts(), 0);
}

// In a forked process with SIGPIPE at its default action: a server that resets the connection
// while a large request is being written must give an error, not kill the process.
TEST(HttpNativeTest, NoSigpipeWhenTheServerResetsMidRequest) {
  ScriptServer server({[](int fd) {
    char buf[1024];
    (void)!::recv(fd, buf, sizeof(buf), 0);
    // FIN first (the client's socket goes to CLOSE_WAIT), then a reset: the client's next send
    // fails with EPIPE, which raises SIGPIPE unless the send says MSG_NOSIGNAL.
    ::shutdown(fd, SHUT_WR);
    const linger reset{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  }});
  const std::string url = server.url();
  auto client = Client();  // The module is loaded before the fork.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGPIPE, SIG_DFL);
    const std::string body(32 * 1024 * 1024, 'x');
    HttpResult r = client->Post(url, {}, body, {});
    ::_exit(r.error_kind == HttpErrorKind::kSend || r.error_kind == HttpErrorKind::kReceive ? 0
                                                                                            : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// How the provider describes an error status by its body: a JSON body without the error object
// is called JSON, not "non-JSON", and a status past 599 (which the client takes: any three
// digits) is said to be no HTTP status. Before, `{}` with 999 read "non-JSON error body: {}". The
// controls: a body that is not JSON is still called so, and a 500 gets no note.
TEST(ProviderHttpError, TheBodyAndTheStatusAreDescribedAsTheyAre) {
  struct Case {
    int status;
    std::string body;
    std::string expected;
  };
  for (const Case& c :
       {Case{999, "{}",
             "HTTP 999 (not an HTTP status: outside 100-599): JSON error body "
             "without an error message: {}"},
        Case{500, "{\"detail\":\"x\"}", "HTTP 500: JSON error body without an error message: "},
        Case{999, "oops",
             "HTTP 999 (not an HTTP status: outside 100-599): "
             "non-JSON error body: oops"},
        Case{500, "oops", "HTTP 500: non-JSON error body: oops"}}) {
    SCOPED_TRACE(std::to_string(c.status) + " " + c.body);
    ScriptServer server({Reply("HTTP/1.1 " + std::to_string(c.status) +
                               " Odd\r\nContent-Type: application/json\r\nContent-Length: " +
                               std::to_string(c.body.size()) + "\r\n\r\n" + c.body)});
    ProviderConfig config;
    config.name = "anthropic";
    config.api_key = "k";
    config.base_url = "http://127.0.0.1:" + std::to_string(server.port());
    config.model = "m";
    config.max_retries = 0;
    config.stream = false;
    Result<std::unique_ptr<Provider>> provider = MakeProvider(config);
    ASSERT_TRUE(provider.ok()) << provider.status().ToString();
    Request request;
    request.messages.push_back(Message{Role::kUser, {TextBlock{"hi"}}});
    const CallResult r = (*provider)->Complete(request, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error->http_status, c.status);
    EXPECT_THAT(r.error->ToString(), HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace forkbox::agent
