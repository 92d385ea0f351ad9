// Proof tests for issue 7 (pass/fail, no timing):
//  - the memory canary: a child's bash output carries a random 64-byte marker through megabytes;
//    while the parent waits for its final model reply (held by the mock), its whole address space
//    is read through /proc/<pid>/mem and must not contain the marker. The same scan of a
//    --no-subagents parent, which read the output itself, must find it (the scan works).
//  - the parent's request after each task grows by the summary plus a small fixed envelope.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "base/process.h"
#include "tests/bench/forkbox_launch.h"
#include "tests/bench/proc_probe.h"
#include "tests/mock/mock_server.h"

namespace forkbox::bench {
namespace {

using mock::MockServer;
using mock::RecordedRequest;
using mock::Reply;

constexpr int kSandboxUnavailableExit = 4;  // parent/exit_codes.h
constexpr int kGuardMs = 300'000;           // Failure guard only; never a synchronisation.

// 32 random bytes as 64 hex characters.
std::string RandomMarker() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  unsigned char bytes[32] = {};
  urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  EXPECT_TRUE(urandom.good()) << "cannot read /dev/urandom";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// Prints `bytes` bytes of marker lines. The command text splits the marker in two quoted halves,
// so only the command's OUTPUT holds it contiguously (the command itself may show up in progress
// events, which is not what the canary is about).
std::string NoisyCommand(const std::string& marker, int64_t bytes) {
  return "yes '" + marker.substr(0, 32) + "''" + marker.substr(32) + "' | head -c " +
         std::to_string(bytes);
}

// The mock handler calls Arrive() for the request it holds: the test is woken through an eventfd
// (pollable together with the parent's pidfd) and the handler blocks until Open().
class Gate {
 public:
  Gate() : event_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  void Arrive() {
    const uint64_t one = 1;
    EXPECT_EQ(write(event_.get(), &one, sizeof one), static_cast<ssize_t>(sizeof one));
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int fd() const { return event_.get(); }

 private:
  UniqueFd event_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Opens the gate on every exit path, before the server (declared earlier) is stopped.
struct GateOpener {
  Gate& gate;
  ~GateOpener() { gate.Open(); }
};

bool Contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

class BenchProofTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "reading /proc/<pid>/mem of the non-dumpable forkbox parent needs root "
                      "(CAP_SYS_PTRACE); run this test as root";
    }
    auto dir = ScratchDir::Create("forkbox-bench-test");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    dir_ = std::move(*dir);
  }

  Result<ForkboxRun> Launch(const MockServer& server, std::vector<std::string> extra) {
    return LaunchForkbox({FORKBOX_BIN_DIR, server.anthropic_base_url(), dir_.path(),
                          "Run the noisy command and tell me what it printed.", std::move(extra)});
  }

  // Waits until the gate's request arrived (true) or the parent exited first (false, with a
  // message). A parent that exits because the sandbox is unavailable skips the test.
  ::testing::AssertionResult WaitForGate(Gate& gate, ForkboxRun& run) {
    pollfd fds[2] = {{gate.fd(), POLLIN, 0}, {run.process.pidfd(), POLLIN, 0}};
    const int n = poll(fds, 2, kGuardMs);
    if (n > 0 && (fds[0].revents & POLLIN)) return ::testing::AssertionSuccess();
    if (n > 0) {
      auto status = run.process.Wait();
      const int code = status.ok() ? ExitCodeFromWaitStatus(*status) : -1;
      sandbox_unavailable_ = code == kSandboxUnavailableExit;
      return ::testing::AssertionFailure()
             << "forkbox ended before its final request ("
             << (status.ok() ? DescribeWaitStatus(*status) : status.status().ToString())
             << "); stderr:\n"
             << ReadCaptured(run.err);
    }
    return ::testing::AssertionFailure() << "no final parent request within the guard; stderr:\n"
                                         << ReadCaptured(run.err);
  }

  void ExpectCleanExit(ForkboxRun& run) {
    auto status = run.process.Wait();
    ASSERT_TRUE(status.ok()) << status.status().ToString();
    EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0) << DescribeWaitStatus(*status) << "; stderr:\n"
                                                  << ReadCaptured(run.err);
  }

  ScratchDir dir_;
  bool sandbox_unavailable_ = false;
};

TEST_F(BenchProofTest, ChildOutputMarkerNeverEntersParentMemory) {
  const std::string marker = RandomMarker();
  Gate gate;
  MockServer server;
  server.SetHandler([&](const RecordedRequest& r) {
    Reply reply;
    if (r.view.HasTool("task")) {
      if (r.view.assistant_turns == 0) {
        reply.tool_calls.push_back(
            {"task",
             {{"description", "run the noisy command"},
              {"prompt", "Run the noisy command and summarise its output in one line."}},
             "toolu_canary_task"});
      } else {
        gate.Arrive();  // Hold the final reply: the parent stays alive for the scan.
        reply.text = "The subagent says the command printed one repeated line.";
      }
    } else if (r.view.assistant_turns == 0) {
      reply.tool_calls.push_back({"bash", {{"command", NoisyCommand(marker, 8'000'000)}}, ""});
    } else {
      reply.text = "The command printed 8 MB of one repeated 64-character line.";
    }
    return reply;
  });
  server.Start();
  GateOpener opener{gate};

  auto run = Launch(server, {});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const auto arrived = WaitForGate(gate, *run);
  if (sandbox_unavailable_)
    GTEST_SKIP() << "the sandbox is unavailable here: " << arrived.message();
  ASSERT_TRUE(arrived);

  // The child really saw the marker: its next model request carried the (cut) output.
  bool child_saw_it = false;
  for (const RecordedRequest& r : server.requests()) {
    if (!r.view.HasTool("task") && Contains(r.body, marker)) child_saw_it = true;
    EXPECT_FALSE(r.view.HasTool("task") && Contains(r.body, marker))
        << "parent request #" << r.index << " contains the child's output";
  }
  EXPECT_TRUE(child_saw_it) << "no child request carried the marker: the canary did not run";

  auto scan = ScanAddressSpace(SessionProcess(run->process.pid()), marker);
  ASSERT_TRUE(scan.ok()) << scan.status().ToString();
  EXPECT_GT(scan->bytes_scanned, 1 << 20) << "the scan read almost nothing";
  EXPECT_EQ(scan->matches, 0) << "the marker is in the parent's memory (" << scan->regions
                              << " regions, " << scan->bytes_scanned << " bytes scanned, "
                              << scan->bytes_skipped << " bytes of reservations skipped)";

  gate.Open();
  ExpectCleanExit(*run);
}

TEST_F(BenchProofTest, BaselineParentMemoryHoldsTheMarker) {
  const std::string marker = RandomMarker();
  Gate gate;
  MockServer server;
  server.SetHandler([&](const RecordedRequest& r) {
    Reply reply;
    EXPECT_FALSE(r.view.HasTool("task")) << "--no-subagents offered the task tool";
    if (r.view.assistant_turns == 0) {
      reply.tool_calls.push_back({"bash", {{"command", NoisyCommand(marker, 8'000'000)}}, ""});
    } else {
      gate.Arrive();
      reply.text = "The command printed 8 MB of one repeated 64-character line.";
    }
    return reply;
  });
  server.Start();
  GateOpener opener{gate};

  auto run = Launch(server, {"--no-subagents"});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const auto arrived = WaitForGate(gate, *run);
  if (sandbox_unavailable_)
    GTEST_SKIP() << "the sandbox is unavailable here: " << arrived.message();
  ASSERT_TRUE(arrived);

  auto scan = ScanAddressSpace(SessionProcess(run->process.pid()), marker);
  ASSERT_TRUE(scan.ok()) << scan.status().ToString();
  EXPECT_GT(scan->matches, 0) << "the scan missed a marker the baseline parent holds ("
                              << scan->bytes_scanned << " bytes scanned)";

  gate.Open();
  ExpectCleanExit(*run);
}

// The assistant turn with the task call and the tool_result wrapper around the summary: JSON
// keys, ids, the role objects (about 215 bytes today). Small, fixed, and independent of the
// child's output (2 MB per task here).
constexpr int64_t kEnvelopeBytes = 512;

TEST_F(BenchProofTest, ParentRequestGrowsOnlyBySummaryPlusEnvelope) {
  // Summaries of very different sizes, so the bound tracks the summary, not a constant.
  const std::vector<std::string> summaries = {"Short summary.", std::string(900, 'a'),
                                              std::string(3000, 'b'), std::string(9000, 'c')};
  const int tasks = static_cast<int>(summaries.size());
  auto task_input = [](int k) {
    return nlohmann::json{{"description", "noisy task " + std::to_string(k)},
                          {"prompt", "Task " + std::to_string(k) + ": run the noisy command."}};
  };
  auto parent_text = [](int k) { return "Starting task " + std::to_string(k) + "."; };
  MockServer server;
  server.SetHandler([&](const RecordedRequest& r) {
    Reply reply;
    const int turn = r.view.assistant_turns;
    if (r.view.HasTool("task")) {
      if (turn < tasks) {
        reply.text = parent_text(turn);
        reply.tool_calls.push_back(
            {"task", task_input(turn), "toolu_grow_" + std::to_string(turn)});
      } else {
        reply.text = "All tasks are done.";
      }
    } else if (turn == 0) {
      reply.tool_calls.push_back(
          {"bash", {{"command", "head -c 2000000 /dev/zero | tr '\\0' y"}}, ""});
    } else {
      for (int k = 0; k < tasks; ++k) {
        if (Contains(r.view.FirstUserText(), "Task " + std::to_string(k) + ":")) {
          reply.text = summaries[k];
        }
      }
      if (reply.text.empty()) reply.text = "unknown task";
    }
    return reply;
  });
  server.Start();

  auto run = Launch(server, {});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto status = run->process.Wait();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  const int code = ExitCodeFromWaitStatus(*status);
  if (code == kSandboxUnavailableExit) {
    GTEST_SKIP() << "the sandbox is unavailable here: " << ReadCaptured(run->err);
  }
  ASSERT_EQ(code, 0) << DescribeWaitStatus(*status) << "; stderr:\n" << ReadCaptured(run->err);

  std::vector<RecordedRequest> parent;
  for (RecordedRequest& r : server.requests()) {
    if (r.view.HasTool("task")) parent.push_back(std::move(r));
  }
  ASSERT_EQ(parent.size(), summaries.size() + 1) << "one parent request per task, plus the first";
  for (int k = 1; k <= tasks; ++k) {
    const RecordedRequest& before = parent[k - 1];
    const RecordedRequest& after = parent[k];
    ASSERT_EQ(after.view.assistant_turns, k);
    ASSERT_FALSE(after.view.tool_results.empty());
    EXPECT_EQ(after.view.tool_results.back().text, summaries[k - 1])
        << "the tool_result is not exactly the child's summary";
    const int64_t growth =
        static_cast<int64_t>(after.body.size()) - static_cast<int64_t>(before.body.size());
    const int64_t summary = static_cast<int64_t>(summaries[k - 1].size());
    const int64_t call =
        static_cast<int64_t>(task_input(k - 1).dump().size() + parent_text(k - 1).size());
    EXPECT_GE(growth, summary) << "task " << k;
    EXPECT_LE(growth, summary + call + kEnvelopeBytes)
        << "task " << k << ": the parent's request grew by " << growth << " bytes for a " << summary
        << "-byte summary and a " << call << "-byte task call";
  }
}

}  // namespace
}  // namespace forkbox::bench
