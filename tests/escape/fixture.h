// The escape-suite fixture: every test runs in a fresh temp tree (a workdir plus an "outside"
// directory to attack), parametrized over who runs forkbox and where.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "tests/escape/harness.h"

namespace forkbox::escape {

enum class Mode {
  kRoot,             // forkbox sandbox as root.
  kUser,             // ... as the unprivileged forkbox-escape user.
  kRootNoUserns,     // ... as root inside a container-like jail refusing user namespaces.
  kUserNoUserns,     // ... as the user inside that jail.
  kRootUnsandboxed,  // Control: the probe alone, as root. It must escape.
  kUserUnsandboxed,  // Control: the probe alone, as the user. It must escape.
};
std::string ModeName(const ::testing::TestParamInfo<Mode>& info);
const std::vector<Mode>& AllModes();

// Whether the unsandboxed control run of a probe must escape, proving that the probe and the
// outside check work (a broken probe must not pass silently).
enum class Control {
  kAlways,      // Possible for root and the user.
  kRootOnly,    // Needs privileges the user does not have.
  kIfPossible,  // Depends on kernel config or sysctls: skipped when it fails unsandboxed too.
  kNone,        // No meaningful unsandboxed run.
};

struct RunOptions {
  std::vector<std::string> flags;  // Extra `forkbox sandbox` flags, e.g. "--allow-net".
  std::vector<std::string> env;    // Extra NAME=value for forkbox's environment.
  int stdin_fd = -1;
  int kill_switch_seconds = 120;
  // For a probe aimed at forkbox itself (@PID@): the control modes run it below `forkbox sandbox
  // --sandbox=off` rather than alone, so the target is a forkbox that lacks only the sandbox.
  bool at_forkbox = false;
  // Run first, as the suite's user, before the mode's launchers; must exec its arguments (e.g.
  // unshare into a private mount namespace that plants a file the host lacks).
  std::vector<std::string> outer;
};

RunOptions Flags(std::vector<std::string> flags);
RunOptions AtForkbox();
RunOptions Stdin(int fd);
RunOptions KillSwitch(int seconds);

class EscapeTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override;
  void TearDown() override;

  bool sandboxed() const;
  bool as_user() const;
  bool no_userns() const;
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }

  // The layer `forkbox sandbox --check` reports in this mode (sandboxed modes only).
  int Layer();
  // Whether this is layer 1 in a sandboxed mode, where `why` is a documented gap that layer 2
  // closes. Use through FORKBOX_SKIP_UNLESS_LAYER2 (GTEST_SKIP only returns from the caller).
  bool Layer1Gap();

  // `forkbox sandbox --workdir W [flags] -- cmd...` in this mode; in the control modes, cmd alone
  // (as the mode's user, in W), or with --sandbox=off for `at_forkbox`. forkbox's own cwd is the
  // outside dir.
  RunResult Sandboxed(std::vector<std::string> cmd, const RunOptions& options = {});
  RunResult Probe(std::vector<std::string> args, const RunOptions& options = {});
  RunResult Shell(const std::string& script, const RunOptions& options = {});

  // The attack's verdict. Sandboxed: `escaped` (observed from outside) must be false and the
  // probe must have run and reported "blocked". Control modes: `escaped` must be true.
  // `sandboxed_exit` is the exit code the sandboxed run must end with (128+SIGSYS for kills).
  void Verdict(const RunResult& r, bool escaped, Control control, const std::string& what,
               int sandboxed_exit = 0);
  bool VictimChanged() const { return !(Snapshot(victim_) == victim_before_); }
  std::string VictimReport() const;

  std::string root_;     // The per-test temp tree.
  std::string work_;     // The workdir.
  std::string outside_;  // Everything here must stay untouched.
  std::string home_;     // HOME given to forkbox (inside outside_).
  std::string victim_;   // outside_/victim, "original\n".
  // Outside too, for unix sockets: a short mkdtemp under /var/tmp, because a socket path is
  // limited to 108 bytes and the temp tree lives under the build folder, which can be deep.
  std::string sock_dir_;
  std::string token_;   // Unique per test: file names, markers.
  std::string secret_;  // Part of every secret value set in forkbox's environment.
  FileState victim_before_;

  // forkbox's environment: a plain PATH, HOME=home_, and secrets that must never reach a tool.
  std::vector<std::string> Environment(const RunOptions& options) const;
  std::vector<std::string> Prefix() const;  // Launchers that put forkbox in this mode.

 private:
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

#define FORKBOX_SKIP_UNLESS_LAYER2(why) \
  if (Layer1Gap())                      \
  GTEST_SKIP() << "layer 1: " << (why) << " (a documented layer-1 gap that layer 2 closes)"
#define FORKBOX_SKIP_UNSANDBOXED(why) \
  if (!sandboxed()) GTEST_SKIP() << (why)

// The launchers and binaries under test.
const char* ForkboxPath();
const char* ProbePath();
const char* RunAsPath();
const char* NoUsernsPath();

// Runs `[launchers] forkbox sandbox --check` for a mode (cached per mode).
const RunResult& CheckOutput(Mode mode);

}  // namespace forkbox::escape
