// The interface between the HTTP loader (agent/http_client.cc, in every binary) and the HTTP
// module (agent/http_curl.cc, built as the shared module forkbox-http.so with libcurl and its
// ~35 libraries). The module is dlopen'ed the first time a binary needs HTTP, so a binary that
// never talks to a model (`forkbox sandbox`, `--help`, `--version`) never loads libcurl.
// Both sides are built together from this header; kAbiVersion guards a stale module.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/http_client.h"

namespace forkbox::agent::http_module {

inline constexpr int kAbiVersion = 2;

// The module's entry point, looked up with dlsym.
inline constexpr const char* kEntryPoint = "forkbox_http_module";

struct Api {
  int abi_version = 0;
  // curl_global_init, once per process. False sets *error.
  bool (*global_init)(std::string* error) = nullptr;
  // A fresh easy handle (CURL*), or nullptr with *error set.
  void* (*create)(std::string* error) = nullptr;
  void (*destroy)(void* handle) = nullptr;
  HttpResult (*post)(void* handle, const HttpTimeouts& timeouts, const std::string& url,
                     const std::vector<std::string>& headers, const std::string& body,
                     const HttpClient::BodySink& sink, const CancelCheck& cancelled,
                     const std::function<void()>& on_sent) = nullptr;
  // The TCP port curl would connect to for `url` (explicit, else the scheme's default); 0 when
  // curl cannot parse it or the scheme is neither http nor https.
  uint16_t (*url_port)(const std::string& url) = nullptr;
};

using EntryPoint = const Api* (*)();

}  // namespace forkbox::agent::http_module
