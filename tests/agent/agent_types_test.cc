// Agent types (agent/agent_types.h): the frontmatter parser, the four directories and their
// precedence, bad files, and the task tool's subagent_type enum.
#include "agent/agent_types.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "agent/tools.h"

namespace forkbox::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class AgentFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-agents-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    workdir_ = root_ + "/project";
    home_ = root_ + "/home";
    fs::create_directories(workdir_);
    fs::create_directories(home_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string Write(const std::string& dir, const std::string& file, const std::string& text) {
    fs::create_directories(dir);
    std::string path = dir + "/" + file;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string ProjectForkbox() const { return workdir_ + "/.forkbox/agents"; }
  std::string ProjectClaude() const { return workdir_ + "/.claude/agents"; }
  std::string UserForkbox() const { return home_ + "/.config/forkbox/agents"; }
  std::string UserClaude() const { return home_ + "/.claude/agents"; }
  AgentCatalog Load() const { return LoadAgentCatalog(AgentDirs(workdir_, home_)); }

  std::string root_, workdir_, home_;
};

std::string Agent(const std::string& name, const std::string& description,
                  const std::string& extra = "", const std::string& body = "Be brief.") {
  return "---\nname: " + name + "\ndescription: " + description + "\n" + extra + "---\n" + body +
         "\n";
}

TEST(AgentTypesTest, BuiltinsAreGeneralAndReadOnlyExplore) {
  std::vector<AgentType> builtins = BuiltinAgentTypes();
  ASSERT_EQ(builtins.size(), 2u);
  EXPECT_EQ(builtins[0].name, "general");
  EXPECT_THAT(builtins[0].tools, ElementsAre("bash", "read_file", "write_file", "edit_file"));
  EXPECT_EQ(builtins[0].write, WriteAccess::kWorkdir);
  EXPECT_EQ(builtins[0].network, NetworkAccess::kInherit);
  EXPECT_EQ(builtins[1].name, "explore");
  EXPECT_THAT(builtins[1].tools, ElementsAre("bash", "read_file"));
  EXPECT_EQ(builtins[1].write, WriteAccess::kNone);
  EXPECT_EQ(builtins[1].network, NetworkAccess::kOff);
  EXPECT_THAT(builtins[1].prompt, HasSubstr("line number"));
}

// --sandbox=read-only: every agent of the catalog becomes write: none without write_file and
// edit_file, and its start frame says so; an agent that was read-only already stays as it was
// (no note). The control: the catalog as loaded sends write "workdir" with all four tools.
TEST(AgentTypesTest, MakeReadOnlyLeavesNoAgentThatWrites) {
  AgentCatalog catalog;
  catalog.agents = BuiltinAgentTypes();
  ipc::StartMessage before;
  ApplyAgentType(*catalog.Find("general"), &before);
  EXPECT_EQ(before.agent.write, "workdir");
  EXPECT_EQ(before.agent.tools.size(), 4u);
  const AgentType explore = *catalog.Find("explore");
  MakeReadOnly(&catalog);
  const AgentType& general = *catalog.Find("general");
  EXPECT_EQ(general.write, WriteAccess::kNone);
  EXPECT_EQ(general.tools, (std::vector<std::string>{"bash", "read_file"}));
  ASSERT_EQ(general.notes.size(), 1u);
  EXPECT_NE(general.notes[0].find("--sandbox=read-only"), std::string::npos);
  ipc::StartMessage start;
  ApplyAgentType(general, &start);
  EXPECT_EQ(start.agent.write, "none");
  EXPECT_EQ(start.agent.tools, (std::vector<std::string>{"bash", "read_file"}));
  EXPECT_EQ(catalog.Find("explore")->tools, explore.tools);
  EXPECT_TRUE(catalog.Find("explore")->notes.empty());
}

// --tools and --disallowed-tools: forkbox's names or Claude Code's, in any order and repeated, come
// out as forkbox's in one order; an unknown tool and a per-command rule are refused, by name.
TEST(AgentTypesTest, ToolListsTakeEitherSpellingAndRefuseWhatForkboxLacks) {
  Result<std::vector<std::string>> listed = ParseToolList("Task, edit_file Bash,,bash\tRead");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_THAT(*listed, ElementsAre("bash", "read_file", "edit_file", "task"));
  EXPECT_TRUE(ParseToolList("")->empty());
  EXPECT_THAT(*ParseToolList("Agent"), ElementsAre("task"));  // Claude Code's name since 2.1.63.
  Result<std::vector<std::string>> unknown = ParseToolList("Read,frobnicate");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown tool 'frobnicate'"));
  Result<std::vector<std::string>> claude = ParseToolList("Read,WebFetch");
  ASSERT_FALSE(claude.ok());
  EXPECT_THAT(claude.status().message(),
              HasSubstr("'WebFetch' is a Claude Code tool forkbox does not have"));
  Result<std::vector<std::string>> mcp = ParseToolList("mcp__github__create_issue");
  ASSERT_FALSE(mcp.ok());
  EXPECT_THAT(mcp.status().message(), HasSubstr("an MCP tool; forkbox has no MCP servers"));
  Result<std::vector<std::string>> rule = ParseToolList("Bash(git log:*)");
  ASSERT_FALSE(rule.ok());
  EXPECT_THAT(rule.status().message(), HasSubstr("'Bash(git log:*)'"));

  EXPECT_THAT(*SelectTools("default", {}),
              ElementsAre("bash", "read_file", "write_file", "edit_file", "task"));
  EXPECT_THAT(*SelectTools("default", {"Bash", "write_file,Task"}),
              ElementsAre("read_file", "edit_file"));
  EXPECT_THAT(*SelectTools("read_file,bash", {"bash"}), ElementsAre("read_file"));
  EXPECT_TRUE(SelectTools("", {})->empty());
  EXPECT_THAT(SelectTools("default", {"Grep"}).status().message(), HasSubstr("--disallowed-tools"));
}

// The words the CLI takes after a --tools or --disallowed-tools value as more of the list:
// tool names of either spelling in any case, Claude Code's tools forkbox lacks, rules and MCP
// tools, alone or several in one word; never a sentence, an option or a broken rule.
TEST(AgentTypesTest, AToolListWordIsMadeOfToolNamesOnly) {
  for (const char* word : {"Edit", "bash", "read_file", "Read,Grep", "Write Edit", "Agent",
                           "webfetch", "Bash(git log:*)", "mcp__github__create_issue"}) {
    EXPECT_TRUE(IsToolListWord(word)) << word;
  }
  for (const char* word : {"", ",", "explain main.c", "Edit the README", "fix it", "-p", "Bash(",
                           "Bash(x)y", "Frob(x)", "main.c"}) {
    EXPECT_FALSE(IsToolListWord(word)) << word;
  }
}

// Each agent keeps only the session's tools, its prompt saying which are gone; the control: with
// every tool offered the catalog is unchanged.
TEST(AgentTypesTest, RestrictToolsTakesTheSessionsToolsFromEveryAgent) {
  AgentCatalog catalog;
  catalog.agents = BuiltinAgentTypes();
  const AgentCatalog before = catalog;
  RestrictTools(&catalog, *SelectTools("default", {}));
  for (size_t i = 0; i < catalog.agents.size(); ++i) {
    EXPECT_EQ(catalog.agents[i].tools, before.agents[i].tools);
    EXPECT_EQ(catalog.agents[i].prompt, before.agents[i].prompt);
  }
  RestrictTools(&catalog, *SelectTools("default", {"bash"}));
  const AgentType& general = *catalog.Find("general");
  EXPECT_THAT(general.tools, ElementsAre("read_file", "write_file", "edit_file"));
  EXPECT_THAT(general.prompt, HasSubstr("turned off these tools for this session: bash."));
  ASSERT_EQ(general.notes.size(), 1u);
  EXPECT_THAT(general.notes[0], HasSubstr("without bash"));
  ipc::StartMessage start;
  ApplyAgentType(general, &start);
  EXPECT_THAT(start.agent.tools, ElementsAre("read_file", "write_file", "edit_file"));
  EXPECT_THAT(start.agent.prompt, HasSubstr("bash"));
  for (const AgentType& type : catalog.agents) {
    EXPECT_THAT(type.tools, ::testing::Not(::testing::Contains("bash"))) << type.name;
  }
}

TEST(AgentTypesTest, ParsesEveryField) {
  Result<AgentType> t = ParseAgentFile("/x/reviewer.md",
                                       "---\n"
                                       "name: reviewer\n"
                                       "description: Reviews diffs\n"
                                       "tools: [read_file, bash]\n"
                                       "model: claude-haiku-4-5\n"
                                       "max_turns: 7\n"
                                       "timeout: 90\n"
                                       "sandbox:\n"
                                       "  write: none\n"
                                       "  network: inherit\n"
                                       "---\n\n"
                                       "You review code.\nSay what is wrong.\n\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "reviewer");
  EXPECT_EQ(t->description, "Reviews diffs");
  EXPECT_THAT(t->tools, ElementsAre("bash", "read_file"));  // Canonical order.
  EXPECT_EQ(t->model, "claude-haiku-4-5");
  EXPECT_EQ(t->max_turns, 7);
  EXPECT_EQ(t->timeout_ms, 90'000);
  EXPECT_EQ(t->write, WriteAccess::kNone);
  EXPECT_EQ(t->network, NetworkAccess::kInherit);
  EXPECT_EQ(t->prompt, "You review code.\nSay what is wrong.");
  EXPECT_TRUE(t->notes.empty());
}

TEST(AgentTypesTest, ClaudeCodeFileWorksUnchanged) {
  Result<AgentType> t = ParseAgentFile("/x/finder.md",
                                       "---\r\n"
                                       "name: finder\r\n"
                                       "description: Finds things\r\n"
                                       "tools: Read, Grep, Bash\r\n"
                                       "maxTurns: 3\r\n"
                                       "color: blue\r\n"
                                       "---\r\n"
                                       "Find it.\r\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_THAT(t->tools, ElementsAre("bash", "read_file"));
  EXPECT_EQ(t->max_turns, 3);
  // Defaults of a file: workdir writes, no network.
  EXPECT_EQ(t->write, WriteAccess::kWorkdir);
  EXPECT_EQ(t->network, NetworkAccess::kOff);
  std::string notes;
  for (const auto& n : t->notes) notes += n + "\n";
  EXPECT_THAT(notes, HasSubstr("/x/finder.md:4: tools: 'Grep' is not a forkbox tool"));
  EXPECT_THAT(notes, HasSubstr("Claude Code's Read is forkbox's read_file"));
  EXPECT_THAT(notes, HasSubstr("/x/finder.md:6: color: unknown key, ignored"));
}

TEST(AgentTypesTest, AbsentToolsMeanAllAndDisallowedToolsNarrow) {
  Result<AgentType> t = ParseAgentFile(
      "/x/a.md", "---\nname: a\ndescription: d\ndisallowedTools: Write, Edit\n---\nbody\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_THAT(t->tools, ElementsAre("bash", "read_file"));
  Result<AgentType> all = ParseAgentFile("/x/b.md", "---\ndescription: d\n---\n");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->name, "b");  // Named after the file, with a note.
  EXPECT_EQ(all->tools.size(), 4u);
  EXPECT_FALSE(all->notes.empty());
}

TEST(AgentTypesTest, BadFilesNameTheFileAndLine) {
  struct Case {
    const char* text;
    const char* expect;
    const char* path = "/x/bad.md";
  } cases[] = {
      {"no frontmatter\n", "/x/bad.md:1: no YAML frontmatter"},
      {"---\nname: a\n", "/x/bad.md:1: the frontmatter is not closed"},
      {"---\nname: a\ndescription: [unclosed\n---\n", "/x/bad.md:"},
      {"---\nname: a\nmax_turns: lots\n---\n", "/x/bad.md:3: max_turns: must be an integer"},
      {"---\nname: a\nmax_turns: 0\n---\n", "/x/bad.md:3: max_turns"},
      {"---\nname: a\nsandbox:\n  write: everywhere\n---\n", "/x/bad.md:4: sandbox.write"},
      {"---\nname: a\nsandbox:\n  network: on\n---\n", "/x/bad.md:4: sandbox.network"},
      {"---\nname: a\nsandbox: open\n---\n", "/x/bad.md:3: sandbox: must be a map"},
      {"---\nname: ../../etc\n---\n", "/x/bad.md:2: name"},
      {"---\n- a list\n---\n", "/x/bad.md:2: the frontmatter must be a YAML map"},
      {"---\nname: a\ntimeout: 100000\n---\n", "/x/bad.md:3: timeout"},
      {"---\ndescription: no name\n---\n", "/x/bad name.md:1: no name, and the file name",
       "/x/bad name.md"},
  };
  for (const Case& c : cases) {
    Result<AgentType> t = ParseAgentFile(c.path, c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_THAT(t.status().message(), HasSubstr(c.expect)) << c.text;
  }
  // The YAML syntax error carries the line of the broken value.
  Result<AgentType> t =
      ParseAgentFile("/x/bad.md", "---\nname: a\ndescription: x: y\nmodel: m\n---\nbody\n");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("/x/bad.md:3: "));
}

// YAML nested past the parser's limit was reported as "deep.md:4: bad file" (yaml-cpp's message):
// now the warning says what is wrong and the limit. The control: nesting a file may use is taken.
TEST(AgentTypesTest, YamlNestedTooDeeplyIsNamedAsSuch) {
  const std::string deep = "---\nname: deep\ndescription: d\nx: " + std::string(1000, '[') +
                           std::string(1000, ']') + "\n---\n";
  Result<AgentType> t = ParseAgentFile("/x/deep.md", deep);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("/x/deep.md:4: the YAML is nested too deeply (the "
                                              "parser stops at 500 levels"));
  EXPECT_THAT(t.status().message(), Not(HasSubstr("bad file")));
  const std::string fine = "---\nname: deep\ndescription: d\nx: " + std::string(20, '[') +
                           std::string(20, ']') + "\n---\n";
  EXPECT_TRUE(ParseAgentFile("/x/deep.md", fine).ok());
}

// YAML lets a key repeat and the last one win; in an agent file that would silently change the
// tools or the sandbox, so the file is refused naming the second key's line.
TEST(AgentTypesTest, DuplicateKeysAreRefusedNamingTheLineAndTheKey) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"---\nname: a\ntools: bash\ntools: bash, write_file\n---\n",
       "/x/dup.md:4: tools: duplicate key (first given at line 3)"},
      {"---\nname: a\nsandbox:\n  write: none\n  write: workdir\n---\n",
       "/x/dup.md:5: sandbox.write: duplicate key (first given at line 4)"},
      {"---\nname: a\nmax_turns: 5\nmaxTurns: 50\n---\n", "/x/dup.md:4: maxTurns: duplicate key"},
  };
  for (const Case& c : cases) {
    Result<AgentType> t = ParseAgentFile("/x/dup.md", c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_THAT(t.status().message(), HasSubstr(c.expect)) << c.text;
  }
}

TEST_F(AgentFilesTest, AFileWithADuplicateKeyIsSkippedWithAWarning) {
  Write(ProjectForkbox(), "twice.md",
        Agent("twice", "d", "sandbox:\n  write: none\n  write: workdir\n"));
  AgentCatalog c = Load();
  EXPECT_EQ(c.Find("twice"), nullptr);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0], HasSubstr(ProjectForkbox() + "/twice.md:6: sandbox.write: duplicate"));
}

TEST_F(AgentFilesTest, BothLayoutsInProjectAndUserAreRead) {
  Write(ProjectForkbox(), "pf.md", Agent("pf", "project forkbox agent"));
  Write(ProjectClaude(), "pc.md", Agent("pc", "project claude agent"));
  Write(UserForkbox(), "uf.md", Agent("uf", "user forkbox agent"));
  Write(UserClaude(), "uc.md", Agent("uc", "user claude agent"));
  Write(UserClaude(), "README.txt", "not an agent");
  AgentCatalog c = Load();
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_THAT(c.Names(), ElementsAre("general", "explore", "pc", "pf", "uc", "uf"));
  EXPECT_EQ(c.Find("pf")->source, ProjectForkbox() + "/pf.md");
  EXPECT_EQ(c.Find("uc")->source, UserClaude() + "/uc.md");
  EXPECT_EQ(c.Find("uc")->prompt, "Be brief.");
}

TEST_F(AgentFilesTest, PrecedenceProjectForkboxProjectClaudeUserForkboxUserClaude) {
  Write(UserClaude(), "x.md", Agent("x", "from user claude"));
  Write(UserForkbox(), "x.md", Agent("x", "from user forkbox"));
  EXPECT_EQ(Load().Find("x")->description, "from user forkbox");
  Write(ProjectClaude(), "x.md", Agent("x", "from project claude"));
  EXPECT_EQ(Load().Find("x")->description, "from project claude");
  Write(ProjectForkbox(), "other-file-name.md", Agent("x", "from project forkbox"));
  AgentCatalog c = Load();
  const AgentType* x = c.Find("x");
  EXPECT_EQ(x->description, "from project forkbox");
  EXPECT_THAT(x->overrides, ElementsAre(ProjectClaude() + "/x.md", UserForkbox() + "/x.md",
                                        UserClaude() + "/x.md"));
}

TEST_F(AgentFilesTest, FilesOverrideBuiltins) {
  Write(UserClaude(), "explore.md",
        Agent("explore", "my explorer", "tools: Read\nsandbox:\n  write: none\n", "Look."));
  AgentCatalog c = Load();
  const AgentType* e = c.Find("explore");
  EXPECT_EQ(e->description, "my explorer");
  EXPECT_THAT(e->tools, ElementsAre("read_file"));
  EXPECT_EQ(e->prompt, "Look.");
  EXPECT_THAT(e->overrides, ElementsAre("built-in"));
}

TEST_F(AgentFilesTest, BadFilesAreSkippedWithAWarningAndNeverStopLoading) {
  Write(ProjectForkbox(), "broken.md", "---\nname: broken\ndescription: x: y\nmodel: m\n---\n");
  Write(ProjectForkbox(), "good.md", Agent("good", "fine"));
  Write(ProjectForkbox(), "netgrab.md", Agent("netgrab", "d", "sandbox:\n  network: on\n"));
  // A FIFO must not hang the loader.
  ASSERT_EQ(::mkfifo((ProjectForkbox() + "/fifo.md").c_str(), 0600), 0);
  // A lower-precedence good file keeps its place when the higher one is broken.
  Write(ProjectForkbox(), "explore.md", "---\nname: explore\nmax_turns: many\n---\n");
  AgentCatalog c = Load();
  EXPECT_THAT(c.Names(), ElementsAre("general", "explore", "good"));
  EXPECT_EQ(c.Find("explore")->source, "built-in");
  std::string warnings;
  for (const auto& w : c.warnings) warnings += w + "\n";
  EXPECT_EQ(c.warnings.size(), 4u) << warnings;
  EXPECT_THAT(warnings, HasSubstr(ProjectForkbox() + "/broken.md:3:"));
  EXPECT_THAT(warnings, HasSubstr(ProjectForkbox() + "/netgrab.md:5: sandbox.network"));
  EXPECT_THAT(warnings, HasSubstr(ProjectForkbox() + "/fifo.md:1: not a regular file"));
  EXPECT_THAT(warnings, HasSubstr(ProjectForkbox() + "/explore.md:3: max_turns"));
}

TEST_F(AgentFilesTest, ProjectFilesCannotPointOutsideTheProject) {
  // A cloned project links an agent file at one of the user's files that happens to parse.
  std::string secret = Write(home_ + "/private", "notes.md", Agent("leak", "SECRET-NOTES"));
  fs::create_directories(ProjectForkbox());
  fs::create_symlink(secret, ProjectForkbox() + "/leak.md");
  // The control: the same link among the user's own agents is followed (dotfile managers).
  fs::create_directories(UserForkbox());
  fs::create_symlink(secret, UserForkbox() + "/mine.md");
  // A link that stays inside the project is fine.
  Write(workdir_ + "/docs", "inner.md", Agent("inner", "kept"));
  fs::create_directories(ProjectClaude());
  fs::create_symlink(workdir_ + "/docs/inner.md", ProjectClaude() + "/inner.md");
  AgentCatalog c = Load();
  ASSERT_NE(c.Find("leak"), nullptr);
  EXPECT_EQ(c.Find("leak")->source, UserForkbox() + "/mine.md");
  EXPECT_NE(c.Find("inner"), nullptr);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0], HasSubstr(ProjectForkbox() + "/leak.md:1: leads outside the project"));
}

// Confined to "/", every file is inside (a project at the root, --allow-broad-workdir). The
// control: confined to a sibling tree, the same file leads outside.
TEST_F(AgentFilesTest, EveryFileIsInsideAProjectAtTheRoot) {
  Write(ProjectForkbox(), "rooted.md", Agent("rooted", "kept"));
  AgentCatalog at_root = LoadAgentCatalog({{ProjectForkbox(), "project forkbox", "/"}});
  EXPECT_NE(at_root.Find("rooted"), nullptr);
  EXPECT_TRUE(at_root.warnings.empty()) << at_root.warnings[0];
  AgentCatalog elsewhere = LoadAgentCatalog({{ProjectForkbox(), "project forkbox", home_}});
  EXPECT_EQ(elsewhere.Find("rooted"), nullptr);
  ASSERT_EQ(elsewhere.warnings.size(), 1u);
  EXPECT_THAT(elsewhere.warnings[0], HasSubstr("leads outside the project"));
}

TEST_F(AgentFilesTest, AtMost64FilesPerDirectoryAreRead) {
  for (int i = 0; i < 70; ++i) {
    char name[16];
    std::snprintf(name, sizeof(name), "a%02d", i);
    Write(ProjectForkbox(), std::string(name) + ".md", Agent(name, "one of many"));
  }
  AgentCatalog c = Load();
  EXPECT_EQ(c.agents.size(), 2u + kMaxAgentFilesPerDir);
  EXPECT_NE(c.Find("a63"), nullptr);
  EXPECT_EQ(c.Find("a64"), nullptr);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0], HasSubstr("more than 64 agent files"));
}

// Every request of the parent model carries each agent's description: one longer than
// kMaxAgentDescriptionBytes is refused, naming the file, the line and the limit. Before, a
// description of any length (up to the file's 256 KiB) was taken. The control: one at the limit.
TEST(AgentTypesTest, ADescriptionPastItsLimitIsRefusedNamingTheLimit) {
  const std::string at_limit(kMaxAgentDescriptionBytes, 'd');
  Result<AgentType> fits = ParseAgentFile("/x/long.md", Agent("long", at_limit));
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->description, at_limit);
  Result<AgentType> t = ParseAgentFile("/x/long.md", Agent("long", at_limit + "d"));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("/x/long.md:3: description: 4097 bytes, more than "
                                              "the limit of 4096"));
}

// 64 files a directory, four directories: without a cap on the sum, the red team's 64 files of
// 250 KB descriptions made every parent request 16 MB. Files are taken in precedence order while
// their entries fit kMaxAgentCatalogBytes; one past it is skipped with a warning naming it and the
// limit, a smaller one after it still fits, and a shadowed file costs nothing.
TEST_F(AgentFilesTest, TheAgentsDescriptionsHaveATotalLimit) {
  const std::string big(4000, 'd');  // Each entry: "\n- aNN: " + 4000 bytes = 4008.
  for (int i = 0; i < 9; ++i) {
    const std::string name = "a0" + std::to_string(i);
    Write(ProjectForkbox(), name + ".md", Agent(name, big));
  }
  Write(ProjectForkbox(), "small.md", Agent("small", "fits in what is left"));
  Write(UserClaude(), "a00.md", Agent("a00", big + big.substr(0, 90)));  // Shadowed: free.
  Write(UserClaude(), "late.md", Agent("late", big));
  AgentCatalog c = Load();
  std::string warnings;
  for (const auto& w : c.warnings) warnings += w + "\n";
  EXPECT_NE(c.Find("a07"), nullptr);
  EXPECT_EQ(c.Find("a08"), nullptr);
  EXPECT_NE(c.Find("small"), nullptr);
  EXPECT_EQ(c.Find("late"), nullptr);
  EXPECT_THAT(c.Find("a00")->overrides, ElementsAre(UserClaude() + "/a00.md"));
  ASSERT_EQ(c.warnings.size(), 2u) << warnings;
  EXPECT_THAT(c.warnings[0], HasSubstr(ProjectForkbox() + "/a08.md:1: its name and description "
                                                          "(4008 bytes) would take the agents' "
                                                          "descriptions past their limit of "
                                                          "32768 bytes in all"));
  EXPECT_THAT(c.warnings[0], HasSubstr("(skipped)"));
  EXPECT_THAT(c.warnings[1], HasSubstr(UserClaude() + "/late.md:1: "));
  const size_t base = TaskToolDefFor(LoadAgentCatalog({})).description.size();
  EXPECT_LE(TaskToolDefFor(c).description.size(), base + kMaxAgentCatalogBytes);
}

TEST_F(AgentFilesTest, TaskToolOffersAnEnumOfAgentsWithTheirDescriptions) {
  Write(ProjectClaude(), "tester.md", Agent("tester", "Runs the test suite"));
  ToolDef def = TaskToolDefFor(Load());
  EXPECT_EQ(def.name, "task");
  const auto& prop = def.input_schema["properties"]["subagent_type"];
  EXPECT_EQ(prop["type"], "string");
  EXPECT_EQ(prop["enum"], nlohmann::json({"general", "explore", "tester"}));
  EXPECT_THAT(def.description, HasSubstr("- tester: Runs the test suite"));
  EXPECT_THAT(def.description, HasSubstr("- explore: Read-only explorer"));
  // Not required: the default is general.
  for (const auto& r : def.input_schema["required"]) EXPECT_NE(r, "subagent_type");
}

TEST(AgentTypesTest, StartFrameCarriesToolsPromptModelAndSandbox) {
  AgentType t;
  t.name = "narrow";
  t.tools = {"read_file"};
  t.prompt = "P";
  t.model = "sonnet";
  t.max_turns = 5;
  t.write = WriteAccess::kNone;
  t.network = NetworkAccess::kOff;
  ipc::StartMessage start;
  start.provider.name = "anthropic";
  start.provider.model = "session-model";
  ApplyAgentType(t, &start);
  EXPECT_EQ(start.agent.type, "narrow");
  EXPECT_THAT(start.agent.tools, ElementsAre("read_file"));
  EXPECT_EQ(start.agent.prompt, "P");
  EXPECT_EQ(start.agent.write, "none");
  EXPECT_EQ(start.agent.network, "off");
  EXPECT_EQ(start.provider.model, "claude-sonnet-4-5");
  EXPECT_EQ(start.limits.max_turns, 5);
  // Another provider keeps its own model for a Claude alias; a plain name is used as is.
  start.provider.name = "openai";
  start.provider.model = "gpt-x";
  ApplyAgentType(t, &start);
  EXPECT_EQ(start.provider.model, "gpt-x");
  t.model = "local-7b";
  ApplyAgentType(t, &start);
  EXPECT_EQ(start.provider.model, "local-7b");
}

TEST(AgentTypesTest, StartFrameAgentRoundTripsAndIsValidated) {
  ipc::StartMessage start;
  start.prompt = "p";
  start.provider.name = "anthropic";
  start.workdir = "/w";
  ApplyAgentType(BuiltinAgentTypes()[1], &start);
  nlohmann::json j = ipc::ToJson(start);
  Result<ipc::Message> back = ipc::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<ipc::StartMessage>(*back).agent, start.agent);
  j.erase("agent");  // An older parent: the general agent.
  back = ipc::FromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<ipc::StartMessage>(*back).agent, ipc::AgentSettings{});
  for (const char* field : {"write", "network"}) {
    nlohmann::json bad = ipc::ToJson(start);
    bad["agent"][field] = "everything";
    back = ipc::FromJson(bad);
    ASSERT_FALSE(back.ok()) << field;
    EXPECT_THAT(back.status().message(), HasSubstr(std::string("agent.") + field));
  }
}

TEST(AgentTypesTest, NetworkOnlyNarrowsTheUsersFlag) {
  AgentType t;
  t.network = NetworkAccess::kInherit;
  EXPECT_TRUE(EffectiveAllowNet(t, true));
  EXPECT_FALSE(EffectiveAllowNet(t, false));
  t.network = NetworkAccess::kOff;
  EXPECT_FALSE(EffectiveAllowNet(t, true));
}

TEST(AgentTypesTest, AnAgentFileOnlyLowersTheTurnLimit) {
  AgentType t;
  t.name = "greedy";
  t.tools = {"read_file"};
  ipc::StartMessage start;
  start.limits.max_turns = 10;  // The user's --task-max-turns.
  t.max_turns = 500;
  ApplyAgentType(t, &start);
  EXPECT_EQ(start.limits.max_turns, 10);
  t.max_turns = 4;
  ApplyAgentType(t, &start);
  EXPECT_EQ(start.limits.max_turns, 4);
}

}  // namespace
}  // namespace forkbox::agent
