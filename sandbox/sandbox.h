// sandbox/: turns a process into a sandboxed one, and runs commands under exactly the policy that
// tool calls get. Fails closed: when Landlock or seccomp cannot be enforced, every entry point
// returns kUnavailable naming the missing protection and the kernel version, unless the policy
// was explicitly disabled (--sandbox=off), in which case callers warn loudly.
//
// The pipeline (one linear sequence, seccomp last):
//   close_range(3..) except kept fds -> rlimits -> [layer 2: user+mount+pid namespaces, read-only
//   mounts, private /tmp and /dev/shm, read-only .git/hooks and .git/config] -> drop every
//   capability -> no_new_privs -> Landlock -> seccomp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ipc/messages.h"
#include "base/process.h"
#include "base/status.h"

namespace forkbox::sandbox {

struct Policy {
  bool enabled = true;  // false: --sandbox=off (explicit, loud opt-out).
  std::string workdir;  // Absolute, canonical. The only writable tree (plus `writable`).
  std::vector<std::string> writable;   // --writable PATH opt-ins, absolute and canonical.
  bool allow_net = false;              // --allow-net: tools may create sockets.
  std::vector<std::string> env_allow;  // --env NAME opt-ins.
  int64_t rlimit_fsize_bytes = 1LL << 30;
  int64_t rlimit_as_bytes = 8LL << 30;
  int64_t rlimit_nofile = 1024;
  int64_t rlimit_nproc = 512;
  // Per-task temp dir (TMPDIR/TMP/TEMP for tools). Empty: tools get the workdir's
  // .forkbox-tmp/<random> created by MakeTaskTmpDir.
  std::string tmpdir;
  // The agent's own TCP connect is restricted to this port where Landlock ABI >= 4 (0: no limit).
  uint16_t model_port = 0;
};

// Builds a Policy from the protocol's settings, canonicalising paths. Fails on a workdir or
// --writable path that does not exist.
Result<Policy> PolicyFromSettings(const ipc::SandboxSettings& settings, const std::string& workdir);

// The scrubbed environment for tool commands: PATH, HOME, LANG, LC_*, TERM, TMPDIR/TMP/TEMP (set to
// policy.tmpdir), USER, SHELL, plus policy.env_allow names — minus anything that looks like a
// secret (*_API_KEY, *_TOKEN, *_SECRET, ANTHROPIC_*, OPENAI_*, FORKBOX_*), which is never passed
// even when named with --env.
std::vector<std::string> ToolEnvironment(const Policy& policy, char** environ);

// True for names that look like secrets (*_API_KEY, *_KEY, *_TOKEN, *_SECRET, *_PASSWORD,
// ANTHROPIC_*, OPENAI_*, FORKBOX_*, case-insensitive): never passed to a tool.
bool IsSecretName(const std::string& name);

// A per-task temp directory removed (recursively) by its destructor:
// <workdir>/.forkbox-tmp/<random>, where .forkbox-tmp/.gitignore ("*") keeps it out of git.
class TaskTmpDir {
 public:
  static Result<TaskTmpDir> Create(const std::string& workdir);
  TaskTmpDir() = default;
  ~TaskTmpDir();
  TaskTmpDir(TaskTmpDir&&) noexcept;
  TaskTmpDir& operator=(TaskTmpDir&&) noexcept;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
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
// paying a cgroup v1 attach (an RCU grace period, ~20 ms). OK and a no-op elsewhere.
Status JoinSessionProcessLimit(const Policy& policy, int64_t concurrent_tasks);

// Inspects the kernel and returns what the policy would get. Never changes the process.
Report Check(const Policy& policy);

// forkbox-child sandboxes itself before its first model call. Keeps `keep_fds` (and 0-2) open,
// closes every other fd. Must be called while the process is single-threaded. Non-dumpable,
// PDEATHSIG SIGKILL. In layer 2 it forks once: the caller's process stays behind as a waiter that
// relays the exit status (and turns SIGTERM/SIGINT/SIGHUP into SIGKILL of the agent), and this
// returns in the child, pid 1 of new user+mount+PID namespaces, so the whole task tree dies with
// it. In layer 1 the process becomes a child subreaper instead. Call KillAllDescendants at the
// end of the task. Fails closed (kUnavailable) without Landlock or seccomp; with
// policy.enabled == false it changes nothing and returns the "off" report.
// The agent's seccomp filter allows inet sockets (it must reach the model); tool commands spawned
// afterwards with SpawnSandboxed stack the no-network filter on top.
Result<Report> EnterAgentSandbox(const Policy& policy, std::span<const int> keep_fds);

// Spawns a command under the tool policy, in its own session and process group. Works both from
// an unsandboxed process (the parent's tools, `forkbox sandbox`) where it applies the whole
// pipeline in the forked child, and from inside EnterAgentSandbox, where it stacks the tool layer.
// Everything is prepared before fork (compiled BPF, Landlock ruleset, mount plan); the child only
// makes async-signal-safe calls, so callers may be multithreaded. In layer 2 (unsandboxed caller)
// the returned process is the init of the command's PID namespace; it exits with the command's
// status (128+N when the command dies of signal N) and its exit kills every leftover process.
// Setup and exec failures come back as a Status naming the failing step.
// options.pre_exec must be empty (the sandbox owns it); options.cwd defaults to the workdir.
Result<ChildProcess> SpawnSandboxed(const Policy& policy, SpawnOptions options);

// Kills every descendant of the calling process, including setsid'd and double-forked daemons
// (re-parented to this process as subreaper or PID-namespace init), and reaps them. forkbox-child
// calls it when its task ends. It may reap children that ChildProcess handles still own (they then
// report ECHILD), so call it last. Returns the number of processes signalled.
int KillAllDescendants();

// `forkbox sandbox [--workdir DIR] [--allow-net] [--writable PATH]... [--env NAME]... -- CMD...`
// and `forkbox sandbox --check`. argv[0] is "sandbox". Returns the process exit code.
int SandboxCommandMain(int argc, char** argv);

}  // namespace forkbox::sandbox
