// Layer 2: user + mount + PID namespaces. Everything is mounted read-only except the writable
// trees; /tmp and /dev/shm are private tmpfs (the temp dir's short link on /dev/shm); .git/hooks
// and .git/config are read-only binds; a fresh /proc shows only the task's processes. The plan is
// computed before fork; the Raw functions are async-signal-safe and run in the forked child.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sandbox/git_config.h"

namespace forkbox::sandbox {

struct MountPlan {
  std::vector<std::string> writable;  // Canonical; the workdir first.
  // Policy::read_only: the trees in `writable` are still bound where they are (one under /tmp
  // stays visible above the private tmpfs) but read-only, as the rest of /: Landlock's rule for
  // the private /tmp would otherwise reach a workdir bound beneath it.
  bool trees_read_only = false;
  // .git directories bound onto themselves: a mount point cannot be renamed or removed, so a
  // tool cannot swap in a fresh .git with planted hooks.
  std::vector<std::string> pinned;
  // Git's trust surface, bound read-only: hooks/, info/, config, config.worktree, commondir of
  // the workdir's git dir (and its common dir), other worktrees' admin dirs, submodules' git
  // dirs, nested repositories' `.git`, a `.git` file; and project agent config (.forkbox/,
  // .claude/, .codex/, ...: what the next session or agent started there trusts; kAgentConfigs).
  std::vector<std::string> readonly;
  // Surface paths that were links when planned (`.git/hooks -> ../githooks`): readonly has their
  // targets, since a bind meeting a link is refused (one there now was planted since); the links
  // themselves stay writable and are guarded by GitSurfaceGuard.
  std::vector<std::string> links;
  // Trust-surface files that did not exist (commondir, config.worktree, .forkbox, .claude): a bind
  // cannot stop their creation in a writable tree, so the namespace init removes them once the
  // command and every process it left behind are dead, and says so on stderr.
  std::vector<std::string> absent;
  // What an operation in progress in each git dir makes git run when the user continues it
  // (rebase-merge/git-rebase-todo's exec lines and rebase-merge/strategy: `git rebase --continue`;
  // sequencer/opts' strategy: `git cherry-pick --continue`), and the two directories. Never bound:
  // a rebase in the sandbox writes them, and must stay continuable. GitSurfaceGuard undoes only
  // what appeared there since its record and would run a command.
  std::vector<std::string> operations;
  // Credential stores hidden from the command: an empty read-only tmpfs over each directory,
  // /dev/null over each file; and /dev/null over every pathname socket bound when the plan was
  // made (/proc/net/unix) outside the writable trees and the emptied socket_dirs.
  std::vector<std::string> hidden_dirs;
  std::vector<std::string> hidden_files;
  // Where the daemons' pathname sockets live (/run, and /var/run when it is not a link to it):
  // each gets an empty read-only tmpfs, so connect() finds no socket there (tools may create
  // AF_UNIX sockets in layer 2). /etc/resolv.conf's target under them is bound back (visible).
  std::vector<std::string> socket_dirs;
  // Paths under /tmp that stay visible (bound read-only) above the private tmpfs: programs named
  // in argv (one file each, e.g. a test binary in a build tree there) and --readable paths.
  // visible[i] is where visible_sources[i] (canonical, walked without following any link: a swap
  // since the plan fails the mount) is bound; visible_dirs[i] is visible[i]'s directory. Filled
  // by AddVisible.
  std::vector<std::string> visible;
  std::vector<std::string> visible_sources;
  std::vector<std::string> visible_dirs;
  // The task temp dir's short link (TaskTmpDir::short_path()), made again on the private
  // /dev/shm: /dev/shm/forkbox-XXXXXXXXXX -> <workdir>/.forkbox-tmp/task-XXXXXX. Empty: none.
  // An empty target (ShortLink::kPrivateDir): a directory of that name (mode 0700) instead.
  std::string tmp_link;
  std::string tmp_link_target;
  // A fresh /proc for the new PID namespace. False for the parent, which enters user and mount
  // namespaces only (proc can only be mounted from inside the PID namespace it shows).
  bool mount_proc = true;
  std::string uid_map;  // "<uid> <uid> 1": the same ids inside.
  std::string gid_map;
};

inline constexpr size_t kMaxWritablePaths = 32;
// A directory with agent config adds 25 absent paths (kAgentConfigs' names missing there; up to
// 50 beside every tool's folder), so this holds the workdir's beside 80 to 160 such directories
// below it, where 64 held two. Past it a path is neither removed by the namespace init nor
// recorded by GitSurfaceGuard, which still removes it once it appears (its next walk plans it as
// it is). Each costs the guard a lookup per check.
inline constexpr size_t kMaxAbsentPaths = 4096;
inline constexpr size_t kMaxHiddenSockets = 512;

// Adds a visible entry: the canonical `source` bound read-only at `at`. False (nothing added) when
// `at` is in the plan already or the plan holds kMaxWritablePaths of them.
bool AddVisible(MountPlan& plan, const std::string& source, const std::string& at);

// Resolves the git paths (a worktree's `.git` file included); binds only those in a writable
// tree (the rest is read-only or hidden already). Creates a missing .git/hooks so that it can be
// protected. `user`: as PlanGitSurface's. `git_surface`: PlanGitSurface(workdir, user) made just
// now by the caller, taken instead of walking the workdir again; nullptr: walked here.
Result<MountPlan> PlanMounts(const std::string& workdir, const std::vector<std::string>& writable,
                             const UserGitConfig& user, const MountPlan* git_surface = nullptr);

// PlanMounts' git part alone (pinned, readonly, absent): what the git trust-surface guard needs,
// without listing sockets. Every writable tree is walked (the workdir, then each `writable` tree
// not within one walked already: a tool plants in any of them alike), or with kWorkdirOnly the
// workdir alone (a guard of one tree). A missing hooks/ or info/ is created only in a git dir
// within the workdir or a `writable` tree (plan.writable holds them all). `user`: the user's own
// git config (Policy::user_git_config, read once by ResolvePolicy), whose core.hooksPath and
// includes are guarded in every repository as its own config's are. No default: a caller that
// forgot it would guard less, silently.
enum class SurfaceTrees { kEvery, kWorkdirOnly };
MountPlan PlanGitSurface(const std::string& workdir, const UserGitConfig& user,
                         const std::vector<std::string>& writable = {},
                         SurfaceTrees trees = SurfaceTrees::kEvery);

// The writable trees PlanGitSurface walks besides the workdir: each of `writable` not within the
// workdir nor within one before it, in order.
std::vector<std::string> OtherSurfaceTrees(const std::string& workdir,
                                           const std::vector<std::string>& writable);

// Whether `name` is project agent config (`.claude`, `.forkbox`, `.mcp.json`, `.vscode`, ...):
// what an agent or a developer tool started in its directory trusts.
bool IsAgentConfigName(std::string_view name);

// Whether the relative path `rel` is such config or lies in it: an entry guarded whole, a trusted
// name in an entry's directory (`.vscode/tasks.json`), or the entry itself. The guard removes
// one a tool created, whole. A repository in such a directory that is not trusted (`mise/.git`,
// `.config/nvim/.git`) is not: git's rules apply to it.
bool IsAgentConfigPath(std::string_view rel);

// The git dir a `.git` file names ("gitdir: X", a worktree's or a submodule's), and its common
// dir (X itself for a submodule): what git uses in `dir` when the nearest `.git` in `dir` or an
// ancestor is such a file. nullopt when that `.git` is a directory, names no directory, or there
// is none. Both canonical.
struct LinkedGitDir {
  std::string gitdir;
  std::string common;
};
std::optional<LinkedGitDir> LinkedGitDirOf(const std::string& dir);

// A plan with only the id maps (the same ids inside): no mounts beyond the read-only root.
MountPlan IdMapsOnly();

// Writes setgroups/uid_map/gid_map for this process, which has just entered a new user namespace.
// Works for a non-dumpable non-root process too (dumpable only for the writes). 0 or errno;
// `*step` names the failing call.
int WriteIdMapsRaw(const MountPlan& plan, const char** step);

// Sets up the mounts. Must run as pid 1 of the new PID namespace (for /proc).
int SetUpMountsRaw(const MountPlan& plan, const char** step);

// Whether layer 2 works here, probed once per process in a throwaway child that borrows this
// process's memory (no page tables copied). `why` receives the reason when it does not. The first
// call returns with the child's verdict, without waiting for its namespaces to be torn down; a
// later call reaps it once it has exited, without waiting either.
bool Layer2Available(std::string* why = nullptr);

// For a process about to fork its launcher (EnterLauncher): the layer-2 probe's child, if it is
// not reaped yet, is given up. The process that stays behind, its
// parent, reaps it; inside, its pid would name nothing, or another process.
void ReleaseLayer2ProbeChild();

}  // namespace forkbox::sandbox
