// The API key's path through the child, as child.cc takes it: the start frame read from fd 3 (on
// demand, after a prepare frame as a standby does, or refused by its checks), the key handed to
// the task's provider (MakeTaskProvider) and then the model calls, each with its request headers.
// Every block freed meanwhile is scanned for the key (tests/ipc/alloc_tracker.h): none may hold it.
// The controls: the scan finds a copy freed unwiped, and the model server got the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "base/process.h"
#include "child/start.h"
#include "ipc/frame.h"
#include "tests/agent/loopback_listener.h"
#include "tests/ipc/alloc_tracker.h"

namespace forkbox::child {
namespace {

using ipc::testing::FreedMemoryScanner;

const char kKey[] = "sk-ant-api03-SECRET-7f3a9c2e1b4d8f6a0e5c7b9d2f4a6c8e0b1d3f5a7c9e";

const std::string kBody = R"({"id":"msg_1","type":"message","role":"assistant","model":"m",)"
                          R"("content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",)"
                          R"("usage":{"input_tokens":1,"output_tokens":1}})";
const std::string kReply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(kBody.size()) + "\r\nConnection: close\r\n\r\n" + kBody;

void Wipe(std::string& s) { ::explicit_bzero(s.data(), s.size()); }

ipc::StartMessage Start(const std::string& model_url) {
  ipc::StartMessage start;
  start.prompt = "the task";
  start.provider.name = "anthropic";
  start.provider.api_key = kKey;
  start.provider.base_url = model_url;
  start.provider.model = "m";
  start.provider.stream = false;
  start.provider.max_retries = 0;
  start.workdir = "/nonexistent-workdir";
  start.sandbox.enabled = false;
  return start;
}

// Writes `messages` as frames to a pipe, closes its write end and returns the read end; each
// encoded frame is wiped here, outside the scan.
UniqueFd Frames(const std::vector<ipc::Message>& messages) {
  Result<Pipe> pipe = MakePipe();
  EXPECT_TRUE(pipe.ok());
  if (!pipe.ok()) return UniqueFd();
  for (const ipc::Message& m : messages) {
    Result<std::string> frame = ipc::EncodeMessage(m);
    EXPECT_TRUE(frame.ok());
    if (!frame.ok()) continue;
    EXPECT_TRUE(ipc::WriteAll(pipe->write.get(), *frame).ok());
    Wipe(*frame);
  }
  return std::move(pipe->read);
}

// Reads the start as child.cc does (the first frame; after a prepare, the start that follows it).
Result<ipc::StartMessage> ReadStart(ControlReader& control) {
  Result<ipc::Message> first = control.ReadFirst();
  if (!first.ok()) return first.status();
  if (auto* prepare = std::get_if<ipc::PrepareMessage>(&*first)) {
    return control.ReadStartAfter(PlanOf(*prepare));
  }
  return std::move(std::get<ipc::StartMessage>(*first));
}

TEST(ChildSecretWipeTest, ControlAnUnwipedCopyIsFound) {
  FreedMemoryScanner scanner(kKey);
  {
    auto copy = std::make_unique<std::string>(kKey);
    asm volatile("" : : "r"(copy.get()) : "memory");  // Seen escaping: not elided.
  }
  EXPECT_EQ(scanner.hits(), 1u);
}

TEST(ChildSecretWipeTest, ReadingTheStartAndCallingTheModelLeavesNoKeyInFreedMemory) {
  for (const bool standby : {false, true}) {
    SCOPED_TRACE(standby ? "standby" : "on demand");
    loopback::ScriptedServer server(std::vector<std::string>(2, std::string(kReply)));
    ipc::StartMessage start = Start(server.url());
    std::vector<ipc::Message> messages;
    if (standby) {
      ipc::PrepareMessage prepare;
      prepare.workdir = start.workdir;
      prepare.sandbox = start.sandbox;
      prepare.model_url = start.provider.base_url;
      messages.push_back(prepare);
    }
    messages.push_back(start);
    UniqueFd fd = Frames(messages);
    start.provider.api_key.clear();
    messages.clear();
    {
      FreedMemoryScanner scanner(kKey);
      {
        ControlReader control(fd.get());
        Result<ipc::StartMessage> read = ReadStart(control);
        ASSERT_TRUE(read.ok()) << read.status().ToString();
        std::optional<ipc::StartMessage> task = std::move(*read);  // As Task::start_ holds it.
        Result<std::unique_ptr<agent::Provider>> provider = MakeTaskProvider(*task, {});
        ASSERT_TRUE(provider.ok()) << provider.status().ToString();
        EXPECT_TRUE(task->provider.api_key.empty());
        for (int call = 0; call < 2; ++call) {
          agent::Request request;
          request.messages.push_back(agent::Message{agent::Role::kUser, {agent::TextBlock{"hi"}}});
          agent::CallResult r = (*provider)->Complete(request, {});
          ASSERT_TRUE(r.ok()) << r.error->ToString();
        }
      }
      EXPECT_EQ(scanner.hits(), 0u);
    }
    ASSERT_EQ(server.requests().size(), 2u);
    for (const std::string& request : server.requests()) {
      EXPECT_THAT(request, testing::HasSubstr(std::string("x-api-key: ") + kKey + "\r\n"));
    }
  }
}

// A start the child's own checks refuse, once the frame was decoded whole (a summary limit past
// its cap: CheckStart), is dropped with its key wiped.
TEST(ChildSecretWipeTest, ARefusedStartLeavesNoKeyInFreedMemory) {
  ipc::StartMessage start = Start("http://127.0.0.1:9");
  start.limits.max_summary_bytes = kMaxSummaryBytesCap + 1;
  UniqueFd fd = Frames({start});
  start.provider.api_key.clear();
  FreedMemoryScanner scanner(kKey);
  {
    ControlReader control(fd.get());
    Result<ipc::Message> first = control.ReadFirst();
    ASSERT_FALSE(first.ok());
    EXPECT_THAT(first.status().message(),
                testing::HasSubstr("limits.max_summary_bytes must be at most"));
  }
  EXPECT_EQ(scanner.hits(), 0u);
}

}  // namespace
}  // namespace forkbox::child
