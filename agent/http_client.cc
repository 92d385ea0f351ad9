// The loader side of the HTTP client: finds the HTTP module next to the executable, dlopens it
// once and forwards every call through its table (agent/http_module.h).
#include "agent/http_client.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "agent/http_module.h"
#include "agent/http_tls.h"
#include "agent/http_url.h"

#ifndef FORKBOX_HTTP_MODULE_RELPATH
#error "FORKBOX_HTTP_MODULE_RELPATH (the module's path relative to the executable's dir) is unset"
#endif

namespace forkbox::agent {
namespace {

// The module's absolute path: the directory of /proc/self/exe plus the configured relative path.
Result<std::string> ModulePath() {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n < 0) return Status::FromErrno(errno, "readlink /proc/self/exe (to find the HTTP module)");
  const std::string relpath = FORKBOX_HTTP_MODULE_RELPATH;
  return HttpModuleDirOf(std::string(exe, static_cast<size_t>(n))) +
         relpath.substr(relpath.rfind('/'));
}

}  // namespace

std::string HttpModuleDirOf(const std::string& exe) {
  const std::string relpath = FORKBOX_HTTP_MODULE_RELPATH;
  return exe.substr(0, exe.rfind('/') + 1) + relpath.substr(0, relpath.rfind('/'));
}

namespace {

// dlopens `path` and calls its entry point `entry` for the module's table, checking its ABI
// version. `what` names the module in errors.
template <typename Api>
Result<const Api*> OpenModule(const std::string& path, const char* entry, int abi,
                              const std::string& what) {
  // RTLD_LOCAL: the module's symbols stay out of the global scope. RTLD_LAZY: functions never
  // called (most of libssl's and libcrypto's, for the TLS module) are never resolved.
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    std::string why = dlerror();
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    return Status::Unavailable("cannot load the " + what + " " + path + " (" + why +
                               "; cmake --install puts it there)");
  }
  using EntryPoint = const Api* (*)();
  auto entry_point = reinterpret_cast<EntryPoint>(dlsym(handle, entry));
  const Api* api = entry_point != nullptr ? entry_point() : nullptr;
  if (api == nullptr || api->abi_version != abi) {
    dlclose(handle);
    return Status::Unavailable("the " + what + " " + path + " is not this build's (" + entry +
                               " missing or of another version)");
  }
  return api;  // Never unloaded: OpenSSL's global state lives until exit.
}

Result<const http_module::Api*> Open() {
  Result<std::string> path = ModulePath();
  if (!path.ok()) return path.status();
  return OpenModule<http_module::Api>(*path, http_module::kEntryPoint, http_module::kAbiVersion,
                                      "HTTP module");
}

// The TLS module (forkbox-tls.so, next to the HTTP module), loaded, initialised (OpenSSL and the
// CA store) and handed to the HTTP module.
Status OpenTls(const http_module::Api& http) {
  Result<std::string> path = ModulePath();
  if (!path.ok()) return path.status();
  path->resize(path->rfind('/') + 1);
  Result<const http_tls::Api*> tls = OpenModule<http_tls::Api>(
      *path + "forkbox-tls.so", http_tls::kEntryPoint, http_tls::kAbiVersion, "TLS module");
  if (!tls.ok()) return tls.status();
  std::string error;
  if (!(*tls)->init(&error)) return Status::Internal(error);
  http.use_tls(*tls);
  return Status::Ok();
}

// The module, loaded on first use; the process-wide dlopen handle is inherent to dlopen.
const Result<const http_module::Api*>& Module() {
  static const Result<const http_module::Api*> module = Open();
  return module;
}

}  // namespace

Status LoadHttp() { return Module().status(); }

bool WantsTls(const std::string& url) {
  Result<ParsedUrl> parsed = ParseHttpUrl(url);
  return parsed.ok() && parsed->tls;
}

namespace {

// The TLS module for this process, once: its outcome stays (a failure is not retried).
const Status& Tls(const http_module::Api& http) {
  static const Status tls = OpenTls(http);
  return tls;
}

}  // namespace

RunOn WarmUpHttpOn(const std::string& url) {
  return WantsTls(url) ? RunOn::kThread : RunOn::kCaller;
}

Background<Status> StartWarmUpHttp(const std::string& url) {
  return Background<Status>([url] { return WarmUpHttp(url); }, WarmUpHttpOn(url));
}

Status WarmUpHttp(const std::string& url) {
  const Result<const http_module::Api*>& api = Module();
  if (!api.ok()) return api.status();
  return WantsTls(url) ? Tls(**api) : Status::Ok();
}

Result<uint16_t> UrlPort(const std::string& url) {
  Result<ParsedUrl> parsed = ParseHttpUrl(url);
  return parsed.ok() ? parsed->port : uint16_t{0};
}

const char* HttpErrorKindName(HttpErrorKind kind) {
  switch (kind) {
    case HttpErrorKind::kNone:
      return "none";
    case HttpErrorKind::kUrl:
      return "url";
    case HttpErrorKind::kResolve:
      return "resolve";
    case HttpErrorKind::kConnect:
      return "connect";
    case HttpErrorKind::kConnectTimeout:
      return "connect-timeout";
    case HttpErrorKind::kTls:
      return "tls";
    case HttpErrorKind::kTlsVerify:
      return "tls-verify";
    case HttpErrorKind::kSend:
      return "send";
    case HttpErrorKind::kReceive:
      return "receive";
    case HttpErrorKind::kProtocol:
      return "protocol";
    case HttpErrorKind::kTooLarge:
      return "too-large";
    case HttpErrorKind::kIdleTimeout:
      return "idle-timeout";
    case HttpErrorKind::kTotalTimeout:
      return "total-timeout";
    case HttpErrorKind::kCancelled:
      return "cancelled";
    case HttpErrorKind::kAborted:
      return "aborted";
    case HttpErrorKind::kInternal:
      return "internal";
  }
  return "unknown";
}

HttpClient::HttpClient(const http_module::Api* api, void* handle, const HttpTimeouts& timeouts)
    : api_(api), handle_(handle), timeouts_(timeouts) {}

HttpClient::~HttpClient() { api_->destroy(handle_); }

Result<std::unique_ptr<HttpClient>> HttpClient::Create(const HttpTimeouts& timeouts) {
  const Result<const http_module::Api*>& api = Module();
  if (!api.ok()) return api.status();
  std::string error;
  void* handle = (*api)->create(&error);
  if (handle == nullptr) return Status::Internal(error);
  return std::unique_ptr<HttpClient>(new HttpClient(*api, handle, timeouts));
}

HttpResult HttpClient::Post(const std::string& url, const std::vector<std::string>& headers,
                            const std::string& body, const BodySink& sink) {
  if (WantsTls(url)) {
    if (const Status& tls = Tls(*api_); !tls.ok()) {
      HttpResult failed;
      failed.error_kind = HttpErrorKind::kTls;
      failed.transport_error = tls.message();
      return failed;
    }
  }
  return api_->post(handle_, timeouts_, url, headers, body, sink, cancelled_, on_sent_);
}

}  // namespace forkbox::agent
