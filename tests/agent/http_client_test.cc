// The HTTP loader's side of the module: the URL port the client connects to, the preload thread,
// and the request-sent hook (what the parent starts its standby children on; issue 18).
#include "agent/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "base/background.h"
#include "base/unique_fd.h"
#include "tests/agent/loopback_listener.h"

namespace forkbox::agent {
namespace {

TEST(UrlPortTest, ExplicitAndDefaultPorts) {
  EXPECT_EQ(*UrlPort("http://127.0.0.1:8123"), 8123);
  EXPECT_EQ(*UrlPort("http://127.0.0.1:8123/v1"), 8123);
  EXPECT_EQ(*UrlPort("https://api.anthropic.com"), 443);
  EXPECT_EQ(*UrlPort("HTTP://example.com/v1"), 80);
  EXPECT_EQ(*UrlPort("http://user:pw@host:9000/x"), 9000);
  EXPECT_EQ(*UrlPort("http://[::1]:7000/v1"), 7000);
  EXPECT_EQ(*UrlPort("http://[::1]/v1"), 80);
}

TEST(UrlPortTest, GarbageGivesZero) {
  EXPECT_EQ(*UrlPort("localhost:8080"), 0);
  EXPECT_EQ(*UrlPort("ftp://host"), 0);
  EXPECT_EQ(*UrlPort("http://host:99999"), 0);
  EXPECT_EQ(*UrlPort("http://host:12ab"), 0);
}

int Threads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// As the parent and the child do for an https model (WarmUpHttpOn): the modules load on a thread
// of its own, and once joined the process is single-threaded again (unshare(CLONE_NEWUSER) would
// work). An http URL on a thread, which they no longer do, must work the same.
TEST(WarmUpHttpTest, LoadsOnABackgroundThreadAndGetLeavesOneThread) {
  const int before = Threads();
  for (const char* url : {"http://127.0.0.1:1/v1", "https://api.example.com"}) {
    Background<Status> preload([url] { return WarmUpHttp(url); });
    ASSERT_TRUE(preload.Get().ok()) << url;
    EXPECT_EQ(Threads(), before);
  }
  EXPECT_TRUE(LoadHttp().ok());
}

// Only the TLS set-up is worth a thread of its own: an http model's module load runs in the caller.
TEST(WarmUpHttpOnTest, AThreadOnlyForHttps) {
  EXPECT_EQ(WarmUpHttpOn("https://api.anthropic.com"), RunOn::kThread);
  EXPECT_EQ(WarmUpHttpOn("HTTPS://api.openai.com/v1"), RunOn::kThread);
  EXPECT_EQ(WarmUpHttpOn("http://127.0.0.1:8123"), RunOn::kCaller);
  EXPECT_EQ(WarmUpHttpOn("garbage"), RunOn::kCaller);
}

// What the parent and the child start: for an http model no thread, the module loaded in Get();
// the control, an https model, gets its thread.
TEST(WarmUpHttpOnTest, StartWarmUpHttpStartsAThreadOnlyForHttps) {
  Background<Status> http = StartWarmUpHttp("http://127.0.0.1:1/v1");
  EXPECT_FALSE(http.on_thread()) << "an http model's warm-up started a thread";
  EXPECT_TRUE(http.Get().ok());
  EXPECT_TRUE(LoadHttp().ok());
  Background<Status> https = StartWarmUpHttp("https://api.example.com");
  EXPECT_TRUE(https.on_thread());
  EXPECT_TRUE(https.Get().ok());
  EXPECT_FALSE(https.on_thread());
}

TEST(WantsTlsTest, OnlyHttpsUrls) {
  EXPECT_TRUE(WantsTls("https://api.anthropic.com"));
  EXPECT_TRUE(WantsTls("HTTPS://api.anthropic.com/v1"));
  EXPECT_FALSE(WantsTls("http://127.0.0.1:8123"));
  EXPECT_FALSE(WantsTls("garbage"));
}

// A one-shot HTTP server on 127.0.0.1 that reads a whole request and answers only once `release`
// says so (or after a bound that fails the test), so a hook that fires only with the reply, or
// never, is seen.
class HeldServer {
 public:
  HeldServer() {
    listener_ = loopback::Listen(1, &port_);
    if (!listener_) return;
    thread_ = std::thread([this] { Serve(); });
  }
  ~HeldServer() { thread_.join(); }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/x"; }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool released_in_time() const { return released_in_time_; }

 private:
  void Serve() {
    UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) return;
    std::string got;
    char buf[4096];
    while (got.find("\r\n\r\nhello") == std::string::npos) {
      ssize_t n = ::read(conn.get(), buf, sizeof(buf));
      if (n <= 0) return;
      got.append(buf, static_cast<size_t>(n));
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      released_in_time_ =
          cv_.wait_for(lock, std::chrono::seconds(10), [this] { return released_; });
    }
    const std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    (void)!::write(conn.get(), reply.data(), reply.size());
  }

  UniqueFd listener_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  bool released_in_time_ = false;
  std::thread thread_;
};

TEST(RequestSentHookTest, FiresOnceWhenTheRequestIsWrittenBeforeAnyReply) {
  HeldServer server;
  Result<std::unique_ptr<HttpClient>> client = HttpClient::Create(HttpTimeouts{});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::atomic<int> told{0};
  (*client)->SetRequestSentHook([&] {
    ++told;
    server.Release();  // The server answers only after this: no reply can have caused it.
  });
  HttpResult result = (*client)->Post(server.url(), {"Content-Type: text/plain"}, "hello", {});
  EXPECT_TRUE(server.released_in_time()) << "the hook did not fire while the reply was held";
  EXPECT_EQ(result.transport_error, "");
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(result.body, "ok");
  EXPECT_EQ(told.load(), 1);
}

TEST(RequestSentHookTest, NeverFiresForARequestThatCannotBeSent) {
  // A port nobody listens on: bound, never listening.
  int port = 0;
  UniqueFd taken = loopback::BoundNotListening(&port);
  ASSERT_TRUE(taken.valid());
  Result<std::unique_ptr<HttpClient>> client = HttpClient::Create(HttpTimeouts{});
  ASSERT_TRUE(client.ok());
  int told = 0;
  (*client)->SetRequestSentHook([&] { ++told; });
  HttpResult result =
      (*client)->Post("http://127.0.0.1:" + std::to_string(port) + "/", {}, "hello", {});
  EXPECT_NE(result.transport_error, "");
  EXPECT_EQ(told, 0);
}

}  // namespace
}  // namespace forkbox::agent
