// GitSurfaceGuard: what a tool leaves in git's trust surface is undone (the escape suite checks the
// same from outside with real git); a repository a tool creates keeps what git init makes.
#include "sandbox/git_surface.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "sandbox/git_config.h"
#include "sandbox/namespaces.h"
#include "tests/sandbox/probe_util.h"

namespace forkbox::sandbox {
namespace {

using testing::FileExists;
using testing::kNoUserGitConfig;
using testing::MakeTempDir;
using testing::ReadFile;

void Write(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

// What a shell command prints on stdout.
std::string RunOutput(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  pclose(pipe);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool HasLine(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& line : lines) {
    if (line.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(GitSurfaceGuard, ConfigIsSafeAcceptsWhatGitInitWrites) {
  EXPECT_TRUE(GitSurfaceGuard::ConfigIsSafe(
      "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
      "\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://x/y.git\n"
      "\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n"
      "\tmerge = refs/heads/main\n",
      nullptr));
}

TEST(GitSurfaceGuard, ConfigIsSafeRefusesEveryWayToRunOrRedirect) {
  for (const char* text :
       {"[core]\n\tfsmonitor = touch /tmp/x\n", "[core]\n\tFsMonitor = x\n",
        "[core] fsmonitor = x\n", "[core]\n\thooksPath = /tmp\n", "[include]\n\tpath = /tmp/c\n",
        "[includeIf \"gitdir:/\"]\n\tpath = /tmp/c\n", "[core \"x\"]\n\tbare = false\n",
        "[core]\n\tbare = false \\\n", "[remote \"o\"]\n\turl = ext::sh -c x\n",
        "[remote \"o\"]\n\tuploadpack = x\n", "[alias]\n\tst = !x\n", "bare = false\n",
        "[core.x]\n\tbare = true\n"}) {
    std::string why;
    EXPECT_FALSE(GitSurfaceGuard::ConfigIsSafe(text, &why)) << text;
    EXPECT_FALSE(why.empty()) << text;
  }
}

TEST(GitSurfaceGuard, UndoesPlantedHooksConfigAndRedirects) {
  const std::string work = std::filesystem::canonical(MakeTempDir("git-guard")).string();
  ASSERT_EQ(system(("git init -q '" + work + "' && mkdir '" + work + "/nested' && git init -q '" +
                    work + "/nested'")
                       .c_str()),
            0);
  const std::string config = ReadFile(work + "/.git/config");
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  Write(work + "/.git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/x\n", 0755);
  Write(work + "/.git/config", config + "[core]\n\tfsmonitor = x\n");
  Write(work + "/.git/commondir", "x\n");
  Write(work + "/nested/.git/hooks/post-checkout", "#!/bin/sh\n", 0755);
  std::filesystem::remove_all(work + "/.git/info");
  ASSERT_EQ(symlink("/etc", (work + "/.git/info").c_str()), 0);
  std::vector<std::string> undone = guard->Restore();
  EXPECT_FALSE(FileExists(work + "/.git/hooks/pre-commit"));
  EXPECT_FALSE(FileExists(work + "/.git/commondir"));
  EXPECT_FALSE(FileExists(work + "/nested/.git/hooks/post-checkout"));
  EXPECT_EQ(ReadFile(work + "/.git/config"), config);
  struct stat st;
  ASSERT_EQ(lstat((work + "/.git/info").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode)) << "the symlink is replaced by the recorded directory";
  EXPECT_TRUE(FileExists(work + "/.git/info/exclude"));
  EXPECT_TRUE(HasLine(undone, ".git/hooks/pre-commit"));
  EXPECT_TRUE(HasLine(undone, "restore .git/config"));
  EXPECT_TRUE(guard->Restore().empty()) << "the restored state is the record";
}

// The identity of the directory `path` names now.
FileIdentity IdentityOfPath(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  return fd ? IdentityOf(fd.get()) : FileIdentity{};
}

// The workdir's name swapped (from outside the sandbox) for another repository before the record:
// given the identity the session holds, Take refuses, where the control, which goes by the name,
// records the other directory.
TEST(GitSurfaceGuard, RefusesAWorkdirWhoseNameLeadsToAnotherDirectory) {
  const std::string base = MakeTempDir("git-guard-swap");
  const std::string work = base + "/proj", other = base + "/other";
  ASSERT_EQ(system(("git init -q '" + work + "' && git init -q '" + other + "'").c_str()), 0);
  const FileIdentity held = IdentityOfPath(work), decoy = IdentityOfPath(other);
  ASSERT_NE(held.ino, 0U);
  ASSERT_TRUE(GitSurfaceGuard::Take(work, kNoUserGitConfig, nullptr, {}, held).ok());
  ASSERT_EQ(renameat2(AT_FDCWD, work.c_str(), AT_FDCWD, other.c_str(), RENAME_EXCHANGE), 0);
  Result<GitSurfaceGuard> refused =
      GitSurfaceGuard::Take(work, kNoUserGitConfig, nullptr, {}, held);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kNotFound);
  EXPECT_NE(refused.status().message().find(work + " no longer leads to the workdir the session "
                                                   "started in"),
            std::string::npos)
      << refused.status().ToString();
  Result<GitSurfaceGuard> control = GitSurfaceGuard::Take(work, kNoUserGitConfig);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  EXPECT_EQ(IdentityOf(control->descriptor()).ino, decoy.ino) << "control: it guards the decoy";
}

// The workdir moved after the record, and a decoy repository took its name. Restore puts the
// record back through the descriptor (the hook planted in the real tree goes, at every Restore),
// says it cannot look for new surface, leaves the decoy alone, and InPlace names the move. The
// control (no move) also cleans the repository that appeared meanwhile.
TEST(GitSurfaceGuard, AfterTheWorkdirMovedARestorePutsTheRecordBackAndSaysItCannotLookFurther) {
  for (const bool moved : {false, true}) {
    SCOPED_TRACE(moved ? "moved" : "control");
    const std::string base = MakeTempDir("git-guard-moved");
    const std::string work = base + "/proj", real = moved ? base + "/proj.moved" : work;
    ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
    Result<GitSurfaceGuard> guard =
        GitSurfaceGuard::Take(work, kNoUserGitConfig, nullptr, {}, IdentityOfPath(work));
    ASSERT_TRUE(guard.ok()) << guard.status().ToString();
    EXPECT_TRUE(guard->InPlace().ok());
    ASSERT_EQ(system(("git init -q '" + work + "/sub'").c_str()), 0);
    Write(work + "/sub/.git/hooks/post-checkout", "#!/bin/sh\n", 0755);
    if (moved) {
      std::filesystem::rename(work, real);
      ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
      Write(work + "/.git/hooks/decoy", "#!/bin/sh\n", 0755);
    }
    for (int round = 0; round < 2; ++round) {
      Write(real + "/.git/hooks/pre-commit", "#!/bin/sh\n", 0755);
      const std::vector<std::string> undone = guard->Restore();
      EXPECT_FALSE(FileExists(real + "/.git/hooks/pre-commit")) << round;
      EXPECT_TRUE(HasLine(undone, "remove .git/hooks/pre-commit")) << round;
      EXPECT_EQ(
          HasLine(undone, "could NOT look for new git surface (git init, .git files): " + work +
                              " no longer leads to the directory whose git surface "
                              "is guarded"),
          moved)
          << ::testing::PrintToString(undone);
    }
    EXPECT_EQ(FileExists(real + "/sub/.git/hooks/post-checkout"), moved)
        << "what appeared is found by name only";
    EXPECT_EQ(guard->InPlace().ok(), !moved) << guard->InPlace().ToString();
    if (moved) {
      EXPECT_TRUE(FileExists(work + "/.git/hooks/decoy")) << "the decoy is not guarded";
    }
  }
}

// A repository that appears with only what git init makes is kept, and recorded by that Restore
// (from the surface its own walk found: no walk of its own): a later change to its config, even a
// safe one, is undone like any recorded one, where a repository not recorded keeps a safe config.
TEST(GitSurfaceGuard, RecordsARepositoryThatAppearedClean) {
  const std::string work = std::filesystem::canonical(MakeTempDir("git-guard-clean")).string();
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  ASSERT_EQ(system(("git init -q '" + work + "/fresh'").c_str()), 0);
  const std::string config = ReadFile(work + "/fresh/.git/config");
  EXPECT_TRUE(guard->Restore().empty()) << "nothing to clean";
  Write(work + "/fresh/.git/config", config + "[user]\n\tname = x\n");
  ASSERT_EQ(system(("git init -q '" + work + "/later'").c_str()), 0);
  Write(work + "/later/.git/config",
        ReadFile(work + "/later/.git/config") + "[user]\n\tname = x\n");
  std::vector<std::string> undone = guard->Restore();
  EXPECT_EQ(ReadFile(work + "/fresh/.git/config"), config);
  EXPECT_TRUE(HasLine(undone, "restore fresh/.git/config"));
  EXPECT_NE(ReadFile(work + "/later/.git/config").find("name = x"), std::string::npos)
      << "the control: a repository not recorded keeps a safe config";
}

// `.git/hooks -> ../githooks`: git runs the hooks where the link leads, so that directory is
// guarded too (before, only the link was, and a hook planted through it stayed: checked against
// that build), and the link itself is put back when a tool replaces it.
TEST(GitSurfaceGuard, GuardsALinkedHooksDirectoryAndTheLink) {
  const std::string work = std::filesystem::canonical(MakeTempDir("git-guard-link")).string();
  ASSERT_EQ(system(("git init -q '" + work + "' && mv '" + work + "/.git/hooks' '" + work +
                    "/githooks' && ln -s ../githooks '" + work + "/.git/hooks'")
                       .c_str()),
            0);
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  Write(work + "/.git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/x\n", 0755);
  ASSERT_TRUE(FileExists(work + "/githooks/pre-commit")) << "written through the link";
  std::vector<std::string> undone = guard->Restore();
  EXPECT_FALSE(FileExists(work + "/githooks/pre-commit"));
  EXPECT_TRUE(HasLine(undone, "githooks/pre-commit"));
  // The link replaced by a directory with a hook in it.
  ASSERT_EQ(unlink((work + "/.git/hooks").c_str()), 0);
  ASSERT_EQ(mkdir((work + "/.git/hooks").c_str(), 0755), 0);
  Write(work + "/.git/hooks/pre-commit", "#!/bin/sh\n", 0755);
  guard->Restore();
  struct stat st;
  ASSERT_EQ(lstat((work + "/.git/hooks").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the recorded link is back";
  EXPECT_FALSE(FileExists(work + "/githooks/pre-commit"));
}

TEST(GitSurfaceGuard, NewRepositoryKeepsOnlyWhatGitInitMakes) {
  const std::string work = std::filesystem::canonical(MakeTempDir("git-guard-new")).string();
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  ASSERT_EQ(system(("git init -q '" + work + "' && git init -q '" + work + "/evil'").c_str()), 0);
  const std::string config = ReadFile(work + "/.git/config");
  Write(work + "/evil/.git/config", "[core]\n\tfsmonitor = x\n");
  Write(work + "/evil/.git/hooks/pre-commit", "#!/bin/sh\n", 0755);
  std::vector<std::string> undone = guard->Restore();
  EXPECT_EQ(ReadFile(work + "/.git/config"), config) << "git init's own config is kept";
  EXPECT_TRUE(FileExists(work + "/.git/hooks/pre-commit.sample"));
  EXPECT_FALSE(FileExists(work + "/evil/.git/config"));
  EXPECT_FALSE(FileExists(work + "/evil/.git/hooks/pre-commit"));
  EXPECT_TRUE(HasLine(undone, "fsmonitor")) << "the reason names the line";
  // Now recorded: a later change to it is undone like any other.
  Write(work + "/.git/hooks/post-commit", "#!/bin/sh\n", 0755);
  EXPECT_TRUE(HasLine(guard->Restore(), ".git/hooks/post-commit"));
  EXPECT_FALSE(FileExists(work + "/.git/hooks/post-commit"));
}

// A fresh workdir six levels below "/": UndoesAPlantedHookUnderAWorkdirOfRoot records every
// repository five levels down, maybe while this test runs, and these tests' surfaces are
// too deep to be recorded.
std::string WorkdirOutOfSightOfRoot(const std::string& name) {
  const std::string dir =
      std::filesystem::canonical(MakeTempDir(name)).string() + "/levels/to/hide/it";
  std::filesystem::create_directories(dir);
  return dir;
}

// `dir` with `levels` nested directories "d" below it.
std::string Deep(std::string dir, int levels) {
  for (int i = 0; i < levels; ++i) dir += "/d";
  return dir;
}

// A link a tool makes in the surface is removed, never what it leads to: a new `sub/.git`, a new
// repository's `hooks` and a new `sub/.forkbox` leading to the user's src/ left the guard
// removing src/ whole. The control: the same links made before the record stay, and so does src/.
TEST(GitSurfaceGuard, RemovesANewLinkAndKeepsWhatItLeadsTo) {
  for (const bool before_record : {false, true}) {
    SCOPED_TRACE(before_record ? "control: links made before the record" : "links made by a tool");
    const std::string work = WorkdirOutOfSightOfRoot("git-guard-new-link");
    Write(work + "/src/file", "the user's\n");
    const auto plant = [&work] {
      std::filesystem::create_directories(work + "/sub");
      std::filesystem::create_directories(work + "/n/.git");
      std::filesystem::create_directories(work + "/cfg");
      std::filesystem::create_directory_symlink("../src", work + "/sub/.git");
      std::filesystem::create_directory_symlink("../../src", work + "/n/.git/hooks");
      std::filesystem::create_directory_symlink("../src", work + "/cfg/.forkbox");
    };
    if (before_record) plant();
    Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
    ASSERT_TRUE(guard.ok()) << guard.status().ToString();
    if (!before_record) plant();
    const std::vector<std::string> undone = guard->Restore();
    EXPECT_EQ(ReadFile(work + "/src/file"), "the user's\n");
    for (const char* link : {"/sub/.git", "/n/.git/hooks", "/cfg/.forkbox"}) {
      EXPECT_EQ(std::filesystem::is_symlink(std::filesystem::symlink_status(work + link)),
                before_record)
          << link;
    }
    EXPECT_EQ(HasLine(undone, "removed cfg/.forkbox (agent config a tool created"), !before_record);
  }
}

// What git or Claude Code trusts where the walk did not look: a repository committed under
// .forkbox-tmp (skipped by name), one below a workdir made to look bare (the walk stopped at a
// bare git dir, git does not), and .claude's skills and output styles and .mcp.json. Each ran or
// stayed for the user's next `git status` or `claude`. The control: the same files made before
// the record are the user's and stay.
TEST(GitSurfaceGuard, FindsWhatGitAndClaudeTrustWhereTheWalkDidNotLook) {
  const std::vector<std::string> planted = {"/.forkbox-tmp/evil/.git/config",
                                            "/sub/.git/config",
                                            "/sub2/.forkbox/agents/e.md",
                                            "/.claude/skills/fmt/SKILL.md",
                                            "/.claude/output-styles/x.md",
                                            "/.mcp.json",
                                            "/a/b/.mcp.json"};
  for (const bool before_record : {false, true}) {
    SCOPED_TRACE(before_record ? "control: made before the record" : "made by a tool");
    const std::string work = WorkdirOutOfSightOfRoot("git-guard-unlooked");
    ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
    std::filesystem::create_directories(work + "/.claude");
    const auto plant = [&] {
      Write(work + "/HEAD", "ref: refs/heads/main\n");  // The workdir looks like a bare repo.
      std::filesystem::create_directories(work + "/objects");
      std::filesystem::create_directories(work + "/refs");
      for (const std::string& path : planted) Write(work + path, "[core]\n\tfsmonitor = x\n");
    };
    if (before_record) plant();
    Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
    ASSERT_TRUE(guard.ok()) << guard.status().ToString();
    if (!before_record) plant();
    const std::vector<std::string> undone = guard->Restore();
    for (const std::string& path : planted)
      EXPECT_EQ(FileExists(work + path), before_record) << path;
    EXPECT_EQ(HasLine(undone, "fsmonitor"), !before_record);
  }
}

// Guards `work` with `plant` run before the record (the control) or after it, then tools' `state`
// written: each planted path is removed and reported unless made before, the state stays.
// Returns Restore's lines.
std::vector<std::string> ExpectPlantedUndone(const std::string& work, bool before_record,
                                             const std::function<void()>& plant,
                                             const std::vector<std::string>& planted,
                                             const std::vector<std::string>& state) {
  if (before_record) plant();
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
  EXPECT_TRUE(guard.ok()) << guard.status().ToString();
  if (!guard.ok()) return {};
  if (!before_record) plant();
  for (const std::string& path : state) Write(work + path, "state\n");
  const std::vector<std::string> undone = guard->Restore();
  for (const std::string& path : planted) {
    EXPECT_EQ(FileExists(work + path), before_record) << path;
    EXPECT_EQ(HasLine(undone, path.substr(1)), !before_record) << path;
  }
  for (const std::string& path : state) EXPECT_EQ(ReadFile(work + path), "state\n") << path;
  return undone;
}

// Other agent CLIs trust project config too, and run what it names with the user's rights at
// their next start there: Codex a trusted project's `.codex/config.toml` (mcp_servers, notify),
// Gemini CLI `.gemini/settings.json` (mcpServers, hooks), `commands/` (`!{...}`) and
// `extensions/`, Cursor `.cursor/mcp.json` and `hooks.json`. Unguarded before, in the workdir
// and below it. The controls: the same files made before the record stay, and what those
// directories hold besides (an agent's state, `.cursor/rules`) is the tool's to write.
TEST(GitSurfaceGuard, OtherAgentsProjectConfigIsGuarded) {
  const std::vector<std::string> planted = {
      "/.codex/config.toml",      "/.gemini/settings.json",
      "/.gemini/commands/x.toml", "/.gemini/extensions/e/gemini-extension.json",
      "/.cursor/mcp.json",        "/.cursor/hooks.json",
      "/sub/.codex/config.toml"};
  const std::vector<std::string> state = {"/.gemini/tmp/chat.json", "/.cursor/rules/style.mdc",
                                          "/.codex/notes.md"};
  for (const bool before_record : {false, true}) {
    SCOPED_TRACE(before_record ? "control: made before the record" : "made by a tool");
    const std::string work = WorkdirOutOfSightOfRoot("git-guard-agents");
    for (const char* dir : {"/.codex", "/.gemini", "/.cursor", "/sub"}) {
      std::filesystem::create_directories(work + dir);
    }
    const auto plant = [&] {
      for (const std::string& path : planted) Write(work + path, "{\"command\": \"x\"}\n");
    };
    ExpectPlantedUndone(work, before_record, plant, planted, state);
  }
}

// Developer tools run project config too, with the user's rights, once the folder is trusted (by
// path, not by what the file says): VS Code's `.vscode/tasks.json` (a `folderOpen` task) and
// `settings.json` (executables), Zed's `.zed/settings.json` (language and context servers) and
// `tasks.json` (`create_worktree` hooks), opencode's `opencode.json(c)` and `.opencode/` (plugins
// and tools are code it loads), mise's config in every place it reads one (hooks run at `cd`), and
// Gemini CLI's `.gemini/.env` (GEMINI_SANDBOX names a command). Unguarded before: each stayed for
// the user's next start. An existing settings.json a tool changed is put back. The controls: the
// same files made before the record stay, and the rest of those directories is the tool's to
// write (`.vscode/launch.json`, `.zed/debug.json`, a new `.config/` and its `nextest.toml`).
TEST(GitSurfaceGuard, EditorAndToolProjectConfigIsGuarded) {
  const std::vector<std::string> planted = {"/.vscode/tasks.json",
                                            "/.zed/settings.json",
                                            "/.zed/tasks.json",
                                            "/opencode.json",
                                            "/opencode.jsonc",
                                            "/.opencode/opencode.json",
                                            "/.opencode/plugins/p.ts",
                                            "/.opencode/tools/t.ts",
                                            "/.opencode/package.json",
                                            "/.opencode/commands/c.md",
                                            "/mise.toml",
                                            "/.mise.toml",
                                            "/mise.local.toml",
                                            "/.mise.local.toml",
                                            "/.rtx.toml",
                                            "/.mise/config.toml",
                                            "/mise/config.toml",
                                            "/mise/conf.d/x.toml",
                                            "/.config/mise.toml",
                                            "/.config/mise/config.toml",
                                            "/.gemini/.env",
                                            "/sub/.vscode/tasks.json",
                                            "/sub/mise.toml"};
  const std::vector<std::string> state = {
      "/.vscode/launch.json",  "/.vscode/extensions.json",
      "/.zed/debug.json",      "/.opencode/node_modules/x/index.js",
      "/.config/nextest.toml", "/mise/notes.md"};
  const std::string settings = "/.vscode/settings.json";
  for (const bool before_record : {false, true}) {
    SCOPED_TRACE(before_record ? "control: made before the record" : "made by a tool");
    const std::string work = WorkdirOutOfSightOfRoot("git-guard-tools");
    for (const char* dir : {"/.zed", "/.opencode", "/.gemini", "/sub"}) {
      std::filesystem::create_directories(work + dir);
    }
    Write(work + settings, "{}\n");
    const auto plant = [&] {
      for (const std::string& path : planted) Write(work + path, "[hooks]\nenter = \"x\"\n");
      Write(work + settings, "{\"terminal.integrated.profiles.linux\": {\"x\": {}}}\n");
    };
    const std::vector<std::string> undone =
        ExpectPlantedUndone(work, before_record, plant, planted, state);
    EXPECT_EQ(ReadFile(work + settings) == "{}\n", !before_record);
    EXPECT_EQ(HasLine(undone, "restore .vscode/settings.json"), !before_record);
  }
}

// `.config` and `mise` are names other programs use: a kernel tree's `.config` is a file its build
// rewrites, a `mise` binary or a clone of mise's repository may sit in the workdir. None is mise's
// config, and each stays the tool's: only `.config/mise*` and `mise/config.toml` would be read.
// Before, a repository below a directory of such a name lost its config and hooks as agent config.
TEST(GitSurfaceGuard, ASharedNameThatHoldsNoConfigStaysTheTools) {
  const std::string work = WorkdirOutOfSightOfRoot("git-guard-shared");
  Write(work + "/.config", "CONFIG_X=y\n");
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  Write(work + "/.config", "CONFIG_X=n\n");
  Write(work + "/sub/.config", "CONFIG_Y=y\n");
  Write(work + "/bin/mise", "#!/bin/sh\n", 0755);
  ASSERT_EQ(system(("git init -q '" + work + "/mise'").c_str()), 0);
  const std::string config = ReadFile(work + "/mise/.git/config");
  const std::vector<std::string> undone = guard->Restore();
  EXPECT_TRUE(undone.empty()) << undone.front();
  EXPECT_EQ(ReadFile(work + "/.config"), "CONFIG_X=n\n");
  EXPECT_EQ(ReadFile(work + "/sub/.config"), "CONFIG_Y=y\n");
  EXPECT_TRUE(FileExists(work + "/bin/mise"));
  EXPECT_EQ(ReadFile(work + "/mise/.git/config"), config) << "git init's config, kept";
  EXPECT_TRUE(FileExists(work + "/mise/.git/hooks/pre-commit.sample"));
  // The control: what mise reads below them is guarded.
  Write(work + "/mise/config.toml", "[hooks]\ncd = \"x\"\n");
  std::filesystem::remove(work + "/sub/.config");
  Write(work + "/sub/.config/mise.toml", "[hooks]\ncd = \"x\"\n");
  const std::vector<std::string> again = guard->Restore();
  EXPECT_FALSE(FileExists(work + "/mise/config.toml"));
  EXPECT_FALSE(FileExists(work + "/sub/.config/mise.toml"));
  EXPECT_TRUE(HasLine(again, "mise/config.toml"));
  EXPECT_TRUE(HasLine(again, "sub/.config/mise.toml"));
}

// kMaxAbsentPaths: one directory with agent config below the workdir adds 25 paths that must not
// appear. Past the cap, the paths that did not fit (the workdir's own come last) are not
// recorded, but one that appears is still removed: the next walk plans it as it is now.
TEST(GitSurfaceGuard, WhatDidNotFitTheAbsentListIsStillRemoved) {
  const std::string work = WorkdirOutOfSightOfRoot("git-guard-absent-cap");
  for (size_t i = 0; i < kMaxAbsentPaths / 25 + 1; ++i) {
    std::filesystem::create_directories(work + "/p" + std::to_string(i) + "/.vscode");
  }
  MountPlan plan;
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig, &plan);
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  ASSERT_EQ(plan.absent.size(), kMaxAbsentPaths);
  ASSERT_EQ(std::count(plan.absent.begin(), plan.absent.end(), work + "/mise.toml"), 0);
  Write(work + "/mise.toml", "[hooks]\nenter = \"x\"\n");
  Write(work + "/.vscode/tasks.json", "{}\n");
  const std::vector<std::string> undone = guard->Restore();
  EXPECT_FALSE(FileExists(work + "/mise.toml"));
  EXPECT_FALSE(FileExists(work + "/.vscode/tasks.json"));
  EXPECT_TRUE(HasLine(undone, "removed mise.toml (agent config a tool created"));
}

// As its owner, a tool can make a directory searchable but unreadable (`chmod 0311 a`): the walk
// could not list it, but git still finds a repository committed below it by name and runs its
// fsmonitor. The walk now lists it as its owner may, and leaves its mode as it was. Run as
// nobody: root lists it anyway. The control: the same repository made before the record stays.
TEST(GitSurfaceGuard, ARepositoryBelowAnUnreadableDirectoryIsFound) {
  for (const bool before_record : {false, true}) {
    const std::string work = WorkdirOutOfSightOfRoot("git-guard-unreadable");
    const std::string top = work.substr(0, work.rfind("/levels/to/hide/it"));
    ASSERT_EQ(system(("chown -R 65534:65534 '" + top + "'").c_str()), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (!(setgroups(0, nullptr) == 0 && setresgid(65534, 65534, 65534) == 0 &&
            setresuid(65534, 65534, 65534) == 0)) {
        _exit(10);
      }
      const auto plant = [&work] {
        Write(work + "/a/b/.git/config", "[core]\n\tfsmonitor = x\n");
        return chmod((work + "/a").c_str(), 0311) == 0;
      };
      if (before_record && !plant()) _exit(11);
      Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
      if (!guard.ok()) _exit(12);
      if (!before_record && !plant()) _exit(11);
      const std::vector<std::string> undone = guard->Restore();
      struct stat st;
      if (stat((work + "/a").c_str(), &st) != 0 || (st.st_mode & 07777) != 0311) _exit(13);
      if (FileExists(work + "/a/b/.git/config") != before_record) _exit(14);
      _exit(HasLine(undone, "fsmonitor") == before_record ? 15 : 0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_EQ(status, 0) << (before_record ? "control" : "planted by a tool") << ": exit "
                         << WEXITSTATUS(status)
                         << " (11 plant, 12 take, 13 mode, 14 config, 15 report)";
  }
}

// The repository's config can send git elsewhere in the worktree: core.hooksPath (husky's
// `.husky/_`, git-ignored, so a planted hook there never shows in `git status`) and include.path
// (its fsmonitor runs). Both ran at the user's next commit or status. Now what they name is
// guarded like .git/hooks. The control: the same files without the config keys are plain files.
TEST(GitSurfaceGuard, HooksPathAndIncludesInTheWorktreeAreGuarded) {
  for (const bool configured : {true, false}) {
    SCOPED_TRACE(configured ? "named by the config" : "control: not named");
    const std::string work = WorkdirOutOfSightOfRoot("git-guard-hookspath");
    ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
    Write(work + "/.husky/_/h", "#!/bin/sh\n", 0755);
    Write(work + "/.gitconfig.project", "[user]\n\tname = x\n");
    if (configured) {
      ASSERT_EQ(system(("git -C '" + work + "' config core.hooksPath .husky/_ && git -C '" + work +
                        "' config include.path ../.gitconfig.project")
                           .c_str()),
                0);
    }
    Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
    ASSERT_TRUE(guard.ok()) << guard.status().ToString();
    Write(work + "/.husky/_/h", "#!/bin/sh\ntouch /tmp/pwned\n", 0755);
    Write(work + "/.husky/_/pre-push", "#!/bin/sh\n", 0755);
    Write(work + "/.gitconfig.project", "[core]\n\tfsmonitor = x\n");
    const std::vector<std::string> undone = guard->Restore();
    EXPECT_EQ(ReadFile(work + "/.husky/_/h") == "#!/bin/sh\n", configured);
    EXPECT_EQ(FileExists(work + "/.husky/_/pre-push"), !configured);
    EXPECT_EQ(ReadFile(work + "/.gitconfig.project") == "[user]\n\tname = x\n", configured);
    EXPECT_EQ(HasLine(undone, ".husky/_/pre-push"), configured);
  }
}

// A config's paths as git reads them: relative hooksPath from where hooks run, includes from the
// file's directory, `~/` from home, any includeIf, quotes and a header with its key on one line.
TEST(GitConfigPaths, FindsWhatGitWouldRunOrRead) {
  const std::vector<GitConfigPath> paths = GitConfigPaths(
      "[core]\n\tHooksPath = \"hooks dir\" ; a comment\n[include] path = ../shared.cfg\n"
      "[includeIf \"gitdir:/x/\"]\n\tpath = ~/.more\n[alias]\n\tpath = no\n",
      "/w/.git/config", "/w", "/home/u");
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[0].path, "/w/hooks dir");
  EXPECT_FALSE(paths[0].include);
  EXPECT_EQ(paths[1].path, "/w/shared.cfg");
  EXPECT_TRUE(paths[1].include);
  EXPECT_EQ(paths[2].path, "/home/u/.more");
}

// Read as git reads it, checked against git itself (`git config -f`): a byte order mark before
// the first header (an editor's) hid it, and a value continued with a backslash swallows the next
// line, a header too, so keys below it stay in the section before. Both let a tool's hooksPath
// or merge strategy pass the guard unseen (red team). The plain file is the control.
TEST(GitConfigEntries, ReadsAByteOrderMarkAndContinuedValuesAsGitDoes) {
  const std::string dir = MakeTempDir("git-config-parse");
  const std::vector<std::string> texts = {
      "[core]\n\thooksPath = .githooks\n",
      "\xEF\xBB\xBF[core]\n\thooksPath = .githooks\n",
      "[core]\r\n\thooksPath = .githooks\r\n",
      "[core]\n\tx = y\\\n[alias]\n\thooksPath = .githooks\n",
      "[alias]\n\tx = y\\\n[core]\n\thooksPath = .githooks\n",
      "[core]\n\tx = \"a\\\nb\" # c\\\n\thooksPath = .githooks\n"};
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    Write(dir + "/config", text);
    const std::string git =
        Trim(RunOutput("git config -f '" + dir + "/config' --get core.hookspath || true"));
    const std::vector<GitConfigPath> ours = GitConfigPaths(text, "/w/.git/config", "/w", "/h");
    EXPECT_EQ(ours.empty() ? "" : ours[0].path, git.empty() ? "" : "/w/" + git);
  }
  const std::string opts = "[options]\n\tstrategy-option = a\\\n[core]\n\tstrategy = x/../evil\n";
  Write(dir + "/opts", opts);
  EXPECT_EQ(Trim(RunOutput("git config -f '" + dir + "/opts' --get options.strategy")),
            "x/../evil");
}

// A part of the surface the walk cannot see whole (here a directory 17 levels down; a flood past
// the walk's budget or a directory a tool chmodded stops it the same way) is put back whole: a
// hook planted beside it goes too, wherever the listing put it. Before, the walk stopped at its
// cap and compared only what it had seen, so a flood listed first hid a hook. The control: the
// same plant without the deep directory is undone entry by entry.
TEST(GitSurfaceGuard, PutsBackWholeWhatItCannotWalkWhole) {
  for (const bool deep : {false, true}) {
    SCOPED_TRACE(deep ? "with a deep directory" : "control");
    const std::string work = WorkdirOutOfSightOfRoot("git-guard-whole");
    ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
    const std::string samples = ReadFile(work + "/.git/hooks/pre-commit.sample");
    Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
    ASSERT_TRUE(guard.ok()) << guard.status().ToString();
    Write(work + "/.git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/x\n", 0755);
    if (deep) Write(Deep(work + "/.git/hooks/junk", 16) + "/x", "x\n");
    std::filesystem::remove(work + "/.git/hooks/pre-commit.sample");
    const std::vector<std::string> undone = guard->Restore();
    EXPECT_FALSE(FileExists(work + "/.git/hooks/pre-commit"));
    EXPECT_FALSE(FileExists(work + "/.git/hooks/junk"));
    EXPECT_EQ(ReadFile(work + "/.git/hooks/pre-commit.sample"), samples);
    // junk is 1 level down, its 15th d 16: that one may hold nothing.
    EXPECT_EQ(HasLine(undone, "restored .git/hooks whole (" + Deep(".git/hooks/junk", 15) +
                                  " goes more than 16 levels down)"),
              deep);
    EXPECT_EQ(HasLine(undone, "remove .git/hooks/pre-commit"), !deep);
    EXPECT_TRUE(guard->Restore().empty()) << "the record is back";
  }
}

// A surface the walk cannot record whole is refused, with the reason: what a record misses could
// not be put back. The control: the same repository without the deep directory.
TEST(GitSurfaceGuard, RefusesARecordItCannotTakeWhole) {
  const std::string work = WorkdirOutOfSightOfRoot("git-guard-big");
  ASSERT_EQ(system(("git init -q '" + work + "'").c_str()), 0);
  ASSERT_TRUE(GitSurfaceGuard::Take(work, kNoUserGitConfig).ok()) << "the control";
  Write(Deep(work + "/.git/info/deep", 16) + "/x", "x\n");
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
  ASSERT_FALSE(guard.ok());
  EXPECT_EQ(guard.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(
      guard.status().message().find("git trust surface: .git/info cannot be recorded whole (" +
                                    Deep(".git/info/deep", 15) + " goes more than 16 levels down)"),
      std::string::npos)
      << guard.status().message();
  // The same in a --writable tree refuses the record too, naming the tree: what it misses there
  // could not be put back either. The control: that tree is fine as the workdir's alone.
  const std::string other = WorkdirOutOfSightOfRoot("git-guard-big-other");
  ASSERT_TRUE(GitSurfaceGuard::Take(other, kNoUserGitConfig).ok());
  Result<GitSurfaceGuard> beside = GitSurfaceGuard::Take(other, kNoUserGitConfig, nullptr, {work});
  ASSERT_FALSE(beside.ok());
  EXPECT_EQ(beside.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(
      beside.status().message().rfind("--writable " + work + ": git trust surface: .git/info", 0),
      0u)
      << beside.status().message();
}

// A workdir of "/" (--allow-broad-workdir) lets tasks write every repository on the machine; the
// guard records their surfaces too. It recorded none of them while its "beneath" check counted no
// path beneath "/" (checked against that build: the hook stayed).
TEST(GitSurfaceGuard, UndoesAPlantedHookUnderAWorkdirOfRoot) {
  const std::string repo =
      std::filesystem::canonical(MakeTempDir("git-guard-root")).string() + "/repo";
  ASSERT_EQ(system(("git init -q '" + repo + "'").c_str()), 0);
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take("/", kNoUserGitConfig);
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  Write(repo + "/.git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/x\n", 0755);
  const std::vector<std::string> undone = guard->Restore();
  EXPECT_FALSE(FileExists(repo + "/.git/hooks/pre-commit"));
  EXPECT_TRUE(HasLine(undone, repo.substr(1) + "/.git/hooks/pre-commit"));
}

// Runs `script` in `dir` with a committer set and no editor; its exit status.
int GitIn(const std::string& dir, const std::string& script) {
  return system(("cd '" + dir +
                 "' && export GIT_AUTHOR_NAME=u GIT_AUTHOR_EMAIL=u@x GIT_COMMITTER_NAME=u "
                 "GIT_COMMITTER_EMAIL=u@x GIT_EDITOR=true && " +
                 script + " >/dev/null 2>&1")
                    .c_str());
}

// A repository in `dir` whose `git rebase main side` stopped on a conflict in f, two picks left.
void StartRebase(const std::string& dir) {
  ASSERT_EQ(GitIn(dir,
                  "git init -q -b main . && echo a > f && git add f && git commit -qm a && git "
                  "checkout -qb side && echo b > f && git commit -qam b && echo c > g && git add g "
                  "&& git commit -qm c && echo d > h && git add h && git commit -qm d && git "
                  "checkout -q main && echo x > f && git commit -qam x"),
            0);
  ASSERT_NE(GitIn(dir, "git rebase main side"), 0);
  ASSERT_TRUE(FileExists(dir + "/.git/rebase-merge/git-rebase-todo"));
}

// What makes `git rebase --continue` run a command: an exec line (`x` for short) in the todo, and
// a strategy that is not git's own (`git-merge-x/../evil`: ./evil, beside a git-merge-x/).
void PlantInRebase(const std::string& dir) {
  const std::string todo = dir + "/.git/rebase-merge/git-rebase-todo";
  Write(todo, "exec touch ran-exec\n" + ReadFile(todo) + "x touch ran-x\n");
  Write(dir + "/.git/rebase-merge/strategy", "x/../evil\n");
  Write(dir + "/git-merge-x/keep", "");
  Write(dir + "/evil", "#!/bin/sh\ntouch ran-strategy\nexit 1\n", 0755);
}

// An operation in progress that a tool left to run a command at the user's `git rebase
// --continue` or `git cherry-pick --continue`: exec lines and a strategy in the workdir's rebase,
// exec lines in the rebase of a repository the tool made (new/), a strategy in sequencer/opts
// and an exec line in a linked worktree's rebase (.git/worktrees/wt/rebase-merge). The guard
// drops the exec lines it did not record and the strategies, and the rebase a tool started stays
// continuable: `git rebase --continue` completes and runs nothing. The control: the same made
// before the record stays, and git runs it. Before, nothing here was looked at.
TEST(GitSurfaceGuard, AnOperationInProgressAToolLeftRunsNothing) {
  for (const bool before_record : {false, true}) {
    SCOPED_TRACE(before_record ? "control: made before the record" : "made by a tool");
    const std::string work = WorkdirOutOfSightOfRoot("git-guard-operation");
    ASSERT_EQ(GitIn(work,
                    "git init -q -b main . && git commit -q --allow-empty -m a && git "
                    "worktree add -q --detach wt"),
              0);
    const std::string wt_todo = work + "/.git/worktrees/wt/rebase-merge/git-rebase-todo";
    const auto plant = [&] {
      StartRebase(work + "/repo");
      PlantInRebase(work + "/repo");
      StartRebase(work + "/new");
      Write(work + "/new/.git/rebase-merge/git-rebase-todo",
            ReadFile(work + "/new/.git/rebase-merge/git-rebase-todo") + "exec touch ran-new\n");
      Write(work + "/repo/.git/sequencer/opts", "[options]\n\tstrategy = x/../evil\n");
      Write(wt_todo, "exec touch ran-wt\n");
    };
    std::filesystem::create_directories(work + "/repo");
    std::filesystem::create_directories(work + "/new");
    if (before_record) plant();
    Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
    ASSERT_TRUE(guard.ok()) << guard.status().ToString();
    if (!before_record) plant();
    const std::vector<std::string> undone = guard->Restore();
    EXPECT_EQ(HasLine(undone,
                      "repo/.git/rebase-merge/git-rebase-todo (a tool's: `git rebase "
                      "--continue` would run \"exec touch ran-exec\")"),
              !before_record);
    EXPECT_EQ(HasLine(undone, "would run git-merge-x/../evil"), !before_record);
    EXPECT_EQ(FileExists(work + "/repo/.git/sequencer/opts"), before_record);
    // The worktree's admin dir is its own tools' (HEAD, index): the line goes, not the file.
    EXPECT_EQ(ReadFile(wt_todo).find("exec touch ran-wt") != std::string::npos, before_record);
    for (const std::string repo : {"repo", "new"}) {
      SCOPED_TRACE(repo);
      const std::string dir = work + "/" + repo;
      EXPECT_EQ(GitIn(dir, "echo b > f && git add f && git rebase --continue") == 0,
                !before_record || repo == "new")
          << "the rebase stays continuable";
      EXPECT_EQ(FileExists(dir + "/ran-" + (repo == "new" ? "new" : "exec")), before_record);
    }
    EXPECT_EQ(FileExists(work + "/repo/ran-strategy"), before_record);
  }
}

// A repository outside the workdir in a --writable tree: the repository of the worktree that is
// the workdir, made writable so that tools can commit. A hook and an fsmonitor planted there, an
// exec line in the worktree's rebase todo (in the repository's worktrees/work/) and agent config
// at its top ran at the user's next git command or agent start: the guard walked the workdir
// alone (red team). The control: the guard of the workdir alone keeps all of it. Either way the
// index the tool staged stays, so the rebase goes on.
TEST(GitSurfaceGuard, AWritableRepositoryOutsideTheWorkdirIsGuardedAsTheWorkdirIs) {
  for (const bool writable : {true, false}) {
    SCOPED_TRACE(writable ? "the repository --writable" : "control: the workdir's guard alone");
    const std::string root = WorkdirOutOfSightOfRoot("git-guard-trees");
    const std::string repo = root + "/repo", work = root + "/work";
    const std::string todo = repo + "/.git/worktrees/work/rebase-merge/git-rebase-todo";
    std::filesystem::create_directories(repo);
    ASSERT_EQ(GitIn(repo,
                    "git init -q -b main . && echo a > f && git add f && git commit -qm a && git "
                    "checkout -qb side && echo b > f && git commit -qam b && echo c > g && git add "
                    "g && git commit -qm c && git checkout -q main && echo x > f && git commit "
                    "-qam x && git worktree add -q --detach ../work main"),
              0);
    ASSERT_NE(GitIn(work, "git rebase main side"), 0);
    ASSERT_TRUE(FileExists(todo));
    Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(
        work, kNoUserGitConfig, nullptr,
        writable ? std::vector<std::string>{repo} : std::vector<std::string>{});
    ASSERT_TRUE(guard.ok()) << guard.status().ToString();
    Write(repo + "/.git/hooks/pre-commit", "#!/bin/sh\ntouch ran-hook\n", 0755);
    Write(repo + "/.git/config",
          ReadFile(repo + "/.git/config") + "[core]\n\tfsmonitor = touch ran-fsmonitor\n");
    Write(todo, "exec touch ran-exec\n" + ReadFile(todo));
    Write(repo + "/.claude/settings.json", "{\"hooks\": {}}\n");
    ASSERT_EQ(GitIn(work, "echo b > f && git add f"), 0);
    const std::vector<std::string> undone = guard->Restore();
    std::string all;
    for (const std::string& line : undone) all += line + "\n";
    EXPECT_EQ(HasLine(undone, repo + ": remove .git/hooks/pre-commit"), writable) << all;
    EXPECT_EQ(HasLine(undone, repo + ": restore .git/config"), writable);
    EXPECT_EQ(HasLine(undone, repo + ": remove 1 exec line(s) from .git/worktrees/work/"),
              writable);
    EXPECT_EQ(HasLine(undone, repo + ": remove .claude"), writable);
    EXPECT_EQ(FileExists(repo + "/.claude"), !writable);
    // What the tool's own `git add` ran (inside, in the sandbox) is not what runs outside.
    std::filesystem::remove(repo + "/ran-fsmonitor");
    std::filesystem::remove(work + "/ran-fsmonitor");
    EXPECT_EQ(GitIn(work, "git rebase --continue"), 0) << "the staged index stayed";
    EXPECT_EQ(FileExists(work + "/ran-exec"), !writable);
    EXPECT_EQ(GitIn(repo, "git commit -q --allow-empty -m y"), 0);
    EXPECT_EQ(FileExists(repo + "/ran-hook"), !writable);
    EXPECT_EQ(FileExists(repo + "/ran-fsmonitor") || FileExists(work + "/ran-fsmonitor"),
              !writable);
  }
}

// The journal's form of such a guard (Serialize, Reload: a keeper or the next start puts the
// surface back) holds the other trees: a hook planted in the --writable repository after the
// record is removed by the reloaded guard. A tree made again since is left out, the rest kept.
TEST(GitSurfaceGuard, AReloadedRecordGuardsTheOtherTreesToo) {
  const std::string root = WorkdirOutOfSightOfRoot("git-guard-trees-reload");
  const std::string repo = root + "/repo", gone = root + "/gone", work = root + "/work";
  for (const std::string& dir : {repo, gone, work}) {
    std::filesystem::create_directories(dir);
    ASSERT_EQ(GitIn(dir, "git init -q"), 0);
  }
  Result<GitSurfaceGuard> guard =
      GitSurfaceGuard::Take(work, kNoUserGitConfig, nullptr, {repo, gone});
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  ASSERT_EQ(guard->descriptors(), 3u);
  const std::string record = guard->Serialize();
  std::filesystem::remove_all(gone);
  std::filesystem::create_directories(gone);
  Result<GitSurfaceGuard> reloaded = GitSurfaceGuard::Reload(record, kNoUserGitConfig);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_EQ(reloaded->descriptors(), 2u) << "the tree made again is left out";
  Write(repo + "/.git/hooks/post-checkout", "#!/bin/sh\n", 0755);
  Write(work + "/.git/hooks/post-checkout", "#!/bin/sh\n", 0755);
  const std::vector<std::string> undone = reloaded->Restore(GitSurfaceGuard::After::kDone);
  EXPECT_TRUE(HasLine(undone, repo + ": remove .git/hooks/post-checkout"));
  EXPECT_NE(std::find(undone.begin(), undone.end(), "remove .git/hooks/post-checkout"),
            undone.end());
  EXPECT_FALSE(FileExists(repo + "/.git/hooks/post-checkout"));
  EXPECT_FALSE(FileExists(work + "/.git/hooks/post-checkout"));
}

// A worktree's admin dir (REPO/.git/worktrees/wt) in a writable tree renamed away and replaced by
// a link to a copy whose commondir names a planted common dir with a pre-commit hook: the user's
// next commit in the worktree followed it (red team), as the workdir or as the --writable tree.
// The admin dir is now guarded as a .git directory: the link goes, so git runs nothing. The
// control: the same made before the record stays, and the hook runs.
TEST(GitSurfaceGuard, AWorktreesAdminDirSwappedForALinkRunsNothing) {
  for (const bool worktree_is_workdir : {true, false}) {
    for (const bool before_record : {false, true}) {
      SCOPED_TRACE(std::string(worktree_is_workdir ? "--workdir WT --writable REPO"
                                                   : "--workdir REPO --writable WT") +
                   (before_record ? ", control: made before the record" : ""));
      const std::string root = WorkdirOutOfSightOfRoot("git-guard-admin-link");
      const std::string repo = root + "/repo", wt = root + "/wt",
                        admin = repo + "/.git/worktrees/wt";
      std::filesystem::create_directories(repo);
      ASSERT_EQ(GitIn(repo,
                      "git init -q && git commit -q --allow-empty -m a && git worktree add "
                      "-q --detach ../wt"),
                0);
      const auto plant = [&] {
        ASSERT_EQ(GitIn(repo,
                        "mkdir -p node_modules && cp -a .git/worktrees/wt node_modules/evil "
                        "&& cp -a .git node_modules/evilcommon && printf '#!/bin/sh\\ntouch "
                        "ran-hook\\n' > node_modules/evilcommon/hooks/pre-commit && chmod "
                        "755 node_modules/evilcommon/hooks/pre-commit && echo " +
                            repo +
                            "/node_modules/evilcommon > node_modules/evil/commondir && mv "
                            ".git/worktrees/wt .git/worktrees/wt.old && ln -s "
                            "../../node_modules/evil .git/worktrees/wt"),
                  0);
      };
      if (before_record) plant();
      Result<GitSurfaceGuard> guard =
          worktree_is_workdir ? GitSurfaceGuard::Take(wt, kNoUserGitConfig, nullptr, {repo})
                              : GitSurfaceGuard::Take(repo, kNoUserGitConfig, nullptr, {wt});
      ASSERT_TRUE(guard.ok()) << guard.status().ToString();
      if (!before_record) plant();
      const std::vector<std::string> undone = guard->Restore();
      EXPECT_EQ(std::filesystem::is_symlink(admin), before_record);
      (void)GitIn(wt, "git commit -q --allow-empty -m outside");
      EXPECT_EQ(FileExists(wt + "/ran-hook"), before_record) << ::testing::PrintToString(undone);
    }
  }
}

// A workdir swapped for a new directory of that name (`mv sub sub.old; mkdir sub`) below a
// --writable tree made the journal refuse its whole record, the tree's too: what a tool planted
// in the tree stayed after a SIGKILL of every forkbox process (red team). The tree's part still
// goes back; the workdir's is named as not put back. The control: a record of the workdir alone
// is refused as before.
TEST(GitSurfaceGuard, AReloadedRecordPutsBackTheOtherTreesWhenTheWorkdirIsGone) {
  const std::string repo = WorkdirOutOfSightOfRoot("git-guard-workdir-gone");
  const std::string work = repo + "/sub";
  std::filesystem::create_directories(work);
  ASSERT_EQ(GitIn(repo, "git init -q"), 0);
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig, nullptr, {repo});
  Result<GitSurfaceGuard> alone = GitSurfaceGuard::Take(work, kNoUserGitConfig);
  ASSERT_TRUE(guard.ok() && alone.ok());
  const std::string record = guard->Serialize(), alone_record = alone->Serialize();
  Write(repo + "/.claude/settings.json", "{\"hooks\": {}}\n");
  std::filesystem::rename(work, repo + "/sub.old");
  std::filesystem::create_directories(work);
  EXPECT_EQ(GitSurfaceGuard::Reload(alone_record, kNoUserGitConfig).status().code(),
            Status::Code::kNotFound);
  Result<GitSurfaceGuard> reloaded = GitSurfaceGuard::Reload(record, kNoUserGitConfig);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  const std::vector<std::string> undone = reloaded->Restore(GitSurfaceGuard::After::kDone);
  EXPECT_TRUE(HasLine(undone, "not put back: " + work + " no longer leads to the directory"))
      << ::testing::PrintToString(undone);
  EXPECT_TRUE(HasLine(undone, repo + ": remove .claude")) << ::testing::PrintToString(undone);
  EXPECT_FALSE(FileExists(repo + "/.claude"));
}

// The two forms of sequencer/opts git reads as `options.strategy = x/../evil` and the guard did
// not (a byte order mark; a continued value swallowing a header): git-merge-x/../evil ran from
// the worktree at `git cherry-pick --continue` (red team). The control: the same files made
// before the record stay.
TEST(GitSurfaceGuard, ACherryPicksOptsGitReadsAsAStrategyIsUndoneInEveryForm) {
  for (const std::string opts :
       {"\xEF\xBB\xBF[options]\n\tstrategy = x/../evil\n",
        "[options]\n\tstrategy-option = a\\\n[core]\n\tstrategy = x/../evil\n"}) {
    for (const bool before_record : {false, true}) {
      SCOPED_TRACE(opts + (before_record ? " control: made before the record" : ""));
      const std::string work = WorkdirOutOfSightOfRoot("git-guard-opts");
      ASSERT_EQ(GitIn(work, "git init -q -b main ."), 0);
      if (before_record) Write(work + "/.git/sequencer/opts", opts);
      Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, kNoUserGitConfig);
      ASSERT_TRUE(guard.ok()) << guard.status().ToString();
      if (!before_record) Write(work + "/.git/sequencer/opts", opts);
      const std::vector<std::string> undone = guard->Restore();
      EXPECT_EQ(HasLine(undone, "would run git-merge-x/../evil"), !before_record);
      EXPECT_EQ(FileExists(work + "/.git/sequencer/opts"), before_record);
    }
  }
}

// The user's own git config is what the caller resolved and gave (Policy::user_git_config), not
// what this process read first: guards taken in one process with a global core.hooksPath of
// .githooks, then of hooks-b, each put back a hook planted in their own, in the workdir's
// repository and in one a tool made since, and keep the other's; so does each guard reloaded from
// its record (the journal's, given the config again: the record does not hold it). The control:
// given none, every hook stays. Before, read once per process (TheUserGitConfig: this environment,
// which names none), the guards followed the same config, and kept every hook.
TEST(GitSurfaceGuard, FollowsTheUserGitConfigItIsGiven) {
  const std::string work = WorkdirOutOfSightOfRoot("git-guard-user-config");
  ASSERT_EQ(GitIn(work, "git init -q"), 0);
  for (const std::string hooks : {".githooks", "hooks-b", ""}) {
    for (const bool reloaded : {false, true}) {
      SCOPED_TRACE((hooks.empty() ? "control: no config" : "core.hooksPath = " + hooks) +
                   (reloaded ? ", reloaded" : ""));
      UserGitConfig user;
      if (!hooks.empty()) user.hooks_paths = {hooks};
      Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(work, user);
      ASSERT_TRUE(guard.ok()) << guard.status().ToString();
      if (reloaded) guard = GitSurfaceGuard::Reload(guard->Serialize(), user);
      ASSERT_TRUE(guard.ok()) << guard.status().ToString();
      ASSERT_EQ(GitIn(work, "git init -q sub"), 0);
      for (const std::string& repo : {work, work + "/sub"}) {
        for (const std::string dir : {".githooks", "hooks-b"}) {
          Write(repo + "/" + dir + "/pre-commit", "#!/bin/sh\n", 0755);
        }
      }
      const std::vector<std::string> undone = guard->Restore(GitSurfaceGuard::After::kDone);
      for (const std::string& repo : {work, work + "/sub"}) {
        for (const std::string dir : {".githooks", "hooks-b"}) {
          EXPECT_EQ(FileExists(repo + "/" + dir + "/pre-commit"), dir != hooks)
              << repo << "/" << dir << ": " << ::testing::PrintToString(undone);
          std::filesystem::remove_all(repo + "/" + dir);
        }
      }
      std::filesystem::remove_all(work + "/sub");
    }
  }
}

// The user's own config counts in every repository: a relative core.hooksPath there (.githooks)
// names a directory in each worktree, guarded like the repository's own (as an included file in
// the workdir is). Read once per policy (ResolvePolicy: Policy::user_git_config); here
// ReadUserGitConfig of a given environment. GIT_CONFIG_NOSYSTEM changes nothing: the union of
// every file git may read.
TEST(UserGitConfig, ReadsGlobalAndSystemConfigAndWhatTheyInclude) {
  const std::string dir = std::filesystem::canonical(MakeTempDir("user-git-config")).string();
  Write(dir + "/home/.gitconfig", "[core]\n\thooksPath = .githooks\n[include]\n\tpath = ~/more\n");
  Write(dir + "/home/more", "[core]\n\thooksPath = ~/hooks\n");
  Write(dir + "/xdg/git/config", "[core]\n\thooksPath = ./xdg-hooks/\n");
  Write(dir + "/global", "[core]\n\thooksPath = global-hooks\n");
  Write(dir + "/system", "[includeIf \"gitdir:/x/\"]\n\tpath = /w/inc\n");
  const std::map<std::string, std::string> env = {{"HOME", dir + "/home"},
                                                  {"XDG_CONFIG_HOME", dir + "/xdg"},
                                                  {"GIT_CONFIG_GLOBAL", dir + "/global"},
                                                  {"GIT_CONFIG_SYSTEM", dir + "/system"},
                                                  {"GIT_CONFIG_NOSYSTEM", "1"}};
  const UserGitConfig config = ReadUserGitConfig([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  const auto has = [](const std::vector<std::string>& list, const std::string& path) {
    return std::find(list.begin(), list.end(), path) != list.end();
  };
  EXPECT_TRUE(has(config.hooks_paths, ".githooks"));
  EXPECT_TRUE(has(config.hooks_paths, dir + "/home/hooks"));
  EXPECT_TRUE(has(config.hooks_paths, "xdg-hooks"));
  EXPECT_TRUE(has(config.hooks_paths, "global-hooks"));
  EXPECT_TRUE(has(config.includes, dir + "/home/more"));
  EXPECT_TRUE(has(config.includes, "/w/inc"));
}

// A user config that includes itself N times is read once, its paths listed once: it was read
// N^4 times, by every forkbox and forkbox-child at its start, and listed as often.
TEST(UserGitConfig, ReadsAFileThatIncludesItselfOnce) {
  const std::string dir = std::filesystem::canonical(MakeTempDir("user-git-self")).string();
  std::string text = "[core]\n\thooksPath = .githooks\n[include]\n";
  for (int i = 0; i < 20; ++i) text += "\tpath = ~/.gitconfig\n";
  Write(dir + "/.gitconfig", text);
  const UserGitConfig config = ReadUserGitConfig([&dir](const char* name) -> const char* {
    return std::string_view(name) == "HOME" ? dir.c_str() : nullptr;
  });
  EXPECT_EQ(config.hooks_paths, std::vector<std::string>{".githooks"});
  EXPECT_EQ(config.includes.size(), 20u) << "each line of the one read names it once";
}

// A value continued over 2,000,000 lines (6 MB) is read in one pass: the whole value so far was
// parsed again after each line, so a tool's config took minutes to walk after every tool call
// (this one: hours, far past ctest's timeout).
TEST(GitConfigEntries, ReadsAValueContinuedOverManyLinesInOnePass) {
  std::string text = "[core]\n\thooksPath = ";
  const size_t lines = 2'000'000;
  for (size_t i = 0; i < lines; ++i) text += "a\\\n";
  text += "b\n";
  const std::vector<GitConfigPath> paths = GitConfigPaths(text, "/w/.git/config", "/w", "/h");
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0].path, "/w/" + std::string(lines, 'a') + "b");
}

}  // namespace
}  // namespace forkbox::sandbox
