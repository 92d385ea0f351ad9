// Sandbox::ForTools and Sandbox::Spawn: a tool command under the policy, through base's one
// fork+exec path with the contain pipeline (sandbox/contain.cc) as its step.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

#include "sandbox/cgroup.h"
#include "sandbox/check.h"
#include "sandbox/contain.h"
#include "sandbox/sandbox.h"
#include "sandbox/unix_broker.h"

namespace forkbox::sandbox {
namespace {

// Where the broker writes its refusals: the command's stderr, reopened (a file description of
// its own, non-blocking) where possible so a full pipe never stalls the broker.
UniqueFd ReportFd(const SpawnOptions& options) {
  int source = STDERR_FILENO;
  for (const auto& [from, to] : options.fds) {
    if (to == STDERR_FILENO) source = from;
  }
  std::string self = "/proc/self/fd/" + std::to_string(source);
  UniqueFd fd(open(self.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) fd.reset(fcntl(source, F_DUPFD_CLOEXEC, 3));
  return fd;
}

// The writable trees in the tool's view; layer 2's private /tmp and /dev/shm too. Layer 1's
// /dev/shm is shared with the user's other processes (a daemon may bind there), so it is not one.
BrokerPolicy BrokerPolicyOf(const Policy& policy, const ContainPlan& plan, bool scoped) {
  BrokerPolicy broker;
  broker.trees = WritableTrees(policy);
  if (plan.private_tmp) broker.trees.insert(broker.trees.end(), {"/tmp", "/dev/shm"});
  broker.abstract_scoped = scoped;
  return broker;
}

}  // namespace

Sandbox::Sandbox(Policy policy, Report report, bool inside_agent)
    : policy_(std::move(policy)),
      report_(std::move(report)),
      inside_agent_(inside_agent),
      broker_(std::make_unique<UnixBroker>(/*scope_self=*/!inside_agent)) {}
Sandbox::Sandbox(Sandbox&&) noexcept = default;
Sandbox& Sandbox::operator=(Sandbox&&) noexcept = default;
Sandbox::~Sandbox() = default;

Result<Sandbox> Sandbox::ForTools(Policy policy) {
  if (!policy.enabled) {
    Report report = Check(policy);
    return Sandbox(std::move(policy), std::move(report), false);
  }
  if (policy.workdir.empty() || policy.workdir[0] != '/') {
    return Status::InvalidArgument("sandbox: the workdir must be an absolute path");
  }
  int abi = 0;
  FORKBOX_RETURN_IF_ERROR(CheckEnforceable(&abi));
  Report report = Check(policy);
  Sandbox sandbox(std::move(policy), std::move(report), false);
  // uid 0: RLIMIT_NPROC does not apply; one pids cgroup holds every command of this handle,
  // unless each command's own PID namespace caps it (no cgroup attach per command). A launcher
  // that joined a session cgroup (the parent) is capped already.
  if (RootPidNamespaceMax(sandbox.report_.layer == 2, sandbox.policy_.rlimit_nproc) == 0 &&
      !PidsCgroup::Hierarchy().empty() && !PidsCgroup::InForkboxCgroup()) {
    Result<PidsCgroup> created = PidsCgroup::Create(sandbox.policy_.rlimit_nproc);
    if (!created.ok()) return created.status().WithContext("fork-bomb limit for uid 0");
    sandbox.cgroup_ = std::make_unique<PidsCgroup>(std::move(*created));
  }
  return sandbox;
}

Result<ChildProcess> Sandbox::Spawn(SpawnOptions options) const {
  if (!options.steps.empty() || !options.carry_fds.empty() || options.clone_flags != 0) {
    return Status::InvalidArgument(
        "sandboxed spawn: steps, carry_fds and clone_flags must be empty (the sandbox owns them)");
  }
  if (options.cwd.empty()) options.cwd = policy_.workdir;
  if (!policy_.enabled) return forkbox::Spawn(options);
  Result<ContainPlan> plan =
      PrepareTool(policy_, report_.landlock_abi, report_.layer == 2, inside_agent_, options.argv,
                  cgroup_ ? cgroup_->procs_fd() : -1);
  if (!plan.ok()) return plan.status();
  UniqueFd spawner;
  if (plan->layer2) {
    spawner.reset(static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0)));
    if (!spawner) return Status::FromErrno(errno, "pidfd_open(self)");
    plan->spawner_pidfd = spawner.get();
    options.carry_fds.push_back(&plan->spawner_pidfd);
  }
  options.carry_fds.push_back(&plan->ruleset_fd);
  if (plan->cgroup_procs_fd >= 0) options.carry_fds.push_back(&plan->cgroup_procs_fd);
  plan->pid_max = RootPidNamespaceMax(plan->layer2, policy_.rlimit_nproc);
  options.clone_flags = CloneFlags(*plan);
  options.keeper_step = plan->layer2;  // The namespace init waits for the command.
  options.steps.push_back(ContainStep(*plan));
  if (!plan->brokered) return forkbox::Spawn(options);
  return SpawnBrokered(std::move(options), *plan);
}

// A tool without network: its last filter's listener comes back over a socketpair and is served
// by this handle's broker until the tool's process tree is gone.
Result<ChildProcess> Sandbox::SpawnBrokered(SpawnOptions options, ContainPlan& plan) const {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return Status::FromErrno(errno, "socketpair(unix connect broker)");
  }
  UniqueFd ours(pair[0]), theirs(pair[1]);
  plan.broker_socket = theirs.get();
  options.carry_fds.push_back(&plan.broker_socket);
  UniqueFd report = ReportFd(options);
  // The agent's and the launcher's Landlock domains scope abstract sockets (ABI 6) and the
  // tools' domains nest in them. An unconfined caller (`forkbox sandbox`) spawns from the
  // broker's thread, which entered a domain of its own scoping them, so the tool nests there.
  Result<ChildProcess> child = Status::Internal("the unix connect broker did not spawn");
  if (inside_agent_) {
    child = forkbox::Spawn(options);
  } else {
    FORKBOX_RETURN_IF_ERROR(broker_->RunOnThread([&] { child = forkbox::Spawn(options); }));
  }
  if (!child.ok()) return child;
  const bool scoped = inside_agent_ ? report_.landlock_abi >= 6 : broker_->self_scoped();
  Result<UniqueFd> listener = ReceiveListener(ours.get());
  if (!listener.ok()) return listener.status().WithContext("unix connect broker");
  FORKBOX_RETURN_IF_ERROR(broker_->Serve(std::move(*listener),
                                         BrokerPolicyOf(policy_, plan, scoped), std::move(report)));
  return child;
}

}  // namespace forkbox::sandbox
