// The loader side of the HTTP client: finds the HTTP module next to the executable, dlopens it
// once and forwards every call through its table (agent/http_module.h).
#include "agent/http_client.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "agent/http_module.h"

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
  std::string path(exe, static_cast<size_t>(n));
  path.resize(path.rfind('/') + 1);
  return path + FORKBOX_HTTP_MODULE_RELPATH;
}

Result<const http_module::Api*> Open() {
  Result<std::string> path = ModulePath();
  if (!path.ok()) return path.status();
  // RTLD_LOCAL: curl's symbols stay out of the global scope. RTLD_LAZY, as a linked libcurl
  // was: resolving every function of curl's ~35 libraries up front (RTLD_NOW) costs milliseconds.
  void* handle = dlopen(path->c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    std::string why = dlerror();
    if (why.rfind(*path + ": ", 0) == 0) why.erase(0, path->size() + 2);
    return Status::Unavailable("cannot load the HTTP module " + *path + " (" + why +
                               "; cmake --install puts it there)");
  }
  auto entry = reinterpret_cast<http_module::EntryPoint>(dlsym(handle, http_module::kEntryPoint));
  const http_module::Api* api = entry != nullptr ? entry() : nullptr;
  if (api == nullptr || api->abi_version != http_module::kAbiVersion) {
    dlclose(handle);
    return Status::Unavailable("the HTTP module " + *path + " is not this build's (" +
                               http_module::kEntryPoint + " missing or of another version)");
  }
  return api;  // Never unloaded: curl's global state lives until exit.
}

// The module, loaded on first use; the process-wide dlopen handle is inherent to dlopen.
const Result<const http_module::Api*>& Module() {
  static const Result<const http_module::Api*> module = Open();
  return module;
}

}  // namespace

Status LoadHttp() { return Module().status(); }

Status WarmUpHttp() {
  const Result<const http_module::Api*>& api = Module();
  if (!api.ok()) return api.status();
  std::string error;
  if (!(*api)->global_init(&error)) return Status::Internal(error);
  return Status::Ok();
}

Result<uint16_t> UrlPort(const std::string& url) {
  const Result<const http_module::Api*>& api = Module();
  if (!api.ok()) return api.status();
  return (*api)->url_port(url);
}

namespace {
constexpr const char* kGnutlsNoImplicitInit = "GNUTLS_NO_IMPLICIT_INIT";

// True when it set the variable (and the join must unset it).
bool SetGnutlsNoImplicitInit() {
  return std::getenv(kGnutlsNoImplicitInit) == nullptr &&
         ::setenv(kGnutlsNoImplicitInit, "1", /*overwrite=*/0) == 0;
}
}  // namespace

HttpPreload::HttpPreload(PreloadStep step)
    : unset_gnutls_env_(SetGnutlsNoImplicitInit()), thread_([this, step] {
        status_ = step == PreloadStep::kModule ? LoadHttp() : WarmUpHttp();
      }) {}

HttpPreload::~HttpPreload() { Join(); }

Status HttpPreload::Wait() {
  Join();
  return status_;
}

void HttpPreload::Join() {
  if (thread_.joinable()) thread_.join();
  if (unset_gnutls_env_) ::unsetenv(kGnutlsNoImplicitInit);
  unset_gnutls_env_ = false;
}

HttpClient::HttpClient(const http_module::Api* api, void* curl, const HttpTimeouts& timeouts)
    : api_(api), curl_(curl), timeouts_(timeouts) {}

HttpClient::~HttpClient() { api_->destroy(curl_); }

Result<std::unique_ptr<HttpClient>> HttpClient::Create(const HttpTimeouts& timeouts) {
  const Result<const http_module::Api*>& api = Module();
  if (!api.ok()) return api.status();
  std::string error;
  void* curl = (*api)->create(&error);
  if (curl == nullptr) return Status::Internal(error);
  return std::unique_ptr<HttpClient>(new HttpClient(*api, curl, timeouts));
}

HttpResult HttpClient::Post(const std::string& url, const std::vector<std::string>& headers,
                            const std::string& body, const BodySink& sink) {
  return api_->post(curl_, timeouts_, url, headers, body, sink, cancelled_, on_sent_);
}

}  // namespace forkbox::agent
