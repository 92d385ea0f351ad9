// "Pay only for what you use": warming the HTTP stack for an http model loads no TLS library
// and sets up no TLS (the CA store is never read); for an https model it does both. Its own
// executable: the TLS set-up happens once per process, so no other test may have done it first.
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/http_client.h"
#include "base/unique_fd.h"

namespace forkbox::agent {
namespace {

namespace fs = std::filesystem;

// True when this process has `name` mapped (a loaded shared object).
bool Mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(name) != std::string::npos) return true;
  }
  return false;
}

// True when the watch saw the file opened since the last call.
bool Opened(int inotify_fd) {
  alignas(inotify_event) char buf[4096];
  bool seen = false;
  while (::read(inotify_fd, buf, sizeof(buf)) > 0) seen = true;
  return seen;
}

// In a forked process (the TLS set-up is once per process, and no test here has done it yet):
// WarmUpHttp for an https model with SSL_CERT_FILE naming `ca`; the exit code says how it went
// (0 ok, 1 the expected error naming the file, 2 anything else).
int WarmUpWithCaFile(const std::string& ca) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setenv("SSL_CERT_FILE", ca.c_str(), 1) != 0) ::_exit(2);
    Status st = WarmUpHttp("https://api.example.com");
    if (st.ok()) ::_exit(0);
    ::_exit(st.message().find("cannot read SSL_CERT_FILE " + ca) != std::string::npos ? 1 : 2);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// A CA file named in the environment that cannot be read is an error naming it (OpenSSL alone
// would skip it and then refuse every server). Control: the system bundle file is read.
TEST(HttpLazyTlsTest, AnUnreadableSslCertFileIsAnErrorNamingIt) {
  EXPECT_EQ(WarmUpWithCaFile("/nonexistent/forkbox-ca.pem"), 1);
  EXPECT_EQ(WarmUpWithCaFile("/etc/ssl/certs/ca-certificates.crt"), 0);
}

TEST(HttpLazyTlsTest, AnHttpModelReadsNoCaStoreAndAnHttpsModelDoes) {
  char tmpl[] = "/tmp/forkbox-lazy-tls-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path ca = fs::path(tmpl) / "ca.pem";
  ASSERT_EQ(std::system(("openssl req -x509 -days 2 -newkey ec -pkeyopt "
                         "ec_paramgen_curve:prime256v1 -nodes -subj /CN=forkbox-lazy -keyout " +
                         ca.string() + ".key -out " + ca.string() + " >/dev/null 2>&1")
                            .c_str()),
            0);
  ASSERT_EQ(::setenv("SSL_CERT_FILE", ca.c_str(), 1), 0);
  UniqueFd watch(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  ASSERT_TRUE(watch.valid());
  ASSERT_GE(::inotify_add_watch(watch.get(), ca.c_str(), IN_OPEN), 0);

  // A test executable may link OpenSSL itself (a sanitizer build's does, through the mock's
  // libraries): then only the TLS module tells.
  const bool ssl_linked = Mapped("libssl.so");
  ASSERT_TRUE(WarmUpHttp("http://127.0.0.1:1/v1").ok());
  EXPECT_TRUE(Mapped("forkbox-http.so"));
  EXPECT_FALSE(Opened(watch.get())) << "an http model set up TLS";
  EXPECT_FALSE(Mapped("forkbox-tls.so"));
  if (!ssl_linked) {
    EXPECT_FALSE(Mapped("libssl.so")) << "an http model loaded OpenSSL";
  }
  // Control: an https model loads the TLS module and reads the CA store (once per process).
  ASSERT_TRUE(WarmUpHttp("https://api.example.com").ok());
  EXPECT_TRUE(Opened(watch.get())) << "the https warm-up did not read SSL_CERT_FILE";
  EXPECT_TRUE(Mapped("forkbox-tls.so"));
  EXPECT_TRUE(Mapped("libssl.so"));
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace forkbox::agent
