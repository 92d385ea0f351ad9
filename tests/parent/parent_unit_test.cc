// Parent pieces on their own: the start-frame writer wipes the key, transcripts are created
// beneath their directory's descriptor and never follow a planted link.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "agent/http_client.h"
#include "base/unique_fd.h"
#include "parent/child_supervisor.h"
#include "parent/config.h"
#include "parent/events.h"
#include "parent/stats.h"
#include "parent/transcripts.h"
#include "tests/sandbox/agent_layers.h"
#include "tests/sandbox/probe_util.h"

namespace forkbox::parent {
namespace {

namespace fs = std::filesystem;

// forkbox-child and its module directory must lie outside every writable tree (a task could
// replace them); the module directory counts however it is spelled. Control: outside, accepted.
TEST(ChildOutsideWritableTrees, RefusesTheProgramOrItsModulesInsideATree) {
  const std::string child = "/opt/fb/bin/forkbox-child";
  const std::string modules = agent::HttpModuleDirOf(child);
  EXPECT_TRUE(CheckChildOutsideWritableTrees(child, {"/work", "/opt/fb/bin2"}).ok()) << "control";
  const Status in_tree = CheckChildOutsideWritableTrees(child, {"/work", "/opt/fb"});
  EXPECT_EQ(in_tree.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(in_tree.message().find("forkbox-child '" + child +
                                   "' is inside the writable tree "
                                   "'/opt/fb'"),
            std::string::npos)
      << in_tree.message();
  const std::string lib = std::filesystem::path(modules).lexically_normal().string();
  const Status modules_in_tree = CheckChildOutsideWritableTrees(child, {lib});
  EXPECT_NE(modules_in_tree.message().find("the module directory of forkbox-child"),
            std::string::npos)
      << modules_in_tree.message();
  EXPECT_FALSE(CheckChildOutsideWritableTrees(child, {"/"}).ok());
}

// The session's policy carries the model's port: the parent confines itself with an agent's
// ruleset built from it (EnterLauncherSandbox), so without the port its own TCP connects went
// anywhere. Confined by that policy, in each layer, a process reaches the model's port and no
// other; the control, unconfined, reaches the other.
TEST(SessionPolicy, ConfinesTcpToTheModelsPort) {
  if (sandbox::landlock::QueryAbi() < 4) GTEST_SKIP() << "Landlock TCP rules need ABI 4";
  using sandbox::testing::Connect;
  sandbox::testing::Listener model, other;
  const std::string work = sandbox::testing::MakeTempDir("session-policy");
  const std::string url = "http://127.0.0.1:" + std::to_string(model.port) + "/v1";
  Result<sandbox::Policy> policy = SessionPolicy(sandbox::Settings{}, work, url);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->model_port, model.port);
  Result<sandbox::Policy> https = SessionPolicy(sandbox::Settings{}, work, "https://a.example");
  ASSERT_TRUE(https.ok()) << https.status().ToString();
  EXPECT_EQ(https->model_port, 443);
  sandbox::testing::InEachLayer([&](bool layer1) -> std::string {
    auto agent = [&policy, layer1](int report_fd) {
      return sandbox::testing::BecomeAgent(&*policy, layer1, report_fd);
    };
    sandbox::testing::ProbeResult to_model =
        sandbox::testing::RunProbeKeeping(agent, [&] { return Connect(model.port); });
    if (!to_model.reported) return "no agent, exit " + std::to_string(to_model.exit_code);
    if (to_model.value != 0) return std::string("the model's port: ") + strerror(to_model.err);
    sandbox::testing::ProbeResult to_other =
        sandbox::testing::RunProbeKeeping(agent, [&] { return Connect(other.port); });
    if (to_other.err != EACCES) return "another port was not refused with EACCES";
    return "";
  });
  sandbox::testing::ProbeResult control =
      sandbox::testing::RunProbe([] { return true; }, [&] { return Connect(other.port); });
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.value, 0) << "unconfined, the other port answers: " << strerror(control.err);
}

TEST(StartFrameWriter, WipesTheFrameOnceWritten) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd r(p[0]), w(p[1]);
  const std::string frame = "{\"api_key\":\"sk-secret-start-frame\"}" + std::string(1000, 'x');
  StartFrameWriter writer(frame);
  const char* storage = writer.storage();
  ASSERT_EQ(std::string(storage, frame.size()), frame);  // Control: the key is there before.
  ASSERT_TRUE(writer.WriteSome(w.get()));
  std::string got(frame.size(), '\0');
  ASSERT_EQ(read(r.get(), got.data(), got.size()), static_cast<ssize_t>(frame.size()));
  EXPECT_EQ(got, frame);
  // Same storage, every byte zero.
  ASSERT_EQ(writer.storage(), storage);
  EXPECT_EQ(std::string(storage, frame.size()), std::string(frame.size(), '\0'));
}

TEST(StartFrameWriter, WipesAFrameTheChildNeverRead) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd r(p[0]), w(p[1]);
  const std::string frame(1 << 20, 'k');  // Larger than the pipe: the write stops at EAGAIN.
  StartFrameWriter writer(frame);
  const char* storage = writer.storage();
  EXPECT_FALSE(writer.WriteSome(w.get()));
  writer.Wipe();  // What the supervisor does when the child dies first.
  EXPECT_EQ(std::string(storage, 4096), std::string(4096, '\0'));
}

class TranscriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-transcript-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ / "transcripts";
    fs::create_directories(dir_);
    outside_ = root_ / "outside.txt";
    std::ofstream(outside_) << "precious\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  // Symlinks at every name the old scheme (task-N-<UTC second>.jsonl) would use soon.
  void PlantLinks(int number) {
    for (int ahead = 0; ahead < 5; ++ahead) {
      std::time_t t = std::time(nullptr) + ahead;
      struct tm tm_utc;
      gmtime_r(&t, &tm_utc);
      char stamp[32];
      std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm_utc);
      fs::path link = dir_ / ("task-" + std::to_string(number) + "-" + stamp + ".jsonl");
      std::error_code ec;
      fs::create_symlink(outside_, link, ec);
      planted_.push_back(link);
    }
  }
  std::string Outside() const {
    std::ifstream in(outside_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path root_, dir_, outside_;
  std::vector<fs::path> planted_;
};

TEST_F(TranscriptTest, APlantedLinkAtAPredictableNameIsNotFollowed) {
  PlantLinks(1);
  // Control: the old open (by the predictable name, following links) writes outside.
  {
    int fd = open(planted_[0].c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    UniqueFd f(fd);
    ASSERT_EQ(write(f.get(), "x", 1), 1);
  }
  ASSERT_EQ(Outside(), "precious\nx");

  Result<TranscriptDir> dir = OpenTranscriptDir(dir_.string());
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  Result<UniqueFd> a = OpenTranscriptFile(dir->fd.get(), dir->path, 1);
  Result<UniqueFd> b = OpenTranscriptFile(dir->fd.get(), dir->path, 1);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(write(a->get(), "{}\n", 3), 3);
  EXPECT_EQ(Outside(), "precious\nx");  // Untouched by the transcripts.
  int regular = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (!e.is_symlink() && e.is_regular_file()) {
      ++regular;
      struct stat st;
      ASSERT_EQ(stat(e.path().c_str(), &st), 0);
      EXPECT_EQ(st.st_mode & 07777, 0600u);
      EXPECT_TRUE(e.path().filename().string().starts_with("task-1-"));
    }
  }
  EXPECT_EQ(regular, 2);  // Two calls, two unpredictable names.
}

TEST_F(TranscriptTest, TheDirectoryIsUsedByDescriptorNotByName) {
  Result<TranscriptDir> dir = OpenTranscriptDir(dir_.string());
  ASSERT_TRUE(dir.ok());
  // Swap the name for a link to elsewhere: the descriptor still points to the original.
  fs::rename(dir_, root_ / "moved");
  fs::create_directories(root_ / "elsewhere");
  fs::create_directory_symlink(root_ / "elsewhere", dir_);
  ASSERT_TRUE(OpenTranscriptFile(dir->fd.get(), dir->path, 2).ok());
  EXPECT_TRUE(fs::is_empty(root_ / "elsewhere"));
  EXPECT_FALSE(fs::is_empty(root_ / "moved"));
}

// A directory it makes is the user's alone (0700), like the sessions': the transcripts hold every
// tool output of every task. Before, 0755 let every other user list and open them.
TEST_F(TranscriptTest, ADirectoryItMakesIsTheUsersAlone) {
  const mode_t old_mask = umask(0);  // The mode asked for, not what the umask leaves of it.
  Result<TranscriptDir> dir = OpenTranscriptDir((dir_ / "new" / "transcripts").string());
  umask(old_mask);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  for (const fs::path& made : {dir_ / "new", dir_ / "new" / "transcripts"}) {
    struct stat st;
    ASSERT_EQ(stat(made.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u) << made;
  }
}

// A link on the way to --transcript-dir, as a tool could plant in the workdir for the user's next
// run, is refused, and nothing is made where it leads; missing directories are made (mkdir -p).
// The control: the old opening (create_directories, then open by name) writes where it leads.
TEST_F(TranscriptTest, ALinkOnTheWayIsNotFollowed) {
  const fs::path elsewhere = root_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_directory_symlink(elsewhere, root_ / "planted");
  for (const fs::path& via : {root_ / "planted", root_ / "planted" / "sub"}) {
    Result<TranscriptDir> dir = OpenTranscriptDir(via.string());
    ASSERT_FALSE(dir.ok()) << via;
    EXPECT_NE(dir.status().message().find("a symbolic link on the way"), std::string::npos)
        << dir.status().ToString();
    EXPECT_NE(dir.status().message().find((root_ / "planted").string()), std::string::npos);
  }
  EXPECT_TRUE(fs::is_empty(elsewhere));

  Result<TranscriptDir> made = OpenTranscriptDir((root_ / "a/b/./c/").string());
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->path, fs::canonical(root_ / "a/b/c").string());
  ASSERT_TRUE(OpenTranscriptFile(made->fd.get(), made->path, 1).ok());
  EXPECT_FALSE(fs::is_empty(root_ / "a/b/c"));

  // A file on the way, and a directory forkbox may not write: each named, nothing made.
  std::ofstream(root_ / "file") << "x";
  Result<TranscriptDir> file = OpenTranscriptDir((root_ / "file" / "sub").string());
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("Not a directory"), std::string::npos)
      << file.status().ToString();
  fs::create_directories(root_ / "locked");
  fs::permissions(root_ / "locked", fs::perms::owner_read | fs::perms::owner_exec);
  Result<TranscriptDir> locked = OpenTranscriptDir((root_ / "locked" / "sub").string());
  if (geteuid() != 0) {  // Root's DAC override makes it anyway.
    ASSERT_FALSE(locked.ok());
    EXPECT_NE(locked.status().message().find("Permission denied"), std::string::npos)
        << locked.status().ToString();
  }
  fs::permissions(root_ / "locked", fs::perms::owner_all);

  std::error_code ec;
  fs::create_directories(root_ / "planted" / "sub", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(fs::is_directory(elsewhere / "sub")) << "the control followed the link";
}

// --transcript-dir /proc (or /sys) was accepted (root passes faccessat there), and every task
// then failed with "create transcript task-1-...jsonl: No such file or directory", naming no
// directory. Now a kernel filesystem is refused at start by name, and so is a directory where a
// probe file cannot be made (devpts takes none; root passes faccessat there too); a task's failure
// names the directory. The control: a directory on a disk is taken, and keeps no probe file.
TEST_F(TranscriptTest, ADirectoryThatTakesNoFilesIsRefusedAtStartByName) {
  for (const char* kernel : {"/proc", "/sys"}) {
    Result<TranscriptDir> dir = OpenTranscriptDir(kernel);
    ASSERT_FALSE(dir.ok()) << kernel;
    EXPECT_NE(dir.status().message().find("--transcript-dir '" + std::string(kernel) + "': on " +
                                          (kernel[1] == 'p' ? "proc" : "sysfs") +
                                          ", a kernel filesystem that takes no files"),
              std::string::npos)
        << dir.status().ToString();
  }
  if (fs::is_directory("/dev/pts")) {
    Result<TranscriptDir> pts = OpenTranscriptDir("/dev/pts");
    ASSERT_FALSE(pts.ok());
    EXPECT_NE(pts.status().message().find("--transcript-dir '/dev/pts': "), std::string::npos)
        << pts.status().ToString();
    if (geteuid() == 0) {
      EXPECT_NE(pts.status().message().find("cannot create a file there"), std::string::npos)
          << pts.status().ToString();
    }
  }
  const UniqueFd proc(open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  Result<UniqueFd> task = OpenTranscriptFile(proc.get(), "/proc", 1);
  ASSERT_FALSE(task.ok());
  EXPECT_NE(task.status().message().find("in --transcript-dir '/proc'"), std::string::npos)
      << task.status().ToString();
  Result<TranscriptDir> disk = OpenTranscriptDir(dir_.string());
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(TranscriptTest, ADirectoryInsideAWritableTreeIsWarnedAbout) {
  Result<TranscriptDir> dir = OpenTranscriptDir(dir_.string());
  ASSERT_TRUE(dir.ok());
  EXPECT_NE(TranscriptDirWarning(dir->path, {root_.string()}).find("inside the writable tree"),
            std::string::npos);
  EXPECT_EQ(TranscriptDirWarning(dir->path, {"/nonexistent-tree"}), "");
}

}  // namespace
}  // namespace forkbox::parent

#include "parent/terminal.h"

namespace forkbox::parent {
namespace {

TEST(NeutraliseControls, EscapesC0C1AndInvalidBytesButKeepsNewlineTabAndText) {
  EXPECT_EQ(NeutraliseControls("a\tb\nc"), "a\tb\nc");
  EXPECT_EQ(NeutraliseControls("\x1b[2J\x07\r\x7f"), "\\x1b[2J\\x07\\x0d\\x7f");
  EXPECT_EQ(NeutraliseControls("\xc2\x9b"
                               "1m"),
            "\\u009b1m");  // C1 CSI as UTF-8.
  EXPECT_EQ(NeutraliseControls("\x9b"
                               "1m"),
            "\\x9b1m");  // A lone 8-bit CSI.
  EXPECT_EQ(NeutraliseControls("h\xc3\xa9 \xe2\x82\xac"), "h\xc3\xa9 \xe2\x82\xac");  // é €
}

// The bidirectional controls reached a terminal as they came: U+202E (right-to-left override)
// makes `rm -rf /x #` show as something else (Trojan Source). Each is escaped as a C1 control is;
// the letters of right-to-left scripts, and the characters around the controls, are unchanged.
TEST(NeutraliseControls, EscapesTheBidirectionalControls) {
  EXPECT_EQ(NeutraliseControls("ls \xe2\x80\xae"
                               "txt.exe"),
            "ls \\u202etxt.exe");
  const struct {
    const char* utf8;
    const char* shown;
  } controls[] = {
      {"\xd8\x9c", "\\u061c"},     {"\xe2\x80\x8e", "\\u200e"}, {"\xe2\x80\x8f", "\\u200f"},
      {"\xe2\x80\xaa", "\\u202a"}, {"\xe2\x80\xab", "\\u202b"}, {"\xe2\x80\xac", "\\u202c"},
      {"\xe2\x80\xad", "\\u202d"}, {"\xe2\x80\xae", "\\u202e"}, {"\xe2\x81\xa6", "\\u2066"},
      {"\xe2\x81\xa7", "\\u2067"}, {"\xe2\x81\xa8", "\\u2068"}, {"\xe2\x81\xa9", "\\u2069"},
  };
  for (const auto& c : controls) {
    EXPECT_EQ(NeutraliseControls(std::string("a") + c.utf8 + "b"), std::string("a") + c.shown + "b")
        << c.shown;
  }
  // Neighbours that are not controls: U+200D (joiner, in emoji), U+2065 (unassigned), U+202F
  // (narrow no-break space), Hebrew alef.
  for (const char* kept : {"\xe2\x80\x8d", "\xe2\x81\xa5", "\xe2\x80\xaf", "\xd7\x90"}) {
    EXPECT_EQ(NeutraliseControls(kept), kept);
  }
}

}  // namespace
}  // namespace forkbox::parent

#include "agent/budget.h"
#include "parent/stats.h"

namespace forkbox::parent {
namespace {

// Audit D: the session's sums saturate instead of overflowing into negative totals, whatever
// the records hold (decoding bounds each figure; many tasks still add up).
TEST(SessionStatsTest, SumsOverTasksSaturate) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  SessionStats stats;
  for (int i = 0; i < 3; ++i) {
    TaskRecord t;
    t.stats.input_tokens = kMax / 2;
    t.stats.output_tokens = kMax / 2;
    t.stats.cache_read_input_tokens = kMax / 2;
    t.stats.tool_output_bytes = kMax / 2;
    stats.tasks.push_back(t);
  }
  EXPECT_EQ(stats.ChildInputTokens(), kMax);
  EXPECT_EQ(stats.ChildCacheReadTokens(), kMax);
  EXPECT_EQ(stats.KeptOutBytes(), kMax);
  const std::string line = StatsLine(stats, 100);
  for (size_t i = 0; i + 1 < line.size(); ++i) {  // No negative figure anywhere.
    EXPECT_FALSE(line[i] == '-' && isdigit(static_cast<unsigned char>(line[i + 1]))) << line;
  }
  EXPECT_NE(line.find("(100% of input)"), std::string::npos) << line;

  agent::TokenBudget budget(1000);
  budget.Release(budget.Reserve(10), kMax / 2);
  budget.Release(budget.Reserve(10), kMax / 2);
  budget.Release(budget.Reserve(10), kMax / 2);
  EXPECT_EQ(budget.Remaining(), 0);
}

// The session's cost: the parent's usage on the session's model and each task's on its own, a
// task's input counted without its cache shares (they are priced as cache tokens). A model
// without a price that spent tokens makes the whole cost unknown; one that spent none costs 0.
TEST(SessionStatsTest, CostPricesTheParentAndEachTaskOnItsModel) {
  SessionStats stats;
  stats.parent_usage.input_tokens = 1'000'000;
  stats.parent_usage.output_tokens = 1'000'000;
  stats.parent_usage.cache_read_input_tokens = 1'000'000;
  TaskRecord haiku;
  haiku.model = "claude-haiku-4-5";
  haiku.stats.input_tokens = 3'000'000;  // 1M uncached, 1M read, 1M written.
  haiku.stats.cache_read_input_tokens = 1'000'000;
  haiku.stats.cache_creation_input_tokens = 1'000'000;
  haiku.stats.output_tokens = 2'000'000;
  stats.tasks.push_back(haiku);
  std::optional<double> cost = SessionCostUsd(stats, "claude-sonnet-4-5");
  ASSERT_TRUE(cost.has_value());
  EXPECT_DOUBLE_EQ(*cost, (3.0 + 15.0 + 0.30) + (1.0 + 0.10 + 1.25 + 2 * 5.0));

  TaskRecord idle;  // Failed before any model call, on a model without a price.
  idle.model = "local-model";
  stats.tasks.push_back(idle);
  EXPECT_TRUE(SessionCostUsd(stats, "claude-sonnet-4-5").has_value());
  stats.tasks.back().stats.output_tokens = 1;
  EXPECT_FALSE(SessionCostUsd(stats, "claude-sonnet-4-5").has_value());
  stats.tasks.pop_back();
  EXPECT_FALSE(SessionCostUsd(stats, "local-model").has_value()) << "the parent's model";
}

// The error object of a run without a session result is Claude Code's result object too: with
// no model call made its counts are 0; for a session killed from outside they are unknown (null).
TEST(ResultJsonTest, AnErrorObjectHasTheResultsFields) {
  const nlohmann::json usage = ErrorResultJson(2, "bad flag");
  EXPECT_EQ(usage["type"], "result");
  EXPECT_EQ(usage["subtype"], "error_usage");
  EXPECT_EQ(usage["is_error"], true);
  EXPECT_EQ(usage["result"], "");
  EXPECT_EQ(usage["num_turns"], 0);
  EXPECT_EQ(usage["total_cost_usd"], 0.0);
  EXPECT_EQ(usage["usage"]["input_tokens"], 0);
  EXPECT_TRUE(usage["duration_ms"].is_number_integer());
  EXPECT_TRUE(usage["stop_reason"].is_null());
  EXPECT_EQ(usage["permission_denials"], nlohmann::json::array());
  EXPECT_EQ(usage["errors"], nlohmann::json::array({"bad flag"}));
  EXPECT_EQ(usage["error"], "bad flag");
  EXPECT_EQ(usage["exit_code"], 2);
  EXPECT_TRUE(usage["uuid"].is_string());
  EXPECT_FALSE(usage.contains("session_id"));
  EXPECT_NE(usage["uuid"], ErrorResultJson(2, "bad flag")["uuid"]);

  const nlohmann::json killed = ErrorResultJson(137, "killed", /*session_ran=*/true);
  EXPECT_EQ(killed["subtype"], "error_interrupted");
  for (const char* unknown : {"num_turns", "duration_api_ms", "usage", "total_cost_usd"}) {
    EXPECT_TRUE(killed[unknown].is_null()) << unknown << ": " << killed.dump();
  }
}

// Claude Code's stop reasons whichever the provider: an OpenAI "length" reads max_tokens, the
// context window's is the Messages API's name, one forkbox does not know is passed on.
TEST(ResultJsonTest, StopReasonsAreTheMessagesApisWords) {
  agent::Response r;
  r.stop_reason = agent::StopReason::kMaxTokens;
  r.raw_stop_reason = "length";
  EXPECT_EQ(ClaudeStopReason(r), "max_tokens");
  r.stop_reason = agent::StopReason::kContextWindow;
  EXPECT_EQ(ClaudeStopReason(r), "model_context_window_exceeded");
  r.stop_reason = agent::StopReason::kUnknown;
  r.raw_stop_reason = "something_new";
  EXPECT_EQ(ClaudeStopReason(r), "something_new");
  r.stop_reason = agent::StopReason::kEndTurn;
  r.model = "";
  const nlohmann::json m = AssistantMessageJson(r, "asked-model");
  EXPECT_TRUE(m["id"].is_null()) << "the provider sent none: null, never a made-up id";
  EXPECT_EQ(m["model"], "asked-model");
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["stop_reason"], "end_turn");
  r.id = "msg_1";
  r.model = "answered-model";
  EXPECT_EQ(AssistantMessageJson(r, "asked-model")["id"], "msg_1");
  EXPECT_EQ(AssistantMessageJson(r, "asked-model")["model"], "answered-model");
}

}  // namespace
}  // namespace forkbox::parent

#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <cstring>

#include "parent/signals.h"
#include "sandbox/sandbox.h"

namespace forkbox::parent {
namespace {

// The waiter's copy of `sig`, with its sequence number (sandbox::PassedOnByWaiter), to this thread.
void CopyFromTheWaiter(int sig, uint16_t sequence) {
  sigval value{};
  value.sival_int = sandbox::kPassedOnTag | sequence;
  ASSERT_EQ(pthread_sigqueue(pthread_self(), sig, value), 0);
}

// rt62 #6: a signal sent to forkbox's process group reaches the sandboxed launcher directly and
// again through its waiter. The second copy counted as a second signal: one that came while the
// one-shot result was written ended forkbox at once, with a second line ("forkbox: interrupted").
// The handler and a task batch's signalfd now take such a pair once. A copy with no direct one
// before it (a signal to forkbox's pid alone) still counts, and so does one after a copy the kernel
// dropped (the direct signal was still pending then: one instance of a standard signal pends).
TEST(InterruptSignals, ASignalThatCameDirectlyAndThroughTheWaiterIsTakenOnce) {
  ASSERT_TRUE(InstallInterruptHandler(InterruptMode::kFlag).ok());
  (void)TakeInterrupt();
  raise(SIGTERM);  // Directly, sent to the group.
  EXPECT_EQ(TakeInterrupt(), SIGTERM);
  CopyFromTheWaiter(SIGTERM, 1);  // Its copy.
  EXPECT_EQ(TakeInterrupt(), 0);
  CopyFromTheWaiter(SIGTERM, 2);  // A signal to the pid alone.
  EXPECT_EQ(TakeInterrupt(), SIGTERM);
  raise(SIGTERM);  // Directly; its copy (3) was dropped by the kernel...
  EXPECT_EQ(TakeInterrupt(), SIGTERM);
  CopyFromTheWaiter(SIGTERM, 4);  // ... so this one is a signal of its own.
  EXPECT_EQ(TakeInterrupt(), SIGTERM);
  {
    Result<BlockedSignals> batch = BlockedSignals::Create();
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    raise(SIGHUP);
    EXPECT_EQ(batch->Read(), SIGHUP);
    CopyFromTheWaiter(SIGHUP, 1);
    EXPECT_EQ(batch->Read(), 0);
    CopyFromTheWaiter(SIGHUP, 2);
    EXPECT_EQ(batch->Read(), SIGHUP);
    EXPECT_EQ(batch->Read(), 0);
  }
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : kInterruptSignals) sigaction(sig, &dfl, nullptr);
}

// rt62 #9: the live progress block's cursor controls are for terminals that take them: not a pipe,
// and not TERM=dumb (Emacs' shell) or no TERM at all.
TEST(TakesCursorControls, ATerminalUnlessTermIsDumbOrUnset) {
  const UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  ASSERT_TRUE(master) << strerror(errno);
  ASSERT_EQ(grantpt(master.get()), 0);
  ASSERT_EQ(unlockpt(master.get()), 0);
  const UniqueFd tty(open(ptsname(master.get()), O_RDWR | O_NOCTTY | O_CLOEXEC));
  ASSERT_TRUE(tty) << strerror(errno);
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  const UniqueFd pipe_read(pipe_fds[0]), pipe_write(pipe_fds[1]);
  const char* saved = getenv("TERM");
  const std::string before = saved != nullptr ? saved : "";
  setenv("TERM", "xterm-256color", 1);
  EXPECT_TRUE(TakesCursorControls(tty.get()));
  EXPECT_FALSE(TakesCursorControls(pipe_write.get()));
  setenv("TERM", "dumb", 1);
  EXPECT_FALSE(TakesCursorControls(tty.get()));
  unsetenv("TERM");
  EXPECT_FALSE(TakesCursorControls(tty.get()));
  if (saved != nullptr) setenv("TERM", before.c_str(), 1);
}

}  // namespace
}  // namespace forkbox::parent
