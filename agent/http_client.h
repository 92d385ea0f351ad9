// A blocking HTTP POST client over one reused libcurl easy handle (keep-alive across calls).
// Not thread-safe: one HttpClient per thread (each Provider owns one).
// libcurl lives in the HTTP module, <executable's dir>/FORKBOX_HTTP_MODULE_RELPATH (the build and
// `cmake --install` lay it out so; never searched on LD_LIBRARY_PATH or in the cwd), loaded the
// first time a process needs HTTP: binaries that never talk to a model do not pay for libcurl.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/cancel.h"
#include "agent/retry.h"
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

struct HttpResult {
  // Transport outcome. `transport_error` is empty on success; otherwise it holds
  // curl_easy_strerror text (plus detail), and the fields below describe what arrived before.
  std::string transport_error;
  int curl_code = 0;
  bool idle_timeout = false;
  bool aborted_by_caller = false;  // The body callback returned false.
  bool cancelled = false;          // The cancel check said stop (SetCancelCheck).
  long status = 0;
  bool reused_connection = false;  // Keep-alive: no new connection was opened for this request.
  // The final response's headers that the clients use (kResponseHeaders in http_client.cc), by
  // lower-cased name, as curl_easy_header returns them.
  HeaderMap headers;
  // Retry-After (delta seconds or an HTTP date) as libcurl parsed it; nullopt when absent or 0.
  std::optional<std::chrono::milliseconds> retry_after;
  std::string body;  // The body, unless it was handed to the body callback.
};

// Loads the HTTP module once per process (dlopen of the module and libcurl's libraries, a few
// milliseconds). Call it before confining the process if the confinement might refuse the load;
// WarmUpHttp and HttpClient::Create call it too. The error names the module file.
Status LoadHttp();

// Loads the module and runs curl_global_init (TLS library set-up, several milliseconds) once per
// process. A standby child calls it while it waits for a task; HttpClient::Create calls it too.
// False sets *error.
Status WarmUpHttp();

// The TCP port curl connects to for `url`: explicit, else 443 (https) or 80 (http); 0 when curl
// cannot parse it or the scheme is another. Loads the module; an error only when it cannot load.
Result<uint16_t> UrlPort(const std::string& url);

// What an HttpPreload does on its thread.
enum class PreloadStep {
  kModule,         // LoadHttp: map the module and libcurl's libraries.
  kModuleAndCurl,  // WarmUpHttp: also curl_global_init (it may open and keep files).
};

// Runs LoadHttp or WarmUpHttp on a thread of its own, so that the few milliseconds of dynamic
// loading overlap the caller's other start-up work. Wait() joins it: call it before anything that
// needs a single-threaded process (fork of the spawner, unshare, Landlock, seccomp); the
// destructor joins too. Module() is a function-local static, so a caller that needs HTTP before
// Wait() simply blocks until the thread is done. Construct it while the process is
// single-threaded: until the join, GNUTLS_NO_IMPLICIT_INIT=1 is in the environment (unless it was
// set already), so that GnuTLS, loaded with libcurl only for librtmp (curl here speaks http and
// https only, over OpenSSL), skips its constructor's global set-up (~0.5 ms of CPU); librtmp
// calls gnutls_global_init itself before any use. Spawn nothing that inherits the environment
// before Wait().
class HttpPreload {
 public:
  explicit HttpPreload(PreloadStep step);
  HttpPreload(const HttpPreload&) = delete;
  HttpPreload& operator=(const HttpPreload&) = delete;
  ~HttpPreload();
  // The step's outcome; joins the thread on the first call.
  Status Wait();

 private:
  void Join();
  Status status_;
  bool unset_gnutls_env_ = false;  // Before thread_: set before the thread starts.
  std::thread thread_;             // Last: started once status_ exists.
};

class HttpClient {
 public:
  // Called for each body chunk of a 2xx response; return false to abort the transfer.
  using BodySink = std::function<bool(std::string_view chunk)>;

  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  ~HttpClient();

  // Returns nullptr and sets *error if the module cannot be loaded or curl initialised.
  static Result<std::unique_ptr<HttpClient>> Create(const HttpTimeouts& timeouts);

  // POSTs `body` to `url` with `headers` ("Name: value"). With a `sink`, a 2xx body streams into
  // it; error bodies (non-2xx) are always collected into HttpResult::body. The copies of `headers`
  // handed to curl are zeroed before they are freed (they carry the API key).
  HttpResult Post(const std::string& url, const std::vector<std::string>& headers,
                  const std::string& body, const BodySink& sink);

  // Polled by curl's progress callback (at least once a second, and whenever a signal interrupts
  // its wait): true aborts the transfer with HttpResult::cancelled set.
  void SetCancelCheck(CancelCheck cancelled) { cancelled_ = std::move(cancelled); }
  // Called once per Post as soon as the request is fully written to the connection (before the
  // reply is awaited); never for a request that could not be sent. May be empty.
  void SetRequestSentHook(std::function<void()> on_sent) { on_sent_ = std::move(on_sent); }

 private:
  HttpClient(const http_module::Api* api, void* curl, const HttpTimeouts& timeouts);
  const http_module::Api* api_;
  void* curl_;  // CURL*, owned; opaque: curl lives in the module.
  HttpTimeouts timeouts_;
  CancelCheck cancelled_;
  std::function<void()> on_sent_;
};

}  // namespace forkbox::agent
