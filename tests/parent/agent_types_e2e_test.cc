// Agent types end to end: the real forkbox and forkbox-child against the mock model. The parent's
// request offers subagent_type as an enum; each child's request carries only its agent's tools,
// model and prompt; and the kernel, not the tool list, keeps a `write: none` agent from writing
// (bash and every file tool), with the `general` agent writing the same way as the control.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/process.h"
#include "base/unique_fd.h"
#include "tests/mock/mock_server.h"
#include "tests/parent/replies.h"
#include "tests/parent/run_forkbox.h"

namespace forkbox::parent_test {
namespace {

namespace fs = std::filesystem;
using mock::MockServer;
using mock::RecordedRequest;
using mock::Reply;
using mock::ToolCall;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

ToolCall Task(const std::string& type, const std::string& prompt) {
  return ToolCall{
      "task", {{"prompt", prompt}, {"description", prompt}, {"subagent_type", type}}, ""};
}

ToolCall Bash(const std::string& command) { return ToolCall{"bash", {{"command", command}}, ""}; }

// A write: none agent with all four tools: whatever fails for it is refused by the kernel.
constexpr char kLockdownAgent[] =
    "---\n"
    "name: lockdown\n"
    "description: Reads everything, changes nothing\n"
    "tools: bash, read_file, write_file, edit_file\n"
    "model: lockdown-model-7\n"
    "sandbox:\n"
    "  write: none\n"
    "  network: off\n"
    "---\n"
    "LOCKDOWN-PROMPT: look, never touch.\n";

class AgentTypesE2eTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-agents-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = fs::canonical(tmpl).string();
    workdir_ = root_ + "/project";
    home_ = root_ + "/home";
    writable_ = root_ + "/extra";
    fs::create_directories(workdir_);
    fs::create_directories(home_);
    fs::create_directories(writable_);
    WriteFile(workdir_ + "/.forkbox/agents/lockdown.md", kLockdownAgent);
    server_.Start();
    RunSpec check;
    check.args = {"sandbox", "--check"};
    check.env = Env();
    check.cwd = workdir_;
    sandbox_ok_ = RunForkbox(check).exit_code == 0;
  }
  void TearDown() override {
    server_.Stop();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::vector<std::string> Env() const {
    std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home_,
                                    "LANG=C.UTF-8", "ANTHROPIC_API_KEY=sk-test-" + RandomToken(),
                                    "ANTHROPIC_BASE_URL=" + server_.anthropic_base_url()};
    for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
      if (const char* v = getenv(name)) env.push_back(std::string(name) + "=" + v);
    }
    return env;
  }

  RunResult Run(std::vector<std::string> args) {
    RunSpec spec;
    spec.args = {"--standby", std::to_string(GetParam())};
    spec.args.insert(spec.args.end(), args.begin(), args.end());
    spec.env = Env();
    spec.cwd = workdir_;
    return RunForkbox(spec);
  }

  // The same as Run, as uid/gid 65534 (setpriv) on a tree it owns: the unprivileged case.
  RunResult RunUnprivileged(std::vector<std::string> args) {
    for (const auto& e : fs::recursive_directory_iterator(root_)) {
      EXPECT_EQ(::lchown(e.path().c_str(), 65534, 65534), 0) << e.path();
    }
    EXPECT_EQ(::chown(root_.c_str(), 65534, 65534), 0);
    const std::string out_path = root_ + "/.stdout", err_path = root_ + "/.stderr";
    UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    UniqueFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    UniqueFd err(::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    SpawnOptions opts;
    opts.argv = {
        "/usr/bin/setpriv", "--reuid=65534", "--regid=65534",           "--clear-groups", "--",
        ForkboxPath(),      "--standby",     std::to_string(GetParam())};
    opts.argv.insert(opts.argv.end(), args.begin(), args.end());
    opts.env = Env();
    opts.cwd = workdir_;
    opts.fds = {{null_fd.get(), 0}, {out.get(), 1}, {err.get(), 2}};
    RunResult result;
    Result<ChildProcess> child = Spawn(opts);
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    if (!child.ok()) return result;
    Result<int> status = child->Wait();
    EXPECT_TRUE(status.ok());
    if (status.ok()) result.exit_code = ExitCodeFromWaitStatus(*status);
    result.out = ReadFile(out_path);
    result.err = ReadFile(err_path);
    return result;
  }

  // The child requests, by the marker in their task prompt.
  std::map<std::string, std::vector<RecordedRequest>> ChildRequests() const {
    std::map<std::string, std::vector<RecordedRequest>> out;
    for (auto& r : server_.requests()) {
      if (!r.format || r.view.HasTool("task")) continue;
      std::string first = r.view.FirstUserText();
      out[first.substr(0, first.find(' '))].push_back(r);
    }
    return out;
  }
  std::vector<RecordedRequest> ParentRequests() const {
    std::vector<RecordedRequest> out;
    for (auto& r : server_.requests()) {
      if (r.format && r.view.HasTool("task")) out.push_back(r);
    }
    return out;
  }

  std::string root_, workdir_, home_, writable_;
  bool sandbox_ok_ = false;
  MockServer server_;
};

std::string Dump(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" +
         r.err;
}

// The tool names of one request in offer order.
std::vector<std::string> Tools(const RecordedRequest& r) { return r.view.tool_names; }

TEST_P(AgentTypesE2eTest, ParentOffersTheEnumAndEachChildGetsItsAgent) {
  server_.SetHandler([](const RecordedRequest& r) {
    if (r.view.HasTool("task")) {
      if (r.view.assistant_turns == 0) {
        return Calls({Task("explore", "EXPLORE look around"), Task("general", "GENERAL do it"),
                      Task("lockdown", "LOCKDOWN look")});
      }
      return Text("all three done");
    }
    if (r.view.assistant_turns == 0 && r.view.FirstUserText().rfind("EXPLORE", 0) == 0) {
      // Hidden tools are refused even when called.
      return Calls({ToolCall{"write_file", {{"path", "hidden.txt"}, {"content", "x"}}, ""}});
    }
    return Text("SUMMARY of " + r.view.FirstUserText());
  });
  RunResult r = Run({"--json", "go"});
  ASSERT_EQ(r.exit_code, 0) << Dump(r);

  auto parents = ParentRequests();
  ASSERT_EQ(parents.size(), 2u) << Dump(r);
  const nlohmann::json* task = nullptr;
  for (const auto& t : parents[0].json["tools"]) {
    if (t["name"] == "task") task = &t;
  }
  ASSERT_NE(task, nullptr);
  const auto& prop = (*task)["input_schema"]["properties"]["subagent_type"];
  EXPECT_EQ(prop["enum"], nlohmann::json({"general", "explore", "lockdown"}));
  std::string description = (*task)["description"];
  EXPECT_THAT(description, HasSubstr("- lockdown: Reads everything, changes nothing"));
  EXPECT_THAT(description, HasSubstr("- explore: Read-only explorer"));

  auto children = ChildRequests();
  ASSERT_EQ(children["EXPLORE"].size(), 2u) << Dump(r);
  ASSERT_EQ(children["GENERAL"].size(), 1u) << Dump(r);
  ASSERT_EQ(children["LOCKDOWN"].size(), 1u) << Dump(r);
  const RecordedRequest& explore = children["EXPLORE"][0];
  const RecordedRequest& general = children["GENERAL"][0];
  const RecordedRequest& lockdown = children["LOCKDOWN"][0];
  EXPECT_THAT(Tools(explore), ElementsAre("bash", "read_file"));
  EXPECT_THAT(Tools(general), ElementsAre("bash", "read_file", "write_file", "edit_file"));
  EXPECT_THAT(Tools(lockdown), ElementsAre("bash", "read_file", "write_file", "edit_file"));
  EXPECT_EQ(lockdown.view.model, "lockdown-model-7");
  EXPECT_EQ(general.view.model, explore.view.model);  // The session's model.
  EXPECT_NE(general.view.model, "lockdown-model-7");
  EXPECT_THAT(lockdown.view.system, HasSubstr("LOCKDOWN-PROMPT: look, never touch."));
  EXPECT_THAT(lockdown.view.system, HasSubstr("read-only"));
  EXPECT_THAT(explore.view.system, HasSubstr("explore agent"));
  EXPECT_THAT(general.view.system, Not(HasSubstr("LOCKDOWN-PROMPT")));
  EXPECT_THAT(general.view.system, Not(HasSubstr("read-only")));

  // The refused hidden tool: an error result, and nothing written.
  const RecordedRequest& explore2 = children["EXPLORE"][1];
  ASSERT_EQ(explore2.view.tool_results.size(), 1u);
  EXPECT_TRUE(explore2.view.tool_results[0].is_error);
  // The loop refuses a tool outside the agent's schema before any runner sees it.
  EXPECT_THAT(explore2.view.tool_results[0].text, HasSubstr("'write_file'"));
  EXPECT_THAT(explore2.view.tool_results[0].text, HasSubstr("bash, read_file"));
  EXPECT_FALSE(fs::exists(workdir_ + "/hidden.txt"));

  // --json and progress name each task's agent type.
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tasks"].size(), 3u);
  EXPECT_EQ(j["tasks"][0]["agent_type"], "explore");
  EXPECT_EQ(j["tasks"][1]["agent_type"], "general");
  EXPECT_EQ(j["tasks"][2]["agent_type"], "lockdown");
  EXPECT_THAT(r.err, HasSubstr("explore: EXPLORE look around"));
  EXPECT_THAT(r.err, HasSubstr("lockdown: LOCKDOWN look"));
}

TEST_P(AgentTypesE2eTest, StreamJsonNamesEachTasksAgentType) {
  server_.SetHandler([](const RecordedRequest& r) {
    if (r.view.HasTool("task")) {
      if (r.view.assistant_turns == 0) {
        return Calls({Task("explore", "EXPLORE look"), Task("general", "GENERAL do")});
      }
      return Text("both done");
    }
    return Text("SUMMARY");
  });
  RunResult r = Run({"--output-format", "stream-json", "go"});
  ASSERT_EQ(r.exit_code, 0) << Dump(r);
  std::map<std::string, std::string> started, finished;  // tool_use id -> subagent_type
  std::map<std::string, std::string> asked;              // tool_use id -> the prompt's marker
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json e = nlohmann::json::parse(line);
    if (e["type"] == "assistant") {
      for (const auto& block : e["message"]["content"]) {
        if (block["type"] == "tool_use") asked[block["id"]] = block["input"]["subagent_type"];
      }
    }
    if (e["type"] != "system") continue;
    if (e["subtype"] == "task_started") started[e["task_id"]] = e["subagent_type"];
    if (e["subtype"] == "task_notification") finished[e["task_id"]] = e["subagent_type"];
  }
  ASSERT_EQ(asked.size(), 2u) << r.out;
  EXPECT_EQ(started, asked);  // Each task's events carry the type its tool call asked for.
  EXPECT_EQ(finished, asked);
}

TEST_P(AgentTypesE2eTest, UnknownSubagentTypeIsAnErrorResultNamingTheAgents) {
  server_.SetHandler([](const RecordedRequest& r) {
    if (r.view.assistant_turns == 0) return Calls({Task("nosuch", "NOSUCH job")});
    return Text("answered");
  });
  RunResult r = Run({"go"});
  ASSERT_EQ(r.exit_code, 0) << Dump(r);
  auto parents = ParentRequests();
  ASSERT_EQ(parents.size(), 2u);
  ASSERT_EQ(parents[1].view.tool_results.size(), 1u);
  EXPECT_TRUE(parents[1].view.tool_results[0].is_error);
  EXPECT_THAT(parents[1].view.tool_results[0].text,
              HasSubstr("unknown subagent_type 'nosuch'; the available agents are: general, "
                        "explore, lockdown"));
  EXPECT_TRUE(ChildRequests().empty());
}

// What each agent of WriteNoneTest tries, its files named with prefix `p`: bash writing in the
// workdir and in `writable`, write_file, edit_file, a connection to `port`, then read_file.
Reply WriteAndNetProbes(const std::string& p, const std::string& port,
                        const std::string& writable) {
  return Calls({
      Bash("echo x > " + p + "_bash.txt && echo WROTE || echo DENIED"),
      Bash("echo x > " + writable + "/" + p + "_extra.txt && echo WROTE || echo DENIED"),
      ToolCall{"write_file", {{"path", p + "_write.txt"}, {"content", "x"}}, ""},
      ToolCall{
          "edit_file", {{"path", p + "_edit.txt"}, {"old_text", "old"}, {"new_text", "new"}}, ""},
      Bash("(exec 3<>/dev/tcp/127.0.0.1/" + port + ") 2>/dev/null && echo NET-OK || echo NET-NO"),
      ToolCall{"read_file", {{"path", p + "_edit.txt"}}, ""},
  });
}

// The kernel refuses every write of a write: none agent (bash, write_file, edit_file, in the
// workdir and in a --writable path) and its network (network: off beats --allow-net); the general
// agent doing the same things is the control that must succeed.
class WriteNoneTest : public AgentTypesE2eTest {
 protected:
  void Check(bool unprivileged);
};

TEST_P(WriteNoneTest, AsRoot) {
  if (::getuid() != 0) GTEST_SKIP() << "not root";
  Check(false);
}

TEST_P(WriteNoneTest, AsAnUnprivilegedUser) {
  if (::getuid() != 0) GTEST_SKIP() << "setpriv to another user needs root";
  Check(true);
}

void WriteNoneTest::Check(bool unprivileged) {
  if (!sandbox_ok_) GTEST_SKIP() << "the sandbox cannot be enforced here";
  WriteFile(workdir_ + "/lk_edit.txt", "old\n");
  WriteFile(workdir_ + "/gen_edit.txt", "old\n");
  const std::string port = std::to_string(server_.port());
  const std::string writable = writable_;
  server_.SetHandler([port, writable](const RecordedRequest& r) {
    if (r.view.HasTool("task")) {
      if (r.view.assistant_turns == 0) {
        return Calls({Task("lockdown", "LK probe"), Task("general", "GEN probe")});
      }
      return Text("probed");
    }
    if (r.view.assistant_turns > 0) return Text("SUMMARY");
    const std::string p = r.view.FirstUserText().rfind("LK", 0) == 0 ? "lk" : "gen";
    return WriteAndNetProbes(p, port, writable);
  });
  std::vector<std::string> args = {"--allow-net", "--writable", writable_, "go"};
  RunResult r = unprivileged ? RunUnprivileged(args) : Run(args);
  ASSERT_EQ(r.exit_code, 0) << Dump(r);

  // From outside: nothing of the lockdown agent landed; everything of the general agent did.
  EXPECT_FALSE(fs::exists(workdir_ + "/lk_bash.txt"));
  EXPECT_FALSE(fs::exists(writable_ + "/lk_extra.txt"));
  EXPECT_FALSE(fs::exists(workdir_ + "/lk_write.txt"));
  EXPECT_EQ(ReadFile(workdir_ + "/lk_edit.txt"), "old\n");
  EXPECT_TRUE(fs::exists(workdir_ + "/gen_bash.txt"));
  EXPECT_TRUE(fs::exists(writable_ + "/gen_extra.txt"));
  EXPECT_EQ(ReadFile(workdir_ + "/gen_write.txt"), "x");
  EXPECT_EQ(ReadFile(workdir_ + "/gen_edit.txt"), "new\n");
  struct stat st {};
  ASSERT_EQ(::stat((workdir_ + "/gen_bash.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, unprivileged ? 65534u : 0u);  // The run really was (un)privileged.

  auto children = ChildRequests();
  ASSERT_EQ(children["LK"].size(), 2u) << Dump(r);
  ASSERT_EQ(children["GEN"].size(), 2u) << Dump(r);
  const auto& lk = children["LK"][1].view.tool_results;
  const auto& gen = children["GEN"][1].view.tool_results;
  ASSERT_EQ(lk.size(), 6u);
  ASSERT_EQ(gen.size(), 6u);
  EXPECT_THAT(lk[0].text, HasSubstr("DENIED"));
  EXPECT_THAT(lk[1].text, HasSubstr("DENIED"));
  EXPECT_TRUE(lk[2].is_error) << lk[2].text;
  EXPECT_TRUE(lk[3].is_error) << lk[3].text;
  EXPECT_THAT(lk[4].text, HasSubstr("NET-NO"));
  EXPECT_FALSE(lk[5].is_error) << lk[5].text;  // Reading still works.
  EXPECT_THAT(lk[5].text, HasSubstr("old"));
  EXPECT_THAT(gen[0].text, HasSubstr("WROTE"));
  EXPECT_THAT(gen[1].text, HasSubstr("WROTE"));
  EXPECT_FALSE(gen[2].is_error) << gen[2].text;
  EXPECT_FALSE(gen[3].is_error) << gen[3].text;
  EXPECT_THAT(gen[4].text, HasSubstr("NET-OK"));
  EXPECT_THAT(gen[5].text, HasSubstr("new"));
}

TEST_P(AgentTypesE2eTest, AgentsCommandListsSourcesSandboxNotesAndWarnings) {
  WriteFile(home_ + "/.claude/agents/lockdown.md",
            "---\nname: lockdown\ndescription: shadowed\n---\n");
  WriteFile(home_ + "/.claude/agents/claude-style.md",
            "---\nname: claude-style\ndescription: From Claude Code\ntools: Read, Grep\n"
            "color: red\n---\nbody\n");
  WriteFile(workdir_ + "/.claude/agents/broken.md", "---\nname: broken\nmaxTurns: -3\n---\n");
  RunSpec spec;
  spec.args = {"agents", "--allow-net"};
  spec.env = Env();
  spec.cwd = workdir_;
  RunResult r = RunForkbox(spec);
  ASSERT_EQ(r.exit_code, 0) << Dump(r);
  EXPECT_THAT(r.out, HasSubstr("general  (built-in)"));
  EXPECT_THAT(r.out, HasSubstr("network inherit (--allow-net: on)"));
  EXPECT_THAT(r.out, HasSubstr("explore  (built-in)"));
  EXPECT_THAT(r.out, HasSubstr("lockdown  (" + workdir_ + "/.forkbox/agents/lockdown.md)"));
  EXPECT_THAT(r.out, HasSubstr("overrides: " + home_ + "/.claude/agents/lockdown.md"));
  EXPECT_THAT(r.out, HasSubstr("model:     lockdown-model-7"));
  EXPECT_THAT(r.out,
              HasSubstr("write none (every file read-only; a TMPDIR of its own), network off"));
  EXPECT_THAT(r.out, HasSubstr("tools:     read_file\n"));
  EXPECT_THAT(r.out, HasSubstr("'Grep' is not a forkbox tool"));
  EXPECT_THAT(r.out, HasSubstr("claude-style.md:5: color: unknown key, ignored"));
  EXPECT_THAT(r.out,
              HasSubstr("warnings:\n  " + workdir_ + "/.claude/agents/broken.md:3: maxTurns"));
  // The user's config file counts as a session's would: allow-net there, no flag here.
  WriteFile(home_ + "/.config/forkbox/config.toml", "allow-net = true\n");
  spec.args = {"agents"};
  RunResult from_file = RunForkbox(spec);
  ASSERT_EQ(from_file.exit_code, 0) << Dump(from_file);
  EXPECT_THAT(from_file.out, HasSubstr("network inherit (--allow-net: on)"));
  ASSERT_EQ(unlink((home_ + "/.config/forkbox/config.toml").c_str()), 0);
  spec.args = {"agents", "--sandbox=off"};
  RunResult off = RunForkbox(spec);
  ASSERT_EQ(off.exit_code, 0) << Dump(off);
  EXPECT_THAT(off.out, HasSubstr("sandbox:   OFF (--sandbox=off)"));
  // A session warns about the broken file on stderr and still runs.
  server_.SetHandler([](const RecordedRequest&) { return Text("fine"); });
  RunResult s = Run({"hi"});
  ASSERT_EQ(s.exit_code, 0) << Dump(s);
  EXPECT_THAT(s.err, HasSubstr("warning: agent file " + workdir_ + "/.claude/agents/broken.md:3"));
}

// The red team's catalog: 64 project files with 250 KB descriptions made every parent request
// 16 MB, with no warning from `forkbox agents`. Now a description past 4 KiB is refused and files
// past the 32 KiB sum are skipped; the listing and the session say the same, each naming the file
// and the limit, and the parent's task tool stays within the sum.
TEST_P(AgentTypesE2eTest, TheAgentsListingAndTheSessionWarnOfTheCatalogsLimits) {
  WriteFile(workdir_ + "/.claude/agents/huge.md",
            "---\nname: huge\ndescription: " + std::string(250'000, 'h') + "\n---\nbody\n");
  for (int i = 0; i < 10; ++i) {
    const std::string name = "big" + std::to_string(i);
    WriteFile(workdir_ + "/.forkbox/agents/" + name + ".md",
              "---\nname: " + name + "\ndescription: " + std::string(4000, 'b') + "\n---\n");
  }
  const std::vector<std::string> expected = {
      workdir_ +
          "/.claude/agents/huge.md:3: description: 250000 bytes, more than the limit of "
          "4096",
      workdir_ +
          "/.forkbox/agents/big8.md:1: its name and description (4009 bytes) would take "
          "the agents' descriptions past their limit of 32768 bytes in all",
      workdir_ + "/.forkbox/agents/big9.md:1: "};
  RunSpec spec;
  spec.args = {"agents"};
  spec.env = Env();
  spec.cwd = workdir_;
  RunResult listing = RunForkbox(spec);
  ASSERT_EQ(listing.exit_code, 0) << Dump(listing);
  EXPECT_THAT(listing.out, HasSubstr("big7  ("));
  EXPECT_THAT(listing.out, Not(HasSubstr("big8  (")));
  server_.SetHandler([](const RecordedRequest&) { return Text("fine"); });
  RunResult s = Run({"hi"});
  ASSERT_EQ(s.exit_code, 0) << Dump(s);
  for (const std::string& w : expected) {
    EXPECT_THAT(listing.out, HasSubstr("warnings:")) << Dump(listing);
    EXPECT_THAT(listing.out, HasSubstr("  " + w)) << Dump(listing);
    EXPECT_THAT(s.err, HasSubstr("warning: agent file " + w)) << Dump(s);
  }
  std::vector<RecordedRequest> parent = ParentRequests();
  ASSERT_EQ(parent.size(), 1u);
  size_t task_bytes = 0;
  for (const auto& tool : parent[0].json["tools"]) {
    if (tool["name"] == "task") task_bytes = tool["description"].get<std::string>().size();
  }
  EXPECT_GT(task_bytes, 8u * 4000);
  EXPECT_LT(task_bytes, 32u * 1024 + 4096) << "the catalog's sum, plus the tool's own text";
  EXPECT_LT(parent[0].body.size(), 64u * 1024);
}

TEST_P(AgentTypesE2eTest, TranscriptNamesTheAgentType) {
  server_.SetHandler([](const RecordedRequest& r) {
    if (r.view.HasTool("task")) {
      if (r.view.assistant_turns == 0) return Calls({Task("explore", "EXPLORE find it")});
      return Text("found");
    }
    return Text("SUMMARY");
  });
  const std::string dir = root_ + "/transcripts";
  RunResult r = Run({"--transcript-dir", dir, "go"});
  ASSERT_EQ(r.exit_code, 0) << Dump(r);
  std::vector<nlohmann::json> records;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::istringstream lines(ReadFile(e.path().string()));
    for (std::string line; std::getline(lines, line);)
      records.push_back(nlohmann::json::parse(line));
  }
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0]["type"], "start");
  EXPECT_EQ(records[0]["agent"]["type"], "explore");
  EXPECT_EQ(records[0]["agent"]["write"], "none");
  EXPECT_EQ(records[0]["agent"]["tools"], nlohmann::json({"bash", "read_file"}));
}

INSTANTIATE_TEST_SUITE_P(Standby, AgentTypesE2eTest, ::testing::Values(0, 2),
                         [](const auto& info) { return "standby" + std::to_string(info.param); });
INSTANTIATE_TEST_SUITE_P(Standby, WriteNoneTest, ::testing::Values(0, 2),
                         [](const auto& info) { return "standby" + std::to_string(info.param); });

}  // namespace
}  // namespace forkbox::parent_test
