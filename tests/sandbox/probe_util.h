// Forked probes: run a function in a fresh child (optionally after installing filters) and get
// back its result or how it died, over a pipe. No timing anywhere.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "sandbox/sandbox.h"

namespace forkbox::sandbox::testing {

// What a test that guards the repository's own config alone passes for the user's git config
// (Policy::user_git_config): nothing global or system-wide is guarded.
inline const UserGitConfig kNoUserGitConfig{};

struct ProbeResult {
  bool exited = false;
  int exit_code = -1;
  int signal = 0;   // Set when killed by a signal.
  long value = -1;  // What the probe returned.
  int err = 0;      // errno after the probe.
  bool reported = false;
};

// Forks; the child runs `setup` (must return true) and then `probe`, and reports
// {probe(), errno}. The child _exit()s.
ProbeResult RunProbe(const std::function<bool()>& setup, const std::function<long()>& probe);
// The same for a setup that closes every descriptor it is not told to keep (EnterAgentSandbox):
// it gets the one the report goes to.
ProbeResult RunProbeKeeping(const std::function<bool(int report_fd)>& setup,
                            const std::function<long()>& probe);

// A fresh directory under the test's temp dir, canonical; removed with everything in it when the
// test process exits.
std::string MakeTempDir(const std::string& name);
// Removes the MakeTempDir directories this process made, now: a re-executed death test's body
// ends in _exit, which runs no destructor, so each of its runs left them behind.
void RemoveTempDirsNow();

// A MakeTempDir removed when this object goes: for a death test's body, which ends in _exit and
// so never runs what removes the others.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& name) : path_(MakeTempDir(name)) {}
  ~ScopedTempDir() {
    std::error_code ec;  // Best effort: a leftover directory fails no test.
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A TCP listener on a free loopback port, closed with the object.
struct Listener {
  Listener();
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  int fd = -1;
  uint16_t port = 0;
};
// connect(2) to a loopback port: its return value, errno telling why it failed.
long Connect(uint16_t port);

// Reads a whole file ("" if missing).
std::string ReadFile(const std::string& path);
bool FileExists(const std::string& path);

// Installs (with no_new_privs) a filter making landlock_create_ruleset fail with ENOSYS, as on a
// kernel without Landlock. For forked children only.
bool HideLandlock();
// A kernel without seccomp filters, for this process and what it execs: seccomp() answers ENOSYS
// and prctl(PR_SET_SECCOMP) EINVAL. The hiding filter itself is installed first.
bool HideSeccomp();

// Installs a filter refusing unshare and clone(CLONE_NEWUSER), like Docker's default profile.
bool RefuseUserNamespaces();

std::string KernelRelease();

// Sandbox::ForTools(policy) then Spawn(options): one command from an unsandboxed caller. The
// handle is kept until the test process exits (a command dies with its handle).
Result<ChildProcess> SpawnSandboxed(const Policy& policy, SpawnOptions options);

}  // namespace forkbox::sandbox::testing
