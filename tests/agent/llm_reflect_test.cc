// An endpoint or gateway that reflects the API key into what forkbox quotes in its errors: an
// error page, a header value, a reply that is no JSON, an error type or message, a malformed
// header line. Each quote is cut (an excerpt of 40 to 200 characters, a message of 16 KiB), and the
// cut here falls inside a realistic 108-character key: no piece of the key of 8 characters or
// more may reach the error. Before, the whole key was redacted after the cut, which no longer
// found it, and 38 to 40 characters of it were printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>

#include "agent/provider.h"
#include "agent/wire.h"
#include "base/unique_fd.h"
#include "tests/agent/loopback_listener.h"

namespace forkbox::agent {
namespace {

using testing::HasSubstr;

// A realistic Anthropic key: 108 characters.
const std::string kKey =
    "sk-ant-api03-" + std::string(69, 'x') + "REFLECTED-" + std::string(9, 'y') + "AA-BBBB";

// The x-api-key value of a request head, or "".
std::string KeyOf(const std::string& head) {
  const std::string name = "x-api-key: ";
  const size_t at = head.find(name);
  if (at == std::string::npos) return "";
  return head.substr(at + name.size(), head.find("\r\n", at) - at - name.size());
}

// Answers one request with what `reply` makes of the request's x-api-key.
using Reflection = std::function<std::string(const std::string& key)>;
class ReflectingServer {
 public:
  explicit ReflectingServer(Reflection reply) : reply_(std::move(reply)) {
    listener_ = loopback::Listen(1, &port_);
    if (listener_) thread_ = std::thread([this] { Serve(); });
  }
  ~ReflectingServer() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void Serve() {
    UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) return;
    const std::string reply = reply_(KeyOf(loopback::ReadRequest(conn.get())));
    (void)!::send(conn.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
  }
  Reflection reply_;
  UniqueFd listener_;
  int port_ = 0;
  std::thread thread_;
};

// A complete HTTP/1.1 response that closes the connection.
std::string Response(const std::string& status, const std::string& headers,
                     const std::string& body) {
  return "HTTP/1.1 " + status + "\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// The error of one call to an endpoint that answers what `reply` makes of the key it got.
ModelError ErrorFrom(const Reflection& reply, bool stream = false) {
  ReflectingServer server(reply);
  ProviderConfig config;
  config.name = "anthropic";
  config.api_key = kKey;
  config.base_url = server.url();
  config.model = "m";
  config.stream = stream;
  config.max_retries = 0;
  Result<std::unique_ptr<Provider>> provider = MakeProvider(config);
  EXPECT_TRUE(provider.ok()) << provider.status().ToString();
  if (!provider.ok()) return {};
  Request request;
  request.messages.push_back(Message{Role::kUser, {TextBlock{"hi"}}});
  CallResult r = (*provider)->Complete(request, [](std::string_view) {});
  EXPECT_FALSE(r.ok());
  return r.ok() ? ModelError{} : *r.error;
}

// The length of the longest piece of kKey, from its start, that `text` holds.
size_t KeyPrefixIn(const std::string& text) {
  size_t n = 0;
  while (n < kKey.size() && text.find(kKey.substr(0, n + 1)) != std::string::npos) ++n;
  return n;
}

// No piece of 8 characters or more anywhere in the error, and the cut (`after`) fell inside the
// key: what is left of it was redacted right before it. The control is in the cut: without it
// the whole key is in the quote, which the old redaction found too.
void ExpectRedactedAtTheCut(const ModelError& e, const std::string& after) {
  const std::string text =
      e.ToString() + "\n" + e.message + "\n" + e.error_type + "\n" + e.request_id;
  EXPECT_LT(KeyPrefixIn(text), 8u) << text;
  EXPECT_THAT(text, HasSubstr("[REDACTED]" + after));
}

// `n` letters and a space: what follows starts at a known column of the quote.
std::string Filler(size_t n) { return std::string(n, 'z') + " "; }

// The page excerpt keeps 200 characters: the key starts at 178 of them.
TEST(KeyReflectedAcrossACut, InAnErrorPage) {
  ExpectRedactedAtTheCut(ErrorFrom([](const std::string& key) {
                           return Response("502 Bad Gateway", "Content-Type: text/html\r\n",
                                           "<html><body><h1>502 Bad Gateway</h1><p>" + Filler(150) +
                                               "x-api-key: " + key +
                                               " anthropic-version: 2023-06-01</p></body></html>");
                         }),
                         "...");
}

// 60 characters of a content-type are quoted: the key starts at 22.
TEST(KeyReflectedAcrossACut, InTheContentTypeOfASuccess) {
  ExpectRedactedAtTheCut(
      ErrorFrom([](const std::string& key) {
        return Response("200 OK", "Content-Type: text/plain; reflected=" + key + "\r\n", "x");
      }),
      "...\", not application/json");
}

// 40 characters of a content-encoding are quoted: the key is all of it.
TEST(KeyReflectedAcrossACut, InTheContentEncodingOfASuccess) {
  ExpectRedactedAtTheCut(
      ErrorFrom([](const std::string& key) {
        return Response("200 OK",
                        "Content-Type: application/json\r\nContent-Encoding: " + key + "\r\n", "x");
      }),
      "...\", which forkbox did not ask for");
}

// Excerpt keeps 120 bytes of a reply that is no JSON: the key starts at 90.
TEST(KeyReflectedAcrossACut, InAReplyThatIsNoJson) {
  ExpectRedactedAtTheCut(ErrorFrom([](const std::string& key) {
                           return Response("200 OK", "Content-Type: application/json\r\n",
                                           "{\"echo\": " + Filler(80) + key);
                         }),
                         "...");
}

// The same in a stream event's data.
TEST(KeyReflectedAcrossACut, InAStreamEventThatIsNoJson) {
  ExpectRedactedAtTheCut(
      ErrorFrom(
          [](const std::string& key) {
            return Response("200 OK", "Content-Type: text/event-stream\r\n",
                            "event: message_start\ndata: {\"echo\": " + Filler(80) + key + "\n\n");
          },
          /*stream=*/true),
      "...");
}

// An error type is a label, cut to an Excerpt: the key starts at 91.
TEST(KeyReflectedAcrossACut, InAnErrorType) {
  ExpectRedactedAtTheCut(ErrorFrom([](const std::string& key) {
                           return Response("400 Bad Request", "Content-Type: application/json\r\n",
                                           "{\"error\":{\"type\":\"" + Filler(90) + key +
                                               "\",\"message\":\"bad key\"}}");
                         }),
                         "...");
}

// An error message keeps 16 KiB: the key starts 39 bytes before the cut.
TEST(KeyReflectedAcrossACut, InAnErrorMessagePastItsLimit) {
  ExpectRedactedAtTheCut(ErrorFrom([](const std::string& key) {
                           return Response(
                               "400 Bad Request", "Content-Type: application/json\r\n",
                               "{\"error\":{\"type\":\"invalid_request_error\",\"message\":\"" +
                                   Filler(16 * 1024 - 40) + key + "\"}}");
                         }),
                         "\n[... error message truncated");
}

// The HTTP client quotes 80 characters of a malformed header line: the key starts at 48.
TEST(KeyReflectedAcrossACut, InAMalformedHeaderLine) {
  ExpectRedactedAtTheCut(ErrorFrom([](const std::string& key) {
                           return "HTTP/1.1 200 OK\r\nx-echo " + Filler(40) + key + "\r\n\r\n";
                         }),
                         "'");
}

// The control of the cut: a short page quotes the key whole, which was always redacted.
TEST(KeyReflectedAcrossACut, WholeInAShortPage) {
  const ModelError e = ErrorFrom([](const std::string& key) {
    return Response("502 Bad Gateway", "Content-Type: text/html\r\n", "<p>Bad key " + key + "</p>");
  });
  EXPECT_LT(KeyPrefixIn(e.ToString()), 8u) << e.ToString();
  EXPECT_THAT(e.message, HasSubstr("Bad key [REDACTED]"));
}

// RedactKey itself: the key whole and every piece of 8 characters or more from its start, each
// as long as it matches; a shorter piece, and the key's middle, stay.
TEST(RedactKey, RedactsTheKeyAndWhatACutLeftOfIt) {
  const std::string key = "sk-ant-api03-abcdefgh";
  EXPECT_EQ(RedactKey("a " + key + " b " + key.substr(0, 12) + "... c", key),
            "a [REDACTED] b [REDACTED]... c");
  EXPECT_EQ(RedactKey(key + key, key), "[REDACTED][REDACTED]");
  EXPECT_EQ(RedactKey("sk-ant- " + key.substr(5), key), "sk-ant- " + key.substr(5));
  EXPECT_EQ(RedactKey("x sk-12 y", "sk-12"), "x [REDACTED] y") << "a short key, whole only";
  EXPECT_EQ(RedactKey("x sk- y", "sk-"), "x sk- y") << "shorter than 4: left alone";
}

}  // namespace
}  // namespace forkbox::agent
