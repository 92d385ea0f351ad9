// Anthropic Messages: the request encoding and the reply decoders, checked against the JSON and
// the stream transcripts of Anthropic's documentation and recorded streams.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "agent/anthropic.h"
#include "agent/loop.h"
#include "agent/wire.h"
#include "base/utf8.h"
#include "ipc/messages.h"

namespace forkbox::agent {
namespace {

using nlohmann::json;

ProviderConfig Config(bool caching = true, bool stream = true) {
  ProviderConfig c;
  c.name = "anthropic";
  c.model = "claude-sonnet-4-5";
  c.max_tokens = 1024;
  c.prompt_caching = caching;
  c.stream = stream;
  return c;
}

// Feeds `body` to a fresh stream decoder in pieces of `step` bytes.
Decoded DecodeStream(const std::string& body, size_t step, std::string* text = nullptr) {
  std::string streamed;
  auto decoder = NewAnthropicStreamDecoder([&](std::string_view t) { streamed += t; });
  for (size_t i = 0; i < body.size(); i += step) {
    if (!decoder->Feed(std::string_view(body).substr(i, step))) break;
  }
  if (text != nullptr) *text = streamed;
  return decoder->Finish();
}

std::string Sse(const std::vector<std::pair<std::string, std::string>>& events) {
  std::string out;
  for (const auto& [name, data] : events) out += "event: " + name + "\ndata: " + data + "\n\n";
  return out;
}

// --thinking: the request enables it; a capped call (the wind-up summary) keeps max_tokens above
// the budget, as the API requires.
TEST(AnthropicEncode, ThinkingIsEnabledAboveItsBudget) {
  ProviderConfig c = Config();
  c.max_tokens = 8192;
  c.thinking_budget_tokens = 2048;
  Request r;
  r.messages = {Message{Role::kUser, {TextBlock{"hi"}}}};
  r.max_tokens = 8192;
  json body = AnthropicEncodeRequest(r, c);
  EXPECT_EQ(body["thinking"], json({{"type", "enabled"}, {"budget_tokens", 2048}}));
  EXPECT_EQ(body["max_tokens"], 8192);
  r.max_tokens = 1000;
  body = AnthropicEncodeRequest(r, c);
  EXPECT_EQ(body["max_tokens"], 3048);
  EXPECT_FALSE(AnthropicEncodeRequest(r, Config()).contains("thinking"));
}

TEST(AnthropicEncode, MatchesTheDocumentedToolUseConversation) {
  Request r;
  r.system = "You are a helpful assistant.";
  r.max_tokens = 4096;
  r.tools.push_back(ToolDef{"get_weather", "Get the current weather in a given location",
                            json::parse(R"({"type":"object","properties":{"location":
                              {"type":"string","description":"The city and state, e.g. San Francisco, CA"}},
                              "required":["location"]})")});
  r.messages.push_back(
      Message{Role::kUser, {TextBlock{"What's the weather like in San Francisco?"}}});
  r.messages.push_back(
      Message{Role::kAssistant,
              {TextBlock{"I'll check the current weather in San Francisco for you."},
               ToolUseBlock{"toolu_01A09q90qw90lq917835lq9",
                            "get_weather",
                            {{"location", "San Francisco, CA"}, {"unit", "celsius"}}}}});
  r.messages.push_back(Message{
      Role::kUser, {ToolResultBlock{"toolu_01A09q90qw90lq917835lq9", "15 degrees", false}}});
  const json body = AnthropicEncodeRequest(r, Config(/*caching=*/false, /*stream=*/false));
  const json expected = json::parse(R"({
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": "You are a helpful assistant.",
    "tools": [{
      "name": "get_weather",
      "description": "Get the current weather in a given location",
      "input_schema": {"type": "object", "properties": {"location": {"type": "string",
        "description": "The city and state, e.g. San Francisco, CA"}}, "required": ["location"]}
    }],
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "What's the weather like in San Francisco?"}]},
      {"role": "assistant", "content": [
        {"type": "text", "text": "I'll check the current weather in San Francisco for you."},
        {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
         "input": {"location": "San Francisco, CA", "unit": "celsius"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "15 degrees"}]}
    ]
  })");
  EXPECT_EQ(body, expected) << body.dump(2);
}

TEST(AnthropicEncode, PromptCachingMarksSystemAndLastTool) {
  Request r;
  r.system = "sys";
  r.tools = {ToolDef{"a", "first", json::object()}, ToolDef{"b", "second", json::object()}};
  r.messages.push_back(Message{Role::kUser, {TextBlock{"hi"}}});
  const json body = AnthropicEncodeRequest(r, Config());
  EXPECT_EQ(body["system"], json::parse(R"([{"type":"text","text":"sys",
                                            "cache_control":{"type":"ephemeral"}}])"));
  EXPECT_FALSE(body["tools"][0].contains("cache_control"));
  EXPECT_EQ(body["tools"][1]["cache_control"], json::parse(R"({"type":"ephemeral"})"));
  EXPECT_EQ(body["tools"][0]["input_schema"], json::parse(R"({"type":"object","properties":{}})"));
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["messages"][0]["content"][0]["cache_control"],
            json::parse(R"({"type":"ephemeral"})"));
}

// The conversation breakpoint moves to the last message each turn (at most 4 in all), and the
// prefix before it is byte-identical to the previous request's.
TEST(AnthropicEncode, CacheBreakpointMovesToTheLastMessageAndPrefixesStayStable) {
  Request r;
  r.system = "sys";
  r.tools = {ToolDef{"bash", "run", json::object()}};
  r.messages.push_back(Message{Role::kUser, {TextBlock{"go"}}});
  r.messages.push_back(
      Message{Role::kAssistant, {ToolUseBlock{"t1", "bash", {{"command", "ls"}}}}});
  r.messages.push_back(Message{Role::kUser, {ToolResultBlock{"t1", "a.txt", false}}});
  const json first = AnthropicEncodeRequest(r, Config());
  r.messages.push_back(Message{
      Role::kAssistant, {TextBlock{"done?"}, ToolUseBlock{"t2", "bash", {{"command", "pwd"}}}}});
  r.messages.push_back(Message{Role::kUser, {ToolResultBlock{"t2", "/w", false}}});
  const json second = AnthropicEncodeRequest(r, Config());
  auto count = [](const json& body) {
    const std::string s = body.dump();
    size_t n = 0;
    for (size_t p = s.find("cache_control"); p != std::string::npos;
         p = s.find("cache_control", p + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(first), 3u);
  EXPECT_EQ(count(second), 3u);
  EXPECT_TRUE(second["messages"][4]["content"][0].contains("cache_control"));
  EXPECT_FALSE(second["messages"][2]["content"][0].contains("cache_control"));
  // Byte-stable prefix: the earlier messages encode the same, apart from the moved marker.
  json unmarked = first["messages"];
  unmarked.back()["content"].back().erase("cache_control");
  for (size_t i = 0; i < unmarked.size(); ++i) {
    EXPECT_EQ(unmarked[i].dump(), second["messages"][i].dump()) << i;
  }
  EXPECT_EQ(first["system"].dump(), second["system"].dump());
  EXPECT_EQ(first["tools"].dump(), second["tools"].dump());
}

TEST(AnthropicEncode, NeverSendsEmptyTextAndPutsToolResultsFirst) {
  Request r;
  r.messages.push_back(Message{Role::kUser, {TextBlock{""}}});  // Dropped entirely.
  r.messages.push_back(Message{Role::kUser, {TextBlock{"q"}}});
  r.messages.push_back(
      Message{Role::kAssistant, {TextBlock{""}, ToolUseBlock{"t1", "bash", {{"command", "ls"}}}}});
  r.messages.push_back(Message{Role::kUser, {TextBlock{"note"}, ToolResultBlock{"t1", "", true}}});
  const json body = AnthropicEncodeRequest(r, Config());
  ASSERT_EQ(body["messages"].size(), 3u) << body.dump();
  EXPECT_EQ(body["messages"][1]["content"].size(), 1u);
  EXPECT_EQ(body["messages"][1]["content"][0]["type"], "tool_use");
  const json& last = body["messages"][2]["content"];
  EXPECT_EQ(last[0], json::parse(R"({"type":"tool_result","tool_use_id":"t1","is_error":true})"));
  EXPECT_EQ(last[1]["text"], "note");
  EXPECT_FALSE(body.contains("system"));
  EXPECT_FALSE(body.contains("tools"));
}

TEST(AnthropicEncode, ThinkingBlocksGoBackUnchangedAndTextIsMadeValid) {
  const json thinking = json::parse(
      R"({"type":"thinking","thinking":"Let me think","signature":"EqQBCgIYAhIM1gbcDa9GJwZA"})");
  Request r;
  r.messages.push_back(Message{Role::kUser, {TextBlock{"bad \xFF byte"}}});
  r.messages.push_back(Message{Role::kAssistant, {ThinkingBlock{thinking}, TextBlock{"ok"}}});
  r.max_tokens = 100;  // Smaller than the config's: the smaller wins.
  const json body = AnthropicEncodeRequest(r, Config());
  EXPECT_EQ(body["messages"][0]["content"][0]["text"], "bad \xEF\xBF\xBD byte");
  EXPECT_EQ(body["messages"][1]["content"][0], thinking);
  EXPECT_EQ(body["max_tokens"], 100);
}

TEST(AnthropicDecode, DocumentedToolUseReply) {
  const Decoded d = AnthropicDecodeBody(R"({
    "id": "msg_01Aq9w938a90dw8q", "type": "message", "model": "claude-sonnet-4-5",
    "stop_reason": "tool_use", "stop_sequence": null, "role": "assistant",
    "content": [
      {"type": "text", "text": "I'll check the current weather in San Francisco for you."},
      {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
       "input": {"location": "San Francisco, CA", "unit": "celsius"}}],
    "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_creation_input_tokens": 12,
              "cache_read_input_tokens": 34}
  })");
  ASSERT_TRUE(d.result.ok()) << d.result.error->message;
  const Response& r = d.result.response;
  EXPECT_EQ(r.stop_reason, StopReason::kToolUse);
  EXPECT_EQ(r.raw_stop_reason, "tool_use");
  EXPECT_EQ(TextOf(r.message), "I'll check the current weather in San Francisco for you.");
  const auto uses = ToolUsesOf(r.message);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].id, "toolu_01A09q90qw90lq917835lq9");
  EXPECT_EQ(uses[0].name, "get_weather");
  EXPECT_EQ(uses[0].input, json::parse(R"({"location": "San Francisco, CA", "unit": "celsius"})"));
  EXPECT_EQ(r.usage.input_tokens, 2095);
  EXPECT_EQ(r.usage.output_tokens, 503);
  EXPECT_EQ(r.usage.cache_creation_input_tokens, 12);
  EXPECT_EQ(r.usage.cache_read_input_tokens, 34);
  // The reply's own names, which stream-json's assistant message carries.
  EXPECT_EQ(r.id, "msg_01Aq9w938a90dw8q");
  EXPECT_EQ(r.model, "claude-sonnet-4-5");
}

TEST(AnthropicDecode, EveryStopReason) {
  const std::pair<const char*, StopReason> cases[] = {
      {"end_turn", StopReason::kEndTurn},
      {"tool_use", StopReason::kToolUse},
      {"max_tokens", StopReason::kMaxTokens},
      {"stop_sequence", StopReason::kStopSequence},
      {"pause_turn", StopReason::kPauseTurn},
      {"refusal", StopReason::kRefusal},
      {"model_context_window_exceeded", StopReason::kContextWindow},
      {"something_new", StopReason::kUnknown}};
  for (const auto& [raw, reason] : cases) {
    const json body = {{"type", "message"},
                       {"content", json::array({{{"type", "text"}, {"text", "x"}}})},
                       {"stop_reason", raw}};
    const Decoded d = AnthropicDecodeBody(body.dump());
    ASSERT_TRUE(d.result.ok()) << raw;
    EXPECT_EQ(d.result.response.stop_reason, reason) << raw;
    EXPECT_EQ(d.result.response.raw_stop_reason, raw);
  }
}

TEST(AnthropicDecode, ErrorsAndGarbage) {
  Decoded d = AnthropicDecodeBody(
      R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"})");
  ASSERT_FALSE(d.result.ok());
  EXPECT_EQ(d.result.error->error_type, "overloaded_error");
  EXPECT_EQ(d.result.error->request_id, "req_1");
  EXPECT_TRUE(d.retryable);

  for (const char* bad :
       {"", "{", "[]", "null", R"({"content":"x","stop_reason":"end_turn"})",
        R"({"content":[],"stop_reason":null})",
        R"({"content":[{"type":"tool_use","input":{}}],"stop_reason":"tool_use"})",
        R"({"content":[{"text":"no type"}],"stop_reason":"end_turn"})"}) {
    d = AnthropicDecodeBody(bad);
    ASSERT_FALSE(d.result.ok()) << bad;
    EXPECT_EQ(d.result.error->kind, ModelError::Kind::kMalformed) << bad;
    EXPECT_TRUE(d.retryable) << bad;
  }
}

// Anthropic's documented streaming example with a tool call (streaming docs, "Streaming request
// with tool use"), abbreviated text deltas.
const char kDocumentedToolStream[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_014p7gG3wDgGV9EUtLvnow3U\","
    "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-opus-4-6\",\"stop_sequence\":"
    "null,"
    "\"usage\":{\"input_tokens\":472,\"output_tokens\":2},\"content\":[],\"stop_reason\":null}}\n\n"
    "event: content_block_start\n"
    "data: "
    "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":"
    "\"\"}}\n\n"
    "event: ping\n"
    "data: {\"type\": \"ping\"}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":"
    "\"Okay\"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\","
    "\"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" "
    "let's check the weather.\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\","
    "\"id\":\"toolu_01T1x1fJ34qAmk2tNTrN7Up6\",\"name\":\"get_weather\",\"input\":{}}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\"\"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\"{\\\"location\\\":\"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\" \\\"San\"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\" Francisc\"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\"o,\"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\" CA\\\"\"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\", \"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\"\\\"unit\\\": \\\"fah\"}}\n\n"
    "event: content_block_delta\n"
    "data: "
    "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\"renheit\\\"}\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
    "event: message_delta\n"
    "data: "
    "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},"
    "\"usage\":{\"output_tokens\":89}}\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

TEST(AnthropicStream, DocumentedToolUseTranscriptAtEveryChunkSize) {
  for (size_t step = 1; step <= 64; ++step) {
    std::string text;
    const Decoded d = DecodeStream(kDocumentedToolStream, step, &text);
    ASSERT_TRUE(d.result.ok()) << "step " << step << ": " << d.result.error->message;
    const Response& r = d.result.response;
    EXPECT_EQ(text, "Okay, let's check the weather.");
    EXPECT_EQ(TextOf(r.message), text);
    EXPECT_EQ(r.stop_reason, StopReason::kToolUse);
    const auto uses = ToolUsesOf(r.message);
    ASSERT_EQ(uses.size(), 1u);
    EXPECT_EQ(uses[0].id, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    EXPECT_EQ(uses[0].input,
              json::parse(R"({"location": "San Francisco, CA", "unit": "fahrenheit"})"));
    EXPECT_EQ(r.usage.input_tokens, 472);
    EXPECT_EQ(r.usage.output_tokens, 89);  // message_delta overwrites, never adds.
    // The names message_start gave.
    EXPECT_EQ(r.id, "msg_014p7gG3wDgGV9EUtLvnow3U");
    EXPECT_EQ(r.model, "claude-opus-4-6");
  }
}

// A recorded stream (Vercel AI SDK fixture anthropic-json-tool): cache usage fields, a ping
// inside a tool block, data-only framing without `event:` lines.
TEST(AnthropicStream, RecordedStreamWithDataOnlyFraming) {
  const std::vector<std::string> lines = {
      R"({"type":"message_start","message":{"model":"claude-haiku-4-5-20251001","id":"msg_01K2JbSUMYhez5RHoK9ZCj9U","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":849,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":10,"service_tier":"standard"}}})",
      R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01KFbKqPYSuAKujiL6mTfzYA","name":"json","input":{}}})",
      R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}})",
      R"({"type":"ping"})",
      R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"elements\": [{\"location\": \"San Francisco\", \"temperature\": 58, \"condition\": \"sunny\"}]"}})",
      R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"}"}})",
      R"({"type":"content_block_stop","index":0})",
      R"({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":849,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":47}})",
      R"({"type":"message_stop"})"};
  std::string body;
  for (const std::string& l : lines) body += "data: " + l + "\r\n\r\n";
  const Decoded d = DecodeStream(body, 7);
  ASSERT_TRUE(d.result.ok()) << d.result.error->message;
  const auto uses = ToolUsesOf(d.result.response.message);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].input["elements"][0]["temperature"], 58);
  EXPECT_EQ(d.result.response.usage.input_tokens, 849);
  EXPECT_EQ(d.result.response.usage.output_tokens, 47);
}

const char kStart[] =
    R"({"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}})";

TEST(AnthropicStream, ThinkingBlockIsKeptWithItsSignature) {
  const std::string body = Sse({
      {"message_start", kStart},
      {"content_block_start",
       R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hmm."}})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}})"},
      {"content_block_stop", R"({"type":"content_block_stop","index":0})"},
      {"content_block_start",
       R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}})"},
      {"content_block_stop", R"({"type":"content_block_stop","index":1})"},
      {"message_delta",
       R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}})"},
      {"message_stop", R"({"type":"message_stop"})"},
  });
  const Decoded d = DecodeStream(body, 5);
  ASSERT_TRUE(d.result.ok()) << d.result.error->message;
  const Message& m = d.result.response.message;
  ASSERT_EQ(m.content.size(), 2u);
  const auto& thinking = std::get<ThinkingBlock>(m.content[0]).raw;
  EXPECT_EQ(thinking["thinking"], "Hmm.");
  EXPECT_EQ(thinking["signature"], "EqQB");
  EXPECT_EQ(TextOf(m), "Hi");
}

TEST(AnthropicStream, InStreamOverloadedErrorIsRetryable) {
  const std::string body = Sse({
      {"message_start", kStart},
      {"content_block_start",
       R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"bash","input":{}}})"},
      {"error", R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"},
  });
  const Decoded d = DecodeStream(body, 3);
  ASSERT_FALSE(d.result.ok());
  EXPECT_EQ(d.result.error->kind, ModelError::Kind::kOverloaded);
  EXPECT_EQ(d.result.error->message, "Overloaded");
  EXPECT_TRUE(d.retryable);
  EXPECT_TRUE(ToolUsesOf(d.result.response.message).empty());  // Nothing from the partial reply.
}

TEST(AnthropicStream, TruncatedStreamsAreRetryableMalformed) {
  const std::string full(kDocumentedToolStream);
  const size_t stop = full.find("event: message_stop");
  const std::vector<std::string> cut = {
      "",                               // Empty body.
      full.substr(0, full.size() / 2),  // Cut mid-event.
      full.substr(0, stop),             // Clean end without message_stop.
  };
  for (const std::string& body : cut) {
    const Decoded d = DecodeStream(body, 4);
    ASSERT_FALSE(d.result.ok()) << body.size();
    EXPECT_EQ(d.result.error->kind, ModelError::Kind::kMalformed);
    EXPECT_TRUE(d.retryable);
  }
}

TEST(AnthropicStream, MalformedEventJsonFails) {
  const std::string body =
      Sse({{"message_start", kStart},
           {"content_block_start", R"({"type":"content_block_start","index":0,)"}});
  const Decoded d = DecodeStream(body, 1000);
  ASSERT_FALSE(d.result.ok());
  EXPECT_EQ(d.result.error->kind, ModelError::Kind::kMalformed);
  EXPECT_THAT(d.result.error->message, testing::HasSubstr("malformed stream event"));
}

// A block index that is not a small non-negative integer is a malformed event, never a cast of a
// float or of a huge number to int (undefined behaviour; -1, 0.5 and 2^32 used to be read as
// blocks -1, 0 and 0). The stream is otherwise whole: only the index can fail it.
TEST(AnthropicStream, ABlockIndexThatIsNotASmallIntegerIsMalformed) {
  const auto stream = [](const std::string& index) {
    return Sse({{"message_start", kStart},
                {"content_block_start", R"({"type":"content_block_start","index":)" + index +
                                            R"(,"content_block":{"type":"text","text":""}})"},
                {"content_block_delta", R"({"type":"content_block_delta","index":)" + index +
                                            R"(,"delta":{"type":"text_delta","text":"hi"}})"},
                {"content_block_stop", R"({"type":"content_block_stop","index":)" + index + "}"},
                {"message_delta", R"({"type":"message_delta","delta":{"stop_reason":"end_turn"}})"},
                {"message_stop", R"({"type":"message_stop"})"}});
  };
  const Decoded ok = DecodeStream(stream("0"), 1000);
  ASSERT_TRUE(ok.result.ok()) << ok.result.error->message;
  for (const char* index : {"1e300", "-1", "0.5", "4294967296", "18446744073709551615", "\"0\""}) {
    const Decoded d = DecodeStream(stream(index), 1000);
    ASSERT_FALSE(d.result.ok()) << index;
    EXPECT_EQ(d.result.error->kind, ModelError::Kind::kMalformed) << index;
    EXPECT_THAT(d.result.error->message, testing::HasSubstr("malformed stream event")) << index;
  }
}

TEST(AnthropicStream, MaxTokensCutToolCallNeverRuns) {
  const std::string body = Sse({
      {"message_start", kStart},
      {"content_block_start",
       R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"bash","input":{}}})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"rm -"}})"},
      {"content_block_stop", R"({"type":"content_block_stop","index":0})"},
      {"message_delta",
       R"({"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}})"},
      {"message_stop", R"({"type":"message_stop"})"},
  });
  const Decoded d = DecodeStream(body, 1000);
  ASSERT_TRUE(d.result.ok()) << d.result.error->message;
  EXPECT_EQ(d.result.response.stop_reason, StopReason::kMaxTokens);
  EXPECT_TRUE(ToolUsesOf(d.result.response.message).empty());
}

TEST(AnthropicDecode, NonObjectToolInputIsMarkedForTheModel) {
  Decoded d = AnthropicDecodeBody(
      R"({"content":[{"type":"tool_use","id":"t","name":"x","input":[1]}],"stop_reason":"tool_use"})");
  ASSERT_TRUE(d.result.ok());
  std::vector<ToolUseBlock> uses = ToolUsesOf(d.result.response.message);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_THAT(CheckToolCall(uses[0], {ToolDef{"x", "", json::object()}}),
              testing::HasSubstr("not a JSON object"));
}

// Broken tool JSON is the model's mistake: the call is marked, never a retried malformed reply.
TEST(AnthropicStream, BrokenToolJsonWithoutMaxTokensIsMarked) {
  const std::string body = Sse({
      {"message_start", kStart},
      {"content_block_start",
       R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"bash","input":{}}})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\""}})"},
      {"content_block_stop", R"({"type":"content_block_stop","index":0})"},
      {"message_delta", R"({"type":"message_delta","delta":{"stop_reason":"tool_use"}})"},
      {"message_stop", R"({"type":"message_stop"})"},
  });
  const Decoded d = DecodeStream(body, 1000);
  ASSERT_TRUE(d.result.ok());
  std::vector<ToolUseBlock> uses = ToolUsesOf(d.result.response.message);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_THAT(CheckToolCall(uses[0], {ToolDef{"bash", "", json::object()}}),
              testing::HasSubstr("not valid JSON"));
}

// Tool JSON that repeats a key is refused, never read with one of its values: streamed (the
// model's text), the call is marked and the loop answers it; in a whole reply's body, which the
// decoder cannot read unambiguously, the reply is malformed (retried). The control: the same
// input with the key once decodes. The empty key is named too: before, a repeated "" was
// described as "not valid JSON".
TEST(AnthropicDecode, ToolInputThatRepeatsAKeyIsRefused) {
  for (const auto& [key, repeated] : std::vector<std::pair<std::string, bool>>{
           {"path", true}, {"path", false}, {"", true}, {"", false}}) {
    SCOPED_TRACE((repeated ? "repeated \"" : "once \"") + key + "\"");
    const std::string once = json{{key, "a.txt"}}.dump();
    const std::string input =
        repeated ? once.substr(0, once.size() - 1) + R"(,")" + key + R"(":"/etc/passwd"})" : once;
    const std::string body = Sse({
        {"message_start", kStart},
        {"content_block_start",
         R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"read_file","input":{}}})"},
        {"content_block_delta",
         json{{"type", "content_block_delta"},
              {"index", 0},
              {"delta", {{"type", "input_json_delta"}, {"partial_json", input}}}}
             .dump()},
        {"content_block_stop", R"({"type":"content_block_stop","index":0})"},
        {"message_delta", R"({"type":"message_delta","delta":{"stop_reason":"tool_use"}})"},
        {"message_stop", R"({"type":"message_stop"})"},
    });
    Decoded d = DecodeStream(body, 1000);
    ASSERT_TRUE(d.result.ok());
    std::vector<ToolUseBlock> uses = ToolUsesOf(d.result.response.message);
    ASSERT_EQ(uses.size(), 1u);
    const std::string problem = CheckToolCall(uses[0], {ToolDef{"read_file", "", json::object()}});
    const std::string named = "JSON that repeats the key \"" + key + "\" in one object";
    if (repeated) {
      EXPECT_THAT(problem, testing::HasSubstr("the arguments are " + named));
    } else {
      EXPECT_EQ(problem, "");
      EXPECT_EQ(uses[0].input, json({{key, "a.txt"}}));
    }
    d = AnthropicDecodeBody(
        R"({"content":[{"type":"tool_use","id":"t","name":"read_file","input":)" + input +
        R"(}],"stop_reason":"tool_use"})");
    EXPECT_EQ(d.result.ok(), !repeated);
    if (repeated) {
      EXPECT_EQ(d.result.error->kind, ModelError::Kind::kMalformed);
      EXPECT_THAT(d.result.error->message, testing::HasSubstr("reply is " + named));
    }
  }
}

// `levels` nested arrays as a tool call's arguments: {"command":"true","x":[[...]]}.
std::string DeepArguments(int levels) {
  return R"({"command":"true","x":)" + std::string(levels, '[') + std::string(levels, ']') + "}";
}

// A tool call's input nesting 100,000 arrays crashed the parent (SIGSEGV: the DOM's copy
// recursed); anything deeper than kMaxModelJsonDepth is now the model's mistake, marked, and so is
// an event that deep. The control: 60 levels are a valid input.
TEST(AnthropicStream, JsonNestedPastTheBoundIsRefusedNotCopied) {
  for (const int levels : {60, 100, 100'000}) {
    SCOPED_TRACE(levels);
    const std::string body = Sse({
        {"message_start", kStart},
        {"content_block_start",
         R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"bash","input":{}}})"},
        {"content_block_delta",
         json{{"type", "content_block_delta"},
              {"index", 0},
              {"delta", {{"type", "input_json_delta"}, {"partial_json", DeepArguments(levels)}}}}
             .dump()},
        {"content_block_stop", R"({"type":"content_block_stop","index":0})"},
        {"message_delta", R"({"type":"message_delta","delta":{"stop_reason":"tool_use"}})"},
        {"message_stop", R"({"type":"message_stop"})"},
    });
    const Decoded d = DecodeStream(body, 1 << 20);
    ASSERT_TRUE(d.result.ok()) << d.result.error->ToString();
    std::vector<ToolUseBlock> uses = ToolUsesOf(d.result.response.message);
    ASSERT_EQ(uses.size(), 1u);
    const std::string problem = CheckToolCall(uses[0], {ToolDef{"bash", "", json::object()}});
    if (levels < kMaxModelJsonDepth) {
      EXPECT_EQ(problem, "");
    } else {
      EXPECT_THAT(problem, testing::HasSubstr("are nested deeper than 64 levels"));
    }
  }
  const std::string deep_event =
      "{\"type\":\"ping\",\"x\":" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  const Decoded d = DecodeStream(Sse({{"message_start", kStart}, {"ping", deep_event}}), 1 << 20);
  ASSERT_FALSE(d.result.ok());
  EXPECT_THAT(d.result.error->message, testing::HasSubstr("(nested deeper than 64 levels)"));
}

// A parser's message quotes the reply's bytes: the error is valid UTF-8 all the same (before, the
// parent's --json result could not be written and a child's error frame was refused).
TEST(AnthropicStream, AMalformedEventsErrorIsValidUtf8) {
  const Decoded d = DecodeStream(
      Sse({{"message_start", kStart}, {"content_block_delta", "{\"x\":\"\xff"}}), 1000);
  ASSERT_FALSE(d.result.ok());
  EXPECT_TRUE(IsValidUtf8(d.result.error->message)) << d.result.error->message;
  EXPECT_THAT(d.result.error->message, testing::HasSubstr("malformed stream event"));
}

// Malformed's message is valid UTF-8 whatever its caller quotes: it ends in --json's result and
// in a child's error frame, both of which refuse other bytes.
TEST(WireMalformed, ItsMessageIsMadeValidUtf8) {
  const Decoded d = Malformed("malformed reply (last read: '\xff\xfe'): x");
  ASSERT_FALSE(d.result.ok());
  EXPECT_TRUE(IsValidUtf8(d.result.error->message)) << d.result.error->message;
  EXPECT_THAT(d.result.error->message, testing::HasSubstr("malformed reply (last read: '"));
}

TEST(AnthropicStream, EventsBeforeMessageStartAreMalformed) {
  const std::string body = Sse(
      {{"content_block_delta",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}})"}});
  EXPECT_FALSE(DecodeStream(body, 1000).result.ok());
}

// Usage counts outside [0, ipc::kMaxReportedCount] are clamped into it, and the reply is kept:
// 2^64-1 read as -1, a negative count undercut the token budget, and 2^50 made the child's event
// frame fail the parent's check (the finished task's summary was lost).
TEST(AnthropicDecode, OutOfRangeUsageIsClampedAndTheReplyKept) {
  const std::string body =
      R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",)"
      R"("content":[{"type":"text","text":"done"}],"stop_reason":"end_turn",)"
      R"("usage":{"input_tokens":1125899906842624,"output_tokens":18446744073709551615,)"
      R"("cache_creation_input_tokens":-5,"cache_read_input_tokens":281474976710656}})";
  const Decoded d = AnthropicDecodeBody(body);
  ASSERT_TRUE(d.result.ok()) << d.result.error->ToString();
  EXPECT_EQ(TextOf(d.result.response.message), "done");
  const Usage& u = d.result.response.usage;
  EXPECT_EQ(u.input_tokens, ipc::kMaxReportedCount);
  EXPECT_EQ(u.output_tokens, ipc::kMaxReportedCount);
  EXPECT_EQ(u.cache_creation_input_tokens, 0);
  EXPECT_EQ(u.cache_read_input_tokens, ipc::kMaxReportedCount);  // The bound itself stays.

  const std::string stream = Sse(
      {{"message_start",
        R"({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",)"
        R"("content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,)"
        R"("usage":{"input_tokens":18446744073709551615,"output_tokens":1}}})"},
       {"content_block_start",
        R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"},
       {"content_block_delta",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"done"}})"},
       {"content_block_stop", R"({"type":"content_block_stop","index":0})"},
       {"message_delta",
        R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},)"
        R"("usage":{"output_tokens":-7}})"},
       {"message_stop", R"({"type":"message_stop"})"}});
  const Decoded s = DecodeStream(stream, stream.size());
  ASSERT_TRUE(s.result.ok()) << s.result.error->ToString();
  EXPECT_EQ(TextOf(s.result.response.message), "done");
  EXPECT_EQ(s.result.response.usage.input_tokens, ipc::kMaxReportedCount);
  EXPECT_EQ(s.result.response.usage.output_tokens, 0);
}

// A long answer in many small deltas decodes whole (appended in place: see
// llm_stream_growth_test.cc for the linear cost).
TEST(AnthropicStream, ManyOneByteDeltasDecodeExactly) {
  constexpr int kDeltas = 200'000;
  std::string stream = Sse(
      {{"message_start",
        R"({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",)"
        R"("content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,)"
        R"("usage":{"input_tokens":1,"output_tokens":1}}})"},
       {"content_block_start",
        R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"}});
  std::string expected;
  const std::string letters = "abcdefghijklmnopqrstuvwxyz";
  for (int i = 0; i < kDeltas; ++i) {
    const char c = letters[static_cast<size_t>(i) % letters.size()];
    expected += c;
    stream +=
        Sse({{"content_block_delta",
              R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":")" +
                  std::string(1, c) + R"("}})"}});
  }
  stream += Sse(
      {{"content_block_stop", R"({"type":"content_block_stop","index":0})"},
       {"message_delta",
        R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}})"},
       {"message_stop", R"({"type":"message_stop"})"}});
  std::string streamed;
  const Decoded d = DecodeStream(stream, 4096, &streamed);
  ASSERT_TRUE(d.result.ok()) << d.result.error->ToString();
  EXPECT_EQ(TextOf(d.result.response.message), expected);
  EXPECT_EQ(streamed, expected);
}

}  // namespace
}  // namespace forkbox::agent
