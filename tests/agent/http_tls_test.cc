// The native HTTP client's TLS (agent/http_transport.cc) against an OpenSSL server on a thread,
// with a CA and leaf certificates made by the `openssl` CLI for this process. Every refusal has
// its control: the same client and server with a certificate it must accept.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "agent/http_client.h"
#include "base/unique_fd.h"
#include "tests/agent/loopback_listener.h"

namespace forkbox::agent {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

fs::path g_dir;  // The certificates of this test process.

bool Shell(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// A key and a certificate for `san`, signed by the test CA (or self-signed without `ca`).
bool MakeCert(const std::string& name, const std::string& san, bool ca_signed) {
  const std::string base = (g_dir / name).string();
  const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
                          base + ".key -subj /CN=forkbox-test ";
  if (!ca_signed) {
    return Shell("openssl req -x509 -days 2" + key + "-out " + base + ".pem -addext " + san);
  }
  const std::string ext = base + ".ext";
  std::ofstream(ext) << san << "\n";
  return Shell("openssl req" + key + "-out " + base + ".csr") &&
         Shell("openssl x509 -req -days 2 -in " + base + ".csr -CA " + (g_dir / "ca.pem").string() +
               " -CAkey " + (g_dir / "ca.key").string() + " -CAcreateserial -out " + base +
               ".pem -extfile " + ext);
}

class HttpTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/forkbox-tls-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    g_dir = tmpl;
    ASSERT_TRUE(
        Shell("openssl req -x509 -days 2 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
              "-nodes -keyout " +
              (g_dir / "ca.key").string() + " -out " + (g_dir / "ca.pem").string() +
              " -subj /CN=forkbox-test-ca"));
    ASSERT_TRUE(MakeCert("leaf", "subjectAltName=DNS:localhost,IP:127.0.0.1", true));
    ASSERT_TRUE(MakeCert("other", "subjectAltName=DNS:other.example,IP:127.0.0.2", true));
    ASSERT_TRUE(MakeCert("self", "subjectAltName=DNS:localhost,IP:127.0.0.1", false));
    // Before the first https request: the client sets up its CA store once per process. A
    // hashed directory (SSL_CERT_DIR), as the system's is read; http_lazy_tls_test covers
    // SSL_CERT_FILE.
    fs::create_directory(g_dir / "store");
    fs::copy_file(g_dir / "ca.pem", g_dir / "store" / "ca.pem");
    ASSERT_TRUE(Shell("openssl rehash " + (g_dir / "store").string()));
    ASSERT_EQ(::unsetenv("SSL_CERT_FILE"), 0);
    ASSERT_EQ(::setenv("SSL_CERT_DIR", (g_dir / "store").c_str(), 1), 0);
  }
  static void TearDownTestSuite() { fs::remove_all(g_dir); }
};

// Serves `requests` requests on one TLS connection with the certificate `name`; counts the
// request bytes it decrypted.
class TlsServer {
 public:
  TlsServer(const std::string& name, int requests) : requests_(requests) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    const std::string base = (g_dir / name).string();
    if (ctx_ == nullptr ||
        SSL_CTX_use_certificate_file(ctx_, (base + ".pem").c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx_, (base + ".key").c_str(), SSL_FILETYPE_PEM) != 1) {
      ADD_FAILURE() << "cannot load " << base;
      return;
    }
    listener_ = loopback::Listen(4, &port_);
    if (!listener_) return;
    thread_ = std::thread([this] { Serve(); });
  }
  ~TlsServer() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    SSL_CTX_free(ctx_);
  }
  std::string url(const std::string& host) const {
    return "https://" + host + ":" + std::to_string(port_) + "/v1/x";
  }
  size_t request_bytes() const { return request_bytes_.load(); }

 private:
  void Serve() {
    UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) return;
    SSL* ssl = SSL_new(ctx_);
    SSL_set_fd(ssl, conn.get());
    if (SSL_accept(ssl) == 1) {
      for (int i = 0; i < requests_ && ReadRequest(ssl); ++i) {
        const std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        if (SSL_write(ssl, reply.data(), static_cast<int>(reply.size())) <= 0) break;
      }
    }
    SSL_free(ssl);
  }
  // One request: its head and its Content-Length body.
  bool ReadRequest(SSL* ssl) {
    std::string got;
    char buf[4096];
    for (size_t need = std::string::npos; got.size() < need;) {
      const size_t end = got.find("\r\n\r\n");
      if (need == std::string::npos && end != std::string::npos) {
        const size_t cl = got.find("Content-Length: ");
        need = end + 4 + (cl < end ? std::stoul(got.substr(cl + 16)) : 0);
        continue;
      }
      const int n = SSL_read(ssl, buf, sizeof(buf));
      if (n <= 0) return false;
      got.append(buf, static_cast<size_t>(n));
      request_bytes_ += static_cast<size_t>(n);
    }
    return true;
  }

  int requests_;
  SSL_CTX* ctx_ = nullptr;
  UniqueFd listener_;
  int port_ = 0;
  std::atomic<size_t> request_bytes_{0};
  std::thread thread_;
};

HttpResult Post(const std::string& url, int times = 1) {
  Result<std::unique_ptr<HttpClient>> client = HttpClient::Create(HttpTimeouts{});
  EXPECT_TRUE(client.ok());
  HttpResult r;
  for (int i = 0; i < times; ++i) r = (*client)->Post(url, {"X-Api-Key: secret"}, "{}", {});
  return r;
}

TEST_F(HttpTlsTest, TrustedViaSslCertDirByNameAndByIpWithKeepAlive) {
  TlsServer by_name("leaf", 2);
  HttpResult r = Post(by_name.url("localhost"), 2);
  EXPECT_EQ(r.transport_error, "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_TRUE(r.reused_connection);
  TlsServer by_ip("leaf", 1);
  HttpResult ip = Post(by_ip.url("127.0.0.1"));
  EXPECT_EQ(ip.transport_error, "");
  EXPECT_EQ(ip.status, 200);
}

TEST_F(HttpTlsTest, AnUntrustedSelfSignedCertificateIsRefusedBeforeAnyRequestByte) {
  TlsServer server("self", 1);
  HttpResult r = Post(server.url("localhost"));
  EXPECT_EQ(r.error_kind, HttpErrorKind::kTlsVerify);
  EXPECT_THAT(r.transport_error,
              HasSubstr("TLS certificate verification failed for localhost: self-signed"));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(server.request_bytes(), 0u);  // The key never left.
}

TEST_F(HttpTlsTest, ACertificateForAnotherNameOrIpIsRefused) {
  TlsServer name("other", 1);
  HttpResult by_name = Post(name.url("localhost"));
  EXPECT_EQ(by_name.error_kind, HttpErrorKind::kTlsVerify);
  EXPECT_THAT(by_name.transport_error, HasSubstr("hostname mismatch"));
  EXPECT_EQ(name.request_bytes(), 0u);
  TlsServer ip("other", 1);
  HttpResult by_ip = Post(ip.url("127.0.0.1"));
  EXPECT_EQ(by_ip.error_kind, HttpErrorKind::kTlsVerify);
  EXPECT_THAT(by_ip.transport_error, HasSubstr("IP address mismatch"));
  EXPECT_EQ(ip.request_bytes(), 0u);
}

// A one-shot run of the confined forkbox against `url`: its stderr.
std::string OneShot(const std::string& url) {
  const fs::path work = g_dir / "work";
  fs::create_directories(work);
  const fs::path err = g_dir / "stderr";
  const std::string bin = FORKBOX_BIN_DIR;
  const std::string run = "cd " + work.string() + " && ANTHROPIC_API_KEY=not-a-key " + bin +
                          "/forkbox --provider anthropic --base-url " + url + " --child-path " +
                          bin + "/forkbox-child --standby 0 --max-retries 0 --idle-timeout 10 " +
                          "--workdir " + work.string() + " --quiet hello >/dev/null 2>" +
                          err.string();
  EXPECT_NE(std::system(run.c_str()), 0);  // The reply is no model's: the run fails.
  std::ifstream in(err);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The sandboxed parent speaks TLS: its CA directory (under /tmp, which layer 2 replaces) was read
// before the confinement. The reply is not a model's, so the run fails after the exchange.
TEST_F(HttpTlsTest, TheConfinedParentVerifiesAndSends) {
  TlsServer server("leaf", 1);
  const std::string err = OneShot(server.url("localhost"));
  EXPECT_GT(server.request_bytes(), 0u) << err;
  EXPECT_EQ(err.find("TLS"), std::string::npos) << err;
  // Control: an untrusted server is refused by the same confined run, before any request byte.
  TlsServer untrusted("self", 1);
  const std::string refused = OneShot(untrusted.url("localhost"));
  EXPECT_THAT(refused, HasSubstr("TLS certificate verification failed for localhost"));
  EXPECT_EQ(untrusted.request_bytes(), 0u);
}

}  // namespace
}  // namespace forkbox::agent
