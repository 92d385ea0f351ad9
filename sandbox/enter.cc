// EnterAgentSandbox: forkbox-child sandboxes itself with the contain pipeline (sandbox/contain.cc).
// In layer 2 the process forks once more so that the agent is pid 1 of its PID namespace (the
// whole tree dies with it); the original process stays behind as a waiter that relays the agent's
// exit status to forkbox.
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "base/file.h"
#include "sandbox/cgroup.h"
#include "sandbox/check.h"
#include "sandbox/contain.h"
#include "sandbox/hygiene.h"
#include "sandbox/sandbox.h"
#include "sandbox/seccomp_policy.h"

namespace forkbox::sandbox {
namespace {

Status CloseAllExcept(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned prev = 2;
  for (int fd : keep) {
    if (fd < 0) continue;
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

// uid 0: RLIMIT_NPROC does not apply, a pids cgroup holds the fork bomb (agent and tools). A
// launcher that joined a session cgroup (the parent) already caps us: skip the slow attach.
Result<PidsCgroup> AgentCgroup(const Policy& policy, bool layer2) {
  if (PidsCgroup::Hierarchy().empty() || PidsCgroup::InForkboxCgroup()) return PidsCgroup();
  if (RootPidNamespaceMax(layer2, policy.rlimit_nproc) > 0) return PidsCgroup();  // pid_max.
  Result<PidsCgroup> created = PidsCgroup::Create(policy.rlimit_nproc);
  if (!created.ok()) return created.status().WithContext("fork-bomb limit for uid 0");
  return created;
}

}  // namespace

struct PreparedAgentSandbox::State {
  Policy policy;
  bool entered = false;  // EnterAgentNamespaces ran: the waiter and PDEATHSIG are set up.
  Report report;
  PidsCgroup cgroup;
  ContainPlan plan;
};

PreparedAgentSandbox::PreparedAgentSandbox(std::unique_ptr<State> state)
    : state_(std::move(state)) {}
PreparedAgentSandbox::PreparedAgentSandbox(PreparedAgentSandbox&&) noexcept = default;
PreparedAgentSandbox& PreparedAgentSandbox::operator=(PreparedAgentSandbox&&) noexcept = default;
PreparedAgentSandbox::~PreparedAgentSandbox() = default;

Result<PreparedAgentSandbox> PrepareAgentSandbox(const Policy& policy, AgentLayer2 layer2_mode) {
  auto state = std::make_unique<PreparedAgentSandbox::State>();
  state->policy = policy;
  if (!policy.enabled) {
    state->report = Check(policy);
    return PreparedAgentSandbox(std::move(state));
  }
  if (policy.workdir.empty() || policy.workdir[0] != '/') {
    return Status::InvalidArgument("EnterAgentSandbox: workdir must be absolute");
  }
  int abi = 0;
  FORKBOX_RETURN_IF_ERROR(CheckEnforceable(&abi));
  // What is in force, probed now: the layer-2 probe clones namespaces, which the agent's own
  // filter refuses afterwards.
  state->report = layer2_mode == AgentLayer2::kProbe ? Check(policy) : CheckAssumingLayer2(policy);
  const bool layer2 = state->report.layer == 2;
  state->entered = layer2_mode == AgentLayer2::kEntered;
  if (state->entered && !layer2) {
    return Status::Internal("EnterAgentNamespaces ran, yet layer 2 is not in force");
  }
  Result<PidsCgroup> cgroup = AgentCgroup(policy, layer2);
  if (!cgroup.ok()) return cgroup.status();
  state->cgroup = std::move(*cgroup);
  Result<ContainPlan> plan = PrepareAgent(policy, abi, layer2, state->cgroup.procs_fd());
  if (!plan.ok()) return plan.status();
  state->plan = std::move(*plan);
  state->plan.pid_max = RootPidNamespaceMax(layer2, policy.rlimit_nproc);
  state->plan.entered = state->entered;
  return PreparedAgentSandbox(std::move(state));
}

Result<Sandbox> EnterAgentSandbox(PreparedAgentSandbox prepared, std::span<const int> keep_fds) {
  PreparedAgentSandbox::State& s = *prepared.state_;
  if (!s.policy.enabled) {
    return Sandbox(s.policy, std::move(s.report), Sandbox::Caller::kUnconfined);
  }
  for (int fd : keep_fds) {
    if (fd < 0) return Status::InvalidArgument("EnterAgentSandbox: negative keep fd");
  }
  std::vector<int> keep(keep_fds.begin(), keep_fds.end());
  keep.push_back(s.plan.ruleset_fd);
  keep.push_back(s.plan.cgroup_procs_fd);
  FORKBOX_RETURN_IF_ERROR(AwaitSingleThreaded());
  FORKBOX_RETURN_IF_ERROR(CloseAllExcept(std::move(keep)));
  const char* step = "";
  // Once entered, our parent is the waiter, outside our PID namespace (getppid() is 0): both were
  // set before the fork, and PDEATHSIG on the waiter after it.
  if (!s.entered) {
    if (int err = SetNonDumpableAndDeathSignalRaw(getppid(), &step)) {
      return Status::FromErrno(err, step);
    }
  }
  if (int err = ContainRaw(s.plan, &step)) return Status::FromErrno(err, step);
  return Sandbox(std::move(s.policy), std::move(s.report), Sandbox::Caller::kInsideAgent);
}

Result<Sandbox> EnterAgentSandbox(const Policy& policy, std::span<const int> keep_fds) {
  Result<PreparedAgentSandbox> prepared = PrepareAgentSandbox(policy, AgentLayer2::kProbe);
  if (!prepared.ok()) return prepared.status();
  return EnterAgentSandbox(std::move(*prepared), keep_fds);
}

Result<UniqueFd> ReopenInside(const UniqueFd& held, const std::string& path) {
  return ReopenDirectory(path, IdentityOf(held.get()), "the workdir fixed at start-up");
}

namespace {

// The rules that keep a kShmDir temp dir usable: all of its /dev/shm (POSIX semaphores and shared
// memory live there: Python's multiprocessing), or, when a tree that must stay read-only lies in
// it, the temp dir alone and rmdir beneath /dev/shm for its own removal.
int AddTmpRulesRaw(int ruleset_fd, uint64_t handled, const Policy& policy, const TaskTmpDir& tmp) {
  // A rule on all of /dev/shm would reach a workdir or --writable tree there (Landlock rules
  // cover everything beneath, mounts included), which must stay read-only.
  if (!InDevShm(policy.workdir) && std::none_of(policy.writable.begin(), policy.writable.end(),
                                                [](const std::string& p) { return InDevShm(p); })) {
    return landlock::AddWritableDirFdRaw(ruleset_fd, handled, tmp.parent_fd());
  }
  int err = landlock::AddWritableDirFdRaw(ruleset_fd, handled, tmp.dir_fd());
  if (err != 0) return err;
  return landlock::AddWritableDirFdRaw(ruleset_fd, handled & LANDLOCK_ACCESS_FS_REMOVE_DIR,
                                       tmp.parent_fd());
}

}  // namespace

Status RestrictToReadOnly(const Policy& policy, std::span<const int> still_writable,
                          const TaskTmpDir* tmp) {
  if (tmp != nullptr && tmp->on_disk()) {
    return Status::InvalidArgument("read-only: the temp dir must be a ShortLink::kShmDir one");
  }
  Status why;
  const int abi = landlock::QueryAbi(&why);
  if (abi < 1) return why.WithContext("read-only needs Landlock");
  landlock::RulesetSpec spec;
  spec.abi = abi;
  spec.mode = landlock::Mode::kTool;
  spec.allow_net = true;  // This layer is about files; the network is decided by the policy.
  Result<UniqueFd> ruleset = landlock::BuildRuleset(spec);
  if (!ruleset.ok()) return ruleset.status().WithContext("read-only");
  // Another thread would keep every right: none may be running.
  FORKBOX_RETURN_IF_ERROR(AwaitSingleThreaded());
  for (int dir : still_writable) {
    const int err =
        landlock::AddWritableDirFdRaw(ruleset->get(), landlock::HandledFsRights(spec), dir);
    if (err != 0)
      return Status::FromErrno(err, "read-only: landlock_add_rule(a writable directory)");
  }
  if (tmp != nullptr && tmp->dir_fd() >= 0) {
    if (int err = AddTmpRulesRaw(ruleset->get(), landlock::HandledFsRights(spec), policy, *tmp)) {
      return Status::FromErrno(err, "read-only: landlock_add_rule(the temp dir)");
    }
  }
  if (int err = landlock::RestrictSelfRaw(ruleset->get()); err != 0) {
    return Status::FromErrno(err, "read-only: landlock_restrict_self");
  }
  return Status::Ok();
}

Status ConfineSpawner(std::span<const int> keep_fds) {
  FORKBOX_RETURN_IF_ERROR(CloseAllExcept(std::vector<int>(keep_fds.begin(), keep_fds.end())));
  Result<std::span<const sock_filter>> filter = seccomp::Compiled(seccomp::Program::kSpawner);
  if (!filter.ok()) return filter.status();
  const char* step = "prctl(PR_SET_DUMPABLE, 0)";
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return Status::FromErrno(errno, step);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Status::FromErrno(errno, "prctl(PR_SET_NO_NEW_PRIVS)");
  }
  if (int err = seccomp::InstallRaw(*filter, /*all_threads=*/true)) {
    return Status::FromErrno(err, "seccomp(spawner filter)");
  }
  return Status::Ok();
}

Result<Sandbox> EnterLauncherSandbox(const Policy& policy, Report report,
                                     const std::vector<std::string>& own_writable,
                                     const std::function<Status()>& before_entering) {
  if (!policy.enabled) {
    FORKBOX_RETURN_IF_ERROR(before_entering());
    return Sandbox::ForTools(policy);
  }
  if (!report.enforceable || report.landlock_abi <= 0) {
    return Status::Unavailable("sandbox: not enforceable here (" + report.Banner() + ")");
  }
  Result<ContainPlan> plan =
      PrepareLauncher(policy, report.landlock_abi, report.layer == 2, own_writable);
  if (!plan.ok()) return plan.status();
  FORKBOX_RETURN_IF_ERROR(before_entering());
  FORKBOX_RETURN_IF_ERROR(AwaitSingleThreaded());
  const char* step = "";
  if (int err = ContainRaw(*plan, &step)) return Status::FromErrno(err, step);
  return Sandbox(policy, std::move(report), Sandbox::Caller::kInsideAgent);
}

}  // namespace forkbox::sandbox
