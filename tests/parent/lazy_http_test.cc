// Issue 18, "pay only for what you use": the forkbox binary links no TLS library; the HTTP
// module is loaded from <executable's dir>/FORKBOX_HTTP_MODULE_RELPATH the first time a model is
// called. A copy of the binary without the module beside it still runs `--version` and
// `forkbox sandbox`, and a model call fails with an error naming the missing file.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class LazyHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-lazy-http-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directory(dir_ / "bin");
    fs::create_directory(dir_ / "work");
    fs::copy_file(fs::path(FORKBOX_BIN_DIR) / "forkbox", dir_ / "bin" / "forkbox");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `command` through the shell with stdout and stderr captured in files.
  Outcome Shell(const std::string& command) {
    Outcome r;
    const fs::path out = dir_ / "out", err = dir_ / "err";
    int status = std::system((command + " >" + out.string() + " 2>" + err.string()).c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = Slurp(out);
    r.err = Slurp(err);
    return r;
  }

  // A one-shot run against a port nobody listens on: it stops at its first model call.
  Outcome ModelCall(const fs::path& forkbox, const std::string& url = "http://127.0.0.1:9") {
    return Shell("cd " + (dir_ / "work").string() + " && ANTHROPIC_API_KEY=not-a-key " +
                 forkbox.string() + " --provider anthropic --base-url " + url + " " +
                 "--child-path " + FORKBOX_BIN_DIR + "/forkbox-child --standby 0 --max-retries 0" +
                 " --workdir " + (dir_ / "work").string() + " --quiet hello");
  }

  fs::path dir_;
};

// The libraries `ldd` lists for `file` (names before " => ", or the path for the loader).
std::vector<std::string> Libraries(const std::string& ldd_output) {
  std::vector<std::string> names;
  std::istringstream lines(ldd_output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string name;
    if (words >> name) names.push_back(name);
  }
  return names;
}

// What a sanitizer build links into everything (FORKBOX_SANITIZE): never in a release build.
bool SanitizerRuntime(const std::string& lib) {
#if defined(FORKBOX_SANITIZE)
  for (const char* runtime :
       {"libasan.so", "libubsan.so", "libstdc++.so", "libm.so", "libgcc_s.so"}) {
    if (lib.rfind(runtime, 0) == 0) return true;
  }
#endif
  (void)lib;
  return false;
}

TEST_F(LazyHttp, TheBinaryAndTheHttpModuleLinkNoTlsLibraryTheTlsModuleOnlyOpenSsl) {
  Outcome r = Shell("ldd " + std::string(FORKBOX_BIN_DIR) + "/forkbox");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("libssl"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("libcurl"), std::string::npos) << r.out;
  // The HTTP module needs libc alone; the TLS module next to it (loaded only for https) is what
  // carries libssl (the control), and nothing but libssl, libcrypto and libc. Sanitizer builds
  // add their runtimes and the shared libstdc++ (sanitizer_runtime).
  const std::string http = std::string(FORKBOX_BIN_DIR) + "/" + FORKBOX_HTTP_MODULE_RELPATH;
  const std::string tls = http.substr(0, http.rfind('/') + 1) + "forkbox-tls.so";
  for (const std::string& module : {http, tls}) {
    Outcome ldd = Shell("ldd " + module);
    ASSERT_EQ(ldd.exit_code, 0) << ldd.err;
    const std::vector<std::string> libs = Libraries(ldd.out);
    const bool has_ssl = std::find(libs.begin(), libs.end(), "libssl.so.3") != libs.end();
    EXPECT_EQ(has_ssl, module == tls) << ldd.out;
    for (const std::string& lib : libs) {
      const bool openssl = lib == "libssl.so.3" || lib == "libcrypto.so.3";
      const bool allowed = (openssl && module == tls) || lib == "libc.so.6" ||
                           lib.rfind("linux-vdso", 0) == 0 ||
                           lib.find("/ld-linux") != std::string::npos || SanitizerRuntime(lib);
      EXPECT_TRUE(allowed) << lib << " in " << module << ":\n" << ldd.out;
    }
  }
}

// Every shared library costs each start (`forkbox sandbox -- CMD`, each task child) its loading:
// the executables link libc alone. libseccomp stays with the build-time table compiler
// (sandbox/seccomp_install.cc holds the runtime half), and no libm is needed.
TEST_F(LazyHttp, TheExecutablesLinkLibcAlone) {
  for (const char* exe : {"forkbox", "forkbox-child"}) {
    Outcome ldd = Shell("ldd " + std::string(FORKBOX_BIN_DIR) + "/" + exe);
    ASSERT_EQ(ldd.exit_code, 0) << ldd.err;
    const std::vector<std::string> libs = Libraries(ldd.out);
    ASSERT_NE(std::find(libs.begin(), libs.end(), "libc.so.6"), libs.end()) << ldd.out;
    for (const std::string& lib : libs) {
      const bool allowed = lib == "libc.so.6" || lib.rfind("linux-vdso", 0) == 0 ||
                           lib.find("/ld-linux") != std::string::npos || SanitizerRuntime(lib);
      EXPECT_TRUE(allowed) << lib << " in " << exe << ":\n" << ldd.out;
    }
  }
}

// The executables bind every symbol at start-up, behind a read-only GOT (full RELRO), with packed
// relative relocations (CMakeLists.txt): no lazy binding in the launcher, in a tool's namespace
// init or in a command before its exec, and no GOT page written in each of them.
TEST_F(LazyHttp, TheExecutablesBindNowWithFullRelro) {
#if defined(FORKBOX_SANITIZE)
  GTEST_SKIP() << "sanitizer builds keep the toolchain's link defaults";
#endif
  for (const char* exe : {"forkbox", "forkbox-child"}) {
    const std::string path = std::string(FORKBOX_BIN_DIR) + "/" + exe;
    Outcome dynamic = Shell("readelf -dW " + path);
    ASSERT_EQ(dynamic.exit_code, 0) << dynamic.err;
    EXPECT_NE(dynamic.out.find("BIND_NOW"), std::string::npos) << exe << ":\n" << dynamic.out;
    EXPECT_NE(dynamic.out.find("(RELR)"), std::string::npos) << exe << ":\n" << dynamic.out;
    Outcome segments = Shell("readelf -lW " + path);
    ASSERT_EQ(segments.exit_code, 0) << segments.err;
    EXPECT_NE(segments.out.find("GNU_RELRO"), std::string::npos) << exe << ":\n" << segments.out;
  }
}

TEST_F(LazyHttp, VersionAndSandboxRunWithoutTheModule) {
  const std::string forkbox = (dir_ / "bin" / "forkbox").string();
  Outcome version = Shell(forkbox + " --version");
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_NE(version.out.find("forkbox "), std::string::npos) << version.out;
  Outcome check = Shell(forkbox + " sandbox --check");
  if (check.exit_code != 0) GTEST_SKIP() << "the sandbox cannot be enforced here: " << check.out;
  Outcome sandboxed = Shell(forkbox + " sandbox --workdir " + (dir_ / "work").string() +
                            " -- /bin/sh -c 'echo ran'");
  EXPECT_EQ(sandboxed.exit_code, 0) << sandboxed.err;
  EXPECT_EQ(sandboxed.out, "ran\n");
}

TEST_F(LazyHttp, AModelCallWithoutTheModuleNamesTheMissingFile) {
  Outcome r = ModelCall(dir_ / "bin" / "forkbox");
  EXPECT_NE(r.exit_code, 0);
  const std::string expected =
      "cannot load the HTTP module " + (dir_ / "bin").string() + "/" + FORKBOX_HTTP_MODULE_RELPATH;
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  // Control: the built binary finds its module and gets as far as the connection.
  Outcome control = ModelCall(fs::path(FORKBOX_BIN_DIR) / "forkbox");
  EXPECT_NE(control.exit_code, 0);
  EXPECT_EQ(control.err.find("cannot load the HTTP module"), std::string::npos) << control.err;
  EXPECT_NE(control.err.find("onnect"), std::string::npos) << control.err;
}

// The HTTP module beside the binary but not the TLS module: an http model call gets as far as the
// connection (no TLS needed), an https one names the missing TLS module.
TEST_F(LazyHttp, AnHttpsCallWithoutTheTlsModuleNamesItAndAnHttpCallNeedsNone) {
  const fs::path module = dir_ / "bin" / FORKBOX_HTTP_MODULE_RELPATH;
  fs::create_directories(module.parent_path());
  fs::copy_file(fs::path(FORKBOX_BIN_DIR) / FORKBOX_HTTP_MODULE_RELPATH, module);
  Outcome http = ModelCall(dir_ / "bin" / "forkbox");
  EXPECT_NE(http.exit_code, 0);
  EXPECT_EQ(http.err.find("module"), std::string::npos) << http.err;
  EXPECT_NE(http.err.find("onnect"), std::string::npos) << http.err;
  Outcome https = ModelCall(dir_ / "bin" / "forkbox", "https://127.0.0.1:9");
  EXPECT_NE(https.exit_code, 0);
  EXPECT_NE(https.err.find("cannot load the TLS module"), std::string::npos) << https.err;
  EXPECT_NE(https.err.find("forkbox-tls.so"), std::string::npos) << https.err;
}

}  // namespace
