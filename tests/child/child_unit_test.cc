#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <variant>

#include "base/unique_fd.h"
#include "child/reporter.h"
#include "child/runner.h"
#include "child/start.h"
#include "ipc/frame.h"

namespace forkbox::child {
namespace {

TEST(DescribeCallTest, DescribesTheInputNeverOutput) {
  EXPECT_EQ(DescribeCall({"1", "bash", {{"command", "make -j2"}}}), "make -j2");
  EXPECT_EQ(DescribeCall({"1", "read_file", {{"path", "a.cc"}}}), "a.cc");
  EXPECT_EQ(DescribeCall({"1", "read_file", {{"path", "a.cc"}, {"offset", 10}, {"limit", 5}}}),
            "a.cc (lines 10+5)");
  EXPECT_EQ(DescribeCall({"1", "write_file", {{"path", "b.txt"}, {"content", "12345"}}}),
            "b.txt (5 bytes)");
  EXPECT_EQ(DescribeCall({"1", "edit_file", {{"path", "c.h"}, {"old_text", "x"}}}), "c.h");
}

// A model's error text that is not UTF-8 (a parser's message quoting a reply's raw bytes) still
// reaches the parent, made valid: before, the frame was refused and the task failed without its
// reason.
TEST(Reporter, AnErrorThatIsNotUtf8StillReachesTheParent) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  Reporter(write_end.get()).Error("model", "bad reply \xff\xfe here");
  write_end.reset();
  Result<ipc::Message> got = ipc::FrameReader(read_end.get()).Read();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const auto* error = std::get_if<ipc::ErrorMessage>(&*got);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, "model");
  EXPECT_THAT(error->message, testing::HasSubstr("bad reply"));
  EXPECT_THAT(error->message, testing::HasSubstr("here"));
}

// Each reply's counts are at most kMaxReportedCount (agent::UsageCount), but their sums are not:
// the event frame's usage stops at the bound, so the parent accepts it (and the task lives on).
TEST(Reporter, UsageSumsStopAtTheFramesBound) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  Reporter reporter(write_end.get());
  agent::Usage usage;
  usage.input_tokens = ipc::kMaxReportedCount;
  usage.cache_read_input_tokens = 1;
  usage.output_tokens = ipc::kMaxReportedCount;
  reporter.CountUsage(usage);
  reporter.CountUsage(usage);
  ASSERT_TRUE(reporter.Event(1, "bash", "ls").ok());
  write_end.reset();
  Result<ipc::Message> got = ipc::FrameReader(read_end.get()).Read();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const auto* event = std::get_if<ipc::EventMessage>(&*got);
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->input_tokens, ipc::kMaxReportedCount);
  EXPECT_EQ(event->output_tokens, ipc::kMaxReportedCount);
}

// Every event carries the tool calls counted so far, so a task that dies reports them.
TEST(Reporter, EventsCarryTheToolCallsSoFar) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  Reporter reporter(write_end.get());
  ASSERT_TRUE(reporter.Event(1, "", "model turn: 2 tool call(s)").ok());
  reporter.CountToolCall();
  reporter.CountToolCall();
  ASSERT_TRUE(reporter.Event(1, "bash", "ls").ok());
  write_end.reset();
  ipc::FrameReader reader(read_end.get());
  for (const int64_t expected : {0, 2}) {
    Result<ipc::Message> got = reader.Read();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const auto* event = std::get_if<ipc::EventMessage>(&*got);
    ASSERT_NE(event, nullptr);
    EXPECT_EQ(event->tool_calls, expected);
  }
}

}  // namespace
}  // namespace forkbox::child
