// Sandbox::ForTools, ForCommand and Sandbox::Spawn: a tool command under the policy, through base's
// one fork+exec path with the contain pipeline (sandbox/contain.cc) as its step.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <new>
#include <utility>

#include "sandbox/cgroup.h"
#include "sandbox/check.h"
#include "sandbox/contain.h"
#include "sandbox/landlock.h"
#include "sandbox/namespaces.h"
#include "sandbox/sandbox.h"
#include "sandbox/unix_broker.h"

namespace forkbox::sandbox {
namespace {

// Where the broker writes its refusals: the command's stderr, reopened (a file description of
// its own, non-blocking) where possible so a full pipe never stalls the broker. A regular file
// is shared instead (a dup): with an offset of its own, the report at the end would be
// overwritten by the command's next write at its offset (`forkbox sandbox ... > log 2>&1`).
UniqueFd ReportFd(const SpawnOptions& options) {
  int source = STDERR_FILENO;
  for (const auto& [from, to] : options.fds) {
    if (to == STDERR_FILENO) source = from;
  }
  struct stat st;
  if (fstat(source, &st) == 0 && S_ISREG(st.st_mode)) {
    return UniqueFd(fcntl(source, F_DUPFD_CLOEXEC, 3));  // Never blocks.
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
  broker.layer2_view = plan.private_tmp;
  broker.abstract_scoped = scoped;
  return broker;
}

}  // namespace

struct Sandbox::SharedState {
  std::mutex mu;       // Spawn is const and may run on several threads.
  bool built = false;  // The tool ruleset below.
  UniqueFd fd;  // Empty once built: every command builds its own (layer 2, unsandboxed caller).
  TaskTmpDir layer1_tmp;  // The task dir on disk that a kPrivateDir temp dir falls back to.
  std::unique_ptr<Sandbox> layer1;  // Set once layer 2 proved refused (ForTools).
};

Sandbox::Sandbox(Policy policy, Report report, Caller caller)
    : policy_(std::move(policy)),
      report_(std::move(report)),
      caller_(caller),
      broker_(std::make_unique<UnixBroker>(
          /*scope_self=*/caller == Caller::kUnconfined,
          caller == Caller::kScopedSelf ? BrokerThread::kCallers : BrokerThread::kOwn)),
      shared_(std::make_unique<SharedState>()) {}
Sandbox::Sandbox(Sandbox&&) noexcept = default;
Sandbox& Sandbox::operator=(Sandbox&&) noexcept = default;
Sandbox::~Sandbox() = default;

Result<Sandbox> Sandbox::ForTools(Policy policy) {
  return Make(std::move(policy), /*assume_layer2=*/true, Caller::kUnconfined);
}

Result<Sandbox> Sandbox::ForCommand(Policy policy) {
  return Make(std::move(policy), /*assume_layer2=*/true, Caller::kScopedSelf);
}

Result<Sandbox> Sandbox::Make(Policy policy, bool assume_layer2, Caller caller) {
  if (!policy.enabled) {
    Report report = Check(policy);
    return Sandbox(std::move(policy), std::move(report), Caller::kUnconfined);
  }
  if (policy.workdir.empty() || policy.workdir[0] != '/') {
    return Status::InvalidArgument("sandbox: the workdir must be an absolute path");
  }
  int abi = 0;
  FORKBOX_RETURN_IF_ERROR(CheckEnforceable(&abi));
  Report report = assume_layer2 ? CheckAssumingLayer2(policy) : Check(policy);
  // ForCommand scopes the calling thread once, which then also answers the broker (ServeUntil);
  // a layer-1 fallback handle (assume_layer2 false) finds it scoped already.
  if (caller == Caller::kScopedSelf && assume_layer2 && abi >= 6) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      return Status::FromErrno(errno, "prctl(PR_SET_NO_NEW_PRIVS) before scoping abstract sockets");
    }
    if (int err = landlock::RestrictAbstractUnixScopeRaw()) {
      return Status::FromErrno(err, "landlock_restrict_self(scope abstract unix sockets)");
    }
  }
  Sandbox sandbox(std::move(policy), std::move(report), caller);
  sandbox.layer2_assumed_ = assume_layer2;
  // An unconfined caller spawns brokered tools from the broker's thread: started now, it is up
  // by the first spawn instead of starting on its critical path.
  if (!sandbox.policy_.allow_net) FORKBOX_RETURN_IF_ERROR(sandbox.broker_->Start());
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

void Sandbox::set_tmpdir(const TaskTmpDir& tmpdir) {
  tmpdir.ApplyTo(&policy_);
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
        ToolRuleset(policy_, report_.landlock_abi, report_.layer == 2, inside_agent());
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
  Result<Sandbox> layer1 = Make(policy_, /*assume_layer2=*/false, caller_);
  if (!layer1.ok()) return layer1.status();
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (shared_->layer1) return shared_->layer1.get();
  if (policy_.tmpdir.empty() && !policy_.tmpdir_short.empty()) {  // ShortLink::kPrivateDir
    Result<TaskTmpDir> made = TaskTmpDir::OnDiskAt(policy_.workdir, policy_.tmpdir_short);
    if (!made.ok()) return made.status();
    shared_->layer1_tmp = std::move(*made);
    layer1->set_tmpdir(shared_->layer1_tmp);
  }
  shared_->layer1 = std::make_unique<Sandbox>(std::move(*layer1));
  return shared_->layer1.get();
}

Status Sandbox::Prewarm() const {
  if (!policy_.enabled) return Status::Ok();
  if (const Sandbox* layer1 = Layer1()) return layer1->Prewarm();
  Result<int> shared = SharedRulesetFd();
  if (!shared.ok()) return shared.status();
  return broker_->Start();  // Every tool is brokered (PrepareTool).
}

Status Sandbox::ServeUntil(std::span<pollfd> until) const {
  if (const Sandbox* layer1 = Layer1()) return layer1->ServeUntil(until);
  return broker_->ServeUntil(until);
}

namespace {
constexpr uint32_t kStatusRecorded = 1u << 31;  // Wait statuses fit in 16 bits.
}  // namespace

Result<CommandStatus> CommandStatus::Create() {
  void* page = mmap(nullptr, sizeof(std::atomic<uint32_t>), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return Status::FromErrno(errno, "mmap (the command's status)");
  CommandStatus out;
  out.word_ = new (page) std::atomic<uint32_t>(0);
  return out;
}

CommandStatus::CommandStatus(CommandStatus&& other) noexcept
    : word_(std::exchange(other.word_, nullptr)) {}

CommandStatus& CommandStatus::operator=(CommandStatus&& other) noexcept {
  std::swap(word_, other.word_);
  return *this;
}

CommandStatus::~CommandStatus() {
  if (word_ != nullptr) munmap(word_, sizeof(std::atomic<uint32_t>));
}

void CommandStatus::RecordRaw(int wait_status) const {
  word_->store(kStatusRecorded | (static_cast<uint32_t>(wait_status) & 0xffff));
}

int CommandStatus::Resolve(int keeper_status) const {
  const uint32_t word = word_->load();
  if ((word & kStatusRecorded) == 0) return keeper_status;
  const int recorded = static_cast<int>(word & 0xffff);
  const bool as_said = WIFEXITED(keeper_status) &&
                       WEXITSTATUS(keeper_status) == (ExitCodeFromWaitStatus(recorded) & 0xff);
  return as_said ? recorded : keeper_status;
}

Result<ChildProcess> Sandbox::Spawn(SpawnOptions options, const MountPlan* git_surface,
                                    const AfterCommand* orphaned) const {
  if (!options.steps.empty() || !options.carry_fds.empty() || options.clone_flags != 0 ||
      options.while_starting) {
    return Status::InvalidArgument(
        "sandboxed spawn: steps, carry_fds, clone_flags and while_starting must be empty (the "
        "sandbox owns them)");
  }
  if (options.cwd.empty()) options.cwd = policy_.workdir;
  if (!policy_.enabled) return forkbox::Spawn(options);
  if (orphaned != nullptr && caller_ != Caller::kScopedSelf) {
    return Status::InvalidArgument(
        "sandboxed spawn: what to undo for a dead caller needs a ForCommand handle");
  }
  if (const Sandbox* layer1 = Layer1()) {
    const std::optional<AfterCommand> after = Layer1Orphaned(orphaned);
    return layer1->Spawn(std::move(options), nullptr, after ? &*after : nullptr);
  }
  if (!layer2_assumed_) return SpawnHere(std::move(options), git_surface, orphaned);
  SpawnOptions retry = options;
  Result<ChildProcess> child = SpawnHere(std::move(options), git_surface, orphaned);
  // The probe Check() runs, paid only now: layer 2 works, so the failure is the command's.
  if (child.ok() || Layer2Available()) return child;
  Result<const Sandbox*> layer1 = FallBackToLayer1();
  if (!layer1.ok()) return layer1.status();
  const std::optional<AfterCommand> after = Layer1Orphaned(orphaned);
  return (*layer1)->Spawn(std::move(retry), nullptr, after ? &*after : nullptr);
}

std::optional<Sandbox::AfterCommand> Sandbox::Layer1Orphaned(const AfterCommand* orphaned) const {
  if (orphaned == nullptr) return std::nullopt;
  AfterCommand after = *orphaned;
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (shared_->layer1_tmp.descriptors()[1] >= 0) after.tmp = &shared_->layer1_tmp;
  return after;
}

Result<ChildProcess> Sandbox::SpawnHere(SpawnOptions options, const MountPlan* git_surface,
                                        const AfterCommand* orphaned) const {
  Result<int> shared = SharedRulesetFd();
  if (!shared.ok()) return shared.status();
  Result<ContainPlan> plan =
      PrepareTool(policy_, report_.landlock_abi, report_.layer == 2, inside_agent(), options.argv,
                  cgroup_ ? cgroup_->procs_fd() : -1, *shared, git_surface);
  if (!plan.ok()) return plan.status();
  plan->pid_max = RootPidNamespaceMax(plan->layer2, policy_.rlimit_nproc);
  plan->cgroup_lock_fd = plan->cgroup_procs_fd >= 0 ? cgroup_->lock_fd() : -1;
  // `forkbox sandbox` (ForCommand) in layer 1: a keeper outlives its SIGKILL to kill the command.
  plan->layer1_keeper = !plan->layer2 && caller_ == Caller::kScopedSelf;
  if (orphaned != nullptr) plan->orphaned = *orphaned;
  if (plan->brokered) return SpawnBrokered(std::move(options), *plan);
  FORKBOX_RETURN_IF_ERROR(AddContainStep(*plan, options));
  return forkbox::Spawn(options);
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
  FORKBOX_RETURN_IF_ERROR(AddContainStep(plan, options));
  // The agent's and the launcher's Landlock domains scope abstract sockets (ABI 6) and the
  // tools' domains nest in them; so does a ForCommand caller's own. An unconfined caller
  // (ForTools) spawns from the broker's thread, which entered a domain of its own scoping them,
  // so the tool nests there.
  Result<ChildProcess> child = Status::Internal("the unix connect broker did not spawn");
  if (caller_ == Caller::kUnconfined) {
    FORKBOX_RETURN_IF_ERROR(broker_->RunOnThread([&] { child = forkbox::Spawn(options); }));
  } else {
    child = forkbox::Spawn(options);
  }
  if (!child.ok()) return child;
  // After the spawn, while the command runs: the caller's stderr source is still open.
  UniqueFd report = ReportFd(options);
  const bool scoped =
      caller_ == Caller::kUnconfined ? broker_->self_scoped() : report_.landlock_abi >= 6;
  Result<UniqueFd> listener = ReceiveListener(ours.get());
  if (!listener.ok()) return listener.status().WithContext("unix connect broker");
  // Not yet reaped, so the pid is still the command's.
  UniqueFd command(static_cast<int>(syscall(SYS_pidfd_open, child->pid(), 0)));
  if (!command) return Status::FromErrno(errno, "pidfd_open(the command)");
  FORKBOX_RETURN_IF_ERROR(broker_->Serve(std::move(*listener),
                                         BrokerPolicyOf(policy_, plan, scoped), std::move(report),
                                         std::move(command)));
  return child;
}

}  // namespace forkbox::sandbox
