// Sandbox::Spawn, EnterAgentSandbox and KillAllDescendants, checked from outside the sandbox.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
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
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/cgroup.h"
#include "sandbox/check.h"
#include "sandbox/contain.h"
#include "sandbox/git_surface.h"
#include "sandbox/hygiene.h"
#include "sandbox/namespaces.h"
#include "sandbox/sandbox.h"
#include "tests/bench/proc_probe.h"
#include "tests/sandbox/agent_layers.h"
#include "tests/sandbox/probe_util.h"

extern char** environ;

namespace forkbox::sandbox {
namespace {

using testing::FileExists;
using testing::kNoUserGitConfig;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::SpawnSandboxed;

Policy MakePolicy(const std::string& workdir) {
  Policy policy;
  policy.workdir = workdir;
  return policy;
}

struct RunOutput {
  int exit_code = -1;
  std::string out;
};

// Reads until EOF; a guard (not a synchronisation) turns a hang into a failure.
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 60'000) <= 0) {
      ADD_FAILURE() << "no EOF within 60 s";
      break;
    }
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Result<RunOutput> RunSandboxed(const Policy& policy, const std::string& script) {
  Result<Pipe> out = MakePipe();
  if (!out.ok()) return out.status();
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.env = ToolEnvironment(policy, environ);
  options.fds = {{out->write.get(), 1}};
  options.new_session = true;
  Result<ChildProcess> child = SpawnSandboxed(policy, std::move(options));
  if (!child.ok()) return child.status();
  out->write.reset();
  RunOutput run;
  run.out = ReadAll(out->read.get());
  Result<int> status = child->Wait();
  if (!status.ok()) return status.status();
  run.exit_code = ExitCodeFromWaitStatus(*status);
  return run;
}

// A handle builds the tool ruleset once where its commands share its mount namespace (inside an
// agent, layer 1); a command that gets its own namespace builds its own (fresh tmpfs inodes).
TEST(ToolRuleset, SharedOnlyWhereCommandsGetNoMountNamespaceOfTheirOwn) {
  int abi = 0;
  ASSERT_TRUE(CheckEnforceable(&abi).ok());
  Policy policy = MakePolicy(MakeTempDir("shared-ruleset"));
  Result<UniqueFd> own = ToolRuleset(policy, abi, /*layer2=*/true, /*inside_agent=*/false);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_FALSE(*own) << "layer 2 from an unsandboxed caller: one ruleset per command";
  Result<UniqueFd> shared = ToolRuleset(policy, abi, /*layer2=*/false, /*inside_agent=*/false);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  ASSERT_TRUE(*shared);
  const std::vector<std::string> argv = {"/bin/true"};
  Result<ContainPlan> reused = PrepareTool(policy, abi, false, false, argv, -1, shared->get());
  ASSERT_TRUE(reused.ok()) << reused.status().ToString();
  EXPECT_EQ(reused->ruleset_fd, shared->get());
  EXPECT_FALSE(reused->ruleset) << "a shared ruleset is used, not owned";
  EXPECT_FALSE(reused->add_fresh_rules) << "the shared ruleset has them already";
  // Control: a command with its own namespaces never gets the shared ruleset.
  Result<ContainPlan> fresh = PrepareTool(policy, abi, true, false, argv, -1, shared->get());
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_NE(fresh->ruleset_fd, shared->get());
  EXPECT_TRUE(fresh->add_fresh_rules);
}

// A layer-2 command's ruleset is filled by the spawner while the namespaces are set up: the plan
// holds it empty with its spec, and the fill says on the eventfd whether it succeeded (1) or not.
TEST(ToolRuleset, Layer2RulesetIsFilledWhileTheCommandStarts) {
  int abi = 0;
  ASSERT_TRUE(CheckEnforceable(&abi).ok());
  Policy policy = MakePolicy(MakeTempDir("pending-ruleset"));
  const std::vector<std::string> argv = {"/bin/true"};
  for (const bool fails : {false, true}) {
    Result<ContainPlan> plan = PrepareTool(policy, abi, /*layer2=*/true, false, argv, -1);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_TRUE(plan->pending_rules.has_value());
    ASSERT_GE(plan->ruleset_ready_fd, 0);
    if (fails) plan->pending_rules->writable.push_back("/nonexistent-forkbox-writable");
    Status filled = FillPendingRuleset(*plan);
    EXPECT_EQ(filled.ok(), !fails) << filled.ToString();
    if (fails) {
      EXPECT_NE(filled.message().find("landlock_add_rule(/nonexistent-forkbox-writable, write)"),
                std::string::npos)
          << filled.ToString();
    }
    uint64_t said = 0;
    ASSERT_EQ(read(plan->ruleset_ready_fd, &said, sizeof said), 8);
    EXPECT_EQ(said, fails ? 2u : 1u);
    EXPECT_FALSE(plan->pending_rules.has_value());
  }
  // Control: layer 1 builds the whole ruleset before the spawn; nothing is pending.
  Result<ContainPlan> layer1 = PrepareTool(policy, abi, /*layer2=*/false, false, argv, -1);
  ASSERT_TRUE(layer1.ok()) << layer1.status().ToString();
  EXPECT_FALSE(layer1->pending_rules.has_value());
  EXPECT_LT(layer1->ruleset_ready_fd, 0);
}

// A spawn that must be refused with `why` in its error (`refused`), or must run /bin/true to exit
// 0.
void ExpectRefusedOrRuns(Result<ChildProcess>& child, bool refused, const std::string& why) {
  if (refused) {
    ASSERT_FALSE(child.ok()) << "ran, though it must stop at: " << why;
    EXPECT_NE(child.status().message().find(why), std::string::npos) << child.status().ToString();
    return;
  }
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0) << "the control runs";
}

// The command waits for the fill and refuses a ruleset its spawner could not fill: the spawn
// fails with that step, whatever the hook itself returned. Control: the same plan filled
// normally runs the command.
TEST(ToolRuleset, CommandRefusesARulesetItsSpawnerCouldNotFill) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  int abi = 0;
  ASSERT_TRUE(CheckEnforceable(&abi).ok());
  Policy policy = MakePolicy(MakeTempDir("unfilled-ruleset"));
  for (const bool fails : {true, false}) {
    Result<ContainPlan> plan = PrepareTool(policy, abi, /*layer2=*/true, false, {"/bin/true"}, -1);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    if (fails) plan->pending_rules->writable.push_back("/nonexistent-forkbox-writable");
    SpawnOptions options;
    options.argv = {"/bin/true"};
    options.cwd = policy.workdir;
    ASSERT_TRUE(AddContainStep(*plan, options).ok());
    // The failure is told to the command but not returned here: the command must refuse it.
    options.while_starting = [&](pid_t) {
      (void)FillPendingRuleset(*plan);
      return Status::Ok();
    };
    Result<ChildProcess> child = Spawn(options);
    ExpectRefusedOrRuns(child, fails,
                        "waiting for the spawner to fill the tool's Landlock ruleset");
  }
}

// A spawner killed during the fill (SIGKILL, the OOM killer) never writes the eventfd: the command
// must see its pidfd and give up, or it waits forever and its init with it, stuck in the vfork
// wait for the command's exec. The spawner is stood in for by a holder process that exits in the
// hook; a watchdog says "failed" after 30 s so that the old code fails the test rather than hangs
// it. Control: the same plan with a live holder waits for the fill and runs the command.
TEST(ToolRuleset, CommandGivesUpWhenItsSpawnerDiesBeforeTheFill) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  int abi = 0;
  ASSERT_TRUE(CheckEnforceable(&abi).ok());
  Policy policy = MakePolicy(MakeTempDir("spawner-dies-in-fill"));
  for (const bool dies : {true, false}) {
    SpawnOptions holds;
    holds.argv = {"/bin/sleep", "600"};
    Result<ChildProcess> holder = Spawn(holds);
    ASSERT_TRUE(holder.ok()) << holder.status().ToString();
    Result<ContainPlan> plan = PrepareTool(policy, abi, /*layer2=*/true, false, {"/bin/true"}, -1);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    SpawnOptions options;
    options.argv = {"/bin/true"};
    options.cwd = policy.workdir;
    ASSERT_TRUE(AddContainStep(*plan, options).ok());
    plan->spawner_pidfd = holder->pidfd();
    std::mutex mu;
    std::condition_variable done_cv;
    bool done = false;
    std::thread watchdog;
    options.while_starting = [&](pid_t init) {
      if (!dies) return FillPendingRuleset(*plan);
      // Past the init's own look at the spawner: it has cloned the command, which waits.
      const std::string children =
          "/proc/" + std::to_string(init) + "/task/" + std::to_string(init) + "/children";
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (ReadFile(children).empty() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      EXPECT_FALSE(ReadFile(children).empty()) << "the init cloned no command";
      EXPECT_TRUE(holder->Signal(SIGKILL).ok());  // The spawner is gone, the ruleset unfilled.
      pollfd gone{holder->pidfd(), POLLIN, 0};
      EXPECT_EQ(poll(&gone, 1, 60'000), 1);
      watchdog = std::thread([&] {
        std::unique_lock<std::mutex> lock(mu);
        if (done_cv.wait_for(lock, std::chrono::seconds(30), [&] { return done; })) return;
        const uint64_t failed = 2;
        EXPECT_EQ(write(plan->ruleset_ready.get(), &failed, sizeof failed), 8);
        ADD_FAILURE() << "the command still waited 30 s after its spawner died";
      });
      return Status::Ok();
    };
    Result<ChildProcess> child = Spawn(options);
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    done_cv.notify_all();
    if (watchdog.joinable()) watchdog.join();
    ExpectRefusedOrRuns(child, dies,
                        "the spawner exited before it filled the tool's Landlock ruleset");
  }
}

// A command's keeper (layer 2's namespace init, layer 1's keeper of a `forkbox sandbox` command)
// dies with its spawner through PDEATHSIG, which a spawner that died before the prctl never
// sends: the keeper then checks the spawner's pidfd and refuses to go on (ESRCH), so no command
// runs without the process that would kill it. The dead spawner is stood in for by the pidfd of
// an exited child. Control: the same plan with the live spawner runs the command.
TEST(ContainPlan, AKeeperWhoseSpawnerAlreadyExitedRunsNothing) {
  int abi = 0;
  ASSERT_TRUE(CheckEnforceable(&abi).ok());
  const std::string work = MakeTempDir("dead-spawner");
  const Policy policy = MakePolicy(work);
  SpawnOptions exits;
  exits.argv = {"/bin/true"};
  Result<ChildProcess> gone = Spawn(exits);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  pollfd exited{gone->pidfd(), POLLIN, 0};
  ASSERT_EQ(poll(&exited, 1, 60'000), 1);  // Exited, not yet reaped: its pidfd polls readable.
  for (const bool layer2 : {true, false}) {
    if (layer2 && !Layer2Available()) continue;
    for (const bool dead : {true, false}) {
      const std::string mark = work + "/ran-" + std::to_string(layer2) + std::to_string(dead);
      const std::vector<std::string> argv = {"/bin/sh", "-c", "echo > " + mark};
      Result<ContainPlan> plan = PrepareTool(policy, abi, layer2, false, argv, -1);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      if (!layer2) plan->layer1_keeper = true;
      SpawnOptions options;
      options.argv = argv;
      options.cwd = work;
      ASSERT_TRUE(AddContainStep(*plan, options).ok());
      if (dead) plan->spawner_pidfd = gone->pidfd();
      Result<ChildProcess> child = Spawn(options);
      const std::string where = layer2 ? "layer 2" : "layer 1";
      if (dead) {
        ASSERT_FALSE(child.ok()) << where << ": ran with its spawner gone";
        EXPECT_NE(child.status().message().find("the spawner already exited"), std::string::npos)
            << where << ": " << child.status().ToString();
        EXPECT_FALSE(FileExists(mark)) << where;
        continue;
      }
      ASSERT_TRUE(child.ok()) << where << ": " << child.status().ToString();
      Result<int> status = child->Wait();
      ASSERT_TRUE(status.ok());
      EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0) << where;
      EXPECT_TRUE(FileExists(mark)) << where << ": the control ran";
    }
  }
}

// A tool can replace `<workdir>/.forkbox-tmp` with a symbolic link out of the workdir before a
// later command's (or task's) sandbox is built. The temp dir inside the workdir is then no rule of
// its own, so the link grants nothing: the ruleset a layer-1 command restricts itself with refuses
// a write through it. Control: the same write unrestricted reaches the outside directory.
TEST(ToolRuleset, ATempDirRedirectedOutOfTheWorkdirGrantsNoWrite) {
  int abi = 0;
  ASSERT_TRUE(CheckEnforceable(&abi).ok());
  const std::string work = MakeTempDir("tmp-redirect-work");
  const std::string outside = MakeTempDir("tmp-redirect-outside");
  ASSERT_EQ(mkdir((outside + "/task-x").c_str(), 0700), 0);
  ASSERT_EQ(symlink(outside.c_str(), (work + "/.forkbox-tmp").c_str()), 0);
  Policy policy = MakePolicy(work);
  policy.tmpdir = work + "/.forkbox-tmp/task-x";
  const std::vector<std::string> trees = WritableTrees(policy);
  EXPECT_EQ(std::count(trees.begin(), trees.end(), policy.tmpdir), 0);
  Result<UniqueFd> ruleset = ToolRuleset(policy, abi, /*layer2=*/false, /*inside_agent=*/false);
  ASSERT_TRUE(ruleset.ok()) << ruleset.status().ToString();
  ASSERT_TRUE(*ruleset);
  // 0: written, 1: refused, 2: could not restrict.
  auto write_through_link = [&](bool restrict) {
    pid_t pid = fork();
    if (pid == 0) {
      if (restrict && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
                       syscall(SYS_landlock_restrict_self, ruleset->get(), 0) != 0)) {
        _exit(2);
      }
      int fd = open((policy.tmpdir + "/planted").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      _exit(fd >= 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  ASSERT_EQ(write_through_link(false), 0) << "CONTROL: unrestricted, the link leads outside";
  ASSERT_EQ(unlink((outside + "/task-x/planted").c_str()), 0);
  EXPECT_EQ(write_through_link(true), 1) << "the redirected temp dir was writable";
  EXPECT_FALSE(std::filesystem::exists(outside + "/task-x/planted"));
}

// PersistentWritableTrees lists exactly the host directories a layer-1 tool can create a file in,
// probed with the layer-1 tool ruleset: what forkbox refuses to run from (forkbox-child) follows
// the rules, so a shared writable directory added to them without the list fails here. Control:
// unrestricted, every candidate is writable. Layer 2 (private /tmp and /dev/shm) lists the trees.
TEST(PersistentWritableTrees, ListsWhatALayer1ToolCanWrite) {
  int abi = 0;
  ASSERT_TRUE(CheckEnforceable(&abi).ok());
  Policy policy = MakePolicy(MakeTempDir("persistent-work"));
  policy.writable = {MakeTempDir("persistent-writable")};
  const std::string outside = MakeTempDir("persistent-outside");
  const std::vector<std::string> layer1 = PersistentWritableTrees(policy, 1);
  EXPECT_EQ(PersistentWritableTrees(policy, 2), WritableTrees(policy));
  Result<UniqueFd> ruleset = ToolRuleset(policy, abi, /*layer2=*/false, /*inside_agent=*/false);
  ASSERT_TRUE(ruleset.ok()) << ruleset.status().ToString();
  ASSERT_TRUE(*ruleset);
  // 0: created (and removed), 1: refused, 2: could not restrict.
  auto create_in = [&](const std::string& dir, bool restrict) {
    const std::string probe = dir + "/forkbox-persistent-" + std::to_string(getpid());
    pid_t pid = fork();
    if (pid == 0) {
      if (restrict && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
                       syscall(SYS_landlock_restrict_self, ruleset->get(), 0) != 0)) {
        _exit(2);
      }
      int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      _exit(fd >= 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 0) unlink(probe.c_str());  // Ours (O_EXCL): never a file someone else made.
    return code;
  };
  for (const char* dir : {"/dev/shm", "/tmp", "/var/tmp"}) {
    if (!std::filesystem::is_directory(dir)) continue;
    const std::string real = std::filesystem::canonical(dir).string();
    ASSERT_EQ(create_in(real, false), 0) << "CONTROL: " << real;
    const bool listed = std::count(layer1.begin(), layer1.end(), real) == 1;
    EXPECT_EQ(create_in(real, true) == 0, listed) << real;
  }
  for (const std::string& tree : {policy.workdir, policy.writable[0], outside}) {
    ASSERT_EQ(create_in(tree, false), 0) << "CONTROL: " << tree;
    const bool listed = std::count(layer1.begin(), layer1.end(), tree) == 1;
    EXPECT_EQ(create_in(tree, true) == 0, listed) << tree;
  }
  EXPECT_EQ(std::count(layer1.begin(), layer1.end(), outside), 0);
}

// A tool's layer-2 init exists only as Spawn's keeper step (AddContainStep): run in-process,
// the pipeline refuses that plan before its first step, so no command goes on without an init.
TEST(ContainRaw, RefusesAToolsLayer2PlanOutsideSpawn) {
  ContainPlan plan;
  plan.keeper = Keeper::kInit;
  plan.layer2 = true;
  const char* step = "";
  EXPECT_EQ(ContainRaw(plan, &step), EINVAL);
  EXPECT_STREQ(step, "a tool's namespace init is Spawn's keeper step (AddContainStep)");
}

// The parent confines itself from the report it checked once (parent.cc): an unenforceable one
// is refused before anything changes. The control: the same call with the report as checked
// confines the (forked) process.
TEST(EnterLauncherSandbox, RefusesAReportThatIsNotEnforceable) {
  Policy policy = MakePolicy(MakeTempDir("launcher-report"));
  const Report checked = Check(policy);
  ASSERT_TRUE(checked.enforceable) << checked.Banner();
  for (const bool enforceable : {false, true}) {
    Report report = checked;
    report.enforceable = enforceable;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      bool before_entering_ran = false;
      Result<Sandbox> r = EnterLauncherSandbox(policy, report, {}, [&before_entering_ran] {
        before_entering_ran = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 0;  // Still unconfined.
        return Status::Ok();
      });
      const bool nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
      if (enforceable) _exit(r.ok() && nnp && before_entering_ran ? 0 : 1);
      _exit(!r.ok() && r.status().code() == Status::Code::kUnavailable && !nnp &&
                    !before_entering_ran
                ? 0
                : 2);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "enforceable=" << enforceable << " status " << status;
  }
}

// The caller's last unconfined step (the parent finishes its spawner's start there) fails the
// entry before anything changes: no no_new_privs, no Landlock domain. The control, the same call
// with a step that succeeds, confines the (forked) process.
TEST(EnterLauncherSandbox, AFailingBeforeEnteringStepLeavesTheProcessUnconfined) {
  Policy policy = MakePolicy(MakeTempDir("launcher-before"));
  const Report report = Check(policy);
  ASSERT_TRUE(report.enforceable) << report.Banner();
  for (const bool fail : {true, false}) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Result<Sandbox> r = EnterLauncherSandbox(policy, report, {}, [fail] {
        return fail ? Status::Internal("the spawner did not start") : Status::Ok();
      });
      const bool nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
      if (!fail) _exit(r.ok() && nnp ? 0 : 1);
      _exit(!r.ok() && r.status().message() == "the spawner did not start" && !nnp ? 0 : 2);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "fail=" << fail << " status " << status;
  }
}

TEST(SpawnSandboxed, PassesTheExitStatusThrough) {
  Policy policy = MakePolicy(MakeTempDir("spawn-exit"));
  Result<RunOutput> r = RunSandboxed(policy, "exit 7");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 7);
  Result<RunOutput> killed = RunSandboxed(policy, "kill -TERM $$");
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->exit_code, 128 + SIGTERM);
  Result<RunOutput> echo = RunSandboxed(policy, "echo hello; pwd");
  ASSERT_TRUE(echo.ok());
  EXPECT_EQ(echo->out, "hello\n" + policy.workdir + "\n");
}

// As root in layer 2 the mount plan hides every listening pathname socket outside the trees. One
// in another user's 0700 directory cannot even be reached by the namespace's root (its owner is
// not mapped there), and it used to fail every spawn: "bind /dev/null over a credential file:
// Permission denied". The command runs, and cannot reach that socket either.
TEST(SpawnSandboxed, AnotherUsersPrivateSocketDoesNotBreakLayer2) {
  if (geteuid() != 0 || !Layer2Available()) GTEST_SKIP() << "needs root and layer 2";
  // Under /var/tmp (world-searchable, outside every tree), as another user's directory would be.
  char tmpl[] = "/var/tmp/fbx-private-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);  // mkdtemp made it 0700.
  const std::string sock = dir + "/agent.sock";
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  pid_t owner = fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    close(ready[0]);
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 1) != 0) {
      _exit(2);
    }
    if (write(ready[1], "r", 1) != 1) _exit(3);
    for (;;) pause();  // Listening until killed.
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the other user's listener did not start";
  close(ready[0]);
  Policy policy = MakePolicy(MakeTempDir("spawn-private-socket-work"));
  Result<RunOutput> r = RunSandboxed(policy, "echo ran; test -e '" + sock + "' || echo unseen");
  kill(owner, SIGKILL);
  waitpid(owner, nullptr, 0);
  unlink(sock.c_str());
  rmdir(dir.c_str());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "ran\nunseen\n");
}

TEST(SpawnSandboxed, ReportsExecFailuresAndBadOptionsAsStatus) {
  Policy policy = MakePolicy(MakeTempDir("spawn-bad"));
  SpawnOptions missing;
  missing.argv = {"/nonexistent/forkbox-binary"};
  Result<ChildProcess> r = SpawnSandboxed(policy, missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_NE(r.status().message().find("execve"), std::string::npos) << r.status().message();
  SpawnOptions with_step;
  with_step.argv = {"/bin/true"};
  with_step.steps.push_back({"mine", [](const char**) { return 0; }});
  EXPECT_EQ(SpawnSandboxed(policy, with_step).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(SpawnSandboxed(policy, SpawnOptions{}).status().code(), Status::Code::kInvalidArgument);
  // What to undo for a dead caller is undone in a copy of the caller's memory: only a ForCommand
  // caller, which spawns from its one thread, may hand it (a ForTools handle spawns from its
  // broker's thread).
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(policy.workdir, kNoUserGitConfig);
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  Result<Sandbox> tools = Sandbox::ForTools(policy);
  ASSERT_TRUE(tools.ok()) << tools.status().ToString();
  SpawnOptions plain;
  plain.argv = {"/bin/true"};
  const Sandbox::AfterCommand after{&*guard, nullptr};
  Result<ChildProcess> refused = tools->Spawn(plain, nullptr, &after);
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("needs a ForCommand handle"), std::string::npos)
      << refused.status().message();
}

TEST(SpawnSandboxed, ConfinesWritesToTheWorkdir) {
  std::string work = MakeTempDir("spawn-work");
  std::string outside = MakeTempDir("spawn-outside");
  std::ofstream(outside + "/existing") << "original";
  Result<RunOutput> r = RunSandboxed(
      MakePolicy(work), "echo in > inside; echo x > " + outside + "/new; echo x > " + outside +
                            "/existing; rm -f " + outside + "/existing; echo done");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "done\n");
  EXPECT_EQ(ReadFile(work + "/inside"), "in\n");
  EXPECT_FALSE(FileExists(outside + "/new"));
  EXPECT_EQ(ReadFile(outside + "/existing"), "original");
}

TEST(SpawnSandboxed, TheCommandRunsWithEveryProtection) {
  Result<RunOutput> r = RunSandboxed(MakePolicy(MakeTempDir("spawn-status")),
                                     "grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd|CapPrm):' "
                                     "/proc/self/status | tr -d ' \\t'");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->out.find("NoNewPrivs:1"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("Seccomp:2"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("CapEff:0000000000000000"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("CapPrm:0000000000000000"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("CapBnd:0000000000000000"), std::string::npos) << r->out;
}

// A process's parent, process group and session from its /proc stat, seen from this PID
// namespace whatever namespace it is in; all 0 if it cannot be read.
struct ProcIds {
  pid_t ppid = 0;
  pid_t pgrp = 0;
  pid_t session = 0;
};

ProcIds IdsOf(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t name_end = stat.rfind(')');  // The command name may hold blanks and parentheses.
  if (name_end == std::string::npos) return {};
  std::istringstream fields(stat.substr(name_end + 1));
  char state = 0;
  ProcIds ids;
  fields >> state >> ids.ppid >> ids.pgrp >> ids.session;
  return fields ? ids : ProcIds{};
}

// The live children of `pid`, by a walk of /proc (this kernel may lack .../task/N/children).
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t candidate = static_cast<pid_t>(std::stoi(name));
    if (IdsOf(candidate).ppid == pid) children.push_back(candidate);
  }
  return children;
}

// Where a command spawned as a tool is, seen while it runs.
struct CommandGroup {
  pid_t spawned = 0;  // What Spawn returned: the bash tool kills its group (-pid).
  ProcIds command;  // The command's ids: the spawned process's in layer 1, its child's in layer 2.
  int layer = 0;
  std::string error;
};

// Spawns `sh` through `sandbox` as the bash tool does (new_session as asked) and looks at its
// process group and session while it waits for its stdin; then lets it end.
CommandGroup LookAtACommandsGroup(const Sandbox& sandbox, const Policy& policy, bool new_session) {
  CommandGroup g;
  Result<Pipe> in = MakePipe();
  Result<Pipe> out = MakePipe();
  if (!in.ok() || !out.ok()) {
    g.error = "pipe";
    return g;
  }
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "echo r; read x"};
  options.env = ToolEnvironment(policy, environ);
  options.fds = {{in->read.get(), 0}, {out->write.get(), 1}};
  options.new_session = new_session;
  Result<ChildProcess> child = sandbox.Spawn(std::move(options));
  in->read.reset();
  out->write.reset();
  if (!child.ok()) {
    g.error = child.status().ToString();
    return g;
  }
  g.spawned = child->pid();
  g.layer = sandbox.report().layer;
  char c = 0;
  if (read(out->read.get(), &c, 1) != 1 || c != 'r') {
    g.error = "the command never ran";
  } else if (g.layer == 2) {  // The spawned process is the namespace init, the command its child.
    const std::vector<pid_t> children = ChildrenOf(g.spawned);
    if (children.size() == 1) g.command = IdsOf(children[0]);
    if (children.size() != 1) g.error = std::to_string(children.size()) + " children of the init";
  } else {
    g.command = IdsOf(g.spawned);
  }
  in->write.reset();  // EOF: `read` returns and the command ends.
  if (!child->Wait().ok()) g.error += " (not reaped)";
  return g;
}

// What failed of "the command leads its own session and process group" in `layer1` or layer 2,
// with the same spawn without new_session as the control: "" when nothing did. Removes its
// workdir itself: a re-executed death test would leave it.
std::string CheckEachCommandHasItsOwnGroup(bool layer1) {
  const Policy policy = MakePolicy(MakeTempDir("spawn-session"));
  Result<Sandbox> sandbox = Sandbox::ForTools(policy);
  if (!sandbox.ok()) return sandbox.status().ToString();
  const CommandGroup own = LookAtACommandsGroup(*sandbox, policy, true);
  const CommandGroup control = LookAtACommandsGroup(*sandbox, policy, false);
  std::error_code ec;
  std::filesystem::remove_all(policy.workdir, ec);
  if (!own.error.empty() || !control.error.empty()) return own.error + "; " + control.error;
  std::ostringstream failed;
  if (own.layer != (layer1 ? 1 : 2)) failed << "ran in layer " << own.layer << "; ";
  if (own.command.session != own.spawned || own.command.pgrp != own.spawned) {
    failed << "the command's session " << own.command.session << " and group " << own.command.pgrp
           << " are not the spawned " << own.spawned << "'s; ";
  }
  if (own.command.session == getsid(0) || own.command.pgrp == getpgrp()) {
    failed << "the command shares its spawner's session or group; ";
  }
  if (control.command.session != getsid(0) || control.command.pgrp != getpgrp()) {
    failed << "control: without new_session the command has session " << control.command.session
           << " and group " << control.command.pgrp << ", not its spawner's " << getsid(0)
           << " and " << getpgrp() << "; ";
  }
  return failed.str();
}

// Each tool command leads its own session and process group (the bash tool kills that group when
// a command times out or is cancelled), never its spawner's, in each layer: in layer 2 through its
// namespace init, which leads them and whose child the command is. Control: the same spawn
// without new_session leaves the command in its spawner's session and group.
TEST(SpawnSandboxed, EachCommandLeadsItsOwnSessionAndProcessGroupInEachLayer) {
  testing::InEachLayer(CheckEachCommandHasItsOwnGroup);
}

TEST(SpawnSandboxed, ToolsCannotConnectAndAllowNetLiftsIt) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string script = "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(ntohs(addr.sin_port));
  Policy policy = MakePolicy(MakeTempDir("spawn-net"));
  std::string bash = "/bin/bash -c '" + script + "'";
  Result<RunOutput> r = RunSandboxed(policy, bash);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  // From outside: no connection was ever queued.
  pollfd p{listener, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
  policy.allow_net = true;
  Result<RunOutput> allowed = RunSandboxed(policy, bash);
  ASSERT_TRUE(allowed.ok());
  EXPECT_EQ(allowed->exit_code, 0);
  EXPECT_EQ(poll(&p, 1, 0), 1) << "the connection reached the listener";
  close(listener);
}

TEST(SpawnSandboxed, Layer2MakesGitHooksAndConfigReadOnly) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  std::string work = MakeTempDir("spawn-git");
  ASSERT_EQ(system(("mkdir -p " + work + "/.git/hooks " + work +
                    "/.git/objects && echo '[core]' > " + work + "/.git/config")
                       .c_str()),
            0);
  Result<RunOutput> r =
      RunSandboxed(MakePolicy(work),
                   "echo evil > .git/hooks/pre-commit; echo x >> .git/config; mv .git .git2; "
                   "mv .git/hooks .git/h2; touch .git/objects/ok && echo objects-writable");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "objects-writable\n");
  EXPECT_FALSE(FileExists(work + "/.git/hooks/pre-commit"));
  EXPECT_EQ(ReadFile(work + "/.git/config"), "[core]\n");
  EXPECT_TRUE(FileExists(work + "/.git/hooks"));
  EXPECT_FALSE(FileExists(work + "/.git2"));
}

// Plants every kind of git trust-surface change, then runs a real `git status` outside.
const char kPlantGitSurface[] =
    "mkdir -p .git/x && cp -r .git/objects .git/refs .git/HEAD .git/x/ 2>/dev/null; "
    "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch PWNED; "
    "false\"\\n' > .git/x/config; "
    "echo x > .git/commondir; echo 'x' > .git/config.worktree; echo '* filter=evil' > "
    ".git/info/attributes; echo evil > .git/modules/sub/hooks/post-checkout; "
    "echo '[core] hooksPath=/' >> .git/modules/sub/config; echo evil > "
    "nested/.git/hooks/pre-commit; echo x > .git/worktrees/wt/commondir; exit 0";

std::string GitInitScript(const std::string& work) {
  return "set -e; cd " + work +
         "; git init -q .; git -c user.name=a -c user.email=b commit -q --allow-empty -m one; "
         "git worktree add -q ../wt-$$ 2>/dev/null; mkdir -p .git/modules/sub/hooks; "
         "cp .git/HEAD .git/config .git/modules/sub/; git init -q nested";
}

// The files a planted change would show up in, read from outside.
std::string GitSurfaceState(const std::string& work) {
  std::string state;
  for (const char* f : {"/.git/commondir", "/.git/config.worktree", "/.git/info/attributes",
                        "/.git/modules/sub/hooks/post-checkout", "/.git/modules/sub/config",
                        "/nested/.git/hooks/pre-commit", "/PWNED"}) {
    state += std::string(f) + "=" + (FileExists(work + f) ? ReadFile(work + f) : "-") + ";";
  }
  return state;
}

TEST(SpawnSandboxed, Layer2KeepsGitsTrustSurfaceAndTheControlDoesNot) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  if (system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no git";
  // One level down, so that the worktree the script adds beside it (../wt-*) goes with the dir.
  const std::string work = MakeTempDir("spawn-gitsurface") + "/repo";
  const std::string control = MakeTempDir("spawn-gitsurface-control") + "/repo";
  for (const std::string& dir : {work, control}) {
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
    ASSERT_EQ(system(GitInitScript(dir).c_str()), 0);
    std::string wt = ReadFile(
        dir + "/.git/worktrees/" +
        std::filesystem::directory_iterator(dir + "/.git/worktrees")->path().filename().string() +
        "/gitdir");
    ASSERT_EQ(system(("mv " + dir + "/.git/worktrees/* " + dir + "/.git/worktrees/wt").c_str()), 0)
        << wt;
  }
  const std::string before = GitSurfaceState(work);
  Result<RunOutput> r = RunSandboxed(MakePolicy(work), kPlantGitSurface);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(GitSurfaceState(work), before);
  EXPECT_EQ(ReadFile(work + "/.git/worktrees/wt/commondir"), "../..\n");
  // The control: the same script unsandboxed changes all of it.
  SpawnOptions plain;
  plain.argv = {"/bin/sh", "-c", kPlantGitSurface};
  plain.cwd = control;
  Result<ChildProcess> c = Spawn(plain);
  ASSERT_TRUE(c.ok() && c->Wait().ok());
  EXPECT_TRUE(FileExists(control + "/.git/commondir"));
  EXPECT_TRUE(FileExists(control + "/nested/.git/hooks/pre-commit"));
  EXPECT_TRUE(FileExists(control + "/.git/modules/sub/hooks/post-checkout"));
  // A real git command outside: the planted fsmonitor runs only in the control.
  for (const std::string& dir : {work, control}) {
    EXPECT_EQ(system(("cd " + dir + " && git status >/dev/null 2>&1; true").c_str()), 0);
  }
  EXPECT_FALSE(FileExists(work + "/PWNED"));
  EXPECT_TRUE(FileExists(control + "/PWNED")) << "the control must escape";
}

// A tool can plant FIFOs where the git scan reads (a `.git` file, a `commondir`): the next spawn
// must neither block on them nor fail. The spawn runs in a forked child with a deadline, so a
// regression fails the test instead of hanging the suite.
TEST(SpawnSandboxed, Layer2GitScanIsNotStalledByPlantedFifos) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  std::string work = MakeTempDir("spawn-gitfifo");
  ASSERT_EQ(mkdir((work + "/.git").c_str(), 0755), 0);
  ASSERT_EQ(mkfifo((work + "/.git/commondir").c_str(), 0600), 0);
  ASSERT_EQ(mkdir((work + "/nested").c_str(), 0755), 0);
  ASSERT_EQ(mkfifo((work + "/nested/.git").c_str(), 0600), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Result<RunOutput> r = RunSandboxed(MakePolicy(work), "echo ran");
    _exit(r.ok() && r->out == "ran\n" && r->exit_code == 0 ? 0 : 1);
  }
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  ASSERT_TRUE(pidfd) << "pidfd_open: " << errno;
  pollfd p{pidfd.get(), POLLIN, 0};
  const int ready = poll(&p, 1, 60'000);
  if (ready != 1) kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_EQ(ready, 1) << "the spawn blocked on a planted FIFO";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

// What real work needs from git inside layer 2 still works.
TEST(SpawnSandboxed, Layer2GitStillWorks) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  if (system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no git";
  std::string work = MakeTempDir("spawn-gitworks");
  const std::string git = "git -c user.name=a -c user.email=b ";
  Result<RunOutput> fresh =
      RunSandboxed(MakePolicy(work), "set -e; git init -q . && echo a > a && git add a && " + git +
                                         "commit -q -m a && echo inited");
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->out, "inited\n");
  // Now .git exists and is protected: the everyday operations.
  Result<RunOutput> r =
      RunSandboxed(MakePolicy(work),
                   "set -e; echo b > a; " + git + "stash -q; " + git + "stash pop -q; " + git +
                       "commit -qam b; " + git + "checkout -q -b topic; echo c > c; git add c; " +
                       git + "commit -qm c; " + git + "checkout -q -; echo d > d; git add d; " +
                       git + "commit -qm d; " + git + "checkout -q topic; " + git +
                       "rebase -q -; git worktree list >/dev/null; git log --format=%s | "
                       "tr '\\n' ' '");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "c d b a ");
  EXPECT_EQ(r->exit_code, 0);
}

// A process that spawns `sleep` holding `hold` as fd 3, reports the spawned pid, then waits to
// be killed. The caller SIGKILLs it.
pid_t StartSpawnerOfHolder(bool sandboxed, const std::string& work, int hold, int* spawned) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return -1;
  pid_t spawner = fork();
  if (spawner == 0) {
    SpawnOptions options;
    options.argv = {"/bin/sleep", "100000"};
    options.fds = {{hold, 3}};
    options.new_session = true;
    Result<ChildProcess> child =
        sandboxed ? SpawnSandboxed(MakePolicy(work), options) : Spawn(options);
    pid_t pid = child.ok() ? child->pid() : -1;
    if (write(report[1], &pid, sizeof pid) != sizeof pid) _exit(1);
    for (;;) pause();
  }
  close(report[1]);
  if (read(report[0], spawned, sizeof *spawned) != sizeof *spawned) *spawned = -1;
  close(report[0]);
  return spawner;
}

// SIGKILL of whoever spawned a layer-2 command takes the command down: the namespace init has
// PDEATHSIG. The control, a plain spawn, survives its spawner.
TEST(SpawnSandboxed, Layer2CommandDiesWithItsSpawnerAndTheControlDoesNot) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  std::string work = MakeTempDir("spawn-pdeathsig");
  for (bool sandboxed : {true, false}) {
    Result<Pipe> hold = MakePipe();
    ASSERT_TRUE(hold.ok());
    pid_t spawned = -1;
    pid_t spawner = StartSpawnerOfHolder(sandboxed, work, hold->write.get(), &spawned);
    ASSERT_GT(spawner, 0);
    ASSERT_GT(spawned, 0) << "sandboxed=" << sandboxed;
    hold->write.reset();
    ASSERT_EQ(kill(spawner, SIGKILL), 0);
    ASSERT_EQ(waitpid(spawner, nullptr, 0), spawner);
    if (sandboxed) {
      EXPECT_EQ(ReadAll(hold->read.get()), "") << "EOF: the command died with its spawner";
    } else {
      pollfd p{hold->read.get(), POLLIN, 0};
      EXPECT_EQ(poll(&p, 1, 0), 0) << "the control must survive its spawner";
      kill(-spawned, SIGKILL);
      EXPECT_EQ(ReadAll(hold->read.get()), "");
    }
  }
}

// Credential stores are hidden from tools in layer 2; --readable opts one back in; the same
// reads unsandboxed (the control) see every secret. Landlock alone refuses those reads too, so the
// mounts are probed themselves (stat needs no read right): a file store is /dev/null (char 1:3),
// a directory store an empty tmpfs (the file in it is gone). Unsandboxed, the store is a regular
// file and the directory holds its file.
TEST(SpawnSandboxed, Layer2HidesCredentialStoresAndTheControlReadsThem) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  // Outside /tmp, which layer 2 replaces by a private tmpfs anyway.
  char home_template[] = "/var/tmp/forkbox-cred-home-XXXXXX";
  ASSERT_NE(mkdtemp(home_template), nullptr);
  const std::string home = home_template;
  ASSERT_EQ(system(("cd " + home +
                    " && mkdir .ssh .aws && echo SECRET-SSH > .ssh/id_ed25519 && echo "
                    "SECRET-NETRC > .netrc && echo SECRET-AWS > .aws/credentials")
                       .c_str()),
            0);
  const std::string script = "cd " + home +
                             " && cat .ssh/id_ed25519 .netrc .aws/credentials 2>/dev/null; "
                             "ls -A .ssh 2>/dev/null; echo end";
  const std::string mounts = "cd " + home +
                             " && stat -c '%n %t:%T %F' .netrc 2>&1; for f in .ssh/id_ed25519 "
                             ".aws/credentials; do test -e $f && echo $f; done; echo end";
  Policy policy = MakePolicy(MakeTempDir("cred-work"));
  policy.home = home;
  Result<RunOutput> hidden = RunSandboxed(policy, script);
  ASSERT_TRUE(hidden.ok()) << hidden.status().ToString();
  EXPECT_EQ(hidden->out, "end\n");
  Result<RunOutput> mounted = RunSandboxed(policy, mounts);
  ASSERT_TRUE(mounted.ok()) << mounted.status().ToString();
  EXPECT_EQ(mounted->out, ".netrc 1:3 character special file\nend\n");
  policy.readable = {home + "/.aws"};
  Result<RunOutput> opted = RunSandboxed(policy, script);
  ASSERT_TRUE(opted.ok()) << opted.status().ToString();
  EXPECT_EQ(opted->out, "SECRET-AWS\nend\n");
  for (const auto& [probe, expected] :
       {std::pair{script, "SECRET-SSH\nSECRET-NETRC\nSECRET-AWS\nid_ed25519\nend\n"},
        std::pair{mounts, ".netrc 0:0 regular file\n.ssh/id_ed25519\n.aws/credentials\nend\n"}}) {
    Result<Pipe> out = MakePipe();
    ASSERT_TRUE(out.ok());
    SpawnOptions plain;
    plain.argv = {"/bin/sh", "-c", probe};
    plain.fds = {{out->write.get(), 1}};
    Result<ChildProcess> control = Spawn(plain);
    ASSERT_TRUE(control.ok());
    out->write.reset();
    EXPECT_EQ(ReadAll(out->read.get()), expected) << "the control must see every store";
  }
  std::filesystem::remove_all(home);
}

TEST(SpawnSandboxed, Layer2HasAPrivateTmp) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  std::string work = MakeTempDir("spawn-tmp");
  std::string marker = MakeTempDir("outside-marker");
  std::string probe = "/tmp/forkbox-private-" + std::to_string(getpid());
  Result<RunOutput> r =
      RunSandboxed(MakePolicy(work), "test -e " + marker + " && echo leaked; echo x > " + probe +
                                         " && echo wrote; ls /dev/shm | wc -l");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "wrote\n0\n");
  EXPECT_FALSE(FileExists(probe));
}

TEST(SpawnSandboxed, Layer2KeepsAProgramUnderTmpRunnableButNotItsNeighbours) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  // A build tree under /tmp: the program named in argv stays runnable above the private tmpfs,
  // while a data file beside it stays hidden.
  std::string dir = "/tmp/forkbox-visible-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  std::string program = dir + "/prog";
  {
    std::ofstream(program) << "#!/bin/sh\necho ran\ntest -e " << dir << "/data && echo leaked\n";
    std::ofstream(dir + "/data") << "secret";
  }
  ASSERT_EQ(chmod(program.c_str(), 0755), 0);
  Result<RunOutput> r = RunSandboxed(MakePolicy(MakeTempDir("spawn-visible")), program);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "ran\n");
  EXPECT_EQ(r->exit_code, 1);  // `test -e` failed: the neighbour is not visible.
}

// A link under /tmp to an executable file in a credential store: naming the link in argv must
// not bind the store's file back above the private tmpfs, while a link to a program elsewhere
// still runs. Control: unsandboxed, the link reads the file.
TEST(SpawnSandboxed, Layer2BindsNoLinkedProgramOutOfACredentialStore) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  char home_tmpl[] = "/var/tmp/forkbox-visible-home-XXXXXX";
  ASSERT_NE(mkdtemp(home_tmpl), nullptr);
  const std::string home = home_tmpl;
  const std::string tag = std::to_string(getpid());
  const std::string to_key = "/tmp/forkbox-visible-key-" + tag;
  const std::string to_tool = "/tmp/forkbox-visible-tool-" + tag;
  ASSERT_EQ(mkdir((home + "/.ssh").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((home + "/bin").c_str(), 0755), 0);
  std::ofstream(home + "/.ssh/helper") << "#!/bin/sh\necho PRIVATE-KEY\n";
  std::ofstream(home + "/bin/tool") << "#!/bin/sh\necho tool ran\n";
  ASSERT_EQ(chmod((home + "/.ssh/helper").c_str(), 0755), 0);
  ASSERT_EQ(chmod((home + "/bin/tool").c_str(), 0755), 0);
  ASSERT_EQ(symlink((home + "/.ssh/helper").c_str(), to_key.c_str()), 0);
  ASSERT_EQ(symlink((home + "/bin/tool").c_str(), to_tool.c_str()), 0);
  Policy policy = MakePolicy(MakeTempDir("spawn-visible-link"));
  policy.home = home;
  const std::string script = "cat " + to_key + "; " + to_tool;
  Result<RunOutput> r = RunSandboxed(policy, script);
  SpawnOptions plain;
  plain.argv = {"/bin/sh", "-c", "cat " + to_key};
  Result<Pipe> out = MakePipe();
  ASSERT_TRUE(out.ok());
  plain.fds = {{out->write.get(), 1}};
  Result<ChildProcess> control = Spawn(plain);
  out->write.reset();
  const std::string control_out = control.ok() ? ReadAll(out->read.get()) : "";
  if (control.ok()) (void)control->Wait();
  unlink(to_key.c_str());
  unlink(to_tool.c_str());
  std::filesystem::remove_all(home);
  EXPECT_NE(control_out.find("PRIVATE-KEY"), std::string::npos) << "CONTROL: " << control_out;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out.find("PRIVATE-KEY"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("tool ran"), std::string::npos) << r->out;
}

// Joining moves the calling process into a cgroup for good, so the join runs in a forked probe:
// the test process stays where it was, and a later test (or this one under --gtest_repeat) does
// not start inside the session's cgroup. The probe's value names the first check that failed.
long JoinAndSpawnInTheSessionCgroup(Policy policy, bool namespaces_cap) {
  if (namespaces_cap) {
    // Every task and tool gets its own capped PID namespace: the session needs no cgroup.
    if (!JoinSessionProcessLimit(policy, 2).ok()) return 1;
    if (PidsCgroup::InForkboxCgroup()) return 2;
    policy.rlimit_nproc = 100;  // Below what a pid_max can express: the cgroup it is.
  }
  if (!JoinSessionProcessLimit(policy, 2).ok()) return 3;
  if (!PidsCgroup::InForkboxCgroup()) return 4;
  const std::string mine = ReadFile("/proc/self/cgroup");
  const size_t at = mine.find(":pids:");
  if (at == std::string::npos) return 5;
  const std::string pids_path = mine.substr(at + 6, mine.find('\n', at) - at - 6);
  if (ReadFile(PidsCgroup::Hierarchy() + pids_path + "/pids.max") !=
      std::to_string(policy.rlimit_nproc * 3) + "\n") {
    return 6;
  }
  // The sandboxed command sits in the same cgroup: no attach of its own, same fork-bomb cap.
  Result<RunOutput> r = RunSandboxed(policy, "grep :pids: /proc/self/cgroup");
  if (!r.ok()) return 7;
  return r->out.find(pids_path) != std::string::npos ? 0 : 8;
}

TEST(JoinSessionProcessLimit, RootSpawnsInheritTheSessionCgroup) {
  if (PidsCgroup::Hierarchy().empty()) GTEST_SKIP() << "needs uid 0 and a writable pids cgroup";
  const Policy policy = MakePolicy(MakeTempDir("spawn-session"));
  ASSERT_FALSE(PidsCgroup::InForkboxCgroup());
  const bool namespaces_cap = RootPidNamespaceMax(Layer2Available(), policy.rlimit_nproc) > 0;
  testing::ProbeResult r = testing::RunProbe(
      [] { return true; }, [&] { return JoinAndSpawnInTheSessionCgroup(policy, namespaces_cap); });
  ASSERT_TRUE(r.reported) << "probe died (signal " << r.signal << ")";
  EXPECT_EQ(r.value, 0) << "failed check " << r.value << " of JoinAndSpawnInTheSessionCgroup";
  EXPECT_FALSE(PidsCgroup::InForkboxCgroup()) << "the test process itself moved";
}

// Whose cgroup lock the keeper of a dead owner holds.
enum class LeftBy {
  kSession,  // A session's (JoinSession), as a launcher does.
  kCommand,  // A command's (PidsCgroup::Create), as `forkbox sandbox`'s keeper does.
};

// What a dead owner of a cgroup left, as OwnACgroupAndDie writes it.
struct Left {
  pid_t daemon = 0;
  pid_t keeper = 0;
  char cgroup[256] = {};
};

// An owner of a cgroup that dies with a daemon still in it (a kill of every forkbox process at
// once, in layer 1), after forking a keeper that holds the cgroup's lock. Writes a Left to `out`;
// the keeper lives until `hold` closes.
[[noreturn]] void OwnACgroupAndDie(int out, Pipe hold, LeftBy by) {
  hold.write.reset();  // The keeper's read ends at the test's close alone.
  Left left;
  Result<UniqueFd> session = by == LeftBy::kSession ? PidsCgroup::JoinSession(64) : UniqueFd();
  Result<PidsCgroup> command = by == LeftBy::kCommand ? PidsCgroup::Create(64) : PidsCgroup();
  if (!session.ok() || !command.ok() || (!*session && command->lock_fd() < 0)) _exit(1);
  const std::string path =
      *session ? PidsCgroup::Hierarchy() + "/forkbox/task-" + std::to_string(getpid()) + "-session"
               : command->path();
  if (path.size() >= sizeof left.cgroup) _exit(2);
  path.copy(left.cgroup, path.size());
  left.keeper = fork();
  if (left.keeper == 0) {
    char byte;
    (void)read(hold.read.get(), &byte, 1);  // Until the test lets go: EOF.
    _exit(0);
  }
  Result<Pipe> exec = MakePipe();  // O_CLOEXEC: EOF once the daemon exec'd, and let go of the lock.
  if (!exec.ok()) _exit(3);
  left.daemon = fork();
  if (left.daemon == 0) {
    if (command->procs_fd() >= 0 && JoinCgroupRaw(command->procs_fd()) != 0) _exit(126);
    setsid();
    execl("/bin/sleep", "sleep", "600", nullptr);
    _exit(127);
  }
  exec->write.reset();
  char byte;
  if (read(exec->read.get(), &byte, 1) != 0) _exit(4);
  _exit(left.keeper > 0 && left.daemon > 0 && write(out, &left, sizeof left) == sizeof left ? 0
                                                                                            : 5);
}

// What a dead owner left in its cgroup is killed at the next start, unless a process it forked
// still holds the cgroup's lock (a launcher or keeper cleaning up itself). The control: while the
// keeper lives, the daemon is left alone, as it was before for every owner. "" when it holds, else
// what failed.
std::string LeftoversEndedOnceNotLookedAfter(LeftBy by) {
  Result<Pipe> out = MakePipe();
  Result<Pipe> hold = MakePipe();
  if (!out.ok() || !hold.ok()) return "pipes";
  const pid_t owner = fork();
  if (owner < 0) return "fork";
  if (owner == 0) OwnACgroupAndDie(out->write.get(), std::move(*hold), by);
  int status = 0;
  if (waitpid(owner, &status, 0) != owner || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "the owner failed: " + std::to_string(status);
  }
  Left left;
  if (read(out->read.get(), &left, sizeof left) != sizeof left) return "no report of the owner";
  UniqueFd daemon(static_cast<int>(syscall(SYS_pidfd_open, left.daemon, 0)));
  UniqueFd keeper(static_cast<int>(syscall(SYS_pidfd_open, left.keeper, 0)));
  if (!daemon || !keeper) return std::string("pidfd_open: ") + std::strerror(errno);
  const std::string cgroup = left.cgroup;
  const auto ended = [](const UniqueFd& pidfd, int ms) {
    pollfd p{pidfd.get(), POLLIN, 0};
    return poll(&p, 1, ms) == 1;
  };
  for (const std::string& line : PidsCgroup::EndLeftovers()) {
    if (line.find(cgroup) != std::string::npos) return "looked after, yet: " + line;
  }
  if (ended(daemon, 0)) return "control: the keeper's lock keeps it looked after, yet it ended";
  hold->write.reset();  // The keeper ends: nothing looks after the daemon any more.
  if (!ended(keeper, 10'000)) return "the keeper did not end";
  const std::vector<std::string> lines = PidsCgroup::EndLeftovers();
  const bool daemon_ended = ended(daemon, 10'000);
  (void)syscall(SYS_pidfd_send_signal, daemon.get(), SIGKILL, nullptr, 0);
  if (!daemon_ended) return "the daemon outlived its owner's end";
  // Any forkbox starting meanwhile (another test's) may have ended it first; a line about it is
  // this one.
  const std::string said = "killed 1 process a killed forkbox left running (" + cgroup + ")";
  for (const std::string& line : lines) {
    if (line.find(cgroup) == std::string::npos) continue;
    if (line != said) return "said \"" + line + "\", not \"" + said + "\"";
    return std::filesystem::exists(cgroup) ? "the cgroup was not removed" : "";
  }
  std::printf("ended by another start; ours: %s\n", ::testing::PrintToString(lines).c_str());
  return "";
}

// A short text (below PIPE_BUF: one write) to a pipe.
bool WriteText(int fd, const std::string& text) {
  return write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

// The same in a PID namespace with its own /proc, as in a container: there /proc/locks lists a
// dead and reaped owner's lock under pid 0, so only a probe of the lock itself tells. Runs in the
// namespace's init; "skip: ..." where no PID namespace can be made.
std::string LeftoversEndedInAPidNamespace() {
  Result<Pipe> said = MakePipe();
  if (!said.ok()) return "pipe";
  const pid_t outer = fork();
  if (outer < 0) return "fork";
  if (outer == 0) {
    said->read.reset();
    std::string result;
    if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) {
      result = std::string("skip: unshare(CLONE_NEWPID | CLONE_NEWNS): ") + std::strerror(errno);
    } else if (const pid_t init = fork(); init == 0) {
      if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        result = std::string("mount /proc: ") + std::strerror(errno);
      } else {
        result = LeftoversEndedOnceNotLookedAfter(LeftBy::kSession);
      }
      _exit(WriteText(said->write.get(), result) ? 0 : 1);
    } else {
      int status = 0;
      _exit(init > 0 && waitpid(init, &status, 0) == init && WIFEXITED(status) ? 0 : 1);
    }
    _exit(WriteText(said->write.get(), result) ? 0 : 1);
  }
  said->write.reset();
  std::string result = ReadAll(said->read.get());
  int status = 0;
  if (waitpid(outer, &status, 0) != outer || status != 0) result += " (the namespace failed)";
  return result;
}

TEST(PidsCgroup, EndLeftoversKillsWhatADeadOwnerLeftUnlessItIsLookedAfter) {
  if (PidsCgroup::Hierarchy().empty()) GTEST_SKIP() << "needs uid 0 and a writable pids cgroup";
  EXPECT_EQ(LeftoversEndedOnceNotLookedAfter(LeftBy::kSession), "")
      << "the keeper holds the session cgroup's lock";
  EXPECT_EQ(LeftoversEndedOnceNotLookedAfter(LeftBy::kCommand), "")
      << "the keeper holds a command cgroup's lock";
  const std::string in_namespace = LeftoversEndedInAPidNamespace();
  if (in_namespace.rfind("skip: ", 0) == 0) {
    std::printf("not run in a PID namespace: %s\n", in_namespace.c_str());  // The rest ran.
    return;
  }
  EXPECT_EQ(in_namespace, "") << "in a PID namespace with its own /proc";
}

TEST(SpawnSandboxed, Layer2KillsDaemonsWhenTheCommandEnds) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  Policy policy = MakePolicy(MakeTempDir("spawn-daemon"));
  Result<Pipe> held = MakePipe();
  ASSERT_TRUE(held.ok());
  SpawnOptions options;
  // The daemon keeps fd 3 (the pipe) open for as long as it lives.
  options.argv = {"/bin/sh", "-c", "setsid sleep 100000 & (sleep 100000 &) ; exit 0"};
  options.env = ToolEnvironment(policy, environ);
  options.fds = {{held->write.get(), 3}};
  options.new_session = true;
  Result<ChildProcess> child = SpawnSandboxed(policy, std::move(options));
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  held->write.reset();
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0);
  EXPECT_EQ(ReadAll(held->read.get()), "") << "EOF: every holder of the pipe is dead";
}

// forkbox marks itself non-dumpable; a non-dumpable process's /proc/self files belong to root
// until its new user namespace has maps, so a non-root caller used to fail the setgroups write
// (EACCES) and lose layer 2. The command reports its pid: 2 in a fresh PID namespace.
TEST(SpawnSandboxed, Layer2HoldsForANonDumpableUnprivilegedCaller) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  const bool root = geteuid() == 0;
  const std::string work = MakeTempDir("spawn-nondumpable");
  if (root) {
    ASSERT_EQ(chown(work.c_str(), 65534, 65534), 0);
  }
  auto become_user = [root] {
    if (root && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
      return false;
    }
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0;
  };
  testing::ProbeResult r = testing::RunProbe(become_user, [&work] {
    Result<RunOutput> out = RunSandboxed(MakePolicy(work), "echo $$");
    return out.ok() && out->exit_code == 0 ? std::strtol(out->out.c_str(), nullptr, 10) : -1L;
  });
  ASSERT_TRUE(r.reported) << "probe died (signal " << r.signal << ")";
  EXPECT_EQ(r.value, 2) << "the command is not pid 2 of its own PID namespace: no layer 2";
}

// Orphans re-parented to a subreaper become zombies once they exit; ReapOrphans reaps them
// without blocking and leaves the children that ChildProcess handles own alone.
long ReapTwoOrphansKeepingAnOwnedChild() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return -1;
  if (ReapOrphans() != 0) return -2;  // Nothing yet.
  Result<Pipe> gate = MakePipe();
  Result<Pipe> owned_gate = MakePipe();
  if (!gate.ok() || !owned_gate.ok()) return -3;
  SpawnOptions owned_options;
  owned_options.argv = {"/bin/sh", "-c", "head -c1 >/dev/null"};
  owned_options.fds = {{owned_gate->read.get(), 0}};
  Result<ChildProcess> owned = Spawn(owned_options);
  SpawnOptions parent_options;
  parent_options.argv = {"/bin/sh", "-c", "head -c1 <&3 & head -c1 <&3 & exit 0"};
  parent_options.fds = {{gate->read.get(), 3}};
  Result<ChildProcess> orphaner = Spawn(parent_options);
  if (!owned.ok() || !orphaner.ok() || !orphaner->Wait().ok()) return -4;
  std::vector<pid_t> orphans;
  for (pid_t pid : ChildrenOf(getpid())) {
    if (pid != owned->pid()) orphans.push_back(pid);
  }
  if (orphans.size() != 2) return -5;
  std::vector<UniqueFd> exited;
  for (pid_t pid : orphans) exited.emplace_back(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (write(gate->write.get(), "xy", 2) != 2) return -6;
  for (const UniqueFd& fd : exited) {
    pollfd p{fd.get(), POLLIN, 0};
    if (!fd || poll(&p, 1, 60'000) != 1) return -7;  // A guard, not a synchronisation.
  }
  const pid_t keep[] = {owned->pid()};
  int reaped = ReapOrphans(keep);
  // The owned child is still ours to wait for: feed it its byte and reap it normally.
  if (write(owned_gate->write.get(), "z", 1) != 1) return -8;
  Result<int> status = owned->Wait();
  return reaped * 10 + (status.ok() && ExitCodeFromWaitStatus(*status) == 0 ? 1 : 0);
}

TEST(ReapOrphans, ReapsExitedOrphansWithoutBlockingAndKeepsOwnedChildren) {
  testing::ProbeResult r =
      testing::RunProbe([] { return true; }, ReapTwoOrphansKeepingAnOwnedChild);
  ASSERT_TRUE(r.reported) << "probe died (signal " << r.signal << ")";
  EXPECT_EQ(r.value, 21) << "2 orphans reaped, the owned child still waitable";
}

TEST(SpawnSandboxed, HoldsAForkBombForRootToo) {
  if (geteuid() == 0 && PidsCgroup::Hierarchy().empty()) {
    GTEST_SKIP() << "uid 0 without a writable pids cgroup: only the task timeout holds";
  }
  Policy policy = MakePolicy(MakeTempDir("spawn-bomb"));
  policy.rlimit_nproc = 16;
  // dash reports a failed fork at once (no retries); one "ok" per started process.
  Result<RunOutput> r =
      RunSandboxed(policy, "i=0; while [ $i -lt 64 ]; do sleep 100000 & echo ok; i=$((i+1)); done");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  size_t started = 0;
  for (size_t pos = 0; (pos = r->out.find("ok\n", pos)) != std::string::npos; pos += 3) ++started;
  EXPECT_GE(started, 1u);
  EXPECT_LT(started, 64u) << "the process limit did not hold";
  EXPECT_NE(r->exit_code, 0);
}

TEST(SpawnSandboxed, RootInLayer2IsCappedByItsPidNamespaceWithoutACgroupAttach) {
  Policy policy = MakePolicy(MakeTempDir("spawn-pidmax"));
  policy.rlimit_nproc = 300;  // The smallest cap a pid_max can express (kernel floor 301).
  if (geteuid() != 0 || !Layer2Available() || PidNamespaceMaxFor(policy.rlimit_nproc) == 0) {
    GTEST_SKIP() << "needs uid 0, layer 2 and Linux >= 6.14 (per-namespace pid_max)";
  }
  // Control: the cap is real; the same probe unsandboxed sees the host's pid_max.
  EXPECT_NE(ReadFile("/proc/sys/kernel/pid_max"), "301\n");
  std::string mine = ReadFile("/proc/self/cgroup");
  Result<RunOutput> r = RunSandboxed(
      policy,
      "cat /proc/sys/kernel/pid_max; grep :pids: /proc/self/cgroup; "
      "i=0; while [ $i -lt 400 ]; do sleep 100000 & echo ok; i=$((i+1)); done 2>/dev/null");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out.rfind("301\n", 0), 0u) << r->out.substr(0, 200);
  // No cgroup of its own: the command sits in the caller's pids cgroup.
  size_t at = mine.find(":pids:");
  if (at != std::string::npos) {
    std::string line = mine.substr(mine.rfind('\n', at) + 1);
    line = line.substr(0, line.find('\n'));
    EXPECT_NE(r->out.find(line.substr(line.find(':')) + "\n"), std::string::npos) << r->out;
  }
  size_t started = 0;
  for (size_t pos = 0; (pos = r->out.find("ok\n", pos)) != std::string::npos; pos += 3) ++started;
  EXPECT_GE(started, 1u);
  EXPECT_LT(started, 300u) << "the PID namespace's pid_max did not hold";
}

TEST(KillAllDescendants, KillsSetsidAndDoubleForkedDaemons) {
  Result<Pipe> held = MakePipe();
  ASSERT_TRUE(held.ok());
  int write_fd = held->write.get();
  testing::ProbeResult r = testing::RunProbe(
      [] { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0; },
      [write_fd] {
        int ready[2];
        if (pipe(ready) != 0) return -1L;
        pid_t child = fork();
        if (child == 0) {
          setsid();
          if (fork() == 0) {  // The daemon: holds write_fd, then waits forever.
            close(ready[0]);
            close(ready[1]);
            for (;;) pause();
          }
          _exit(0);  // Its parent exits: the daemon is re-parented to us (the subreaper).
        }
        close(ready[1]);
        waitpid(child, nullptr, 0);
        close(ready[0]);
        return static_cast<long>(KillAllDescendants());
      });
  held->write.reset();
  ASSERT_TRUE(r.reported);
  EXPECT_GE(r.value, 1);
  EXPECT_EQ(ReadAll(held->read.get()), "");
  (void)write_fd;
}

// A child it cannot look for is not a child killed: with no descriptor left for /proc
// (RLIMIT_NOFILE 0), the kill fails, -1 with errno EMFILE, and the child still runs. Before, it
// returned 0 ("none signalled") as if there were nothing below it. The control: with descriptors,
// it kills the child, 1.
TEST(KillDescendantsRaw, FailsWhenItCannotReadProcAndSaysWhy) {
  for (const bool no_fds : {true, false}) {
    SCOPED_TRACE(no_fds ? "no descriptor left" : "control");
    testing::ProbeResult r = testing::RunProbe(
        [] { return true; },
        [no_fds] {
          int hold[2];
          if (pipe(hold) != 0) return -2L;
          const pid_t child = fork();
          if (child < 0) return -2L;
          if (child == 0) {  // Waits for the probe to go (its read then ends), unless killed.
            close(hold[1]);
            char c = 0;
            _exit(read(hold[0], &c, 1) == 0 ? 0 : 1);
          }
          close(hold[0]);
          const rlimit none = {0, 0};
          if (no_fds && setrlimit(RLIMIT_NOFILE, &none) != 0) return -3L;
          const int killed = KillDescendantsRaw({});
          const int err = errno;
          // Still there after a failure: it was not killed.
          const bool alive = kill(child, 0) == 0;
          kill(child, SIGKILL);
          waitpid(child, nullptr, 0);
          errno = err;
          return killed == -1 && !alive ? -4L : static_cast<long>(killed);
        });
    ASSERT_TRUE(r.reported);
    if (no_fds) {
      EXPECT_EQ(r.value, -1);
      EXPECT_EQ(r.err, EMFILE);
    } else {
      EXPECT_EQ(r.value, 1);
    }
  }
}

// Job control of a tree: a child with a grandchild and a zombie child of its own (which never
// shows 'T': a stop that waited for it would never end) is stopped, each process 'T' once
// StopDescendantsRaw returns, and ContinueDescendantsRaw resumes each. The probe returns 0 when
// all held, else the first step that did not.
TEST(StopDescendantsRaw, StopsEveryDescendantPastAZombieAndContinueResumesThem) {
  testing::ProbeResult r = testing::RunProbe(
      [] { return true; },
      [] {
        int ready[2];
        if (pipe(ready) != 0) return -1L;
        const pid_t child = fork();
        if (child == 0) {
          if (fork() == 0) _exit(0);  // Never reaped: a zombie.
          const pid_t grandchild = fork();
          if (grandchild == 0) {
            for (;;) pause();
          }
          (void)!write(ready[1], &grandchild, sizeof grandchild);
          for (;;) pause();
        }
        pid_t grandchild = 0;
        if (child < 0 || read(ready[0], &grandchild, sizeof grandchild) != sizeof grandchild) {
          return -1L;
        }
        const std::vector<pid_t> tree = {child, grandchild};
        long step = 0;
        if (StopDescendantsRaw() < 2) {
          step = 1;
        } else if (!forkbox::bench::AllStopped(tree)) {
          step = 2;
        } else if (ContinueDescendantsRaw() < 2) {
          step = 3;
        } else if (std::any_of(tree.begin(), tree.end(),
                               [](pid_t p) { return forkbox::bench::ProcessState(p) == 'T'; })) {
          step = 4;  // SIGCONT wakes a stopped process when it is sent.
        }
        kill(grandchild, SIGKILL);
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
        return step;
      });
  ASSERT_TRUE(r.reported);
  EXPECT_EQ(r.value, 0) << "1: signalled too few, 2: not all stopped, 3: continued too few, "
                           "4: one still stopped";
}

// A process in an uninterruptible wait (here a vfork parent, 'D' until its child ends) takes its
// SIGSTOP only when it leaves the wait: the walk ends once nothing else is left to stop, instead
// of scanning /proc round after round until it gave up and said the processes may run on. The
// parent is stopped as soon as its child ends. The probe returns 0 when all held, else the first
// step that did not.
TEST(StopDescendantsRaw, DoesNotWaitForAProcessInAnUninterruptibleWaitWhichStopsWhenItLeavesIt) {
  testing::ProbeResult r = testing::RunProbe(
      [] { return true; },
      [] {
        int ids[2];
        int go[2];
        if (pipe(ids) != 0 || pipe(go) != 0) return -1L;
        const pid_t parent = fork();
        if (parent == 0) {
          const pid_t child = vfork();
          if (child == 0) {  // Borrows the parent's memory: raw calls only.
            const pid_t self = getpid();
            char c;
            if (write(ids[1], &self, sizeof self) != sizeof self || read(go[0], &c, 1) < 0) {
              _exit(1);
            }
            _exit(0);
          }
          _exit(child > 0 ? 0 : 1);
        }
        pid_t child = 0;
        if (parent < 0 || read(ids[0], &child, sizeof child) != sizeof child) return -1L;
        long step = 0;
        for (int i = 0; forkbox::bench::ProcessState(parent) != 'D'; ++i) {
          if (i == 1'000'000) return -2L;
          sched_yield();
        }
        int status = 0;
        if (StopDescendantsRaw() < 2) {
          step = 1;
        } else if (forkbox::bench::ProcessState(child) != 'T') {
          step = 2;
        } else if (kill(child, SIGKILL) != 0 || waitpid(parent, &status, WUNTRACED) != parent ||
                   !WIFSTOPPED(status)) {
          step = 3;  // Its child gone, the parent left the wait and took the stop it was sent.
        } else if (ContinueDescendantsRaw() < 1 || waitpid(parent, &status, 0) != parent ||
                   !WIFEXITED(status)) {
          step = 4;
        }
        kill(parent, SIGKILL);
        kill(child, SIGKILL);
        waitpid(parent, nullptr, 0);
        return step;
      });
  ASSERT_TRUE(r.reported);
  EXPECT_EQ(r.value, 0) << "1: gave up or signalled too few, 2: the child not stopped, 3: the "
                           "parent did not stop once its child ended, 4: not continued";
}

// A job stop that cannot look for the processes below (no descriptor left for /proc:
// RLIMIT_NOFILE 0) says so on stderr, and its child runs on; the control, with descriptors, says
// nothing and stops the child too. The kernel may discard the stop itself (an orphaned process
// group under the test runner): the child's state is checked only when the stopper did stop.
TEST(StopAsJobRaw, SaysOnStderrWhenItCannotLookForTheProcessesBelow) {
  for (const bool no_fds : {true, false}) {
    SCOPED_TRACE(no_fds ? "no descriptor left" : "control");
    Result<Pipe> err = MakePipe();
    ASSERT_TRUE(err.ok());
    const int err_fd = err->write.get();
    testing::ProbeResult r = testing::RunProbe(
        [] { return true; },
        [no_fds, err_fd] {
          int ids[2];
          if (pipe(ids) != 0) return -1L;
          const pid_t stopper = fork();
          if (stopper == 0) {
            const pid_t child = fork();
            if (child == 0) {
              for (;;) pause();
            }
            (void)!write(ids[1], &child, sizeof child);
            const rlimit none = {0, 0};
            if (dup2(err_fd, STDERR_FILENO) < 0 ||
                (no_fds && setrlimit(RLIMIT_NOFILE, &none) != 0)) {
              _exit(1);
            }
            StopAsJobRaw(SIGTSTP);
            _exit(0);
          }
          pid_t child = 0;
          if (stopper < 0 || read(ids[0], &child, sizeof child) != sizeof child) return -1L;
          long seen = 0;  // 1: the stopper stopped; 2: its child was stopped then.
          for (int status = 0; waitpid(stopper, &status, WUNTRACED) == stopper;) {
            if (!WIFSTOPPED(status)) break;
            seen = 1 | (forkbox::bench::ProcessState(child) == 'T' ? 2 : 0);
            kill(stopper, SIGCONT);
          }
          kill(child, SIGKILL);
          return seen;
        });
    err->write.reset();
    ASSERT_TRUE(r.reported);
    const std::string said = ReadAll(err->read.get());
    EXPECT_EQ(said.find("forkbox: processes below may run on while stopped: not looked for: /proc "
                        "could not be read\n") != std::string::npos,
              no_fds)
        << said;
    if (r.value & 1) {
      EXPECT_EQ((r.value & 2) != 0, !no_fds) << "the child's stop";
    }
  }
}

TEST(FailClosed, RefusesWithoutLandlockNamingTheKernelAndTheOptOut) {
  Policy policy = MakePolicy(MakeTempDir("failclosed"));
  Result<Pipe> msg = MakePipe();
  ASSERT_TRUE(msg.ok());
  int msg_fd = msg->write.get();
  testing::ProbeResult r = testing::RunProbe(testing::HideLandlock, [&policy, msg_fd] {
    SpawnOptions options;
    options.argv = {"/bin/true"};
    Result<ChildProcess> child = SpawnSandboxed(policy, options);
    std::string text = child.ok() ? "spawned" : child.status().message();
    if (write(msg_fd, text.data(), text.size()) < 0) return -2L;
    return child.ok() ? 0L : static_cast<long>(child.status().code());
  });
  msg->write.reset();
  std::string text = ReadAll(msg->read.get());
  ASSERT_TRUE(r.reported);
  EXPECT_EQ(r.value, static_cast<long>(Status::Code::kUnavailable)) << text;
  EXPECT_NE(text.find("Landlock"), std::string::npos) << text;
  EXPECT_NE(text.find(testing::KernelRelease()), std::string::npos) << text;
  EXPECT_NE(text.find("--sandbox=off"), std::string::npos) << text;
}

// A thread still running: the wait gives up after its limit and names the count; once the thread
// is joined it returns at once. In a forked child, so no other test's thread is counted.
TEST(AwaitSingleThreaded, WaitsForTheLastThreadAndNamesTheCountWhenItStays) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int gate[2];
    if (pipe(gate) != 0) _exit(10);
    std::thread blocked([&] {
      char c;
      (void)!read(gate[0], &c, 1);
    });
    Status stays = AwaitSingleThreaded(std::chrono::milliseconds(20));
    if (stays.code() != Status::Code::kTimeout) _exit(11);
    if (stays.message().find("2 threads") == std::string::npos) _exit(12);
    (void)!write(gate[1], "x", 1);
    blocked.join();
    _exit(AwaitSingleThreaded().ok() ? 0 : 13);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// Right after a join, unshare(CLONE_NEWUSER) fails with EINVAL while the kernel still counts the
// thread (about 1 in 200 tries here); after AwaitSingleThreaded it never does. 300 fresh
// processes, each joining a thread first.
TEST(AwaitSingleThreaded, UnshareAfterAJoinedThreadAlwaysWorks) {
  if (!Layer2Available()) GTEST_SKIP() << "no user namespaces here";
  int failures = 0;
  for (int i = 0; i < 300; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::thread([] {}).join();
      if (!AwaitSingleThreaded().ok()) _exit(20);
      _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 21);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace forkbox::sandbox
