// The one ordered contain pipeline (nsjail's contain.cc is the model), used by the agent's
// self-sandboxing (EnterAgentSandbox, in-process) and by every tool spawn (Sandbox::Spawn, in the
// forked child) alike:
//   join pids cgroup -> rlimits -> [layer 2: unshare -> id maps -> fork a keeper -> mounts]
//   or subreaper -> RLIMIT_AS -> drop every capability -> no_new_privs -> Landlock -> seccomp
//   (last). A tool's RLIMIT_AS is its command's alone: its init may still allocate.
// A tool's init (Keeper::kInit, cloned into its namespaces) runs the mounts, the capability drop,
// no_new_privs and the base filter itself before Spawn's keeper step clones the command (a child
// borrowing the init's memory until exec: SpawnStep::keep), which inherits them and adds Landlock
// and the tool filter: the same end state, set up once.
// A layer-2 agent whose parent verified layer 2 takes its first steps early, before its HTTP module
// loads (EnterAgentNamespaces, sandbox.h: rlimits -> unshare -> id maps -> fork the waiter); its
// plan then says `entered` and ContainRaw goes on from the mounts, in the same order.
// Prepare* allocate and run before fork; ContainRaw is async-signal-safe.
#pragma once

#include <linux/filter.h>
#include <sched.h>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/namespaces.h"
#include "sandbox/rlimits.h"
#include "sandbox/sandbox.h"

namespace forkbox::sandbox {

// What stays behind when layer 2 forks: the process that called fork keeps waiting for the one
// that goes on to be contained.
enum class Keeper {
  kInit,    // A tool: the keeper is pid 1 of the PID namespace, reaps everything, exits with the
            // command's status (its exit kills every leftover process).
  kWaiter,  // The agent: the keeper stays outside the PID namespace and relays the agent's exit
            // status to forkbox (SIGTERM/SIGINT/SIGHUP/SIGQUIT become SIGKILL of the agent).
  kNone,    // The parent: no fork and no PID namespace (user + mount only), so it keeps its pid,
            // its terminal, its signals and its children; it is a subreaper instead.
};

// Everything the pipeline needs, prepared before fork.
struct ContainPlan {
  int cgroup_procs_fd = -1;  // uid 0 only: RLIMIT_NPROC does not apply to root.
  // That cgroup's lock (PidsCgroup::lock_fd), kept by the command's keeper or init.
  int cgroup_lock_fd = -1;
  int64_t pid_max = 0;  // uid 0, layer 2: the PID namespace's cap instead (cgroup.h).
  Limits limits;
  bool layer2 = false;       // Create layer-2 namespaces (the agent, an unsandboxed caller's tool).
  bool private_tmp = false;  // /tmp and /dev/shm are private tmpfs here: writable for Landlock.
  bool unshare = false;      // Layer 2 namespaces still to create (false: clone made them).
  // The layer-2 agent's namespaces and waiter exist already (EnterAgentNamespaces, sandbox.h):
  // only the mounts of the namespace step remain.
  bool entered = false;
  bool subreaper = false;  // Layer 1 agent: orphans come to it, so it can kill them.
  // Layer 1, `forkbox sandbox`'s command: a keeper (a subreaper below the spawner, outside the
  // command's confinement) takes the spawner's death and kills what the command left, which no
  // namespace would (RunLayer1Keeper).
  bool layer1_keeper = false;
  // `forkbox sandbox` (Sandbox::Spawn's `orphaned`): what the command's layer-1 keeper or
  // layer-2 init undoes, in its copy of the spawner's memory, if the spawner dies first.
  Sandbox::AfterCommand orphaned;
  Keeper keeper = Keeper::kInit;
  MountPlan mounts;
  // A spawned tool's namespace init dies with the spawner (PDEATHSIG); this pidfd of the spawner
  // (carried into the child) tells whether it is already gone. -1 for the agent, whose waiter is
  // the process that already has PDEATHSIG.
  UniqueFd spawner;
  int spawner_pidfd = -1;
  // A tool's init: its own pidfd, which the command checks once it set PDEATHSIG.
  int keeper_pidfd = -1;
  // Landlock: owned here, or (ruleset empty) a handle's shared ruleset (ToolRuleset) that
  // ruleset_fd names and that already holds the fresh-mount rules.
  UniqueFd ruleset;
  int ruleset_fd = -1;  // The ruleset, or its number in the spawned child.
  // The ruleset lacks the rules of the private tmpfs and fresh mounts, which exist only once
  // the command's mount namespace does: ContainRaw adds them.
  bool add_fresh_rules = true;
  // Set (layer 2, a per-command ruleset): `ruleset` is still empty, and the spawner fills it from
  // this spec while the namespaces are set up (FillPendingRuleset, a SpawnOptions::while_starting
  // hook), then writes the eventfd that ruleset_ready_fd names (carried into the child):
  // RestrictRaw waits for it. Takes the ~170 rules of root's read scope off the critical path.
  std::optional<landlock::RulesetSpec> pending_rules;
  UniqueFd ruleset_ready;
  int ruleset_ready_fd = -1;
  // The caller's CPUs, when it has two or more (AddContainStep): the hook moves the child off the
  // caller's CPU during the fill, and RestrictRaw sets these back in the command.
  bool restore_cpus = false;
  cpu_set_t caller_cpus{};
  int abi = 0;
  std::vector<std::span<const sock_filter>> filters;  // Installed in order.
  bool all_threads = false;                           // SECCOMP_FILTER_FLAG_TSYNC.
  // A tool under the unix connect broker (kToolBrokered): the last filter is installed with a
  // listener, which is sent (SCM_RIGHTS) over this socket, carried into the child, to the
  // spawning process's broker. -1: no broker.
  bool brokered = false;
  int broker_socket = -1;
};

// The writable trees: the workdir, the --writable paths, the task temp dir unless it lies in the
// workdir (then it is the workdir's, never a rule or mount of its own). Built once here.
std::vector<std::string> WritableTrees(const Policy& policy);

// True when `path` (canonical) is /dev/shm (canonical: layer 1's shared writable tree) or lies in
// it; false when there is no /dev/shm. A Landlock rule on /dev/shm would reach such a path.
bool InDevShm(const std::string& path);

// The contain plan for a tool command. `inside_agent`: the caller is already an agent sandbox, so
// namespaces, the base filter and the cgroup are inherited and only the tool layer is added.
// `cgroup_procs_fd` is the owned cgroup's procs fd, or -1. `shared_ruleset_fd` >= 0: a ruleset
// from ToolRuleset for the same arguments, used (not owned) instead of building one. A layer-2
// plan's own ruleset is left pending (ContainPlan::pending_rules): AddContainStep fills it.
// `git_surface`: as PlanMounts takes it (layer 2 only).
Result<ContainPlan> PrepareTool(const Policy& policy, int abi, bool layer2, bool inside_agent,
                                const std::vector<std::string>& argv, int cgroup_procs_fd,
                                int shared_ruleset_fd = -1, const MountPlan* git_surface = nullptr);

// The tool layer's complete Landlock ruleset, for a handle to build once and share between all
// its commands (a ruleset can restrict any number of processes; it is never changed after this).
// Only where commands get no mount namespace of their own (inside an agent, or layer 1): the
// private tmpfs and fresh mounts are then the caller's, so their rules are added here. Elsewhere
// (an unsandboxed caller in layer 2) an empty fd: each command gets its own (PrepareTool).
// `inside_agent`: the ruleset leaves reads to the agent's own domain, which holds the same read
// scope and in which every command nests (RulesetSpec::read_scope_inherited): ~8 rules instead of
// ~190 as root.
Result<UniqueFd> ToolRuleset(const Policy& policy, int abi, bool layer2, bool inside_agent);

// Fills a plan's pending ruleset and tells the child (pending_rules); OK when nothing is pending.
// On failure the child is told too and fails its spawn step; the error names the failing rule.
Status FillPendingRuleset(ContainPlan& plan);

// The contain plan for the agent itself (in-process, Keeper::kWaiter).
Result<ContainPlan> PrepareAgent(const Policy& policy, int abi, bool layer2, int cgroup_procs_fd);

// The contain plan for the parent itself (in-process, Keeper::kNone, after its set-up): the
// agent's filters and Landlock domain plus `own_writable` (its transcript directory) with every
// right but reading (landlock::RulesetSpec::write_only): its tools stack a domain of their own
// without it, but inherit this one's read scope. Signals are not scoped: the parent kills the
// task children its spawner started outside its domain.
Result<ContainPlan> PrepareLauncher(const Policy& policy, int abi, bool layer2,
                                    const std::vector<std::string>& own_writable);

// Runs the pipeline on the calling process. Async-signal-safe. 0 or errno; `*step` names the
// failing call. In layer 2 this forks: the keeper never returns. Not for a tool's layer 2
// (Keeper::kInit: EINVAL), whose keeper is a Spawn step (AddContainStep).
int ContainRaw(ContainPlan& plan, const char** step);

// The same pipeline as the spawn's step: the plan's clone flags, carried fds (a layer-2 plan gets a
// pidfd of this process, owned by the plan) and, for a pending ruleset, the while_starting hook
// that fills it. `plan` must outlive the Spawn call.
Status AddContainStep(ContainPlan& plan, SpawnOptions& options);

}  // namespace forkbox::sandbox
