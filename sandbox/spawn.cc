// SpawnSandboxed: everything that allocates (argv, environment, BPF, the Landlock ruleset, the
// mount plan) is prepared before fork; the child only makes async-signal-safe calls.
#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "sandbox/caps.h"
#include "sandbox/cgroup.h"
#include "sandbox/check.h"
#include "sandbox/hygiene.h"
#include "sandbox/landlock.h"
#include "sandbox/namespaces.h"
#include "sandbox/rlimits.h"
#include "sandbox/sandbox.h"
#include "sandbox/seccomp_policy.h"

namespace forkbox::sandbox {
namespace {

struct ChildError {
  int err;
  char step[180];
};

struct Plan {
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string cwd;
  std::vector<std::pair<int, int>> fds;  // {source, target}
  std::vector<int> targets_sorted;
  bool new_session = false;

  bool sandbox = false;
  bool layer2 = false;
  MountPlan mounts;
  Limits limits;
  UniqueFd ruleset;
  int abi = 0;
  std::vector<std::span<const sock_filter>> filters;
  int cgroup_procs_fd = -1;  // uid 0 only: RLIMIT_NPROC does not apply to root.
};

[[noreturn]] void Fail(int error_fd, const char* step, int err) {
  ChildError e;
  memset(&e, 0, sizeof(e));
  e.err = err;
  size_t n = strlen(step);
  if (n >= sizeof(e.step)) n = sizeof(e.step) - 1;
  memcpy(e.step, step, n);
  ssize_t ignored = write(error_fd, &e, sizeof(e));
  (void)ignored;
  _exit(127);
}

long RawFork(unsigned long flags) {
  return syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
}

// Places the requested fds and marks everything else close-on-exec. Returns the new error fd.
int ArrangeFds(const Plan& plan, int error_fd, int* ruleset_fd) {
  int base = 3;
  for (const auto& [src, dst] : plan.fds) base = std::max(base, dst + 1);
  int err_fd = fcntl(error_fd, F_DUPFD_CLOEXEC, base);
  if (err_fd < 0) Fail(error_fd, "fcntl(F_DUPFD_CLOEXEC, error pipe)", errno);
  if (*ruleset_fd >= 0) {
    int moved = fcntl(*ruleset_fd, F_DUPFD_CLOEXEC, base);
    if (moved < 0) Fail(err_fd, "fcntl(F_DUPFD_CLOEXEC, landlock ruleset)", errno);
    *ruleset_fd = moved;
  }
  int moved_src[64];
  size_t n = plan.fds.size();
  for (size_t i = 0; i < n; ++i) {
    moved_src[i] = fcntl(plan.fds[i].first, F_DUPFD_CLOEXEC, base);
    if (moved_src[i] < 0) Fail(err_fd, "fcntl(F_DUPFD_CLOEXEC, spawn fd)", errno);
  }
  for (size_t i = 0; i < n; ++i) {
    if (dup2(moved_src[i], plan.fds[i].second) < 0) Fail(err_fd, "dup2(spawn fd)", errno);
  }
  // close_range(3..) except the targets: CLOEXEC rather than close, so the error pipe and the
  // ruleset survive until execve.
  unsigned prev = 2;
  for (int t : plan.targets_sorted) {
    unsigned target = static_cast<unsigned>(t);
    if (target <= prev) continue;
    if (target > prev + 1) syscall(SYS_close_range, prev + 1, target - 1, CLOSE_RANGE_CLOEXEC);
    prev = target;
  }
  if (syscall(SYS_close_range, prev + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    Fail(err_fd, "close_range(CLOEXEC)", errno);
  }
  return err_fd;
}

// PID-namespace init for a layer-2 command: reaps everything and exits with the command's
// status. Signals without a handler are not delivered to a namespace init, so the command (pid 2)
// gets the caller's process-group signals and the init ignores them.
[[noreturn]] void RunInit(pid_t command) {
  syscall(SYS_close_range, 0U, ~0U, 0U);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  const char* step = "";
  DropAllCapabilitiesRaw(&step);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, __WALL);
    if (pid < 0) {
      if (errno == EINTR) continue;
      _exit(127);
    }
    if (pid != command) continue;
    // Exiting kills every other process in the namespace (daemons included).
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    _exit(128 + WTERMSIG(status));
  }
}

[[noreturn]] void RunChild(const Plan& plan, int error_fd) {
  if (plan.cgroup_procs_fd >= 0) {
    if (int err = JoinCgroupRaw(plan.cgroup_procs_fd)) Fail(error_fd, "join pids cgroup", err);
  }
  if (plan.new_session && setsid() < 0) Fail(error_fd, "setsid", errno);
  int ruleset_fd = plan.ruleset.get();
  error_fd = ArrangeFds(plan, error_fd, &ruleset_fd);
  const char* step = "";
  if (plan.sandbox && plan.layer2) {
    // We are pid 1 of fresh user, mount and PID namespaces.
    if (int err = WriteIdMapsRaw(plan.mounts, &step)) Fail(error_fd, step, err);
    if (int err = SetUpMountsRaw(plan.mounts, &step)) Fail(error_fd, step, err);
    long pid = RawFork(0);
    if (pid < 0) Fail(error_fd, "fork (namespace init)", errno);
    if (pid > 0) RunInit(static_cast<pid_t>(pid));
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
      Fail(error_fd, "prctl(PR_SET_PDEATHSIG)", errno);
    }
    if (getppid() != 1) Fail(error_fd, "namespace init exited", ESRCH);
  }
  if (plan.sandbox) {
    if (int err = ApplyLimitsRaw(plan.limits, &step)) Fail(error_fd, step, err);
  }
  if (!plan.cwd.empty() && chdir(plan.cwd.c_str()) != 0) Fail(error_fd, "chdir", errno);
  ResetSignalsRaw();
  if (plan.sandbox) {
    if (int err = DropAllCapabilitiesRaw(&step)) Fail(error_fd, step, err);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      Fail(error_fd, "prctl(PR_SET_NO_NEW_PRIVS)", errno);
    }
    if (plan.layer2) {
      for (const char* tmp : {"/tmp", "/dev/shm"}) {
        int err = landlock::AddWritablePathRaw(ruleset_fd, plan.abi, tmp);
        if (err != 0 && !(err == ENOENT && tmp[1] == 'd'))
          Fail(error_fd, "landlock_add_rule(tmpfs)", err);
      }
    }
    if (int err = landlock::RestrictSelfRaw(ruleset_fd)) {
      Fail(error_fd, "landlock_restrict_self", err);
    }
    for (const auto& filter : plan.filters) {
      if (int err = seccomp::InstallRaw(filter, false))
        Fail(error_fd, "seccomp(SET_MODE_FILTER)", err);
    }
  }
  execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  Fail(error_fd, "execve", errno);
}

// Layer 2 hides /tmp behind a private tmpfs. A program that lives under /tmp (a build tree there)
// must stay runnable: every "/tmp/..." token of argv naming an executable regular file is bound
// back, read-only, that file alone. Data files and directories stay private.
void KeepTmpProgramsVisible(const std::vector<std::string>& argv, MountPlan& plan) {
  for (const std::string& arg : argv) {
    for (size_t at = arg.find("/tmp/"); at != std::string::npos; at = arg.find("/tmp/", at + 1)) {
      if (at > 0 && std::string_view(" \t'\"=:;(").find(arg[at - 1]) == std::string_view::npos) {
        continue;
      }
      size_t end = arg.find_first_of(" \t'\";)&|\n", at);
      std::string token = arg.substr(at, end == std::string::npos ? std::string::npos : end - at);
      struct stat st;
      if (stat(token.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) {
        continue;
      }
      if (std::find(plan.visible.begin(), plan.visible.end(), token) != plan.visible.end() ||
          plan.visible.size() >= kMaxWritablePaths) {
        continue;
      }
      plan.visible_dirs.push_back(token.substr(0, token.rfind('/')));
      plan.visible.push_back(std::move(token));
    }
  }
}

Status BuildPlan(const Policy& policy, SpawnOptions& options, Plan& plan) {
  if (options.pre_exec) {
    return Status::InvalidArgument("SpawnSandboxed: pre_exec must be empty (the sandbox owns it)");
  }
  if (options.argv.empty() || options.argv[0].empty()) {
    return Status::InvalidArgument("SpawnSandboxed: empty argv");
  }
  if (options.fds.size() > 64) return Status::InvalidArgument("SpawnSandboxed: too many fds");
  for (const auto& [src, dst] : options.fds) {
    if (src < 0 || dst < 0) return Status::InvalidArgument("SpawnSandboxed: negative fd");
    if (fcntl(src, F_GETFD) < 0) return Status::FromErrno(errno, "SpawnSandboxed: source fd");
  }
  for (const std::string& s : options.argv) {
    if (s.find('\0') != std::string::npos) {
      return Status::InvalidArgument("SpawnSandboxed: NUL byte in argv");
    }
  }
  plan.argv_storage = std::move(options.argv);
  plan.env_storage = std::move(options.env);
  for (std::string& s : plan.argv_storage) plan.argv.push_back(s.data());
  plan.argv.push_back(nullptr);
  for (std::string& s : plan.env_storage) plan.envp.push_back(s.data());
  plan.envp.push_back(nullptr);
  plan.cwd = options.cwd.empty() ? policy.workdir : options.cwd;
  plan.fds = options.fds;
  for (const auto& fd : plan.fds) plan.targets_sorted.push_back(fd.second);
  std::sort(plan.targets_sorted.begin(), plan.targets_sorted.end());
  plan.new_session = options.new_session;
  plan.sandbox = policy.enabled;
  if (!policy.enabled) return Status::Ok();
  if (policy.workdir.empty() || policy.workdir[0] != '/') {
    return Status::InvalidArgument("SpawnSandboxed: the workdir must be an absolute path");
  }

  int abi = 0;
  FORKBOX_RETURN_IF_ERROR(CheckEnforceable(&abi));
  plan.abi = abi;
  const AgentState& agent = CurrentAgentState();
  std::vector<std::string> writable = {policy.workdir};
  writable.insert(writable.end(), policy.writable.begin(), policy.writable.end());
  if (!policy.tmpdir.empty()) writable.push_back(policy.tmpdir);
  if (!agent.active) {
    plan.layer2 = Layer2Available();
    if (plan.layer2) {
      Result<MountPlan> mounts = PlanMounts(
          policy.workdir, writable.size() > 1
                              ? std::vector<std::string>(writable.begin() + 1, writable.end())
                              : std::vector<std::string>{});
      if (!mounts.ok()) return mounts.status();
      plan.mounts = std::move(*mounts);
      KeepTmpProgramsVisible(plan.argv_storage, plan.mounts);
    }
    Result<std::span<const sock_filter>> base = seccomp::Compiled(seccomp::Program::kBase);
    if (!base.ok()) return base.status();
    plan.filters.push_back(*base);
  }
  if (!policy.allow_net) {
    Result<std::span<const sock_filter>> nonet = seccomp::Compiled(seccomp::Program::kToolNoNet);
    if (!nonet.ok()) return nonet.status();
    plan.filters.push_back(*nonet);
  }
  landlock::RulesetSpec spec;
  spec.abi = abi;
  spec.mode = landlock::Mode::kTool;
  spec.writable = writable;
  spec.allow_net = policy.allow_net;
  Result<UniqueFd> ruleset = landlock::BuildRuleset(spec);
  if (!ruleset.ok()) return ruleset.status();
  plan.ruleset = std::move(*ruleset);
  plan.limits.fsize_bytes = policy.rlimit_fsize_bytes;
  plan.limits.as_bytes = policy.rlimit_as_bytes;
  plan.limits.nofile = policy.rlimit_nofile;
  plan.limits.nproc = policy.rlimit_nproc;
  if (!agent.active && !PidsCgroup::Hierarchy().empty() && !PidsCgroup::InForkboxCgroup()) {
    Result<int> procs = PidsCgroup::SharedProcsFd(policy.rlimit_nproc);
    if (!procs.ok()) return procs.status().WithContext("fork-bomb limit for uid 0");
    plan.cgroup_procs_fd = *procs;
  }
  return Status::Ok();
}

}  // namespace

Result<ChildProcess> SpawnSandboxed(const Policy& policy, SpawnOptions options) {
  Plan plan;
  FORKBOX_RETURN_IF_ERROR(BuildPlan(policy, options, plan));
  Result<Pipe> pipe = MakePipe();
  if (!pipe.ok()) return pipe.status();
  unsigned long flags = plan.layer2 ? (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) : 0;
  long pid = plan.layer2 ? RawFork(flags) : static_cast<long>(fork());
  if (pid < 0) return Status::FromErrno(errno, plan.layer2 ? "clone(new namespaces)" : "fork");
  if (pid == 0) RunChild(plan, pipe->write.get());
  pipe->write.reset();
  int pidfd_raw = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  int pidfd_err = errno;
  ChildError report;
  size_t got = 0;
  while (got < sizeof(report)) {
    ssize_t n =
        read(pipe->read.get(), reinterpret_cast<char*>(&report) + got, sizeof(report) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got != 0 || pidfd_raw < 0) {
    if (pidfd_raw >= 0) close(pidfd_raw);
    kill(static_cast<pid_t>(pid), SIGKILL);
    while (waitpid(static_cast<pid_t>(pid), nullptr, 0) < 0 && errno == EINTR) {
    }
    if (got == sizeof(report)) {
      report.step[sizeof(report.step) - 1] = '\0';
      std::string what =
          std::string("sandboxed spawn of ") + plan.argv_storage[0] + ": " + report.step;
      return Status::FromErrno(report.err, what);
    }
    if (got != 0) return Status::Internal("sandboxed spawn: torn error report");
    return Status::FromErrno(pidfd_err, "pidfd_open");
  }
  return ChildProcess(static_cast<pid_t>(pid), UniqueFd(pidfd_raw), plan.new_session);
}

}  // namespace forkbox::sandbox
