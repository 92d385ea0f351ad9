// Check(), the banner, `forkbox sandbox` (through sandbox_cmd) and EnterAgentSandbox.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <thread>
#include <vector>

#include "base/process.h"
#include "sandbox/cgroup.h"
#include "sandbox/namespaces.h"
#include "sandbox/sandbox.h"
#include "tests/base/test_util.h"
#include "tests/bench/proc_probe.h"
#include "tests/sandbox/agent_layers.h"
#include "tests/sandbox/probe_util.h"

extern char** environ;

namespace forkbox::sandbox {
namespace {

using forkbox::testing::MakeGitWorktree;
using testing::FileExists;
using testing::kNoUserGitConfig;
using testing::MakeTempDir;
using testing::ProbeResult;
using testing::ReadFile;
using testing::RunProbe;
using testing::ScopedTempDir;

const Report::Line* FindLine(const Report& r, const std::string& protection) {
  for (const Report::Line& line : r.lines) {
    if (line.protection == protection) return &line;
  }
  return nullptr;
}

// Creates `path` (new: O_EXCL, never through a link) holding `text`; false on any failure.
bool WriteNewFile(const std::string& path, const std::string& text) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  return fd && write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

TEST(Check, ReportsEveryProtectionHere) {
  Policy policy;
  policy.workdir = MakeTempDir("check");
  Report r = Check(policy);
  EXPECT_TRUE(r.enforceable);
  EXPECT_GE(r.landlock_abi, 1);
  EXPECT_EQ(r.layer, Layer2Available() ? 2 : 1);
  EXPECT_EQ(r.kernel, testing::KernelRelease());
  for (const char* p :
       {"landlock", "seccomp", "user namespace", "read-only root", "private /tmp and /dev/shm",
        ".git/hooks read-only", "pid namespace", "network", "capabilities", "no_new_privs",
        "rlimits", "fork bomb", "environment"}) {
    const Report::Line* line = FindLine(r, p);
    ASSERT_NE(line, nullptr) << p;
    EXPECT_FALSE(line->detail.empty()) << p;
  }
  EXPECT_EQ(FindLine(r, "seccomp")->state, "active");
  std::string banner = r.Banner();
  EXPECT_NE(banner.find("layer " + std::to_string(r.layer)), std::string::npos) << banner;
  EXPECT_NE(banner.find("landlock ABI " + std::to_string(r.landlock_abi)), std::string::npos);
  EXPECT_NE(banner.find("no net"), std::string::npos) << banner;
  // The fork-bomb line names the mechanism that holds for this uid and layer.
  const std::string& bomb = FindLine(r, "fork bomb")->detail;
  EXPECT_NE(bomb.find(geteuid() == 0 && r.layer == 1 ? "timeout" : "RLIMIT_NPROC"),
            std::string::npos)
      << bomb;
}

UniqueFd BoundSocket(int type, const std::string& path) {
  UniqueFd fd(socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (!fd || bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      (type == SOCK_STREAM && listen(fd.get(), 1) != 0)) {
    return UniqueFd();
  }
  return fd;
}

// Layer 2's mount plan covers every pathname socket bound outside the trees with /dev/null (the
// kernel's sock_diag dump, else /proc/net/unix): a listener and a datagram socket outside, not
// the one inside the workdir.
TEST(PlanMounts, HidesTheSocketsBoundOutsideTheTrees) {
  // Under /var/tmp: /tmp is layer 2's private tmpfs, whose sockets the plan skips.
  char tmpl[] = "/var/tmp/fbx-plan-sockets-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string outside = tmpl;
  const std::string work = MakeTempDir("plan-sockets-work");
  UniqueFd listener = BoundSocket(SOCK_STREAM, outside + "/listen.sock");
  UniqueFd dgram = BoundSocket(SOCK_DGRAM, outside + "/dgram.sock");
  UniqueFd inside = BoundSocket(SOCK_STREAM, work + "/inside.sock");
  ASSERT_TRUE(listener && dgram && inside) << strerror(errno);
  Result<MountPlan> plan = PlanMounts(work, {}, kNoUserGitConfig);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto hidden = [&](const std::string& path) {
    return std::find(plan->hidden_files.begin(), plan->hidden_files.end(), path) !=
           plan->hidden_files.end();
  };
  EXPECT_TRUE(hidden(outside + "/listen.sock"));
  EXPECT_TRUE(hidden(outside + "/dgram.sock"));
  EXPECT_FALSE(hidden(work + "/inside.sock")) << "inside a writable tree";
  for (const char* name : {"/listen.sock", "/dgram.sock"}) unlink((outside + name).c_str());
  rmdir(outside.c_str());
}

// With --allow-broad-workdir a workdir of "/" holds every socket, and the sockets of a writable
// tree stay reachable; "/" is the exception: it lets a task write everywhere, not reach every
// daemon on the host. The control: the same socket's directory as a writable tree leaves it.
TEST(PlanMounts, AWorkdirOfRootStillHidesTheHostsSockets) {
  char tmpl[] = "/var/tmp/fbx-plan-root-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string outside = tmpl;
  UniqueFd listener = BoundSocket(SOCK_STREAM, outside + "/listen.sock");
  ASSERT_TRUE(listener) << strerror(errno);
  auto hidden_by = [&](const std::string& workdir, const std::vector<std::string>& writable) {
    Result<MountPlan> plan = PlanMounts(workdir, writable, kNoUserGitConfig);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return plan.ok() && std::find(plan->hidden_files.begin(), plan->hidden_files.end(),
                                  outside + "/listen.sock") != plan->hidden_files.end();
  };
  EXPECT_TRUE(hidden_by("/", {}));
  EXPECT_FALSE(hidden_by(MakeTempDir("plan-root-work"), {outside})) << "the control";
  unlink((outside + "/listen.sock").c_str());
  rmdir(outside.c_str());
}

bool Pinned(const MountPlan& plan, const std::string& dotgit) {
  return std::find(plan.pinned.begin(), plan.pinned.end(), dotgit) != plan.pinned.end();
}

// The git surface's walk: repositories down to five levels below the workdir, none deeper,
// none in node_modules, none reached through a link.
TEST(PlanGitSurface, FindsRepositoriesFiveLevelsDownThroughNoLink) {
  const std::string work = MakeTempDir("plan-levels");
  const std::string outside = MakeTempDir("plan-levels-outside");
  for (const std::string& dir :
       {work + "/.git", work + "/a/.git", work + "/1/2/3/4/5/.git", work + "/1/2/3/4/5/6/.git",
        work + "/node_modules/m/.git", outside + "/r/.git"}) {
    std::filesystem::create_directories(dir);
  }
  ASSERT_EQ(symlink(outside.c_str(), (work + "/link").c_str()), 0);
  const MountPlan plan = PlanGitSurface(work, kNoUserGitConfig);
  std::vector<std::string> pinned = plan.pinned;
  std::sort(pinned.begin(), pinned.end());
  EXPECT_EQ(pinned,
            (std::vector<std::string>{work + "/.git", work + "/1/2/3/4/5/.git", work + "/a/.git"}));
  EXPECT_TRUE(FileExists(work + "/1/2/3/4/5/.git/hooks")) << "made so that it can be bound";
}

// A directory the user can search but not list still has its own `.git` looked up (tools can
// write there by name); what lies below it cannot be found. Root lists anything, so as root the
// probe runs as nobody; another user runs it as itself (mode 0311 keeps its owner out too).
TEST(PlanGitSurface, LooksUpTheGitDirOfADirectoryItCannotList) {
  const std::string work = MakeTempDir("plan-unlisted");
  std::filesystem::create_directories(work + "/locked/.git");
  std::filesystem::create_directories(work + "/open/.git");
  ASSERT_EQ(chmod(work.c_str(), 0755), 0);
  ASSERT_EQ(chmod((work + "/locked").c_str(), 0311), 0);
  auto as_nobody = [] {
    return geteuid() != 0 ||
           (setgroups(0, nullptr) == 0 && setgid(65534) == 0 && setuid(65534) == 0);
  };
  ProbeResult found = RunProbe(as_nobody, [&] {
    const MountPlan plan = PlanGitSurface(work, kNoUserGitConfig);
    return (Pinned(plan, work + "/locked/.git") ? 1L : 0L) +
           (Pinned(plan, work + "/open/.git") ? 2L : 0L);
  });
  EXPECT_EQ(found.value, 3) << "1: the unlisted directory's, 2: the listed one's";
}

bool Planned(const MountPlan& plan, const std::string& readonly) {
  return std::find(plan.readonly.begin(), plan.readonly.end(), readonly) != plan.readonly.end();
}

// A link in git's trust surface (`.git/hooks -> ../githooks`: git runs the hooks it leads to) is
// planned as its target, which is bound read-only, and the plan stays free of links: a bind that
// meets one fails (SetUpMounts.AGitPathWithALinkInItIsRefused). The control: a directory is
// planned as itself.
TEST(PlanGitSurface, PlansALinkedHooksDirectoryAsItsTarget) {
  const std::string work = std::filesystem::canonical(MakeTempDir("plan-linked-hooks")).string();
  std::filesystem::create_directories(work + "/.git");
  std::filesystem::create_directories(work + "/githooks");
  ASSERT_EQ(symlink("../githooks", (work + "/.git/hooks").c_str()), 0);
  const MountPlan plan = PlanGitSurface(work, kNoUserGitConfig);
  EXPECT_TRUE(Planned(plan, work + "/githooks"));
  EXPECT_FALSE(Planned(plan, work + "/.git/hooks"));
  EXPECT_EQ(plan.links, std::vector<std::string>{work + "/.git/hooks"}) << "guarded as a link";
  EXPECT_TRUE(Planned(plan, work + "/.git/info")) << "the control";
  // A dangling link is planned as itself, so that its bind fails: a tool could create its target.
  std::filesystem::remove(work + "/githooks");
  const MountPlan dangling = PlanGitSurface(work, kNoUserGitConfig);
  EXPECT_TRUE(Planned(dangling, work + "/.git/hooks"));
  EXPECT_TRUE(dangling.links.empty());
}

bool Absent(const MountPlan& plan, const std::string& path) {
  return std::find(plan.absent.begin(), plan.absent.end(), path) != plan.absent.end();
}

// A config that includes itself is read once: 30 such lines were read 30^4 times, after every
// tool call, for as long as a tool's 700 bytes stayed (red team: minutes past every timeout and
// Ctrl-C). A file first met too deep to follow its includes is read again when met shallower:
// d.cfg, reached through a.cfg and b.cfg at the last level and then from the config itself, has
// its include e.cfg read, whose hooksPath is guarded.
TEST(PlanGitSurface, ReadsAnIncludedConfigOnceUnlessMetShallower) {
  const std::string work = std::filesystem::canonical(MakeTempDir("plan-includes")).string();
  std::filesystem::create_directories(work + "/.git");
  std::string config = "[include]\n";
  for (int i = 0; i < 30; ++i) config += "\tpath = config\n";
  config += "\tpath = a.cfg\n\tpath = d.cfg\n";
  ASSERT_TRUE(WriteNewFile(work + "/.git/config", config));
  ASSERT_TRUE(WriteNewFile(work + "/.git/a.cfg", "[include]\n\tpath = b.cfg\n"));
  ASSERT_TRUE(WriteNewFile(work + "/.git/b.cfg", "[include]\n\tpath = d.cfg\n"));
  ASSERT_TRUE(WriteNewFile(work + "/.git/d.cfg", "[include]\n\tpath = e.cfg\n"));
  ASSERT_TRUE(WriteNewFile(work + "/.git/e.cfg", "[core]\n\thooksPath = evilhooks\n"));
  const MountPlan plan = PlanGitSurface(work, kNoUserGitConfig);
  EXPECT_TRUE(Planned(plan, work + "/.git/d.cfg"));
  EXPECT_TRUE(Absent(plan, work + "/evilhooks")) << "e.cfg was not read";
}

// `~/` in a repository's config is the home the policy was resolved with (UserGitConfig::home):
// a plan made after this process's HOME changed still guards `core.hooksPath = ~/hooks` in the
// workdir that home is. Before, each plan read getenv("HOME") again and guarded the other home's
// hooks. The control: a policy resolved with the other home guards the other's.
TEST(PlanGitSurface, ExpandsAHomeInTheRepositorysConfigAsThePolicyWasResolved) {
  const std::string work = std::filesystem::canonical(MakeTempDir("plan-home")).string();
  const std::string other = work + "/other";
  std::filesystem::create_directories(work + "/.git");
  std::filesystem::create_directories(other);
  ASSERT_TRUE(WriteNewFile(work + "/.git/config", "[core]\n\thooksPath = ~/hooks\n"));
  for (const std::string& home : {work, other}) {
    SCOPED_TRACE("resolved with HOME=" + home);
    const ProbeResult planned = RunProbe(
        [] { return true; },
        [&] {
          if (setenv("HOME", home.c_str(), 1) != 0) return -1L;
          Result<Policy> policy = ResolvePolicy(Settings{}, work);
          if (!policy.ok() || setenv("HOME", (home == work ? other : work).c_str(), 1) != 0) {
            return -1L;
          }
          const MountPlan plan = PlanGitSurface(policy->workdir, policy->user_git_config);
          return (Absent(plan, work + "/hooks") ? 1L : 0L) +
                 (Absent(plan, other + "/hooks") ? 2L : 0L);
        });
    ASSERT_TRUE(planned.reported);
    EXPECT_EQ(planned.value, home == work ? 1L : 2L);
  }
}

// Layer 2's plan of a developer tool's project config: VS Code's settings.json is bound read-only
// and its folder pinned, its tasks.json must not appear, while launch.json stays writable; a
// missing `mise/` or `.config/` is not taken whole (other programs write there), only what mise
// would read below them; a kernel tree's `.config` file is the build's.
TEST(PlanGitSurface, PlansAToolsTrustedConfigAndNotTheRest) {
  const std::string work = std::filesystem::canonical(MakeTempDir("plan-tools")).string();
  ASSERT_TRUE(WriteNewFile(work + "/.config", "CONFIG_X=y\n"));
  std::filesystem::create_directories(work + "/.vscode");
  ASSERT_TRUE(WriteNewFile(work + "/.vscode/settings.json", "{}\n"));
  ASSERT_TRUE(WriteNewFile(work + "/.vscode/launch.json", "{}\n"));
  const MountPlan plan = PlanGitSurface(work, kNoUserGitConfig);
  EXPECT_TRUE(Planned(plan, work + "/.vscode/settings.json"));
  EXPECT_TRUE(Pinned(plan, work + "/.vscode"));
  for (const char* rel :
       {"/.vscode/tasks.json", "/.zed", "/.opencode", "/opencode.json", "/mise.toml", "/.mise",
        "/mise/config.toml", "/.config/mise.toml", "/.config/mise"}) {
    EXPECT_TRUE(Absent(plan, work + rel)) << rel;
  }
  for (const char* rel : {"/.vscode/launch.json", "/.config", "/mise"}) {
    EXPECT_FALSE(Planned(plan, work + rel)) << rel;
    EXPECT_FALSE(Absent(plan, work + rel)) << rel;
  }
}

// The paths that must not appear fit for a workdir with nested repositories that have agent
// config: each such directory adds 25 and each git dir two. A cap of 64 held two of them, and the
// workdir's own, planned last, were dropped.
TEST(PlanGitSurface, KeepsTheWorkdirsAbsentPathsBesideNestedRepositoriesConfig) {
  const std::string work = std::filesystem::canonical(MakeTempDir("plan-absent")).string();
  for (int i = 0; i < 6; ++i) {
    std::filesystem::create_directories(work + "/r" + std::to_string(i) + "/.git");
    std::filesystem::create_directories(work + "/r" + std::to_string(i) + "/.vscode");
  }
  const MountPlan plan = PlanGitSurface(work, kNoUserGitConfig);
  EXPECT_LT(plan.absent.size(), kMaxAbsentPaths);
  for (const char* rel : {"/r5/mise.toml", "/r5/.git/commondir", "/mise.toml", "/.claude",
                          "/.vscode/tasks.json", "/.config/mise"}) {
    EXPECT_TRUE(Absent(plan, work + rel)) << rel;
  }
}

// A `.git` file may name any directory (a tool plants one, or a cloned repository ships one).
// Planning runs unconfined, so it creates the missing hooks/ and info/ only in a git dir within a
// writable tree, where tools could create them too; the one it names outside stays as it was.
// The control: the same git dir, once in a --writable tree, gets both.
TEST(PlanGitSurface, CreatesNothingOutsideTheWritableTrees) {
  const std::string work = std::filesystem::canonical(MakeTempDir("plan-gitfile")).string();
  const std::string named = std::filesystem::canonical(MakeTempDir("plan-gitfile-named")).string();
  ASSERT_TRUE(WriteNewFile(work + "/.git", "gitdir: " + named + "\n"));
  (void)PlanGitSurface(work, kNoUserGitConfig);
  Result<MountPlan> mounts = PlanMounts(work, {}, kNoUserGitConfig);
  ASSERT_TRUE(mounts.ok()) << mounts.status().ToString();
  EXPECT_FALSE(FileExists(named + "/hooks"));
  EXPECT_FALSE(FileExists(named + "/info"));
  (void)PlanGitSurface(work, kNoUserGitConfig, {named});
  EXPECT_TRUE(FileExists(named + "/hooks")) << "the control: in a writable tree";
  EXPECT_TRUE(FileExists(named + "/info"));
}

// Every writable tree is walked, not the workdir alone: a repository given with --writable is
// pinned and its surface bound like the workdir's. A worktree in a writable tree keeps its admin
// dir writable (its tools commit there: HEAD, index), only its trusted files bound, where another
// worktree's admin dir is bound whole (the control).
TEST(PlanGitSurface, WalksEveryWritableTreeAndKeepsAWritableWorktreeCommitting) {
  const std::string root = std::filesystem::canonical(MakeTempDir("plan-trees")).string();
  const std::string repo = root + "/repo", work = root + "/work";
  ASSERT_EQ(system(("git init -q '" + repo + "' && git -C '" + repo +
                    "' -c user.name=u -c user.email=u@x commit -q --allow-empty -m a && git -C '" +
                    repo + "' worktree add -q --detach ../work")
                       .c_str()),
            0);
  const std::string admin = repo + "/.git/worktrees/work";
  const auto has = [](const std::vector<std::string>& list, const std::string& path) {
    return std::find(list.begin(), list.end(), path) != list.end();
  };
  const MountPlan alone = PlanGitSurface(work, kNoUserGitConfig);
  EXPECT_FALSE(has(alone.pinned, repo + "/.git"));
  const MountPlan both = PlanGitSurface(work, kNoUserGitConfig, {repo});
  EXPECT_TRUE(has(both.pinned, repo + "/.git"));
  EXPECT_TRUE(has(both.readonly, repo + "/.git/hooks"));
  EXPECT_FALSE(has(both.readonly, admin)) << "the workdir's admin dir is written by its git";
  EXPECT_TRUE(has(both.pinned, admin)) << "but cannot be swapped for a link";
  EXPECT_TRUE(has(PlanGitSurface(repo, kNoUserGitConfig, {work}).pinned, admin));
  EXPECT_TRUE(has(both.readonly, admin + "/hooks"));
  EXPECT_TRUE(has(both.operations, admin + "/rebase-merge/git-rebase-todo"));
  const MountPlan one = PlanGitSurface(work, kNoUserGitConfig, {repo}, SurfaceTrees::kWorkdirOnly);
  EXPECT_FALSE(has(one.pinned, repo + "/.git"));
  EXPECT_TRUE(has(PlanGitSurface(repo, kNoUserGitConfig).readonly, admin))
      << "another worktree's, whole";
  EXPECT_FALSE(has(PlanGitSurface(repo, kNoUserGitConfig, {work}).readonly, admin));
  Result<MountPlan> mounts = PlanMounts(work, {repo}, kNoUserGitConfig);
  ASSERT_TRUE(mounts.ok()) << mounts.status().ToString();
  EXPECT_TRUE(has(mounts->pinned, repo + "/.git"));
  EXPECT_EQ(OtherSurfaceTrees(work, {repo, work + "/sub", repo + "/x", root}),
            (std::vector<std::string>{repo, root}));
}

TEST(Check, DisabledPolicySaysOff) {
  Policy policy;
  policy.enabled = false;
  Report r = Check(policy);
  EXPECT_FALSE(r.enforceable);
  EXPECT_NE(r.Banner().find("OFF"), std::string::npos);
}

struct CmdResult {
  int code = -1;
  int wait_status = -1;
  std::string out;
  std::string err;
};

// Runs `args` (args[0] an absolute path); `setup` runs in the child first.
CmdResult RunProgram(
    std::vector<std::string> args, const std::string& input = "",
    const std::function<bool()>& setup = [] { return true; }) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) std::abort();
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (!setup()) _exit(120);  // After the pipes: it may redirect them.
    execve(argv[0], argv.data(), environ);
    _exit(121);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (!input.empty() && write(in[1], input.data(), input.size()) < 0) std::abort();
  close(in[1]);
  CmdResult r;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
  while ((n = read(err[0], buf, sizeof(buf))) > 0) r.err.append(buf, static_cast<size_t>(n));
  close(out[0]);
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.wait_status = status;
  r.code = ExitCodeFromWaitStatus(status);
  return r;
}

// Runs sandbox_cmd (== `forkbox sandbox`) with the given args; `setup` runs in the child first.
CmdResult RunCmd(
    std::vector<std::string> args, const std::string& input = "",
    const std::function<bool()>& setup = [] { return true; }) {
  args.insert(args.begin(), SANDBOX_CMD);
  return RunProgram(std::move(args), input, setup);
}

// RunCmd on a thread of its own, for a test that signals `forkbox sandbox` while it runs.
struct BackgroundCmd {
  std::thread thread;
  CmdResult result;
  pid_t pid = 0;   // Its pid, known once it runs (0: it did not start).
  UniqueFd pidfd;  // Readable once it has exited.
  // A test that stopped early (a failed ASSERT) ends it rather than leave its thread joinable.
  ~BackgroundCmd() {
    if (!thread.joinable()) return;
    if (pidfd) (void)syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
    thread.join();
  }
  // What its command writes to the FIFO at `path`; "" when it exits first: never a hang.
  std::string ReadFifo(const std::string& path) const {
    return forkbox::testing::ReadFifoUnless(path, pidfd.get()).value_or("");
  }
};

// Starts `args` (args[0] an absolute path), with `setup` in its process before the exec; returns
// once that process runs. Join `thread` before reading `result`.
std::unique_ptr<BackgroundCmd> StartProgram(
    std::vector<std::string> args, std::function<bool()> setup = [] { return true; }) {
  auto cmd = std::make_unique<BackgroundCmd>();
  Result<Pipe> pid_pipe = MakePipe();
  if (!pid_pipe.ok()) std::abort();
  const int pid_fd = pid_pipe->write.get();
  cmd->thread = std::thread([c = cmd.get(), args = std::move(args), pid_fd, setup] {
    c->result = RunProgram(args, "", [pid_fd, &setup] {
      const pid_t self = getpid();
      return write(pid_fd, &self, sizeof self) == sizeof self && setup();
    });
  });
  if (read(pid_pipe->read.get(), &cmd->pid, sizeof cmd->pid) != sizeof cmd->pid) cmd->pid = 0;
  // Not reaped before the thread's wait, so the pid names it until then.
  if (cmd->pid > 0) cmd->pidfd.reset(static_cast<int>(syscall(SYS_pidfd_open, cmd->pid, 0)));
  return cmd;
}

// Starts `forkbox sandbox ARGS` (StartProgram).
std::unique_ptr<BackgroundCmd> StartCmd(
    std::vector<std::string> args, std::function<bool()> setup = [] { return true; }) {
  args.insert(args.begin(), SANDBOX_CMD);
  return StartProgram(std::move(args), std::move(setup));
}

// `forkbox sandbox ... > log 2>&1`: the broker's refusal reaches the log and stays there, the
// command's later writes going after it, not over it (they have no O_APPEND). In layer 1, where
// the broker answers every connect (layer 2 also hides a socket bound before the start).
TEST(SandboxCommand, ARefusalReportInARegularFileStderrIsNotOverwritten) {
  if (system("python3 -c pass 2>/dev/null") != 0) GTEST_SKIP() << "no python3";
  const std::string work = MakeTempDir("cmd-report");
  const std::string log = MakeTempDir("cmd-report-log") + "/log";
  // A daemon's socket outside the workdir, where layer 2 does not hide it (/tmp is private).
  char sock_dir[] = "/var/tmp/fbx-report-XXXXXX";
  ASSERT_NE(mkdtemp(sock_dir), nullptr);
  const std::string sock = std::string(sock_dir) + "/d.sock";
  const int daemon = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(bind(daemon, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(daemon, 1), 0);
  const std::string script =
      "import socket, sys\nsys.stderr.write('before\\n'); sys.stderr.flush()\n"
      "try: socket.socket(socket.AF_UNIX).connect('" +
      sock +
      "')\n"
      "except OSError: pass\nsys.stderr.write('A' * 150 + '\\n')\n";
  std::vector<std::string> args = {SANDBOX_CMD, "--workdir", work, "--", "python3", "-c", script};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(120);
    if (!testing::RefuseUserNamespaces()) _exit(122);
    execve(argv[0], argv.data(), environ);
    _exit(121);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(daemon);
  unlink(sock.c_str());
  rmdir(sock_dir);
  const std::string text = ReadFile(log);
  EXPECT_EQ(text.find("before\n"), 0u) << text;
  EXPECT_NE(text.find("forkbox: connect to " + sock), std::string::npos) << text;
  EXPECT_NE(text.find(std::string(150, 'A')), std::string::npos) << text;
}

TEST(SandboxCommand, PassesStdioAndTheExitStatusThrough) {
  std::string work = MakeTempDir("cmd");
  CmdResult cat = RunCmd({"--workdir", work, "--", "cat"}, "hello through stdin\n");
  EXPECT_EQ(cat.code, 0) << cat.err;
  EXPECT_EQ(cat.out, "hello through stdin\n");
  CmdResult code = RunCmd({"--workdir", work, "--", "sh", "-c", "echo oops >&2; exit 9"});
  EXPECT_EQ(code.code, 9);
  EXPECT_NE(code.err.find("oops"), std::string::npos);
  CmdResult sig = RunCmd({"--workdir", work, "--", "sh", "-c", "kill -KILL $$"});
  EXPECT_TRUE(WIFSIGNALED(sig.wait_status) && WTERMSIG(sig.wait_status) == SIGKILL)
      << sig.wait_status;
  EXPECT_FALSE(FileExists(work + "/.forkbox-tmp")) << "the task's TMPDIR is removed";
}

// The runs of the tests of how `forkbox sandbox` ends: layer 2 (where it can run), layer 1 (user
// namespaces refused, as in Docker) and unsandboxed.
struct EndMode {
  const char* name;
  const char* sandbox;  // --sandbox=
  bool layer1;
};
std::vector<EndMode> EndModes() {
  std::vector<EndMode> modes = {{"layer 1", "on", true}, {"unsandboxed", "off", false}};
  if (Layer2Available()) modes.push_back({"layer 2", "on", false});
  return modes;
}

// A command that died of a signal: `forkbox sandbox` dies of it too, once it has cleaned up, as
// `timeout` and sudo do, so a shell or a Python subprocess sees what it would see without forkbox.
// It exited 128 + N, which a shell takes for a command that handled the signal. In layer 2 the
// command's namespace init, which cannot die of the signal, says so (sandbox::CommandStatus). The
// control: a command that exits 130 (it handled SIGINT) has its exit code passed on, not a death.
TEST(SandboxCommand, ACommandsDeathBySignalIsItsDeath) {
  for (const EndMode& mode : EndModes()) {
    SCOPED_TRACE(mode.name);
    const std::string work = MakeTempDir("cmd-death");
    const auto setup = [&mode] { return !mode.layer1 || testing::RefuseUserNamespaces(); };
    for (const int sig : {SIGINT, SIGTERM, SIGKILL, SIGSEGV}) {
      SCOPED_TRACE(sigabbrev_np(sig));
      CmdResult r = RunCmd({std::string("--sandbox=") + mode.sandbox, "--workdir", work, "--",
                            "/bin/sh", "-c", "kill -" + std::string(sigabbrev_np(sig)) + " $$"},
                           "", setup);
      EXPECT_TRUE(WIFSIGNALED(r.wait_status) && WTERMSIG(r.wait_status) == sig)
          << "wait status " << r.wait_status << "\n"
          << r.err;
    }
    CmdResult handled = RunCmd({std::string("--sandbox=") + mode.sandbox, "--workdir", work, "--",
                                "/bin/sh", "-c", "exit 130"},
                               "", setup);
    EXPECT_TRUE(WIFEXITED(handled.wait_status) && WEXITSTATUS(handled.wait_status) == 130)
        << "wait status " << handled.wait_status << "\n"
        << handled.err;
    EXPECT_FALSE(FileExists(work + "/core")) << "no core of forkbox's own";
  }
}

// The command's status as its init or keeper recorded it is taken only when the init or keeper
// then exited as it said: a keeper killed after its record (a SIGKILL of the namespace) is that
// death, and with no record the keeper's own status stands.
TEST(CommandStatus, IsTakenOnlyWhenItsKeeperExitedAsItSaid) {
  struct Case {
    const char* name;
    bool record;
    bool killed;  // The keeper dies of SIGKILL after its record instead of exiting.
    int expect_signal;
    int expect_exit;
  };
  for (const Case& c : {Case{"recorded, then exit 130", true, false, SIGINT, -1},
                        Case{"recorded, then killed", true, true, SIGKILL, -1},
                        Case{"nothing recorded", false, false, 0, 130}}) {
    SCOPED_TRACE(c.name);
    Result<CommandStatus> recorded = CommandStatus::Create();
    ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
    const pid_t keeper = fork();
    ASSERT_GE(keeper, 0);
    if (keeper == 0) {
      if (c.record) recorded->RecordRaw(SIGINT);  // A wait status: died of SIGINT.
      if (c.killed) raise(SIGKILL);
      _exit(128 + SIGINT);
    }
    int status = 0;
    ASSERT_EQ(waitpid(keeper, &status, 0), keeper);
    const int resolved = recorded->Resolve(status);
    if (c.expect_signal != 0) {
      EXPECT_TRUE(WIFSIGNALED(resolved) && WTERMSIG(resolved) == c.expect_signal) << resolved;
    } else {
      EXPECT_TRUE(WIFEXITED(resolved) && WEXITSTATUS(resolved) == c.expect_exit) << resolved;
    }
  }
}

// rt62's Ctrl-C of a shell loop, for `forkbox sandbox`: SIGINT to the loop's process group, as a
// terminal sends it, while the first run's command sleeps. bash ends the loop only when its
// command died of SIGINT ("wait and cooperative exit"); before, `forkbox sandbox` exited 130 and
// bash went on (run 1: 130, then runs 2 and 3, and "finished").
TEST(SandboxCommand, CtrlCOfAShellLoopStopsItAtTheFirstRun) {
  for (const EndMode& mode : EndModes()) {
    SCOPED_TRACE(mode.name);
    const std::string work = MakeTempDir("cmd-loop");
    ASSERT_EQ(mkfifo((work + "/ready").c_str(), 0600), 0);
    const std::string script =
        std::string("for i in 1 2 3; do \"$0\" --sandbox=") + mode.sandbox +
        " --workdir \"$1\" -- /bin/sh -c \"if [ $i = 1 ]; then echo go > ready; exec sleep 120; "
        "fi\" 2>/dev/null; echo \"run $i: $?\"; done; echo finished";
    std::unique_ptr<BackgroundCmd> loop =
        StartProgram({"/bin/bash", "-c", script, SANDBOX_CMD, work}, [&mode] {
          return setpgid(0, 0) == 0 && (!mode.layer1 || testing::RefuseUserNamespaces());
        });
    ASSERT_GT(loop->pid, 0);
    ASSERT_EQ(loop->ReadFifo(work + "/ready"), "go\n");
    EXPECT_EQ(kill(-loop->pid, SIGINT), 0);
    loop->thread.join();
    const CmdResult& r = loop->result;
    EXPECT_TRUE(WIFSIGNALED(r.wait_status) && WTERMSIG(r.wait_status) == SIGINT)
        << "bash's wait status " << r.wait_status << "\n"
        << r.out << r.err;
    EXPECT_EQ(r.out, "") << "nothing after the first run";
  }
}

// Whether the hexadecimal signal mask on `field`'s line of a /proc status has `sig`.
bool SignalMaskHas(const std::string& status, const std::string& field, int sig) {
  const size_t at = status.find("\n" + field + ":\t");
  if (at == std::string::npos) return false;
  const uint64_t mask = std::stoull(status.substr(at + field.size() + 3, 16), nullptr, 16);
  return (mask >> (sig - 1)) & 1;
}

// `pid`'s /proc status once it is past its spawn of the command: the spawn blocks every signal
// until its child has exec'ed (CloneLaunch), and the command may run before the caller's mask is
// back. SIGUSR1 is blocked only then. After 30 s of tries, the last status read.
std::string StatusPastTheSpawn(pid_t pid) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
    if (!SignalMaskHas(status, "SigBlk", SIGUSR1) || std::chrono::steady_clock::now() > give_up) {
      return status;
    }
    sched_yield();
  }
}

// rt63 P1: a signal the caller left ignored stays ignored: `nohup forkbox sandbox -- make` was
// ended by the hangup (taken through the signalfd and forwarded, the command died of it). Here
// SIGHUP and SIGINT come while the command waits, and the command then finishes. The control:
// not ignored, they end it.
TEST(SandboxCommand, ASignalItsCallerIgnoredStaysIgnored) {
  for (const EndMode& mode : EndModes()) {
    for (const bool ignored : {true, false}) {
      SCOPED_TRACE(std::string(mode.name) + (ignored ? ", HUP and INT ignored" : ", control"));
      const std::string work = MakeTempDir("cmd-nohup");
      ASSERT_EQ(mkfifo((work + "/ready").c_str(), 0600), 0);
      ASSERT_EQ(mkfifo((work + "/go").c_str(), 0600), 0);
      std::unique_ptr<BackgroundCmd> run = StartCmd(
          {std::string("--sandbox=") + mode.sandbox, "--workdir", work, "--", "/bin/sh", "-c",
           "echo waiting > ready; read word < go; echo \"finished $word\""},
          [&mode, ignored] {
            return (!ignored ||
                    (signal(SIGHUP, SIG_IGN) != SIG_ERR && signal(SIGINT, SIG_IGN) != SIG_ERR)) &&
                   (!mode.layer1 || testing::RefuseUserNamespaces());
          });
      ASSERT_GT(run->pid, 0);
      ASSERT_EQ(run->ReadFifo(work + "/ready"), "waiting\n");
      // Ignored, and not blocked (a blocked one would be queued and taken through the signalfd):
      // what the kernel says, since an ignored signal leaves nothing to wait for.
      const std::string status = StatusPastTheSpawn(run->pid);
      for (const int sig : {SIGHUP, SIGINT}) {
        EXPECT_EQ(SignalMaskHas(status, "SigIgn", sig), ignored) << sigabbrev_np(sig);
        EXPECT_EQ(SignalMaskHas(status, "SigBlk", sig), !ignored) << sigabbrev_np(sig);
      }
      EXPECT_EQ(kill(run->pid, SIGHUP), 0);
      EXPECT_EQ(kill(run->pid, SIGINT), 0);
      if (!ignored) {  // The control ends by the signal: wait for that before the command's go.
        pollfd ended{run->pidfd.get(), POLLIN, 0};
        EXPECT_EQ(poll(&ended, 1, 60'000), 1) << "the control did not end by the signals";
      }
      // The command reads it only if it is still there; else the run's end stops the write.
      (void)forkbox::testing::WriteFifoUnless(work + "/go", "anyway\n", run->pidfd.get());
      run->thread.join();
      const CmdResult& r = run->result;
      if (ignored) {
        EXPECT_TRUE(WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 0)
            << r.wait_status << "\n"
            << r.err;
        EXPECT_EQ(r.out, "finished anyway\n") << r.err;
      } else {
        EXPECT_TRUE(WIFSIGNALED(r.wait_status) && WTERMSIG(r.wait_status) == SIGHUP)
            << r.wait_status << "\n"
            << r.err;
      }
    }
  }
}

// rt63 P4: Ctrl-Z (SIGTSTP to the job's process group, as the terminal sends it) stops the whole
// job, the command too, which has a process group of its own, and a sleep the command detached
// into a session of its own (which a stop of the command's group missed); the shell's `fg`
// (SIGCONT to the group) continues them all, and the command finishes. Before, `forkbox sandbox`
// stopped and its command went on (a build kept compiling while the shell said "Stopped"). The stop
// of the command is waited for (30 s at most): the kernel stops a process when it next runs.
TEST(SandboxCommand, CtrlZStopsTheCommandTooAndTheContinueResumesIt) {
  for (const EndMode& mode : EndModes()) {
    SCOPED_TRACE(mode.name);
    const std::string work = MakeTempDir("cmd-tstp");
    ASSERT_EQ(mkfifo((work + "/ready").c_str(), 0600), 0);
    ASSERT_EQ(mkfifo((work + "/go").c_str(), 0600), 0);
    std::unique_ptr<BackgroundCmd> run = StartCmd(
        {std::string("--sandbox=") + mode.sandbox, "--workdir", work, "--", "/bin/sh", "-c",
         "mkfifo up; setsid sh -c 'echo x > up; exec sleep 600' & read x < up; "
         "echo waiting > ready; read word < go; kill $!; echo \"finished $word\""},
        [&mode] {
          return setpgid(0, 0) == 0 && (!mode.layer1 || testing::RefuseUserNamespaces());
        });
    ASSERT_GT(run->pid, 0);
    ASSERT_EQ(run->ReadFifo(work + "/ready"), "waiting\n");
    const std::vector<pid_t> job = forkbox::bench::ProcessTree(run->pid);
    ASSERT_GE(job.size(), 3u) << "forkbox sandbox, its command and the command's detached sleep";
    ASSERT_EQ(kill(-run->pid, SIGTSTP), 0);
    siginfo_t stopped{};
    ASSERT_EQ(waitid(P_PID, static_cast<id_t>(run->pid), &stopped, WSTOPPED | WNOWAIT), 0);
    EXPECT_EQ(stopped.si_code, CLD_STOPPED);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!forkbox::bench::AllStopped(job) && std::chrono::steady_clock::now() < give_up) {
      sched_yield();
    }
    EXPECT_TRUE(forkbox::bench::AllStopped(job))
        << "the command ran on while its job was stopped:\n"
        << forkbox::bench::DescribeProcesses(job);
    ASSERT_EQ(kill(-run->pid, SIGCONT), 0);
    (void)forkbox::testing::WriteFifoUnless(work + "/go", "again\n", run->pidfd.get());
    run->thread.join();
    const CmdResult& r = run->result;
    EXPECT_TRUE(WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 0)
        << r.wait_status << "\n"
        << r.err;
    EXPECT_EQ(r.out, "finished again\n") << r.err;
  }
}

// `forkbox sandbox` fills its command's ruleset while the command's namespace init starts, with
// the init moved off its CPU meanwhile (FillOffCallerCpu): the init, the command and the
// command's children all end up with every CPU that `forkbox sandbox` may use.
TEST(SandboxCommand, TheCommandAndItsInitKeepEveryCpuOfTheCaller) {
  cpu_set_t caller;
  ASSERT_EQ(sched_getaffinity(0, sizeof caller, &caller), 0);
  if (!Layer2Available() || CPU_COUNT(&caller) < 2) {
    GTEST_SKIP() << "needs layer 2 and two CPUs (a namespace init to move off this one)";
  }
  const std::string mine = ReadFile("/proc/self/status");
  const size_t at = mine.find("Cpus_allowed_list:\t");
  ASSERT_NE(at, std::string::npos);
  const size_t from = at + std::strlen("Cpus_allowed_list:\t");
  const std::string list = mine.substr(from, mine.find('\n', from) - from);
  const std::string work = MakeTempDir("sandbox-cpus");
  for (int run = 0; run < 5; ++run) {
    CmdResult r = RunCmd({"--workdir", work, "--", "sh", "-c",
                          "sed -n 's/^Cpus_allowed_list:\\t//p' /proc/1/status /proc/$$/status "
                          "/proc/self/status"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, list + "\n" + list + "\n" + list + "\n")
        << "the init, the command and its child, against this process's " << list;
  }
}

TEST(SandboxCommand, GivesATaskTmpdirAndAScrubbedEnvironment) {
  std::string work = MakeTempDir("cmd-env");
  setenv("FORKBOX_TEST_SECRET_TOKEN", "s3cr3t", 1);
  setenv("FORKBOX_OPT_IN", "visible", 1);
  setenv("OPT_IN_VAR", "visible", 1);
  CmdResult r = RunCmd({"--workdir", work, "--env", "OPT_IN_VAR", "--", "/bin/sh", "-c",
                        "env; echo target=$(readlink \"$TMPDIR\"); echo x > \"$TMPDIR/f\" && "
                        "test -d \"$TMPDIR\" && echo writable; test -e .forkbox-tmp && "
                        "echo on-disk; true"});
  unsetenv("FORKBOX_TEST_SECRET_TOKEN");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("s3cr3t"), std::string::npos);
  EXPECT_NE(r.out.find("OPT_IN_VAR=visible"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TMPDIR=/dev/shm/forkbox-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("writable"), std::string::npos) << r.out;
  if (Layer2Available()) {
    // A directory on the private /dev/shm: no task dir in the workdir (sandbox.h, kPrivateDir).
    EXPECT_NE(r.out.find("target=\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("on-disk"), std::string::npos) << r.out;
  } else {
    // The short link to the task dir (sandbox.h, TaskTmpDir).
    EXPECT_NE(r.out.find("target=" + work + "/.forkbox-tmp/task-"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(FileExists(work + "/.forkbox-tmp"));
}

// The guard's walk of the workdir serves layer 2's binds too (one walk per command): a nested
// repository's hooks are read-only while the command runs, and what the command wrote in a
// writable place of the surface is undone after it. The control: plain sh writes both.
TEST(SandboxCommand, ANestedRepositorysHooksAreReadOnlyAndTheSurfaceIsRestored) {
  if (!Layer2Available()) GTEST_SKIP() << "layer 2 only: layer 1 has no read-only binds";
  const std::string work = MakeTempDir("cmd-git");
  ASSERT_EQ(system(("git init -q '" + work + "' && git init -q '" + work + "/a/b'").c_str()), 0);
  const std::string plant =
      "touch a/b/.git/hooks/pre-commit 2>&1; echo \"rc=$?\"; echo x > a/b/.git/commondir";
  CmdResult r = RunCmd({"--workdir", work, "--", "/bin/sh", "-c", plant});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Read-only file system"), std::string::npos) << r.out;
  EXPECT_FALSE(FileExists(work + "/a/b/.git/hooks/pre-commit"));
  EXPECT_FALSE(FileExists(work + "/a/b/.git/commondir")) << r.err;
  CmdResult control = RunCmd({"--sandbox=off", "--workdir", work, "--", "/bin/sh", "-c", plant});
  EXPECT_NE(control.out.find("rc=0"), std::string::npos) << control.out;
  EXPECT_TRUE(FileExists(work + "/a/b/.git/hooks/pre-commit"));
}

// A worktree's git dir lies outside its workdir. Outside the writable trees everything is read-only
// already, or hidden: under the private /tmp its bind found nothing and failed every command (the
// build before this test: "spawn /bin/sh: bind git's trusted files read-only: No such file or
// directory"). Only paths in a writable tree are bound now: the command runs with the worktree's
// `.git` file read-only, and git finds its repository where --readable shows it. The control:
// unsandboxed, that file is writable.
TEST(SandboxCommand, AWorktreeOfARepositoryUnderTmpRunsWithItsGitFileReadOnly) {
  if (!Layer2Available()) GTEST_SKIP() << "layer 2 only: layer 1 has no read-only binds";
  std::string tmp = "/tmp/forkbox-worktree-XXXXXX";
  ASSERT_NE(mkdtemp(tmp.data()), nullptr);
  const std::string main = tmp + "/main";
  const std::string wt = tmp + "/wt";
  ASSERT_TRUE(MakeGitWorktree(main, wt));
  const std::string probe =
      "git status --short >/dev/null 2>&1 && echo status=ok; (: > .git) 2>/dev/null || echo ro";
  CmdResult r = RunCmd({"--workdir", wt, "--", "/bin/sh", "-c", probe});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "ro\n") << r.err;
  // Git fails there, and the command says why and what to add (HiddenGitDirWarning).
  EXPECT_NE(r.err.find("warning: the workdir's repository " + main + "/.git is under /tmp"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--readable " + main + "/.git"), std::string::npos) << r.err;
  CmdResult shown = RunCmd({"--workdir", wt, "--readable", main, "--", "/bin/sh", "-c", probe});
  EXPECT_EQ(shown.out, "status=ok\nro\n") << shown.err;
  EXPECT_EQ(shown.err.find("warning"), std::string::npos) << shown.err;
  CmdResult control = RunCmd({"--sandbox=off", "--workdir", wt, "--", "/bin/sh", "-c", probe});
  EXPECT_EQ(control.out, "status=ok\n") << control.err;
  EXPECT_EQ(control.err.find("warning: the workdir's repository"), std::string::npos);
  std::filesystem::remove_all(tmp);
}

// A git dir under /tmp or /dev/shm (layer 2's private tmpfs) that no flag brings back: the
// warning names the repository and the flags that would; nothing once one does, in layer 1, or
// for a repository whose git dir is in the workdir.
TEST(HiddenGitDirWarning, NamesAHiddenRepositoryAndTheFlagsThatShowIt) {
  std::string tmp = "/tmp/forkbox-hidden-git-XXXXXX";
  ASSERT_NE(mkdtemp(tmp.data()), nullptr);
  const std::string main = tmp + "/main";
  const std::string wt = MakeTempDir("hidden-git-wt") + "/wt";
  ASSERT_TRUE(MakeGitWorktree(main, wt));
  std::filesystem::create_directories(wt + "/sub");
  Policy policy;
  policy.workdir = wt;
  const std::string warning = HiddenGitDirWarning(policy, 2);
  EXPECT_NE(warning.find("repository " + main + "/.git is under /tmp"), std::string::npos)
      << warning;
  EXPECT_NE(warning.find("--writable " + main + "/.git"), std::string::npos) << warning;
  EXPECT_NE(warning.find("--readable " + main + "/.git"), std::string::npos) << warning;
  policy.workdir = wt + "/sub";  // git finds the worktree's `.git` file above the workdir.
  EXPECT_EQ(HiddenGitDirWarning(policy, 2), warning);
  EXPECT_EQ(HiddenGitDirWarning(policy, 1), "") << "layer 1 hides no /tmp";
  Policy writable = policy;
  writable.writable = {main + "/.git"};
  EXPECT_EQ(HiddenGitDirWarning(writable, 2), "");
  Policy readable = policy;
  readable.readable = {main};
  EXPECT_EQ(HiddenGitDirWarning(readable, 2), "");
  Policy off = policy;
  off.enabled = false;
  EXPECT_EQ(HiddenGitDirWarning(off, 2), "");
  Policy own = policy;
  own.workdir = main;  // Its git dir is in the workdir, which layer 2 binds back.
  EXPECT_EQ(HiddenGitDirWarning(own, 2), "");
  std::filesystem::remove_all(tmp);
}

// Under /dev/shm a --readable path is not bound back (only /tmp ones are): the warning stays and
// names --writable alone.
TEST(HiddenGitDirWarning, UnderDevShmOnlyWritableShowsIt) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm here";
  std::string shm = "/dev/shm/forkbox-hidden-git-XXXXXX";
  ASSERT_NE(mkdtemp(shm.data()), nullptr);
  const std::string work = MakeTempDir("hidden-git-sub");
  std::filesystem::create_directories(shm + "/modules/sub");
  std::filesystem::create_directories(work + "/sub");
  ASSERT_TRUE(WriteNewFile(work + "/sub/.git", "gitdir: " + shm + "/modules/sub\n"));
  Policy policy;
  policy.workdir = work + "/sub";
  policy.readable = {shm};
  const std::string warning = HiddenGitDirWarning(policy, 2);
  EXPECT_NE(warning.find(shm + "/modules/sub is under /dev/shm"), std::string::npos) << warning;
  EXPECT_NE(warning.find("--writable " + shm + "/modules/sub"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("--readable"), std::string::npos) << warning;
  policy.writable = {shm};
  EXPECT_EQ(HiddenGitDirWarning(policy, 2), "");
  std::filesystem::remove_all(shm);
}

// LinkedGitDirOf: a worktree's `.git` file names its git dir, whose commondir names the common
// one; a submodule's git dir is its own common dir; a `.git` directory names none.
TEST(LinkedGitDirOf, FollowsTheGitFileAndCommondir) {
  const std::string work = MakeTempDir("linked-git");
  std::filesystem::create_directories(work + "/repo/.git/worktrees/w");
  std::filesystem::create_directories(work + "/repo/.git/modules/m");
  std::filesystem::create_directories(work + "/w/deep");
  std::filesystem::create_directories(work + "/m");
  ASSERT_TRUE(WriteNewFile(work + "/w/.git", "gitdir: " + work + "/repo/.git/worktrees/w\n"));
  ASSERT_TRUE(WriteNewFile(work + "/repo/.git/worktrees/w/commondir", "../..\n"));
  ASSERT_TRUE(WriteNewFile(work + "/m/.git", "gitdir: ../repo/.git/modules/m\n"));
  std::optional<LinkedGitDir> w = LinkedGitDirOf(work + "/w/deep");
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->gitdir, work + "/repo/.git/worktrees/w");
  EXPECT_EQ(w->common, work + "/repo/.git");
  std::optional<LinkedGitDir> m = LinkedGitDirOf(work + "/m");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->gitdir, work + "/repo/.git/modules/m");
  EXPECT_EQ(m->common, m->gitdir);
  EXPECT_FALSE(LinkedGitDirOf(work + "/repo").has_value()) << "a .git directory";
  // A `.git` file that names no directory, or holds no gitdir line, names none either.
  std::filesystem::create_directories(work + "/gone");
  std::filesystem::create_directories(work + "/junk");
  ASSERT_TRUE(WriteNewFile(work + "/gone/.git", "gitdir: " + work + "/nowhere\n"));
  ASSERT_TRUE(WriteNewFile(work + "/junk/.git", "not a gitdir line\n"));
  EXPECT_FALSE(LinkedGitDirOf(work + "/gone").has_value());
  EXPECT_FALSE(LinkedGitDirOf(work + "/junk").has_value());
}

// End to end: a `.git` file in the workdir naming a directory outside it leaves that directory
// untouched by `forkbox sandbox` (it created hooks/ and info/ there before this test); with the
// directory --writable they appear, as they must for their read-only binds (the control).
TEST(SandboxCommand, AGitFileNamingADirectoryOutsideTheWorkdirWritesNothingThere) {
  const std::string work = MakeTempDir("cmd-gitfile");
  const std::string named = std::filesystem::canonical(MakeTempDir("cmd-gitfile-named")).string();
  ASSERT_TRUE(WriteNewFile(work + "/.git", "gitdir: " + named + "\n"));
  CmdResult r = RunCmd({"--workdir", work, "--", "/bin/true"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(named)) << "forkbox wrote outside the writable trees";
  CmdResult control = RunCmd({"--workdir", work, "--writable", named, "--", "/bin/true"});
  EXPECT_EQ(control.code, 0) << control.err;
  EXPECT_TRUE(FileExists(named + "/hooks")) << control.err;
}

// A SIGKILL of `forkbox sandbox` while its command runs: the command's namespace init gets its
// death signal (not SIGKILL), kills the namespace and removes the .git/commondir the command
// planted (it would send your next git command to a directory of the command's choosing). The
// pipes reach EOF only once the init, which holds stderr, is gone. The control, unsandboxed,
// keeps it.
TEST(SandboxCommand, ASigkillOfItStillRemovesTheCommondirItsCommandPlanted) {
  if (!Layer2Available()) GTEST_SKIP() << "layer 2 only: layer 1 has no init to outlive it";
  // $$: the command's pid as it sees it (in layer 2 its namespace's).
  const std::string plant = "echo x > .git/commondir; echo $$ > ready; exec sleep 120";
  for (const bool sandboxed : {true, false}) {
    const std::string work = MakeTempDir("cmd-sigkill");
    ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
    ASSERT_EQ(mkfifo((work + "/ready").c_str(), 0600), 0);
    std::vector<std::string> args = {"--workdir", work, "--", "/bin/sh", "-c", plant};
    if (!sandboxed) args.insert(args.begin(), "--sandbox=off");
    std::unique_ptr<BackgroundCmd> run = StartCmd(args);
    const pid_t forkbox = run->pid;
    ASSERT_GT(forkbox, 0);
    // Blocks until the command planted it.
    const pid_t command = static_cast<pid_t>(std::atoi(run->ReadFifo(work + "/ready").c_str()));
    EXPECT_EQ(kill(forkbox, SIGKILL), 0);
    if (!sandboxed) {
      EXPECT_EQ(kill(command, SIGKILL), 0);  // Nothing else would end it.
    }
    run->thread.join();
    const CmdResult& r = run->result;
    EXPECT_EQ(r.code, 128 + SIGKILL);
    if (sandboxed) {
      EXPECT_FALSE(FileExists(work + "/.git/commondir")) << r.err;
      EXPECT_NE(r.err.find("commondir: created by the command and removed"), std::string::npos)
          << r.err;
    } else {
      EXPECT_TRUE(FileExists(work + "/.git/commondir")) << "control: nothing planted";
    }
  }
}

// A SIGKILL of `forkbox sandbox` while its command runs, in each layer: what the command planted
// in git's trust surface is undone all the same, by the command's keeper (layer 1, where nothing
// of the surface is read-only) or namespace init (layer 2, where a repository the command created
// is writable), from its copy of the record `forkbox sandbox` took. Before, a hook, a config key
// and a commondir stayed in layer 1, and the new repository's hook in layer 2. The control,
// --sandbox=off, keeps all of them.
TEST(SandboxCommand, ASigkillOfItStillUndoesWhatItsCommandPlantedInGitsTrustSurface) {
  // In layer 2 the first two writes fail (read-only binds); the script goes on.
  const std::string plant =
      "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
      "git config core.fsmonitor 'touch pwned'; echo x > .git/commondir; "
      "git init -q sub && printf '#!/bin/sh\\n' > sub/.git/hooks/post-checkout && "
      "chmod +x sub/.git/hooks/post-checkout; echo x > \"$TMPDIR/f\"; echo \"$TMPDIR\" > tmpdir; "
      "echo $$ > ready; exec sleep 120";
  struct Mode {
    const char* name;
    bool sandboxed;
    bool layer1;
    bool as_nobody;
  };
  // Root runs each layer again as nobody.
  const bool root = geteuid() == 0;
  std::vector<Mode> modes = {{"layer 1", true, true, false}, {"unsandboxed", false, false, false}};
  if (root) modes.push_back({"layer 1, nobody", true, true, true});
  if (Layer2Available()) {
    modes.push_back({"layer 2", true, false, false});
    if (root) modes.push_back({"layer 2, nobody", true, false, true});
  }
  for (const Mode& mode : modes) {
    SCOPED_TRACE(mode.name);
    const std::string work = MakeTempDir("cmd-sigkill-surface");
    ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
    const std::string config = ReadFile(work + "/.git/config");
    ASSERT_EQ(mkfifo((work + "/ready").c_str(), 0600), 0);
    if (mode.as_nobody) {
      ASSERT_EQ(system(("chown -R 65534:65534 '" + work + "'").c_str()), 0);
    }
    std::vector<std::string> args = {"--workdir", work, "--", "/bin/sh", "-c", plant};
    if (!mode.sandboxed) args.insert(args.begin(), "--sandbox=off");
    std::unique_ptr<BackgroundCmd> run = StartCmd(args, [mode] {
      if (mode.as_nobody && !(setgroups(0, nullptr) == 0 && setresgid(65534, 65534, 65534) == 0 &&
                              setresuid(65534, 65534, 65534) == 0)) {
        return false;
      }
      return !mode.layer1 || testing::RefuseUserNamespaces();
    });
    ASSERT_GT(run->pid, 0);
    const pid_t command = static_cast<pid_t>(std::atoi(run->ReadFifo(work + "/ready").c_str()));
    ASSERT_GT(command, 0);
    EXPECT_EQ(kill(run->pid, SIGKILL), 0);
    if (!mode.sandboxed) {  // Nothing else would end it.
      EXPECT_EQ(kill(command, SIGKILL), 0);
    }
    run->thread.join();  // EOF of its pipes: the keeper or init, which holds stderr, is gone.
    const std::string& err = run->result.err;
    EXPECT_EQ(run->result.code, 128 + SIGKILL);
    const bool kept = !mode.sandboxed;
    EXPECT_EQ(FileExists(work + "/sub/.git/hooks/post-checkout"), kept) << err;
    EXPECT_EQ(FileExists(work + "/.git/commondir"), kept) << err;
    if (!mode.sandboxed || mode.layer1) {  // Layer 2's read-only binds refused these two.
      EXPECT_EQ(FileExists(work + "/.git/hooks/pre-commit"), kept) << err;
      EXPECT_EQ(ReadFile(work + "/.git/config") == config, !kept) << err;
    }
    if (mode.sandboxed) {
      EXPECT_NE(err.find("git trust surface changed by the command: removed "
                         "sub/.git/hooks/post-checkout"),
                std::string::npos)
          << err;
    }
    if (mode.layer1) {
      EXPECT_NE(err.find("git trust surface changed by the command: restore .git/config"),
                std::string::npos)
          << err;
      EXPECT_NE(err.find("git trust surface changed by the command: remove .git/hooks/pre-commit"),
                std::string::npos)
          << err;
    }
    EXPECT_EQ(err.find("could NOT"), std::string::npos) << err;
    // The temp dir (in layer 1 on disk, with its link in /dev/shm) is removed too.
    int task_dirs = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(work + "/.forkbox-tmp", ec)) {
      task_dirs += e.path().filename().string().rfind("task-", 0) == 0 ? 1 : 0;
    }
    std::string link = ReadFile(work + "/tmpdir");
    if (!link.empty() && link.back() == '\n') link.pop_back();
    ASSERT_FALSE(link.empty());
    struct stat st;
    const bool link_kept = mode.layer1 || !mode.sandboxed ? lstat(link.c_str(), &st) == 0 : kept;
    EXPECT_EQ(task_dirs, kept ? 1 : 0) << err;
    EXPECT_EQ(link_kept, kept) << link;
    if (kept) {  // The control's leftovers.
      std::filesystem::remove_all(work + "/.forkbox-tmp", ec);
      (void)unlink(link.c_str());
    }
  }
}

// Every process below `top`, and `top` itself, from /proc's parent pids.
std::vector<pid_t> TreeOf(pid_t top) {
  std::map<pid_t, pid_t> parent_of;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = ReadFile(entry.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %*c %d", &ppid) == 1) {
      parent_of[std::stoi(name)] = ppid;
    }
  }
  std::vector<pid_t> tree;
  for (const auto& [pid, ppid] : parent_of) {
    for (pid_t up = pid; up > 1; up = parent_of.count(up) ? parent_of[up] : 0) {
      if (up != top) continue;
      tree.push_back(pid);
      break;
    }
  }
  return tree;
}

// `forkbox sandbox` and its command's keeper or init killed at once (`pkill -9`, `docker kill`)
// while the command has planted git's trust surface: nobody is left to put it back, so it stays
// until the next `forkbox sandbox`, which puts it back from the dead one's journal and says so.
// A SIGKILL of `forkbox sandbox` alone is put back by its keeper or init, which also empties the
// journal: the next start then undoes nothing, not even a change made since (the user's own).
// The kill-all leaves a daemon the command detached running in layer 1 (no PID namespace): as root,
// the next start kills it in the dead command's pids cgroup first (PidsCgroup::EndLeftovers).
// The controls: --sandbox=off keeps a journal of nothing, and its plants stay.
TEST(SandboxCommand, AKillOfEveryProcessOfItIsPutBackByTheNextStartFromItsJournal) {
  const std::string plant =
      "echo x > .git/commondir; echo 'echo hook' > .git/hooks/pre-commit; "
      "setsid -f sh -c 'echo $$ > daemon.tmp && mv daemon.tmp daemon; exec sleep 120' "
      "> /dev/null 2>&1; while [ ! -e daemon ]; do :; done; echo $$ > ready; "
      "exec sleep 120 > /dev/null 2>&1";  // Neither holds the output the test waits on.
  struct Mode {
    const char* name;
    bool sandboxed;
    bool layer1;
    bool kill_all;
  };
  std::vector<Mode> modes = {{"layer 1, kill-all", true, true, true},
                             {"layer 1, SIGKILL of it alone", true, true, false},
                             {"unsandboxed, kill-all", false, false, true}};
  if (Layer2Available()) {
    modes.push_back({"layer 2, kill-all", true, false, true});
    modes.push_back({"layer 2, SIGKILL of it alone", true, false, false});
  }
  for (const Mode& mode : modes) {
    SCOPED_TRACE(mode.name);
    const std::string work = MakeTempDir("cmd-killall");
    const std::string state = MakeTempDir("cmd-killall-state");
    ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
    ASSERT_EQ(mkfifo((work + "/ready").c_str(), 0600), 0);
    const auto setup = [mode, state] {
      return setenv("XDG_STATE_HOME", state.c_str(), 1) == 0 &&
             (!mode.layer1 || testing::RefuseUserNamespaces());
    };
    std::vector<std::string> args = {"--workdir", work, "--", "/bin/sh", "-c", plant};
    if (!mode.sandboxed) args.insert(args.begin(), "--sandbox=off");
    std::unique_ptr<BackgroundCmd> run = StartCmd(args, setup);
    ASSERT_GT(run->pid, 0);
    ASSERT_GT(std::atoi(run->ReadFifo(work + "/ready").c_str()), 0);  // Blocks until it planted.
    // The daemon the command detached; its own pid outside layer 2 (no PID namespace).
    const pid_t daemon = std::atoi(ReadFile(work + "/daemon").c_str());
    const bool own_pid = mode.layer1 || !mode.sandboxed;
    UniqueFd left(own_pid ? static_cast<int>(syscall(SYS_pidfd_open, daemon, 0)) : -1);
    // Every forkbox process (its keeper or init, clones of it, too), stopped first, so that none
    // of them sees another die: all at once. The daemon is not one: `pkill -9 forkbox` spares it.
    const auto comm = [](pid_t pid) { return ReadFile("/proc/" + std::to_string(pid) + "/comm"); };
    const std::vector<pid_t> tree = TreeOf(run->pid);
    std::vector<pid_t> all = {run->pid};
    for (pid_t pid : mode.kill_all ? tree : std::vector<pid_t>{}) {
      if (pid != run->pid && comm(pid) == comm(run->pid)) all.push_back(pid);
    }
    std::vector<UniqueFd> dying;
    for (pid_t pid : all) dying.emplace_back(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    for (pid_t pid : all) kill(pid, SIGSTOP);
    for (pid_t pid : all) kill(pid, SIGKILL);
    if (!mode.sandboxed) {
      for (pid_t pid : tree) kill(pid, SIGKILL);  // Nothing else would end them.
    }
    run->thread.join();
    for (const UniqueFd& pidfd : dying) {  // Gone (their locks with them) before the next start.
      pollfd p{pidfd.get(), POLLIN, 0};
      EXPECT_TRUE(!pidfd || poll(&p, 1, 30'000) == 1);
    }
    const bool hook_writable = mode.layer1 || !mode.sandboxed;  // Layer 2 binds hooks/ read-only.
    EXPECT_EQ(FileExists(work + "/.git/commondir"), mode.kill_all) << run->result.err;
    EXPECT_EQ(FileExists(work + "/.git/hooks/pre-commit"), mode.kill_all && hook_writable);
    // The user's own change since, which only a stale record would undo.
    std::ofstream(work + "/.git/config", std::ios::app) << "[user]\n\tname = mine\n";
    const std::string config = ReadFile(work + "/.git/config");
    CmdResult next = RunCmd({"--workdir", work, "--", "/bin/true"}, "", setup);
    EXPECT_EQ(next.code, 0) << next.err;
    if (left && mode.sandboxed && mode.kill_all && !PidsCgroup::Hierarchy().empty()) {
      pollfd p{left.get(), POLLIN, 0};
      EXPECT_EQ(poll(&p, 1, 10'000), 1) << "the daemon outlived the next start";
    }
    if (left) (void)syscall(SYS_pidfd_send_signal, left.get(), SIGKILL, nullptr, 0);
    const std::string put_back = "git trust surface left changed by a killed forkbox, put back: ";
    if (mode.sandboxed && mode.kill_all) {
      EXPECT_FALSE(FileExists(work + "/.git/commondir"));
      EXPECT_FALSE(FileExists(work + "/.git/hooks/pre-commit"));
      EXPECT_NE(next.err.find(put_back + work + ": remove .git/commondir"), std::string::npos)
          << next.err;
    } else {
      EXPECT_EQ(next.err.find(put_back), std::string::npos) << next.err;
      EXPECT_EQ(FileExists(work + "/.git/commondir"), !mode.sandboxed);
    }
    if (!mode.kill_all) {
      EXPECT_EQ(ReadFile(work + "/.git/config"), config) << next.err;
    }
  }
}

// A termination signal during the start is taken, never its default action: it ended `forkbox
// sandbox` with its journal written (the next start put that record back over the user's later
// git changes) and, in layer 2, its command's init stuck waiting for a ruleset. Here SIGTERM is
// pending when it starts (blocked and raised before the exec): the command never runs, the exit
// is 143 with the reason, and the next start puts nothing back. The control: without the signal
// the command runs.
TEST(SandboxCommand, ASignalDuringTheStartRunsNothingAndLeavesNoRecord) {
  for (const bool signalled : {true, false}) {
    SCOPED_TRACE(signalled ? "SIGTERM pending at the start" : "control: no signal");
    const std::string work = MakeTempDir("cmd-start-signal");
    const std::string state = MakeTempDir("cmd-start-signal-state");
    ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
    const auto setup = [signalled, state] {
      sigset_t term;
      sigemptyset(&term);
      sigaddset(&term, SIGTERM);
      return setenv("XDG_STATE_HOME", state.c_str(), 1) == 0 &&
             (!signalled || (sigprocmask(SIG_BLOCK, &term, nullptr) == 0 && raise(SIGTERM) == 0));
    };
    CmdResult r = RunCmd({"--workdir", work, "--", "/bin/sh", "-c", "echo ran > ran"}, "", setup);
    EXPECT_EQ(r.code, signalled ? 143 : 0) << r.err;
    EXPECT_EQ(WIFSIGNALED(r.wait_status) && WTERMSIG(r.wait_status) == SIGTERM, signalled)
        << "it dies of the signal it took: " << r.wait_status;
    EXPECT_EQ(FileExists(work + "/ran"), !signalled) << r.err;
    EXPECT_EQ(r.err.find("forkbox sandbox: interrupted by SIGTERM before the command started") !=
                  std::string::npos,
              signalled)
        << r.err;
    std::ofstream(work + "/.git/config", std::ios::app) << "[user]\n\tname = mine\n";
    const std::string config = ReadFile(work + "/.git/config");
    CmdResult next = RunCmd({"--workdir", work, "--", "/bin/true"}, "",
                            [state] { return setenv("XDG_STATE_HOME", state.c_str(), 1) == 0; });
    EXPECT_EQ(next.code, 0) << next.err;
    EXPECT_EQ(next.err.find("put back"), std::string::npos) << next.err;
    EXPECT_EQ(ReadFile(work + "/.git/config"), config) << "the user's change stays";
  }
}

// A file name a tool chose reaches a terminal escaped: `forkbox sandbox` printed the removal of a
// planted hook (here in a repository the command made) whose name holds an OSC title sequence raw
// (an OSC 52 clipboard write would pass the same way). The control: to a pipe, not a terminal, the
// name's bytes stay as they are.
TEST(SandboxCommand, NamesItPrintsToATerminalHaveTheirControlsEscaped) {
  const auto args = [] {  // A fresh workdir each: the first run's repository is recorded after.
    const std::string work = MakeTempDir("cmd-escape");
    return std::vector<std::string>{"--workdir",
                                    work,
                                    "--",
                                    "/bin/sh",
                                    "-c",
                                    "mkdir -p n/.git/hooks && touch \"n/.git/hooks/x$(printf "
                                    "'\\033]0;PWNED\\007')\""};
  };
  UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
  ASSERT_TRUE(master && grantpt(master.get()) == 0 && unlockpt(master.get()) == 0);
  const std::string slave_path = ptsname(master.get());
  UniqueFd slave(open(slave_path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));  // Held: no EIO.
  ASSERT_TRUE(slave);
  CmdResult r = RunCmd(args(), "", [&slave_path] {
    const int fd = open(slave_path.c_str(), O_RDWR | O_NOCTTY);
    return fd >= 0 && dup2(fd, STDERR_FILENO) == STDERR_FILENO;
  });
  EXPECT_EQ(r.code, 0);
  std::string seen;
  char buf[4096];
  for (ssize_t n; (n = read(master.get(), buf, sizeof buf)) > 0;) {
    seen.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(seen.find("removed n/.git/hooks/x\\x1b]0;PWNED\\x07"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("\x1b]0;PWNED"), std::string::npos) << "a raw OSC reached the terminal";
  CmdResult control = RunCmd(args());
  EXPECT_NE(control.err.find("removed n/.git/hooks/x\x1b]0;PWNED\x07"), std::string::npos)
      << control.err;
}

// Git paths outside every writable tree are not bound (the rest of the tree is read-only or
// hidden there), those inside are.
// Layer 1 has no PID namespace: `forkbox sandbox`'s command runs below a keeper of its own (a
// subreaper outside its confinement) that takes the caller's death and kills the command and what
// it detached. Before, both outlived a SIGKILL of `forkbox sandbox`. The control, --sandbox=off:
// both survive it (the test kills them). As root, a forkbox starting while the keeper is still at
// work leaves the command to it (PidsCgroup::EndLeftovers), even with no journal: the keeper keeps
// the lock of the command's pids cgroup (PidsCgroup::lock_fd).
TEST(SandboxCommand, InLayer1ASigkillOfItLeavesNoProcessOfItsCommand) {
  const std::string script =
      "setsid -f sh -c 'echo $$ > daemon.tmp && mv daemon.tmp daemon; exec sleep 120'; "
      "while [ ! -e daemon ]; do :; done; echo $$ > ready; exec sleep 120";
  for (const bool sandboxed : {true, false}) {
    const std::string work = MakeTempDir("cmd-layer1-sigkill");
    ASSERT_EQ(mkfifo((work + "/ready").c_str(), 0600), 0);
    // Its state in a tree the tools can write: no journal (they could forge one), so no journal's
    // lock either. Its output to /dev/null: a stopped keeper holds no pipe the run's thread reads.
    const std::string state = MakeTempDir("cmd-layer1-sigkill-state");
    // --allow-broad-workdir: a writable tree holding forkbox's state is refused without it.
    std::vector<std::string> args = {
        "--workdir", work,      "--writable", state, "--allow-broad-workdir",
        "--",        "/bin/sh", "-c",         script};
    if (!sandboxed) args.insert(args.begin(), "--sandbox=off");
    const auto setup = [state] {
      const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
      return null >= 0 && dup2(null, 1) == 1 && dup2(null, 2) == 2 &&
             setenv("XDG_STATE_HOME", state.c_str(), 1) == 0 && testing::RefuseUserNamespaces();
    };
    std::unique_ptr<BackgroundCmd> run = StartCmd(args, setup);
    const pid_t forkbox = run->pid;
    ASSERT_GT(forkbox, 0);
    // Blocks until the command runs and its daemon wrote its pid.
    const pid_t command = static_cast<pid_t>(std::atoi(run->ReadFifo(work + "/ready").c_str()));
    const pid_t daemon = static_cast<pid_t>(std::atoi(ReadFile(work + "/daemon").c_str()));
    ASSERT_GT(command, 0);
    ASSERT_GT(daemon, 0);
    UniqueFd command_fd(static_cast<int>(syscall(SYS_pidfd_open, command, 0)));
    UniqueFd daemon_fd(static_cast<int>(syscall(SYS_pidfd_open, daemon, 0)));
    ASSERT_TRUE(command_fd && daemon_fd) << strerror(errno);
    // Its keeper (the command's parent) held while `forkbox sandbox` dies: a forkbox starting
    // then must leave the command to it, told by the cgroup's lock that the keeper keeps.
    const std::string stat = ReadFile("/proc/" + std::to_string(command) + "/stat");
    const pid_t keeper = std::atoi(stat.substr(stat.rfind(')') + 4).c_str());  // Its ppid.
    if (sandboxed) {
      ASSERT_EQ(kill(keeper, SIGSTOP), 0);
    }
    // Opened before the kill: after it, the run's thread may have reaped forkbox already (a
    // descriptor of -1 then polled to the timeout).
    UniqueFd gone(static_cast<int>(syscall(SYS_pidfd_open, forkbox, 0)));
    ASSERT_TRUE(gone) << strerror(errno);
    EXPECT_EQ(syscall(SYS_pidfd_send_signal, gone.get(), SIGKILL, nullptr, 0), 0);
    if (sandboxed) {
      pollfd dead{gone.get(), POLLIN, 0};
      EXPECT_EQ(poll(&dead, 1, 10'000), 1);
      run->thread.join();  // Reaped: its pid is gone, as EndLeftovers asks of an owner.
      for (const std::string& line : PidsCgroup::EndLeftovers()) {
        EXPECT_EQ(line.find("/task-" + std::to_string(forkbox) + "-"), std::string::npos)
            << "a start killed what the keeper was still to end: " << line;
      }
      ASSERT_EQ(kill(keeper, SIGCONT), 0);
    }
    pollfd ended[2] = {{command_fd.get(), POLLIN, 0}, {daemon_fd.get(), POLLIN, 0}};
    const int timeout_ms = sandboxed ? 30'000 : 1'000;
    const bool command_died = poll(&ended[0], 1, timeout_ms) == 1;
    const bool daemon_died = poll(&ended[1], 1, timeout_ms) == 1;
    if (!sandboxed) {  // Nothing else would end them.
      (void)syscall(SYS_pidfd_send_signal, command_fd.get(), SIGKILL, nullptr, 0);
      (void)syscall(SYS_pidfd_send_signal, daemon_fd.get(), SIGKILL, nullptr, 0);
    }
    if (!sandboxed) run->thread.join();
    EXPECT_EQ(run->result.code, 128 + SIGKILL);
    EXPECT_EQ(command_died, sandboxed) << "sandboxed=" << sandboxed << ": the command";
    EXPECT_EQ(daemon_died, sandboxed) << "sandboxed=" << sandboxed << ": its daemon";
  }
}

TEST(PlanMounts, BindsOnlyTheGitPathsInAWritableTree) {
  const std::string work = MakeTempDir("plan-binds");
  const std::string other = MakeTempDir("plan-binds-other");
  MountPlan given;
  given.pinned = {work + "/.git", other + "/.git"};
  given.readonly = {work + "/.git/hooks", other + "/.git/worktrees/w", "/elsewhere/.git/config"};
  Result<MountPlan> plan = PlanMounts(work, {other + "/.git/worktrees"}, kNoUserGitConfig, &given);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->pinned, std::vector<std::string>{work + "/.git"});
  EXPECT_EQ(plan->readonly,
            (std::vector<std::string>{work + "/.git/hooks", other + "/.git/worktrees/w"}));
}

// With the surface given, PlanMounts takes it and does not walk the workdir for its own.
TEST(PlanMounts, TakesAGivenGitSurfaceInsteadOfWalking) {
  const std::string work = MakeTempDir("plan-given");
  std::filesystem::create_directories(work + "/walked/.git");
  MountPlan given;
  given.pinned = {work + "/given/.git"};
  given.readonly = {work + "/given/.git/hooks"};
  given.links = {work + "/given/.git/info"};
  Result<MountPlan> plan = PlanMounts(work, {}, kNoUserGitConfig, &given);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->pinned, given.pinned);
  EXPECT_EQ(plan->readonly, given.readonly);
  EXPECT_EQ(plan->links, given.links);
  Result<MountPlan> walked = PlanMounts(work, {}, kNoUserGitConfig);
  ASSERT_TRUE(walked.ok());
  EXPECT_EQ(walked->pinned, std::vector<std::string>{work + "/walked/.git"}) << "the control";
}

TEST(SandboxCommand, RejectsBadUsage) {
  EXPECT_EQ(RunCmd({"--sandbox=bogus", "--", "true"}).code, 2);
  EXPECT_EQ(RunCmd({}).code, 2);
  EXPECT_EQ(RunCmd({"--workdir", "/nonexistent/forkbox", "--", "true"}).code, 2);
  CmdResult missing = RunCmd({"--", "forkbox-no-such-command"});
  EXPECT_EQ(missing.code, 127);
  EXPECT_NE(missing.err.find("not found"), std::string::npos);
}

// --sandbox read-only (codex's `-s read-only`): the command reads the workdir but cannot make,
// change, move or remove anything in it, in layer 2 (the workdir, here under /tmp, is bound
// read-only: Landlock's rule for the private /tmp would reach it there) and in layer 1 (Landlock
// alone); its own TMPDIR stays writable and is gone afterwards. --writable with it is a usage
// error. Control: the same command under the default sandbox changes every file.
TEST(SandboxCommand, ReadOnlyWritesNothingButItsOwnTmpdir) {
  const std::string script =
      "cat kept; echo new > new; echo more >> kept; rm -f gone; mkdir dir; mv kept moved; "
      "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"; true";
  for (const bool layer1 : {false, true}) {
    const std::function<bool()> setup =
        layer1 ? std::function<bool()>(testing::RefuseUserNamespaces) : [] { return true; };
    for (const std::string mode : {"read-only", "on"}) {
      const std::string work = MakeTempDir("cmd-read-only");
      std::ofstream(work + "/kept") << "kept\n";
      std::ofstream(work + "/gone") << "gone\n";
      CmdResult r =
          RunCmd({"--workdir", work, "-s", mode, "--", "/bin/sh", "-c", script}, "", setup);
      const std::string where = std::string(layer1 ? "layer 1, " : "layer 2, ") + mode;
      EXPECT_EQ(r.code, 0) << where << ": " << r.err;
      EXPECT_EQ(r.out, "kept\nt\n") << where << ": " << r.err;
      if (mode == "read-only") {
        EXPECT_EQ(ReadFile(work + "/kept"), "kept\n") << where;
        EXPECT_TRUE(FileExists(work + "/gone")) << where;
        for (const char* made : {"/new", "/dir", "/moved"}) {
          EXPECT_FALSE(FileExists(work + made)) << where << made;
        }
      } else {
        EXPECT_EQ(ReadFile(work + "/moved"), "kept\nmore\n") << where;
        EXPECT_FALSE(FileExists(work + "/gone")) << where;
        EXPECT_TRUE(FileExists(work + "/new") && FileExists(work + "/dir")) << where;
      }
      EXPECT_FALSE(FileExists(work + "/.forkbox-tmp")) << where << ": the TMPDIR is removed";
    }
  }
  // Layer 1 leaves /dev/shm writable to every command: a read-only workdir there is refused.
  char shm_work[] = "/dev/shm/cmd-read-only-XXXXXX";
  ASSERT_NE(mkdtemp(shm_work), nullptr);
  for (const std::string mode : {"read-only", "on"}) {
    CmdResult in_shm =
        RunCmd({"--workdir", shm_work, "-s", mode, "--", "/bin/sh", "-c", "echo new > new"}, "",
               testing::RefuseUserNamespaces);
    if (mode == "read-only") {
      EXPECT_EQ(in_shm.code, 2) << in_shm.err;
      EXPECT_NE(in_shm.err.find("it is in /dev/shm"), std::string::npos) << in_shm.err;
      EXPECT_FALSE(FileExists(std::string(shm_work) + "/new"));
    } else {
      EXPECT_EQ(in_shm.code, 0) << "the control writes there: " << in_shm.err;
      EXPECT_TRUE(FileExists(std::string(shm_work) + "/new"));
    }
  }
  std::filesystem::remove_all(shm_work);
  CmdResult both = RunCmd({"--workdir", MakeTempDir("cmd-read-only-writable"),
                           "--sandbox=read-only", "--writable", "/tmp", "--", "true"});
  EXPECT_EQ(both.code, 2) << both.err;
  EXPECT_NE(both.err.find("--writable cannot be combined with --sandbox read-only"),
            std::string::npos)
      << both.err;
  CmdResult check = RunCmd({"-s", "read-only", "--check"});
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_NE(check.out.find("read-only: writes only to the command's own temp dir"),
            std::string::npos)
      << check.out;
}

TEST(SandboxCommand, CheckPrintsTheProtectionsAndExitsZeroWhenEnforceable) {
  CmdResult r = RunCmd({"--check"});
  EXPECT_EQ(r.code, 0);
  for (const char* word : {"landlock", "seccomp", "layer", "kernel ", "fork bomb"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word << "\n" << r.out;
  }
}

TEST(SandboxCommand, OffRunsUnsandboxedButWarnsLoudly) {
  std::string work = MakeTempDir("cmd-off");
  CmdResult r = RunCmd(
      {"--workdir", work, "--sandbox=off", "--", "sh", "-c", "grep NoNewPrivs /proc/self/status"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.err.find("WARNING"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("0"), std::string::npos);
}

// A kernel without Landlock: nothing runs (the marker stays absent), and the reason names what is
// missing and the kernel. The control: the same command where Landlock exists runs.
TEST(SandboxCommand, FailsClosedWithoutLandlock) {
  const std::string work = MakeTempDir("cmd-nolandlock");
  const std::vector<std::string> args = {"--workdir", work, "--", "sh", "-c", "echo ran > ran"};
  CmdResult r = RunCmd(args, "", testing::HideLandlock);
  EXPECT_EQ(r.code, 125) << r.err;
  EXPECT_NE(r.err.find("Landlock is unavailable"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(testing::KernelRelease()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--sandbox=off"), std::string::npos) << r.err;
  EXPECT_FALSE(FileExists(work + "/ran"));
  CmdResult check = RunCmd({"--check"}, "", testing::HideLandlock);
  EXPECT_NE(check.code, 0);
  EXPECT_NE(check.out.find("CANNOT be enforced"), std::string::npos) << check.out;
  CmdResult control = RunCmd(args);
  EXPECT_EQ(control.code, 0) << control.err;
  EXPECT_TRUE(FileExists(work + "/ran"));
}

// Without the subreaper, a daemon the command detaches would outlive it unkilled: the command
// does not run, and the reason names the step. The control: the same command, subreaper allowed.
TEST(SandboxCommand, FailsClosedWhenItCannotCollectDaemons) {
  const std::string work = MakeTempDir("cmd-nosubreaper");
  auto refuse_subreaper = [] {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    bool ok = ctx != nullptr &&
              seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1,
                               SCMP_A0(SCMP_CMP_EQ, PR_SET_CHILD_SUBREAPER)) == 0 &&
              seccomp_load(ctx) == 0;
    seccomp_release(ctx);
    return ok;
  };
  const std::vector<std::string> args = {"--workdir", work, "--", "sh", "-c", "echo ran > ran"};
  CmdResult refused = RunCmd(args, "", refuse_subreaper);
  EXPECT_EQ(refused.code, 125) << refused.err;
  EXPECT_NE(refused.err.find("PR_SET_CHILD_SUBREAPER"), std::string::npos) << refused.err;
  EXPECT_FALSE(FileExists(work + "/ran"));
  CmdResult control = RunCmd(args);
  EXPECT_EQ(control.code, 0) << control.err;
  EXPECT_TRUE(FileExists(work + "/ran"));
}

// A kernel without seccomp filters: nothing runs, and the reason names what is missing. The
// control: the same command where seccomp exists runs.
TEST(SandboxCommand, FailsClosedWithoutSeccomp) {
  const std::string work = MakeTempDir("cmd-noseccomp");
  CmdResult r =
      RunCmd({"--workdir", work, "--", "sh", "-c", "echo ran > ran"}, "", testing::HideSeccomp);
  EXPECT_EQ(r.code, 125) << r.err;
  EXPECT_NE(r.err.find("seccomp"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--sandbox=off"), std::string::npos) << r.err;
  EXPECT_FALSE(FileExists(work + "/ran"));
  CmdResult check = RunCmd({"--check"}, "", testing::HideSeccomp);
  EXPECT_NE(check.code, 0);
  EXPECT_NE(check.out.find("CANNOT be enforced"), std::string::npos) << check.out;
  CmdResult control = RunCmd({"--workdir", work, "--", "sh", "-c", "echo ran > ran"});
  EXPECT_EQ(control.code, 0) << control.err;
  EXPECT_TRUE(FileExists(work + "/ran"));
}

// Like a container whose seccomp profile refuses user namespaces: layer 1 still enforces.
TEST(SandboxCommand, FallsBackToLayer1WhereUserNamespacesAreRefused) {
  std::string work = MakeTempDir("cmd-layer1");
  std::string outside = MakeTempDir("cmd-layer1-outside");
  CmdResult check = RunCmd({"--check"}, "", testing::RefuseUserNamespaces);
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_NE(check.out.find("layer 1"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("missing: read-only root"), std::string::npos) << check.out;
  CmdResult r = RunCmd({"--workdir", work, "--", "sh", "-c",
                        "echo x > " + outside +
                            "/f; echo y > inside; "
                            "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -d ' \\t'"},
                       "", testing::RefuseUserNamespaces);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(FileExists(outside + "/f"));
  EXPECT_EQ(ReadFile(work + "/inside"), "y\n");
  EXPECT_NE(r.out.find("NoNewPrivs:1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Seccomp:2"), std::string::npos) << r.out;
}

// Docker masks paths of /proc (binds /dev/null over /proc/keys, /proc/kcore...). The kernel then
// refuses a fresh proc mount in a user namespace (it would reveal them), which layer 2 needs, so
// `forkbox sandbox` runs in layer 1 there, and --check names the refused step and its cause. As
// nobody (root of the initial user namespace may mount it anyway), in a mount namespace of its own
// with /proc masked as Docker does. The control: the same user without the mask gets layer 2.
TEST(SandboxCommand, AContainersMaskedProcGivesLayer1AndSaysWhy) {
  if (geteuid() != 0) GTEST_SKIP() << "masking /proc needs root";
  const char* masked = nullptr;
  for (const char* path : {"/proc/keys", "/proc/timer_list", "/proc/kcore", "/proc/sched_debug"}) {
    if (access(path, F_OK) == 0) {
      masked = path;
      break;
    }
  }
  if (masked == nullptr) GTEST_SKIP() << "no /proc path that Docker masks exists here";
  const std::string work = MakeTempDir("cmd-masked-proc");
  ASSERT_EQ(chown(work.c_str(), 65534, 65534), 0);
  auto as_nobody = [] {
    return setgroups(0, nullptr) == 0 && setresgid(65534, 65534, 65534) == 0 &&
           setresuid(65534, 65534, 65534) == 0;
  };
  auto masked_as_nobody = [masked, as_nobody] {
    return unshare(CLONE_NEWNS) == 0 &&
           mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           mount("/dev/null", masked, nullptr, MS_BIND, nullptr) == 0 && as_nobody();
  };
  CmdResult check = RunCmd({"--workdir", work, "--check"}, "", masked_as_nobody);
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("layer 1,"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("mount proc /proc: Operation not permitted"), std::string::npos)
      << check.out;
  EXPECT_NE(check.out.find("systempaths=unconfined"), std::string::npos) << check.out;
  CmdResult r =
      RunCmd({"--workdir", work, "--", "sh", "-c", "echo $$ > pid"}, "", masked_as_nobody);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_GT(std::atoi(ReadFile(work + "/pid").c_str()), 2) << "layer 1 has no PID namespace";
  // The control: no mask, layer 2.
  CmdResult control = RunCmd({"--workdir", work, "--check"}, "", as_nobody);
  EXPECT_NE(control.out.find("layer 2,"), std::string::npos) << control.out;
}

// The probe's verdict is kept per process, so each case runs in a fresh one: a death test,
// re-executed. The first Layer2Available returns the verdict a probe made when asked gives
// (`forkbox sandbox --check`, a fresh process); once the probe's child has exited, the next call
// reaps it, so nothing is left to reap. Exit code 10: layer 2 available, 11: not, 1-2: a failed
// check.
int ProbeVerdict(bool refuse_userns) {
  if (refuse_userns && !testing::RefuseUserNamespaces()) return 1;
  const bool available = Layer2Available();
  siginfo_t info{};
  (void)waitid(P_ALL, 0, &info, WEXITED | WNOWAIT);  // Until it exited; ECHILD: never cloned.
  if (Layer2Available() != available) return 1;
  if (waitpid(-1, nullptr, WNOHANG) != -1 || errno != ECHILD) return 2;
  return available ? 10 : 11;
}

TEST(Layer2Probe, GivesTheVerdictOfACheckAndLeavesNothingToReap) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const bool refuse : {false, true}) {
    CmdResult check =
        refuse ? RunCmd({"--check"}, "", testing::RefuseUserNamespaces) : RunCmd({"--check"});
    ASSERT_EQ(check.code, 0) << check.out;
    const int layer2 = check.out.find("layer 2,") != std::string::npos ? 10 : 11;
    if (refuse) {
      ASSERT_EQ(layer2, 11) << check.out;
    }
    EXPECT_EXIT(_exit(ProbeVerdict(refuse)), ::testing::ExitedWithCode(layer2), "");
  }
}

// 0: Layer2Available says no and why; 1: it said yes; 2: no reason; 3: the filter failed.
// With `kill_mount`, a seccomp filter (inherited by the probe's child) kills any process that
// calls mount(2): the child's first mount, before its verdict. This process never mounts.
int ProbeKilledBeforeItsVerdict(bool kill_mount, std::string* why) {
  if (kill_mount) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    const bool ok = ctx != nullptr && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
                    seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(mount), 0) == 0 &&
                    seccomp_load(ctx) == 0;
    seccomp_release(ctx);
    if (!ok) return 3;
  }
  if (Layer2Available(why)) return 1;
  return why->empty() ? 2 : 0;
}

TEST(Layer2Probe, AChildKilledBeforeItsVerdictMeansNoLayer2AndSaysSo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CmdResult check = RunCmd({"--check"});
  if (check.out.find("layer 2,") == std::string::npos) GTEST_SKIP() << "no layer 2 here";
  EXPECT_EXIT(
      {
        std::string why;
        const int code = ProbeKilledBeforeItsVerdict(true, &why);
        if (code == 0 && why != "namespace probe died without a verdict") _exit(4);
        _exit(code);
      },
      ::testing::ExitedWithCode(0), "");
  // Control: the same probe without the filter gives its verdict.
  EXPECT_EXIT(
      {
        std::string why;
        _exit(ProbeKilledBeforeItsVerdict(false, &why));
      },
      ::testing::ExitedWithCode(1), "");
}

// 0: the mounts were set up; 1: refused at the writable trees' clone with ELOOP; 2: another
// failure; 3: no namespaces. In new user and mount namespaces, as a layer-2 child does.
int MountWritableTrees(const std::vector<std::string>& writable) {
  MountPlan plan = IdMapsOnly();
  plan.writable = writable;
  plan.mount_proc = false;
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return 3;
  const char* step = "";
  if (WriteIdMapsRaw(plan, &step) != 0) return 3;
  const int err = SetUpMountsRaw(plan, &step);
  if (err == 0) return 0;
  return err == ELOOP && std::string(step).find("no symbolic link") != std::string::npos ? 1 : 2;
}

// The writable trees of a mount plan are canonical when planned; one with a link in it when the
// mounts are made (a task swapped a directory on its way) is refused, rather than its target
// bound writable into the task's namespace. Control: the same plan, unswapped, mounts.
TEST(SetUpMounts, AWritableTreeWithALinkInItIsRefused) {
  CmdResult check = RunCmd({"--check"});
  if (check.out.find("layer 2,") == std::string::npos) GTEST_SKIP() << "no layer 2 here";
  const std::string work = MakeTempDir("mounts-swap");
  const std::string outside = MakeTempDir("mounts-swap-outside");
  ASSERT_TRUE(std::filesystem::create_directories(work + "/a/out"));
  ASSERT_TRUE(std::filesystem::create_directories(outside + "/out"));
  const std::vector<std::string> writable = {work, work + "/a/out"};
  // Forked, not a death test: a re-exec'd death test would make (and leave) temp dirs of its own.
  auto mount = [&writable] {
    return RunProbe([] { return true; },
                    [&] { return static_cast<long>(MountWritableTrees(writable)); });
  };
  const ProbeResult control = mount();
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.value, 0) << "control";
  std::filesystem::rename(work + "/a", work + "/a.old");
  std::filesystem::create_directory_symlink(outside, work + "/a");
  const ProbeResult swapped = mount();
  ASSERT_TRUE(swapped.reported);
  EXPECT_EQ(swapped.value, 1);
}

// A hook planted the ways a tool can: in `hooks`, else in a fresh directory put in its place.
bool PlantHook(const std::string& hooks) {
  auto create = [&hooks] {
    const int fd =
        open((hooks + "/pre-commit").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (fd >= 0) close(fd);
    return fd >= 0;
  };
  if (create()) return true;
  return rename(hooks.c_str(), (hooks + ".moved").c_str()) == 0 &&
         mkdir(hooks.c_str(), 0755) == 0 && create();
}

// In new user and mount namespaces, as a layer-2 child does: mounts `work` writable, `hooks`
// read-only with `bind_hooks`, then plants a hook. 0: the mounts were made and the hook refused;
// 1: the git bind refused a link (ELOOP); 2: another failure; 3: no namespaces; 4: planted.
int PlantInBoundHooks(const std::string& work, const std::string& hooks, bool bind_hooks) {
  MountPlan plan = IdMapsOnly();
  plan.writable = {work};
  if (bind_hooks) plan.readonly = {hooks};
  plan.mount_proc = false;
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return 3;
  const char* step = "";
  if (WriteIdMapsRaw(plan, &step) != 0) return 3;
  if (const int err = SetUpMountsRaw(plan, &step); err != 0) {
    const std::string what = step;
    return err == ELOOP && what.find("git") != std::string::npos &&
                   what.find("no symbolic link") != std::string::npos
               ? 1
               : 2;
  }
  return PlantHook(hooks) ? 4 : 0;
}

// Git's trust surface is link-free when planned
// (PlanGitSurface.PlansALinkedHooksDirectoryAsItsTarget): a link in it when the mounts are made was
// planted since, by a tool running alongside. Bound by path, the bind followed it and protected
// where it leads, and the link itself, in the writable .git, could be replaced by a directory with
// a hook in it. Now the bind is refused. Controls: unbound, the hook is planted; bound and
// unswapped, it is refused.
TEST(SetUpMounts, AGitPathWithALinkInItIsRefused) {
  CmdResult check = RunCmd({"--check"});
  if (check.out.find("layer 2,") == std::string::npos) GTEST_SKIP() << "no layer 2 here";
  const std::string work = std::filesystem::canonical(MakeTempDir("mounts-git-swap")).string();
  const std::string hooks = work + "/.git/hooks";
  ASSERT_TRUE(std::filesystem::create_directories(hooks));
  ASSERT_TRUE(std::filesystem::create_directories(work + "/elsewhere"));
  // Forked, not a death test: a re-exec'd death test would make (and leave) temp dirs of its own.
  auto plant = [&](bool bind_hooks) {
    ProbeResult r =
        RunProbe([] { return true; },
                 [&] { return static_cast<long>(PlantInBoundHooks(work, hooks, bind_hooks)); });
    EXPECT_TRUE(r.reported);
    std::filesystem::remove(hooks + "/pre-commit");
    return r.value;
  };
  // Bound by path, the swapped link below got its target bound, and the link was replaced by a
  // directory with the hook in it: 4 (checked against that build).
  EXPECT_EQ(plant(false), 4) << "control: writable without the bind";
  EXPECT_EQ(plant(true), 0) << "control: read-only with it";
  std::filesystem::rename(hooks, work + "/.git/hooks.old");
  std::filesystem::create_directory_symlink(work + "/elsewhere", hooks);
  EXPECT_EQ(plant(true), 1);
  std::filesystem::remove(work + "/elsewhere");
  EXPECT_EQ(plant(true), 1) << "a dangling link";
}

// The page faults of writing `pages` pages this process had written before.
long FaultsRewriting(std::vector<char>& pages) {
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  for (size_t i = 0; i < pages.size(); i += 4096) pages[i] = static_cast<char>(pages[i] + 1);
  getrusage(RUSAGE_SELF, &after);
  return after.ru_minflt - before.ru_minflt;
}

// 0: the probe borrowed our memory (no page of ours was write-protected by a fork, so rewriting
// 256 pages takes no faults) and our non-dumpable setting held, across its id-map writes; 1: no
// layer 2 here; 2: faults; 3: dumpable. With `fork_control` a plain fork stands in for the probe:
// the same rewrite must fault.
int ProbeSharesMemory(bool fork_control) {
  std::vector<char> pages(256 * 4096, 1);
  (void)FaultsRewriting(pages);  // Present and written: no fault of their own is left.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return 3;
  if (fork_control) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, nullptr, 0);
  } else if (!Layer2Available()) {
    return 1;
  }
  if (FaultsRewriting(pages) > 64) return 2;
  return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : 3;
}

TEST(Layer2Probe, BorrowsTheCallersMemoryAndKeepsItNonDumpable) {
  if (!kCloneCanShareMemory) GTEST_SKIP() << "sanitizer builds copy the memory";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CmdResult check = RunCmd({"--check"});
  if (check.out.find("layer 2,") == std::string::npos) GTEST_SKIP() << "no layer 2 here";
  EXPECT_EXIT(_exit(ProbeSharesMemory(false)), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(_exit(ProbeSharesMemory(true)), ::testing::ExitedWithCode(2), "") << "control";
}

// What the agent sees after EnterAgentSandbox, reported from inside.
struct AgentFacts {
  int entered = 0;
  int dumpable = -1;
  int pid = 0;
  int layer = 0;
  int inet_socket_ok = 0;
  int unix_socket_ok = 0;
  int write_outside_errno = 0;
  int tool_exit = -1;
  int tool_socket_exit = -1;
  int tool_tmp_exit = -1;
  int tool_write_outside_exit = -1;  // A later call on the same handle (its shared ruleset).
  int killed = -1;
  char error[256] = {};
};

// Runs `script` with /bin/sh as a tool of `agent`, in the tool environment of `policy`: its exit
// code, -2 when it did not start, -3 when it could not be waited for.
int RunTool(const Sandbox& agent, const Policy& policy, const std::string& script) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.env = ToolEnvironment(policy, environ);
  options.new_session = true;
  Result<ChildProcess> child = agent.Spawn(std::move(options));
  if (!child.ok()) return -2;
  Result<int> status = child->Wait();
  return status.ok() ? ExitCodeFromWaitStatus(*status) : -3;
}

// Where CheckAgentSandbox's agent and its tools try to write and connect.
struct AgentPaths {
  std::string work;
  std::string outside;
  std::string tmp_probe;  // A path under /tmp.
  std::string shm_probe;  // A name under /dev/shm.
  uint16_t port = 0;      // A loopback port that accepts connections.
};

// EnterAgentSandbox in one step, or (`split`) prepared for namespaces the caller entered already.
Result<Sandbox> EnterForCheck(bool split, const Policy& policy, std::span<const int> keep) {
  if (!split) return EnterAgentSandbox(policy, keep);
  Result<PreparedAgentSandbox> prepared = PrepareAgentSandbox(policy, AgentLayer2::kEntered);
  return prepared.ok() ? EnterAgentSandbox(std::move(*prepared), keep) : prepared.status();
}

// What the agent in `agent` sees and what its tools (`policy`'s) can do, into `f`. Unconfined
// (the control) it leaves out what would stay behind on the host: /tmp and /dev/shm files and
// detached daemons (no subreaper would take them).
void ProbeInsideAgent(const Sandbox& agent, const Policy& policy, const AgentPaths& paths,
                      AgentFacts& f) {
  f.layer = agent.report().layer;
  f.dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  f.pid = getpid();
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  f.inet_socket_ok = s >= 0;
  int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  f.unix_socket_ok = u >= 0;
  int fd = open((paths.outside + "/f").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  f.write_outside_errno = fd < 0 ? errno : 0;
  auto run = [&](const std::string& script) { return RunTool(agent, policy, script); };
  f.tool_exit = run("exit 5");
  // bash, not sh: dash has no /dev/tcp, and would fail unconfined too.
  f.tool_socket_exit =
      run("exec /bin/bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(paths.port) + "'");
  f.tool_write_outside_exit = run("echo x > " + paths.outside + "/g");
  if (!policy.enabled) return;
  // Python multiprocessing needs both (SemLock, shared_memory, forkserver's socket dir).
  f.tool_tmp_exit = run("echo x > " + paths.tmp_probe + " && echo y > /dev/shm/" + paths.shm_probe);
  run("setsid sleep 100000 & (sleep 100000 &); exit 0");
  f.killed = KillAllDescendants();
}

// The forked agent of RunCheckedAgent: enters the sandbox (the one `settings` give), writes its
// AgentFacts to `facts_fd` and exits once `done_fd` reads EOF.
[[noreturn]] void RunAgentForCheck(bool split, const Settings& settings, const AgentPaths& paths,
                                   int facts_fd, int done_fd) {
  AgentFacts f;
  if (split && !EnterAgentNamespaces(settings).ok()) _exit(6);
  // Resolved, as forkbox-child does: the read scope is listed before the agent is confined.
  Result<Policy> resolved = ResolvePolicy(settings, paths.work);
  if (!resolved.ok()) _exit(5);
  Policy policy = *resolved;
  int keep[] = {facts_fd, done_fd};
  Result<Sandbox> report = EnterForCheck(split, policy, keep);
  f.entered = report.ok();
  if (!report.ok()) {
    snprintf(f.error, sizeof(f.error), "%s", report.status().ToString().c_str());
  }
  if (report.ok()) ProbeInsideAgent(*report, policy, paths, f);
  if (write(facts_fd, &f, sizeof(f)) != sizeof(f)) _exit(3);
  char c;
  if (read(done_fd, &c, 1) != 0) _exit(4);
  _exit(0);
}

// The waiter left behind in layer 2, seen from outside while the agent still runs.
struct WaiterView {
  std::string status;  // Its /proc/PID/status.
  std::ptrdiff_t fds = 0;
  std::error_code ec;  // Of listing its /proc/PID/fd.
};

WaiterView LookAtWaiter(pid_t pid) {
  WaiterView w;
  w.status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  w.fds = std::distance(
      std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", w.ec),
      std::filesystem::directory_iterator());
  return w;
}

// What an agent run reported, and its waiter (the forked process, seen while the agent ran).
struct AgentRun {
  AgentFacts facts;
  WaiterView waiter;
  int exit_code = -1;
  std::string error;  // The run itself failed.
};

// Forks an agent (RunAgentForCheck) and collects its facts.
AgentRun RunCheckedAgent(bool split, const Settings& settings, const AgentPaths& paths) {
  AgentRun run;
  int facts_pipe[2];
  int done_pipe[2];  // Closed by the test once it has looked at the waiter.
  if (pipe2(facts_pipe, O_CLOEXEC) != 0 || pipe2(done_pipe, O_CLOEXEC) != 0) {
    run.error = "pipe2";
    return run;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(facts_pipe[0]);
    close(done_pipe[1]);
    RunAgentForCheck(split, settings, paths, facts_pipe[1], done_pipe[0]);
  }
  close(facts_pipe[1]);
  close(done_pipe[0]);
  if (read(facts_pipe[0], &run.facts, sizeof(run.facts)) != sizeof(run.facts)) {
    run.error = "the agent reported nothing";
  }
  close(facts_pipe[0]);
  // In layer 2 the forked process stays behind as the waiter: it must be under no_new_privs and
  // seccomp before it waits (the agent is still running: it waits for done_pipe).
  run.waiter = LookAtWaiter(pid);
  close(done_pipe[1]);
  int status = 0;
  if (waitpid(pid, &status, 0) == pid) run.exit_code = ExitCodeFromWaitStatus(status);
  return run;
}

// Collects what failed, "" when nothing did.
class Failures {
 public:
  void Expect(bool ok, const std::string& what) {
    if (!ok) text_ += what + "; ";
  }
  std::string str() const { return text_; }

 private:
  std::string text_;
};

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The verdict on what a confined agent in `layer` reported and on its waiter.
std::string AgentSandboxedVerdict(const AgentRun& run, const AgentPaths& paths, int layer) {
  const AgentFacts& f = run.facts;
  if (!run.error.empty() || f.entered != 1) return run.error + " " + f.error;
  Failures out;
  out.Expect(run.exit_code == 0, "the agent exited " + std::to_string(run.exit_code));
  out.Expect(f.dumpable == 0, "the agent is dumpable");
  out.Expect(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 1, "control: its unconfined parent is not");
  out.Expect(f.layer == layer, "the agent is in layer " + std::to_string(f.layer));
  if (f.layer == 2) {
    out.Expect(f.pid == 1, "the agent is not init of its PID namespace");
    out.Expect(Has(run.waiter.status, "NoNewPrivs:\t1"), "waiter: " + run.waiter.status);
    out.Expect(Has(run.waiter.status, "Seccomp:\t2"), "waiter: no seccomp filter");
    out.Expect(Has(run.waiter.status, "CapEff:\t0000000000000000"), "waiter: capabilities");
    out.Expect(!run.waiter.ec, "waiter's fds: " + run.waiter.ec.message());
    out.Expect(run.waiter.fds == 0, "the waiter holds " + std::to_string(run.waiter.fds) + " fds");
  }
  out.Expect(f.inet_socket_ok == 1, "the agent cannot open an inet socket");
  // AF_UNIX in both layers: the tools' connect broker runs in the agent (PrepareAgent).
  out.Expect(f.unix_socket_ok == 1, "the agent cannot open a unix socket");
  out.Expect(f.write_outside_errno != 0 && !FileExists(paths.outside + "/f"),
             "the agent wrote outside its workdir");
  out.Expect(f.tool_write_outside_exit != 0 && !FileExists(paths.outside + "/g"),
             "the third tool call (the same ruleset) wrote outside");
  out.Expect(f.tool_exit == 5, "a tool's exit code: " + std::to_string(f.tool_exit));
  out.Expect(f.tool_socket_exit != 0, "a tool connected to a loopback port");
  out.Expect(f.killed >= 1, "no detached daemon killed");
  if (f.layer == 2) {
    out.Expect(f.tool_tmp_exit == 0, "a child's tools get no writable private /tmp, /dev/shm");
  } else {
    out.Expect(f.tool_tmp_exit != 0, "layer 1: a tool wrote the host's /tmp or /dev/shm");
  }
  out.Expect(!FileExists(paths.tmp_probe), "the tool's /tmp is not private");
  out.Expect(!FileExists("/dev/shm/" + paths.shm_probe), "the tool's /dev/shm is not private");
  return out.str();
}

// The control's verdict: unconfined (the sandbox off), the same agent and tools do what the
// confined ones may not.
std::string AgentUnconfinedVerdict(const AgentRun& run, const AgentPaths& paths) {
  const AgentFacts& f = run.facts;
  if (!run.error.empty() || f.entered != 1) return run.error + " " + f.error;
  Failures out;
  out.Expect(f.dumpable == 1, "unconfined, the agent is not dumpable");
  out.Expect(f.inet_socket_ok == 1 && f.unix_socket_ok == 1, "unconfined, a socket failed");
  out.Expect(f.write_outside_errno == 0 && FileExists(paths.outside + "/f"),
             "unconfined, the agent did not write outside");
  out.Expect(f.tool_write_outside_exit == 0 && FileExists(paths.outside + "/g"),
             "unconfined, a tool did not write outside");
  out.Expect(f.tool_exit == 5, "a tool's exit code: " + std::to_string(f.tool_exit));
  out.Expect(f.tool_socket_exit == 0, "unconfined, a tool did not connect to a loopback port");
  return out.str();
}

// Runs the agent of `settings` in fresh directories, with a loopback listener, and gives its
// run to `verdict`; removes the directories (also in a re-executed death test, which would
// leave them). The outside one is under /var/tmp: under /tmp, layer 2's private /tmp would hide
// it, and a write there would fail for want of the directory, not for the sandbox.
std::string CheckAgent(
    bool split, const Settings& settings,
    const std::function<std::string(const AgentRun&, const AgentPaths&)>& verdict) {
  const std::string token = std::to_string(getpid()) + "-" + std::to_string(time(nullptr));
  const testing::Listener listener;
  char outside[] = "/var/tmp/forkbox-agent-outside-XXXXXX";
  if (mkdtemp(outside) == nullptr) return std::string("mkdtemp: ") + strerror(errno);
  const AgentPaths paths{MakeTempDir("agent"), outside, "/tmp/forkbox-agent-tool-" + token,
                         "forkbox-agent-tool-" + token, listener.port};
  const std::string failed = verdict(RunCheckedAgent(split, settings, paths), paths);
  std::error_code ec;
  std::filesystem::remove_all(paths.work, ec);
  std::filesystem::remove_all(paths.outside, ec);
  return failed;
}

// The agent in `layer1` or layer 2 (`split`: as forkbox-child does when its parent verified
// layer 2: EnterAgentNamespaces first, before the policy is resolved, then
// PrepareAgentSandbox(kEntered) and EnterAgentSandbox). Both paths must end in the same state,
// the waiter's included.
std::string CheckAgentSandbox(bool split, bool layer1) {
  return CheckAgent(split, Settings{}, [layer1](const AgentRun& run, const AgentPaths& paths) {
    return AgentSandboxedVerdict(run, paths, layer1 ? 1 : 2);
  });
}

// The control: the sandbox off, the agent and its tools write outside and connect.
std::string CheckUnconfinedAgent() {
  Settings off;
  off.enabled = false;
  return CheckAgent(false, off, AgentUnconfinedVerdict);
}

// In each layer; then the same agent with the sandbox off, the control: it writes outside and
// its tool connects.
TEST(EnterAgentSandbox, SandboxesTheAgentAndStacksTheToolPolicy) {
  testing::InEachLayer([](bool layer1) { return CheckAgentSandbox(false, layer1); });
  EXPECT_EQ(CheckUnconfinedAgent(), "") << "the unconfined control";
}

TEST(EnterAgentSandbox, NamespacesEnteredFirstEndInTheSameState) {
  if (!Layer2Available()) GTEST_SKIP() << "layer 2 (user namespaces) is not available here";
  EXPECT_EQ(CheckAgentSandbox(true, false), "");
}

// What Prewarm made, counted from inside an agent (non-dumpable: its /proc/self/fd links are not
// readable there): open fds and threads before, after, and after a second call.
struct PrewarmFacts {
  int entered = 0;
  int fds_before = -1, fds_after = -1, fds_again = -1;
  int threads_before = -1, threads_after = -1, threads_again = -1;
  int inside_exit = -1, outside_exit = -1;
  char error[256] = {};
};

int CountOpenFds() {
  int n = 0;
  for (int fd = 0; fd < 1024; ++fd) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

int CountThreads() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

PrewarmFacts PrewarmInsideAgent(const std::string& work, const std::string& outside, int keep) {
  PrewarmFacts f;
  Result<Policy> policy = ResolvePolicy(Settings{}, work);
  if (!policy.ok()) return f;
  int keep_fds[] = {keep};
  Result<Sandbox> agent = EnterAgentSandbox(*policy, keep_fds);
  f.entered = agent.ok();
  if (!agent.ok()) {
    snprintf(f.error, sizeof(f.error), "%s", agent.status().ToString().c_str());
    return f;
  }
  f.fds_before = CountOpenFds();
  f.threads_before = CountThreads();
  Status warmed = agent->Prewarm();
  f.fds_after = CountOpenFds();
  f.threads_after = CountThreads();
  if (warmed.ok()) warmed = agent->Prewarm();
  if (!warmed.ok()) snprintf(f.error, sizeof(f.error), "%s", warmed.ToString().c_str());
  f.fds_again = CountOpenFds();
  f.threads_again = CountThreads();
  f.inside_exit = RunTool(*agent, *policy, "echo x > " + work + "/in");
  f.outside_exit = RunTool(*agent, *policy, "echo x > " + outside + "/out");
  return f;
}

// Prewarm makes the handle's tool ruleset and starts its broker's thread (its eventfd, its epoll)
// before any tool runs, once; the first tool then runs with the tool scope.
TEST(EnterAgentSandbox, PrewarmMakesTheToolRulesetAndBrokerBeforeTheFirstTool) {
  std::string work = MakeTempDir("prewarm");
  std::string outside = MakeTempDir("prewarm-outside");
  int facts_pipe[2];
  ASSERT_EQ(pipe2(facts_pipe, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(facts_pipe[0]);
    PrewarmFacts f = PrewarmInsideAgent(work, outside, facts_pipe[1]);
    _exit(write(facts_pipe[1], &f, sizeof(f)) == sizeof(f) ? 0 : 4);
  }
  close(facts_pipe[1]);
  PrewarmFacts f;
  ASSERT_EQ(read(facts_pipe[0], &f, sizeof(f)), static_cast<ssize_t>(sizeof(f)));
  close(facts_pipe[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_EQ(f.entered, 1) << f.error;
  EXPECT_EQ(f.error[0], '\0') << f.error;
  EXPECT_EQ(f.fds_after, f.fds_before + 3)
      << "the tool ruleset, the broker's eventfd and its listeners' epoll";
  EXPECT_EQ(f.threads_after, f.threads_before + 1) << "the broker's thread";
  EXPECT_EQ(f.fds_again, f.fds_after) << "a second Prewarm makes nothing";
  EXPECT_EQ(f.threads_again, f.threads_after);
  EXPECT_EQ(f.inside_exit, 0);
  EXPECT_EQ(ReadFile(work + "/in"), "x\n");
  EXPECT_NE(f.outside_exit, 0);
  EXPECT_FALSE(FileExists(outside + "/out")) << "the first tool after Prewarm is confined";
}

using testing::BecomeAgent;
using testing::InEachLayer;

// A child forks a grandchild and exits; once the child is reaped the grandchild reports its
// parent: 1 when that is us, 0 when the orphan went elsewhere, -1 on an error.
long AnOrphanComesToUs() {
  int go[2], report[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) return -1;
  const pid_t middle = fork();
  if (middle == 0) {
    if (fork() == 0) {
      char c;
      if (read(go[0], &c, 1) != 1) _exit(1);
      const pid_t parent = getppid();
      _exit(write(report[1], &parent, sizeof(parent)) == sizeof(parent) ? 0 : 1);
    }
    _exit(0);
  }
  if (middle < 0 || waitpid(middle, nullptr, 0) != middle || write(go[1], "g", 1) != 1) return -1;
  close(report[1]);
  pid_t parent = -1;
  const bool read_ok = read(report[0], &parent, sizeof(parent)) == sizeof(parent);
  if (read_ok && parent == getpid()) waitpid(-1, nullptr, 0);  // The orphan is ours to reap.
  return read_ok ? parent == getpid() : -1;
}

// The agent is a subreaper (layer 1) or its PID namespace's init (layer 2): what a tool detaches
// comes to it, to be killed when the task ends. Control: an unconfined process is neither.
TEST(EnterAgentSandbox, TheAgentGetsTheOrphansOfWhatItRuns) {
  InEachLayer([](bool layer1) -> std::string {
    const ScopedTempDir work("agent-subreaper");
    Result<Policy> policy = ResolvePolicy(Settings{}, work.path());
    if (!policy.ok()) return policy.status().ToString();
    const Policy* confined = &*policy;
    ProbeResult r = testing::RunProbeKeeping(
        [confined, layer1](int fd) { return BecomeAgent(confined, layer1, fd); },
        AnOrphanComesToUs);
    if (!r.reported) return "no agent, exit " + std::to_string(r.exit_code);
    return r.value == 1 ? "" : "an orphan went past the agent: " + std::to_string(r.value);
  });
  ProbeResult control = testing::RunProbeKeeping(
      [](int fd) { return BecomeAgent(nullptr, false, fd); }, AnOrphanComesToUs);
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.value, 0) << "unconfined, the orphan goes elsewhere";
}

// Between the test and an agent, a process that is SIGKILLed. Returns our end of a socket the
// agent answers pings on until it dies, once the agent said it was ready (-1: it never did).
UniqueFd AgentBelowADeadParent(const Policy* policy, bool layer1) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return UniqueFd();
  const pid_t parent = fork();
  if (parent == 0) {
    if (fork() == 0) {
      close(sv[0]);
      if (!BecomeAgent(policy, layer1, sv[1]) || write(sv[1], "r", 1) != 1) _exit(1);
      for (char c; read(sv[1], &c, 1) == 1;) (void)!write(sv[1], &c, 1);
      _exit(0);  // The test closed its end.
    }
    close(sv[0]);
    close(sv[1]);
    for (;;) pause();  // Until the test kills it.
  }
  close(sv[1]);
  UniqueFd ours(sv[0]);
  pollfd ready{ours.get(), POLLIN, 0};
  char c = 0;
  const bool up = poll(&ready, 1, 10000) == 1 && read(ours.get(), &c, 1) == 1 && c == 'r';
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  return up ? std::move(ours) : UniqueFd();
}

// Whether the agent's end closed (it died) within 10 s. It sends nothing unasked.
bool DiesSoon(int fd) {
  pollfd end{fd, POLLIN, 0};
  char c = 0;
  return poll(&end, 1, 10000) == 1 && read(fd, &c, 1) == 0;
}

// Whether it still answers a ping, within 10 s.
bool AnswersPing(int fd) {
  if (send(fd, "p", 1, MSG_NOSIGNAL) != 1) return false;
  pollfd answer{fd, POLLIN, 0};
  char c = 0;
  return poll(&answer, 1, 10000) == 1 && read(fd, &c, 1) == 1 && c == 'p';
}

// The agent dies with its parent (PDEATHSIG; in layer 2 through its waiter, which has it too).
// Control: an unconfined process below the same dead parent still answers.
TEST(EnterAgentSandbox, TheAgentDiesWithItsParent) {
  InEachLayer([](bool layer1) -> std::string {
    const ScopedTempDir work("agent-pdeathsig");
    Result<Policy> policy = ResolvePolicy(Settings{}, work.path());
    if (!policy.ok()) return policy.status().ToString();
    UniqueFd agent = AgentBelowADeadParent(&*policy, layer1);
    if (!agent) return "the agent never got ready";
    return DiesSoon(agent.get()) ? "" : "the agent outlived its parent";
  });
  UniqueFd control = AgentBelowADeadParent(nullptr, false);
  ASSERT_TRUE(control);
  EXPECT_TRUE(AnswersPing(control.get())) << "unconfined, it outlives its parent";
}

}  // namespace
}  // namespace forkbox::sandbox
