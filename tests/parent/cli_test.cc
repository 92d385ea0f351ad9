// Issue 14's REPL, progress and accounting, end to end: the real forkbox binary on a
// pseudo-terminal (stdin, stdout and stderr; the pty is its controlling terminal, so Ctrl-C is
// the byte 0x03 through the line discipline) against the in-process mock model. No sleeps: every
// wait polls the screen or the mock for what it expects, with a deadline.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/process.h"
#include "base/unique_fd.h"
#include "tests/mock/mock_server.h"
#include "tests/parent/run_forkbox.h"

namespace forkbox::parent_test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using mock::MockServer;
using mock::RecordedRequest;
using mock::Reply;
using mock::ToolCall;

constexpr auto kDeadline = std::chrono::seconds(30);

Reply Text(const std::string& text, int64_t in = 0, int64_t out = 0) {
  Reply r;
  r.text = text;
  r.usage.input_tokens = in;
  r.usage.output_tokens = out;
  return r;
}

// forkbox on a fresh pseudo-terminal, as its controlling terminal unless `controlling` is false
// (then closing the terminal sends no SIGHUP: its reads alone say it is gone). With `bash_script`,
// forkbox runs through `bash -c SCRIPT FORKBOX ARGS...` ($0 its path, "$@" the args): a shell
// with job control (`set -m`) to stop it and `fg` it.
class PtyForkbox {
 public:
  PtyForkbox(const std::vector<std::string>& args, const std::vector<std::string>& env,
             const std::string& cwd, bool controlling = true, const std::string& bash_script = "") {
    int master = -1, slave = -1;
    struct winsize ws = {};
    ws.ws_row = 30;
    ws.ws_col = 120;
    if (openpty(&master, &slave, nullptr, nullptr, &ws) != 0) throw std::runtime_error("openpty");
    master_.reset(master);
    UniqueFd slave_fd(slave);
    fcntl(master, F_SETFD, FD_CLOEXEC);
    if (const char* name = ptsname(master)) slave_path_ = name;
    SpawnOptions opts;
    if (!bash_script.empty()) opts.argv = {"/bin/bash", "-c", bash_script};
    opts.argv.push_back(ForkboxPath());
    for (const auto& a : args) opts.argv.push_back(a);
    opts.env = env;
    opts.cwd = cwd;
    opts.fds = {{slave_fd.get(), 0}, {slave_fd.get(), 1}, {slave_fd.get(), 2}};
    opts.new_session = true;
    if (controlling) {
      opts.steps.push_back(
          {"TIOCSCTTY", [](const char**) { return ioctl(0, TIOCSCTTY, 0) == 0 ? 0 : errno; }});
    }
    auto child = Spawn(opts);
    if (!child.ok()) throw std::runtime_error("spawn: " + child.status().ToString());
    process_ = std::move(*child);
  }

  // Waits until `needle` appears on the screen after everything matched so far.
  bool Expect(const std::string& needle) {
    const auto deadline = Clock::now() + kDeadline;
    while (true) {
      size_t at = screen_.find(needle, seen_);
      if (at != std::string::npos) {
        seen_ = at + needle.size();
        return true;
      }
      if (!Pump(deadline)) return false;
    }
  }
  void Type(const std::string& bytes) {
    ASSERT_EQ(write(master_.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  // Waits for the exit (the pidfd) and returns the exit code; -1 past the deadline.
  int Finish() {
    const auto deadline = Clock::now() + kDeadline;
    while (Clock::now() < deadline) {
      struct pollfd p = {process_.pidfd(), POLLIN, 0};
      if (poll(&p, 1, 0) == 1) {
        while (Pump(Clock::now())) {
        }
        auto status = process_.Wait();
        return status.ok() ? ExitCodeFromWaitStatus(*status) : -1;
      }
      Pump(std::min(deadline, Clock::now() + std::chrono::milliseconds(200)));
    }
    return -1;
  }
  // Waits until the terminal holds exactly `bytes` typed bytes nobody has read yet (0: forkbox
  // read everything typed; libedit reads one byte at a time, so nothing waits in its buffers).
  bool WaitUnread(int bytes) {
    UniqueFd slave(open(slave_path_.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!slave) return false;
    const auto deadline = Clock::now() + kDeadline;
    while (Clock::now() < deadline) {
      int unread = -1;
      if (ioctl(slave.get(), FIONREAD, &unread) != 0) return false;
      if (unread == bytes) return true;
      Pump(std::min(deadline, Clock::now() + std::chrono::milliseconds(20)));
    }
    return false;
  }
  // The terminal window closes: its master side goes away.
  void CloseTerminal() { master_.reset(); }
  // Whether the terminal neither echoes nor line-edits now (the editor's mode, or the quiet one
  // of a session at work).
  bool Quiet() const {
    UniqueFd slave(open(slave_path_.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
    termios t;
    return slave && tcgetattr(slave.get(), &t) == 0 && (t.c_lflag & (ICANON | ECHO)) == 0;
  }
  void Signal(int sig) { ASSERT_TRUE(process_.Signal(sig).ok()); }
  const std::string& screen() const { return screen_; }
  bool running() {
    auto waited = process_.TryWait();
    return waited.ok() && !waited->has_value();
  }

 private:
  // Reads what the terminal shows until `until`; false when nothing came.
  bool Pump(Clock::time_point until) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    struct pollfd p = {master_.get(), POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (n <= 0) return false;
    char buf[4096];
    ssize_t got = read(master_.get(), buf, sizeof(buf));
    if (got <= 0) return false;  // EIO: the terminal's last user is gone.
    screen_.append(buf, static_cast<size_t>(got));
    return true;
  }

  UniqueFd master_;
  std::string slave_path_;
  ChildProcess process_;
  std::string screen_;
  size_t seen_ = 0;
};

// A shell with job control around forkbox, as bash at a terminal is: once forkbox stops, it leaves
// the terminal in its own mode (cooked, echoing, bracketed paste off), says so and runs `fg`.
constexpr char kJobShell[] =
    "set -m; \"$0\" \"$@\"; stty icanon echo icrnl; printf '\\033[?2004l'; "
    "echo '[job stopped]'; fg";

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    workdir_ = root_ / "work";
    fs::create_directories(workdir_);
    key_ = "sk-test-" + RandomToken();
  }
  void TearDown() override {
    server_.Stop();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::vector<std::string> Env() {
    server_.Start();
    std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin",
                                    "HOME=" + root_.string(),
                                    "LANG=C.UTF-8",
                                    "TERM=xterm",
                                    "XDG_STATE_HOME=" + (root_ / "state").string(),
                                    "ANTHROPIC_API_KEY=" + key_,
                                    "ANTHROPIC_BASE_URL=" + server_.anthropic_base_url()};
    for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
      if (const char* v = getenv(name)) env.push_back(std::string(name) + "=" + v);
    }
    return env;
  }
  // Unsandboxed unless `sandboxed` (then the parent confines itself as in real use).
  std::unique_ptr<PtyForkbox> Start(std::vector<std::string> extra = {}, bool sandboxed = false) {
    return StartWith(Env(), std::move(extra), sandboxed);
  }
  std::unique_ptr<PtyForkbox> StartWith(const std::vector<std::string>& env,
                                        std::vector<std::string> extra, bool sandboxed = false,
                                        bool controlling = true) {
    std::vector<std::string> args = {sandboxed ? "--sandbox=on" : "--sandbox=off", "--standby=0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<PtyForkbox>(args, env, workdir_.string(), controlling);
  }
  RunResult Plain(std::vector<std::string> args) {
    RunSpec spec;
    spec.args = std::move(args);
    spec.env = Env();
    spec.cwd = workdir_.string();
    return RunForkbox(spec);
  }
  // Every request answers "answer N" (N: requests so far, this one included).
  void AnswerWithCount() {
    auto n = std::make_shared<std::atomic<int>>(0);
    server_.SetHandler(
        [n](const RecordedRequest&) { return Text("answer " + std::to_string(++*n)); });
  }
  fs::path HistoryPath() const { return root_ / "state" / "forkbox" / "history"; }
  // forkbox under kJobShell, sandboxed or not.
  std::unique_ptr<PtyForkbox> StartUnderJobShell(bool sandboxed) {
    return std::make_unique<PtyForkbox>(
        std::vector<std::string>{sandboxed ? "--sandbox=on" : "--sandbox=off", "--standby=0"},
        Env(), workdir_.string(), /*controlling=*/true, kJobShell);
  }

  fs::path root_;
  fs::path workdir_;
  std::string key_;
  MockServer server_;
};

std::string Screen(const PtyForkbox& p) { return "--- screen\n" + p.screen(); }

TEST_F(CliTest, HistoryPersistsAcrossRunsAndTheUpArrowRecallsIt) {
  AnswerWithCount();
  {
    auto first = Start();
    ASSERT_TRUE(first->Expect("forkbox> ")) << Screen(*first);
    first->Type("remember-this-prompt\r");
    ASSERT_TRUE(first->Expect("answer 1")) << Screen(*first);
    ASSERT_TRUE(first->Expect("forkbox> ")) << Screen(*first);
    first->Type("\x04");  // Ctrl-D quits.
    EXPECT_EQ(first->Finish(), 0) << Screen(*first);
  }
  struct stat st;
  ASSERT_EQ(lstat(HistoryPath().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto second = Start();
  ASSERT_TRUE(second->Expect("forkbox> ")) << Screen(*second);
  second->Type("\x1b[A");  // Up: the previous run's prompt.
  ASSERT_TRUE(second->Expect("remember-this-prompt")) << Screen(*second);
  second->Type("\r");
  ASSERT_TRUE(second->Expect("answer 2")) << Screen(*second);
  ASSERT_TRUE(second->Expect("forkbox> ")) << Screen(*second);
  second->Type("\x04");
  EXPECT_EQ(second->Finish(), 0) << Screen(*second);
  ASSERT_EQ(server_.request_count(), 2u);
  EXPECT_EQ(server_.request(1).view.LastUserText(), "remember-this-prompt");
}

// Ctrl-Z at the prompt, then the shell's `fg`: the shell had the terminal meanwhile and left it
// in its own mode, cooked and echoing, with bracketed paste off (bash does). Continued, the prompt
// puts its mode and bracketed paste back and redraws itself with the half-typed line, once: before,
// it read on in the shell's mode, showing no prompt, every key echoed twice, and a multi-line paste
// went out line by line as prompts. Sandboxed (the waiter counts the stop's end) and not.
TEST_F(CliTest, ThePromptComesBackInItsOwnModeAfterCtrlZAndFg) {
  AnswerWithCount();
  for (const bool sandboxed : {false, true}) {
    SCOPED_TRACE(sandboxed ? "sandboxed" : "--sandbox=off");
    const std::unique_ptr<PtyForkbox> shown = StartUnderJobShell(sandboxed);
    PtyForkbox& run = *shown;
    ASSERT_TRUE(run.Expect("forkbox> ")) << Screen(run);
    run.Type("half");
    ASSERT_TRUE(run.Expect("half")) << Screen(run);
    run.Type("\x1a");  // Ctrl-Z: the job shell says so and runs `fg`.
    ASSERT_TRUE(run.Expect("[job stopped]")) << Screen(run);
    ASSERT_TRUE(run.Expect("\x1b[?2004hforkbox> half")) << Screen(run);
    EXPECT_TRUE(run.Quiet()) << "the shell's cooked mode stayed";
    run.Type(" more\r");
    ASSERT_TRUE(run.Expect("answer ")) << Screen(run);
    ASSERT_TRUE(run.Expect("forkbox> ")) << Screen(run);
    run.Type("\x04");
    EXPECT_EQ(run.Finish(), 0) << Screen(run);
    const std::string screen = run.screen();
    const size_t after = screen.find("[job stopped]");
    EXPECT_EQ(screen.find("forkbox> half", screen.find("forkbox> half", after) + 1),
              std::string::npos)
        << "redrawn more than once" << Screen(run);
    EXPECT_EQ(server_.requests().back().view.LastUserText(), "half more");
  }
}

// The history file lies outside every path the confined parent may write: it is opened before
// the parent confines itself, so a sandboxed session keeps its history too.
TEST_F(CliTest, AConfinedSessionStillKeepsItsHistory) {
  AnswerWithCount();
  auto run = Start({}, /*sandboxed=*/true);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("kept-while-confined\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  std::ifstream in(HistoryPath());
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("kept-while-confined"), std::string::npos)
      << "history: " << text.str() << "\n"
      << Screen(*run);
  EXPECT_EQ(run->screen().find("no prompt history"), std::string::npos) << Screen(*run);
}

TEST_F(CliTest, CtrlRSearchesTheHistoryBackwards) {
  AnswerWithCount();
  fs::create_directories(HistoryPath().parent_path());
  { std::ofstream(HistoryPath()) << "\"alpha one\"\n\"beta two\"\n\"gamma three\"\n"; }
  auto run = Start();
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x12");  // Ctrl-R
  run->Type("bet");
  ASSERT_TRUE(run->Expect("beta two")) << Screen(*run);
  run->Type("\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  ASSERT_EQ(server_.request_count(), 1u);
  EXPECT_EQ(server_.request(0).view.LastUserText(), "beta two");
}

TEST_F(CliTest, AHistoryFileThatIsALinkIsNotFollowed) {
  AnswerWithCount();
  fs::create_directories(HistoryPath().parent_path());
  const fs::path target = root_ / "elsewhere";
  { std::ofstream(target) << "untouched\n"; }
  fs::create_symlink(target, HistoryPath());
  auto run = Start();
  ASSERT_TRUE(run->Expect("no prompt history")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("a prompt\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  std::ifstream in(target);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "untouched\n");
}

// F1: forkbox's own directory swapped for a link (a tool that could write ~/.local/state) must not
// take the history (nor the session) elsewhere: the link is named, nothing is written or chmod-ed
// through it, and the session goes on. Before, the history was made in the link's target.
TEST_F(CliTest, AForkboxStateDirThatIsALinkTakesNoHistoryElsewhere) {
  AnswerWithCount();
  const fs::path outside = root_ / "outside";
  fs::create_directories(outside);
  fs::permissions(outside, fs::perms(0755));
  fs::create_directories(root_ / "state");
  fs::create_directory_symlink(outside, HistoryPath().parent_path());
  auto run = Start();
  ASSERT_TRUE(run->Expect("no prompt history")) << Screen(*run);
  ASSERT_TRUE(run->Expect("symbolic link")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("a-secret-prompt\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  EXPECT_TRUE(fs::is_empty(outside)) << "written through the link";
  struct stat st;
  ASSERT_EQ(stat(outside.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  // Control: the same layout with a real directory keeps the history.
  fs::remove(HistoryPath().parent_path());
  auto again = Start();
  ASSERT_TRUE(again->Expect("forkbox> ")) << Screen(*again);
  again->Type("kept-prompt\r");
  ASSERT_TRUE(again->Expect("answer 2")) << Screen(*again);
  ASSERT_TRUE(again->Expect("forkbox> ")) << Screen(*again);
  again->Type("\x04");
  EXPECT_EQ(again->Finish(), 0) << Screen(*again);
  std::ifstream in(HistoryPath());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("kept-prompt"), std::string::npos) << text;
}

TEST_F(CliTest, ABracketedPasteOfThreeLinesIsOnePrompt) {
  AnswerWithCount();
  auto run = Start();
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  // Terminals send a pasted newline as CR, exactly like Enter: only the brackets tell them apart.
  run->Type("\x1b[200~line one\rline two\rline three\x1b[201~");
  ASSERT_TRUE(run->Expect("line three")) << Screen(*run);
  ASSERT_TRUE(run->Expect("...")) << Screen(*run);  // The prompt continues below the paste.
  EXPECT_EQ(server_.request_count(), 0u);
  run->Type("\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  ASSERT_EQ(server_.request_count(), 1u);
  EXPECT_EQ(server_.request(0).view.LastUserText(), "line one\nline two\nline three");
}

TEST_F(CliTest, ATrailingBackslashContinuesThePrompt) {
  AnswerWithCount();
  auto run = Start();
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("first half \\\r");
  ASSERT_TRUE(run->Expect("...")) << Screen(*run);
  run->Type("second half\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  ASSERT_EQ(server_.request_count(), 1u);
  EXPECT_EQ(server_.request(0).view.LastUserText(), "first half \nsecond half");
}

TEST_F(CliTest, CtrlCOnAnEmptyLineSaysHowToQuitAndDoesNotQuit) {
  AnswerWithCount();
  auto run = Start();
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x03");
  ASSERT_TRUE(run->Expect("press Ctrl-D or type /quit")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  EXPECT_TRUE(run->running());
  // A line being typed is dropped by Ctrl-C, without the hint.
  run->Type("dropped words");
  ASSERT_TRUE(run->Expect("dropped words")) << Screen(*run);
  run->Type("\x03");
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("still here\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("/quit\r");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  ASSERT_EQ(server_.request_count(), 1u);
  EXPECT_EQ(server_.request(0).view.LastUserText(), "still here");
  const std::string& s = run->screen();
  EXPECT_EQ(s.find("press Ctrl-D"), s.rfind("press Ctrl-D")) << "the hint twice\n" << s;
}

// /clear is in the session file (a resumed session does not bring the cleared turns back), and
// an interactive session's first prompt is listed.
TEST_F(CliTest, ClearIsPersistedAndTheInteractiveFirstPromptIsListed) {
  AnswerWithCount();
  {
    auto run = Start();
    ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
    run->Type("alpha-first-prompt\r");
    ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
    ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
    run->Type("/clear\r");
    ASSERT_TRUE(run->Expect("context cleared")) << Screen(*run);
    ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
    run->Type("\x04");
    EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  }
  RunResult list = Plain({"sessions"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("alpha-first-prompt"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("(interactive)"), std::string::npos) << list.out;

  RunResult resumed = Plain({"--sandbox=off", "--standby=0", "--continue", "after the clear"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const RecordedRequest last = server_.request(server_.request_count() - 1);
  ASSERT_EQ(last.view.user_texts.size(), 1u) << last.body;
  EXPECT_EQ(last.view.LastUserText(), "after the clear");
}

// On a terminal, the live block shows each running task with its turn and current tool.
TEST_F(CliTest, TheLiveBlockShowsARunningTasksTurnAndTool) {
  server_.SetHandler([](const RecordedRequest& r) {
    if (r.view.LastUserText() == "delegate" && r.view.assistant_turns == 0) {
      Reply reply;
      reply.text = "Delegating now";
      reply.tool_calls = {
          ToolCall{"task", {{"prompt", "hang"}, {"description", "hanging job"}}, ""}};
      return reply;
    }
    return Text("after the interrupt");
  });
  auto run = Start({"--child-path", std::string(FAKE_CHILD_DIR) + "/fake_child_hang"});
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("delegate\r");
  ASSERT_TRUE(run->Expect("Delegating now\r\n")) << Screen(*run);  // The line ends first.
  ASSERT_TRUE(run->Expect("[task 1] general: hanging job · turn 1 · ")) << Screen(*run);
  ASSERT_TRUE(run->Expect(" · bash: fake tool call")) << Screen(*run);
  run->Type("\x03");  // Ctrl-C cancels the task.
  ASSERT_TRUE(run->Expect("(interrupted)")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
}

// Ctrl-Z while a task runs, then `fg`: the live block is drawn anew below what the shell printed
// meanwhile, and the terminal is quiet again with bracketed paste on. Before, the next redraw moved
// the cursor up over the shell's lines (ESC [ 3F), erased them and left the old block above, and
// until the next prompt typed keys were echoed into the output and a paste went in as lines.
TEST_F(CliTest, TheLiveBlockIsDrawnAnewBelowTheShellsLinesAfterCtrlZAndFg) {
  server_.SetHandler([](const RecordedRequest& r) {
    Reply reply;
    if (r.view.HasTool("task") && r.view.assistant_turns == 0) {
      reply.tool_calls = {
          ToolCall{"task", {{"prompt", "hang"}, {"description", "hanging job"}}, ""}};
    } else if (!r.view.HasTool("task")) {
      reply.tool_calls = {ToolCall{"bash", {{"command", "sleep 600"}}, ""}};  // The task's.
    } else {
      reply.text = "after the interrupt";
    }
    return reply;
  });
  for (const bool sandboxed : {false, true}) {
    SCOPED_TRACE(sandboxed ? "sandboxed" : "--sandbox=off");
    const std::unique_ptr<PtyForkbox> shown = StartUnderJobShell(sandboxed);
    PtyForkbox& run = *shown;
    ASSERT_TRUE(run.Expect("forkbox> ")) << Screen(run);
    run.Type("delegate\r");
    ASSERT_TRUE(run.Expect(" · bash: sleep 600")) << Screen(run);
    run.Type("\x1a");  // Ctrl-Z: the job shell says so and runs `fg`.
    ASSERT_TRUE(run.Expect("[job stopped]")) << Screen(run);
    ASSERT_TRUE(run.Expect("[task 1] general: hanging job")) << Screen(run);  // The next tick.
    const std::string screen = run.screen();
    const size_t clear = screen.find("\x1b[J", screen.find("[job stopped]"));
    ASSERT_NE(clear, std::string::npos) << Screen(run);
    EXPECT_NE(screen[clear - 1], 'F') << "drawn over the shell's lines" << Screen(run);
    // The task still runs: keys typed now wait unechoed for the prompt, as before the stop.
    EXPECT_TRUE(run.Quiet()) << "the shell's cooked mode stayed";
    EXPECT_NE(screen.find("\x1b[?2004h", screen.find("[job stopped]")), std::string::npos)
        << "bracketed paste stayed off" << Screen(run);
    run.Type("\x03");  // Ctrl-C cancels the task.
    ASSERT_TRUE(run.Expect("(interrupted)")) << Screen(run);
    ASSERT_TRUE(run.Expect("forkbox> ")) << Screen(run);
    run.Type("\x04");
    EXPECT_EQ(run.Finish(), 0) << Screen(run);
  }
}

// rt62 #9: TERM=dumb (Emacs' M-x shell and compile, some CI) has no cursor control, but the live
// block still moved the cursor up and cleared (ESC [ 1F, ESC [ J) at every redraw, garbage there.
// Now such a terminal gets the plain lines of a pipe. The control: TERM=xterm draws the block.
TEST_F(CliTest, UnderTermDumbTaskProgressIsPlainLines) {
  server_.SetHandler([](const RecordedRequest& r) {
    if (r.view.assistant_turns == 0) {
      Reply reply;
      reply.tool_calls = {ToolCall{"task", {{"prompt", "look"}, {"description", "quick job"}}, ""}};
      return reply;
    }
    return Text("all done");
  });
  for (const std::string term : {"xterm", "dumb"}) {
    SCOPED_TRACE("TERM=" + term);
    std::vector<std::string> env = Env();
    for (std::string& e : env) {
      if (e.starts_with("TERM=")) e = "TERM=" + term;
    }
    auto run =
        StartWith(env, {"--child-path", std::string(FAKE_CHILD_DIR) + "/fake_child_ok", "go"});
    ASSERT_TRUE(run->Expect("all done")) << Screen(*run);
    EXPECT_EQ(run->Finish(), 0) << Screen(*run);
    const std::string& screen = run->screen();
    if (term == "dumb") {
      EXPECT_EQ(screen.find('\x1b'), std::string::npos) << Screen(*run);
      EXPECT_NE(screen.find("[task 1] started: general: quick job\r\n"), std::string::npos)
          << Screen(*run);
    } else {
      EXPECT_NE(screen.find("\x1b[J"), std::string::npos) << Screen(*run);
    }
  }
}

// The prompt under TERM=dumb asked the terminal for bracketed paste (ESC [ ? 2004 h), which Emacs'
// M-x shell shows as text before every prompt. Now it asks only a terminal that takes cursor
// controls. The control: TERM=xterm asks.
TEST_F(CliTest, UnderTermDumbThePromptSendsNoEscapes) {
  AnswerWithCount();
  for (const std::string term : {"xterm", "dumb"}) {
    SCOPED_TRACE("TERM=" + term);
    std::vector<std::string> env = Env();
    for (std::string& e : env) {
      if (e.starts_with("TERM=")) e = "TERM=" + term;
    }
    auto run = StartWith(env, {});
    ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
    run->Type("hello\r");
    ASSERT_TRUE(run->Expect("answer")) << Screen(*run);
    ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
    run->Type("\x04");
    EXPECT_EQ(run->Finish(), 0) << Screen(*run);
    if (term == "dumb") {
      EXPECT_EQ(run->screen().find('\x1b'), std::string::npos) << Screen(*run);
    } else {
      EXPECT_NE(run->screen().find("\x1b[?2004h"), std::string::npos) << Screen(*run);
    }
  }
}

// One-shot on a terminal streams as the text comes; a stream cut and retried is announced on
// stderr and printed again from the start on a fresh line, never glued to the cut text.
TEST_F(CliTest, OnATerminalARetriedStreamIsAnnouncedAndPrintedAgain) {
  auto cuts = std::make_shared<std::atomic<int>>(0);
  server_.SetHandler([cuts](const RecordedRequest&) {
    Reply reply = Text("partial text that gets cut off in the middle of the stream");
    if (cuts->fetch_add(1) == 0) {
      reply.fault = mock::Fault{};
      reply.fault->kind = mock::Fault::Kind::kCutStream;
      return reply;
    }
    return Text("the whole answer");
  });
  auto run = Start({"go"});
  ASSERT_TRUE(run->Expect("partial")) << Screen(*run);  // Streamed before the cut.
  ASSERT_TRUE(run->Expect("\r\nforkbox: the reply above was cut off; it starts again below\r\n"))
      << Screen(*run);
  ASSERT_TRUE(run->Expect("retrying")) << Screen(*run);
  ASSERT_TRUE(run->Expect("\r\nthe whole answer\r\n")) << Screen(*run);
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  const std::string& s = run->screen();
  EXPECT_EQ(s.find("the whole answer"), s.rfind("the whole answer")) << "printed twice\n" << s;
}

// Holds a mock reply until released (at most 60 s): a model call that hangs.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return open; });
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

// The child's first model call costs 111 + 22 tokens and asks for a tool; its second hangs until
// --task-timeout kills the child. The parent still charges the task the first call's tokens.
class KilledTaskTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    gate_ = std::make_shared<Gate>();
    server_.SetHandler([gate = gate_](const RecordedRequest& r) {
      if (r.view.HasTool("task")) {
        if (r.view.assistant_turns == 0) {
          Reply reply;
          reply.tool_calls = {
              ToolCall{"task", {{"prompt", "look"}, {"description", "slow job"}}, ""}};
          return reply;
        }
        return Text("the task timed out");
      }
      if (r.view.assistant_turns == 0) {
        Reply reply;
        reply.tool_calls = {ToolCall{"bash", {{"command", "true"}}, ""}};
        reply.usage.input_tokens = 111;
        reply.usage.output_tokens = 22;
        return reply;
      }
      gate->Wait();
      return Text("too late");
    });
  }
  void TearDown() override {
    gate_->Open();
    CliTest::TearDown();
  }
  RunResult RunKilled(const std::string& format) {
    return Plain(
        {"--sandbox=off", "--standby=0", "--task-timeout", "2", "--output-format", format, "go"});
  }
  std::shared_ptr<Gate> gate_;
};

TEST_F(KilledTaskTest, ATimedOutTaskReportsTheTokensItSpentInJson) {
  RunResult r = RunKilled("json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tasks"].size(), 1u) << j.dump(2);
  const nlohmann::json& task = j["tasks"][0];
  EXPECT_FALSE(task["ok"].get<bool>());
  EXPECT_EQ(task["stop"], "timeout") << task.dump();
  EXPECT_EQ(task["tokens"]["input"], 111) << task.dump();
  EXPECT_EQ(task["tokens"]["output"], 22) << task.dump();
}

TEST_F(KilledTaskTest, ATimedOutTaskReportsTheTokensItSpentInTheStreamResult) {
  RunResult r = RunKilled("stream-json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json result, notification;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    nlohmann::json e = nlohmann::json::parse(line);
    if (e["type"] == "result") result = e;
    if (e.value("subtype", "") == "task_notification") notification = e;
  }
  ASSERT_TRUE(result.is_object()) << r.out;
  ASSERT_EQ(result["tasks"].size(), 1u) << result.dump(2);
  EXPECT_EQ(result["tasks"][0]["tokens"]["input"], 111) << result.dump();
  EXPECT_EQ(result["tasks"][0]["tokens"]["output"], 22) << result.dump();
  ASSERT_TRUE(notification.is_object()) << r.out;
  EXPECT_EQ(notification["status"], "failed");
  EXPECT_EQ(notification["usage"]["input_tokens"], 111) << notification.dump();
  EXPECT_EQ(notification["usage"]["output_tokens"], 22) << notification.dump();
}

// What is typed while the model works is neither echoed into the output nor lost: it waits for
// the editor and appears at the next prompt.
TEST_F(CliTest, TypeAheadWaitsForTheNextPrompt) {
  auto gate = std::make_shared<Gate>();
  server_.SetHandler([gate](const RecordedRequest& r) {
    if (r.view.LastUserText() == "slow question") {
      gate->Wait();
      return Text("slow answer");
    }
    return Text("answer to " + r.view.LastUserText());
  });
  auto run = Start();
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("slow question\r");
  ASSERT_TRUE(server_.WaitForRequests(1, kDeadline));
  run->Type("typed ahead");
  gate->Open();
  ASSERT_TRUE(run->Expect("slow answer\r\n")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> typed ahead")) << Screen(*run);
  run->Type("\r");
  ASSERT_TRUE(run->Expect("answer to typed ahead")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  const std::string& s = run->screen();
  // Not echoed while the model worked: the first time it shows is at the prompt.
  EXPECT_EQ(s.find("typed ahead"), s.find("forkbox> typed ahead") + 9) << s;
}

// Answers "answer to <prompt>"; a prompt "slow N" first waits for gates[N].
void AnswerAfterGates(MockServer& server, const std::vector<std::shared_ptr<Gate>>& gates) {
  server.SetHandler([gates](const RecordedRequest& r) {
    const std::string prompt = r.view.LastUserText();
    if (prompt.rfind("slow ", 0) == 0) gates.at(std::stoul(prompt.substr(5)))->Wait();
    return Text("answer to " + prompt);
  });
}

// A bracketed paste whose end marker never comes must not take the keyboard: Ctrl-C drops it with
// the line, SIGTERM still ends the session. The paste is typed ahead while the model works, so
// the test knows when the editor is inside it: once it has read every byte typed.
TEST_F(CliTest, CtrlCAndSigtermEndAPasteWhoseEndMarkerNeverComes) {
  std::vector<std::shared_ptr<Gate>> gates = {std::make_shared<Gate>(), std::make_shared<Gate>()};
  AnswerAfterGates(server_, gates);
  auto run = Start();
  const std::string half = "\x1b[200~half a paste";
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  for (int round = 0; round < 2; ++round) {
    run->Type("slow " + std::to_string(round) + "\r");
    ASSERT_TRUE(server_.WaitForRequests(round + 1, kDeadline));
    run->Type(half);
    ASSERT_TRUE(run->WaitUnread(static_cast<int>(half.size()))) << Screen(*run);
    gates[round]->Open();
    ASSERT_TRUE(run->Expect("answer to slow " + std::to_string(round))) << Screen(*run);
    ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
    ASSERT_TRUE(run->WaitUnread(0)) << Screen(*run);  // The editor waits inside the paste.
    if (round == 1) break;
    run->Type("\x03");
    ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
    run->Type("after the paste\r");
    ASSERT_TRUE(run->Expect("answer to after the paste")) << Screen(*run);
    ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  }
  run->Signal(SIGTERM);
  EXPECT_EQ(run->Finish(), 143) << Screen(*run);
  ASSERT_EQ(server_.request_count(), 3u);
  EXPECT_EQ(server_.request(1).view.LastUserText(), "after the paste");
}

// Ctrl-D inside a paste whose end marker never comes ends the session, as on an empty line: the
// paste goes with it. A 0x04 within a paste's burst is pasted text (dropped, as control bytes are).
TEST_F(CliTest, CtrlDEndsTheSessionInsideAPasteWhoseEndMarkerNeverComes) {
  AnswerWithCount();
  auto run = Start();
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type(
      "\x1b[200~before\x04"
      "after\x1b[201~");
  ASSERT_TRUE(run->Expect("beforeafter")) << Screen(*run);
  run->Type("\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x1b[200~half a paste");
  ASSERT_TRUE(run->WaitUnread(0)) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  ASSERT_EQ(server_.request_count(), 1u);
  EXPECT_EQ(server_.request(0).view.LastUserText(), "beforeafter");
}

// Terminals send a pasted line break as CR or CRLF; the tty must not turn CR into LF first (CRLF
// would read as LF LF, a blank line), at the prompt or typed ahead while the model works.
TEST_F(CliTest, APastedCrlfOrLoneCrIsOneNewline) {
  std::vector<std::shared_ptr<Gate>> gates = {std::make_shared<Gate>()};
  AnswerAfterGates(server_, gates);
  auto run = Start();
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x1b[200~crlf one\r\ncrlf two\rlone cr\x1b[201~");
  ASSERT_TRUE(run->Expect("lone cr")) << Screen(*run);
  run->Type("\r");
  ASSERT_TRUE(run->Expect("answer to crlf one")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("slow 0\r");
  ASSERT_TRUE(server_.WaitForRequests(2, kDeadline));
  const std::string ahead = "\x1b[200~ahead one\r\nahead two\x1b[201~";
  run->Type(ahead);
  ASSERT_TRUE(run->WaitUnread(static_cast<int>(ahead.size()))) << Screen(*run);
  gates[0]->Open();
  ASSERT_TRUE(run->Expect("ahead two")) << Screen(*run);
  run->Type("\r");
  ASSERT_TRUE(run->Expect("answer to ahead one")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  ASSERT_EQ(server_.request_count(), 3u);
  EXPECT_EQ(server_.request(0).view.LastUserText(), "crlf one\ncrlf two\nlone cr");
  EXPECT_EQ(server_.request(2).view.LastUserText(), "ahead one\nahead two");
}

// Without LANG (a C locale) typed and pasted UTF-8 still reaches the model intact.
TEST_F(CliTest, UnderACLocaleUtf8InputReachesTheModelIntact) {
  AnswerWithCount();
  std::vector<std::string> env;
  for (const std::string& e : Env()) {
    if (e.rfind("LANG=", 0) != 0 && e.rfind("LC_", 0) != 0) env.push_back(e);
  }
  auto run = StartWith(env, {});
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("r\xc3\xa9sum\xc3\xa9\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x1b[200~caf\xc3\xa9 cr\xc3\xa8me \xe2\x86\x92 \xf0\x9f\x8d\xb0\x1b[201~");
  ASSERT_TRUE(run->Expect("cr\xc3\xa8me")) << Screen(*run);
  run->Type("\r");
  ASSERT_TRUE(run->Expect("answer 2")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("\x04");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  ASSERT_EQ(server_.request_count(), 2u);
  EXPECT_EQ(server_.request(0).view.LastUserText(), "r\xc3\xa9sum\xc3\xa9");
  EXPECT_EQ(server_.request(1).view.LastUserText(),
            "caf\xc3\xa9 cr\xc3\xa8me \xe2\x86\x92 \xf0\x9f\x8d\xb0");
}

// A terminal closed at the prompt is a hang-up (129), never the end of input (0), even when its
// read fails before any SIGHUP arrives: here none does, the terminal not being the controlling one.
TEST_F(CliTest, ATerminalClosedAtThePromptIsAHangUp) {
  AnswerWithCount();
  auto run = StartWith(Env(), {}, /*sandboxed=*/false, /*controlling=*/false);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->CloseTerminal();
  EXPECT_EQ(run->Finish(), 129) << Screen(*run);
  EXPECT_EQ(server_.request_count(), 0u);
}

// -o writes the answer of a one-shot run: on a terminal without a PROMPT it is a usage error
// before any session opens, and it leaves no file. The control: the same terminal without -o
// opens the session.
TEST_F(CliTest, OutputLastMessageWithoutAPromptIsAUsageError) {
  AnswerWithCount();
  const std::string file = (workdir_ / "answer.txt").string();
  auto run = StartWith(Env(), {"-o", file});
  ASSERT_TRUE(run->Expect("--output-last-message needs a PROMPT")) << Screen(*run);
  EXPECT_EQ(run->Finish(), 2) << Screen(*run);
  EXPECT_FALSE(std::filesystem::exists(file));
  auto control = Start();
  ASSERT_TRUE(control->Expect("forkbox> ")) << Screen(*control);
  control->Type("/quit\r");
  EXPECT_EQ(control->Finish(), 0) << Screen(*control);
  EXPECT_EQ(server_.request_count(), 0u);
}

// Only "/" and a word of letters is a command; a prompt starting with a path goes to the model.
TEST_F(CliTest, APromptStartingWithAPathIsSentNotTakenAsACommand) {
  AnswerWithCount();
  auto run = Start();
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("/usr/bin/python3 crashes with a segfault, why?\r");
  ASSERT_TRUE(run->Expect("answer 1")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("/nosuch\r");
  ASSERT_TRUE(run->Expect("unknown command /nosuch")) << Screen(*run);
  ASSERT_TRUE(run->Expect("forkbox> ")) << Screen(*run);
  run->Type("/quit\r");
  EXPECT_EQ(run->Finish(), 0) << Screen(*run);
  ASSERT_EQ(server_.request_count(), 1u);
  EXPECT_EQ(server_.request(0).view.LastUserText(),
            "/usr/bin/python3 crashes with a segfault, why?");
}

// `forkbox agents` on a terminal shows an agent file's control bytes escaped, as the REPL shows
// model text: a description must not write the clipboard (OSC 52) or restyle the screen.
TEST_F(CliTest, TheAgentsListingOnATerminalEscapesControlSequencesFromAgentFiles) {
  const fs::path dir = workdir_ / ".forkbox" / "agents";
  fs::create_directories(dir);
  std::ofstream(dir / "evil\x1b[2J.md", std::ios::binary)
      << "---\nname: evil\ndescription: \"\x1b]52;c;cHduZWQ=\x07 and \xc2\x9b"
         "31m\"\n"
      << "model: \"m\x1b[41m\"\n---\nbody\n";
  PtyForkbox run({"agents", "--workdir", workdir_.string()}, Env(), workdir_.string());
  EXPECT_EQ(run.Finish(), 0) << Screen(run);
  const std::string& s = run.screen();
  EXPECT_NE(s.find("\\x1b]52;c;cHduZWQ=\\x07 and \\u009b31m"), std::string::npos) << s;
  EXPECT_NE(s.find("m\\x1b[41m"), std::string::npos) << s;
  EXPECT_NE(s.find("evil\\x1b[2J.md"), std::string::npos) << s;
  EXPECT_EQ(s.find('\x1b'), std::string::npos) << s;
  EXPECT_EQ(s.find('\x07'), std::string::npos) << s;
  EXPECT_EQ(s.find("\xc2\x9b"), std::string::npos) << s;
}

}  // namespace
}  // namespace forkbox::parent_test
