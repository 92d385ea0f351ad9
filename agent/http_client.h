// A blocking HTTP/1.1 POST client that keeps its connection alive across calls.
// Not thread-safe: one HttpClient per thread (each Provider owns one).
// The client (agent/http_native.cc, over POSIX sockets and OpenSSL 3 for https) lives in the HTTP
// module, <executable's dir>/FORKBOX_HTTP_MODULE_RELPATH (the build and `cmake --install` lay it
// out so; never searched on LD_LIBRARY_PATH or in the cwd), loaded the first time a process needs
// HTTP: binaries that never talk to a model do not load libssl. No proxy support: the agents'
// Landlock allows TCP connect only to the model's port, so a proxy could never be reached.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cancel.h"
#include "agent/retry.h"
#include "base/background.h"
#include "base/status.h"

namespace forkbox::agent {

namespace http_module {
struct Api;
}

struct HttpTimeouts {
  int64_t connect_ms = 10'000;
  int64_t idle_ms = 120'000;  // No byte received for this long aborts the transfer.
  int64_t total_ms = 600'000;
};

// Why a transfer failed (HttpResult::error_kind).
enum class HttpErrorKind {
  kNone,
  kUrl,             // The URL cannot be used (scheme, host, port, credentials in it).
  kResolve,         // getaddrinfo failed.
  kConnect,         // No address accepted the connection.
  kConnectTimeout,  // Connect and TLS handshake took longer than connect_ms.
  kTls,             // TLS set-up or handshake failed.
  kTlsVerify,       // The server's certificate is not trusted or not for this host.
  kSend,            // Writing the request failed.
  kReceive,         // Reading the response failed, or it ended early.
  kProtocol,        // The server's reply is not valid HTTP/1.x (or exceeds the limits).
  kTooLarge,        // A collected (non-2xx) body exceeds 256 MiB.
  kIdleTimeout,     // No byte received for idle_ms.
  kTotalTimeout,    // The whole transfer took longer than total_ms.
  kCancelled,       // The cancel check said stop.
  kAborted,         // The body sink returned false.
  kInternal,        // Out of memory or another local failure.
};

// A short name for messages: "connect", "tls-verify", "idle-timeout", ...
const char* HttpErrorKindName(HttpErrorKind kind);

// A non-2xx body is read up to this many bytes (any error JSON fits; a 2xx body is not cut).
inline constexpr size_t kMaxErrorBodyBytes = 1024 * 1024;

struct HttpResult {
  // Transport outcome. `transport_error` is empty on success; otherwise it says what failed
  // ("connect to 127.0.0.1:9 failed: Connection refused ..."), `error_kind` classifies it, and
  // the fields below describe what arrived before.
  std::string transport_error;
  HttpErrorKind error_kind = HttpErrorKind::kNone;
  bool idle_timeout = false;
  bool aborted_by_caller = false;  // The body callback returned false.
  bool cancelled = false;          // The cancel check said stop (SetCancelCheck).
  long status = 0;
  bool reused_connection = false;  // Keep-alive: no new connection was opened for this request.
  // The final response's headers that the clients use (kResponseHeaders in http_native.cc), by
  // lower-cased name (the first of repeated ones).
  HeaderMap headers;
  // Retry-After (delta seconds, or an HTTP date relative to now); nullopt when absent, 0 or past.
  std::optional<std::chrono::milliseconds> retry_after;
  std::string body;  // The body, unless it was handed to the body callback.
  // A non-2xx body longer than kMaxErrorBodyBytes: `body` holds its first bytes and the rest was
  // never read.
  bool body_cut = false;
};

// The directory from which the program at `exe` (an absolute path) loads the HTTP and TLS modules:
// <directory of exe>/<FORKBOX_HTTP_MODULE_RELPATH's directory>, e.g.
// "/usr/local/bin/../lib/forkbox".
std::string HttpModuleDirOf(const std::string& exe);

// Loads the HTTP module once per process (dlopen of the module alone, linked with libc only; the
// TLS module, with libssl and libcrypto, is loaded only for an https URL). Call it before confining
// the process if the confinement might refuse the load; WarmUpHttp and HttpClient::Create call it
// too. The error names the module file.
Status LoadHttp();

// True for an https URL (case-insensitive scheme): only then is TLS set up.
bool WantsTls(const std::string& url);

// Loads the module and, for an https `url`, the TLS module and its set-up once per process
// (dlopen of libssl and libcrypto, OpenSSL's set-up and the CA store, a few milliseconds): a
// standby child calls it while it waits for a task. An http URL costs no TLS set-up at all; the
// first https request would do it otherwise. Thread-safe (Module() is a function-local static): for
// an https model the parent and the child run it on a thread of their own (Background) while the
// sandbox is set up.
Status WarmUpHttp(const std::string& url);

// Where WarmUpHttp(url) is worth running when it should overlap other start-up work: on a thread of
// its own (Background) only for an https URL, whose TLS set-up takes milliseconds; an http URL's
// module load costs less than the thread does (README, the twelfth round), so in the caller.
RunOn WarmUpHttpOn(const std::string& url);

// WarmUpHttp(url) as a Background placed by WarmUpHttpOn: what the parent and the child start
// before their sandbox and join (Get) before confining themselves.
Background<Status> StartWarmUpHttp(const std::string& url);

// The TCP port the client connects to for `url`: explicit, else 443 (https) or 80 (http); 0 when
// it cannot be parsed or the scheme is another (agent/http_url.h). Userinfo does not change the
// port; a Post refuses a URL with userinfo. Needs no module (the Result never fails today).
Result<uint16_t> UrlPort(const std::string& url);

class HttpClient {
 public:
  // Called for each body chunk of a 2xx response; return false to abort the transfer.
  using BodySink = std::function<bool(std::string_view chunk)>;

  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  ~HttpClient();

  // An error if the module cannot be loaded.
  static Result<std::unique_ptr<HttpClient>> Create(const HttpTimeouts& timeouts);

  // POSTs `body` to `url` with `headers` ("Name: value"). With a `sink`, a 2xx body streams into
  // it; error bodies (non-2xx) are always collected into HttpResult::body. The request buffer
  // (it holds `headers`, so the API key) is zeroed before it is freed.
  HttpResult Post(const std::string& url, const std::vector<std::string>& headers,
                  const std::string& body, const BodySink& sink);

  // Polled during a transfer (at least once a second, and whenever a signal interrupts a wait):
  // true aborts the transfer with HttpResult::cancelled set.
  void SetCancelCheck(CancelCheck cancelled) { cancelled_ = std::move(cancelled); }
  // Called once per Post as soon as the request is fully written to the connection (before the
  // reply is awaited); never for a request that could not be sent. May be empty.
  void SetRequestSentHook(std::function<void()> on_sent) { on_sent_ = std::move(on_sent); }

 private:
  HttpClient(const http_module::Api* api, void* handle, const HttpTimeouts& timeouts);
  const http_module::Api* api_;
  void* handle_;  // The module's client (its kept-alive connection), owned; opaque.
  HttpTimeouts timeouts_;
  CancelCheck cancelled_;
  std::function<void()> on_sent_;
};

}  // namespace forkbox::agent
