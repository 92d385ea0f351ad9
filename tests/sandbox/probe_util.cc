#include "tests/sandbox/probe_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace forkbox::sandbox::testing {

ProbeResult RunProbe(const std::function<bool()>& setup, const std::function<long()>& probe) {
  return RunProbeKeeping([&setup](int) { return setup(); }, probe);
}

ProbeResult RunProbeKeeping(const std::function<bool(int report_fd)>& setup,
                            const std::function<long()>& probe) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) std::abort();
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (!setup(fds[1])) _exit(120);
    errno = 0;
    long buf[2];
    buf[0] = probe();
    buf[1] = errno;
    if (write(fds[1], buf, sizeof(buf)) != sizeof(buf)) _exit(121);
    _exit(0);
  }
  close(fds[1]);
  ProbeResult r;
  long buf[2];
  ssize_t n = read(fds[0], buf, sizeof(buf));
  close(fds[0]);
  if (n == sizeof(buf)) {
    r.reported = true;
    r.value = buf[0];
    r.err = static_cast<int>(buf[1]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

namespace {

// The directories MakeTempDir made, removed when the test process that made them exits (a
// forked probe that calls exit() inherits the list but not the ownership).
class TempDirs {
 public:
  void Add(std::string dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(std::move(dir));
  }
  ~TempDirs() { RemoveAll(); }
  void RemoveAll() {
    if (getpid() != owner_) return;
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& dir : dirs_) {
      std::error_code ec;  // Best effort: a leftover directory fails no test.
      std::filesystem::remove_all(dir, ec);
    }
    dirs_.clear();
  }

 private:
  const pid_t owner_ = getpid();
  std::mutex mu_;
  std::vector<std::string> dirs_;
};

TempDirs& MadeTempDirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

Listener::Listener() {
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  // Any failure leaves port 0, which no probe can reach.
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 8) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return;
  }
  port = ntohs(addr.sin_port);
}

Listener::~Listener() {
  if (fd >= 0) close(fd);
}

long Connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  close(fd);
  errno = err;
  return rc;
}

void RemoveTempDirsNow() { MadeTempDirs().RemoveAll(); }

std::string MakeTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/forkbox-" + name + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) std::abort();
  std::string dir = std::filesystem::canonical(templ).string();
  MadeTempDirs().Add(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

bool HideLandlock() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  bool ok =
      ctx != nullptr &&
      seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(landlock_create_ruleset), 0) == 0 &&
      seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

bool HideSeccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  bool ok = ctx != nullptr &&
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(seccomp), 0) == 0 &&
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(prctl), 1,
                             SCMP_A0(SCMP_CMP_EQ, PR_SET_SECCOMP)) == 0 &&
            seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

bool RefuseUserNamespaces() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  bool ok = ctx != nullptr &&
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0) == 0 &&
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)) == 0 &&
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) == 0 &&
            seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

std::string KernelRelease() {
  utsname u{};
  uname(&u);
  return u.release;
}

Result<ChildProcess> SpawnSandboxed(const Policy& policy, SpawnOptions options) {
  // A command dies with its ForTools handle (spawned from the handle's broker thread), so the
  // handles of these one-off spawns are kept for the test process's lifetime.
  static std::mutex mu;
  static std::vector<std::unique_ptr<Sandbox>> handles;
  Result<Sandbox> sandbox = Sandbox::ForTools(policy);
  if (!sandbox.ok()) return sandbox.status();
  auto handle = std::make_unique<Sandbox>(std::move(*sandbox));
  Result<ChildProcess> child = handle->Spawn(std::move(options));
  std::lock_guard<std::mutex> lock(mu);
  handles.push_back(std::move(handle));
  return child;
}

}  // namespace forkbox::sandbox::testing
