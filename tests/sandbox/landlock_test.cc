// Landlock rulesets applied in forked children.
#include "sandbox/landlock.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <thread>

#include "sandbox/sandbox.h"
#include "tests/sandbox/agent_layers.h"
#include "tests/sandbox/probe_util.h"

namespace forkbox::sandbox::landlock {
namespace {

using testing::Connect;
using testing::FileExists;
using testing::Listener;
using testing::MakeTempDir;
using testing::ProbeResult;
using testing::RunProbe;
using testing::RunProbeKeeping;

std::function<bool()> Restrict(int ruleset_fd) {
  return [ruleset_fd] {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && RestrictSelfRaw(ruleset_fd) == 0;
  };
}

long WriteFile(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

TEST(Landlock, AbiIsAvailable) { EXPECT_GE(QueryAbi(), 1); }

TEST(Landlock, RightsGrowWithTheAbi) {
  EXPECT_EQ(FsRightsForAbi(1) & kRefer, 0u);
  EXPECT_NE(FsRightsForAbi(2) & kRefer, 0u);
  EXPECT_EQ(FsRightsForAbi(2) & kTruncate, 0u);
  EXPECT_NE(FsRightsForAbi(3) & kTruncate, 0u);
  EXPECT_EQ(FsRightsForAbi(4) & kIoctlDev, 0u);
  EXPECT_NE(FsRightsForAbi(5) & kIoctlDev, 0u);
}

// A spec with only the fields these tests vary; the read scope stays at its default.
RulesetSpec Spec(Mode mode, std::vector<std::string> writable, bool allow_net, uint16_t port) {
  RulesetSpec spec;
  spec.abi = QueryAbi();
  spec.mode = mode;
  spec.writable = std::move(writable);
  spec.allow_net = allow_net;
  spec.model_port = port;
  return spec;
}

TEST(Landlock, WritesOnlyBeneathTheWorkdir) {
  std::string work = MakeTempDir("ll-work");
  std::string outside = MakeTempDir("ll-outside");
  Result<UniqueFd> ruleset = BuildRuleset(Spec(Mode::kTool, {work}, false, 0));
  ASSERT_TRUE(ruleset.ok()) << ruleset.status().ToString();
  ProbeResult in = RunProbe(Restrict(ruleset->get()), [&] { return WriteFile(work + "/a"); });
  ASSERT_TRUE(in.reported);
  EXPECT_EQ(in.value, 0) << in.err;
  ProbeResult out = RunProbe(Restrict(ruleset->get()), [&] { return WriteFile(outside + "/b"); });
  ASSERT_TRUE(out.reported);
  EXPECT_EQ(out.err, EACCES);
  EXPECT_FALSE(FileExists(outside + "/b"));
  ProbeResult dev = RunProbe(Restrict(ruleset->get()), [] { return WriteFile("/dev/null"); });
  ASSERT_TRUE(dev.reported);
  EXPECT_EQ(dev.value, 0) << "O_TRUNC on /dev/null must work: " << dev.err;
  ProbeResult read = RunProbe(Restrict(ruleset->get()), [] {
    int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
    return fd >= 0 ? 0L : -1L;
  });
  ASSERT_TRUE(read.reported);
  EXPECT_EQ(read.value, 0);
}

// A tool cannot give a file outside the workdir a name inside it (link() or rename() across
// directories needs Landlock's REFER right on both sides: EXDEV), so nothing it plants in the
// workdir is a hard link that a later write with the user's rights would follow out. Within the
// workdir a link still works. Control: unconfined, the same link from outside is made.
TEST(Landlock, NoHardLinkFromOutsideIntoTheWorkdir) {
  if (QueryAbi() < 2) GTEST_SKIP() << "REFER needs ABI 2";
  const std::string work = MakeTempDir("ll-link-work");
  const std::string outside = MakeTempDir("ll-link-outside");
  ASSERT_EQ(WriteFile(outside + "/secret"), 0);
  ASSERT_EQ(WriteFile(work + "/own"), 0);
  Result<UniqueFd> ruleset = BuildRuleset(Spec(Mode::kTool, {work}, false, 0));
  ASSERT_TRUE(ruleset.ok()) << ruleset.status().ToString();
  auto link_in = [&] {
    return static_cast<long>(::link((outside + "/secret").c_str(), (work + "/planted").c_str()));
  };
  ProbeResult confined = RunProbe(Restrict(ruleset->get()), link_in);
  ASSERT_TRUE(confined.reported);
  EXPECT_EQ(confined.value, -1);
  EXPECT_EQ(confined.err, EXDEV);
  EXPECT_FALSE(FileExists(work + "/planted"));
  ProbeResult inside = RunProbe(Restrict(ruleset->get()), [&] {
    return static_cast<long>(::link((work + "/own").c_str(), (work + "/own2").c_str()));
  });
  ASSERT_TRUE(inside.reported);
  EXPECT_EQ(inside.value, 0) << strerror(inside.err);
  ProbeResult control = RunProbe([] { return true; }, link_in);
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.value, 0) << "the control must make the link: " << strerror(control.err);
  EXPECT_TRUE(FileExists(work + "/planted"));
}

long ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

// RestrictToReadOnly (`--sandbox read-only`, `write: none`): no file can be written, made or
// removed, except beneath a directory it was given by descriptor, even one whose path no longer
// leads to it (renamed away since it was opened); reads stay open. A process with a second
// thread is refused, since that thread would keep every right. The control: the same probes
// without the call write, make and remove.
TEST(Landlock, ReadOnlyLeavesOnlyTheGivenDirectoriesWritable) {
  const std::string work = MakeTempDir("ll-readonly");
  ASSERT_EQ(WriteFile(work + "/existing"), 0);
  ASSERT_EQ(mkdir((work + "/kept").c_str(), 0700), 0);
  UniqueFd kept(open((work + "/kept").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(kept);
  ASSERT_EQ(rename((work + "/kept").c_str(), (work + "/moved").c_str()), 0);
  auto read_only = [&kept] {
    const int dirs[] = {kept.get()};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && RestrictToReadOnly(Policy(), dirs).ok();
  };
  auto probe = [&work] {
    long failed = 0;
    if (WriteFile(work + "/new") != 0) failed |= 1;
    if (WriteFile(work + "/existing") != 0) failed |= 2;
    if (mkdir((work + "/dir").c_str(), 0700) != 0) failed |= 4;
    if (unlink((work + "/existing").c_str()) != 0) failed |= 8;
    if (ReadFile("/etc/passwd") != 0) failed |= 16;
    if (WriteFile(work + "/moved/inside") != 0) failed |= 32;
    return failed;
  };
  ProbeResult confined = RunProbe(read_only, probe);
  ASSERT_TRUE(confined.reported) << "the restriction failed";
  EXPECT_EQ(confined.value, 1 | 2 | 4 | 8) << "writes refused; reads and the kept dir allowed";
  EXPECT_TRUE(FileExists(work + "/moved/inside"));
  EXPECT_FALSE(FileExists(work + "/new"));
  ProbeResult control = RunProbe([] { return true; }, probe);
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.value, 0);

  ProbeResult threaded = RunProbe(
      [] {
        // A thread that never ends: the restriction must refuse rather than leave it free.
        std::thread([] { pause(); }).detach();
        return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
      },
      [] {
        Status st = RestrictToReadOnly(Policy());
        return st.ok() ? 0L : static_cast<long>(st.code());
      });
  ASSERT_TRUE(threaded.reported);
  EXPECT_EQ(threaded.value, static_cast<long>(Status::Code::kTimeout));
}

// RestrictToReadOnly with a kShmDir temp dir (a read-only session's parent, a `write: none`
// task): beneath the temp dir everything can be made and removed, and so in the rest of /dev/shm
// (POSIX semaphores); at the end its owner removes the directory itself. With the workdir in
// /dev/shm, only the temp dir is writable there, and the workdir stays read-only. The control:
// without the temp dir given, nothing in it can be written.
TEST(Landlock, ReadOnlyKeepsItsShmTempDirWritableAndRemovable) {
  struct stat shm;
  if (stat("/dev/shm", &shm) != 0) GTEST_SKIP() << "no /dev/shm";
  auto probe = [](const std::string& work, bool given) {
    return [work, given] {
      Policy policy;
      policy.workdir = work;
      Result<TaskTmpDir> tmp = TaskTmpDir::Create(work, ShortLink::kShmDir);
      if (!tmp.ok() || tmp->path().rfind("/dev/shm/forkbox-", 0) != 0) return -1L;
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1L;
      if (!RestrictToReadOnly(policy, {}, given ? &*tmp : nullptr).ok()) return -1L;
      const std::string dir = tmp->path();
      const std::string other = "/dev/shm/ll-ro-" + std::to_string(getpid());
      long failed = 0;
      if (mkdir((dir + "/sub").c_str(), 0700) != 0) failed |= 1;
      if (WriteFile(dir + "/sub/f") != 0) failed |= 2;
      if (WriteFile(work + "/in-workdir") != 0) failed |= 4;
      if (mkdir(other.c_str(), 0700) != 0) failed |= 8;
      (void)rmdir(other.c_str());
      tmp->Remove();
      if (access(dir.c_str(), F_OK) == 0) failed |= 16;
      return failed;
    };
  };
  const std::string work = MakeTempDir("ll-readonly-tmp");
  ProbeResult with = RunProbe([] { return true; }, probe(work, true));
  ASSERT_TRUE(with.reported);
  EXPECT_EQ(with.value, 4) << "the temp dir and /dev/shm written, the temp dir removed";
  EXPECT_FALSE(FileExists(work + "/in-workdir"));
  char shm_work[] = "/dev/shm/ll-ro-work-XXXXXX";
  ASSERT_NE(mkdtemp(shm_work), nullptr);
  ProbeResult in_shm = RunProbe([] { return true; }, probe(shm_work, true));
  ASSERT_TRUE(in_shm.reported);
  EXPECT_EQ(in_shm.value, 4 | 8) << "a workdir in /dev/shm: the temp dir alone, still removed";
  EXPECT_FALSE(FileExists(std::string(shm_work) + "/in-workdir"));
  std::error_code ec;
  std::filesystem::remove_all(shm_work, ec);
  ProbeResult without = RunProbe([] { return true; }, probe(work, false));
  ASSERT_TRUE(without.reported);
  EXPECT_EQ(without.value, 1 | 2 | 4 | 8 | 16) << "the control: the temp dir stays unwritable";
  // An on-disk temp dir is refused: its parent, .forkbox-tmp, is in the workdir.
  ProbeResult on_disk =
      RunProbe([] { return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0; },
               [&work] {
                 Result<TaskTmpDir> tmp = TaskTmpDir::Create(work);
                 if (!tmp.ok()) return -1L;
                 Policy policy;
                 policy.workdir = work;
                 return static_cast<long>(RestrictToReadOnly(policy, {}, &*tmp).code());
               });
  ASSERT_TRUE(on_disk.reported);
  EXPECT_EQ(on_disk.value, static_cast<long>(Status::Code::kInvalidArgument));
}

// A tool ruleset inside an agent (read_scope_inherited) handles no read right: alone it leaves
// reads open but still confines writes, and nested in a domain with the read scope (the agent's,
// which every tool nests in) a denied path stays unreadable. Control: the full tool ruleset alone
// refuses the read.
TEST(Landlock, AnInheritedReadScopeIsTheCallersAlone) {
  const std::string work = MakeTempDir("ll-inherit-work");
  const std::string secret_dir = MakeTempDir("ll-inherit-secret");
  const std::string secret = secret_dir + "/key";
  ASSERT_EQ(WriteFile(secret), 0);
  RulesetSpec agent = Spec(Mode::kAgent, {work}, false, 0);
  agent.denied_reads = {secret_dir};
  RulesetSpec tool = Spec(Mode::kTool, {work}, false, 0);
  tool.denied_reads = {secret_dir};
  RulesetSpec inherited = tool;
  inherited.read_scope_inherited = true;
  EXPECT_EQ(HandledFsRights(inherited) & kReadRights, 0u);
  EXPECT_EQ(HandledFsRights(inherited) | kReadRights, HandledFsRights(tool));
  Result<UniqueFd> agent_fd = BuildRuleset(agent);
  Result<UniqueFd> tool_fd = BuildRuleset(tool);
  Result<UniqueFd> inherited_fd = BuildRuleset(inherited);
  ASSERT_TRUE(agent_fd.ok() && tool_fd.ok() && inherited_fd.ok());

  ProbeResult alone = RunProbe(Restrict(inherited_fd->get()), [&] { return ReadFile(secret); });
  ASSERT_TRUE(alone.reported);
  EXPECT_EQ(alone.value, 0) << "this layer leaves reads to the caller's: " << alone.err;
  ProbeResult write =
      RunProbe(Restrict(inherited_fd->get()), [&] { return WriteFile(secret_dir + "/planted"); });
  ASSERT_TRUE(write.reported);
  EXPECT_EQ(write.err, EACCES) << "writes stay confined by this layer";

  auto nested = [&] {
    return Restrict(agent_fd->get())() && RestrictSelfRaw(inherited_fd->get()) == 0;
  };
  ProbeResult denied = RunProbe(nested, [&] { return ReadFile(secret); });
  ASSERT_TRUE(denied.reported);
  EXPECT_EQ(denied.err, EACCES);
  ProbeResult allowed = RunProbe(nested, [] { return ReadFile("/etc/passwd"); });
  ASSERT_TRUE(allowed.reported);
  EXPECT_EQ(allowed.value, 0) << allowed.err;
  ProbeResult in_work = RunProbe(nested, [&] { return WriteFile(work + "/a"); });
  ASSERT_TRUE(in_work.reported);
  EXPECT_EQ(in_work.value, 0) << in_work.err;

  ProbeResult control = RunProbe(Restrict(tool_fd->get()), [&] { return ReadFile(secret); });
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.err, EACCES);
}

// The read scope's grants come from a listing made before the ruleset (the policy's). An entry
// that became a symbolic link since gets its rule on the link itself, never on where it leads,
// so it grants nothing there. Controls: unsandboxed, the link reads the key; a rule made
// through the link (as an opted-in path is) makes the key readable.
TEST(Landlock, AGrantThatBecameASymlinkGrantsNothingWhereItLeads) {
  const std::string home = MakeTempDir("ll-swap");
  const std::string store = home + "/store";
  ASSERT_EQ(mkdir(store.c_str(), 0700), 0);
  ASSERT_EQ(WriteFile(store + "/key"), 0);
  ASSERT_EQ(WriteFile(home + "/entry"), 0);
  RulesetSpec spec = Spec(Mode::kTool, {}, false, 0);
  spec.denied_reads = {store};
  spec.read_grants = ReadScopeGrants(spec.denied_reads);
  ASSERT_TRUE(std::any_of(spec.read_grants.begin(), spec.read_grants.end(),
                          [&](const Grant& g) { return g.path == home + "/entry"; }));
  ASSERT_EQ(unlink((home + "/entry").c_str()), 0);
  ASSERT_EQ(symlink((store + "/key").c_str(), (home + "/entry").c_str()), 0);
  Result<UniqueFd> swapped = BuildRuleset(spec);
  ASSERT_TRUE(swapped.ok()) << swapped.status().ToString();
  ProbeResult through =
      RunProbe(Restrict(swapped->get()), [&] { return ReadFile(home + "/entry"); });
  ASSERT_TRUE(through.reported);
  EXPECT_EQ(through.err, EACCES);
  ProbeResult key = RunProbe(Restrict(swapped->get()), [&] { return ReadFile(store + "/key"); });
  ASSERT_TRUE(key.reported);
  EXPECT_EQ(key.err, EACCES);

  EXPECT_EQ(ReadFile(home + "/entry"), 0) << "control: unsandboxed, the link reads the key";
  RulesetSpec granted = spec;
  granted.readable = {store + "/key"};
  Result<UniqueFd> control = BuildRuleset(granted);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  ProbeResult leaked =
      RunProbe(Restrict(control->get()), [&] { return ReadFile(home + "/entry"); });
  ASSERT_TRUE(leaked.reported);
  EXPECT_EQ(leaked.value, 0)
      << "control: with the key granted, the probe reads it through the link: " << leaked.err;
}

// --writable and --readable paths are canonical when the policy is resolved; a symbolic link in
// one when the rules are made (a task swapped a directory on its way in a writable tree) fails the
// ruleset, naming the path, instead of granting wherever the link leads. Control: the same path
// without the link builds and grants it.
TEST(Landlock, AWritableOrReadablePathWithALinkInItFailsTheRuleset) {
  const std::string work = MakeTempDir("ll-opt-in");
  const std::string outside = MakeTempDir("ll-opt-in-outside");
  ASSERT_EQ(mkdir((work + "/a").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((work + "/a/out").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((outside + "/out").c_str(), 0700), 0);
  for (const bool write : {true, false}) {
    RulesetSpec spec = Spec(Mode::kTool, {}, false, 0);
    (write ? spec.writable : spec.readable) = {work + "/a/out"};
    Result<UniqueFd> plain = BuildRuleset(spec);
    ASSERT_TRUE(plain.ok()) << "control: " << plain.status().ToString();
    ASSERT_EQ(rename((work + "/a").c_str(), (work + "/a.old").c_str()), 0);
    ASSERT_EQ(symlink(outside.c_str(), (work + "/a").c_str()), 0);
    Result<UniqueFd> swapped = BuildRuleset(spec);
    EXPECT_FALSE(swapped.ok()) << "a rule through the link would grant " << outside << "/out";
    EXPECT_NE(swapped.status().ToString().find(work + "/a/out: a symbolic link appeared in it"),
              std::string::npos)
        << swapped.status().ToString();
    ASSERT_EQ(unlink((work + "/a").c_str()), 0);
    ASSERT_EQ(rename((work + "/a.old").c_str(), (work + "/a").c_str()), 0);
  }
}

// A carved directory is canonical when listed; one swapped for a symbolic link before the rules
// are made fails the ruleset, naming it, rather than granting the entries of where it leads.
// Control: the same listing, not swapped, builds.
TEST(Landlock, ACarvedDirectorySwappedForASymlinkFailsTheRuleset) {
  const std::string home = MakeTempDir("ll-carved");
  const std::string config = home + "/config";
  const std::string elsewhere = MakeTempDir("ll-carved-elsewhere");
  ASSERT_EQ(mkdir(config.c_str(), 0755), 0);
  ASSERT_EQ(WriteFile(config + "/settings"), 0);
  ASSERT_EQ(WriteFile(elsewhere + "/settings"), 0);
  RulesetSpec spec = Spec(Mode::kTool, {}, false, 0);
  spec.denied_reads = {config + "/token"};
  spec.read_grants = ReadScopeGrants(spec.denied_reads);
  ASSERT_TRUE(std::any_of(spec.read_grants.begin(), spec.read_grants.end(),
                          [&](const Grant& g) { return g.path == config + "/settings"; }));
  Result<UniqueFd> control = BuildRuleset(spec);
  ASSERT_TRUE(control.ok()) << control.status().ToString();

  ASSERT_EQ(rename(config.c_str(), (home + "/moved").c_str()), 0);
  ASSERT_EQ(symlink(elsewhere.c_str(), config.c_str()), 0);
  Result<UniqueFd> swapped = BuildRuleset(spec);
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.status().message().find(config), std::string::npos)
      << swapped.status().ToString();
}

TEST(Landlock, MissingWritablePathIsAnError) {
  Result<UniqueFd> ruleset = BuildRuleset(Spec(Mode::kTool, {"/nonexistent/forkbox"}, false, 0));
  EXPECT_FALSE(ruleset.ok());
}

TEST(Landlock, ToolsGetNoTcpAndTheAgentOnlyTheModelPort) {
  if (QueryAbi() < 4) GTEST_SKIP() << "Landlock TCP rules need ABI 4";
  std::string work = MakeTempDir("ll-net");
  Listener model, other;
  Result<UniqueFd> tool = BuildRuleset(Spec(Mode::kTool, {work}, false, 0));
  ASSERT_TRUE(tool.ok());
  ProbeResult t = RunProbe(Restrict(tool->get()), [&] { return Connect(model.port); });
  ASSERT_TRUE(t.reported);
  EXPECT_EQ(t.err, EACCES);
  Result<UniqueFd> agent = BuildRuleset(Spec(Mode::kAgent, {work}, false, model.port));
  ASSERT_TRUE(agent.ok());
  ProbeResult a = RunProbe(Restrict(agent->get()), [&] { return Connect(model.port); });
  ASSERT_TRUE(a.reported);
  EXPECT_EQ(a.value, 0) << a.err;
  ProbeResult b = RunProbe(Restrict(agent->get()), [&] { return Connect(other.port); });
  ASSERT_TRUE(b.reported);
  EXPECT_EQ(b.err, EACCES);
  Result<UniqueFd> net = BuildRuleset(Spec(Mode::kTool, {work}, true, 0));
  ASSERT_TRUE(net.ok());
  ProbeResult n = RunProbe(Restrict(net->get()), [&] { return Connect(other.port); });
  ASSERT_TRUE(n.reported);
  EXPECT_EQ(n.value, 0) << "--allow-net lifts the TCP restriction: " << n.err;
}

// The agent as forkbox-child confines itself (EnterAgentSandbox with the model's port), in each
// layer, reaches the model's port and no other. Control: the same process unconfined reaches the
// other port.
TEST(Landlock, TheConfinedAgentConnectsOnlyToTheModelPort) {
  if (QueryAbi() < 4) GTEST_SKIP() << "Landlock TCP rules need ABI 4";
  Listener model, other;
  const std::string work = MakeTempDir("ll-agent-net");
  testing::InEachLayer([&](bool layer1) -> std::string {
    Result<Policy> policy = ResolvePolicy(Settings{}, work);
    if (!policy.ok()) return policy.status().ToString();
    policy->model_port = model.port;
    auto agent = [&policy, layer1](int report_fd) {
      return testing::BecomeAgent(&*policy, layer1, report_fd);
    };
    ProbeResult to_model = RunProbeKeeping(agent, [&] { return Connect(model.port); });
    if (!to_model.reported) return "no agent, exit " + std::to_string(to_model.exit_code);
    if (to_model.value != 0) return std::string("the model's port: ") + strerror(to_model.err);
    ProbeResult to_other = RunProbeKeeping(agent, [&] { return Connect(other.port); });
    if (to_other.err != EACCES) return "another port was not refused with EACCES";
    return "";
  });
  ProbeResult control = RunProbe([] { return true; }, [&] { return Connect(other.port); });
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.value, 0) << "unconfined, the other port answers: " << strerror(control.err);
}

TEST(Landlock, SignalsAreScopedToTheSandbox) {
  if (QueryAbi() < 6) GTEST_SKIP() << "scopes need ABI 6";
  std::string work = MakeTempDir("ll-scope");
  Result<UniqueFd> ruleset = BuildRuleset(Spec(Mode::kTool, {work}, false, 0));
  ASSERT_TRUE(ruleset.ok());
  ProbeResult r =
      RunProbe(Restrict(ruleset->get()), [] { return static_cast<long>(kill(getppid(), 0)); });
  ASSERT_TRUE(r.reported);
  EXPECT_EQ(r.err, EPERM);
  ProbeResult control =
      RunProbe([] { return true; }, [] { return static_cast<long>(kill(getppid(), 0)); });
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.value, 0);
}

}  // namespace
}  // namespace forkbox::sandbox::landlock
