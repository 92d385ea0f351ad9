// The TLS module (forkbox-tls.so): client sessions from OpenSSL 3 behind the table in
// agent/http_tls.h. Loaded by the HTTP client only for https URLs.
#include "agent/http_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>

#include "base/status.h"

namespace forkbox::agent::http_tls {
namespace {

// The most recent OpenSSL error as text ("" when the queue is empty); empties the queue.
std::string OpenSslError() {
  unsigned long code = 0;
  unsigned long last = 0;
  while ((code = ERR_get_error()) != 0) last = code;
  if (last == 0) return "";
  char buf[256];
  ERR_error_string_n(last, buf, sizeof(buf));
  return buf;
}

// A socket BIO that sends with MSG_NOSIGNAL: a peer's reset never raises SIGPIPE. The BIO's data
// is the descriptor (not owned).
int BioWrite(BIO* bio, const char* data, size_t len, size_t* written) {
  BIO_clear_retry_flags(bio);
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  const ssize_t n = ::send(fd, data, len, MSG_NOSIGNAL);
  if (n >= 0) {
    *written = static_cast<size_t>(n);
    return 1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(bio);
  return 0;
}

int BioRead(BIO* bio, char* data, size_t len, size_t* got) {
  BIO_clear_retry_flags(bio);
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  const ssize_t n = ::recv(fd, data, len, 0);
  if (n > 0) {
    *got = static_cast<size_t>(n);
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  return 0;
}

long BioCtrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int BioCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* NoSignalBioMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "forkbox socket");
    if (m != nullptr) {
      BIO_meth_set_write_ex(m, BioWrite);
      BIO_meth_set_read_ex(m, BioRead);
      BIO_meth_set_ctrl(m, BioCtrl);
      BIO_meth_set_create(m, BioCreate);
    }
    return m;
  }();
  return method;
}

bool IsHashedName(const std::string& name) {
  const size_t dot = name.find('.');
  if (dot != 8 || dot + 1 >= name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (i != dot && !std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
  }
  return true;
}

// Every certificate of the hashed directories `dirs` (colon-separated), parsed now: the sandbox
// entered later may not show them (a private /tmp, a carved $HOME).
bool LoadCertDirs(X509_STORE* store, const std::string& dirs, std::string* error) {
  for (size_t start = 0; start <= dirs.size();) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, colon - start);
    start = colon + 1;
    if (dir.empty()) continue;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (!IsHashedName(entry.path().filename().string())) continue;
      if (X509_STORE_load_file(store, entry.path().c_str()) != 1) {
        *error = "cannot read the CA certificate " + entry.path().string() + ": " + OpenSslError();
        return false;
      }
    }
    if (ec) {
      *error = "cannot read SSL_CERT_DIR " + dir + ": " + ec.message();
      return false;
    }
  }
  return true;
}

bool SameDir(const std::string& a, const std::string& b) {
  std::error_code ec_a, ec_b;
  const auto ca = std::filesystem::canonical(a, ec_a), cb = std::filesystem::canonical(b, ec_b);
  return !ec_a && !ec_b && ca == cb;
}

// OpenSSL's default verify paths (SSL_CERT_FILE, SSL_CERT_DIR, else the system's), with two
// differences. The system's bundle file is not parsed (all ~140 CAs, 40-45 ms with OpenSSL 3.0
// here): the system's hashed directory (/etc/ssl/certs, kept by update-ca-certificates, readable
// in every sandbox) holds the same CAs and is read one issuer at a time during the handshake.
// A file or another directory named in the environment is parsed now, before any sandbox, and
// an unreadable one is an error instead of being skipped.
bool LoadCaStore(SSL_CTX* ctx, std::string* error) {
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  const char* file = std::getenv(X509_get_default_cert_file_env());
  if (file != nullptr && X509_STORE_load_file(store, file) != 1) {
    *error = std::string("cannot read SSL_CERT_FILE ") + file + ": " + OpenSslError();
    return false;
  }
  const std::string system_dir = X509_get_default_cert_dir();
  const char* dirs = std::getenv(X509_get_default_cert_dir_env());
  if (dirs != nullptr && !SameDir(dirs, system_dir)) return LoadCertDirs(store, dirs, error);
  if (SSL_CTX_load_verify_dir(ctx, system_dir.c_str()) != 1) {
    *error = "cannot use the CA directory " + system_dir + ": " + OpenSslError();
    return false;
  }
  return true;
}

SSL_CTX* MakeTlsContext(std::string* error) {
  if (OPENSSL_init_ssl(0, nullptr) != 1) {
    *error = "OpenSSL initialisation failed: " + OpenSslError();
    return nullptr;
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  static const unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  if (ctx == nullptr || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_alpn_protos(ctx, kAlpn, sizeof(kAlpn)) != 0 || NoSignalBioMethod() == nullptr) {
    *error = "cannot set up TLS: " + OpenSslError();
    SSL_CTX_free(ctx);
    return nullptr;
  }
  std::string why;
  if (!LoadCaStore(ctx, &why)) {
    *error = "cannot set up TLS: " + why;
    SSL_CTX_free(ctx);
    return nullptr;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  // A body read to the connection's end is checked by its framing.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

// The process's context, made once (the module is never unloaded).
SSL_CTX* Context(std::string* error) {
  static std::once_flag once;
  static SSL_CTX* ctx = nullptr;
  static std::string failure;
  std::call_once(once, [] { ctx = MakeTlsContext(&failure); });
  if (ctx == nullptr) *error = failure;
  return ctx;
}

struct Session {
  SSL* ssl = nullptr;
  std::string host;
  ~Session() { SSL_free(ssl); }
};

bool Init(std::string* error) {
  try {
    return Context(error) != nullptr;
  } catch (const std::exception& e) {
    *error = std::string("TLS module: ") + e.what();
    return false;
  }
}

void* Open(int fd, const std::string& host, bool ip_literal, std::string* error) {
  try {
    SSL_CTX* ctx = Context(error);
    if (ctx == nullptr) return nullptr;
    auto session = std::make_unique<Session>();
    session->host = host;
    session->ssl = SSL_new(ctx);
    BIO* bio = session->ssl != nullptr ? BIO_new(NoSignalBioMethod()) : nullptr;
    if (bio == nullptr) {
      *error = "cannot set up TLS: " + OpenSslError();
      return nullptr;
    }
    BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
    SSL_set_bio(session->ssl, bio, bio);
    SSL* ssl = session->ssl;
    const bool names_ok =
        ip_literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1
                   : SSL_set1_host(ssl, host.c_str()) == 1 &&
                         SSL_set_tlsext_host_name(ssl, host.c_str()) == 1;
    if (!names_ok) {
      *error = "cannot set up TLS: " + OpenSslError();
      return nullptr;
    }
    return session.release();
  } catch (const std::exception& e) {
    *error = std::string("TLS module: ") + e.what();
    return nullptr;
  }
}

void Close(void* session) { delete static_cast<Session*>(session); }

Io Handshake(void* handle, std::string* error) {
  Session& s = *static_cast<Session*>(handle);
  ERR_clear_error();
  const int rc = SSL_connect(s.ssl);
  if (rc == 1) return Io::kDone;
  const int err = SSL_get_error(s.ssl, rc);
  if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
  const long verify = SSL_get_verify_result(s.ssl);
  if (verify != X509_V_OK) {
    *error = "TLS certificate verification failed for " + s.host + ": " +
             X509_verify_cert_error_string(verify);
    return Io::kVerifyFailed;
  }
  const std::string why = OpenSslError();
  *error =
      "TLS handshake with " + s.host + " failed: " + (why.empty() ? "the connection closed" : why);
  return Io::kFailed;
}

// The failure text of an SSL_*_ex call that returned 0 with `err`; `why`: OpenSslError(), taken
// once (it empties the queue).
std::string FailureText(int err, const std::string& why) {
  if (err == SSL_ERROR_SYSCALL && why.empty() && errno != 0) {
    return Status::FromErrno(errno, "TLS").message();
  }
  return "TLS: " + (why.empty() ? std::string("the connection failed") : why);
}

Io Write(void* handle, const char* data, size_t len, size_t* done, std::string* error) {
  Session& s = *static_cast<Session*>(handle);
  ERR_clear_error();
  errno = 0;
  if (SSL_write_ex(s.ssl, data, len, done) == 1) return Io::kDone;
  const int err = SSL_get_error(s.ssl, 0);
  if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
  *error = FailureText(err, OpenSslError());
  return Io::kFailed;
}

Io Read(void* handle, char* buf, size_t len, size_t* done, std::string* error) {
  Session& s = *static_cast<Session*>(handle);
  ERR_clear_error();
  errno = 0;
  if (SSL_read_ex(s.ssl, buf, len, done) == 1) return Io::kDone;
  const int err = SSL_get_error(s.ssl, 0);
  if (err == SSL_ERROR_ZERO_RETURN) return Io::kClosed;
  if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
  const std::string why = OpenSslError();
  if (err == SSL_ERROR_SYSCALL && why.empty() && errno == 0)
    return Io::kClosed;  // No close_notify.
  *error = FailureText(err, why);
  return Io::kFailed;
}

}  // namespace
}  // namespace forkbox::agent::http_tls

extern "C" __attribute__((visibility("default"))) const forkbox::agent::http_tls::Api*
forkbox_tls_module() {
  using namespace forkbox::agent::http_tls;
  static const Api api{kAbiVersion, &Init, &Open, &Close, &Handshake, &Write, &Read};
  return &api;
}
