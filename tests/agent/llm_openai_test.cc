// OpenAI Chat Completions: the request encoding and the reply decoders, checked against the JSON
// and stream chunks of OpenAI's documentation and the quirks of local servers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/loop.h"
#include "agent/openai.h"
#include "agent/wire.h"
#include "ipc/messages.h"

namespace forkbox::agent {
namespace {

using nlohmann::json;

ProviderConfig Config(bool stream = true, std::string base = "http://127.0.0.1:8080/v1") {
  ProviderConfig c;
  c.name = "openai";
  c.model = "gpt-4o-mini";
  c.base_url = std::move(base);
  c.max_tokens = 1024;
  c.stream = stream;
  return c;
}

Decoded DecodeStream(const std::string& body, size_t step, std::string* text = nullptr) {
  std::string streamed;
  auto decoder = NewOpenAiStreamDecoder([&](std::string_view t) { streamed += t; });
  for (size_t i = 0; i < body.size(); i += step) {
    if (!decoder->Feed(std::string_view(body).substr(i, step))) break;
  }
  if (text != nullptr) *text = streamed;
  return decoder->Finish();
}

std::string Chunks(const std::vector<std::string>& chunks, bool done = true) {
  std::string out;
  for (const std::string& c : chunks) out += "data: " + c + "\n\n";
  if (done) out += "data: [DONE]\n\n";
  return out;
}

TEST(OpenAiEncode, MatchesTheDocumentedFunctionCallingConversation) {
  Request r;
  r.system = "You are a helpful assistant.";
  r.tools.push_back(ToolDef{"get_weather", "Get current temperature for a given location.",
                            json::parse(R"({"type":"object","properties":{"location":
                              {"type":"string","description":"City and country e.g. Bogotá, Colombia"}},
                              "required":["location"],"additionalProperties":false})")});
  r.messages.push_back(
      Message{Role::kUser, {TextBlock{"What is the weather like in Paris today?"}}});
  r.messages.push_back(
      Message{Role::kAssistant,
              {ToolUseBlock{"call_12345xyz", "get_weather", {{"location", "Paris, France"}}}}});
  r.messages.push_back(Message{Role::kUser, {ToolResultBlock{"call_12345xyz", "14", false}}});
  const json body = OpenAiEncodeRequest(r, Config(/*stream=*/false));
  const json expected = json::parse(R"({
    "model": "gpt-4o-mini",
    "max_tokens": 1024,
    "messages": [
      {"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": "What is the weather like in Paris today?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_12345xyz",
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris, France\"}"}}]},
      {"role": "tool", "tool_call_id": "call_12345xyz", "content": "14"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "Get current temperature for a given location.",
      "parameters": {"type": "object", "properties": {"location": {"type": "string",
        "description": "City and country e.g. Bogotá, Colombia"}}, "required": ["location"],
        "additionalProperties": false}}}]
  })");
  EXPECT_EQ(body, expected) << body.dump(2);
}

TEST(OpenAiEncode, StreamingAsksForUsageAndOfficialApiGetsMaxCompletionTokens) {
  Request r;
  r.messages.push_back(Message{Role::kUser, {TextBlock{"hi"}}});
  json body = OpenAiEncodeRequest(r, Config(true, "https://api.openai.com/v1"));
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"], json::parse(R"({"include_usage":true})"));
  EXPECT_EQ(body["max_completion_tokens"], 1024);
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_FALSE(body.contains("tools"));  // Never an empty tools array.
  body = OpenAiEncodeRequest(r, Config(false));
  EXPECT_FALSE(body.contains("stream_options"));
  EXPECT_EQ(body["messages"].size(), 1u);  // No system message when there is no system prompt.
}

TEST(OpenAiEncode, ToolResultsPrecedeUserTextAndErrorsAreMarked) {
  Request r;
  r.messages.push_back(Message{Role::kUser, {TextBlock{"go"}}});
  r.messages.push_back(Message{Role::kAssistant,
                               {TextBlock{"Running both."}, ToolUseBlock{"a", "bash", {}},
                                ToolUseBlock{"b", "read_file", {{"path", "x"}}}}});
  r.messages.push_back(Message{Role::kUser,
                               {ToolResultBlock{"a", "ok", false},
                                ToolResultBlock{"b", "no such file", true}, TextBlock{"more"}}});
  r.messages.push_back(Message{Role::kAssistant, {TextBlock{""}}});  // Nothing to send: dropped.
  const json body = OpenAiEncodeRequest(r, Config());
  const json& m = body["messages"];
  ASSERT_EQ(m.size(), 5u) << body.dump(2);
  EXPECT_EQ(m[1]["content"], "Running both.");
  EXPECT_EQ(m[1]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_EQ(m[2], json::parse(R"({"role":"tool","tool_call_id":"a","content":"ok"})"));
  EXPECT_EQ(m[3]["tool_call_id"], "b");
  EXPECT_EQ(m[3]["content"], "Error: no such file");
  EXPECT_EQ(m[4], json::parse(R"({"role":"user","content":"more"})"));
}

TEST(OpenAiDecode, DocumentedToolCallReply) {
  const Decoded d = OpenAiDecodeBody(R"({
    "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1699896916,
    "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
      "tool_calls": [{"id": "call_abc123", "type": "function", "function": {
        "name": "get_current_weather", "arguments": "{\n\"location\": \"Boston, MA\"\n}"}}]},
      "logprobs": null, "finish_reason": "tool_calls"}],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
              "prompt_tokens_details": {"cached_tokens": 2}}
  })");
  ASSERT_TRUE(d.result.ok()) << d.result.error->message;
  const Response& r = d.result.response;
  EXPECT_EQ(r.stop_reason, StopReason::kToolUse);
  EXPECT_EQ(r.raw_stop_reason, "tool_calls");
  const auto uses = ToolUsesOf(r.message);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].id, "call_abc123");
  EXPECT_EQ(uses[0].name, "get_current_weather");
  EXPECT_EQ(uses[0].input, json::parse(R"({"location": "Boston, MA"})"));
  EXPECT_TRUE(TextOf(r.message).empty());
  EXPECT_EQ(r.usage.input_tokens, 80);
  EXPECT_EQ(r.usage.cache_read_input_tokens, 2);
  EXPECT_EQ(r.usage.output_tokens, 17);
  // The reply's own names, which stream-json's assistant message carries.
  EXPECT_EQ(r.id, "chatcmpl-abc123");
  EXPECT_EQ(r.model, "gpt-4o-mini");
}

TEST(OpenAiDecode, LocalServerQuirks) {
  // llama.cpp --tool-args-object: arguments as an object; no id; no usage; Ollama's "stop".
  const Decoded d = OpenAiDecodeBody(R"({"choices":[{"message":{"role":"assistant","content":"",
    "tool_calls":[{"type":"function","function":{"name":"bash","arguments":{"command":"ls"}}},
                  {"id":"","function":{"name":"read_file","arguments":""}}]},
    "finish_reason":"stop"}]})");
  ASSERT_TRUE(d.result.ok()) << d.result.error->message;
  const auto uses = ToolUsesOf(d.result.response.message);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].input, json::parse(R"({"command":"ls"})"));
  EXPECT_THAT(uses[0].id, testing::StartsWith("call_"));
  EXPECT_NE(uses[0].id, uses[1].id);
  EXPECT_EQ(uses[1].input, json::object());
  EXPECT_EQ(d.result.response.stop_reason, StopReason::kToolUse);
  EXPECT_EQ(d.result.response.usage.input_tokens, 0);
  EXPECT_EQ(d.result.response.id, "") << "none given: none made up";
  EXPECT_EQ(d.result.response.model, "");
}

TEST(OpenAiDecode, EveryFinishReasonAndRefusal) {
  const std::pair<const char*, StopReason> cases[] = {{"stop", StopReason::kEndTurn},
                                                      {"tool_calls", StopReason::kToolUse},
                                                      {"length", StopReason::kMaxTokens},
                                                      {"content_filter", StopReason::kRefusal},
                                                      {"weird", StopReason::kUnknown}};
  for (const auto& [raw, reason] : cases) {
    const json body = {
        {"choices", json::array({{{"message", {{"content", "x"}}}, {"finish_reason", raw}}})}};
    const Decoded d = OpenAiDecodeBody(body.dump());
    ASSERT_TRUE(d.result.ok()) << raw;
    EXPECT_EQ(d.result.response.stop_reason, reason) << raw;
  }
  const Decoded refusal = OpenAiDecodeBody(
      R"({"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]})");
  ASSERT_TRUE(refusal.result.ok());
  EXPECT_EQ(refusal.result.response.stop_reason, StopReason::kRefusal);
  EXPECT_EQ(TextOf(refusal.result.response.message), "I can't help with that.");
}

TEST(OpenAiDecode, ErrorsAndGarbage) {
  Decoded d = OpenAiDecodeBody(
      R"({"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}})");
  ASSERT_FALSE(d.result.ok());
  EXPECT_EQ(d.result.error->error_type, "server_error");
  EXPECT_TRUE(d.retryable);
  d = OpenAiDecodeBody(
      R"({"error":{"code":400,"message":"bad grammar","type":"invalid_request_error"}})");
  ASSERT_FALSE(d.result.ok());
  EXPECT_FALSE(d.retryable);
  for (const char* bad :
       {"", "nope", "[]", R"({"choices":[]})", R"({"choices":[{"message":{"content":"x"}}]})",
        R"({"choices":[{"message":"x","finish_reason":"stop"}]})"}) {
    d = OpenAiDecodeBody(bad);
    ASSERT_FALSE(d.result.ok()) << bad;
    EXPECT_EQ(d.result.error->kind, ModelError::Kind::kMalformed) << bad;
  }
}

// Bad arguments are the model's mistake, not a broken reply: the call comes back marked (the
// loop answers it with the problem) and the request is never re-sent.
TEST(OpenAiDecode, BadToolArgumentsAreMarkedNotRetried) {
  for (
      const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
          {R"({"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{\"command\": \"ls"}}]},"finish_reason":"tool_calls"}]})",
           "not valid JSON"},
          {R"({"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"[1]"}}]},"finish_reason":"tool_calls"}]})",
           "not a JSON object"},
          {R"({"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":5}}]},"finish_reason":"tool_calls"}]})",
           "not a JSON object"}}) {
    Decoded d = OpenAiDecodeBody(bad);
    ASSERT_TRUE(d.result.ok()) << bad;
    std::vector<ToolUseBlock> uses = ToolUsesOf(d.result.response.message);
    ASSERT_EQ(uses.size(), 1u);
    EXPECT_THAT(CheckToolCall(uses[0], {ToolDef{"f", "", json::object()}}), testing::HasSubstr(why))
        << bad;
  }
}

// Arguments nesting past kMaxModelJsonDepth are the model's mistake, marked: 100,000 nested arrays
// crashed the parent (the DOM's copy recursed). The control: 60 levels are valid arguments.
TEST(OpenAiDecode, ArgumentsNestedPastTheBoundAreRefusedNotCopied) {
  for (const int levels : {60, 100, 100'000}) {
    SCOPED_TRACE(levels);
    const std::string arguments =
        R"({"command":"true","x":)" + std::string(levels, '[') + std::string(levels, ']') + "}";
    const json call = {{"id", "c1"}, {"function", {{"name", "f"}, {"arguments", arguments}}}};
    const std::string body = R"({"choices":[{"message":{"tool_calls":[)" + call.dump() +
                             R"(]},"finish_reason":"tool_calls"}]})";
    Decoded d = OpenAiDecodeBody(body);
    ASSERT_TRUE(d.result.ok()) << d.result.error->ToString();
    std::vector<ToolUseBlock> uses = ToolUsesOf(d.result.response.message);
    ASSERT_EQ(uses.size(), 1u);
    const std::string problem = CheckToolCall(uses[0], {ToolDef{"f", "", json::object()}});
    if (levels < kMaxModelJsonDepth) {
      EXPECT_EQ(problem, "");
    } else {
      EXPECT_THAT(problem, testing::HasSubstr("are nested deeper than 64 levels"));
    }
  }
}

TEST(OpenAiDecode, DuplicateAndMissingIdsGetTheirOwn) {
  Decoded d = OpenAiDecodeBody(
      R"({"choices":[{"message":{"tool_calls":[{"id":"x","function":{"name":"f","arguments":"{}"}},{"id":"x","function":{"name":"g","arguments":"{}"}},{"function":{"name":"h","arguments":"{}"}}]},"finish_reason":"tool_calls"}]})");
  ASSERT_TRUE(d.result.ok());
  std::vector<ToolUseBlock> uses = ToolUsesOf(d.result.response.message);
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].id, "x");
  EXPECT_NE(uses[1].id, "x");
  EXPECT_FALSE(uses[2].id.empty());
  EXPECT_NE(uses[1].id, uses[2].id);
}

// OpenAI's documented streamed function call: the first fragment carries id and name, the later
// ones only argument text (id/name null), then finish_reason, the usage chunk and [DONE].
std::string DocumentedToolStream() {
  return Chunks({
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":null,"type":null,"function":{"name":null,"arguments":"{\""}}]},"finish_reason":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"location"}}]},"finish_reason":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\":\""}}]},"finish_reason":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"Paris"}}]},"finish_reason":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":", France"}}]},"finish_reason":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]},"finish_reason":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":60,"completion_tokens":17,"total_tokens":77}})",
  });
}

TEST(OpenAiStream, DocumentedToolCallStreamAtEveryChunkSize) {
  const std::string body = DocumentedToolStream();
  for (size_t step = 1; step <= 64; ++step) {
    const Decoded d = DecodeStream(body, step);
    ASSERT_TRUE(d.result.ok()) << "step " << step << ": " << d.result.error->message;
    const auto uses = ToolUsesOf(d.result.response.message);
    ASSERT_EQ(uses.size(), 1u);
    EXPECT_EQ(uses[0].id, "call_DdmO9pD3xa9XTPNJ32zg2hcA");
    EXPECT_EQ(uses[0].name, "get_weather");
    EXPECT_EQ(uses[0].input, json::parse(R"({"location":"Paris, France"})"));
    EXPECT_EQ(d.result.response.stop_reason, StopReason::kToolUse);
    EXPECT_EQ(d.result.response.usage.input_tokens, 60);
    EXPECT_EQ(d.result.response.usage.output_tokens, 17);
    EXPECT_EQ(d.result.response.id, "chatcmpl-1");
    EXPECT_EQ(d.result.response.model, "gpt-4o");
  }
}

TEST(OpenAiStream, TextStreamsToTheSinkAndParallelCallsKeepTheirIndex) {
  const std::string body = Chunks({
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]})",
      R"({"choices":[{"index":0,"delta":{"content":"lo \u00e9"}}]})",
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"bash","arguments":""}},{"index":1,"id":"b","function":{"name":"read_file","arguments":"{\"pa"}}]}}]})",
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th\":\"x\"}"}}]}}]})",
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"ls\"}"}}]}}]})",
      R"({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})",
  });
  std::string text;
  const Decoded d = DecodeStream(body, 1, &text);
  ASSERT_TRUE(d.result.ok()) << d.result.error->message;
  EXPECT_EQ(text, "Hello \xC3\xA9");
  const auto uses = ToolUsesOf(d.result.response.message);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].input["command"], "ls");
  EXPECT_EQ(uses[1].input["path"], "x");
}

TEST(OpenAiStream, OllamaStyleWholeCallsWithoutIndexOrUsage) {
  const std::string body = Chunks({
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_k3b2x9aa","function":{"name":"bash","arguments":"{\"command\":\"pwd\"}"}}]},"finish_reason":null}]})",
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_zz","function":{"name":"bash","arguments":"{\"command\":\"id\"}"}}]},"finish_reason":null}]})",
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]})",
  });
  const Decoded d = DecodeStream(body, 9);
  ASSERT_TRUE(d.result.ok()) << d.result.error->message;
  const auto uses = ToolUsesOf(d.result.response.message);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].input["command"], "pwd");
  EXPECT_EQ(uses[1].input["command"], "id");
  EXPECT_EQ(d.result.response.stop_reason, StopReason::kToolUse);
  EXPECT_EQ(d.result.response.usage.output_tokens, 0);
}

TEST(OpenAiStream, TruncationErrorsAndLengthCuts) {
  const std::string full = DocumentedToolStream();
  for (const std::string& body :
       {std::string(), full.substr(0, full.size() / 2), full.substr(0, full.find("data: [DONE]")),
        Chunks({R"({"choices":[{"index":0,"delta":{"content":"x"}}]})"})}) {
    const Decoded d = DecodeStream(body, 5);
    ASSERT_FALSE(d.result.ok()) << body;
    EXPECT_EQ(d.result.error->kind, ModelError::Kind::kMalformed);
    EXPECT_TRUE(d.retryable);
  }
  // An error chunk mid-stream.
  Decoded d = DecodeStream(
      Chunks({R"({"choices":[{"index":0,"delta":{"content":"x"}}]})",
              R"({"error":{"message":"overloaded","type":"overloaded_error","code":529}})"},
             false),
      3);
  ASSERT_FALSE(d.result.ok());
  EXPECT_TRUE(d.retryable);
  EXPECT_EQ(d.result.error->kind, ModelError::Kind::kOverloaded);
  // finish_reason length with a half-written tool call: the call is dropped, never run.
  d = DecodeStream(
      Chunks(
          {R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"bash","arguments":"{\"comm"}}]}}]})",
           R"({"choices":[{"index":0,"delta":{},"finish_reason":"length"}]})"}),
      4);
  ASSERT_TRUE(d.result.ok());
  EXPECT_EQ(d.result.response.stop_reason, StopReason::kMaxTokens);
  EXPECT_TRUE(ToolUsesOf(d.result.response.message).empty());
  // A garbage chunk.
  d = DecodeStream(Chunks({"{not json"}), 4);
  ASSERT_FALSE(d.result.ok());
  EXPECT_THAT(d.result.error->message, testing::HasSubstr("malformed stream chunk"));
}

// Usage counts outside [0, ipc::kMaxReportedCount] are clamped into it, and the reply is kept
// (2^64-1 read as -1, and a count past the bound made a child's frame fail the parent's check).
TEST(OpenAiDecode, OutOfRangeUsageIsClampedAndTheReplyKept) {
  const std::string body =
      R"({"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[)"
      R"({"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],)"
      R"("usage":{"prompt_tokens":18446744073709551615,"completion_tokens":-4,)"
      R"("total_tokens":0,"prompt_tokens_details":{"cached_tokens":5}}})";
  const Decoded d = OpenAiDecodeBody(body);
  ASSERT_TRUE(d.result.ok()) << d.result.error->ToString();
  EXPECT_EQ(TextOf(d.result.response.message), "done");
  EXPECT_EQ(d.result.response.usage.input_tokens, ipc::kMaxReportedCount - 5);
  EXPECT_EQ(d.result.response.usage.cache_read_input_tokens, 5);
  EXPECT_EQ(d.result.response.usage.output_tokens, 0);

  const std::string stream = Chunks(
      {R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"done"},"finish_reason":null}]})",
       R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})",
       R"({"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1125899906842624,"completion_tokens":-1,"total_tokens":1}})"});
  const Decoded s = DecodeStream(stream, stream.size());
  ASSERT_TRUE(s.result.ok()) << s.result.error->ToString();
  EXPECT_EQ(TextOf(s.result.response.message), "done");
  EXPECT_EQ(s.result.response.usage.input_tokens, ipc::kMaxReportedCount);
  EXPECT_EQ(s.result.response.usage.output_tokens, 0);
}

}  // namespace
}  // namespace forkbox::agent
