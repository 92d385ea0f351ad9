// Tests of the mock model server: exact bytes of both wire formats, validation, scenario rules,
// every fault, recording, keep-alive, parallelism and the standalone binary.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/mock/connections.h"
#include "tests/mock/mock_server.h"
#include "tests/mock/scenario.h"
#include "tests/mock/transmission.h"
#include "tests/mock/wire.h"

extern char** environ;

namespace forkbox::mock {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr auto kWait = milliseconds(30'000);

// ---- A raw HTTP/1.1 exchange, so tests see the exact bytes (and cuts) on the wire. ----

struct RawResponse {
  bool got_anything = false;
  int status = 0;
  std::map<std::string, std::string> headers;  // Lower-case names.
  std::string body;                            // De-chunked when chunked.
  bool complete = false;                       // Terminating chunk seen / Content-Length satisfied.
};

std::string Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval tv{30, 0};  // Never hang a test on a broken server.
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buf[65536];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

RawResponse Parse(const std::string& raw) {
  RawResponse r;
  r.got_anything = !raw.empty();
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return r;
  std::istringstream head(raw.substr(0, end));
  std::string line;
  std::getline(head, line);
  r.status = std::atoi(line.substr(9, 3).c_str());
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = line.substr(colon + 2);
  }
  std::string rest = raw.substr(end + 4);
  if (r.headers["transfer-encoding"] == "chunked") {
    size_t at = 0;
    while (true) {
      const size_t eol = rest.find("\r\n", at);
      if (eol == std::string::npos) break;
      const size_t size = std::stoul(rest.substr(at, eol - at), nullptr, 16);
      if (size == 0) {
        r.complete = true;
        break;
      }
      r.body += rest.substr(eol + 2, size);
      if (eol + 2 + size + 2 > rest.size()) break;
      at = eol + 2 + size + 2;
    }
  } else {
    r.body = rest;
    r.complete =
        r.headers.count("content-length") && rest.size() == std::stoul(r.headers["content-length"]);
  }
  return r;
}

const std::map<std::string, std::string> kAnthropicHeaders = {{"x-api-key", "sk-ant-test"},
                                                              {"anthropic-version", "2023-06-01"}};
const std::map<std::string, std::string> kOpenAiHeaders = {{"Authorization", "Bearer sk-test"}};

RawResponse Post(const MockServer& server, const std::string& path, const std::string& body,
                 const std::map<std::string, std::string>& headers) {
  std::string req =
      "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  return Parse(Exchange(server.port(), req + "\r\n" + body));
}

RawResponse PostAnthropic(const MockServer& s, const json& body,
                          const std::map<std::string, std::string>& h = kAnthropicHeaders) {
  return Post(s, "/v1/messages", body.dump(), h);
}
RawResponse PostOpenAi(const MockServer& s, const json& body,
                       const std::map<std::string, std::string>& h = kOpenAiHeaders) {
  return Post(s, "/v1/chat/completions", body.dump(), h);
}

json AnthropicRequest(const std::string& user, bool stream = false) {
  return {{"model", "claude-test"},
          {"max_tokens", 1024},
          {"stream", stream},
          {"system", "You are a subagent."},
          {"tools", json::array({{{"name", "bash"},
                                  {"description", "Run a command"},
                                  {"input_schema", {{"type", "object"}}}}})},
          {"messages", json::array({{{"role", "user"}, {"content", user}}})}};
}

json OpenAiRequest(const std::string& user, bool stream = false, bool include_usage = false) {
  json j = {
      {"model", "gpt-test"},
      {"messages", json::array({{{"role", "system"}, {"content", "You are a subagent."}},
                                {{"role", "user"}, {"content", user}}})},
      {"tools",
       json::array({{{"type", "function"},
                     {"function", {{"name", "bash"}, {"parameters", {{"type", "object"}}}}}}})}};
  if (stream) j["stream"] = true;
  if (include_usage) j["stream_options"] = {{"include_usage", true}};
  return j;
}

// The "data:" payloads of an SSE body, in order.
std::vector<std::string> DataLines(const std::string& sse) {
  std::vector<std::string> out;
  std::istringstream in(sse);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  }
  return out;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

Reply TextAndBash() {
  Reply r;
  r.text = "Hi!";
  r.tool_calls.push_back({"bash", {{"command", "ls"}}, ""});
  return r;
}

class MockServerTest : public ::testing::Test {
 protected:
  void SetUp() override { server_.Start(); }
  void Serve(Reply reply) {
    server_.SetHandler([reply](const RecordedRequest&) { return reply; });
  }
  MockServer server_;
};

// ---- Exact bytes ----

TEST_F(MockServerTest, AnthropicStreamIsByteExact) {
  Serve(TextAndBash());
  const json req = AnthropicRequest("hello", true);
  const RawResponse r = PostAnthropic(server_, req);
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.headers.at("content-type"), "text/event-stream; charset=utf-8");
  EXPECT_EQ(r.headers.at("request-id"), "req_011CMock00000000000001");
  // Usage per docs/mock.md: request bytes / 4 in, (text + name + input JSON bytes) / 4 out.
  const std::string in = std::to_string(req.dump().size() / 4);
  const std::string out = std::to_string((3 + 4 + 16) / 4);
  const std::string expected = Replace(Replace(R"(event: message_start
data: {"type":"message_start","message":{"id":"msg_01Mock00000000000001","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":IN,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01Mock00000000000100","name":"bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"and\":\""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ls\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":IN,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":OUT}}

event: message_stop
data: {"type":"message_stop"}

)",
                                               "IN", in),
                                       "OUT", out);
  EXPECT_EQ(r.body, expected);
}

TEST_F(MockServerTest, AnthropicNonStreamingShape) {
  Serve(TextAndBash());
  const json req = AnthropicRequest("hello");
  const RawResponse r = PostAnthropic(server_, req);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.headers.at("request-id"), "req_011CMock00000000000001");
  const int64_t in = static_cast<int64_t>(req.dump().size() / 4);
  EXPECT_EQ(
      r.body,
      R"({"id":"msg_01Mock00000000000001","type":"message","role":"assistant",)"
      R"("model":"claude-test","content":[{"type":"text","text":"Hi!"},{"type":"tool_use",)"
      R"("id":"toolu_01Mock00000000000100","name":"bash","input":{"command":"ls"}}],)"
      R"("stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":)" +
          std::to_string(in) +
          R"(,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":5}})");
}

TEST_F(MockServerTest, OpenAiStreamIsByteExactWithUsage) {
  Serve(TextAndBash());
  const json req = OpenAiRequest("hello", true, true);
  const RawResponse r = PostOpenAi(server_, req);
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.headers.at("x-request-id"), "req_mock00000000000001");
  const std::vector<std::string> data = DataLines(r.body);
  ASSERT_FALSE(data.empty());
  const std::string created = std::to_string(json::parse(data[0])["created"].get<int64_t>());
  const int64_t in = static_cast<int64_t>(req.dump().size() / 4);
  const std::string head =
      R"({"id":"chatcmpl-Mock00000000000001","object":"chat.completion.chunk","created":)" +
      created + R"(,"model":"gpt-test","system_fingerprint":"fp_mock","choices":)";
  auto chunk = [&](const std::string& delta, const std::string& finish) {
    return "data: " + head + R"([{"index":0,"delta":)" + delta +
           R"(,"logprobs":null,"finish_reason":)" + finish + R"(}],"usage":null})" + "\n\n";
  };
  const std::string expected =
      chunk(R"({"role":"assistant","content":"","refusal":null})", "null") +
      chunk(R"({"content":"Hi!"})", "null") +
      chunk(
          R"({"tool_calls":[{"index":0,"id":"call_Mock00000000000100","type":"function","function":{"name":"bash","arguments":""}}]})",
          "null") +
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"comm"}}]})", "null") +
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"and\":\""}}]})", "null") +
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"ls\"}"}}]})", "null") +
      chunk("{}", R"("tool_calls")") + "data: " + head + R"([],"usage":{"prompt_tokens":)" +
      std::to_string(in) + R"(,"completion_tokens":5,"total_tokens":)" + std::to_string(in + 5) +
      R"(,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}})" +
      "\n\ndata: [DONE]\n\n";
  EXPECT_EQ(r.body, expected);
}

TEST_F(MockServerTest, OpenAiStreamWithoutIncludeUsageHasNoUsage) {
  Reply reply;
  reply.text = "plain";
  Serve(reply);
  const RawResponse r = PostOpenAi(server_, OpenAiRequest("hello", true, false));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body.find("usage"), std::string::npos);
  const std::vector<std::string> data = DataLines(r.body);
  ASSERT_EQ(data.size(), 4u);  // role, content, finish, [DONE]
  EXPECT_EQ(json::parse(data[2])["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(data[3], "[DONE]");
}

TEST_F(MockServerTest, OpenAiNonStreamingToolCalls) {
  Reply reply;
  reply.tool_calls.push_back({"bash", {{"command", "ls"}}, "call_given"});
  reply.tool_calls.push_back({"read_file", {{"path", "a.txt"}}, ""});
  Serve(reply);
  const RawResponse r = PostOpenAi(server_, OpenAiRequest("hello"));
  ASSERT_EQ(r.status, 200);
  const json body = json::parse(r.body);
  EXPECT_EQ(body["object"], "chat.completion");
  const json& msg = body["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_TRUE(msg["content"].is_null());
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  EXPECT_EQ(msg["tool_calls"][0]["id"], "call_given");
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "bash");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"command":"ls"})");
  EXPECT_EQ(msg["tool_calls"][1]["id"], "call_Mock00000000000101");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  const json& u = body["usage"];
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
}

TEST_F(MockServerTest, LongUnicodeTextStreamsInSeveralValidDeltas) {
  Reply reply;
  for (int i = 0; i < 40; ++i) reply.text += "héllo wörld ✓ 🚀 ";
  Serve(reply);
  for (bool openai : {false, true}) {
    const RawResponse r = openai ? PostOpenAi(server_, OpenAiRequest("x", true))
                                 : PostAnthropic(server_, AnthropicRequest("x", true));
    ASSERT_EQ(r.status, 200);
    std::string joined;
    int deltas = 0;
    for (const std::string& d : DataLines(r.body)) {
      if (d == "[DONE]") continue;
      const json j = json::parse(d);  // Throws (fails the test) on a split code point.
      if (openai && j["choices"][0]["delta"].contains("content") &&
          j["choices"][0]["delta"]["content"].is_string()) {
        joined += j["choices"][0]["delta"]["content"].get<std::string>();
        ++deltas;
      }
      if (!openai && j["type"] == "content_block_delta") {
        joined += j["delta"]["text"].get<std::string>();
        ++deltas;
      }
    }
    EXPECT_EQ(joined, reply.text);
    EXPECT_GT(deltas, 3);
  }
}

TEST_F(MockServerTest, StopReasonsMapPerFormat) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"end_turn", "end_turn", "stop"},
      {"tool_use", "tool_use", "tool_calls"},
      {"max_tokens", "max_tokens", "length"},
      {"stop_sequence", "stop_sequence", "stop"},
      {"pause_turn", "pause_turn", "stop"},
      {"refusal", "refusal", "content_filter"},
      {"context_window", "model_context_window_exceeded", "length"},
  };
  for (const auto& [canonical, anthropic, openai] : cases) {
    Reply reply;
    reply.text = "t";
    reply.stop_reason = canonical;
    reply.stop_sequence = "STOP";
    Serve(reply);
    const json a = json::parse(PostAnthropic(server_, AnthropicRequest("x")).body);
    EXPECT_EQ(a["stop_reason"], anthropic) << canonical;
    EXPECT_EQ(a["stop_sequence"], canonical == "stop_sequence" ? json("STOP") : json(nullptr));
    const std::vector<std::string> events =
        DataLines(PostAnthropic(server_, AnthropicRequest("x", true)).body);
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(json::parse(events[events.size() - 2])["delta"]["stop_reason"], anthropic);
    const json o = json::parse(PostOpenAi(server_, OpenAiRequest("x")).body);
    EXPECT_EQ(o["choices"][0]["finish_reason"], openai) << canonical;
  }
}

TEST_F(MockServerTest, GivenUsageIsSentAsIs) {
  Reply reply;
  reply.text = "t";
  reply.usage = {100, 7, 30, 20};
  Serve(reply);
  const json a = json::parse(PostAnthropic(server_, AnthropicRequest("x")).body);
  EXPECT_EQ(a["usage"], json({{"input_tokens", 100},
                              {"cache_creation_input_tokens", 30},
                              {"cache_read_input_tokens", 20},
                              {"output_tokens", 7}}));
  // message_delta carries the cumulative usage: a client must overwrite, not add.
  const std::vector<std::string> events =
      DataLines(PostAnthropic(server_, AnthropicRequest("x", true)).body);
  EXPECT_EQ(json::parse(events[0])["message"]["usage"]["input_tokens"], 100);
  EXPECT_EQ(json::parse(events[events.size() - 2])["usage"]["output_tokens"], 7);
  EXPECT_EQ(json::parse(events[events.size() - 2])["usage"]["input_tokens"], 100);
  const json o = json::parse(PostOpenAi(server_, OpenAiRequest("x")).body);
  EXPECT_EQ(o["usage"]["prompt_tokens"], 150);
  EXPECT_EQ(o["usage"]["completion_tokens"], 7);
  EXPECT_EQ(o["usage"]["total_tokens"], 157);
  EXPECT_EQ(o["usage"]["prompt_tokens_details"]["cached_tokens"], 20);
}

// A conversation of `turns` user/assistant exchanges, each user text ~`bytes` long, with a
// cache_control breakpoint on the last message (Anthropic) when `breakpoint`.
json Conversation(int turns, size_t bytes, bool breakpoint) {
  json messages = json::array();
  for (int i = 0; i < turns; ++i) {
    if (i > 0) messages.push_back({{"role", "assistant"}, {"content", "ok " + std::to_string(i)}});
    messages.push_back(
        {{"role", "user"},
         {"content", {{{"type", "text"}, {"text", std::to_string(i) + std::string(bytes, 'x')}}}}});
  }
  if (breakpoint) messages.back()["content"].back()["cache_control"] = {{"type", "ephemeral"}};
  return messages;
}

TEST_F(MockServerTest, AnthropicBillsCacheReadsAtBreakpoints) {
  Reply reply;
  reply.text = "t";
  Serve(reply);
  auto usage_of = [&](int turns, bool breakpoint) {
    json req = AnthropicRequest("x");
    req["messages"] = Conversation(turns, 8000, breakpoint);
    return json::parse(PostAnthropic(server_, req).body)["usage"];
  };
  // First turn: ~2000 tokens written, nothing read.
  const json u1 = usage_of(1, true);
  EXPECT_EQ(u1["cache_read_input_tokens"], 0);
  EXPECT_GT(u1["cache_creation_input_tokens"].get<int64_t>(), 1900);
  // Second turn: the first turn's prefix (its breakpoint moved on) is read, the new turn written.
  const json u2 = usage_of(2, true);
  EXPECT_EQ(u2["cache_read_input_tokens"], u1["cache_creation_input_tokens"]);
  EXPECT_GT(u2["cache_creation_input_tokens"].get<int64_t>(), 1900);
  EXPECT_LT(u2["input_tokens"].get<int64_t>(), 100);
  // Control: without a breakpoint nothing is read or written.
  const json u3 = usage_of(3, false);
  EXPECT_EQ(u3["cache_read_input_tokens"], 0);
  EXPECT_EQ(u3["cache_creation_input_tokens"], 0);
  EXPECT_GT(u3["input_tokens"].get<int64_t>(), 6000);
  // A prefix under 1024 tokens is never cached.
  const json small = usage_of(1, true);
  json req = AnthropicRequest("short");
  req["messages"][0]["content"] = {
      {{"type", "text"}, {"text", "short"}, {"cache_control", {{"type", "ephemeral"}}}}};
  const json u4 = json::parse(PostAnthropic(server_, req).body)["usage"];
  EXPECT_EQ(u4["cache_creation_input_tokens"], 0);
  EXPECT_EQ(small["cache_read_input_tokens"], u1["cache_creation_input_tokens"]);
}

TEST_F(MockServerTest, OpenAiBillsTheLongestSeenPrefix) {
  Reply reply;
  reply.text = "t";
  Serve(reply);
  auto usage_of = [&](int turns) {
    json req = OpenAiRequest("x");
    req["messages"] = Conversation(turns, 8000, false);
    return json::parse(PostOpenAi(server_, req).body)["usage"];
  };
  const json u1 = usage_of(1);
  EXPECT_EQ(u1["prompt_tokens_details"]["cached_tokens"], 0);
  const json u2 = usage_of(2);
  const int64_t cached = u2["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  EXPECT_GE(cached, 1024);
  EXPECT_EQ((cached - 1024) % 128, 0);
  EXPECT_LE(cached, u1["prompt_tokens"].get<int64_t>());
  EXPECT_GT(cached, u1["prompt_tokens"].get<int64_t>() - 128);
  // Control: a different first message shares no prefix.
  json req = OpenAiRequest("x");
  req["messages"] = Conversation(2, 8000, false);
  req["messages"][0]["content"][0]["text"] = "changed" + std::string(8000, 'y');
  const json u3 = json::parse(PostOpenAi(server_, req).body)["usage"];
  EXPECT_EQ(u3["prompt_tokens_details"]["cached_tokens"], 0);
}

// ---- Validation ----

void ExpectAnthropicError(const RawResponse& r, int status, const std::string& type,
                          const std::string& message_part) {
  EXPECT_EQ(r.status, status);
  ASSERT_TRUE(r.headers.count("request-id"));
  const json body = json::parse(r.body);
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], type);
  EXPECT_NE(body["error"]["message"].get<std::string>().find(message_part), std::string::npos)
      << body.dump();
  EXPECT_EQ(body["request_id"], r.headers.at("request-id"));
}

void ExpectOpenAiError(const RawResponse& r, int status, const std::string& message_part) {
  EXPECT_EQ(r.status, status);
  EXPECT_TRUE(r.headers.count("x-request-id"));
  const json body = json::parse(r.body);
  ASSERT_TRUE(body.contains("error")) << r.body;
  for (const char* key : {"message", "type", "param", "code"}) {
    EXPECT_TRUE(body["error"].contains(key)) << key;
  }
  EXPECT_NE(body["error"]["message"].get<std::string>().find(message_part), std::string::npos)
      << body.dump();
}

// The mock thinks only when asked, signs its thinking, and holds a client to the API's rules.
TEST_F(MockServerTest, ThinkingBlocksAreSignedAndChecked) {
  Reply reply = TextAndBash();
  reply.thinking = "plan";
  Serve(reply);
  EXPECT_EQ(json::parse(PostAnthropic(server_, AnthropicRequest("x")).body)["content"][0]["type"],
            "text");  // Not enabled: no thinking block.
  json req = AnthropicRequest("x");
  req["max_tokens"] = 4096;
  req["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  const json first = json::parse(PostAnthropic(server_, req).body);
  ASSERT_EQ(first["content"][0]["type"], "thinking");
  EXPECT_EQ(first["content"][0]["signature"], ThinkingSignature("plan"));
  json content = first["content"];
  const std::string id = content.back()["id"];
  req["messages"].push_back({{"role", "assistant"}, {"content", content}});
  req["messages"].push_back(
      {{"role", "user"},
       {"content", {{{"type", "tool_result"}, {"tool_use_id", id}, {"content", "ok"}}}}});
  EXPECT_EQ(PostAnthropic(server_, req).status, 200);
  json changed = req;
  changed["messages"][1]["content"][0]["thinking"] = "edited";
  ExpectAnthropicError(PostAnthropic(server_, changed), 400, "invalid_request_error",
                       "Invalid `signature`");
  json dropped = req;
  dropped["messages"][1]["content"].erase(0);
  ExpectAnthropicError(PostAnthropic(server_, dropped), 400, "invalid_request_error",
                       "must start with a thinking block");
  // A bare string where the assistant's message goes: the API's 400, not a mock failure (500).
  json bare = req;
  bare["messages"][1] = "not a message";
  const auto bad = PostAnthropic(server_, bare);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.body.find("mock: internal error"), std::string::npos) << bad.body;
}

TEST_F(MockServerTest, AnthropicNeedsKeyAndVersion) {
  Serve(TextAndBash());
  ExpectAnthropicError(
      PostAnthropic(server_, AnthropicRequest("x"), {{"anthropic-version", "2023-06-01"}}), 401,
      "authentication_error", "x-api-key");
  ExpectAnthropicError(PostAnthropic(server_, AnthropicRequest("x"),
                                     {{"x-api-key", ""}, {"anthropic-version", "2023-06-01"}}),
                       401, "authentication_error", "x-api-key");
  ExpectAnthropicError(PostAnthropic(server_, AnthropicRequest("x"), {{"x-api-key", "k"}}), 400,
                       "invalid_request_error", "anthropic-version");
  ExpectAnthropicError(PostAnthropic(server_, AnthropicRequest("x"),
                                     {{"x-api-key", "k"}, {"anthropic-version", "2099-01-01"}}),
                       400, "invalid_request_error", "anthropic-version");
  server_.set_require_key(false);
  EXPECT_EQ(
      PostAnthropic(server_, AnthropicRequest("x"), {{"anthropic-version", "2023-06-01"}}).status,
      200);
}

TEST_F(MockServerTest, AnthropicRejectsInvalidConversations) {
  Serve(TextAndBash());
  const json tool_use = {{"role", "assistant"},
                         {"content", json::array({{{"type", "tool_use"},
                                                   {"id", "toolu_1"},
                                                   {"name", "bash"},
                                                   {"input", json::object()}}})}};
  auto with = [](json messages) {
    json r = AnthropicRequest("x");
    r["messages"] = std::move(messages);
    return r;
  };
  auto result = [](const std::string& id) {
    return json{{"role", "user"},
                {"content",
                 json::array({{{"type", "tool_result"}, {"tool_use_id", id}, {"content", "ok"}}})}};
  };
  const json user = {{"role", "user"}, {"content", "hi"}};
  ExpectAnthropicError(PostAnthropic(server_, with({user, user})), 400, "invalid_request_error",
                       "roles must alternate");
  ExpectAnthropicError(PostAnthropic(server_, with({user, tool_use, user})), 400,
                       "invalid_request_error", "`tool_use` ids were found without `tool_result`");
  ExpectAnthropicError(PostAnthropic(server_, with({user, tool_use})), 400, "invalid_request_error",
                       "toolu_1");
  ExpectAnthropicError(PostAnthropic(server_, with({user, tool_use, result("toolu_other")})), 400,
                       "invalid_request_error", "unexpected `tool_use_id`");
  ExpectAnthropicError(PostAnthropic(server_, with({{{"role", "user"}, {"content", ""}}})), 400,
                       "invalid_request_error", "non-empty content");
  ExpectAnthropicError(
      PostAnthropic(
          server_,
          with({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", ""}}})}}})),
      400, "invalid_request_error", "text content blocks must be non-empty");
  ExpectAnthropicError(PostAnthropic(server_, with({{{"role", "assistant"}, {"content", "a"}}})),
                       400, "invalid_request_error", "first message");
  json no_max = AnthropicRequest("x");
  no_max.erase("max_tokens");
  ExpectAnthropicError(PostAnthropic(server_, no_max), 400, "invalid_request_error", "max_tokens");
  ExpectAnthropicError(Post(server_, "/v1/messages", "{not json", kAnthropicHeaders), 400,
                       "invalid_request_error", "JSON");
  // The valid round trip passes.
  EXPECT_EQ(PostAnthropic(server_, with({user, tool_use, result("toolu_1")})).status, 200);
  EXPECT_EQ(server_.requests().back().view.LastUserText(), "ok");
}

TEST_F(MockServerTest, OpenAiAuthAndLocalServerStyle) {
  Serve(TextAndBash());
  ExpectOpenAiError(PostOpenAi(server_, OpenAiRequest("x"), {}), 401, "API key");
  ExpectOpenAiError(PostOpenAi(server_, OpenAiRequest("x"), {{"Authorization", "Bearer "}}), 401,
                    "API key");
  ExpectOpenAiError(PostOpenAi(server_, OpenAiRequest("x"), {{"Authorization", "sk-test"}}), 401,
                    "API key");
  json scenario = {{"require_key", false}, {"rules", json::array({{{"reply", {{"text", "ok"}}}}})}};
  server_.SetScenario(Scenario::FromJson(scenario));
  EXPECT_EQ(PostOpenAi(server_, OpenAiRequest("x"), {}).status, 200);
}

TEST_F(MockServerTest, OpenAiRejectsInvalidConversations) {
  Serve(TextAndBash());
  auto with = [](json messages) {
    json r = OpenAiRequest("x");
    r["messages"] = std::move(messages);
    return r;
  };
  const json user = {{"role", "user"}, {"content", "hi"}};
  const json calls = {
      {"role", "assistant"},
      {"content", nullptr},
      {"tool_calls", json::array({{{"id", "call_1"},
                                   {"type", "function"},
                                   {"function", {{"name", "bash"}, {"arguments", "{}"}}}}})}};
  const json tool = {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "out"}};
  ExpectOpenAiError(PostOpenAi(server_, with({user, tool})), 400,
                    "must be a response to a preceeding message");
  ExpectOpenAiError(PostOpenAi(server_, with({user, calls, user})), 400,
                    "did not have response messages: call_1");
  json empty_calls = calls;
  empty_calls["tool_calls"] = json::array();
  ExpectOpenAiError(PostOpenAi(server_, with({user, empty_calls})), 400, "empty array");
  json object_args = calls;
  object_args["tool_calls"][0]["function"]["arguments"] = json::object();
  ExpectOpenAiError(PostOpenAi(server_, with({user, object_args, tool})), 400, "expected a string");
  ExpectOpenAiError(Post(server_, "/v1/chat/completions", "{", kOpenAiHeaders), 400,
                    "could not parse the JSON body");
  EXPECT_EQ(PostOpenAi(server_, with({user, calls, tool})).status, 200);
  const RecordedRequest last = server_.requests().back();
  EXPECT_EQ(last.view.assistant_turns, 1);
  ASSERT_EQ(last.view.tool_results.size(), 1u);
  EXPECT_EQ(last.view.tool_results[0].tool_use_id, "call_1");
  EXPECT_EQ(last.view.LastUserText(), "out");
}

// ---- Scenarios ----

TEST(MockScenario, RulesMatchOverBothFormats) {
  const Scenario proto = Scenario::FromText(R"({"rules": [
    {"when": {"has_tool": "task"}, "reply": {"text": "parent"}},
    {"when": {"no_tools": true}, "reply": {"text": "summary"}},
    {"when": {"turn": 1, "last_user_contains": "RESULT"}, "reply": {"text": "after tool"}},
    {"when": {"system_contains": "subagent", "first_user_contains": "login",
              "lacks_tool": "task"}, "reply": {"text": "child"}},
    {"when": {"any_contains": "\"max_tokens\""}, "reply": {"text": "raw"}},
    {"when": {"format": "openai"}, "reply": {"text": "openai"}}
  ]})");
  auto pick = [&](Format format, const json& body) -> int {
    Scenario s = proto;
    RequestView view;
    const std::string raw = body.dump();
    if (auto e = BuildRequestView(format, raw, &view)) {
      ADD_FAILURE() << e->message;
      return -2;
    }
    auto i = s.Pick(view, raw);
    return i ? static_cast<int>(*i) : -1;
  };
  json a = AnthropicRequest("check the login flow");
  json o = OpenAiRequest("check the login flow");
  EXPECT_EQ(pick(Format::kAnthropic, a), 3);
  EXPECT_EQ(pick(Format::kOpenAi, o), 3);
  a["tools"].push_back({{"name", "task"}, {"input_schema", {{"type", "object"}}}});
  o["tools"].push_back({{"type", "function"}, {"function", {{"name", "task"}}}});
  EXPECT_EQ(pick(Format::kAnthropic, a), 0);
  EXPECT_EQ(pick(Format::kOpenAi, o), 0);
  a.erase("tools");
  o.erase("tools");
  EXPECT_EQ(pick(Format::kAnthropic, a), 1);
  EXPECT_EQ(pick(Format::kOpenAi, o), 1);
  // A tool round trip: turn 1, last user text is the tool result.
  json at = AnthropicRequest("x");
  at["messages"].push_back(
      {{"role", "assistant"},
       {"content",
        json::array(
            {{{"type", "tool_use"}, {"id", "t1"}, {"name", "bash"}, {"input", json::object()}}})}});
  at["messages"].push_back(
      {{"role", "user"},
       {"content",
        json::array({{{"type", "tool_result"},
                      {"tool_use_id", "t1"},
                      {"content", json::array({{{"type", "text"}, {"text", "RESULT: ok"}}})}}})}});
  EXPECT_EQ(pick(Format::kAnthropic, at), 2);
  json ot = OpenAiRequest("x");
  ot["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls", json::array({{{"id", "c1"},
                                    {"type", "function"},
                                    {"function", {{"name", "bash"}, {"arguments", "{}"}}}}})}});
  ot["messages"].push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "RESULT: ok"}});
  EXPECT_EQ(pick(Format::kOpenAi, ot), 2);
  EXPECT_EQ(pick(Format::kAnthropic, AnthropicRequest("other")), 4);
  json plain = OpenAiRequest("other");
  plain["messages"].erase(0);  // No system prompt.
  EXPECT_EQ(pick(Format::kOpenAi, plain), 5);
}

TEST(MockScenario, StrictParsingNamesThePath) {
  auto error = [](const std::string& text) -> std::string {
    try {
      Scenario::FromText(text);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(
      error(R"({"rules":[{"when":{"has_tol":"x"},"reply":{}}]})").find("$.rules[0].when.has_tol"),
      std::string::npos);
  EXPECT_NE(error(R"({"rules":[{"fault":{"kind":"explode"}}]})").find("explode"),
            std::string::npos);
  EXPECT_NE(error(R"({"rules":[{"reply":{"stop_reason":"done"}}]})").find("stop_reason"),
            std::string::npos);
  EXPECT_NE(error(R"({"rules":[{"when":{}}]})").find("needs a \"reply\" or a \"fault\""),
            std::string::npos);
  EXPECT_NE(error(R"({"rules":[{"times":0,"reply":{}}]})").find("times"), std::string::npos);
  EXPECT_NE(error(R"({"rules":[{"reply":{"text":1}}]})").find("must be a string"),
            std::string::npos);
  EXPECT_NE(error("{\"rules\": [").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error(R"({"rulez":[]})").find("unknown key"), std::string::npos);
  EXPECT_EQ(error("// comments are fine\n{\"rules\": [{\"reply\": {\"text\": \"x\"}}]}"), "");
  try {
    Scenario::FromFile("/nonexistent/scenario.json");
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/scenario.json"), std::string::npos);
  }
}

// The scenario files the demo and the benchmarks ship must load in the mock.
TEST(MockScenario, RepositoryScenarioFilesParse) {
  namespace fs = std::filesystem;
  int files = 0;
  for (const char* dir : {"examples/scenarios", "tests/bench/scenarios", "tests/mock/scenarios"}) {
    const fs::path path = fs::path(FORKBOX_SOURCE_DIR) / dir;
    if (!fs::is_directory(path)) continue;
    for (const auto& entry : fs::directory_iterator(path)) {
      if (entry.path().extension() != ".json") continue;
      ++files;
      EXPECT_NO_THROW(Scenario::FromFile(entry.path().string())) << entry.path();
    }
  }
  EXPECT_GT(files, 0);
}

TEST_F(MockServerTest, TimesThenNextRuleAndNoRuleIs500) {
  server_.SetScenario(Scenario::FromText(R"({"rules": [
    {"when": {"first_user_contains": "retry"}, "times": 2,
     "fault": {"kind": "status", "status": 529}},
    {"when": {"first_user_contains": "retry"}, "times": 1, "reply": {"text": "finally"}}
  ]})"));
  EXPECT_EQ(PostAnthropic(server_, AnthropicRequest("retry")).status, 529);
  EXPECT_EQ(PostAnthropic(server_, AnthropicRequest("retry")).status, 529);
  const RawResponse ok = PostAnthropic(server_, AnthropicRequest("retry"));
  ASSERT_EQ(ok.status, 200);
  EXPECT_EQ(json::parse(ok.body)["content"][0]["text"], "finally");
  ExpectAnthropicError(PostAnthropic(server_, AnthropicRequest("retry")), 500, "api_error",
                       "mock: no rule matched");
  ExpectOpenAiError(PostOpenAi(server_, OpenAiRequest("retry")), 500, "mock: no rule matched");
  const std::vector<RecordedRequest> reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 5u);
  EXPECT_EQ(reqs[0].rule, 0);
  EXPECT_EQ(reqs[2].rule, 1);
  EXPECT_EQ(reqs[3].outcome, "no_rule");
}

TEST_F(MockServerTest, HandlerSeesTheRequestAndItsExceptionsBecome500) {
  server_.SetHandler([](const RecordedRequest& r) -> Reply {
    if (r.view.FirstUserText() == "boom") throw std::runtime_error("kaboom");
    Reply reply;
    reply.text = "echo " + r.view.FirstUserText() + " " + r.Header("X-Api-Key");
    return reply;
  });
  const RawResponse ok = PostAnthropic(server_, AnthropicRequest("ping"));
  EXPECT_EQ(json::parse(ok.body)["content"][0]["text"], "echo ping sk-ant-test");
  ExpectAnthropicError(PostAnthropic(server_, AnthropicRequest("boom")), 500, "api_error",
                       "mock: handler threw: kaboom");
}

// ---- Faults ----

Reply WithFault(Fault::Kind kind, int status = 0) {
  Reply r = TextAndBash();
  r.text = "A fairly long answer that is streamed in more than one delta, to cut it.";
  Fault f;
  f.kind = kind;
  f.status = status;
  r.fault = f;
  return r;
}

TEST_F(MockServerTest, StatusFaultHasProviderBodyAndRetryHeaders) {
  Reply r = WithFault(Fault::Kind::kStatus, 429);
  r.fault->retry_after = "3";
  r.fault->retry_after_ms = "2500";
  r.fault->should_retry = "true";
  Serve(r);
  for (bool stream : {false, true}) {
    const RawResponse a = PostAnthropic(server_, AnthropicRequest("x", stream));
    ExpectAnthropicError(a, 429, "rate_limit_error", "rate limit");
    EXPECT_EQ(a.headers.at("retry-after"), "3");
    EXPECT_EQ(a.headers.at("retry-after-ms"), "2500");
    EXPECT_EQ(a.headers.at("x-should-retry"), "true");
    const RawResponse o = PostOpenAi(server_, OpenAiRequest("x", stream));
    ExpectOpenAiError(o, 429, "Rate limit");
    EXPECT_EQ(json::parse(o.body)["error"]["code"], "rate_limit_exceeded");
    EXPECT_EQ(o.headers.at("retry-after"), "3");
  }
  r.fault->status = 529;
  r.fault->retry_after.clear();
  r.fault->error_type = "overloaded_error";
  r.fault->message = "Overloaded";
  Serve(r);
  const RawResponse a = PostAnthropic(server_, AnthropicRequest("x"));
  ExpectAnthropicError(a, 529, "overloaded_error", "Overloaded");
  EXPECT_EQ(a.headers.count("retry-after"), 0u);
}

TEST_F(MockServerTest, HtmlFaultIsAProxyPage) {
  Serve(WithFault(Fault::Kind::kHtml));
  for (bool openai : {false, true}) {
    const RawResponse r = openai ? PostOpenAi(server_, OpenAiRequest("x", true))
                                 : PostAnthropic(server_, AnthropicRequest("x", true));
    EXPECT_EQ(r.status, 502);
    EXPECT_EQ(r.headers.at("content-type"), "text/html");
    EXPECT_NE(r.body.find("<title>502 Bad Gateway</title>"), std::string::npos);
    EXPECT_NE(r.body.find("nginx"), std::string::npos);
    EXPECT_TRUE(json::parse(r.body, nullptr, false).is_discarded());
  }
}

TEST_F(MockServerTest, DropConnectionSendsNothing) {
  Serve(WithFault(Fault::Kind::kDropConnection));
  for (bool stream : {false, true}) {
    const RawResponse r = PostAnthropic(server_, AnthropicRequest("x", stream));
    EXPECT_FALSE(r.got_anything);
  }
  ASSERT_TRUE(server_.WaitForComplete(2, kWait));
  EXPECT_EQ(server_.request(0).outcome, "fault:drop_connection");
  // The server keeps serving afterwards.
  Serve(TextAndBash());
  EXPECT_EQ(PostAnthropic(server_, AnthropicRequest("x")).status, 200);
}

TEST_F(MockServerTest, CutStreamClosesMidEvent) {
  Serve(WithFault(Fault::Kind::kCutStream));
  for (bool openai : {false, true}) {
    const RawResponse r = openai ? PostOpenAi(server_, OpenAiRequest("x", true))
                                 : PostAnthropic(server_, AnthropicRequest("x", true));
    EXPECT_EQ(r.status, 200);
    EXPECT_FALSE(r.complete) << "terminating chunk must be missing";
    ASSERT_FALSE(r.body.empty());
    EXPECT_NE(r.body.substr(r.body.size() - 2), "\n\n") << "must end inside an event";
    EXPECT_EQ(r.body.find(openai ? "[DONE]" : "message_stop"), std::string::npos);
  }
  const RawResponse body = PostAnthropic(server_, AnthropicRequest("x", false));
  EXPECT_EQ(body.status, 200);
  EXPECT_FALSE(body.complete);
  EXPECT_LT(body.body.size(), std::stoul(body.headers.at("content-length")));
}

TEST_F(MockServerTest, NoStopEndsCleanlyWithoutTheStopEvent) {
  Serve(WithFault(Fault::Kind::kNoStop));
  const RawResponse a = PostAnthropic(server_, AnthropicRequest("x", true));
  EXPECT_TRUE(a.complete);
  EXPECT_EQ(a.body.find("message_stop"), std::string::npos);
  EXPECT_NE(a.body.find("event: message_delta"), std::string::npos);
  EXPECT_EQ(a.body.substr(a.body.size() - 2), "\n\n");
  const RawResponse o = PostOpenAi(server_, OpenAiRequest("x", true));
  EXPECT_TRUE(o.complete);
  EXPECT_EQ(o.body.find("[DONE]"), std::string::npos);
  EXPECT_NE(o.body.find("\"finish_reason\":\"tool_calls\""), std::string::npos);
}

TEST_F(MockServerTest, MalformedJsonWith200) {
  Serve(WithFault(Fault::Kind::kMalformedJson));
  for (bool openai : {false, true}) {
    const RawResponse body = openai ? PostOpenAi(server_, OpenAiRequest("x"))
                                    : PostAnthropic(server_, AnthropicRequest("x"));
    EXPECT_EQ(body.status, 200);
    EXPECT_TRUE(body.complete);
    EXPECT_TRUE(json::parse(body.body, nullptr, false).is_discarded());
    const RawResponse stream = openai ? PostOpenAi(server_, OpenAiRequest("x", true))
                                      : PostAnthropic(server_, AnthropicRequest("x", true));
    EXPECT_EQ(stream.status, 200);
    int broken = 0;
    for (const std::string& d : DataLines(stream.body)) {
      if (d != "[DONE]" && json::parse(d, nullptr, false).is_discarded()) ++broken;
    }
    EXPECT_EQ(broken, 1);
  }
}

TEST_F(MockServerTest, StreamErrorAfter200) {
  Serve(WithFault(Fault::Kind::kStreamError));
  const RawResponse a = PostAnthropic(server_, AnthropicRequest("x", true));
  EXPECT_EQ(a.status, 200);
  EXPECT_TRUE(a.complete);
  EXPECT_NE(a.body.find("event: message_start"), std::string::npos);
  const std::string tail =
      "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
      "\"message\":\"Overloaded\"}}\n\n";
  ASSERT_GE(a.body.size(), tail.size());
  EXPECT_EQ(a.body.substr(a.body.size() - tail.size()), tail);
  EXPECT_EQ(a.body.find("message_stop"), std::string::npos);
  const RawResponse o = PostOpenAi(server_, OpenAiRequest("x", true));
  EXPECT_EQ(o.status, 200);
  const std::vector<std::string> data = DataLines(o.body);
  ASSERT_FALSE(data.empty());
  EXPECT_TRUE(json::parse(data.back()).contains("error"));
  EXPECT_EQ(o.body.find("[DONE]"), std::string::npos);
  // Without streaming the overload is a status.
  ExpectAnthropicError(PostAnthropic(server_, AnthropicRequest("x")), 529, "overloaded_error",
                       "Overloaded");
  ExpectOpenAiError(PostOpenAi(server_, OpenAiRequest("x")), 503, "overloaded");
}

TEST_F(MockServerTest, DelaysShowInRecordedTimes) {
  Reply slow = WithFault(Fault::Kind::kSlowStream);
  slow.fault->event_delay_ms = 20;
  slow.delay_ms = 100;
  Serve(slow);
  const RawResponse r = PostAnthropic(server_, AnthropicRequest("x", true));
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(r.complete);
  const size_t events = DataLines(r.body).size();
  ASSERT_TRUE(server_.WaitForComplete(1, kWait));
  const RecordedRequest rec = server_.request(0);
  // The server slept at least this long between these recorded instants.
  EXPECT_GE(rec.first_byte_ns - rec.received_ns, 100'000'000);
  EXPECT_GE(rec.last_byte_ns - rec.first_byte_ns, static_cast<int64_t>(events - 1) * 20'000'000);
  EXPECT_EQ(rec.outcome, "fault:slow_stream");
}

TEST_F(MockServerTest, ClientHangingUpMidStreamIsRecordedAndHarmless) {
  Reply slow;
  for (int i = 0; i < 50; ++i) slow.text += "a chunk of text that goes on ";
  slow.event_delay_ms = 5;
  Serve(slow);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_.port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string body = AnthropicRequest("x", true).dump();
  const std::string req =
      "POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\n"
      "anthropic-version: 2023-06-01\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  char buf[256];
  ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);  // The stream has started.
  close(fd);
  ASSERT_TRUE(server_.WaitForComplete(1, kWait));
  EXPECT_NE(server_.request(0).outcome.find("aborted"), std::string::npos)
      << server_.request(0).outcome;
  EXPECT_EQ(PostAnthropic(server_, AnthropicRequest("x")).status, 200);  // Still serving.
}

TEST(MockTransmission, PlansFaultsForBothFormats) {
  Reply reply = ResolveReply(TextAndBash(), WireFor(Format::kOpenAi), 1, 400);
  WireContext ctx{"m", "id", 0, false};
  const Transmission normal = PlanReply(WireFor(Format::kOpenAi), reply, ctx, true, "req");
  reply.fault = Fault{};
  reply.fault->kind = Fault::Kind::kSlowStream;
  const Transmission slow = PlanReply(WireFor(Format::kOpenAi), reply, ctx, true, "req");
  EXPECT_EQ(slow.pieces, normal.pieces);
  EXPECT_EQ(slow.piece_delay_ms, 200);
  EXPECT_EQ(normal.piece_delay_ms, 0);
  reply.fault->kind = Fault::Kind::kNoStop;
  const Transmission no_stop = PlanReply(WireFor(Format::kOpenAi), reply, ctx, true, "req");
  EXPECT_EQ(no_stop.pieces.size() + 1, normal.pieces.size());
  EXPECT_EQ(reply.usage.input_tokens, 100);
}

TEST(MockWire, SplitUtf8NeverSplitsCodePoints) {
  const std::string text = "aé✓🚀bü";
  for (size_t max = 1; max <= text.size(); ++max) {
    std::string joined;
    for (const std::string& piece : SplitUtf8(text, max)) {
      EXPECT_FALSE(piece.empty());
      EXPECT_FALSE(json::parse(json(piece).dump(), nullptr, false).is_discarded());
      EXPECT_NE(static_cast<unsigned char>(piece[0]) & 0xC0, 0x80) << "starts mid code point";
      joined += piece;
    }
    EXPECT_EQ(joined, text);
  }
}

// ---- Recording, keep-alive, parallelism ----

TEST_F(MockServerTest, RecordsEverythingAndRedactsInJson) {
  Serve(TextAndBash());
  const json req = AnthropicRequest("record me", true);
  ASSERT_EQ(PostAnthropic(server_, req).status, 200);
  ASSERT_TRUE(server_.WaitForComplete(1, kWait));
  const RecordedRequest r = server_.request(0);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/messages");
  EXPECT_EQ(r.Header("X-API-KEY"), "sk-ant-test");
  EXPECT_EQ(r.Header("anthropic-version"), "2023-06-01");
  EXPECT_FALSE(r.HasHeader("REMOTE_ADDR"));
  EXPECT_EQ(r.body, req.dump());
  EXPECT_EQ(r.json, req);
  EXPECT_EQ(r.format, Format::kAnthropic);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.complete);
  EXPECT_GT(r.received_ns, 0);
  EXPECT_LE(r.received_ns, r.first_byte_ns);
  EXPECT_LE(r.first_byte_ns, r.last_byte_ns);
  const json j = r.ToJson();
  EXPECT_EQ(j["headers"]["x-api-key"], "[redacted]");
  EXPECT_EQ(j.dump().find("sk-ant-test"), std::string::npos);
  EXPECT_EQ(j["bytes"], req.dump().size());
  EXPECT_EQ(j["has_task_tool"], false);
  // Scripts read the same records over HTTP.
  httplib::Client cli("127.0.0.1", server_.port());
  auto res = cli.Get("/__requests");
  ASSERT_TRUE(res);
  const json all = json::parse(res->body);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["path"], "/v1/messages");
  ASSERT_TRUE(cli.Post("/__reset", "", "application/json"));
  EXPECT_EQ(server_.request_count(), 0u);
}

TEST_F(MockServerTest, UnknownPathIs404AndRecorded) {
  const RawResponse r = Post(server_, "/v1/complete", "{}", kAnthropicHeaders);
  ExpectAnthropicError(r, 404, "not_found_error", "Not Found");
  ASSERT_EQ(server_.request_count(), 1u);
  EXPECT_FALSE(server_.request(0).format.has_value());
  // An OpenAI base URL without /v1 gets OpenAI's answer.
  ExpectOpenAiError(Post(server_, "/chat/completions", "{}", kOpenAiHeaders), 404,
                    "Invalid URL (POST /chat/completions)");
}

// Bad input never crashes: mutated bodies of both formats always get a clear answer.
TEST(MockRequestView, MutatedBodiesNeverThrow) {
  const std::vector<json> seeds = {AnthropicRequest("hello", true),
                                   OpenAiRequest("hello", true, true)};
  const std::vector<json> junk = {nullptr,
                                  1,
                                  -5,
                                  "",
                                  "x",
                                  true,
                                  json::array(),
                                  json::object(),
                                  json::array({1, "a", nullptr}),
                                  {{"type", 7}, {"text", 3}}};
  uint32_t rng = 12345;
  auto next = [&] { return rng = rng * 1103515245u + 12345u; };
  for (int round = 0; round < 3000; ++round) {
    json body = seeds[round % 2];
    // Replace a few nodes anywhere in the tree with junk.
    for (int m = 0; m < 1 + static_cast<int>(next() % 3); ++m) {
      json flat = body.flatten();
      if (flat.empty()) break;
      auto it = flat.begin();
      std::advance(it, next() % flat.size());
      std::string pointer = it.key();
      if (next() % 2 && pointer.rfind('/') > 0) pointer = pointer.substr(0, pointer.rfind('/'));
      body[json::json_pointer(pointer)] = junk[next() % junk.size()];
    }
    for (Format format : {Format::kAnthropic, Format::kOpenAi}) {
      RequestView view;
      EXPECT_NO_THROW({
        auto error = BuildRequestView(format, body.dump(), &view);
        if (error) {
          EXPECT_FALSE(error->message.empty());
        }
      }) << body.dump();
    }
  }
}

TEST_F(MockServerTest, KeepAliveReusesOneConnection) {
  Serve(TextAndBash());
  httplib::Client cli("127.0.0.1", server_.port());
  cli.set_keep_alive(true);
  const httplib::Headers headers = {{"Authorization", "Bearer k"}};
  for (int i = 0; i < 3; ++i) {
    auto res = cli.Post("/v1/chat/completions", headers, OpenAiRequest("x", i % 2 == 1).dump(),
                        "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }
  const std::vector<RecordedRequest> reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].remote_port, reqs[1].remote_port);
  EXPECT_EQ(reqs[1].remote_port, reqs[2].remote_port);
}

// Processes a test spawns must not inherit the mock's sockets (they would keep cut
// connections open).
TEST_F(MockServerTest, ServerSocketsAreCloseOnExec) {
  Serve(TextAndBash());
  httplib::Client cli("127.0.0.1", server_.port());
  cli.set_keep_alive(true);
  auto res = cli.Post("/v1/chat/completions", httplib::Headers{{"Authorization", "Bearer k"}},
                      OpenAiRequest("x").dump(), "application/json");
  ASSERT_TRUE(res);
  int listeners = 0, connections = 0;
  ForEachSocket(server_.port(), [&](int fd, int peer_port) {
    ++(peer_port < 0 ? listeners : connections);
    EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC) << "fd " << fd;
    return true;
  });
  EXPECT_EQ(listeners, 1);
  EXPECT_EQ(connections, 1);  // The kept-alive connection.
}

TEST_F(MockServerTest, ParallelRequestsOverlap) {
  // Each handler waits until both requests have arrived: a serial server would never answer.
  server_.SetHandler([this](const RecordedRequest&) {
    Reply r;
    r.text = server_.WaitForRequests(2, kWait) ? "both here" : "alone";
    return r;
  });
  RawResponse a, b;
  std::thread t1([&] { a = PostAnthropic(server_, AnthropicRequest("one", true)); });
  std::thread t2([&] { b = PostOpenAi(server_, OpenAiRequest("two", true)); });
  t1.join();
  t2.join();
  EXPECT_NE(a.body.find("both here"), std::string::npos);
  EXPECT_NE(b.body.find("both here"), std::string::npos);
  const std::vector<RecordedRequest> reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_LT(reqs[1].received_ns, reqs[0].last_byte_ns);
  EXPECT_LT(reqs[0].received_ns, reqs[1].last_byte_ns);
}

TEST(MockServerLifecycle, StopWithoutStartReleasesThePort) {
  int port = 0;
  {
    MockServer unused;
    port = unused.port();
    unused.Stop();
    EXPECT_THROW(unused.Start(), std::logic_error);
  }
  MockServer again(port);  // Throws if the first one still held the port.
  again.Start();
  EXPECT_EQ(again.port(), port);
  again.SetHandler([](const RecordedRequest&) {
    Reply r;
    r.text = "ok";
    return r;
  });
  EXPECT_EQ(PostAnthropic(again, AnthropicRequest("x")).status, 200);
}

// ---- The standalone binary ----

struct Spawned {
  pid_t pid = -1;
  int out = -1;  // Read end of its stdout.
};

Spawned SpawnMock(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  std::vector<char*> argv;
  std::string bin = FORKBOX_MOCK_BIN;
  argv.push_back(bin.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  Spawned s;
  if (posix_spawn(&s.pid, bin.c_str(), &actions, nullptr, argv.data(), environ) != 0) s.pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  s.out = fds[0];
  return s;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/forkbox-mock-test-" + std::to_string(getpid()) + "-" +
         name;
}

TEST(MockBinary, ServesScenarioLogsAndExitsOnSigterm) {
  const std::string scenario = TempPath("scenario.json"), port_file = TempPath("port"),
                    log = TempPath("log");
  std::ofstream(scenario)
      << R"({"rules": [{"when": {"has_tool": "task"}, "reply": {"text": "parent"}},
                                           {"reply": {"text": "child"}}]})";
  std::remove(log.c_str());
  Spawned s = SpawnMock({"--scenario", scenario, "--port-file", port_file, "--log", log});
  ASSERT_GT(s.pid, 0);
  const std::string line = ReadLine(s.out);  // Blocks until it listens.
  ASSERT_EQ(line.rfind("listening on 127.0.0.1:", 0), 0u) << line;
  const int port = std::stoi(line.substr(line.rfind(':') + 1));
  std::ifstream pf(port_file);
  int file_port = 0;
  pf >> file_port;
  EXPECT_EQ(file_port, port);

  httplib::Client cli("127.0.0.1", port);
  json req = AnthropicRequest("hello");
  req["tools"].push_back({{"name", "task"}, {"input_schema", {{"type", "object"}}}});
  auto res =
      cli.Post("/v1/messages",
               httplib::Headers{{"x-api-key", "sk-secret"}, {"anthropic-version", "2023-06-01"}},
               req.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["content"][0]["text"], "parent");

  ASSERT_EQ(kill(s.pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(s.pid, &status, 0), s.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(s.out);

  std::ifstream in(log);
  std::string first;
  ASSERT_TRUE(std::getline(in, first));
  const json entry = json::parse(first);
  EXPECT_EQ(entry["has_task_tool"], true);
  EXPECT_EQ(entry["bytes"], req.dump().size());
  EXPECT_EQ(entry["status"], 200);
  EXPECT_EQ(first.find("sk-secret"), std::string::npos);
  std::string second;
  EXPECT_FALSE(std::getline(in, second));
  std::remove(scenario.c_str());
  std::remove(port_file.c_str());
  std::remove(log.c_str());
}

TEST(MockBinary, ExitsCleanlyOnSigint) {
  const std::string scenario = TempPath("sigint.json");
  std::ofstream(scenario) << R"({"rules": [{"reply": {"text": "x"}}]})";
  Spawned s = SpawnMock({"--scenario", scenario});
  ASSERT_GT(s.pid, 0);
  ASSERT_EQ(ReadLine(s.out).rfind("listening on 127.0.0.1:", 0), 0u);
  ASSERT_EQ(kill(s.pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(s.pid, &status, 0), s.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(s.out);
  std::remove(scenario.c_str());
}

TEST(MockBinary, BadScenarioFailsClearly) {
  const std::string scenario = TempPath("bad.json");
  std::ofstream(scenario) << R"({"rules": [{"fault": {"kind": "meltdown"}}]})";
  Spawned s = SpawnMock({"--scenario", scenario});
  ASSERT_GT(s.pid, 0);
  EXPECT_EQ(ReadAll(s.out), "");
  int status = 0;
  ASSERT_EQ(waitpid(s.pid, &status, 0), s.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  close(s.out);
  std::remove(scenario.c_str());
}

}  // namespace
}  // namespace forkbox::mock
