// ToolEnvironment scrubbing and ResolvePolicy validation.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "sandbox/git_config.h"
#include "sandbox/rlimits.h"
#include "sandbox/sandbox.h"
#include "tests/sandbox/probe_util.h"

namespace forkbox::sandbox {
namespace {

bool Has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}
bool HasName(const std::vector<std::string>& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(),
                     [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; });
}

TEST(ToolEnvironment, KeepsTheAllowlistAndOptInsAndDropsSecrets) {
  std::vector<std::string> storage = {"PATH=/usr/bin:/bin",
                                      "HOME=/home/u",
                                      "LANG=C.UTF-8",
                                      "LC_ALL=C",
                                      "TERM=xterm",
                                      "USER=u",
                                      "SHELL=/bin/bash",
                                      "TMPDIR=/tmp",
                                      "FOO=bar",
                                      "UNLISTED=1",
                                      "ANTHROPIC_API_KEY=sk-ant-1",
                                      "OPENAI_API_KEY=sk-2",
                                      "OPENAI_BASE_URL=http://x",
                                      "GITHUB_TOKEN=ghp_3",
                                      "AWS_SECRET=4",
                                      "FORKBOX_DEBUG=1",
                                      "DB_PASSWORD=5",
                                      "HARMLESS=sk-looks-like-a-key",
                                      "=empty",
                                      "NOEQUALS"};
  std::vector<char*> environ;
  for (std::string& s : storage) environ.push_back(s.data());
  environ.push_back(nullptr);
  Policy policy;
  policy.tmpdir = "/w/.forkbox-tmp/task-1";
  policy.env = {"FOO", "GITHUB_TOKEN", "HARMLESS", "OPENAI_BASE_URL"};
  std::vector<std::string> env = ToolEnvironment(policy, environ.data());
  for (const char* keep : {"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C",
                           "TERM=xterm", "USER=u", "SHELL=/bin/bash", "FOO=bar"}) {
    EXPECT_TRUE(Has(env, keep)) << keep;
  }
  for (const char* drop :
       {"UNLISTED", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "GITHUB_TOKEN",
        "AWS_SECRET", "FORKBOX_DEBUG", "DB_PASSWORD", "HARMLESS", "NOEQUALS"}) {
    EXPECT_FALSE(HasName(env, drop)) << drop;
  }
  for (const char* t : {"TMPDIR", "TMP", "TEMP"}) {
    EXPECT_TRUE(Has(env, std::string(t) + "=" + policy.tmpdir)) << t;
  }
  EXPECT_EQ(std::count_if(env.begin(), env.end(),
                          [](const std::string& e) { return e.rfind("TMPDIR=", 0) == 0; }),
            1);
}

TEST(ToolEnvironment, TmpdirIsTheShortLinkWhenThereIsOne) {
  char* environ[] = {nullptr};
  Policy policy;
  policy.tmpdir = "/w/.forkbox-tmp/task-1";
  policy.tmpdir_short = "/dev/shm/forkbox-abcdefghij";
  std::vector<std::string> env = ToolEnvironment(policy, environ);
  for (const char* t : {"TMPDIR", "TMP", "TEMP"}) {
    EXPECT_TRUE(Has(env, std::string(t) + "=" + policy.tmpdir_short)) << t;
  }
}

TEST(ToolEnvironment, ProvidesADefaultPath) {
  char* environ[] = {nullptr};
  std::vector<std::string> env = ToolEnvironment(Policy{}, environ);
  EXPECT_TRUE(HasName(env, "PATH"));
}

// forkbox-child runs before it is confined, so a variable opted in for the tools that the loader,
// libc or OpenSSL reads (LD_PRELOAD naming a library a tool wrote) must not reach it as such; the
// child's tools get it back, and a parked name that is not opted in stays parked.
TEST(ForkboxProcessEnvironment, ParksTheToolsOptInsAndGivesThemBackToTheTools) {
  std::vector<std::string> storage = {"PATH=/usr/bin",
                                      "HOME=/home/u",
                                      "LD_PRELOAD=/w/evil.so",
                                      "LD_LIBRARY_PATH=/w/lib",
                                      "OPENSSL_CONF=/w/openssl.cnf",
                                      "SSL_CERT_FILE=/etc/corp-ca.pem",
                                      "FOO=bar"};
  std::vector<char*> environ;
  for (std::string& s : storage) environ.push_back(s.data());
  environ.push_back(nullptr);
  Policy policy;
  policy.tmpdir = "/w/.forkbox-tmp";
  policy.env = {"LD_PRELOAD", "LD_LIBRARY_PATH", "OPENSSL_CONF", "FOO"};
  std::vector<std::string> own = ForkboxProcessEnvironment(policy, environ.data());
  for (const char* name : {"LD_PRELOAD", "LD_LIBRARY_PATH", "OPENSSL_CONF", "FOO"}) {
    EXPECT_FALSE(HasName(own, name)) << name;
    EXPECT_TRUE(HasName(own, std::string("FORKBOX_TOOL_ENV_") + name)) << name;
  }
  for (const char* keep : {"PATH=/usr/bin", "HOME=/home/u", "SSL_CERT_FILE=/etc/corp-ca.pem",
                           "TMPDIR=/w/.forkbox-tmp"}) {
    EXPECT_TRUE(Has(own, keep)) << keep;  // forkbox's own: the CA its requests trust.
  }

  // In the child: its tools get every opt-in back, and no parked name.
  own.push_back("FORKBOX_TOOL_ENV_NOT_OPTED=1");
  std::vector<char*> child_environ;
  for (std::string& s : own) child_environ.push_back(s.data());
  child_environ.push_back(nullptr);
  policy.tmpdir = "/w/.forkbox-tmp/task-1";
  std::vector<std::string> tools = ToolEnvironment(policy, child_environ.data());
  for (const char* entry : {"LD_PRELOAD=/w/evil.so", "LD_LIBRARY_PATH=/w/lib",
                            "OPENSSL_CONF=/w/openssl.cnf", "FOO=bar", "PATH=/usr/bin"}) {
    EXPECT_TRUE(Has(tools, entry)) << entry;
  }
  for (const char* drop : {"NOT_OPTED", "FORKBOX_TOOL_ENV_NOT_OPTED", "SSL_CERT_FILE"}) {
    EXPECT_FALSE(HasName(tools, drop)) << drop;
  }

  // Opted in, SSL_CERT_FILE is the tools' once, not twice.
  policy.env.push_back("SSL_CERT_FILE");
  own = ForkboxProcessEnvironment(policy, environ.data());
  child_environ.clear();
  for (std::string& s : own) child_environ.push_back(s.data());
  child_environ.push_back(nullptr);
  tools = ToolEnvironment(policy, child_environ.data());
  EXPECT_EQ(std::count(tools.begin(), tools.end(), "SSL_CERT_FILE=/etc/corp-ca.pem"), 1);
}

// getenv over an environment given as "NAME=value" entries.
std::function<const char*(const char*)> GetenvOf(const std::vector<std::string>& env) {
  return [&env](const char* name) -> const char* {
    const std::string prefix = std::string(name) + "=";
    for (const std::string& entry : env) {
      if (entry.rfind(prefix, 0) == 0) return entry.c_str() + prefix.size();
    }
    return nullptr;
  };
}

void ExpectSameConfig(const UserGitConfig& child, const UserGitConfig& parent) {
  EXPECT_EQ(child.hooks_paths, parent.hooks_paths);
  EXPECT_EQ(child.includes, parent.includes);
  EXPECT_EQ(child.home, parent.home);
}

// A task child resolves its own policy in the environment the parent starts it with: that names
// the user's git config as the parent's does, so the child's layer 2 guards the global
// core.hooksPath (.githooks) and the system config's include the parent's guard does. Before,
// GIT_CONFIG_GLOBAL and GIT_CONFIG_SYSTEM were dropped (not the tools'): the child read neither.
// Its tools still get neither unless opted in, then once.
TEST(ForkboxProcessEnvironment, NamesTheUserGitConfigTheParentReads) {
  const std::string dir = testing::MakeTempDir("child-git-config");
  std::ofstream(dir + "/global") << "[core]\n\thooksPath = .githooks\n";
  std::ofstream(dir + "/system") << "[include]\n\tpath = /w/inc\n";
  std::vector<std::string> storage = {"PATH=/usr/bin", "HOME=" + dir + "/home",
                                      "GIT_CONFIG_GLOBAL=" + dir + "/global",
                                      "GIT_CONFIG_SYSTEM=" + dir + "/system"};
  std::vector<char*> environ;
  for (std::string& s : storage) environ.push_back(s.data());
  environ.push_back(nullptr);
  const UserGitConfig parents = ReadUserGitConfig(GetenvOf(storage));
  ASSERT_TRUE(Has(parents.hooks_paths, ".githooks")) << "the control: the parent's guards it";
  ASSERT_TRUE(Has(parents.includes, "/w/inc"));
  Policy policy;
  std::vector<std::string> own = ForkboxProcessEnvironment(policy, environ.data());
  ExpectSameConfig(ReadUserGitConfig(GetenvOf(own)), parents);

  std::vector<char*> child_environ;
  for (std::string& s : own) child_environ.push_back(s.data());
  child_environ.push_back(nullptr);
  for (const char* name : {"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"}) {
    EXPECT_FALSE(HasName(ToolEnvironment(policy, child_environ.data()), name)) << name;
  }
  policy.env = {"GIT_CONFIG_GLOBAL"};
  own = ForkboxProcessEnvironment(policy, environ.data());
  ExpectSameConfig(ReadUserGitConfig(GetenvOf(own)), parents);
  child_environ.clear();
  for (std::string& s : own) child_environ.push_back(s.data());
  child_environ.push_back(nullptr);
  const std::vector<std::string> tools = ToolEnvironment(policy, child_environ.data());
  EXPECT_EQ(std::count(tools.begin(), tools.end(), storage[2]), 1);
}

TEST(SecretNames, AreRecognisedCaseInsensitively) {
  EXPECT_TRUE(IsSecretName("anthropic_api_key"));
  EXPECT_TRUE(IsSecretName("MY_TOKEN"));
  EXPECT_TRUE(IsSecretName("X_SECRET"));
  EXPECT_FALSE(IsSecretName("PATH"));
  EXPECT_FALSE(IsSecretName("TOKENIZER_MODE"));
}

TEST(ResolvePolicy, CanonicalisesAndValidates) {
  std::string dir = testing::MakeTempDir("policy");
  Settings settings;
  settings.writable = {dir + "/."};
  settings.env = {"FOO"};
  Result<Policy> policy = ResolvePolicy(settings, dir + "/../" + dir.substr(dir.rfind('/') + 1));
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->workdir, dir);
  EXPECT_EQ(policy->writable, std::vector<std::string>{dir});
  EXPECT_EQ(policy->env, std::vector<std::string>{"FOO"});

  EXPECT_EQ(ResolvePolicy(Settings{}, "/nonexistent/forkbox").status().code(),
            Status::Code::kInvalidArgument);
  Settings bad_writable;
  bad_writable.writable = {"/nonexistent/forkbox"};
  EXPECT_FALSE(ResolvePolicy(bad_writable, dir).ok());
  Settings bad_env;
  bad_env.env = {"NOT A NAME"};
  EXPECT_FALSE(ResolvePolicy(bad_env, dir).ok());
  Settings bad_limit;
  bad_limit.rlimit_nproc = 0;
  EXPECT_FALSE(ResolvePolicy(bad_limit, dir).ok());
  EXPECT_FALSE(ResolvePolicy(Settings{}, "/etc/passwd").ok());
}

// The user's own git config is read into each policy ResolvePolicy makes (Policy::user_git_config,
// what the git guard and layer 2's binds follow), from the environment then: a second policy sees
// a global config changed since, which the read once per process before (TheUserGitConfig) did not.
// The control: with the sandbox off nothing is read (nothing is guarded).
TEST(ResolvePolicy, ReadsTheUserGitConfigIntoEachPolicy) {
  const std::string dir = testing::MakeTempDir("policy-git-config");
  const char* before = getenv("GIT_CONFIG_GLOBAL");
  const std::string saved = before != nullptr ? before : "";
  ASSERT_EQ(setenv("GIT_CONFIG_GLOBAL", (dir + "/gitconfig").c_str(), 1), 0);
  for (const std::string hooks : {".githooks", "hooks-b"}) {
    std::ofstream(dir + "/gitconfig") << "[core]\n\thooksPath = " << hooks << "\n";
    Result<Policy> policy = ResolvePolicy(Settings{}, dir);
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    EXPECT_TRUE(Has(policy->user_git_config.hooks_paths, hooks)) << hooks;
    EXPECT_FALSE(
        Has(policy->user_git_config.hooks_paths, hooks == "hooks-b" ? ".githooks" : "hooks-b"))
        << hooks;
  }
  Settings off;
  off.enabled = false;
  Result<Policy> unsandboxed = ResolvePolicy(off, dir);
  ASSERT_TRUE(unsandboxed.ok());
  EXPECT_TRUE(unsandboxed->user_git_config.hooks_paths.empty());
  if (before != nullptr) setenv("GIT_CONFIG_GLOBAL", saved.c_str(), 1);
  if (before == nullptr) unsetenv("GIT_CONFIG_GLOBAL");
}

// A child gets the session's canonical paths and resolves them again: a path that now leads
// elsewhere (a directory on its way swapped for a link) is refused, naming both. Control: the
// same paths, unswapped, pass.
TEST(CheckPathsUnchanged, RefusesAPathThatNowLeadsElsewhere) {
  const std::string dir = testing::MakeTempDir("policy-swap");
  const std::string outside = testing::MakeTempDir("policy-swap-outside");
  ASSERT_EQ(::mkdir((dir + "/a").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((dir + "/a/out").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((outside + "/out").c_str(), 0700), 0);
  Settings given;
  given.writable = {dir + "/a/out"};
  given.readable = {dir + "/a"};
  Result<Policy> same = ResolvePolicy(given, dir);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_TRUE(CheckPathsUnchanged(given, *same).ok()) << "control";

  ASSERT_EQ(::rename((dir + "/a").c_str(), (dir + "/a.old").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (dir + "/a").c_str()), 0);
  Result<Policy> swapped = ResolvePolicy(given, dir);
  ASSERT_TRUE(swapped.ok()) << swapped.status().ToString();
  EXPECT_EQ(swapped->writable, std::vector<std::string>{outside + "/out"}) << "what a grant hit";
  const Status refused = CheckPathsUnchanged(given, *swapped);
  EXPECT_EQ(refused.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(refused.message().find("--writable " + dir + "/a/out now leads to " + outside + "/out"),
            std::string::npos)
      << refused.message();
}

// An unreadable path (the transcript directory) is denied like a store, canonical, and hidden in
// layer 2 once it exists; one in or above the workdir or a --writable tree is dropped (tools write
// there), so the workdir is not refused as one that holds a store. The control: the same path
// outside every tree stays.
TEST(ResolvePolicy, DeniesAnUnreadablePathOutsideTheWritableTrees) {
  const std::string work = testing::MakeTempDir("policy-unreadable-work");
  const std::string extra = testing::MakeTempDir("policy-unreadable-extra");
  const std::string outside = testing::MakeTempDir("policy-unreadable-outside");
  Settings settings;
  settings.writable = {extra};
  settings.unreadable = {outside + "/.", work + "/t", extra + "/t",
                         work.substr(0, work.rfind('/'))};
  Result<Policy> policy = ResolvePolicy(settings, work);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->unreadable, std::vector<std::string>{outside});
  EXPECT_TRUE(Has(DeniedReadPaths(*policy), outside));
  EXPECT_TRUE(Has(CredentialPaths(*policy), outside));
  EXPECT_FALSE(Has(DeniedReadPaths(*policy), work + "/t"));
  EXPECT_TRUE(CheckWorkdirScope(*policy).ok()) << CheckWorkdirScope(*policy).message();
}

// The stores and homes are resolved once either way; the read scope's grants only with kNow (a
// process that confines its own reads later), and left to the ruleset with kAtTheRuleset.
TEST(ResolvePolicy, ListsTheReadGrantsOnlyWhenAskedToListThemNow) {
  const std::string dir = testing::MakeTempDir("policy-grants");
  Result<Policy> now = ResolvePolicy(Settings{}, dir);
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_TRUE(now->homes.has_value());
  ASSERT_TRUE(now->denied_reads.has_value());
  if (now->denied_reads->empty()) GTEST_SKIP() << "no credential store to carve around here";
  EXPECT_FALSE(now->read_grants.empty());
  Result<Policy> later = ResolvePolicy(Settings{}, dir, GrantListing::kAtTheRuleset);
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_TRUE(later->read_grants.empty());
  EXPECT_EQ(later->denied_reads, now->denied_reads);
  EXPECT_EQ(later->homes, now->homes);
}

// The limits only lower: a soft limit the caller set below the policy's (`ulimit -S -f`) holds
// in the sandbox too, and the hard one comes down to the policy's. The control: with no soft
// limit of its own, the caller's process gets the policy's.
TEST(Limits, NeverRaiseTheCallersSoftLimit) {
  auto fsize_after = [](rlim_t soft) {
    return testing::RunProbe([] { return true; },
                             [soft] {
                               const rlimit before{soft, RLIM_INFINITY};
                               const char* step = "";
                               if (setrlimit(RLIMIT_FSIZE, &before) != 0) return -1L;
                               if (ApplyLimitsRaw(Limits{.fsize_bytes = 4096}, &step) != 0)
                                 return -2L;
                               rlimit after;
                               if (getrlimit(RLIMIT_FSIZE, &after) != 0) return -3L;
                               return after.rlim_max == 4096 ? static_cast<long>(after.rlim_cur)
                                                             : -4L;
                             });
  };
  testing::ProbeResult low = fsize_after(100);
  ASSERT_TRUE(low.reported) << low.signal;
  EXPECT_EQ(low.value, 100);
  testing::ProbeResult unset = fsize_after(RLIM_INFINITY);
  ASSERT_TRUE(unset.reported) << unset.signal;
  EXPECT_EQ(unset.value, 4096);
}

}  // namespace
}  // namespace forkbox::sandbox
