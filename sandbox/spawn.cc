// Sandbox::ForTools and Sandbox::Spawn: a tool command under the policy, through base's one
// fork+exec path with the contain pipeline (sandbox/contain.cc) as its step.
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <utility>

#include "sandbox/cgroup.h"
#include "sandbox/check.h"
#include "sandbox/contain.h"
#include "sandbox/namespaces.h"
#include "sandbox/sandbox.h"

namespace forkbox::sandbox {

struct Sandbox::SharedState {
  std::mutex mu;       // Spawn is const and may run on several threads.
  bool built = false;  // The tool ruleset below.
  UniqueFd fd;  // Empty once built: every command builds its own (layer 2, unsandboxed caller).
  std::unique_ptr<Sandbox> layer1;  // Set once layer 2 proved refused (ForTools).
};

Sandbox::Sandbox(Policy policy, Report report, bool inside_agent)
    : policy_(std::move(policy)),
      report_(std::move(report)),
      inside_agent_(inside_agent),
      shared_(std::make_unique<SharedState>()) {}
Sandbox::Sandbox(Sandbox&&) noexcept = default;
Sandbox& Sandbox::operator=(Sandbox&&) noexcept = default;
Sandbox::~Sandbox() = default;

Result<Sandbox> Sandbox::ForTools(Policy policy) {
  return Make(std::move(policy), /*assume_layer2=*/true);
}

Result<Sandbox> Sandbox::Make(Policy policy, bool assume_layer2) {
  if (!policy.enabled) {
    Report report = Check(policy);
    return Sandbox(std::move(policy), std::move(report), false);
  }
  if (policy.workdir.empty() || policy.workdir[0] != '/') {
    return Status::InvalidArgument("sandbox: the workdir must be an absolute path");
  }
  int abi = 0;
  FORKBOX_RETURN_IF_ERROR(CheckEnforceable(&abi));
  Report report = assume_layer2 ? CheckAssumingLayer2(policy) : Check(policy);
  Sandbox sandbox(std::move(policy), std::move(report), false);
  sandbox.layer2_assumed_ = assume_layer2;
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

void Sandbox::set_tmpdir(std::string tmpdir) {
  policy_.tmpdir = std::move(tmpdir);
  shared_ = std::make_unique<SharedState>();
}

void Sandbox::DisallowNetwork() {
  policy_.allow_net = false;
  shared_ = std::make_unique<SharedState>();
}

Result<int> Sandbox::SharedRulesetFd() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (!shared_->built) {
    Result<UniqueFd> built =
        ToolRuleset(policy_, report_.landlock_abi, report_.layer == 2, inside_agent_);
    if (!built.ok()) return built.status();
    shared_->fd = std::move(*built);
    shared_->built = true;
  }
  return shared_->fd ? shared_->fd.get() : -1;
}

const Report& Sandbox::report() const {
  const Sandbox* layer1 = Layer1();
  return layer1 != nullptr ? layer1->report_ : report_;
}

const Sandbox* Sandbox::Layer1() const {
  if (!shared_) return nullptr;
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->layer1.get();
}

Result<const Sandbox*> Sandbox::FallBackToLayer1() const {
  Result<Sandbox> layer1 = Make(policy_, /*assume_layer2=*/false);
  if (!layer1.ok()) return layer1.status();
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (!shared_->layer1) shared_->layer1 = std::make_unique<Sandbox>(std::move(*layer1));
  return shared_->layer1.get();
}

Result<ChildProcess> Sandbox::Spawn(SpawnOptions options) const {
  if (!options.steps.empty() || !options.carry_fds.empty() || options.clone_flags != 0) {
    return Status::InvalidArgument(
        "sandboxed spawn: steps, carry_fds and clone_flags must be empty (the sandbox owns them)");
  }
  if (options.cwd.empty()) options.cwd = policy_.workdir;
  if (!policy_.enabled) return forkbox::Spawn(options);
  if (const Sandbox* layer1 = Layer1()) return layer1->Spawn(std::move(options));
  if (!layer2_assumed_) return SpawnHere(std::move(options));
  SpawnOptions retry = options;
  Result<ChildProcess> child = SpawnHere(std::move(options));
  // The probe Check() runs, paid only now: layer 2 works, so the failure is the command's.
  if (child.ok() || Layer2Available()) return child;
  Result<const Sandbox*> layer1 = FallBackToLayer1();
  if (!layer1.ok()) return layer1.status();
  return (*layer1)->Spawn(std::move(retry));
}

Result<ChildProcess> Sandbox::SpawnHere(SpawnOptions options) const {
  Result<int> shared = SharedRulesetFd();
  if (!shared.ok()) return shared.status();
  Result<ContainPlan> plan =
      PrepareTool(policy_, report_.landlock_abi, report_.layer == 2, inside_agent_, options.argv,
                  cgroup_ ? cgroup_->procs_fd() : -1, *shared);
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
  return forkbox::Spawn(options);
}

}  // namespace forkbox::sandbox
