// forkbox-child end to end: the real binary, started over real pipes exactly as the parent starts
// it (fd 3: start frame in, fd 4: frames out, fd 5: transcript), talking to the mock model.
#include <dirent.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/unique_fd.h"
#include "ipc/child_exit.h"
#include "ipc/frame.h"
#include "ipc/messages.h"
#include "sandbox/cgroup.h"
#include "sandbox/namespaces.h"
#include "sandbox/sandbox.h"
#include "tests/mock/mock_server.h"

namespace forkbox {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kApiKey[] = "sk-ant-test-KEY-d41d8cd98f00b204e9800998ecf8427e";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Live processes whose command line contains `marker` (zombies have an empty cmdline).
std::vector<pid_t> ProcessesWithMarker(const std::string& marker) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = ReadAll("/proc/" + name + "/cmdline");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(marker) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

struct ChildRun {
  int exit_code = -1;
  std::vector<ipc::Message> frames;
  std::string decode_error;
  std::string stderr_text;

  const ipc::ResultMessage* result() const {
    return frames.empty() ? nullptr : std::get_if<ipc::ResultMessage>(&frames.back());
  }
  const ipc::ErrorMessage* error() const {
    return frames.empty() ? nullptr : std::get_if<ipc::ErrorMessage>(&frames.back());
  }
  std::vector<ipc::EventMessage> events() const {
    std::vector<ipc::EventMessage> out;
    for (const auto& f : frames) {
      if (const auto* e = std::get_if<ipc::EventMessage>(&f)) out.push_back(*e);
    }
    return out;
  }
};

class ChildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "forkbox-child-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = std::filesystem::canonical(tmpl).string();
    workdir_ = root_ + "/work";
    std::filesystem::create_directories(workdir_);
    server_.Start();
  }
  void TearDown() override {
    server_.Stop();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  void Scenario(const json& rules) { server_.SetScenario(mock::Scenario::FromJson(rules)); }

  // Whether the default sandbox can be enforced here; the tests then run with it on.
  static bool SandboxAvailable(const std::string& workdir) {
    sandbox::Policy p;
    p.workdir = workdir;
    return sandbox::Check(p).enforceable;
  }

  ipc::StartMessage Start(const std::string& prompt) {
    ipc::StartMessage s;
    s.prompt = prompt;
    s.provider.name = "anthropic";
    s.provider.api_key = kApiKey;
    s.provider.base_url = server_.anthropic_base_url();
    s.provider.model = "claude-test";
    s.provider.max_retries = 0;
    s.workdir = workdir_;
    s.sandbox.enabled = SandboxAvailable(workdir_);
    return s;
  }

  // Decodes the frames `report` (the child's fd 4) carries into `run` until EOF, a decoding error
  // or, with close_report_after_, that many frames.
  void ReadFrames(UniqueFd& report, ChildRun& run) {
    ipc::FrameDecoder decoder;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(report.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (Status st = decoder.Feed(std::string_view(buf, n)); !st.ok()) {
        run.decode_error = st.ToString();
        break;
      }
      for (;;) {
        auto next = decoder.Next();
        if (!next.ok()) {
          run.decode_error = next.status().ToString();
          break;
        }
        if (!next->has_value()) break;
        run.frames.push_back(std::move(**next));
      }
      if (close_report_after_ > 0 && run.frames.size() >= close_report_after_) {
        report.reset();  // The parent is gone, as far as fd 4 can tell.
        break;
      }
    }
  }

  // Runs forkbox-child with `start_bytes` written to its fd 3, collects every frame from fd 4.
  ChildRun RunRaw(const std::string& start_bytes, std::optional<int> transcript_fd = {}) {
    ChildRun run;
    Result<Pipe> in = MakePipe();
    Result<Pipe> out = MakePipe();
    EXPECT_TRUE(in.ok() && out.ok());
    std::string err_path = root_ + "/child-stderr.txt";
    UniqueFd err(::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    SpawnOptions opts;
    opts.argv = {FORKBOX_CHILD_BIN};
    opts.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root_,
                std::string("ANTHROPIC_API_KEY=") + kApiKey};  // Must never reach a tool either.
#ifdef FORKBOX_SANITIZE
    // LeakSanitizer cannot stop the world inside the sandbox (no ptrace as a namespace init) and
    // turns exit 0 into 1; ASan proper stays on.
    opts.env.push_back("ASAN_OPTIONS=detect_leaks=0");
#endif
    opts.fds = {{in->read.get(), ipc::kChildControlReadFd},
                {out->write.get(), ipc::kChildReportWriteFd},
                {err.get(), 2}};
    if (transcript_fd) opts.fds.push_back({transcript_source_, *transcript_fd});
    for (const auto& fd : extra_fds_) opts.fds.push_back(fd);
    if (before_exec_) opts.steps.push_back({"the test's step", before_exec_});
    Result<ChildProcess> child = Spawn(opts);
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    if (!child.ok()) return run;
    in->read.reset();
    out->write.reset();
    if (after_spawn_) after_spawn_();
    Status wrote = ipc::WriteAll(in->write.get(), start_bytes);
    EXPECT_TRUE(wrote.ok() || may_end_unread_) << wrote.ToString();
    in->write.reset();
    ReadFrames(out->read, run);
    Result<int> status = child->Wait();
    EXPECT_TRUE(status.ok());
    run.exit_code = ExitCodeFromWaitStatus(*status);
    run.stderr_text = ReadAll(err_path);
    return run;
  }

  ChildRun Run(const ipc::StartMessage& start) {
    Result<std::string> frame = ipc::EncodeMessage(start);
    EXPECT_TRUE(frame.ok());
    return RunRaw(*frame, start.transcript_fd);
  }

  // A standby child: the prepare frame for `start` (what forkbox sends ahead of time), then
  // `start` itself, or EOF without a task when `start` is nullopt.
  static ipc::PrepareMessage PrepareFor(const ipc::StartMessage& start) {
    return ipc::PrepareMessage{start.workdir, start.sandbox, start.provider.base_url, start.hints};
  }
  ChildRun RunStandby(const ipc::PrepareMessage& prepare,
                      const std::optional<ipc::StartMessage>& start) {
    Result<std::string> bytes = ipc::EncodeMessage(prepare);
    EXPECT_TRUE(bytes.ok());
    if (start) {
      Result<std::string> frame = ipc::EncodeMessage(*start);
      EXPECT_TRUE(frame.ok());
      *bytes += *frame;
    }
    return RunRaw(*bytes);
  }

  // The tool results the model got in request `i`, newest last.
  std::vector<mock::ToolResultView> ResultsIn(size_t i) {
    return server_.request(i).view.tool_results;
  }

  mock::MockServer server_;
  std::vector<std::pair<int, int>> extra_fds_;  // Descriptors the child must not keep.
  int transcript_source_ = -1;  // Ours, placed on the start frame's transcript_fd in the child.
  std::function<void()> after_spawn_;
  // Runs in the child before it execs forkbox-child (raw calls only: it may share our memory).
  std::function<int(const char**)> before_exec_;
  // The child may end before it reads its start frame (a refused start): a write that meets its
  // closed pipe (EPIPE) is no failure then.
  bool may_end_unread_ = false;
  size_t close_report_after_ = 0;  // Close the read end of fd 4 after this many frames.
  std::string root_;
  std::string workdir_;
};

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

json ToolCall(const std::string& name, json input) {
  return {{"name", name}, {"input", std::move(input)}};
}

TEST_F(ChildTest, ScriptedMultiTurnLoopReturnsTheScriptedSummary) {
  WriteFile(workdir_ + "/src.txt", "alpha foo omega\n");
  Scenario({{"rules",
             {{{"when", {{"turn", 0}}},
               {"reply",
                {{"text", "Let me look."},
                 {"tool_calls",
                  {ToolCall("write_file", {{"path", "notes/new.txt"}, {"content", "hello\n"}}),
                   ToolCall("bash", {{"command", "printf 'OUT%s\\n' PUT; cat notes/new.txt"}})}}}}},
              {{"when", {{"turn", 1}}},
               {"reply",
                {{"tool_calls",
                  {ToolCall("read_file", {{"path", "src.txt"}}),
                   ToolCall("edit_file",
                            {{"path", "src.txt"}, {"old_text", "foo"}, {"new_text", "bar"}})}}}}},
              {{"when", {{"turn", 2}}},
               {"reply", {{"text", "SCRIPTED SUMMARY: wrote notes/new.txt, fixed src.txt"}}}}}}});
  ChildRun run = Run(Start("fix src.txt"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text << run.decode_error;
  EXPECT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.result()->summary, "SCRIPTED SUMMARY: wrote notes/new.txt, fixed src.txt");
  EXPECT_EQ(run.result()->stats.stop_reason, "completed");
  EXPECT_EQ(run.result()->stats.turns, 3);
  EXPECT_EQ(run.result()->stats.tool_calls, 4);
  // The events counted them too (the parent's count when a task fails).
  ASSERT_FALSE(run.events().empty());
  EXPECT_EQ(run.events().back().tool_calls, 4);
  EXPECT_GT(run.result()->stats.tool_output_bytes, 0);
  EXPECT_GT(run.result()->stats.input_tokens, 0);
  // The files really changed.
  EXPECT_EQ(ReadAll(workdir_ + "/notes/new.txt"), "hello\n");
  EXPECT_EQ(ReadAll(workdir_ + "/src.txt"), "alpha bar omega\n");
  // The model saw the tool output; the parent saw only the input as event details.
  ASSERT_EQ(server_.request_count(), 3u);
  auto results = ResultsIn(1);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_THAT(results[1].text, HasSubstr("OUTPUT\nhello\n[exit code 0]"));
  results = ResultsIn(2);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_THAT(results[2].text, HasSubstr("alpha foo omega"));
  bool saw_bash = false;
  for (const auto& e : run.events()) {
    EXPECT_THAT(e.detail, Not(HasSubstr("OUTPUT")));
    if (e.tool == "bash") {
      saw_bash = true;
      EXPECT_EQ(e.detail, "printf 'OUT%s\\n' PUT; cat notes/new.txt");
      EXPECT_EQ(e.turn, 1);
    }
  }
  EXPECT_TRUE(saw_bash);
  for (const auto& r : server_.requests()) {
    EXPECT_THAT(r.view.tool_names,
                ::testing::UnorderedElementsAre("bash", "read_file", "write_file", "edit_file"));
    EXPECT_THAT(r.view.system, HasSubstr("You are a coding subagent at " + workdir_));
  }
}

// A seccomp filter that fails prctl(option, ...) with EPERM and allows everything else.
std::vector<sock_filter> RefusePrctl(int option) {
  return {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_prctl, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(option), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
}

// Without a death signal the child could outlive forkbox; dumpable, its memory (the API key)
// would be open to /proc/<pid>/mem: either refused, it ends before reading its task, names the
// step, and no request leaves. The control: the same task without the filter runs.
TEST_F(ChildTest, WithoutItsDeathSignalOrUndumpableItRunsNoTask) {
  Scenario({{"rules", {{{"when", {{"turn", 0}}}, {"reply", {{"text", "RAN"}}}}}}});
  for (const auto& [option, name] : {std::pair{PR_SET_PDEATHSIG, "PR_SET_PDEATHSIG"},
                                     std::pair{PR_SET_DUMPABLE, "PR_SET_DUMPABLE"}}) {
    SCOPED_TRACE(name);
    const std::vector<sock_filter> filter = RefusePrctl(option);
    const sock_fprog prog{static_cast<unsigned short>(filter.size()),
                          const_cast<sock_filter*>(filter.data())};
    before_exec_ = [&prog](const char**) {
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
      return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : errno;
    };
    may_end_unread_ = true;  // It refuses before reading its task.
    ChildRun refused = Run(Start("anything"));
    EXPECT_EQ(refused.exit_code, ipc::kChildExitBadStart) << refused.stderr_text;
    EXPECT_THAT(refused.stderr_text, HasSubstr(std::string("prctl(") + name));
    EXPECT_EQ(refused.result(), nullptr);
    EXPECT_EQ(server_.request_count(), 0u);
  }
  before_exec_ = nullptr;
  may_end_unread_ = false;
  ChildRun control = Run(Start("anything"));
  ASSERT_NE(control.result(), nullptr) << control.stderr_text;
  EXPECT_EQ(control.result()->summary, "RAN");
  EXPECT_EQ(server_.request_count(), 1u);
}

TEST_F(ChildTest, RequestsNeverOfferTheTaskTool) {
  Scenario({{"rules",
             {{{"when", {{"has_tool", "task"}}}, {"reply", {{"text", "WRONG: task offered"}}}},
              {{"when", {{"lacks_tool", "task"}}}, {"reply", {{"text", "OK: no task tool"}}}}}}});
  ChildRun run = Run(Start("anything"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.result()->summary, "OK: no task tool");
  ASSERT_EQ(server_.request_count(), 1u);
  EXPECT_FALSE(server_.request(0).view.HasTool("task"));
}

TEST_F(ChildTest, TurnLimitForcesAFinalSummaryWithoutTools) {
  Scenario({{"rules",
             {{{"when", {{"no_tools", true}}}, {"reply", {{"text", "FORCED SUMMARY"}}}},
              {{"when", json::object()},
               {"reply", {{"tool_calls", {ToolCall("bash", {{"command", "echo again"}})}}}}}}}});
  ipc::StartMessage start = Start("loop forever");
  start.limits.max_turns = 3;
  ChildRun run = Run(start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.result()->summary, "FORCED SUMMARY");
  EXPECT_EQ(run.result()->stats.stop_reason, "max_turns");
  EXPECT_EQ(run.result()->stats.tool_calls, 3);
  ASSERT_EQ(server_.request_count(), 4u);
  EXPECT_FALSE(server_.request(2).view.tool_names.empty());
  const mock::RecordedRequest last = server_.request(3);
  EXPECT_TRUE(last.view.tool_names.empty());
  EXPECT_FALSE(last.json.contains("tools") && !last.json["tools"].empty());
  EXPECT_THAT(last.view.LastUserText(), HasSubstr("final summary"));
  EXPECT_EQ(last.rejected, std::nullopt);
}

TEST_F(ChildTest, HugeCommandOutputIsCutBeforeTheModelSeesIt) {
  Scenario({{"rules",
             {{{"when", {{"turn", 0}}},
               {"reply",
                {{"tool_calls", {ToolCall("bash", {{"command", "yes | head -c 200000000"}})}}}}},
              {{"when", {{"turn", 1}}}, {"reply", {{"text", "done"}}}}}}});
  ChildRun run = Run(Start("print a lot"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  auto results = ResultsIn(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_THAT(results[0].text, HasSubstr("bytes dropped"));
  EXPECT_LE(results[0].text.size(), 50'000u + 300u);
  EXPECT_THAT(results[0].text, HasSubstr("[exit code 0]"));
  EXPECT_GE(run.result()->stats.tool_output_bytes, 200'000'000);
}

TEST_F(ChildTest, ToolErrorsReachTheModelAsIsError) {
  WriteFile(workdir_ + "/dup.txt", "x = 1\nx = 1\n");
  WriteFile(workdir_ + "/one.txt", "hello\n");
  Scenario(
      {{"rules",
        {{{"when", {{"turn", 0}}},
          {"reply",
           {{"tool_calls",
             {ToolCall("edit_file", {{"path", "one.txt"}, {"old_text", "nope"}, {"new_text", "x"}}),
              ToolCall("edit_file",
                       {{"path", "dup.txt"}, {"old_text", "x = 1"}, {"new_text", "y"}}),
              ToolCall("read_file", {{"path", "../outside.txt"}}),
              ToolCall("write_file", {{"path", root_ + "/escaped.txt"}, {"content", "x"}}),
              ToolCall("bash", {{"command", "echo bad >&2; exit 7"}}),
              ToolCall("no_such_tool", {{"x", 1}})}}}}},
         {{"when", {{"turn", 1}}}, {"reply", {{"text", "recovered"}}}}}}});
  ChildRun run = Run(Start("break things"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.result()->summary, "recovered");
  auto results = ResultsIn(1);
  ASSERT_EQ(results.size(), 6u);
  for (const auto& r : results) EXPECT_TRUE(r.is_error) << r.text;
  EXPECT_THAT(results[0].text, HasSubstr("not found"));
  EXPECT_THAT(results[1].text, HasSubstr("found 2 times"));
  EXPECT_THAT(results[2].text, HasSubstr("outside the workdir"));
  EXPECT_THAT(results[3].text, HasSubstr("outside the workdir"));
  EXPECT_THAT(results[4].text, HasSubstr("bad\n[exit code 7]"));
  EXPECT_THAT(results[5].text, HasSubstr("unknown tool"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/escaped.txt"));
  EXPECT_EQ(ReadAll(workdir_ + "/dup.txt"), "x = 1\nx = 1\n");
}

TEST_F(ChildTest, TimeoutKillsTheProcessGroupAndNothingOutlivesTheChild) {
  // Unique command lines, so the test can look for survivors anywhere on the machine.
  const std::string tag = std::to_string(::getpid()) + std::to_string(::time(nullptr) % 1000);
  const std::string grandchild = "sleep 8" + tag + ".25";
  const std::string escaped = "sleep 9" + tag + ".75";
  Scenario(
      {{"rules",
        {{{"when", {{"turn", 0}}},
          {"reply",
           {{"tool_calls",
             {ToolCall("bash", {{"command", "setsid " + escaped + " > /dev/null 2>&1 & echo ok"}}),
              ToolCall("bash", {{"command", grandchild + " & echo $! > gc.pid; wait"}})}}}}},
         {{"when", {{"turn", 1}}}, {"reply", {{"text", "timed out"}}}}}}});
  ipc::StartMessage start = Start("hang");
  start.limits.tool_timeout_ms = 1500;
  ChildRun run = Run(start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  auto results = ResultsIn(1);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[1].is_error);
  EXPECT_THAT(results[1].text, HasSubstr("timed out after 1.5s; process group killed"));
  // The child has exited (Run reaped it): neither the grandchild nor the escaped one survives.
  EXPECT_THAT(ProcessesWithMarker(grandchild), ::testing::IsEmpty());
  EXPECT_THAT(ProcessesWithMarker(escaped), ::testing::IsEmpty());
  if (!start.sandbox.enabled) {
    // Same pid namespace: the recorded pid is ours to check.
    pid_t pid = std::stoi(ReadAll(workdir_ + "/gc.pid"));
    EXPECT_EQ(::kill(pid, 0), -1);
    EXPECT_EQ(errno, ESRCH);
  }
}

TEST_F(ChildTest, NoApiKeyIsVisibleToToolCommands) {
  if (!SandboxAvailable(workdir_)) {
    GTEST_SKIP() << "the sandbox is not enforceable here (as root, only dropped capabilities keep "
                    "/proc/<child>/mem closed)";
  }
  // Read the child's heap through /proc/<child>/mem (where the key lives), the way an attacker
  // would; the maps read may itself be refused.
  const std::string read_mem =
      "heap=$(grep -m1 '\\[heap\\]' /proc/$PPID/maps 2>&1 | cut -d' ' -f1); "
      "if [ -n \"${heap%%-*}\" ] && [ \"${heap#*-}\" != \"$heap\" ]; then "
      "start=$((16#${heap%-*})); end=$((16#${heap#*-})); "
      "dd if=/proc/$PPID/mem bs=4096 skip=$((start/4096)) count=$(((end-start)/4096)) 2>&1 "
      "| strings | grep -a -m3 sk-ant; fi; head -c 64 /proc/$PPID/mem 2>&1 | strings; "
      "echo mem-done";
  Scenario({{"rules",
             {{{"when", {{"turn", 0}}},
               {"reply",
                {{"tool_calls",
                  {ToolCall("bash", {{"command", "env"}}),
                   ToolCall("bash", {{"command", "cat /proc/$PPID/environ | tr '\\0' '\\n'"}}),
                   ToolCall("bash", {{"command", "cat /proc/$PPID/cmdline; ps -ef"}}),
                   ToolCall("bash", {{"command", read_mem}})}}}}},
              {{"when", {{"turn", 1}}}, {"reply", {{"text", "looked"}}}}}}});
  ChildRun run = Run(Start("find the key"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  ASSERT_EQ(server_.request_count(), 2u);
  for (const auto& r : server_.requests()) {
    EXPECT_EQ(r.Header("x-api-key"), kApiKey);     // It did reach the model...
    EXPECT_THAT(r.body, Not(HasSubstr(kApiKey)));  // ...and nothing else.
  }
  EXPECT_THAT(ResultsIn(1)[3].text, HasSubstr("mem-done"));
}

TEST_F(ChildTest, SummaryIsCappedWithAMarker) {
  Scenario(
      {{"rules", {{{"when", json::object()}, {"reply", {{"text", std::string(5000, 'a')}}}}}}});
  ipc::StartMessage start = Start("talk a lot");
  start.limits.max_summary_bytes = 100;
  ChildRun run = Run(start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.result()->summary.substr(0, 101), std::string(100, 'a') + "\n");
  EXPECT_THAT(run.result()->summary, HasSubstr("summary truncated: 4900 bytes dropped"));
  EXPECT_LT(run.result()->summary.size(), 200u);
}

TEST_F(ChildTest, UnexpectedDescriptorsAreClosedBeforeTheFirstModelCall) {
  // A leaked pipe end on fd 9: once nothing holds it, its read end reports POLLHUP.
  Result<Pipe> leak = MakePipe();
  ASSERT_TRUE(leak.ok());
  extra_fds_ = {{leak->write.get(), 9}};
  int hangup_at_request = -1;
  server_.SetHandler([&](const mock::RecordedRequest&) {
    pollfd p{leak->read.get(), POLLIN, 0};
    hangup_at_request = ::poll(&p, 1, 0) == 1 && (p.revents & POLLHUP) ? 1 : 0;
    mock::Reply reply;
    reply.text = "checked";
    return reply;
  });
  // Our copy goes right after the spawn, so only the child's copy can keep the pipe alive.
  after_spawn_ = [&] { leak->write.reset(); };
  ChildRun run = Run(Start("anything"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(hangup_at_request, 1) << "the child (or its sandbox) kept fd 9 open";
}

TEST_F(ChildTest, TranscriptIsCompleteValidJsonl) {
  Scenario({{"rules",
             {{{"when", {{"turn", 0}}},
               {"reply", {{"tool_calls", {ToolCall("bash", {{"command", "seq 1 3"}})}}}}},
              {{"when", {{"turn", 1}}}, {"reply", {{"text", "counted"}}}}}}});
  std::string path = root_ + "/transcript.jsonl";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd.valid());
  // Placed on a fixed number in the child (the parent does the same); which number it has here
  // does not matter, since the test runner may hold any descriptor.
  ipc::StartMessage start = Start("count");
  start.transcript_fd = 7;
  transcript_source_ = fd.get();
  ChildRun run = Run(start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  std::string text = ReadAll(path);
  EXPECT_THAT(text, Not(HasSubstr(kApiKey)));
  std::istringstream lines(text);
  std::string line;
  std::vector<std::string> types;
  std::string tool_result;
  while (std::getline(lines, line)) {
    json j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    types.push_back(j.value("type", ""));
    if (j["type"] == "tool_result") tool_result = j["content"];
    if (j["type"] == "start") {
      EXPECT_EQ(j["provider"]["model"], "claude-test");
    }
  }
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types.front(), "start");
  EXPECT_EQ(types.back(), "result");
  for (const char* t : {"request", "response", "tool_call", "tool_result", "end"}) {
    EXPECT_THAT(types, ::testing::Contains(t));
  }
  EXPECT_EQ(std::count(types.begin(), types.end(), "request"), 2);
  EXPECT_EQ(tool_result, "1\n2\n3\n[exit code 0]");
  EXPECT_TRUE(text.back() == '\n');
}

TEST_F(ChildTest, ModelErrorGivesAnErrorFrame) {
  Scenario({{"rules",
             {{{"when", json::object()},
               {"fault",
                {{"kind", "status"},
                 {"status", 401},
                 {"error_type", "authentication_error"},
                 {"message", "invalid x-api-key"}}}}}}});
  ChildRun run = Run(Start("hello"));
  ASSERT_NE(run.error(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.error()->code, "model");
  EXPECT_THAT(run.error()->message, HasSubstr("401"));
  EXPECT_THAT(run.error()->message, Not(HasSubstr(kApiKey)));
  EXPECT_NE(run.exit_code, 0);
}

// Audit B: a model error page larger than a frame still reaches the parent, cut with a note
// (uncut, its frame could not be encoded and the reason was lost).
TEST_F(ChildTest, AModelErrorOverTheFrameCapArrivesCutWithANote) {
  Scenario({{"rules",
             {{{"when", json::object()},
               {"fault",
                {{"kind", "status"},
                 {"status", 400},
                 {"error_type", "invalid_request_error"},
                 // Past the frame's cap, within the 1 MiB an error body is read to.
                 {"message", std::string(900'000, 'E')}}}}}}});
  ChildRun run = Run(Start("hello"));
  ASSERT_NE(run.error(), nullptr) << run.stderr_text.substr(0, 2000);
  EXPECT_EQ(run.error()->code, "model");
  EXPECT_THAT(run.error()->message, HasSubstr("400"));
  EXPECT_THAT(run.error()->message, HasSubstr("[... error message truncated: "));
  EXPECT_LE(run.error()->message.size(), ipc::kMaxErrorMessageBytes + 100);
  EXPECT_EQ(run.exit_code, ipc::kChildExitModel);
}

TEST_F(ChildTest, StandbyRunsTheTaskUnderTheSandboxItPrepared) {
  const bool sandboxed = SandboxAvailable(workdir_);
  Scenario(
      {{"rules",
        {{{"when", {{"turn", 0}}},
          {"reply",
           {{"tool_calls",
             {ToolCall("bash",
                       {{"command",
                         "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; "
                         "touch /forkbox-standby-probe && echo WROTE-OUTSIDE; "
                         "touch probe && echo wrote-inside; echo \"tmp=$(readlink \"$TMPDIR\")\"; "
                         "env"}})}}}}},
         {{"when", {{"turn", 1}}}, {"reply", {{"text", "standby done"}}}}}}});
  ipc::StartMessage start = Start("probe the sandbox");
  ChildRun run = RunStandby(PrepareFor(start), start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.result()->summary, "standby done");
  ASSERT_EQ(server_.request_count(), 2u);
  for (const auto& r : server_.requests()) EXPECT_EQ(r.Header("x-api-key"), kApiKey);
  const std::string out = ResultsIn(1).at(0).text;
  EXPECT_THAT(out, HasSubstr("wrote-inside"));
  // Made after the wait; TMPDIR is its short link (sandbox/sandbox.h, TaskTmpDir).
  EXPECT_THAT(out, HasSubstr("tmp=" + workdir_ + "/.forkbox-tmp/"));
  EXPECT_THAT(out, HasSubstr("TMPDIR=/dev/shm/forkbox-"));
  EXPECT_THAT(out, Not(HasSubstr(kApiKey)));
  if (sandboxed) {
    EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t1"));
    EXPECT_THAT(out, HasSubstr("Seccomp:\t2"));
    EXPECT_THAT(out, Not(HasSubstr("WROTE-OUTSIDE")));
  }
  // The task's temp dir is gone with the task.
  std::error_code ec;
  auto it = std::filesystem::directory_iterator(workdir_ + "/.forkbox-tmp", ec);
  for (; !ec && it != std::filesystem::directory_iterator(); ++it) {
    EXPECT_EQ(it->path().filename(), ".gitignore") << it->path();
  }
}

// Issue 18: the parent's hints (ipc::ChildSandboxHints) are what the child builds its sandbox
// from. The hinted port is the only TCP port the agent may connect to: the true one completes
// the task (on demand and as a standby); another one leaves the model unreachable, so the
// child cannot have parsed the URL itself.
TEST_F(ChildTest, TheParentsModelPortIsTheAgentsOnlyTcpDestination) {
  Scenario({{"rules", {{{"when", json::object()}, {"reply", {{"text", "hinted"}}}}}}});
  ipc::StartMessage start = Start("use the hints");
  start.hints.model_port = server_.port();
  start.hints.layer2_verified = start.sandbox.enabled && sandbox::Layer2Available();
  ChildRun run = Run(start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.result()->summary, "hinted");
  run = RunStandby(PrepareFor(start), start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.result()->summary, "hinted");

  sandbox::Policy p;
  p.workdir = workdir_;
  if (!start.sandbox.enabled || sandbox::Check(p).landlock_abi < 4) {
    GTEST_SKIP() << "no Landlock network rules here";
  }
  const size_t before = server_.request_count();
  start.hints.model_port = server_.port() == 65535 ? 1 : server_.port() + 1;
  run = Run(start);
  ASSERT_NE(run.error(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.error()->code, "model");
  EXPECT_EQ(server_.request_count(), before);
}

// Issue 18: as root in layer 2 the task's own PID namespace holds a fork bomb (pid_max), with no
// pids cgroup attach on the task's clock.
TEST_F(ChildTest, RootTaskIsCappedByItsPidNamespace) {
  const int64_t pid_max = sandbox::RootPidNamespaceMax(sandbox::Layer2Available(), 512);
  if (!SandboxAvailable(workdir_) || pid_max == 0 || sandbox::PidsCgroup::InForkboxCgroup()) {
    GTEST_SKIP() << "needs uid 0, layer 2 and Linux >= 6.14, outside a forkbox cgroup";
  }
  Scenario(
      {{"rules",
        {{{"when", {{"turn", 0}}},
          {"reply",
           {{"tool_calls",
             {ToolCall("bash",
                       {{"command",
                         "cat /proc/sys/kernel/pid_max; grep :pids: /proc/self/cgroup; "
                         "sh -c 'i=0; while [ $i -lt 700 ]; do sleep 100000 >/dev/null & echo ok; "
                         "i=$((i+1)); done' 2>/dev/null | grep -c ok"}})}}}}},
         {{"when", {{"turn", 1}}}, {"reply", {{"text", "bomb done"}}}}}}});
  ChildRun run = Run(Start("fork bomb"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  const std::string out = ResultsIn(1).at(0).text;
  // Control: the host's pid_max is not the task's.
  std::ifstream host("/proc/sys/kernel/pid_max");
  int64_t host_max = 0;
  host >> host_max;
  EXPECT_NE(host_max, pid_max);
  EXPECT_EQ(out.rfind(std::to_string(pid_max) + "\n", 0), 0u) << out;
  EXPECT_THAT(out, Not(HasSubstr("/forkbox/task-"))) << "a pids cgroup was attached";
  std::istringstream lines(out);
  std::string line;
  int64_t started = -1;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) {
      started = std::stoll(line);
    }
  }
  EXPECT_GE(started, 1);
  EXPECT_LT(started, 512) << out;
}

TEST_F(ChildTest, RetiredStandbyExitsQuietlyAndLeavesNothing) {
  ChildRun run = RunStandby(PrepareFor(Start("unused")), std::nullopt);
  EXPECT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_TRUE(run.frames.empty());
  EXPECT_TRUE(run.decode_error.empty()) << run.decode_error;
  EXPECT_EQ(server_.request_count(), 0u);
  EXPECT_FALSE(std::filesystem::exists(workdir_ + "/.forkbox-tmp"));
}

TEST_F(ChildTest, StandbyRefusesAStartFrameThatDisagreesWithItsPrepareFrame) {
  struct Case {
    const char* what;
    std::function<void(ipc::StartMessage&)> change;
  };
  const std::string other = root_ + "/other";
  std::filesystem::create_directories(other);
  std::vector<Case> cases = {
      {"workdir", [&](ipc::StartMessage& s) { s.workdir = other; }},
      {"the sandbox settings differ", [](ipc::StartMessage& s) { s.sandbox.allow_net = true; }},
      {"model URL", [](ipc::StartMessage& s) { s.provider.base_url = "http://127.0.0.1:1"; }},
      {"transcript_fd", [](ipc::StartMessage& s) { s.transcript_fd = 5; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ipc::StartMessage start = Start("mismatch");
    ipc::PrepareMessage prepare = PrepareFor(start);
    c.change(start);
    ChildRun run = RunStandby(prepare, start);
    ASSERT_NE(run.error(), nullptr) << run.stderr_text;
    EXPECT_EQ(run.error()->code, "bad_start");
    EXPECT_THAT(run.error()->message, HasSubstr("disagrees with the prepare frame"));
    EXPECT_THAT(run.error()->message, HasSubstr(c.what));
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(server_.request_count(), 0u);
  }
}

std::string RawFrame(const std::string& payload) {
  uint32_t n = static_cast<uint32_t>(payload.size());
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return out + payload;
}

TEST_F(ChildTest, StandbyGivenGarbageOrASecondPrepareGivesAnErrorFrame) {
  Result<std::string> prepare = ipc::EncodeMessage(PrepareFor(Start("x")));
  ASSERT_TRUE(prepare.ok());
  struct Case {
    std::string after;
    const char* says;
  };
  for (const Case& c : {Case{RawFrame("not json at all"), "after prepare"},
                        Case{*prepare,
                             "expected a start frame on fd 3 after prepare, got a "
                             "\"prepare\" frame"},
                        Case{std::string("\x07\x00", 2), "truncated frame"}}) {
    SCOPED_TRACE(c.says);
    ChildRun run = RunRaw(*prepare + c.after);
    ASSERT_NE(run.error(), nullptr) << run.stderr_text;
    EXPECT_EQ(run.error()->code, "bad_start");
    EXPECT_THAT(run.error()->message, HasSubstr(c.says));
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(server_.request_count(), 0u);
  }
}

TEST_F(ChildTest, BadStartFrameGivesAnErrorFrame) {
  for (const std::string& bytes :
       {RawFrame("this is not json"),
        RawFrame(R"({"type":"event","turn":1,"tool":"","detail":""})"),
        RawFrame(R"({"type":"start","prompt":"x"})"), std::string("\x05\x00", 2), std::string(),
        RawFrame(R"({"type":"prepare","workdir":"/"})")}) {
    ChildRun run = RunRaw(bytes);
    ASSERT_NE(run.error(), nullptr) << run.stderr_text;
    EXPECT_EQ(run.error()->code, "bad_start");
    EXPECT_FALSE(run.error()->message.empty());
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(server_.request_count(), 0u);
  }
}

// A start frame that names a key twice (two prompts) is refused as bad_start naming the key, and
// no model call is made: before, the child ran whichever prompt came last. Control: the same frame
// without the second prompt runs its task.
TEST_F(ChildTest, AStartFrameThatRepeatsAKeyIsRefusedNamingIt) {
  Scenario({{"rules", {{{"when", json::object()}, {"reply", {{"text", "done"}}}}}}});
  const std::string payload = ipc::ToJson(Start("the task")).dump();
  ChildRun once = RunRaw(RawFrame(payload));
  ASSERT_NE(once.result(), nullptr) << once.stderr_text << once.decode_error;
  EXPECT_EQ(once.result()->summary, "done");
  EXPECT_EQ(server_.request_count(), 1u);

  ChildRun twice = RunRaw(RawFrame(R"({"prompt":"another task",)" + payload.substr(1)));
  ASSERT_NE(twice.error(), nullptr) << twice.stderr_text << twice.decode_error;
  EXPECT_EQ(twice.error()->code, "bad_start");
  EXPECT_THAT(twice.error()->message, HasSubstr("repeats the key \"prompt\" in one object"));
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_EQ(server_.request_count(), 1u);
}

TEST_F(ChildTest, OversizedStartFrameIsRefusedBeforeItIsRead) {
  // The length field says 2 MiB: the child must refuse on the length field alone, before
  // reading (or allocating for) the payload.
  std::string header;
  uint32_t n = 2u << 20;
  for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  ChildRun run = RunRaw(header + "{\"type\":\"start\"");
  ASSERT_NE(run.error(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.error()->code, "bad_start");
  EXPECT_THAT(run.error()->message, HasSubstr("start frame"));
  EXPECT_EQ(run.exit_code, 2);
}

}  // namespace
}  // namespace forkbox

namespace forkbox {
namespace {

// Task temp dirs (.forkbox-tmp/task-*) left in the workdir.
std::vector<std::string> TaskTmpDirs(const std::string& workdir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(workdir + "/.forkbox-tmp", ec)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

// The parent closing fd 4 mid-task used to end the child with _exit from inside a callback,
// skipping the temp dir's destructor. Now the loop stops and the task unwinds.
TEST_F(ChildTest, ParentGoneMidTaskStopsTheTaskAndRemovesItsTempDir) {
  // A model that never stops calling tools: only the parent's absence can end the task.
  Scenario({{"rules",
             {{{"reply",
                {{"tool_calls",
                  {ToolCall("bash",
                            {{"command",
                              "readlink $TMPDIR > tmpdir.txt; echo $TMPDIR > link.txt"}})}}}}}}}});
  ipc::StartMessage start = Start("loop");
  start.limits.max_turns = 1000;
  close_report_after_ = 2;  // The model turn's event and the first tool call's.
  ChildRun run = Run(start);
  EXPECT_EQ(run.exit_code, 5) << run.stderr_text;  // kExitParentGone
  EXPECT_THAT(run.stderr_text, HasSubstr("the parent is gone"));
  // The task did create its temp dir (the tool saw it) and removed it.
  EXPECT_THAT(ReadAll(workdir_ + "/tmpdir.txt"), HasSubstr(".forkbox-tmp/"));
  EXPECT_THAT(TaskTmpDirs(workdir_), ::testing::IsEmpty());
  std::string link = ReadAll(workdir_ + "/link.txt");
  ASSERT_THAT(link, HasSubstr("/dev/shm/forkbox-"));
  link.pop_back();  // The newline.
  struct stat st;
  EXPECT_NE(lstat(link.c_str(), &st), 0) << "the short link " << link << " was left behind";
  EXPECT_LT(server_.request_count(), 1000u);
}

// Issue 18: the task's temp dir is made once the first request is on the wire (off the spawn's
// clock). When it cannot be made, no tool runs and the task fails as a sandbox failure, as it did
// when the dir was made before the first request.
TEST_F(ChildTest, TempDirThatCannotBeMadeFailsTheTaskBeforeAnyToolRuns) {
  Scenario(
      {{"rules", {{{"reply", {{"tool_calls", {ToolCall("bash", {{"command", "touch ran"}})}}}}}}}});
  // A regular file where the temp dirs' directory goes.
  std::ofstream(workdir_ + "/.forkbox-tmp") << "not a directory\n";
  ChildRun run = Run(Start("run a tool"));
  ASSERT_NE(run.error(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.error()->code, "sandbox");
  EXPECT_THAT(run.error()->message, HasSubstr(".forkbox-tmp"));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(workdir_ + "/ran")) << "a tool ran without its temp dir";
  EXPECT_EQ(server_.request_count(), 1u);
}

// Issue 15: a llama.cpp-style cut JSON argument goes back to the model as an is_error result
// naming the problem and the schema; the request is not re-sent and the task completes. Both
// wire formats, streaming and not.
TEST_F(ChildTest, MalformedToolCallGoesBackToTheModelAndTheTaskCompletes) {
  for (const bool openai : {false, true}) {
    for (const bool stream : {true, false}) {
      server_.ClearRequests();
      Scenario({{"require_key", false},
                {"rules",
                 {{{"when", {{"turn", 0}}},
                   {"reply", {{"tool_calls", {ToolCall("bash", "{\"command\": \"ls")}}}}},
                  {{"when", {{"turn", 1}}}, {"reply", {{"text", "recovered"}}}}}}});
      ipc::StartMessage start = Start("list");
      if (openai) {
        start.provider.name = "openai";
        start.provider.base_url = server_.openai_base_url();
        start.provider.model = "local";
      }
      start.provider.stream = stream;
      ChildRun run = Run(start);
      ASSERT_NE(run.result(), nullptr) << run.stderr_text;
      EXPECT_EQ(run.result()->summary, "recovered");
      EXPECT_EQ(run.result()->stats.stop_reason, "completed");
      ASSERT_EQ(server_.request_count(), 2u) << "openai " << openai << " stream " << stream;
      auto results = ResultsIn(1);
      ASSERT_EQ(results.size(), 1u);
      if (!openai) {
        EXPECT_TRUE(results[0].is_error);  // OpenAI tool messages carry no flag.
      }
      EXPECT_THAT(results[0].text, HasSubstr("not valid JSON"));
      EXPECT_THAT(results[0].text, HasSubstr("\"required\":[\"command\"]"));
    }
  }
}

// Local-server quirks the mock can play (OpenAI format, streaming and not), each completing:
// finish_reason "stop" with tool calls present, several calls in one turn, `length` in the middle
// of a tool call (the cut call never runs), an empty assistant message.
TEST_F(ChildTest, LocalServerQuirksComplete) {
  struct Quirk {
    const char* name;
    json rules;
    const char* stop_reason;
    size_t requests;
  };
  const Quirk quirks[] = {
      {"stop with tool calls",
       {{{"when", {{"turn", 0}}},
         {"reply",
          {{"tool_calls", {ToolCall("bash", {{"command", "echo hi"}})}},
           {"stop_reason", "end_turn"}}}},
        {{"when", {{"turn", 1}}}, {"reply", {{"text", "done"}}}}},
       "completed",
       2},
      {"several calls in one turn",
       {{{"when", {{"turn", 0}}},
         {"reply",
          {{"tool_calls",
            {ToolCall("bash", {{"command", "echo a"}}), ToolCall("bash", {{"command", "echo b"}}),
             ToolCall("read_file", {{"path", "missing"}})}}}}},
        {{"when", {{"turn", 1}}}, {"reply", {{"text", "done"}}}}},
       "completed",
       2},
      {"length mid tool call",
       {{{"reply",
          {{"text", "cut"},
           {"tool_calls", {ToolCall("bash", {{"command", "touch never-run"}})}},
           {"stop_reason", "max_tokens"}}}}},
       "max_tokens",
       1},
      {"empty assistant message", {{{"reply", {{"text", ""}}}}}, "completed", 1},
  };
  for (const Quirk& q : quirks) {
    for (const bool stream : {true, false}) {
      server_.ClearRequests();
      Scenario({{"require_key", false}, {"rules", q.rules}});
      ipc::StartMessage start = Start("quirk");
      start.provider.name = "openai";
      start.provider.base_url = server_.openai_base_url();
      start.provider.model = "local";
      start.provider.stream = stream;
      ChildRun run = Run(start);
      ASSERT_NE(run.result(), nullptr) << q.name << ": " << run.stderr_text;
      EXPECT_EQ(run.result()->stats.stop_reason, q.stop_reason) << q.name;
      EXPECT_EQ(server_.request_count(), q.requests) << q.name;
      EXPECT_FALSE(run.result()->summary.empty()) << q.name;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(workdir_ + "/never-run"));
}

// Orphans re-parented to the agent are reaped while the task runs, not only at its end.
TEST_F(ChildTest, OrphanedZombiesAreReapedWhileTheTaskRuns) {
  // Zombie children of the agent ($PPID of the tool's bash). cat, not awk, opens the files:
  // processes vanish while they are listed.
  const std::string count =
      "cat /proc/[0-9]*/status 2>/dev/null | awk -v p=$PPID '/^Name:/{s=\"\"} /^State:/{s=$2} "
      "/^PPid:/{if (s==\"Z\" && $2==p) n++} END{print n+0}'";
  // 40 orphans (their parent subshell exits at once; a few are reaped by it first): wait until at
  // least 20 are zombies of the agent.
  const std::string make =
      "for i in $(seq 40); do (sh -c 'exit 0' &); done; "
      "until [ \"$(" +
      count + ")\" -ge 20 ]; do :; done; echo made $(" + count + ")";
  Scenario({{"rules",
             {{{"when", {{"turn", 0}}},
               {"reply", {{"tool_calls", {ToolCall("bash", {{"command", make}})}}}}},
              {{"when", {{"turn", 1}}},
               {"reply",
                {{"tool_calls", {ToolCall("bash", {{"command", "echo left $(" + count + ")"}})}}}}},
              {{"when", {{"turn", 2}}}, {"reply", {{"text", "done"}}}}}}});
  ipc::StartMessage start = Start("zombies");
  start.limits.tool_timeout_ms = 20'000;
  ChildRun run = Run(start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  ASSERT_EQ(ResultsIn(1).size(), 1u);
  EXPECT_THAT(ResultsIn(1)[0].text, HasSubstr("made ")) << ResultsIn(1)[0].text;  // Control.
  ASSERT_EQ(ResultsIn(2).size(), 2u);
  EXPECT_THAT(ResultsIn(2).back().text, HasSubstr("left 0"));
}

// Issue 15: rules for `turns` turns of a bash `command`, then a text answer.
json BashTurns(int turns, const std::string& command) {
  json rules = json::array();
  for (int t = 0; t < turns; ++t) {
    rules.push_back({{"when", {{"turn", t}}},
                     {"reply", {{"tool_calls", {ToolCall("bash", {{"command", command}})}}}}});
  }
  rules.push_back({{"reply", {{"text", "done"}}}});
  return rules;
}

// The mock bills prompt caching like the API: the moving breakpoint makes each turn read the
// previous prefix, and the result frame reports reads and writes.
TEST_F(ChildTest, CacheReadsAndWritesAreReported) {
  Scenario({{"rules", BashTurns(5, "seq 1 2000")}});
  ChildRun run = Run(Start("cache"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  const ipc::ResultStats& s = run.result()->stats;
  EXPECT_EQ(s.stop_reason, "completed");
  EXPECT_GT(s.cache_read_input_tokens, s.input_tokens / 2);
  EXPECT_GT(s.cache_creation_input_tokens, 0);
  EXPECT_LE(s.cache_read_input_tokens + s.cache_creation_input_tokens, s.input_tokens);
  // Control: without prompt caching nothing is read or written.
  server_.ClearRequests();
  ipc::StartMessage start = Start("no cache");
  start.provider.prompt_caching = false;
  ChildRun plain = Run(start);
  ASSERT_NE(plain.result(), nullptr) << plain.stderr_text;
  EXPECT_EQ(plain.result()->stats.cache_read_input_tokens, 0);
  EXPECT_EQ(plain.result()->stats.cache_creation_input_tokens, 0);
}

// Tools printing 20,000 characters each (~5,000 tokens) under a 20,000-token window: old results
// are folded, every request stays inside the window, and the task completes.
TEST_F(ChildTest, LongTaskStaysInsideItsContextWindow) {
  Scenario({{"rules", BashTurns(10, "head -c 20000 /dev/zero | tr '\\0' x")}});
  ipc::StartMessage start = Start("long");
  start.provider.context_window = 20'000;
  ChildRun run = Run(start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.result()->stats.stop_reason, "completed");
  ASSERT_EQ(server_.request_count(), 11u);
  size_t peak = 0;
  for (const mock::RecordedRequest& r : server_.requests()) peak = std::max(peak, r.body.size());
  EXPECT_LT(peak / 4, 20'000u);
  EXPECT_THAT(server_.request(10).body, HasSubstr("tool result folded to save context: bash"));
  // Control: the same task without a window this small sends it all.
  server_.ClearRequests();
  ChildRun wide = Run(Start("long"));
  ASSERT_NE(wide.result(), nullptr) << wide.stderr_text;
  EXPECT_GT(server_.request(10).body.size() / 4, 20'000u);
}

json TooLongFault(int times) {
  json rule = {{"when", {{"turn", 2}}},
               {"fault",
                {{"kind", "status"},
                 {"status", 400},
                 {"message", "prompt is too long: 250000 tokens > 200000 maximum"}}}};
  if (times > 0) rule["times"] = times;
  return rule;
}

TEST_F(ChildTest, TooLongIsCompactedAndRetriedOnce) {
  json rules = BashTurns(2, "head -c 20000 /dev/zero | tr '\\0' x");
  rules.insert(rules.begin(), TooLongFault(1));
  Scenario({{"rules", rules}});
  ChildRun run = Run(Start("too long once"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.result()->stats.stop_reason, "completed");
  ASSERT_EQ(server_.request_count(), 4u);
  EXPECT_THAT(server_.request(3).body, HasSubstr("tool result folded to save context"));
  EXPECT_THAT(server_.request(2).body, Not(HasSubstr("tool result folded to save context")));
}

TEST_F(ChildTest, TooLongTwiceEndsWithStopContextWindow) {
  json rules = BashTurns(2, "head -c 20000 /dev/zero | tr '\\0' x");
  rules.insert(rules.begin(), TooLongFault(0));
  Scenario({{"rules", rules}});
  ChildRun run = Run(Start("too long"));
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  EXPECT_EQ(run.result()->stats.stop_reason, "context_window");
  EXPECT_EQ(server_.request_count(), 4u);
}

// --task-max-tokens: before a turn that would not fit, one last call without tools asks for the
// summary, and the task stops with `budget` inside its budget.
TEST_F(ChildTest, TaskBudgetEndsWithASummary) {
  json rules = json::array();
  rules.push_back({{"when", {{"no_tools", true}}}, {"reply", {{"text", "budget summary"}}}});
  rules.push_back({{"reply",
                    {{"tool_calls", {ToolCall("bash", {{"command", "echo step"}})}},
                     {"usage", {{"input_tokens", 500}, {"output_tokens", 100}}}}}});
  Scenario({{"rules", rules}});
  ipc::StartMessage start = Start("budget");
  start.provider.max_tokens = 100;
  start.limits.max_tokens = 3'000;
  ChildRun run = Run(start);
  ASSERT_NE(run.result(), nullptr) << run.stderr_text;
  const ipc::ResultStats& s = run.result()->stats;
  EXPECT_EQ(s.stop_reason, "budget");
  EXPECT_EQ(run.result()->summary, "budget summary");
  EXPECT_LE(s.input_tokens + s.output_tokens, 3'000);
  EXPECT_TRUE(server_.requests().back().view.tool_names.empty());
  EXPECT_GE(server_.request_count(), 3u);
}

// More local-server quirks (OpenAI format, streaming and not), each completing with the tool
// really run: arguments as a JSON object (llama.cpp --tool-args-object), no usage at all even
// with stream_options.include_usage, reasoning_content deltas (the mock rejects them sent back).
TEST_F(ChildTest, MoreLocalServerQuirksComplete) {
  const std::pair<const char*, json> quirks[] = {
      {"arguments_object", true}, {"no_usage", true}, {"reasoning", "Let me think about it."}};
  for (const auto& [key, value] : quirks) {
    for (const bool stream : {true, false}) {
      server_.ClearRequests();
      json first = {{"tool_calls", {ToolCall("bash", {{"command", "echo quirk-ran"}})}}};
      first[key] = value;
      json last = {{"text", "done"}};
      last[key] = value;
      Scenario({{"require_key", false},
                {"rules",
                 {{{"when", {{"turn", 0}}}, {"reply", first}},
                  {{"when", {{"turn", 1}}}, {"reply", last}}}}});
      ipc::StartMessage start = Start("quirk");
      start.provider.name = "openai";
      start.provider.base_url = server_.openai_base_url();
      start.provider.model = "local";
      start.provider.stream = stream;
      ChildRun run = Run(start);
      ASSERT_NE(run.result(), nullptr) << key << ": " << run.stderr_text;
      EXPECT_EQ(run.result()->stats.stop_reason, "completed") << key;
      EXPECT_EQ(run.result()->summary, "done") << key;
      ASSERT_EQ(server_.request_count(), 2u) << key << " stream " << stream;
      ASSERT_EQ(ResultsIn(1).size(), 1u) << key;
      EXPECT_THAT(ResultsIn(1)[0].text, HasSubstr("quirk-ran")) << key;
      if (stream) {  // The client asks for usage where the server supports it.
        EXPECT_THAT(server_.request(0).body, HasSubstr("\"include_usage\":true")) << key;
      }
    }
  }
}

// --thinking: the request enables it, each thinking block goes back unchanged (the mock checks
// its signature and that the tool loop's assistant message starts with it), and the thinking
// text never reaches the summary.
TEST_F(ChildTest, ExtendedThinkingBlocksGoBackSigned) {
  for (const bool stream : {true, false}) {
    server_.ClearRequests();
    Scenario({{"rules",
               {{{"when", {{"turn", 0}}},
                 {"reply",
                  {{"thinking", "secret plan: list the files"},
                   {"tool_calls", {ToolCall("bash", {{"command", "echo thought"}})}}}}},
                {{"when", {{"turn", 1}}},
                 {"reply", {{"thinking", "secret: wrap up"}, {"text", "done"}}}}}}});
    ipc::StartMessage start = Start("think");
    start.provider.thinking_budget_tokens = 1024;
    start.provider.max_tokens = 4096;
    start.provider.stream = stream;
    ChildRun run = Run(start);
    ASSERT_NE(run.result(), nullptr) << run.stderr_text;
    EXPECT_EQ(run.result()->stats.stop_reason, "completed");
    EXPECT_EQ(run.result()->summary, "done");
    ASSERT_EQ(server_.request_count(), 2u);
    EXPECT_FALSE(server_.request(1).rejected.has_value());
    EXPECT_EQ(server_.request(0).json["thinking"],
              json({{"type", "enabled"}, {"budget_tokens", 1024}}));
    EXPECT_THAT(server_.request(1).body, HasSubstr("secret plan: list the files"));
    EXPECT_THAT(run.result()->summary, Not(HasSubstr("secret")));
  }
}

}  // namespace
}  // namespace forkbox
