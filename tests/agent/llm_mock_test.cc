// Both providers end to end over the HTTP client against the mock model server (tests/mock/),
// streaming and not: round trips, every stop reason, every fault with its retry count, usage,
// redaction.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "agent/http_client.h"
#include "agent/loop.h"
#include "agent/provider.h"
#include "base/utf8.h"
#include "ipc/messages.h"
#include "tests/mock/mock_server.h"

namespace forkbox::agent {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using testing::HasSubstr;
using testing::Not;

constexpr char kKey[] = "sk-test-SECRET-0123456789abcdef";

struct Param {
  const char* provider;
  bool stream;
};

std::string ParamName(const testing::TestParamInfo<Param>& info) {
  return std::string(info.param.provider) + (info.param.stream ? "Stream" : "NoStream");
}

class LlmMockTest : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override { server_.Start(); }

  bool anthropic() const { return std::string(GetParam().provider) == "anthropic"; }

  // A provider against the mock; waits are recorded instead of slept.
  std::unique_ptr<Provider> Make(const json& scenario, int max_retries = 2, bool verbose = false,
                                 int64_t idle_ms = 30'000) {
    server_.SetScenario(mock::Scenario::FromJson(scenario));
    ProviderConfig config;
    config.name = GetParam().provider;
    config.api_key = kKey;
    config.base_url = anthropic() ? server_.anthropic_base_url() : server_.openai_base_url();
    config.model = "test-model";
    config.stream = GetParam().stream;
    config.max_retries = max_retries;
    config.verbose = verbose;
    config.idle_timeout_ms = idle_ms;
    ProviderHooks hooks;
    hooks.sleep = [this](milliseconds d) { sleeps_.push_back(d); };
    hooks.jitter = [] { return 1.0; };
    hooks.log = [this](std::string_view line) { log_ += std::string(line) + "\n"; };
    hooks.cancelled = cancelled_;
    Result<std::unique_ptr<Provider>> provider = MakeProvider(config, hooks);
    EXPECT_TRUE(provider.ok()) << provider.status().ToString();
    return provider.ok() ? std::move(*provider) : nullptr;
  }

  static json Reply(json reply) { return json{{"rules", json::array({{{"reply", reply}}})}}; }
  static json FaultThenText(json fault, int times) {
    return json{{"rules", json::array({{{"times", times}, {"fault", fault}},
                                       {{"reply", {{"text", "recovered"}}}}})}};
  }
  static json AlwaysFault(json fault) { return json{{"rules", json::array({{{"fault", fault}}})}}; }

  static Request Ask(const std::string& text) {
    Request r;
    r.system = "You are a test.";
    r.tools.push_back(ToolDef{"bash",
                              "Run a command",
                              {{"type", "object"},
                               {"properties", {{"command", {{"type", "string"}}}}},
                               {"required", {"command"}}}});
    r.messages.push_back(Message{Role::kUser, {TextBlock{text}}});
    return r;
  }

  CallResult Call(Provider& p, const Request& r) {
    streamed_.clear();
    return p.Complete(r, [this](std::string_view t) { streamed_ += t; });
  }

  mock::MockServer server_;
  CancelCheck cancelled_;  // Set before Make().
  std::vector<milliseconds> sleeps_;
  std::string log_;
  std::string streamed_;
};

TEST_P(LlmMockTest, TextRoundTripWithHeadersAndStreaming) {
  auto p = Make(Reply({{"text", "Hello from the mock \xC3\xA9"}}));
  const CallResult r = Call(*p, Ask("hi"));
  ASSERT_TRUE(r.ok()) << r.error->ToString();
  EXPECT_EQ(TextOf(r.response.message), "Hello from the mock \xC3\xA9");
  EXPECT_EQ(r.response.stop_reason, StopReason::kEndTurn);
  EXPECT_FALSE(r.response.request_id.empty());
  // Streaming hands the text to the sink as it arrives; the non-streaming path does not.
  EXPECT_EQ(streamed_, GetParam().stream ? "Hello from the mock \xC3\xA9" : "");
  ASSERT_EQ(server_.request_count(), 1u);
  const mock::RecordedRequest req = server_.request(0);
  EXPECT_FALSE(req.rejected.has_value()) << req.rejected->message;
  EXPECT_EQ(req.json.value("stream", false), GetParam().stream);
  if (anthropic()) {
    EXPECT_EQ(req.path, "/v1/messages");
    EXPECT_EQ(req.Header("x-api-key"), kKey);
    EXPECT_EQ(req.Header("anthropic-version"), "2023-06-01");
    EXPECT_EQ(req.json["system"][0]["cache_control"]["type"], "ephemeral");
    EXPECT_EQ(req.json["tools"].back()["cache_control"]["type"], "ephemeral");
  } else {
    EXPECT_EQ(req.path, "/v1/chat/completions");
    EXPECT_EQ(req.Header("authorization"), std::string("Bearer ") + kKey);
    EXPECT_EQ(req.json["messages"][0]["role"], "system");
    if (GetParam().stream) {
      EXPECT_EQ(req.json["stream_options"]["include_usage"], true);
    }
  }
}

TEST_P(LlmMockTest, ToolUseRoundTripOverOneConnection) {
  auto p = Make(json{
      {"rules", json::array({
                    {{"when", {{"turn", 0}}},
                     {"reply",
                      {{"text", "Let me look."},
                       {"tool_calls", {{{"name", "bash"}, {"input", {{"command", "ls -la"}}}}}}}}},
                    {{"when", {{"turn", 1}, {"last_user_contains", "file-a"}}},
                     {"reply", {{"text", "There is file-a."}}}},
                })}});
  Request req = Ask("list files");
  CallResult first = Call(*p, req);
  ASSERT_TRUE(first.ok()) << first.error->ToString();
  EXPECT_EQ(first.response.stop_reason, StopReason::kToolUse);
  const auto uses = ToolUsesOf(first.response.message);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].name, "bash");
  EXPECT_EQ(uses[0].input, json({{"command", "ls -la"}}));
  EXPECT_FALSE(uses[0].id.empty());

  req.messages.push_back(first.response.message);
  req.messages.push_back(
      Message{Role::kUser, {ToolResultBlock{uses[0].id, "file-a\nfile-b", false}}});
  const CallResult second = Call(*p, req);
  ASSERT_TRUE(second.ok()) << second.error->ToString();
  EXPECT_EQ(TextOf(second.response.message), "There is file-a.");
  ASSERT_EQ(server_.request_count(), 2u);
  const json body = server_.request(1).json;
  EXPECT_FALSE(server_.request(1).rejected.has_value());
  const std::string dumped = body.dump();
  EXPECT_THAT(dumped, HasSubstr(uses[0].id));  // The result names the call it answers.
  EXPECT_THAT(dumped, HasSubstr("file-a\\nfile-b"));
}

TEST_P(LlmMockTest, MultiToolResponseKeepsOrderAndIds) {
  auto p = Make(Reply({{"tool_calls",
                        {{{"name", "bash"}, {"input", {{"command", "a"}}}, {"id", "id_one"}},
                         {{"name", "read_file"}, {"input", {{"path", "b.txt"}}}, {"id", "id_two"}},
                         {{"name", "bash"}, {"input", {{"command", "c"}}}, {"id", "id_three"}}}}}));
  const CallResult r = Call(*p, Ask("do three things"));
  ASSERT_TRUE(r.ok()) << r.error->ToString();
  const auto uses = ToolUsesOf(r.response.message);
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].id, "id_one");
  EXPECT_EQ(uses[1].id, "id_two");
  EXPECT_EQ(uses[1].input["path"], "b.txt");
  EXPECT_EQ(uses[2].input["command"], "c");
  EXPECT_EQ(r.response.stop_reason, StopReason::kToolUse);
}

TEST_P(LlmMockTest, EveryStopReason) {
  // Canonical mock reason -> what each format can express.
  const std::vector<std::tuple<std::string, StopReason, StopReason>> cases = {
      {"end_turn", StopReason::kEndTurn, StopReason::kEndTurn},
      {"max_tokens", StopReason::kMaxTokens, StopReason::kMaxTokens},
      {"stop_sequence", StopReason::kStopSequence, StopReason::kEndTurn},
      {"pause_turn", StopReason::kPauseTurn, StopReason::kEndTurn},
      {"refusal", StopReason::kRefusal, StopReason::kRefusal},
      {"context_window", StopReason::kContextWindow, StopReason::kMaxTokens},
  };
  for (const auto& [canonical, want_anthropic, want_openai] : cases) {
    json reply = {{"text", "partial answer"}, {"stop_reason", canonical}};
    if (canonical == "stop_sequence") reply["stop_sequence"] = "###";
    auto p = Make(Reply(reply));
    const CallResult r = Call(*p, Ask("go"));
    ASSERT_TRUE(r.ok()) << canonical << ": " << r.error->ToString();
    EXPECT_EQ(r.response.stop_reason, anthropic() ? want_anthropic : want_openai) << canonical;
    EXPECT_EQ(TextOf(r.response.message), "partial answer");
  }
}

TEST_P(LlmMockTest, UsageAccounting) {
  auto p = Make(Reply({{"text", "counted"},
                       {"usage",
                        {{"input_tokens", 1234},
                         {"output_tokens", 56},
                         {"cache_read_input_tokens", 700},
                         {"cache_creation_input_tokens", anthropic() ? 30 : 0}}}}));
  const CallResult r = Call(*p, Ask("count"));
  ASSERT_TRUE(r.ok()) << r.error->ToString();
  EXPECT_EQ(r.response.usage.output_tokens, 56);
  EXPECT_EQ(r.response.usage.cache_read_input_tokens, 700);
  if (anthropic()) {
    EXPECT_EQ(r.response.usage.input_tokens, 1234);
    EXPECT_EQ(r.response.usage.cache_creation_input_tokens, 30);
  } else {
    EXPECT_EQ(r.response.usage.input_tokens, 1234);  // prompt_tokens minus the cached share.
  }
}

TEST_P(LlmMockTest, RetryAfterMsIsHonouredThenSucceeds) {
  auto p = Make(FaultThenText({{"kind", "status"}, {"status", 529}, {"retry_after_ms", "7"}}, 2));
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_TRUE(r.ok()) << r.error->ToString();
  EXPECT_EQ(TextOf(r.response.message), "recovered");
  EXPECT_EQ(server_.request_count(), 3u);
  EXPECT_THAT(sleeps_, testing::ElementsAre(milliseconds(7), milliseconds(7)));
}

TEST_P(LlmMockTest, RetryAfterSecondsOn429) {
  auto p = Make(FaultThenText({{"kind", "status"}, {"status", 429}, {"retry_after", "3"}}, 1));
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_TRUE(r.ok()) << r.error->ToString();
  EXPECT_EQ(server_.request_count(), 2u);
  EXPECT_THAT(sleeps_, testing::ElementsAre(milliseconds(3000)));
}

// The HTTP client parses an HTTP-date Retry-After relative to the clock.
TEST_P(LlmMockTest, RetryAfterHttpDateOn503) {
  char date[64];
  const time_t at = ::time(nullptr) + 5;
  struct tm tm {};
  ::gmtime_r(&at, &tm);
  ASSERT_GT(::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm), 0u);
  auto p = Make(FaultThenText({{"kind", "status"}, {"status", 503}, {"retry_after", date}}, 1));
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_TRUE(r.ok()) << r.error->ToString();
  ASSERT_EQ(sleeps_.size(), 1u);
  EXPECT_GE(sleeps_[0], milliseconds(3000));
  EXPECT_LE(sleeps_[0], milliseconds(5000));
}

TEST_P(LlmMockTest, ExhaustedRetriesOn500UseBackoffAndReportTheLastError) {
  auto p = Make(AlwaysFault({{"kind", "status"}, {"status", 500}}), /*max_retries=*/3);
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(server_.request_count(), 4u);
  EXPECT_THAT(sleeps_,
              testing::ElementsAre(milliseconds(500), milliseconds(1000), milliseconds(2000)));
  EXPECT_EQ(r.error->kind, ModelError::Kind::kHttp);
  EXPECT_EQ(r.error->http_status, 500);
  EXPECT_EQ(r.error->attempts, 4);
  EXPECT_FALSE(r.error->request_id.empty());
  EXPECT_THAT(r.error->ToString(), HasSubstr("after 4 attempts"));
}

TEST_P(LlmMockTest, ClientErrorsAreNotRetriedAndNameTheRequestId) {
  for (int status : {400, 401, 403, 404}) {
    sleeps_.clear();
    auto p = Make(AlwaysFault(
        {{"kind", "status"}, {"status", status}, {"message", "nope " + std::to_string(status)}}));
    server_.ClearRequests();
    const CallResult r = Call(*p, Ask("x"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(server_.request_count(), 1u) << status;
    EXPECT_TRUE(sleeps_.empty());
    EXPECT_EQ(r.error->http_status, status);
    EXPECT_EQ(r.error->attempts, 1);
    EXPECT_EQ(r.error->message, "nope " + std::to_string(status));
    EXPECT_FALSE(r.error->error_type.empty());
    EXPECT_FALSE(r.error->request_id.empty());
    const std::string text = r.error->ToString();
    EXPECT_THAT(text, HasSubstr("HTTP " + std::to_string(status)));
    EXPECT_THAT(text, HasSubstr("request_id " + r.error->request_id));
    EXPECT_THAT(text, HasSubstr("after 1 attempt"));
  }
}

// A misbehaving endpoint's big error body (under the read cap, kMaxErrorBodyBytes) ends in one
// bounded error: the message cut at a character boundary to the cap of a child's error frame,
// with a note; the type cut shorter.
TEST_P(LlmMockTest, AHugeErrorBodyIsCutToOneBoundedMessage) {
  std::string message = "xy";  // 2 + 3n: the cap falls inside a character.
  for (int i = 0; i < 300'000; ++i) message += "\xE2\x82\xAC";  // U+20AC.
  auto p = Make(AlwaysFault({{"kind", "status"},
                             {"status", 400},
                             {"error_type", std::string(100'000, 't')},
                             {"message", message}}));
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  const std::string& got = r.error->message;
  const size_t note = got.find("\n[... error message truncated: ");
  ASSERT_NE(note, std::string::npos) << got.substr(0, 200);
  EXPECT_LE(note, ipc::kMaxErrorMessageBytes);
  EXPECT_EQ(message.compare(0, note, got, 0, note), 0);
  EXPECT_TRUE(IsValidUtf8(got));
  EXPECT_LT(got.size(), ipc::kMaxErrorMessageBytes + 100);
  EXPECT_LT(r.error->error_type.size(), 200u);
  EXPECT_LT(r.error->ToString().size(), ipc::kMaxErrorMessageBytes + 400);
}

// An error body past the read cap is cut there, and the error says so (it is no longer JSON:
// its first bytes are the excerpt). Before, up to 256 MiB was read and copied, without a word.
TEST_P(LlmMockTest, AnErrorBodyPastTheReadCapSaysItWasCut) {
  auto p = Make(AlwaysFault({{"kind", "status"},
                             {"status", 400},
                             {"message", std::string(2 * kMaxErrorBodyBytes, 'm')}}));
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->http_status, 400);
  EXPECT_THAT(r.error->message, HasSubstr("non-JSON error body: {"));
  EXPECT_THAT(r.error->message,
              HasSubstr("(the error body was cut at 1 MiB; the rest was not read)"));
  EXPECT_LT(r.error->message.size(), 1000u);
}

// Against the mock's request validation (roles must alternate, as the API requires): two paused
// replies in a row, then the end of the turn. The loop sends the paused content back as one
// assistant message, so every request is accepted.
TEST_P(LlmMockTest, TwoPausedTurnsInARowAreContinuedByTheLoop) {
  if (!anthropic()) GTEST_SKIP() << "pause_turn is Anthropic's";
  auto p = Make(
      {{"rules",
        json::array({{{"times", 2}, {"reply", {{"text", "paused"}, {"stop_reason", "pause_turn"}}}},
                     {{"reply", {{"text", "done"}}}}})}});
  struct NoTools : ToolRunner {
    std::vector<ToolResultBlock> Run(const std::vector<ToolUseBlock>&, int) override { return {}; }
  } runner;
  std::vector<Message> messages = Ask("x").messages;
  LoopOptions options;
  const LoopOutcome out = RunLoop(*p, messages, options, runner, LoopObserver{});
  ASSERT_FALSE(out.error) << out.error->ToString();
  EXPECT_EQ(out.final_text, "done");
  const std::vector<mock::RecordedRequest> requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const mock::RecordedRequest& r : requests) EXPECT_EQ(r.status, 200) << r.outcome;
  const json& sent = requests[2].json["messages"];
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1]["role"], "assistant");
  EXPECT_EQ(sent[1]["content"].size(), 2u);
}

TEST_P(LlmMockTest, ShouldRetryHeaderWins) {
  auto p = Make(AlwaysFault({{"kind", "status"}, {"status", 503}, {"should_retry", "false"}}));
  CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(server_.request_count(), 1u);
  server_.ClearRequests();
  p = Make(FaultThenText(
      {{"kind", "status"}, {"status", 400}, {"should_retry", "true"}, {"retry_after_ms", "1"}}, 1));
  r = Call(*p, Ask("x"));
  ASSERT_TRUE(r.ok()) << r.error->ToString();
  EXPECT_EQ(server_.request_count(), 2u);
}

TEST_P(LlmMockTest, PromptTooLongIsAContextOverflow) {
  auto p = Make(AlwaysFault(
      {{"kind", "status"},
       {"status", 400},
       {"message", anthropic() ? "prompt is too long: 210000 tokens > 200000 maximum"
                               : "This model's maximum context length is 128000 tokens."}}));
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, ModelError::Kind::kContextOverflow);
  EXPECT_EQ(server_.request_count(), 1u);
  EXPECT_THAT(r.error->ToString(), HasSubstr("context window exceeded"));
}

TEST_P(LlmMockTest, HtmlErrorPageGivesStatusAndExcerpt) {
  auto p = Make(AlwaysFault({{"kind", "html"}, {"status", 502}}), /*max_retries=*/1);
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(server_.request_count(), 2u);  // 502 is retried.
  EXPECT_EQ(r.error->http_status, 502);
  EXPECT_THAT(r.error->message, HasSubstr("non-JSON error page"));
  EXPECT_THAT(r.error->message, Not(HasSubstr("<")));
  EXPECT_LT(r.error->message.size(), 300u);
}

// A 200 that is no reply (a captive portal's or a proxy's page, a body gzipped unasked) says what
// it was instead of only "stream ended before message_start". Control: the same page with an
// error status is an HTTP error, with no such note.
TEST_P(LlmMockTest, ASuccessThatIsNoReplyNamesWhatCameInstead) {
  const std::string expected = GetParam().stream ? "text/event-stream" : "application/json";
  auto p = Make(AlwaysFault({{"kind", "html"}, {"status", 200}}), /*max_retries=*/0);
  CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, ModelError::Kind::kMalformed);
  EXPECT_THAT(r.error->message,
              HasSubstr("(the reply has content-type \"text/html\", not " + expected + ")"));
  p = Make(AlwaysFault({{"kind", "html"}, {"status", 200}, {"content_encoding", "gzip"}}), 0);
  r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error->message,
              HasSubstr("content-encoding \"gzip\", which forkbox did not ask for; content-type"));
  p = Make(AlwaysFault({{"kind", "html"}, {"status", 502}, {"content_encoding", "gzip"}}), 0);
  r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->http_status, 502);
  EXPECT_THAT(r.error->message, Not(HasSubstr("the reply has")));
}

// Transient failures of a 200 reply: each is retried once, then the reply comes through.
TEST_P(LlmMockTest, TransientFaultsAreRetried) {
  for (const char* kind :
       {"cut_stream", "no_stop", "malformed_json", "drop_connection", "stream_error"}) {
    sleeps_.clear();
    auto p = Make(json{
        {"rules",
         json::array(
             {{{"times", 1},
               {"reply",
                {{"tool_calls", {{{"name", "bash"}, {"input", {{"command", "rm -rf /tmp/x"}}}}}}}},
               {"fault", {{"kind", kind}}}},
              {{"reply", {{"text", "recovered"}}}}})}});
    server_.ClearRequests();
    const CallResult r = Call(*p, Ask("x"));
    ASSERT_TRUE(r.ok()) << kind << ": " << r.error->ToString();
    EXPECT_EQ(TextOf(r.response.message), "recovered") << kind;
    EXPECT_TRUE(ToolUsesOf(r.response.message).empty()) << kind;  // The partial call is gone.
    EXPECT_EQ(server_.request_count(), 2u) << kind;
    EXPECT_EQ(sleeps_.size(), 1u) << kind;
  }
}

TEST_P(LlmMockTest, PersistentTransientFaultEndsInAClearError) {
  for (const char* kind :
       {"cut_stream", "no_stop", "malformed_json", "drop_connection", "stream_error"}) {
    auto p = Make(AlwaysFault({{"kind", kind}}), /*max_retries=*/2);
    server_.ClearRequests();
    const CallResult r = Call(*p, Ask("x"));
    ASSERT_FALSE(r.ok()) << kind;
    EXPECT_EQ(server_.request_count(), 3u) << kind;
    EXPECT_EQ(r.error->attempts, 3) << kind;
    EXPECT_THAT(r.error->ToString(), HasSubstr("after 3 attempts")) << kind;
    EXPECT_FALSE(r.error->message.empty()) << kind;
  }
}

TEST_P(LlmMockTest, IdleTimeoutStopsASilentStream) {
  auto p = Make(AlwaysFault({{"kind", "slow_stream"}, {"event_delay_ms", 5000}}), /*max_retries=*/0,
                /*verbose=*/false, /*idle_ms=*/200);
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, ModelError::Kind::kTransport);
  EXPECT_THAT(r.error->message, HasSubstr("idle timeout"));
}

TEST_P(LlmMockTest, CancelledBeforeTheCallSendsNothing) {
  cancelled_ = [] { return true; };
  auto p = Make(Reply({{"text", "never"}}));
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, ModelError::Kind::kCancelled);
  EXPECT_EQ(r.error->attempts, 0);
  EXPECT_THAT(r.error->ToString(), HasSubstr("cancelled: stopped by the user"));
  EXPECT_EQ(server_.request_count(), 0u);
}

TEST_P(LlmMockTest, CancelStopsAReplyInFlight) {
  // The reply trickles (one event per 20 s); the stop comes once the request has arrived.
  cancelled_ = [this] { return server_.request_count() > 0; };
  auto p = Make(AlwaysFault({{"kind", "slow_stream"}, {"event_delay_ms", 20000}}));
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, ModelError::Kind::kCancelled) << r.error->ToString();
  EXPECT_EQ(r.error->attempts, 1);
  EXPECT_EQ(server_.request_count(), 1u);  // Not retried.
}

TEST_P(LlmMockTest, CancelBetweenRetriesStopsRetrying) {
  cancelled_ = [this] { return server_.request_count() > 0; };
  auto p = Make(AlwaysFault({{"kind", "status"}, {"status", 503}}), /*max_retries=*/3);
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, ModelError::Kind::kCancelled) << r.error->ToString();
  EXPECT_EQ(server_.request_count(), 1u);
}

TEST_P(LlmMockTest, KeyIsRedactedInVerboseLogsAndErrors) {
  auto p = Make(AlwaysFault({{"kind", "status"},
                             {"status", 401},
                             {"message", std::string("Incorrect API key provided: ") + kKey}}),
                2, /*verbose=*/true);
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(log_, HasSubstr("POST"));
  EXPECT_THAT(log_, HasSubstr("[REDACTED]"));
  EXPECT_THAT(log_, Not(HasSubstr(kKey)));
  EXPECT_THAT(log_, Not(HasSubstr("SECRET")));
  EXPECT_THAT(r.error->ToString(), Not(HasSubstr(kKey)));
  EXPECT_THAT(r.error->ToString(), HasSubstr("Incorrect API key provided: [REDACTED]"));
}

// A server that echoes the key in its request id (a header forkbox prints in errors and in
// --verbose lines) gets it redacted there too; before, only the message and type were.
TEST_P(LlmMockTest, KeyIsRedactedInTheRequestId) {
  auto p =
      Make(AlwaysFault(
               {{"kind", "status"}, {"status", 401}, {"request_id", std::string("req_") + kKey}}),
           0, /*verbose=*/true);
  const CallResult r = Call(*p, Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(log_, HasSubstr("request_id req_[REDACTED]"));
  EXPECT_THAT(log_, Not(HasSubstr(kKey)));
  EXPECT_EQ(r.error->request_id, "req_[REDACTED]");
  EXPECT_THAT(r.error->ToString(), Not(HasSubstr(kKey)));
}

TEST_P(LlmMockTest, OneKeepAliveConnectionAcrossCalls) {
  auto p = Make(Reply({{"text", "again"}}), 2, /*verbose=*/true);
  ASSERT_TRUE(Call(*p, Ask("one")).ok());
  EXPECT_THAT(log_, HasSubstr("new connection"));
  log_.clear();
  ASSERT_TRUE(Call(*p, Ask("two")).ok());
  EXPECT_THAT(log_, HasSubstr("reused connection"));
  EXPECT_THAT(log_, Not(HasSubstr("new connection")));
}

TEST_P(LlmMockTest, InvalidUtf8ToolOutputArrivesAsValidJson) {
  auto p = Make(Reply({{"text", "ok"}}));
  Request req = Ask("run it");
  req.messages.push_back(
      Message{Role::kAssistant, {ToolUseBlock{"t1", "bash", {{"command", "cat bin"}}}}});
  req.messages.push_back(
      Message{Role::kUser, {ToolResultBlock{"t1", "bytes: \xFF\xFE end", false}}});
  const CallResult r = Call(*p, req);
  ASSERT_TRUE(r.ok()) << r.error->ToString();
  const mock::RecordedRequest rec = server_.request(0);
  ASSERT_FALSE(rec.json.is_null());
  EXPECT_THAT(rec.body, HasSubstr("bytes: \xEF\xBF\xBD\xEF\xBF\xBD end"));
}

INSTANTIATE_TEST_SUITE_P(Providers, LlmMockTest,
                         testing::Values(Param{"anthropic", true}, Param{"anthropic", false},
                                         Param{"openai", true}, Param{"openai", false}),
                         ParamName);

TEST(LlmTransport, ConnectionRefusedIsRetriedThenReported) {
  // A port that was bound and released without listen(): connecting is refused at once.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string base = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  ProviderConfig config;
  config.name = "anthropic";
  config.api_key = kKey;
  config.base_url = base;
  config.max_retries = 2;
  std::vector<milliseconds> sleeps;
  ProviderHooks hooks;
  hooks.sleep = [&](milliseconds d) { sleeps.push_back(d); };
  hooks.jitter = [] { return 0.8; };
  Result<std::unique_ptr<Provider>> made = MakeProvider(config, hooks);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Provider> p = std::move(*made);
  Request req;
  req.messages.push_back(Message{Role::kUser, {TextBlock{"hi"}}});
  const CallResult r = p->Complete(req, nullptr);
  close(fd);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, ModelError::Kind::kTransport);
  EXPECT_EQ(r.error->attempts, 3);
  EXPECT_THAT(sleeps, testing::ElementsAre(milliseconds(400), milliseconds(800)));
  EXPECT_THAT(r.error->ToString(), HasSubstr("connection error"));
  EXPECT_THAT(r.error->message, HasSubstr("(connect error)"));
}

}  // namespace
}  // namespace forkbox::agent
