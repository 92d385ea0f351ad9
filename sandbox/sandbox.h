// sandbox/: turns a process into a sandboxed one, and runs commands under exactly the policy that
// tool calls get. Fails closed: when Landlock or seccomp cannot be enforced, every entry point
// returns kUnavailable naming the missing protection and the kernel version, unless the policy
// was explicitly disabled (--sandbox=off), in which case callers warn loudly.
//
// The pipeline (one linear sequence, seccomp last, in sandbox/contain.cc for the agent and the
// tools alike):
//   close_range(3..) except kept fds -> pids cgroup -> rlimits -> [layer 2: user+mount+pid
//   namespaces, read-only mounts, private /tmp and /dev/shm, read-only .git/hooks and
//   .git/config] -> drop every capability -> no_new_privs -> Landlock -> seccomp.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/git_config.h"
#include "sandbox/landlock.h"
#include "sandbox/settings.h"

namespace forkbox::sandbox {

struct MountPlan;       // sandbox/namespaces.h
class GitSurfaceGuard;  // sandbox/git_surface.h
class GuardJournal;     // sandbox/guard_journal.h

// The settings resolved for one workdir: `writable` absolute and canonical, `env` valid names,
// rlimits positive (ResolvePolicy checks all of it).
struct Policy : Settings {
  std::string workdir;  // Absolute, canonical. The only writable tree (plus `writable`).
  // The credential stores below `home` (and below the password database's home for this uid,
  // and, as root, /etc/shadow, /etc/gshadow, /etc/ssh/*_key) are outside the read scope: see
  // DeniedReadPaths. Empty: $HOME. `readable` (Settings, --readable PATH) opts paths back in.
  std::string home;
  // The read scope's grants (landlock::ReadScopeGrants of DeniedReadPaths), listed by
  // ResolvePolicy while nothing restricts listing; empty: listed at each ruleset.
  std::vector<landlock::Grant> read_grants;
  // DeniedReadPaths and CredentialPaths as ResolvePolicy listed them, so that a process
  // canonicalises the credential stores once (each store is a readlink per path component);
  // nullopt (a Policy built by hand): listed at each use. A store created after ResolvePolicy is
  // still unreadable (the read scope grants only what existed); layer 2 just does not also mount
  // over it.
  std::optional<std::vector<std::string>> denied_reads;
  std::optional<std::vector<std::string>> credential_paths;
  // Every home whose stores are denied (`home` and the password database's, canonical), as
  // ResolvePolicy found them: one passwd lookup per process; nullopt: looked up at each use.
  std::optional<std::vector<std::string>> homes;
  // The user's own git config (ReadUserGitConfig of this process's environment), read by
  // ResolvePolicy while nothing confines the process: what the git guard (GitSurfaceGuard::Take)
  // and layer 2's binds follow in every repository besides its own config. Empty with the sandbox
  // off (nothing is guarded then) and in a Policy built by hand.
  UserGitConfig user_git_config;
  // Per-task temp dir (a writable tree): <workdir>/.forkbox-tmp/task-XXXXXX (TaskTmpDir).
  std::string tmpdir;
  // What tools get as TMPDIR/TMP/TEMP: TaskTmpDir::short_path(), a symbolic link to `tmpdir`
  // (layer 2 makes it again in each private /dev/shm). Empty: `tmpdir` itself. Set while
  // `tmpdir` is empty (ShortLink::kPrivateDir): layer 2 makes a directory of that name on its
  // private /dev/shm instead, and a fall back to layer 1 makes the task dir on disk then.
  std::string tmpdir_short;
  // The agent's own TCP connect is restricted to this port where Landlock ABI >= 4 (0: no limit).
  uint16_t model_port = 0;
};

// Canonicalises and validates the settings for `workdir` (no field-by-field copy: a Policy is the
// Settings plus what only this process knows). Fails on a workdir or --writable path that does
// not exist, an invalid --env name or a non-positive rlimit. Drops an `unreadable` path that lies
// in or holds the workdir or a --writable tree (Settings::unreadable).
// When the read scope's grants (Policy::read_grants) are listed: kNow, for a process that later
// confines its own reads (it could not list the carved directories then), or kAtTheRuleset, for
// one whose reads stay unconfined (`forkbox sandbox`: listed while its command's namespaces are set
// up, off the critical path).
enum class GrantListing { kNow, kAtTheRuleset };
Result<Policy> ResolvePolicy(const Settings& settings, const std::string& workdir,
                             GrantListing listing = GrantListing::kNow);

// For a process given paths another resolved (a task child gets the session's canonical --writable
// and --readable paths): each must resolve to itself still. A task may have swapped a directory in
// a writable tree for a symbolic link since, which would carry the grant wherever the link leads;
// that is refused (kPermissionDenied, naming the path and where it leads now).
Status CheckPathsUnchanged(const Settings& given, const Policy& resolved);

// The credential stores tools must not read, whether they exist now or are created later, canonical
// where they exist: the same list as CredentialPaths, below every home (policy.home and the
// password database's), and policy.unreadable (the transcript directory), minus policy.readable
// and anything inside it. The Landlock read scope (both layers) is built around them.
std::vector<std::string> DeniedReadPaths(const Policy& policy);

// Every host directory a tool under `policy` can write in `layer` (1 or 2) whose contents outlive
// the tool: the workdir, the --writable paths, a task temp dir outside the workdir, and in layer 1
// the shared /dev/shm (canonical; layer 2 gives tools a private one). What forkbox later runs with
// full rights (forkbox-child, its modules) must lie outside all of them.
std::vector<std::string> PersistentWritableTrees(const Policy& policy, int layer);

// Refuses (kInvalidArgument, a clear message) a workdir or --writable tree that is "/", in a
// system tree, a home or above one, an ancestor of a denied read path or inside one: its write
// rights would cover the credential stores (in layer 1 reading them too) or programs that run
// outside. OK with policy.allow_broad_workdir. Refuses a read-only policy's workdir in /dev/shm in
// any case: layer-1 commands may write there.
Status CheckWorkdirScope(const Policy& policy);

// Layer 2 replaces /tmp and /dev/shm with private tmpfs mounts. When the workdir is in a git
// worktree (or submodule) whose git dir lies there and no --writable path (nor, under /tmp, a
// --readable one) brings it back, every git command in a tool fails with "not a git repository":
// the warning that says so and what to add. "" otherwise, and in layer 1 (`layer`).
std::string HiddenGitDirWarning(const Policy& policy, int layer);

// The credential stores tools must not read (what exists of them now): the table in env.cc
// (~/.ssh, ~/.aws, ~/.git-credentials, other agents' logins, database and cloud tokens, browser
// and mail profiles, histories, ...; the README lists it), policy.unreadable, and as root
// /etc/shadow, /etc/gshadow and /etc/ssh/*_key; canonical, minus policy.readable and anything
// inside it (hidden even inside a writable tree). Layer 2 mounts an empty read-only tmpfs over each
// directory and /dev/null over each file (mounts rather than a Landlock read allow-list, which
// cannot carve a denied path out of an allowed tree).
std::vector<std::string> CredentialPaths(const Policy& policy);

// The scrubbed environment for tool commands: PATH, HOME, LANG, LC_*, TERM, TMPDIR/TMP/TEMP (set to
// policy.tmpdir_short, else policy.tmpdir), USER, SHELL, plus policy.env names — minus anything
// that looks like a secret (*_API_KEY, *_TOKEN, *_SECRET, ANTHROPIC_*, OPENAI_*, FORKBOX_*), which
// is never passed even when named with --env.
// A variable ForkboxProcessEnvironment parked (FORKBOX_TOOL_ENV_NAME) is NAME again here when NAME
// is opted in, and replaces an unparked NAME.
std::vector<std::string> ToolEnvironment(const Policy& policy, char** environ);

// The environment forkbox's own processes are started with (the spawner and every forkbox-child,
// which run before they are confined): ToolEnvironment's, but each --env opt-in outside its fixed
// names is parked as FORKBOX_TOOL_ENV_NAME, which neither the loader, libc nor OpenSSL reads. An
// opt-in may name what a tool can write (LD_LIBRARY_PATH=$WORKDIR/lib, LD_PRELOAD, OPENSSL_CONF):
// read by forkbox-child, it ran a tool's code unconfined. ToolEnvironment gives it back to the
// child's tools. Plus SSL_CERT_FILE and SSL_CERT_DIR from `environ`: a task trusts the CAs the
// parent does; and GIT_CONFIG_GLOBAL and GIT_CONFIG_SYSTEM: a task's ResolvePolicy reads the
// user's git config the parent's read (Policy::user_git_config), which its layer 2 guards.
std::vector<std::string> ForkboxProcessEnvironment(const Policy& policy, char** environ);

// True for names that look like secrets (*_API_KEY, *_KEY, *_TOKEN, *_SECRET, *_PASSWORD,
// ANTHROPIC_*, OPENAI_*, FORKBOX_*, case-insensitive): never passed to a tool.
bool IsSecretName(const std::string& name);

// Where TaskTmpDir makes its short link.
enum class ShortLink {
  kHere,          // Now, in this process's /dev/shm (the caller can remove it at the end).
  kInNamespaces,  // Only named: the caller enters layer 2 next, whose private /dev/shm gets it.
  // No task dir on disk at all, only the name: the caller's command enters layer 2, whose
  // private /dev/shm gets a directory of that name (a one-shot `forkbox sandbox`: no disk
  // metadata per command, nothing left even after SIGKILL). path() is empty. Without /dev/shm
  // on the host: kHere.
  kPrivateDir,
  // No task dir on disk: the temp dir is a directory /dev/shm/forkbox-XXXXXXXXXX (mode 0700)
  // made now on this process's /dev/shm (a layer-2 agent's own), locked while owned and removed
  // at the end; one whose owner died is swept by the next. For an agent that may write nothing
  // on disk (a read-only session's parent, a `write: none` task), whose RestrictToReadOnly keeps
  // it writable. No /dev/shm: no temp dir at all (path() empty). short_path() is empty: the path
  // is short already.
  kShmDir,
};

// A per-task temp directory removed (recursively) by its destructor:
// <workdir>/.forkbox-tmp/task-XXXXXX, where .forkbox-tmp/.gitignore ("*") keeps it out of git.
// Its owner holds a flock on it, so a task killed before its destructor ran (Ctrl-C, a timeout,
// SIGKILL) leaves a directory the next Create or Remove in that workdir sweeps away.
// Tools reach it by a short path, /dev/shm/forkbox-XXXXXXXXXX (a symbolic link with an
// unpredictable name), because an AF_UNIX path holds 108 bytes and Python's forkserver binds
// $TMPDIR/pymp-*/listener-*. /dev/shm, not /tmp: layer 1's Landlock lets the agents (confined
// parent and children) write only there, so they can make and remove their own links; it is
// sticky, so no other user can swap the link. The link goes with the directory (only while it
// still points there); no /dev/shm: no link (short_path() empty).
class TaskTmpDir {
 public:
  static Result<TaskTmpDir> Create(const std::string& workdir, ShortLink link = ShortLink::kHere);
  TaskTmpDir() = default;
  ~TaskTmpDir();
  TaskTmpDir(TaskTmpDir&&) noexcept;
  TaskTmpDir& operator=(TaskTmpDir&&) noexcept;
  const std::string& path() const { return path_; }
  const std::string& short_path() const { return short_; }
  // Sets policy->tmpdir and policy->tmpdir_short.
  void ApplyTo(Policy* policy) const;
  // What the destructor does, once: removes the directory and its link (by descriptor).
  void Remove();
  // The descriptors Remove works through (-1 when none): a process that closes its other
  // descriptors before it removes the directory (a keeper, Sandbox::Spawn's `orphaned`) keeps
  // these.
  // The lock, too: a keeper that outlives its spawner keeps the directory from being swept.
  std::array<int, 3> descriptors() const { return {workdir_.get(), root_.get(), lock_.get()}; }
  // The directory itself (open, locked) and the one it was made in; -1 when none.
  int dir_fd() const { return lock_.get(); }
  int parent_fd() const { return root_.get(); }
  bool on_disk() const { return static_cast<bool>(workdir_); }
  // For a kPrivateDir temp dir whose command falls back to layer 1: the task dir on disk with
  // its link made at that one's `short_path` (TMPDIR stays the same string). Fails if the name
  // is taken.
  static Result<TaskTmpDir> OnDiskAt(const std::string& workdir, const std::string& short_path);

 private:
  static Result<TaskTmpDir> OnDiskNamed(const std::string& workdir, ShortLink link,
                                        const std::string& name);
  static Result<TaskTmpDir> InShm();
  std::string path_;
  std::string short_;
  bool own_link_ = false;  // Made here (kHere), so removed here.
  // The removal goes by these, never by path_ (a tool may swap a name for a symbolic link).
  UniqueFd workdir_;  // O_PATH
  UniqueFd root_;     // <workdir>/.forkbox-tmp (kShmDir: /dev/shm, and workdir_ is empty)
  UniqueFd lock_;     // task-XXXXXX (forkbox-XXXXXXXXXX), flocked while this owns it
  std::string name_;  // Its name in root_
};

// What is in force, for banners and `forkbox sandbox --check`.
struct Report {
  int landlock_abi = 0;  // 0: unavailable.
  int layer = 0;         // 1 or 2.
  std::string kernel;    // uname -r
  struct Line {
    std::string protection;  // e.g. "landlock", "seccomp", "user namespace", "fork bomb"
    std::string state;       // "active", "unavailable", "weaker", "off"
    std::string detail;
  };
  std::vector<Line> lines;
  bool enforceable = false;    // The default policy can be enforced.
  std::string Banner() const;  // One line: "sandbox: layer 2, landlock ABI 7, seccomp, no net".
};

// For a long-lived launcher (the parent), as uid 0 with a writable pids hierarchy: moves the
// calling process into one pids cgroup for the whole session, pids.max = rlimit_nproc per task
// times `concurrent_tasks` (+1 for the parent's own tools). Spawns inherit it instead of each
// paying a cgroup v1 attach (an RCU grace period, ~20 ms). Returns the cgroup's lock, to hold for
// the session's life (PidsCgroup::JoinSession); an empty descriptor and a no-op elsewhere.
Result<UniqueFd> JoinSessionProcessLimit(const Policy& policy, int64_t concurrent_tasks);

// Inspects the kernel and returns what the policy would get. Never changes the process.
Report Check(const Policy& policy);

// Where a `forkbox sandbox` command's layer-2 namespace init or layer-1 keeper records the
// command's own wait status (Sandbox::AfterCommand::status) just before it exits with the
// command's exit code: a PID namespace's init cannot die of the command's signal, so its exit says
// 128 + N, as a command that exited with 128 + N would. A shared anonymous page: the command
// leaves it at its exec.
class CommandStatus {
 public:
  static Result<CommandStatus> Create();
  CommandStatus(CommandStatus&& other) noexcept;
  CommandStatus& operator=(CommandStatus&& other) noexcept;
  ~CommandStatus();
  // In the init or keeper. Async-signal-safe.
  void RecordRaw(int wait_status) const;
  // The command's wait status, given its init's or keeper's: the one recorded when the init or
  // keeper then exited as it said (ExitCodeFromWaitStatus of it); else `keeper_status` (nothing
  // recorded, or the keeper was killed).
  int Resolve(int keeper_status) const;

 private:
  CommandStatus() = default;
  std::atomic<uint32_t>* word_ = nullptr;
};

class PidsCgroup;
class UnixBroker;
struct ContainPlan;
class PreparedAgentSandbox;

// The handle to spawn tool commands under the policy. Spawn applies the tool layer in the forked
// child: the whole pipeline from an unsandboxed caller (ForTools: the parent's tools, `forkbox
// sandbox`), or only the tool layer stacked on the agent's own sandbox (EnterAgentSandbox).
// Everything is prepared before fork (compiled BPF, Landlock ruleset, mount plan); the child only
// makes async-signal-safe calls, so callers may be multithreaded. Each command gets its own
// session and process group. In layer 2 (unsandboxed caller) the returned process is the init of
// the command's PID namespace; it exits with the command's status (128+N when the command dies of
// signal N), its exit kills every leftover process, and it dies with the spawning thread
// (PDEATHSIG). A ForTools handle (unconfined caller) spawns from its unix connect broker's thread
// (the tools' Landlock domains nest in that thread's): its commands die with the handle, so keep
// it until they were waited for. A ForCommand handle spawns from the calling thread, which it
// scoped first, and which waits for its commands in ServeUntil. Setup and exec failures come back
// as a Status naming the failing step.
class Sandbox {
 public:
  // Fails closed (kUnavailable) without Landlock or seccomp. With policy.enabled == false, Spawn
  // runs commands unconfined (--sandbox=off). As uid 0 outside a forkbox pids cgroup, the handle
  // owns one pids cgroup (pids.max = rlimit_nproc) that every command it spawns joins.
  // No layer-2 probe here: the handle assumes user namespaces work and its first command is the
  // probe. When a layer-2 spawn fails, Spawn probes (Layer2Available, as Check does); if user
  // namespaces are refused, that command and every later one run in layer 1 (a handle made as
  // Check() would have made it, whose report() is then this handle's), otherwise the error
  // stands.
  static Result<Sandbox> ForTools(Policy policy);
  // ForTools for a process whose only job is its commands (`forkbox sandbox`): first the calling
  // thread enters no_new_privs and, with Landlock ABI 6+, a domain of its own that scopes
  // abstract unix sockets and restricts nothing else. Its commands then nest in that domain and
  // spawn from the calling thread, and that thread also answers their unix connect broker: the
  // caller waits for its commands in ServeUntil (no broker thread). Irreversible for the calling
  // thread and the threads it creates later, so not for a caller that goes on with other work (a
  // test process: ForTools).
  static Result<Sandbox> ForCommand(Policy policy);

  Sandbox(Sandbox&&) noexcept;
  Sandbox& operator=(Sandbox&&) noexcept;
  ~Sandbox();

  // options.steps, carry_fds and clone_flags must be empty (the sandbox owns them);
  // options.cwd defaults to the workdir. Without network, the command's (and its descendants')
  // AF_UNIX socket() and connect() go through this handle's unix connect broker
  // (sandbox/unix_broker.h) until none of them is left; refusals are written on the command's
  // stderr (the fd mapped to 2, else this process's). `git_surface`: the workdir's git surface
  // the caller found just now (GitSurfaceGuard::Take's `surface`), for layer 2's read-only binds
  // instead of a walk of the workdir of their own; nullptr: walked for this command.
  // `orphaned` (a ForCommand handle only; nullptr: none): what the caller puts back and removes
  // after the command. Should the caller die first (a SIGKILL), the command's layer-1 keeper or
  // layer-2 namespace init does it instead, from its own copy of the caller's memory, once
  // nothing of the command is left; the caller must therefore be single-threaded when it spawns,
  // and their descriptors are kept open in that process.
  struct AfterCommand {
    GitSurfaceGuard* git = nullptr;         // Restored (GitSurfaceGuard::Restore).
    TaskTmpDir* tmp = nullptr;              // Removed (TaskTmpDir::Remove).
    GuardJournal* journal = nullptr;        // Emptied once `git` is back (GuardJournal::Clear).
    const CommandStatus* status = nullptr;  // Recorded whenever the command ends (not undone).
  };
  Result<ChildProcess> Spawn(SpawnOptions options, const MountPlan* git_surface = nullptr,
                             const AfterCommand* orphaned = nullptr) const;
  // Waits until one of `until` has an event (poll(2) semantics; revents are set). A ForCommand
  // handle answers its commands' unix connect broker meanwhile, and only here: a command's
  // socket() or connect() waits until its caller is in ServeUntil. With a broker thread, a poll.
  Status ServeUntil(std::span<pollfd> until) const;
  // Makes now what every Spawn shares and the first one would otherwise make on its clock: the
  // tool Landlock ruleset (up to ~185 rules as root) and the unix connect broker's thread. Any
  // thread may call it, also while another spawns (that Spawn waits for the ruleset); not while a
  // mutator below runs. A failure here fails the next Spawn the same way. Idempotent.
  Status Prewarm() const;

  const Policy& policy() const { return policy_; }
  // The per-task temp dir handed to tools (TMPDIR), set once it exists.
  void set_tmpdir(const TaskTmpDir& tmpdir);
  // Narrows only: commands spawned afterwards get no network whatever the policy allowed (an
  // agent type with network: off).
  void DisallowNetwork();
  // What is in force: Check() before entering, for banners and --check.
  const Report& report() const;

 private:
  friend Result<Sandbox> EnterAgentSandbox(PreparedAgentSandbox prepared,
                                           std::span<const int> keep_fds);
  friend Result<Sandbox> EnterLauncherSandbox(const Policy& policy, Report report,
                                              const std::vector<std::string>& own_writable,
                                              const std::function<Status()>& before_entering);
  // Who spawns the tools, and from which Landlock domain they nest.
  enum class Caller {
    kUnconfined,   // ForTools: from the broker's thread, which scopes itself.
    kScopedSelf,   // ForCommand: from the calling thread, which scoped itself.
    kInsideAgent,  // The agent's or the launcher's sandbox: from the calling thread.
  };
  Sandbox(Policy policy, Report report, Caller caller);
  Result<ChildProcess> SpawnBrokered(SpawnOptions options, ContainPlan& plan) const;
  static Result<Sandbox> Make(Policy policy, bool assume_layer2, Caller caller);
  Result<int> SharedRulesetFd() const;  // -1: none to share.
  // The agent's (or launcher's) domain holds the read scope and the base filter already.
  bool inside_agent() const { return caller_ == Caller::kInsideAgent; }
  Result<ChildProcess> SpawnHere(SpawnOptions options, const MountPlan* git_surface,
                                 const AfterCommand* orphaned) const;
  // `orphaned` for a command that runs in the layer-1 fallback: the temp dir on disk is the
  // fallback's (FallBackToLayer1), where the caller's was a private one.
  std::optional<AfterCommand> Layer1Orphaned(const AfterCommand* orphaned) const;
  const Sandbox* Layer1() const;  // The layer-1 handle once fallen back, or null.
  Result<const Sandbox*> FallBackToLayer1() const;
  bool layer2_assumed_ = false;  // report_ says layer 2 unprobed (ForTools).
  Policy policy_;
  Report report_;
  Caller caller_ = Caller::kUnconfined;
  std::unique_ptr<PidsCgroup> cgroup_;
  // Serves the unix connect broker of every tool spawned without network (unix_broker.h); its
  // thread starts with the first such tool (or Prewarm) and is joined when the handle goes.
  std::unique_ptr<UnixBroker> broker_;
  // The tool ruleset, built by Prewarm or the first Spawn that can share it (see ToolRuleset in
  // contain.h) and reused by every later one, and the layer-1 fallback handle; the policy's
  // mutators above drop both.
  struct SharedState;
  std::unique_ptr<SharedState> shared_;
};

// forkbox-child sandboxes itself before its first model call. Keeps `keep_fds` (and 0-2) open,
// closes every other fd. Must be called while the process is single-threaded, once. Non-dumpable,
// PDEATHSIG SIGKILL. In layer 2 it forks once: the caller's process stays behind as a waiter
// (under seccomp) that relays the exit status (and turns SIGTERM/SIGINT/SIGHUP into SIGKILL of
// the agent), and this returns in the child, pid 1 of new user+mount+PID namespaces, so the whole
// task tree dies with it. In layer 1 the process becomes a child subreaper instead. Call
// KillAllDescendants at the end of the task. Fails closed (kUnavailable) without Landlock or
// seccomp; with policy.enabled == false it changes nothing and returns an unconfined handle.
// The agent's seccomp filter allows inet sockets (it must reach the model); the returned handle's
// Spawn stacks the tool layer (no network, tool Landlock rules) on top.
Result<Sandbox> EnterAgentSandbox(const Policy& policy, std::span<const int> keep_fds);

// EnterAgentSandbox in two (or three) steps, so that the preparation overlaps work on another
// thread (the child loads its HTTP module meanwhile). PrepareAgentSandbox only reads and
// allocates: the checks, the pids cgroup, the mount plan, the Landlock ruleset, the seccomp
// programs; any thread may call it. `layer2`: kProbe probes layer 2 here; kVerified: the
// caller's parent probed it for it and it works, so no probe (entering then fails if the
// namespaces do; it never falls back to layer 1); kEntered: as kVerified, and
// EnterAgentNamespaces already ran in this process (the mounts stay EnterAgentSandbox's: made
// while the module loads, a private /tmp would hide a build tree's module from the loader).
// EnterAgentSandbox(prepared, keep_fds) does
// the rest, exactly as the one-step call does, under the same conditions (single-threaded,
// once). Together they are the one-step call: the same steps in the same order, the same end
// state.
enum class AgentLayer2 { kProbe, kVerified, kEntered };
class PreparedAgentSandbox {
 public:
  PreparedAgentSandbox(PreparedAgentSandbox&&) noexcept;
  PreparedAgentSandbox& operator=(PreparedAgentSandbox&&) noexcept;
  ~PreparedAgentSandbox();

 private:
  friend Result<PreparedAgentSandbox> PrepareAgentSandbox(const Policy& policy, AgentLayer2 layer2);
  friend Result<Sandbox> EnterAgentSandbox(PreparedAgentSandbox prepared,
                                           std::span<const int> keep_fds);
  struct State;
  explicit PreparedAgentSandbox(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};
Result<PreparedAgentSandbox> PrepareAgentSandbox(const Policy& policy, AgentLayer2 layer2);
Result<Sandbox> EnterAgentSandbox(PreparedAgentSandbox prepared, std::span<const int> keep_fds);

// The first steps of EnterAgentSandbox in layer 2, for a caller whose parent verified layer 2,
// taken before the rest: non-dumpable and PDEATHSIG -> rlimits -> unshare (user, mount, PID) ->
// id maps -> fork. The caller stays behind as the waiter (as EnterAgentSandbox describes: no
// descriptor, the base filter, the agent's exit status relayed); this returns in the agent, pid 1
// of the new PID namespace, with the mounts and everything after them still to come
// (PrepareAgentSandbox with AgentLayer2::kEntered, then EnterAgentSandbox). The fork copies the
// process's page tables and its later writes fault copy-on-write, so call it early, while the
// process is small (before the HTTP module loads). Single-threaded callers only, once. Nothing is
// resolved yet, so only `settings`' rlimits are used (checked positive again by ResolvePolicy).
Status EnterAgentNamespaces(const Settings& settings);

// The parent's (forkbox's) launcher: forkbox's pid stays behind as a small waiter and the session
// goes on in a child of it, so that a SIGKILL of forkbox's pid still ends the session cleanly.
// Single-threaded, before the spawner starts (the spawner and every task child are then below it).
// In layer 2 (`layer2`) the launcher is pid 1 of a PID and mount namespace of its own (a user one
// too unless root may do without), with a fresh /proc, so that its bash and file tools see no
// process but the session's (no command line of yours): unshare -> id maps -> fork -> /proc. In
// layer 1 it is a plain fork. The waiter runs under no_new_privs and the base filter, with no
// capability and no descriptor but stdout and stderr (where it says the launcher was killed,
// `on_killed`). It relays the launcher's exit status (a death by signal as that
// signal; an exit by which the session ended for a signal as a death by it:
// TellWaiterTheSessionEndsBy) and what a signal to forkbox meant: SIGTERM, SIGHUP, SIGQUIT (tagged:
// PassedOnByWaiter) and SIGCONT pass on, SIGINT too (tagged) unless the terminal sent it (the
// launcher, in the same process group, got it itself),
// SIGTSTP/SIGTTIN/SIGTTOU stop both (as their default action does: not in an orphaned process
// group), what forkbox ignored (SIGPIPE, SIGXFSZ) stays ignored, any other signal whose default
// ends a process ends the launcher by SIGTERM and then the waiter by that signal; SIGCHLD, SIGURG
// and SIGWINCH are ignored. The launcher gets SIGTERM when the waiter dies (PDEATHSIG; a SIGKILL of
// forkbox's pid): never SIGKILL, so that its teardown kills every process its tools left (layer 1
// has no namespace to) and puts back the git trust surface (a planted .git/commondir). The launcher
// must handle SIGINT, SIGTERM, SIGHUP and SIGQUIT from before this call on: as a namespace init it
// gets no other signal from outside, and an unhandled SIGTERM would leave it running. As uid 0
// (where RLIMIT_NPROC does not apply) on Linux 6.14+ in layer 2, the namespace's pid_max caps the
// whole session: rlimit_nproc for each of `concurrent_tasks` and for the parent's own tools, plus
// `standby` children, the spawner and the parent (JoinSessionProcessLimit's budget, which then
// needs no cgroup). Returns, in the launcher, a descriptor that the waiter writes once it is
// confined: the caller passes it to AwaitLauncherWaiter before its own confinement, so that no
// model call and no tool runs while the waiter is not yet confined (the fork returns to both at
// once; the waiter confines itself then, with no input of any kind). And a pidfd of the waiter,
// so that the launcher can tell the waiter's death from a SIGTERM it relayed (both come as
// SIGTERM from the same sender): WaiterDied.
struct LauncherWaiter {
  UniqueFd confined;  // For AwaitLauncherWaiter.
  UniqueFd pidfd;     // The waiter's (forkbox's pid): readable once it has died.
  pid_t pid = 0;      // forkbox's pid, as its caller knows it.
};
// `on_killed`, when set, runs in the waiter if the launcher dies of a signal it did not take (the
// OOM killer's SIGKILL, a crash: the launcher itself never dies of one), once what it left is
// killed and before that death is relayed (the exit status stays 128 + signal). With nothing else
// of the session alive to say it, the waiter keeps stdout and stderr for it.
using LauncherKilled = std::function<void(pid_t launcher, int sig)>;
Result<LauncherWaiter> EnterLauncher(const Policy& policy, bool layer2, int64_t concurrent_tasks,
                                     int64_t standby, const LauncherKilled& on_killed = {});
// True once the waiter behind `pidfd` has died (a SIGKILL of forkbox's pid); false while it runs
// or for an empty fd.
bool WaiterDied(const UniqueFd& pidfd);
// Waits until the waiter wrote that it is confined; an error if it died first. OK for an empty fd
// (no launcher: the sandbox off).
Status AwaitLauncherWaiter(UniqueFd confined);
// In the launcher, right before it exits 128 + `signo` because the session ended by `signo`
// (SIGINT, SIGTERM, SIGHUP or SIGQUIT): the waiter then dies of that signal instead of exiting with
// the code, as a caller expects of a process a signal stopped (a shell ends its loop only when its
// child died of SIGINT). The fact goes through memory the two share, not the exit code: an exit
// code of 130 alone does not say it. False, with nothing done, in any process but the launcher (no
// waiter: the process is forkbox's pid and must die of the signal itself). Async-signal-safe.
bool TellWaiterTheSessionEndsBy(int signo);
// Whether a signal the launcher got is a copy the waiter passed on (it sends SIGINT, SIGTERM and
// SIGHUP with sigqueue, si_code SI_QUEUE, and a value that holds a per-signal sequence number,
// stored in *sequence). `code` and `value` are the siginfo's si_code and si_value.sival_int (or a
// signalfd's ssi_code and ssi_int). A signal sent to forkbox's whole process group reaches the
// launcher directly and then again through the waiter, which cannot tell it was: the launcher must
// take it once. Async-signal-safe.
bool PassedOnByWaiter(int code, int value, uint16_t* sequence);
// A passed-on copy's value: this tag | its sequence number (1, 2, ... per signal, 16 bits).
inline constexpr int kPassedOnTag = 0x46420000;
// In the launcher: how many job stops of the session (Ctrl-Z, then the shell's `fg`) its waiter
// saw end, counted in the memory the two share before the waiter's SIGCONT to the launcher (one
// `fg` brings it up to three SIGCONTs, and one that comes while another is pending is lost: the
// count is not). A shell had the terminal meanwhile: the interactive prompt redraws itself once
// per stop. 0 in any other process. Async-signal-safe.
uint32_t JobStopsEnded();

// The parent (forkbox) confines itself once its set-up is done and before its first model call:
// the agent's seccomp filters and Landlock domain (writable: the policy's trees plus
// `own_writable`, e.g. its transcript directory, which its tools do not get, and which this
// domain lets it write but not read: its tools inherit its read scope), no_new_privs, every
// capability dropped, rlimits, subreaper; in layer 2 also new user + mount namespaces with the
// same read-only mounts as a task (no PID namespace and no fork: it keeps its pid, terminal,
// signals and children). Signals are not scoped, so it can still kill the task children its
// spawner starts outside its domain. Must be called single-threaded, once, after the spawner
// was forked (the filter refuses namespace creation). `report` is Check(policy), made once before
// the spawner started (the layer-2 probe must run before the filter); the layer and the Landlock
// ABI are planned from it, and an unenforceable one is refused. The returned handle stacks the
// tool layer for its own bash. With policy.enabled == false: Sandbox::ForTools (unconfined).
// `before_entering` runs once the plan is made, before anything in the process changes (also
// with the sandbox off): the caller's last unconfined step (the parent finishes its spawner's
// start there, so that the spawner's execve overlaps the planning). Its failure is returned.
Result<Sandbox> EnterLauncherSandbox(const Policy& policy, Report report,
                                     const std::vector<std::string>& own_writable,
                                     const std::function<Status()>& before_entering);

// A directory descriptor opened before entering a sandbox still reaches the mounts of the old
// mount namespace (a writable .git/config in layer 2). Once inside, this opens `path` again
// (O_PATH) and checks that it is the same directory as `held` (device and inode), so the
// identity fixed at start-up is kept and only the mounts change. Fails when the name now names
// something else.
Result<UniqueFd> ReopenInside(const UniqueFd& held, const std::string& path);

// Stacks a Landlock domain on the calling thread that handles every filesystem right and grants
// only read and execute on "/", write on the harmless device files and every right beneath the
// open directories `still_writable` (the parent's transcript directory, opened before a private
// /tmp may have hidden its path): from then on no file can be written, made or removed elsewhere
// by this process or anything it starts, the workdir and /tmp included. Domains only narrow, so
// this never widens what the caller had. For `--sandbox read-only` (the parent) and `write: none`
// agents (a task child). Needs no_new_privs and a single-threaded caller (Landlock restricts the
// calling thread only): another thread still running is an error.
// `tmp` (optional, a ShortLink::kShmDir temp dir, else kInvalidArgument): every right beneath the
// /dev/shm it is in too (private in layer 2; in layer 1 the shared one, which layer-1 tools may
// write anyway), where POSIX semaphores and shared memory live. When a tree `policy` lets write
// lies in /dev/shm (a workdir there, which must stay read-only): every right beneath the temp dir
// alone, and rmdir beneath /dev/shm so that its owner can remove it at the end.
Status RestrictToReadOnly(const Policy& policy, std::span<const int> still_writable = {},
                          const TaskTmpDir* tmp = nullptr);

// The spawner (child/spawner.h) confines itself before it serves a request: every fd
// but 0-2 and `keep_fds` closed, non-dumpable, no_new_privs and the seccomp program kSpawner.
// Filters and capability bounds are inherited across execve by the children it starts, so it
// refuses only what no task child needs (sandbox/seccomp_policy.h) and keeps its capabilities
// (as root, a child without them cannot set up its layer-2 mounts); what it runs is fixed by
// the spawner's code, not by a request. Single-threaded callers only.
Status ConfineSpawner(std::span<const int> keep_fds);

// Reaps, without blocking, every exited child of the calling process that is not in `owned`
// (processes that ChildProcess handles still own): the zombies of orphans re-parented to an agent
// (subreaper or PID-namespace init). Call it between tool calls so zombies never pile up against
// RLIMIT_NPROC or the pids cgroup. Returns the number reaped.
int ReapOrphans(std::span<const pid_t> owned = {});

// Kills every child of the calling process not in `keep` and reaps it, then the same for what that
// re-parented to it (a subreaper or PID-namespace init), until none is left: what a tool command
// left running, detached daemons included, once it ended. Returns the number killed, or -1 when
// some may still be there: still there after every round, or /proc unreadable (errno says which:
// KillDescendantsRaw).
int KillOrphans(std::span<const pid_t> keep);

// Job control of a whole tree: each command forkbox starts leads a process group (and a session)
// of its own, so the terminal's Ctrl-Z reaches none of them. Async-signal-safe and allocation-
// free (sandbox/hygiene.h's KillDescendantsRaw walks the same way).
// SIGSTOPs every descendant of this process not stopped already (a zombie is left), top down,
// round after round until a round finds every one stopped: one forked meanwhile is found by the
// next, and a stopped process forks no more. One in an uninterruptible wait ('D': a vfork parent,
// a hung NFS read) stops only when the wait ends: after 20 ms of rounds that found only such
// processes left, it is left to stop then. `proc`: a descriptor of the /proc to read, one whose
// PID namespace holds this process (-1: /proc). Returns how many signals it sent, or -1 with errno
// as KillDescendantsRaw (EAGAIN: some still ran after kMaxKillRounds).
int StopDescendantsRaw(int proc = -1);
// SIGCONTs every descendant of this process, top down, from one pass over /proc: what the stop
// left stopped forked nothing since. `proc`: as StopDescendantsRaw's. Returns how many it
// signalled, or -1 with errno.
int ContinueDescendantsRaw(int proc = -1);
// Ctrl-Z of a whole job: StopDescendantsRaw(`proc`), then this process as `sig`'s default action
// would (StopAsDefaultRaw: SIGTSTP, SIGTTIN, SIGTTOU), and once it is continued
// ContinueDescendantsRaw. A stop that failed is said on stderr (some processes may run on).
// Async-signal-safe.
void StopAsJobRaw(int sig, int proc = -1);

// Kills every descendant of the calling process, including setsid'd and double-forked daemons
// (re-parented to this process as subreaper or PID-namespace init), and reaps them. forkbox-child
// calls it when its task ends. It may reap children that ChildProcess handles still own (they then
// report ECHILD), so call it last. Returns the number of processes signalled, or -1 as
// KillOrphans. Async-signal-safe and allocation-free (the parent's exit-mode handler calls it).
int KillAllDescendants();

// Why KillOrphans, KillAllDescendants or StopDescendantsRaw returned -1, from the errno it left:
// "still there after every round" (EAGAIN), else that /proc could not be read to find them.
// Async-signal-safe.
const char* KillFailureText(int err);

}  // namespace forkbox::sandbox
