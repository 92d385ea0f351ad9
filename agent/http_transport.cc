#include "agent/http_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace forkbox::agent::http_native {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string ErrnoText(int err, std::string_view what) {
  return Status::FromErrno(err, what).message();
}

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

std::string Duration(int64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

}  // namespace

TransferClock::TransferClock(const HttpTimeouts& timeouts, const CancelCheck* cancelled)
    : timeouts_(timeouts), cancelled_(cancelled) {
  const Time now = steady_clock::now();
  total_end_ = now + milliseconds(timeouts.total_ms);
  last_byte_ = now;
  last_cancel_check_ = now;
}

void TransferClock::StartConnect() {
  connect_end_ = steady_clock::now() + milliseconds(timeouts_.connect_ms);
}
void TransferClock::EndConnect() { connect_end_ = Time::max(); }
void TransferClock::Heard() { last_byte_ = steady_clock::now(); }

HttpFailure TransferClock::Expired(Time now) {
  if (now >= connect_end_) {
    return {HttpErrorKind::kConnectTimeout,
            "no connection within " + Duration(timeouts_.connect_ms) + " (connect timeout)"};
  }
  if (now >= last_byte_ + milliseconds(timeouts_.idle_ms)) {
    return {HttpErrorKind::kIdleTimeout,
            "no response byte for " + Duration(timeouts_.idle_ms) + " (idle timeout)"};
  }
  if (now >= total_end_) {
    return {HttpErrorKind::kTotalTimeout,
            "the request took longer than " + Duration(timeouts_.total_ms) + " (total timeout)"};
  }
  return {};
}

HttpFailure TransferClock::PollCancel() {
  last_cancel_check_ = steady_clock::now();
  if (cancelled_ != nullptr && *cancelled_ && (*cancelled_)()) {
    return {HttpErrorKind::kCancelled, "cancelled"};
  }
  return {};
}

HttpFailure TransferClock::Check() {
  const Time now = steady_clock::now();
  if (HttpFailure f = Expired(now)) return f;
  if (now - last_cancel_check_ >= milliseconds(200)) return PollCancel();
  return {};
}

HttpFailure TransferClock::Wait(int fd, short events) {
  for (;;) {
    if (HttpFailure f = PollCancel()) return f;
    const Time now = steady_clock::now();
    if (HttpFailure f = Expired(now)) return f;
    const Time end = std::min({connect_end_, last_byte_ + milliseconds(timeouts_.idle_ms),
                               total_end_, now + milliseconds(1000)});
    const auto slice = std::chrono::ceil<milliseconds>(end - now).count();
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(slice, 1)));
    if (n > 0) return {};
    if (n < 0 && errno != EINTR) return {HttpErrorKind::kReceive, ErrnoText(errno, "poll")};
  }
}

// --- TLS -----------------------------------------------------------------------------------

namespace {

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
  // A body read to the connection's end is checked by its framing, as curl did.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

}  // namespace

SSL_CTX* TlsContext(std::string* error) {
  static std::once_flag once;
  static SSL_CTX* ctx = nullptr;
  static std::string failure;
  std::call_once(once, [] { ctx = MakeTlsContext(&failure); });
  if (ctx == nullptr) *error = failure;
  return ctx;
}

// --- Connection ------------------------------------------------------------------------------

namespace {

std::string AddressText(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text,
              sizeof(text));
    return "[" + std::string(text) + "]";
  }
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof(text));
  return text;
}

// One non-blocking connect under the clock; the error names the address.
UniqueFd ConnectOne(const addrinfo& ai, uint16_t port, TransferClock& clock, HttpFailure* failure) {
  const std::string where =
      "connect to " + AddressText(ai.ai_addr) + ":" + std::to_string(port) + " failed";
  UniqueFd fd(::socket(ai.ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    *failure = {HttpErrorKind::kConnect, ErrnoText(errno, where)};
    return {};
  }
  const int one = 1;
  if (::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
      ::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0) {
    *failure = {HttpErrorKind::kConnect, ErrnoText(errno, "setsockopt")};
    return {};
  }
  if (::connect(fd.get(), ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      *failure = {HttpErrorKind::kConnect, ErrnoText(errno, where)};
      return {};
    }
    if ((*failure = clock.Wait(fd.get(), POLLOUT))) return {};
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      *failure = {HttpErrorKind::kConnect, ErrnoText(err, where)};
      return {};
    }
  }
  return fd;
}

struct AddrInfoFree {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};

}  // namespace

std::unique_ptr<Connection> Connection::Open(const ParsedUrl& url, TransferClock& clock,
                                             HttpFailure* failure) {
  clock.StartConnect();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (url.ip_literal ? AI_NUMERICHOST : 0);
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &found);
  std::unique_ptr<addrinfo, AddrInfoFree> list(found);
  if (rc != 0) {
    *failure = {HttpErrorKind::kResolve,
                "cannot resolve " + url.host + ": " +
                    (rc == EAI_SYSTEM ? ErrnoText(errno, "getaddrinfo") : gai_strerror(rc))};
    return nullptr;
  }
  UniqueFd fd;
  for (const addrinfo* ai = list.get(); ai != nullptr && !fd; ai = ai->ai_next) {
    fd = ConnectOne(*ai, url.port, clock, failure);
    const HttpErrorKind kind = failure->kind;
    if (!fd && kind != HttpErrorKind::kConnect) return nullptr;  // Timeout or cancel: stop.
  }
  if (!fd) return nullptr;
  *failure = {};
  std::unique_ptr<Connection> conn(new Connection(std::move(fd), url));
  if (url.tls && (*failure = conn->Handshake(clock))) return nullptr;
  clock.EndConnect();
  return conn;
}

Connection::~Connection() { SSL_free(ssl_); }

bool Connection::Serves(const ParsedUrl& url) const {
  return url.tls == url_.tls && url.host == url_.host && url.port == url_.port;
}

HttpFailure Connection::Handshake(TransferClock& clock) {
  std::string error;
  SSL_CTX* ctx = TlsContext(&error);
  if (ctx == nullptr) return {HttpErrorKind::kTls, error};
  ssl_ = SSL_new(ctx);
  BIO* bio = ssl_ != nullptr ? BIO_new(NoSignalBioMethod()) : nullptr;
  if (bio == nullptr) return {HttpErrorKind::kTls, "cannot set up TLS: " + OpenSslError()};
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd_.get())));
  SSL_set_bio(ssl_, bio, bio);
  const bool names_ok =
      url_.ip_literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), url_.host.c_str()) == 1
                      : SSL_set1_host(ssl_, url_.host.c_str()) == 1 &&
                            SSL_set_tlsext_host_name(ssl_, url_.host.c_str()) == 1;
  if (!names_ok) return {HttpErrorKind::kTls, "cannot set up TLS: " + OpenSslError()};
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return {};
    const int err = SSL_get_error(ssl_, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      if (HttpFailure f = clock.Wait(fd_.get(), err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) {
        return f;
      }
      continue;
    }
    const long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK) {
      return {HttpErrorKind::kTlsVerify, "TLS certificate verification failed for " + url_.host +
                                             ": " + X509_verify_cert_error_string(verify)};
    }
    const std::string why = OpenSslError();
    return {HttpErrorKind::kTls, "TLS handshake with " + url_.host +
                                     " failed: " + (why.empty() ? "the connection closed" : why)};
  }
}

HttpFailure Connection::WriteAll(std::string_view data, TransferClock& clock) {
  while (!data.empty()) {
    if (HttpFailure f = clock.Check()) return f;
    size_t n = 0;
    short wait = POLLOUT;
    if (ssl_ == nullptr) {
      const ssize_t sent = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (sent >= 0) n = static_cast<size_t>(sent);
      if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return {HttpErrorKind::kSend, ErrnoText(errno, "sending the request failed")};
      }
    } else {
      ERR_clear_error();
      errno = 0;
      if (SSL_write_ex(ssl_, data.data(), data.size(), &n) != 1) {
        const int err = SSL_get_error(ssl_, 0);
        if (err == SSL_ERROR_WANT_READ) wait = POLLIN;
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
          return {HttpErrorKind::kSend,
                  "sending the request failed: " + (errno != 0 && err == SSL_ERROR_SYSCALL
                                                        ? ErrnoText(errno, "TLS")
                                                        : "TLS: " + OpenSslError())};
        }
      }
    }
    data.remove_prefix(n);
    if (n == 0) {
      if (HttpFailure f = clock.Wait(fd_.get(), wait)) return f;
    }
  }
  return {};
}

HttpFailure Connection::ReadSome(char* buf, size_t len, size_t* got, TransferClock& clock) {
  for (;;) {
    if (HttpFailure f = clock.Check()) return f;
    short wait = POLLIN;
    if (ssl_ == nullptr) {
      const ssize_t n = ::recv(fd_.get(), buf, len, 0);
      if (n >= 0) {
        *got = static_cast<size_t>(n);
        return {};
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return {HttpErrorKind::kReceive, ErrnoText(errno, "receiving the response failed")};
      }
    } else {
      ERR_clear_error();
      errno = 0;
      if (SSL_read_ex(ssl_, buf, len, got) == 1) return {};
      const int err = SSL_get_error(ssl_, 0);
      if (err == SSL_ERROR_ZERO_RETURN) {
        *got = 0;
        return {};
      }
      if (err == SSL_ERROR_WANT_WRITE) wait = POLLOUT;
      if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
        const std::string why = OpenSslError();
        if (err == SSL_ERROR_SYSCALL && why.empty() && errno == 0) {  // EOF without close_notify.
          *got = 0;
          return {};
        }
        return {HttpErrorKind::kReceive,
                "receiving the response failed: " +
                    (why.empty() ? ErrnoText(errno, "TLS") : "TLS: " + why)};
      }
    }
    if (HttpFailure f = clock.Wait(fd_.get(), wait)) return f;
  }
}

}  // namespace forkbox::agent::http_native
