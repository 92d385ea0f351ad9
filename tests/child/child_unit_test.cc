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

}  // namespace
}  // namespace forkbox::child
