// The API key's copies in the parent as it starts tasks: the start message, the JSON built from
// it, the text that JSON is serialized into (as it grows), the frame, and the frame's writer to
// each child's pipe. Every block the parent frees while it runs a batch is scanned for the key
// (tests/ipc/alloc_tracker.h): none may hold it. The controls: the scan finds a copy freed
// unwiped, and each fake child reports that its start frame carried the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "parent/progress.h"
#include "parent/task_runner.h"
#include "tests/ipc/alloc_tracker.h"

namespace forkbox::parent {
namespace {

using ipc::testing::FreedMemoryScanner;

const char kKey[] = "sk-ant-api03-SECRET-7f3a9c2e1b4d8f6a0e5c7b9d2f4a6c8e0b1d3f5a7c9e";

TEST(ParentSecretWipeTest, ControlAnUnwipedCopyIsFound) {
  FreedMemoryScanner scanner(kKey);
  {
    auto copy = std::make_unique<std::string>(kKey);
    asm volatile("" : : "r"(copy.get()) : "memory");  // Seen escaping: not elided.
  }
  EXPECT_EQ(scanner.hits(), 1u);
}

// Three tasks, two at a time, each with its start frame sent to a fake child (which reports
// key_in_frame=yes when the frame carried a key). Before, the JSON of each start frame, every
// buffer its serialization outgrew and the serialized text were freed with the key in them.
TEST(ParentSecretWipeTest, StartingTasksLeavesNoKeyInFreedMemory) {
  char tmpl[] = "/tmp/forkbox-secret-wipe-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  TaskConfig config;
  config.child_path = std::string(FAKE_CHILD_DIR) + "/fake_child_ok";
  config.child_env = {"PATH=/usr/bin:/bin"};
  config.provider.name = "anthropic";
  config.provider.api_key = kKey;
  config.provider.base_url = "https://api.anthropic.com";
  config.provider.model = "m";
  config.workdir = tmpl;
  config.sandbox.enabled = false;
  config.max_parallel = 2;
  config.standby = 0;
  config.limits.max_summary_bytes = 64 * 1024;  // The long prompt's summary whole.
  std::vector<TaskSpec> specs;
  for (int i = 1; i <= 3; ++i) {
    // A long prompt for one: its frame's text grows past the key (the prompt precedes it).
    TaskSpec spec;
    spec.number = i;
    spec.description = "task " + std::to_string(i);
    spec.prompt = i == 2 ? std::string(20000, 'p') : "prompt " + std::to_string(i);
    specs.push_back(spec);
  }
  Progress progress(/*enabled=*/false, /*tty=*/false);
  BatchResult result;
  {
    FreedMemoryScanner scanner(kKey);
    result = RunTasks(config, specs, progress, /*standby=*/nullptr);
    EXPECT_EQ(scanner.hits(), 0u);
  }
  ASSERT_EQ(result.outcomes.size(), 3u);
  for (const TaskOutcome& outcome : result.outcomes) {
    EXPECT_TRUE(outcome.ok) << outcome.content;
    EXPECT_THAT(outcome.content, testing::HasSubstr("key_in_frame=yes"));
  }
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace forkbox::parent
