// The interface between the HTTP module (agent/http_transport.cc, in forkbox-http.so) and the TLS
// module (agent/http_tls.cc, built as forkbox-tls.so, the only one linked with libssl and
// libcrypto). The loader (agent/http_client.cc) dlopens the TLS module next to the HTTP module
// only for an https URL, so a plain-http model (a local server, the mock) never maps OpenSSL.
// Both sides are built together from this header; kAbiVersion guards a stale module.
#pragma once

#include <cstddef>
#include <string>

namespace forkbox::agent::http_tls {

inline constexpr int kAbiVersion = 1;

// The module's entry point, looked up with dlsym.
inline constexpr const char* kEntryPoint = "forkbox_tls_module";

// What one step of a session did. kWantRead/kWantWrite: wait until the socket is readable or
// writable and call again. kClosed: the peer ended the stream (reads only). kFailed: *error says
// why (kVerifyFailed: the peer's certificate or name did not verify).
enum class Io { kDone, kWantRead, kWantWrite, kClosed, kFailed, kVerifyFailed };

struct Api {
  int abi_version = 0;
  // OpenSSL's set-up and the CA store (SSL_CERT_FILE / SSL_CERT_DIR, else the system's hashed
  // directory), once per process. False sets *error.
  bool (*init)(std::string* error) = nullptr;
  // A client session over the connected socket `fd` (not owned; sends use MSG_NOSIGNAL) that
  // verifies the peer as `host` (an IP literal as an address). Null with *error set.
  void* (*open)(int fd, const std::string& host, bool ip_literal, std::string* error) = nullptr;
  void (*close)(void* session) = nullptr;
  Io (*handshake)(void* session, std::string* error) = nullptr;
  // *done: bytes written or read by a kDone step.
  Io (*write)(void* session, const char* data, size_t len, size_t* done,
              std::string* error) = nullptr;
  Io (*read)(void* session, char* buf, size_t len, size_t* done, std::string* error) = nullptr;
};

using EntryPoint = const Api* (*)();

}  // namespace forkbox::agent::http_tls
