// A streamed reply costs memory traffic linear in its length: the decoders append each delta in
// place. Checked without clocks: this binary counts the bytes operator new hands out while a
// stream is decoded, and doubling the number of deltas must about double them (a decoder that
// copies the whole text per delta quadruples them).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "agent/anthropic.h"
#include "agent/openai.h"
#include "agent/wire.h"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<size_t> g_allocated{0};

}  // namespace

// The whole binary's allocations go through here; only a measured decode is counted. Not inlined:
// GCC would then pair a new-expression with free() and warn.
[[gnu::noinline]] void* operator new(size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocated.fetch_add(size, std::memory_order_relaxed);
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace forkbox::agent {
namespace {

using nlohmann::json;

std::string Event(const std::string& name, const json& data) {
  return "event: " + name + "\ndata: " + data.dump() + "\n\n";
}

// A stream of one content block of `type` whose `field` grows by `deltas` one-byte deltas of
// `delta_type`. The start, the deltas and the stop are returned separately.
struct AnthropicStreamParts {
  std::string head;
  std::string delta;  // One event; sent `deltas` times.
  std::string tail;
};

AnthropicStreamParts AnthropicParts(const json& block, const json& delta, const char* stop) {
  AnthropicStreamParts p;
  p.head = Event("message_start", {{"type", "message_start"},
                                   {"message",
                                    {{"id", "msg_1"},
                                     {"type", "message"},
                                     {"role", "assistant"},
                                     {"content", json::array()},
                                     {"model", "claude-sonnet-4-5"},
                                     {"stop_reason", nullptr},
                                     {"usage", {{"input_tokens", 1}, {"output_tokens", 1}}}}}}) +
           Event("content_block_start",
                 {{"type", "content_block_start"}, {"index", 0}, {"content_block", block}});
  p.delta = Event("content_block_delta",
                  {{"type", "content_block_delta"}, {"index", 0}, {"delta", delta}});
  p.tail = Event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}) +
           Event("message_delta", {{"type", "message_delta"},
                                   {"delta", {{"stop_reason", stop}}},
                                   {"usage", {{"output_tokens", 2}}}}) +
           Event("message_stop", {{"type", "message_stop"}});
  return p;
}

// Bytes allocated while decoding the stream with `deltas` deltas; *out gets the result.
size_t AnthropicBytes(const AnthropicStreamParts& p, int deltas, Decoded* out) {
  auto decoder = NewAnthropicStreamDecoder(nullptr);
  g_allocated = 0;
  g_counting = true;
  decoder->Feed(p.head);
  for (int i = 0; i < deltas; ++i) decoder->Feed(p.delta);
  decoder->Feed(p.tail);
  *out = decoder->Finish();
  g_counting = false;
  return g_allocated;
}

constexpr int kDeltas = 5000;
// Linear: the ratio is about 2 (a growing string's doublings included). Quadratic: about 4.
constexpr double kMaxGrowth = 2.5;

TEST(StreamGrowth, AnthropicTextDeltasAreAppendedInPlace) {
  const AnthropicStreamParts p = AnthropicParts(
      {{"type", "text"}, {"text", ""}}, {{"type", "text_delta"}, {"text", "x"}}, "end_turn");
  Decoded small;
  Decoded big;
  const size_t small_bytes = AnthropicBytes(p, kDeltas, &small);
  const size_t big_bytes = AnthropicBytes(p, 2 * kDeltas, &big);
  ASSERT_FALSE(big.result.error) << big.result.error->ToString();
  EXPECT_EQ(TextOf(big.result.response.message), std::string(2 * kDeltas, 'x'));
  EXPECT_LT(static_cast<double>(big_bytes), kMaxGrowth * static_cast<double>(small_bytes))
      << small_bytes << " bytes for " << kDeltas << " deltas, " << big_bytes << " for twice";
}

TEST(StreamGrowth, AnthropicThinkingAndSignatureDeltasAreAppendedInPlace) {
  for (const char* kind : {"thinking", "signature"}) {
    SCOPED_TRACE(kind);
    const AnthropicStreamParts p =
        AnthropicParts({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}},
                       {{"type", std::string(kind) + "_delta"}, {kind, "x"}}, "end_turn");
    Decoded small;
    Decoded big;
    const size_t small_bytes = AnthropicBytes(p, kDeltas, &small);
    const size_t big_bytes = AnthropicBytes(p, 2 * kDeltas, &big);
    ASSERT_FALSE(big.result.error) << big.result.error->ToString();
    ASSERT_EQ(big.result.response.message.content.size(), 1u);
    const json& raw = std::get<ThinkingBlock>(big.result.response.message.content[0]).raw;
    EXPECT_EQ(raw[kind], std::string(2 * kDeltas, 'x'));
    EXPECT_LT(static_cast<double>(big_bytes), kMaxGrowth * static_cast<double>(small_bytes))
        << small_bytes << " bytes for " << kDeltas << " deltas, " << big_bytes << " for twice";
  }
}

TEST(StreamGrowth, AnthropicToolArgumentDeltasAreAppendedInPlace) {
  // {"s":"xxx...x"} sent as {"s":" then one-byte deltas; the closing "} comes in the tail.
  AnthropicStreamParts p = AnthropicParts(
      {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "bash"}, {"input", json::object()}},
      {{"type", "input_json_delta"}, {"partial_json", "x"}}, "tool_use");
  p.head += Event("content_block_delta",
                  {{"type", "content_block_delta"},
                   {"index", 0},
                   {"delta", {{"type", "input_json_delta"}, {"partial_json", "{\"s\":\""}}}});
  p.tail = Event("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", 0},
                  {"delta", {{"type", "input_json_delta"}, {"partial_json", "\"}"}}}}) +
           p.tail;
  Decoded small;
  Decoded big;
  const size_t small_bytes = AnthropicBytes(p, kDeltas, &small);
  const size_t big_bytes = AnthropicBytes(p, 2 * kDeltas, &big);
  ASSERT_FALSE(big.result.error) << big.result.error->ToString();
  const std::vector<ToolUseBlock> uses = ToolUsesOf(big.result.response.message);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].input, json({{"s", std::string(2 * kDeltas, 'x')}}));
  EXPECT_LT(static_cast<double>(big_bytes), kMaxGrowth * static_cast<double>(small_bytes))
      << small_bytes << " bytes for " << kDeltas << " deltas, " << big_bytes << " for twice";
}

// Bytes allocated while decoding an OpenAI stream of `deltas` chunks each adding "x" to the text
// and to one tool call's arguments.
size_t OpenAiBytes(int deltas, Decoded* out) {
  const std::string chunk =
      "data: " +
      json({{"choices",
             {{{"index", 0},
               {"delta",
                {{"content", "x"},
                 {"tool_calls", {{{"index", 0}, {"function", {{"arguments", "x"}}}}}}}}}}}})
          .dump() +
      "\n\n";
  const std::string head =
      "data: " +
      json({{"choices",
             {{{"index", 0},
               {"delta",
                {{"role", "assistant"},
                 {"tool_calls",
                  {{{"index", 0},
                    {"id", "call_1"},
                    {"type", "function"},
                    {"function", {{"name", "bash"}, {"arguments", "{\"s\":\""}}}}}}}}}}}})
          .dump() +
      "\n\n";
  const std::string tail =
      "data: " +
      json({{"choices",
             {{{"index", 0},
               {"delta", {{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "\"}"}}}}}}}},
               {"finish_reason", "tool_calls"}}}}})
          .dump() +
      "\n\ndata: [DONE]\n\n";
  auto decoder = NewOpenAiStreamDecoder(nullptr);
  g_allocated = 0;
  g_counting = true;
  decoder->Feed(head);
  for (int i = 0; i < deltas; ++i) decoder->Feed(chunk);
  decoder->Feed(tail);
  *out = decoder->Finish();
  g_counting = false;
  return g_allocated;
}

TEST(StreamGrowth, OpenAiTextAndArgumentDeltasAreAppendedInPlace) {
  Decoded small;
  Decoded big;
  const size_t small_bytes = OpenAiBytes(kDeltas, &small);
  const size_t big_bytes = OpenAiBytes(2 * kDeltas, &big);
  ASSERT_FALSE(big.result.error) << big.result.error->ToString();
  EXPECT_EQ(TextOf(big.result.response.message), std::string(2 * kDeltas, 'x'));
  const std::vector<ToolUseBlock> uses = ToolUsesOf(big.result.response.message);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].input, json({{"s", std::string(2 * kDeltas, 'x')}}));
  EXPECT_LT(static_cast<double>(big_bytes), kMaxGrowth * static_cast<double>(small_bytes))
      << small_bytes << " bytes for " << kDeltas << " deltas, " << big_bytes << " for twice";
}

}  // namespace
}  // namespace forkbox::agent
