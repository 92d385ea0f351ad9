#include "agent/loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

namespace forkbox::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Replies from a script and records every request (no network).
class FakeProvider : public Provider {
 public:
  CallResult Complete(const Request& request, const TextSink& on_text) override {
    requests.push_back(request);
    if (script.empty()) {
      CallResult r;
      r.error = ModelError{};
      r.error->message = "fake: script exhausted";
      return r;
    }
    CallResult r = std::move(script.front());
    script.pop_front();
    if (r.ok() && on_text) {
      std::string text = TextOf(r.response.message);
      if (!text.empty()) on_text(text);
    }
    return r;
  }
  const ProviderConfig& config() const override { return config_; }
  ProviderConfig& mutable_config() { return config_; }

  void Reply(std::string text, StopReason stop, std::vector<ToolUseBlock> calls = {},
             Usage usage = {}) {
    CallResult r;
    r.response.message.role = Role::kAssistant;
    if (!text.empty()) r.response.message.content.push_back(TextBlock{std::move(text)});
    for (auto& c : calls) r.response.message.content.push_back(std::move(c));
    r.response.stop_reason = stop;
    r.response.usage = usage;
    script.push_back(std::move(r));
  }
  void Error(std::string message) {
    CallResult r;
    r.error = ModelError{};
    r.error->kind = ModelError::Kind::kHttp;
    r.error->http_status = 500;
    r.error->message = std::move(message);
    script.push_back(std::move(r));
  }

  std::deque<CallResult> script;
  std::vector<Request> requests;

 private:
  ProviderConfig config_;
};

class RecordingRunner : public ToolRunner {
 public:
  std::vector<ToolResultBlock> Run(const std::vector<ToolUseBlock>& calls, int turn) override {
    std::vector<ToolResultBlock> out;
    for (const ToolUseBlock& c : calls) {
      seen.push_back(c.name + "@" + std::to_string(turn));
      out.push_back(ToolResultBlock{c.id, "result of " + c.id, c.name == "fail"});
    }
    return out;
  }
  int interrupt_signal() const override { return interrupt_after_run; }
  std::vector<std::string> seen;
  int interrupt_after_run = 0;  // What interrupt_signal() reports after a Run.
};

// Answers every call with `bytes` bytes of output.
class BigRunner : public ToolRunner {
 public:
  explicit BigRunner(size_t bytes) : bytes_(bytes) {}
  std::vector<ToolResultBlock> Run(const std::vector<ToolUseBlock>& calls, int) override {
    std::vector<ToolResultBlock> out;
    for (const ToolUseBlock& c : calls) out.push_back({c.id, std::string(bytes_, 'x'), false});
    return out;
  }

 private:
  size_t bytes_;
};

// The tool results of a request, in order.
std::vector<std::string> ResultsOf(const Request& request) {
  std::vector<std::string> out;
  for (const Message& m : request.messages) {
    for (const ContentBlock& b : m.content) {
      if (const auto* r = std::get_if<ToolResultBlock>(&b)) out.push_back(r->content);
    }
  }
  return out;
}

ToolUseBlock Call(std::string id, std::string name = "bash") {
  return ToolUseBlock{std::move(id), std::move(name), {{"command", "ls"}}};
}

std::vector<Message> Prompt(std::string text) {
  return {Message{Role::kUser, {TextBlock{std::move(text)}}}};
}

class LoopTest : public ::testing::Test {
 protected:
  LoopOutcome Run() {
    options_.tools = {ToolDef{"bash", "d", {{"type", "object"}}},
                      ToolDef{"fail", "fails", {{"type", "object"}}}};
    return RunLoop(provider_, messages_, options_, runner_, observer_);
  }
  FakeProvider provider_;
  RecordingRunner runner_;
  std::vector<Message> messages_ = Prompt("do it");
  LoopOptions options_;
  LoopObserver observer_;
};

TEST_F(LoopTest, RunsToolsAndReturnsFinalText) {
  provider_.Reply("looking", StopReason::kToolUse, {Call("a"), Call("b", "fail")}, {10, 5});
  provider_.Reply("all done", StopReason::kEndTurn, {}, {20, 7});
  std::string streamed;
  observer_.on_text = [&](std::string_view t) { streamed += t; };
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "completed");
  EXPECT_EQ(out.final_text, "all done");
  EXPECT_EQ(out.turns, 2);
  EXPECT_EQ(out.tool_calls, 2);
  EXPECT_EQ(out.usage.input_tokens, 30);
  EXPECT_EQ(out.usage.output_tokens, 12);
  EXPECT_EQ(streamed, "lookingall done");
  EXPECT_THAT(runner_.seen, ElementsAre("bash@1", "fail@1"));
  // Second request: prompt, assistant turn, ONE user message with both results in call order.
  ASSERT_EQ(provider_.requests.size(), 2u);
  const auto& msgs = provider_.requests[1].messages;
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[2].role, Role::kUser);
  ASSERT_EQ(msgs[2].content.size(), 2u);
  auto r0 = std::get<ToolResultBlock>(msgs[2].content[0]);
  auto r1 = std::get<ToolResultBlock>(msgs[2].content[1]);
  EXPECT_EQ(r0.tool_use_id, "a");
  EXPECT_FALSE(r0.is_error);
  EXPECT_EQ(r1.tool_use_id, "b");
  EXPECT_TRUE(r1.is_error);
  EXPECT_EQ(provider_.requests[1].tools.size(), 2u);
  EXPECT_EQ(messages_.size(), 4u);  // The caller's conversation grew, ending with the answer.
  EXPECT_EQ(messages_.back().role, Role::kAssistant);
}

TEST_F(LoopTest, PauseTurnIsSentBackAndContinued) {
  provider_.Reply("part one", StopReason::kPauseTurn);
  provider_.Reply("part two", StopReason::kEndTurn);
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "completed");
  EXPECT_EQ(out.final_text, "part two");
  ASSERT_EQ(provider_.requests.size(), 2u);
  ASSERT_EQ(provider_.requests[1].messages.size(), 2u);
  EXPECT_EQ(provider_.requests[1].messages[1].role, Role::kAssistant);
  EXPECT_EQ(TextOf(provider_.requests[1].messages[1]), "part one");
  EXPECT_TRUE(runner_.seen.empty());
}

// Two paused replies in a row continue one assistant turn: each request's roles alternate (the
// API refuses two assistant messages in a row), the paused content goes back unchanged and in
// order, and the reply that ends the turn joins it too.
TEST_F(LoopTest, ConsecutivePausedRepliesContinueOneAssistantTurn) {
  provider_.Reply("part one", StopReason::kPauseTurn);
  provider_.Reply("part two", StopReason::kPauseTurn);
  provider_.Reply("part three", StopReason::kEndTurn);
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "completed");
  EXPECT_EQ(out.final_text, "part three");
  ASSERT_EQ(provider_.requests.size(), 3u);
  for (const Request& request : provider_.requests) {
    for (size_t i = 1; i < request.messages.size(); ++i) {
      EXPECT_NE(request.messages[i].role, request.messages[i - 1].role) << "message " << i;
    }
  }
  const std::vector<Message>& third = provider_.requests[2].messages;
  ASSERT_EQ(third.size(), 2u);
  EXPECT_EQ(third[1].role, Role::kAssistant);
  EXPECT_EQ(TextOf(third[1]), "part onepart two");
  EXPECT_EQ(third[1].content.size(), 2u);
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_EQ(TextOf(messages_[1]), "part onepart twopart three");
}

TEST_F(LoopTest, RefusalStops) {
  provider_.Reply("I can't help with that", StopReason::kRefusal);
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "refusal");
  EXPECT_EQ(out.final_text, "I can't help with that");
  EXPECT_EQ(provider_.requests.size(), 1u);
}

TEST_F(LoopTest, MaxTokensNeverRunsIncompleteToolCalls) {
  provider_.Reply("starting", StopReason::kMaxTokens, {Call("cut")});
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "max_tokens");
  EXPECT_TRUE(runner_.seen.empty());
  EXPECT_EQ(out.tool_calls, 0);
  // The kept conversation has no unanswered tool_use.
  for (const Message& m : messages_) EXPECT_TRUE(ToolUsesOf(m).empty());
}

TEST_F(LoopTest, ContextWindowStops) {
  provider_.Reply("", StopReason::kContextWindow);
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "context_window");
  EXPECT_THAT(out.final_text, HasSubstr("gave no final summary"));
}

TEST_F(LoopTest, ModelErrorStopsWithTheError) {
  provider_.Reply("first I run", StopReason::kToolUse, {Call("a")});
  provider_.Error("boom");
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "model_error");
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->message, "boom");
  EXPECT_THAT(out.final_text, HasSubstr("first I run"));
}

TEST_F(LoopTest, ContextOverflowErrorIsAContextWindowStop) {
  provider_.Reply("read everything", StopReason::kToolUse, {Call("a")});
  provider_.Error("prompt is too long");
  provider_.script.back().error->kind = ModelError::Kind::kContextOverflow;
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "context_window");
  ASSERT_TRUE(out.error.has_value());
  EXPECT_THAT(out.final_text, HasSubstr("read everything"));
}

TEST_F(LoopTest, TurnLimitForcesOneFinalRequestWithoutTools) {
  options_.max_turns = 2;
  provider_.Reply("t1", StopReason::kToolUse, {Call("a")});
  provider_.Reply("t2", StopReason::kToolUse, {Call("b")});
  provider_.Reply("summary: did a and b", StopReason::kEndTurn);
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "max_turns");
  EXPECT_EQ(out.final_text, "summary: did a and b");
  EXPECT_EQ(out.turns, 3);
  EXPECT_EQ(out.tool_calls, 2);
  ASSERT_EQ(provider_.requests.size(), 3u);
  EXPECT_FALSE(provider_.requests[1].tools.empty());
  const Request& last = provider_.requests[2];
  EXPECT_TRUE(last.tools.empty());
  // Roles still alternate: the last tool results and the request share one user message.
  const Message& m = last.messages.back();
  EXPECT_EQ(m.role, Role::kUser);
  ASSERT_EQ(m.content.size(), 2u);
  EXPECT_EQ(std::get<ToolResultBlock>(m.content[0]).tool_use_id, "b");
  EXPECT_THAT(std::get<TextBlock>(m.content[1]).text, HasSubstr("final summary"));
  for (size_t i = 1; i < last.messages.size(); ++i) {
    EXPECT_NE(last.messages[i].role, last.messages[i - 1].role);
  }
}

TEST_F(LoopTest, TurnLimitWithoutForcedSummaryStillGivesUsefulText) {
  options_.max_turns = 1;
  options_.force_final_summary = false;
  provider_.Reply("checking the tests", StopReason::kToolUse, {Call("a")});
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "max_turns");
  EXPECT_EQ(provider_.requests.size(), 1u);
  EXPECT_THAT(out.final_text, HasSubstr("gave no final summary"));
  EXPECT_THAT(out.final_text, HasSubstr("checking the tests"));
  EXPECT_THAT(out.final_text, HasSubstr("bash"));
}

TEST_F(LoopTest, EmptyFinalTextGetsFallbackFromEarlierTexts) {
  provider_.Reply("found the bug in foo.cc:12", StopReason::kToolUse, {Call("a")});
  provider_.Reply("", StopReason::kEndTurn);
  LoopOutcome out = Run();
  EXPECT_STREQ(LoopStopName(out.stop), "completed");
  EXPECT_THAT(out.final_text, HasSubstr("gave no final summary"));
  EXPECT_THAT(out.final_text, HasSubstr("found the bug in foo.cc:12"));
}

TEST_F(LoopTest, FinalTextIsCappedAtACharacterBoundaryWithMarker) {
  options_.max_final_text_bytes = 9;
  std::string text;
  for (int i = 0; i < 10; ++i) text += "\xC3\xA9";
  provider_.Reply(text, StopReason::kEndTurn);
  LoopOutcome out = Run();
  EXPECT_EQ(out.final_text.substr(0, 8), text.substr(0, 8));
  EXPECT_EQ(out.final_text[8], '\n');
  EXPECT_THAT(out.final_text, HasSubstr("summary truncated: 12 bytes dropped"));
}

// An interrupt reported by the runner is a stop reason, not an exception: the loop stops after
// that turn's tool results (every call answered), asks the model nothing more, and counts the
// interrupted turn's usage.
TEST_F(LoopTest, InterruptFromTheRunnerIsAStopReasonAndItsTurnIsCounted) {
  provider_.Reply("working", StopReason::kToolUse, {Call("a"), Call("b")}, {100, 9});
  provider_.Reply("never asked", StopReason::kEndTurn, {}, {1, 1});
  runner_.interrupt_after_run = 2;  // SIGINT
  LoopOutcome out = Run();
  EXPECT_EQ(out.stop, LoopStop::kInterrupted);
  EXPECT_STREQ(LoopStopName(out.stop), "interrupted");
  EXPECT_EQ(out.interrupt_signal, 2);
  EXPECT_EQ(provider_.requests.size(), 1u);
  EXPECT_EQ(out.usage.input_tokens, 100);
  EXPECT_EQ(out.usage.output_tokens, 9);
  EXPECT_EQ(out.turns, 1);
  EXPECT_EQ(out.tool_calls, 2);
  EXPECT_TRUE(out.final_text.empty());
  // The conversation stays valid for the next prompt: every tool_use has its result.
  ASSERT_EQ(messages_.back().role, Role::kUser);
  EXPECT_EQ(messages_.back().content.size(), 2u);
}

TEST_F(LoopTest, CancelledModelCallIsAnInterruptStop) {
  CallResult cancelled;
  cancelled.error = ModelError{};
  cancelled.error->kind = ModelError::Kind::kCancelled;
  provider_.script.push_back(std::move(cancelled));
  LoopOutcome out = Run();
  EXPECT_EQ(out.stop, LoopStop::kInterrupted);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->kind, ModelError::Kind::kCancelled);
}

ToolUseBlock Malformed(std::string id) {
  // llama.cpp's cut JSON, kept as the raw text.
  return ToolUseBlock{std::move(id), "bash", nlohmann::json("{\"command\": \"ls")};
}

// Malformed calls go back to the model as is_error results naming the problem and the schema;
// they never reach the runner and the loop goes on (one request per turn: nothing is re-sent).
TEST_F(LoopTest, MalformedToolCallsAreAnsweredWithTheProblemAndTheSchema) {
  const nlohmann::json schema = {{"type", "object"},
                                 {"properties", {{"command", {{"type", "string"}}}}},
                                 {"required", {"command"}}};
  provider_.Reply(
      "", StopReason::kToolUse,
      {Malformed("m"), ToolUseBlock{"u", "nope", {}}, ToolUseBlock{"x", "bash", {{"cmd", "ls"}}},
       ToolUseBlock{"t", "bash", {{"command", 5}}}, Call("ok")});
  provider_.Reply("done", StopReason::kEndTurn);
  options_.tools = {ToolDef{"bash", "d", schema}};
  LoopOutcome out = RunLoop(provider_, messages_, options_, runner_, observer_);
  EXPECT_EQ(out.stop, LoopStop::kCompleted);
  EXPECT_EQ(provider_.requests.size(), 2u);
  EXPECT_THAT(runner_.seen, ElementsAre("bash@1"));  // Only the well-formed call ran.
  const Message& results = provider_.requests[1].messages.back();
  ASSERT_EQ(results.content.size(), 5u);
  auto result = [&](size_t i) { return std::get<ToolResultBlock>(results.content[i]); };
  EXPECT_TRUE(result(0).is_error);
  EXPECT_THAT(result(0).content, HasSubstr("not valid JSON"));
  EXPECT_THAT(result(0).content, HasSubstr(schema.dump()));
  EXPECT_THAT(result(1).content, HasSubstr("unknown tool 'nope'; the available tools are: bash"));
  EXPECT_THAT(result(2).content, HasSubstr("the required field 'command' is missing"));
  EXPECT_THAT(result(3).content, HasSubstr("'command' must be of type string, got number"));
  EXPECT_FALSE(result(4).is_error);
  EXPECT_EQ(result(4).tool_use_id, "ok");
}

// Arguments that repeat a key (kept as their raw text by the decoders, which refuse them) and a
// field the schema does not define when it says "additionalProperties": false are malformed calls,
// answered with the problem, never run. Before, the last "command" ran, and "cwd" was dropped
// unseen. The control: without "additionalProperties": false the extra field is accepted.
TEST_F(LoopTest, RepeatedKeysAndUnknownFieldsAreMalformedCalls) {
  nlohmann::json schema = {{"type", "object"},
                           {"properties", {{"command", {{"type", "string"}}}}},
                           {"required", {"command"}},
                           {"additionalProperties", false}};
  for (const bool closed : {true, false}) {
    SCOPED_TRACE(closed ? "additionalProperties: false" : "no additionalProperties");
    if (!closed) schema.erase("additionalProperties");
    provider_.requests.clear();
    runner_.seen.clear();
    provider_.Reply("", StopReason::kToolUse,
                    {ToolUseBlock{"r", "bash", R"({"command":"ls","command":"rm -rf x"})"},
                     ToolUseBlock{"u", "bash", {{"command", "ls"}, {"cwd", "/"}}}});
    provider_.Reply("done", StopReason::kEndTurn);
    options_.tools = {ToolDef{"bash", "d", schema}};
    std::vector<Message> messages = Prompt("do it");
    RunLoop(provider_, messages, options_, runner_, observer_);
    ASSERT_EQ(provider_.requests.size(), 2u);
    const std::vector<std::string> results = ResultsOf(provider_.requests[1]);
    ASSERT_EQ(results.size(), 2u);
    EXPECT_THAT(results[0], HasSubstr("invalid call of bash: the arguments are JSON that repeats "
                                      "the key \"command\" in one object: "));
    if (closed) {
      EXPECT_THAT(runner_.seen, ::testing::IsEmpty());
      EXPECT_THAT(results[1], HasSubstr("invalid call of bash: the field \"cwd\" is not one of "
                                        "this tool's fields (command)"));
    } else {
      EXPECT_THAT(runner_.seen, ElementsAre("bash@1"));
      EXPECT_EQ(results[1], "result of u");
    }
  }
}

TEST_F(LoopTest, ThreeConsecutiveMalformedTurnsStop) {
  provider_.Reply("", StopReason::kToolUse, {Malformed("a")});
  provider_.Reply("", StopReason::kToolUse, {Call("fine")});  // Resets the count.
  for (int i = 0; i < 3; ++i) provider_.Reply("", StopReason::kToolUse, {Malformed("m")});
  provider_.Reply("never asked", StopReason::kEndTurn);
  LoopOutcome out = Run();
  EXPECT_EQ(out.stop, LoopStop::kMalformedToolCalls);
  EXPECT_EQ(provider_.requests.size(), 5u);
  EXPECT_THAT(out.final_text, HasSubstr("malformed_tool_calls"));
}

TEST_F(LoopTest, TranscriptRecordsEveryStep) {
  provider_.Reply("t1", StopReason::kToolUse, {Call("a")});
  provider_.Reply("done", StopReason::kEndTurn);
  std::vector<nlohmann::json> records;
  observer_.on_transcript = [&](const nlohmann::json& j) { records.push_back(j); };
  int calls_seen = 0;
  observer_.on_tool_call = [&](int, const ToolUseBlock&) { ++calls_seen; };
  options_.system = "sys";
  Run();
  std::vector<std::string> types;
  for (const auto& r : records) types.push_back(r["type"]);
  EXPECT_THAT(types, ElementsAre("request", "response", "tool_call", "tool_result", "request",
                                 "response", "end"));
  EXPECT_EQ(records[0]["system"], "sys");
  EXPECT_EQ(records[0]["messages_delta"].size(), 1u);
  // The second request's delta: the assistant turn and the tool results.
  EXPECT_EQ(records[4]["messages_delta"].size(), 2u);
  EXPECT_EQ(records[3]["content"], "result of a");
  EXPECT_EQ(calls_seen, 1);
}

}  // namespace
}  // namespace forkbox::agent

namespace forkbox::agent {
namespace {

class ContextTest : public ::testing::Test {
 protected:
  LoopOutcome Run(ToolRunner& runner) {
    options_.tools = {ToolDef{"bash", "d", {{"type", "object"}}}};
    observer_.on_transcript = [&](const nlohmann::json& j) {
      if (j["type"] == "compaction") compactions_.push_back(j);
    };
    return RunLoop(provider_, messages_, options_, runner, observer_);
  }
  void ToolTurns(int n) {
    for (int i = 0; i < n; ++i) {
      provider_.Reply("", StopReason::kToolUse,
                      {ToolUseBlock{"t" + std::to_string(i), "bash", {{"command", "cat big"}}}});
    }
  }
  FakeProvider provider_;
  std::vector<Message> messages_ = Prompt("do it");
  LoopOptions options_;
  LoopObserver observer_;
  std::vector<nlohmann::json> compactions_;
};

// Requests stay under 80% of the window; the latest result stays whole; each compaction changes
// the prefix once (every other request extends the one before it).
TEST_F(ContextTest, OldestToolResultsAreFoldedBeforeTheWindowIsPassed) {
  provider_.mutable_config().context_window = 10'000;
  BigRunner runner(8'000);  // ~2,000 tokens per result.
  ToolTurns(12);
  provider_.Reply("done", StopReason::kEndTurn);
  LoopOutcome out = Run(runner);
  EXPECT_STREQ(LoopStopName(out.stop), "completed");
  ASSERT_EQ(provider_.requests.size(), 13u);
  int rewrites = 0;
  for (size_t i = 0; i < provider_.requests.size(); ++i) {
    const std::vector<std::string> results = ResultsOf(provider_.requests[i]);
    int64_t bytes = 0;
    for (const std::string& r : results) bytes += static_cast<int64_t>(r.size());
    EXPECT_LE(bytes / 4, 8'000) << "request " << i;
    if (!results.empty()) {
      EXPECT_EQ(results.back().size(), 8'000u) << "request " << i;
    }
    if (i == 0) continue;
    const std::vector<std::string> before = ResultsOf(provider_.requests[i - 1]);
    for (size_t k = 0; k < before.size(); ++k) {
      if (results[k] != before[k]) {
        ++rewrites;
        break;
      }
    }
  }
  ASSERT_FALSE(compactions_.empty());
  EXPECT_EQ(rewrites, static_cast<int>(compactions_.size()));
  // Folding to half the window leaves room for turns: not a rewrite every turn.
  EXPECT_LE(compactions_.size() * 2, provider_.requests.size());
  const std::string first = ResultsOf(provider_.requests.back())[0];
  EXPECT_THAT(first, HasSubstr("folded"));
  EXPECT_THAT(first, HasSubstr("bash {\"command\":\"cat big\"}"));
  EXPECT_THAT(first, HasSubstr("originally 8000 bytes"));
}

TEST_F(ContextTest, WithoutAKnownWindowNothingIsFolded) {  // Control of the test above.
  BigRunner runner(8'000);
  ToolTurns(12);
  provider_.Reply("done", StopReason::kEndTurn);
  Run(runner);
  for (const std::string& r : ResultsOf(provider_.requests.back())) EXPECT_EQ(r.size(), 8'000u);
  EXPECT_TRUE(compactions_.empty());
}

TEST_F(ContextTest, ParentKeepsTheResultsOfNamedTools) {
  provider_.mutable_config().context_window = 10'000;
  options_.keep_results_of = {"bash"};
  BigRunner runner(8'000);
  ToolTurns(3);
  provider_.Reply("done", StopReason::kEndTurn);
  Run(runner);
  for (const std::string& r : ResultsOf(provider_.requests.back())) EXPECT_EQ(r.size(), 8'000u);
}

void TooLong(FakeProvider& provider) {
  provider.Error("prompt is too long: 250000 tokens > 200000 maximum");
  provider.script.back().error->kind = ModelError::Kind::kContextOverflow;
  provider.script.back().error->http_status = 400;
}

TEST_F(ContextTest, TooLongFoldsAllButTheLatestAndRetriesOnce) {
  BigRunner runner(8'000);
  ToolTurns(3);
  TooLong(provider_);
  provider_.Reply("done", StopReason::kEndTurn);
  LoopOutcome out = Run(runner);
  EXPECT_STREQ(LoopStopName(out.stop), "completed");
  ASSERT_EQ(provider_.requests.size(), 5u);
  EXPECT_EQ(out.turns, 4);  // The retry is the same turn.
  const std::vector<std::string> results = ResultsOf(provider_.requests.back());
  ASSERT_EQ(results.size(), 3u);
  EXPECT_THAT(results[0], HasSubstr("folded"));
  EXPECT_THAT(results[1], HasSubstr("folded"));
  EXPECT_EQ(results[2].size(), 8'000u);
}

TEST_F(ContextTest, TooLongAgainEndsWithContextWindow) {
  BigRunner runner(8'000);
  ToolTurns(3);
  TooLong(provider_);
  provider_.Reply("", StopReason::kContextWindow);  // model_context_window_exceeded
  provider_.Reply("never sent", StopReason::kEndTurn);
  LoopOutcome out = Run(runner);
  EXPECT_STREQ(LoopStopName(out.stop), "context_window");
  EXPECT_EQ(provider_.requests.size(), 5u);
}

TEST_F(ContextTest, TooLongStopReasonIsRetriedToo) {
  BigRunner runner(8'000);
  ToolTurns(2);
  provider_.Reply("", StopReason::kContextWindow);
  provider_.Reply("done", StopReason::kEndTurn);
  LoopOutcome out = Run(runner);
  EXPECT_STREQ(LoopStopName(out.stop), "completed");
  EXPECT_EQ(out.final_text, "done");
  EXPECT_THAT(ResultsOf(provider_.requests.back())[0], HasSubstr("folded"));
}

// The budget is never passed: before a turn that, with a summary after it, would not fit, the
// loop asks for the summary without tools and stops with `budget`.
TEST_F(ContextTest, TaskBudgetWindsUpWithASummary) {
  options_.max_total_tokens = 3'000;
  options_.max_tokens = 100;
  BigRunner runner(8);
  for (int i = 0; i < 6; ++i) {
    provider_.Reply("", StopReason::kToolUse,
                    {ToolUseBlock{"t" + std::to_string(i), "bash", {{"command", "ls"}}}},
                    {500, 100});
  }
  provider_.script[3] = provider_.script[5];
  provider_.script[3].response.message.content = {TextBlock{"summary so far"}};
  provider_.script[3].response.stop_reason = StopReason::kEndTurn;
  LoopOutcome out = Run(runner);
  EXPECT_STREQ(LoopStopName(out.stop), "budget");
  EXPECT_EQ(out.final_text, "summary so far");
  ASSERT_EQ(provider_.requests.size(), 4u);
  EXPECT_TRUE(provider_.requests[3].tools.empty());
  EXPECT_FALSE(provider_.requests[2].tools.empty());
  EXPECT_EQ(provider_.requests[3].max_tokens, 100);
  EXPECT_LE(out.usage.input_tokens + out.usage.output_tokens, options_.max_total_tokens);
}

TEST_F(ContextTest, NoBudgetNoWindUp) {  // Control of the test above.
  BigRunner runner(8);
  ToolTurns(5);
  provider_.Reply("done", StopReason::kEndTurn);
  LoopOutcome out = Run(runner);
  EXPECT_STREQ(LoopStopName(out.stop), "completed");
  EXPECT_EQ(provider_.requests.size(), 6u);
}

// --max-tokens-total: the loop spends on the shared budget and winds up from what is left of it.
TEST_F(ContextTest, SharedBudgetIsSpentAndWindsUp) {
  options_.shared_budget = std::make_shared<TokenBudget>(10'000);
  options_.max_tokens = 100;
  const int64_t reserved = options_.shared_budget->Reserve(7'700);  // Held by running tasks.
  EXPECT_EQ(reserved, 7'700);
  BigRunner runner(8);
  for (int i = 0; i < 3; ++i) {
    provider_.Reply("", StopReason::kToolUse,
                    {ToolUseBlock{"t" + std::to_string(i), "bash", {{"command", "ls"}}}},
                    {500, 100});
  }
  provider_.script[2].response.message.content = {TextBlock{"from what I have"}};
  provider_.script[2].response.stop_reason = StopReason::kEndTurn;
  LoopOutcome out = Run(runner);
  EXPECT_STREQ(LoopStopName(out.stop), "budget");
  EXPECT_EQ(out.final_text, "from what I have");
  ASSERT_EQ(provider_.requests.size(), 3u);
  EXPECT_TRUE(provider_.requests[2].tools.empty());
  EXPECT_EQ(options_.shared_budget->Remaining(), 2'300 - 3 * 600);
  options_.shared_budget->Release(reserved, 1'000);
  EXPECT_EQ(options_.shared_budget->Remaining(), 10'000 - 1'800 - 1'000);
  EXPECT_EQ(options_.shared_budget->Reserve(1'000'000), 10'000 - 2'800);  // Never more than left.
  EXPECT_EQ(options_.shared_budget->Reserve(5), 1);                       // Never 0 ("unlimited").
}

}  // namespace
}  // namespace forkbox::agent
