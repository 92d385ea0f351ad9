// The interface between the HTTP loader (agent/http_client.cc, in every binary) and the HTTP
// module (agent/http_native.cc, built as the shared module forkbox-http.so, linked with libc only;
// TLS is a module of its own, agent/http_tls.h). The module is dlopen'ed the first time a binary
// needs HTTP, so a binary that never talks to a model (`forkbox sandbox`, `--help`, `--version`)
// never loads it.
// Both sides are built together from this header; kAbiVersion guards a stale module.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/http_client.h"
#include "agent/http_tls.h"

namespace forkbox::agent::http_module {

inline constexpr int kAbiVersion = 5;

// The module's entry point, looked up with dlsym.
inline constexpr const char* kEntryPoint = "forkbox_http_module";

struct Api {
  int abi_version = 0;
  // Hands over the TLS module's table (loaded and initialised by the caller) for every https
  // connection from now on; until then one fails with kTls.
  void (*use_tls)(const http_tls::Api* tls) = nullptr;
  // A fresh client (no connection yet), or nullptr with *error set.
  void* (*create)(std::string* error) = nullptr;
  void (*destroy)(void* handle) = nullptr;
  HttpResult (*post)(void* handle, const HttpTimeouts& timeouts, const std::string& url,
                     const std::vector<std::string>& headers, const std::string& body,
                     const HttpClient::BodySink& sink, const CancelCheck& cancelled,
                     const std::function<void()>& on_sent) = nullptr;
};

using EntryPoint = const Api* (*)();

}  // namespace forkbox::agent::http_module
