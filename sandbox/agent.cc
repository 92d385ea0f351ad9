// EnterAgentSandbox: forkbox-child sandboxes itself. In layer 2 the process forks once more so
// that the agent is pid 1 of its PID namespace (the whole tree dies with it); the original
// process stays behind as a waiter that relays the agent's exit status to forkbox.
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

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

volatile sig_atomic_t g_agent_pid = 0;

void ForwardAsKill(int) {
  // A namespace init only gets signals it handles; SIGKILL from outside is always delivered.
  if (g_agent_pid > 0) kill(g_agent_pid, SIGKILL);
}

[[noreturn]] void RunWaiter(pid_t agent) {
  g_agent_pid = agent;
  syscall(SYS_close_range, 0U, ~0U, 0U);
  struct sigaction sa {};
  sa.sa_handler = ForwardAsKill;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(agent, &status, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) _exit(127);
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
      // Die the same way, so forkbox sees the real cause.
      signal(WTERMSIG(status), SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      kill(getpid(), WTERMSIG(status));
      _exit(128 + WTERMSIG(status));
    }
  }
}

Status CloseAllExcept(std::span<const int> keep_fds) {
  std::vector<int> keep(keep_fds.begin(), keep_fds.end());
  std::sort(keep.begin(), keep.end());
  unsigned prev = 2;
  for (int fd : keep) {
    if (fd < 0) return Status::InvalidArgument("EnterAgentSandbox: negative keep fd");
    unsigned u = static_cast<unsigned>(fd);
    if (u <= prev) continue;
    if (u > prev + 1 && syscall(SYS_close_range, prev + 1, u - 1, 0U) != 0) {
      return Status::FromErrno(errno, "close_range");
    }
    prev = u;
  }
  if (syscall(SYS_close_range, prev + 1, ~0U, 0U) != 0) {
    return Status::FromErrno(errno, "close_range");
  }
  return Status::Ok();
}

Status Errno(int err, const char* step) { return Status::FromErrno(err, step); }

}  // namespace

Result<Report> EnterAgentSandbox(const Policy& policy, std::span<const int> keep_fds) {
  if (CurrentAgentState().active) {
    return Status::InvalidArgument("EnterAgentSandbox: already sandboxed");
  }
  if (!policy.enabled) return Check(policy);
  if (policy.workdir.empty() || policy.workdir[0] != '/') {
    return Status::InvalidArgument("EnterAgentSandbox: workdir must be absolute");
  }
  int abi = 0;
  FORKBOX_RETURN_IF_ERROR(CheckEnforceable(&abi));
  Result<std::span<const sock_filter>> base = seccomp::Compiled(seccomp::Program::kBase);
  if (!base.ok()) return base.status();
  Result<std::span<const sock_filter>> net = seccomp::Compiled(seccomp::Program::kAgentNet);
  if (!net.ok()) return net.status();
  const bool layer2 = Layer2Available();
  std::vector<std::string> writable = {policy.workdir};
  writable.insert(writable.end(), policy.writable.begin(), policy.writable.end());
  if (!policy.tmpdir.empty()) writable.push_back(policy.tmpdir);
  MountPlan mounts;
  if (layer2) {
    Result<MountPlan> plan =
        PlanMounts(policy.workdir, std::vector<std::string>(writable.begin() + 1, writable.end()));
    if (!plan.ok()) return plan.status();
    mounts = std::move(*plan);
  }

  // uid 0: RLIMIT_NPROC does not apply, a pids cgroup holds the fork bomb (agent and tools).
  PidsCgroup cgroup;
  // A launcher that joined a session cgroup (the parent) already caps us: skip the slow attach.
  if (!PidsCgroup::Hierarchy().empty() && !PidsCgroup::InForkboxCgroup()) {
    Result<PidsCgroup> created = PidsCgroup::Create(policy.rlimit_nproc);
    if (!created.ok()) return created.status().WithContext("fork-bomb limit for uid 0");
    cgroup = std::move(*created);
  }

  // The pipeline, in order (the cgroup first: its fd is about to be closed).
  if (cgroup.procs_fd() >= 0) {
    if (int err = JoinCgroupRaw(cgroup.procs_fd())) return Errno(err, "join pids cgroup");
  }
  FORKBOX_RETURN_IF_ERROR(CloseAllExcept(keep_fds));
  const char* step = "";
  if (int err = SetNonDumpableAndDeathSignalRaw(getppid(), &step)) return Errno(err, step);
  Limits limits{policy.rlimit_fsize_bytes, policy.rlimit_as_bytes, policy.rlimit_nofile,
                policy.rlimit_nproc};
#if defined(FORKBOX_SANITIZE)
  limits.as_bytes = 0;  // ASan's shadow memory alone exceeds any sane RLIMIT_AS.
#endif
  if (int err = ApplyLimitsRaw(limits, &step)) return Errno(err, step);
  if (layer2) {
    int self = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
    if (self < 0) return Errno(errno, "pidfd_open(self)");
    UniqueFd waiter(self);
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) != 0) {
      return Errno(errno, "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)");
    }
    if (int err = WriteIdMapsRaw(mounts, &step)) return Errno(err, step);
    pid_t pid = fork();
    if (pid < 0) return Errno(errno, "fork (agent as namespace init)");
    if (pid > 0) RunWaiter(pid);
    // The agent, pid 1. Die with the waiter; it may already be gone.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return Errno(errno, "PR_SET_PDEATHSIG");
    pollfd pfd{waiter.get(), POLLIN, 0};
    if (poll(&pfd, 1, 0) != 0) _exit(127);
    waiter.reset();
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return Errno(errno, "PR_SET_DUMPABLE");
    if (int err = SetUpMountsRaw(mounts, &step)) return Errno(err, step);
  } else {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
      return Errno(errno, "prctl(PR_SET_CHILD_SUBREAPER)");
    }
  }
  landlock::RulesetSpec spec;
  spec.abi = abi;
  spec.mode = landlock::Mode::kAgent;
  spec.writable = writable;
  spec.allow_net = policy.allow_net;
  spec.model_port = policy.model_port;
  Result<UniqueFd> ruleset = landlock::BuildRuleset(spec);
  if (!ruleset.ok()) return ruleset.status();
  if (layer2) {
    for (const char* tmp : {"/tmp", "/dev/shm"}) {
      int err = landlock::AddWritablePathRaw(ruleset->get(), abi, tmp);
      if (err != 0 && err != ENOENT) return Errno(err, "landlock_add_rule(private tmpfs)");
    }
  }
  if (int err = DropAllCapabilitiesRaw(&step)) return Errno(err, step);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Errno(errno, "PR_SET_NO_NEW_PRIVS");
  if (int err = landlock::RestrictSelfRaw(ruleset->get())) {
    return Errno(err, "landlock_restrict_self");
  }
  if (int err = seccomp::InstallRaw(*base, true)) return Errno(err, "seccomp(base filter)");
  if (int err = seccomp::InstallRaw(*net, true)) return Errno(err, "seccomp(agent net filter)");
  AgentState& state = CurrentAgentState();
  state.active = true;
  state.layer = layer2 ? 2 : 1;
  state.landlock_abi = abi;
  return Check(policy);
}

}  // namespace forkbox::sandbox
