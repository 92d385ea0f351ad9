// The SSE parser: framing variants, and the same events however the input is split.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/sse.h"

namespace forkbox::agent {
namespace {

struct Collected {
  std::vector<SseEvent> events;
  bool partial = false;
};

// Feeds `input` in pieces cut at the given offsets.
Collected Parse(std::string_view input, const std::vector<size_t>& cuts = {}) {
  SseParser parser;
  Collected out;
  size_t pos = 0;
  auto sink = [&](const SseEvent& e) { out.events.push_back(e); };
  for (size_t cut : cuts) {
    EXPECT_TRUE(parser.Feed(input.substr(pos, cut - pos), sink));
    pos = cut;
  }
  EXPECT_TRUE(parser.Feed(input.substr(pos), sink));
  out.partial = parser.HasPartialEvent();
  return out;
}

void ExpectSame(const std::vector<SseEvent>& a, const std::vector<SseEvent>& b,
                const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].event, b[i].event) << where << " event " << i;
    EXPECT_EQ(a[i].data, b[i].data) << where << " event " << i;
    EXPECT_EQ(a[i].id, b[i].id) << where << " event " << i;
  }
}

TEST(SseParser, ParsesEventAndData) {
  Collected c = Parse("event: ping\ndata: {\"type\": \"ping\"}\n\n");
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].event, "ping");
  EXPECT_EQ(c.events[0].data, "{\"type\": \"ping\"}");
  EXPECT_FALSE(c.partial);
}

TEST(SseParser, DataWithoutSpaceKeepsExtraSpaces) {
  Collected c = Parse("data:x\n\ndata:  two spaces\n\n");
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[0].data, "x");
  EXPECT_EQ(c.events[1].data, " two spaces");  // Only one leading space is stripped.
}

TEST(SseParser, CrLfAndBareCrLineEndings) {
  Collected crlf = Parse("event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\rdata: 3\n\n");
  ASSERT_EQ(crlf.events.size(), 3u);
  EXPECT_EQ(crlf.events[0].event, "a");
  EXPECT_EQ(crlf.events[0].data, "1");
  EXPECT_EQ(crlf.events[1].event, "b");
  EXPECT_EQ(crlf.events[1].data, "2");
  EXPECT_EQ(crlf.events[2].data, "3");
}

TEST(SseParser, MultiLineDataJoinsWithNewline) {
  Collected c = Parse("data: first\ndata: second\ndata:\n\n");
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].data, "first\nsecond\n");
}

TEST(SseParser, CommentsAndUnknownFieldsAreIgnored) {
  Collected c = Parse(": keep-alive\n\nretry: 100\nfoo: bar\nid: 7\ndata: x\n\n:\n\n");
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].data, "x");
  EXPECT_EQ(c.events[0].id, "7");
}

TEST(SseParser, EventWithoutDataIsNotDispatched) {
  Collected c = Parse("event: lonely\n\ndata: y\n\n");
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].event, "");  // The event name does not leak into the next event.
  EXPECT_EQ(c.events[0].data, "y");
}

TEST(SseParser, FieldWithoutColonIsAFieldNameWithEmptyValue) {
  Collected c = Parse("data\n\n");
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].data, "");
}

TEST(SseParser, LeadingBomIsSkipped) {
  Collected c = Parse(
      "\xEF\xBB\xBF"
      "data: x\n\n",
      {1, 2});
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].data, "x");
}

TEST(SseParser, ReportsPartialEventAtEnd) {
  EXPECT_TRUE(Parse("data: {\"type\":\"mess").partial);
  EXPECT_TRUE(Parse("data: complete line\n").partial);  // No blank line: never dispatched.
  EXPECT_FALSE(Parse("data: x\n\n").partial);
  EXPECT_FALSE(Parse(": comment\n").partial);
  EXPECT_FALSE(Parse("").partial);
}

TEST(SseParser, TrailingCrThenLfInNextChunkIsOneLineEnd) {
  Collected c = Parse("data: a\r\n\r\ndata: b\r\n\r\n", {8, 10});
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[0].data, "a");
  EXPECT_EQ(c.events[1].data, "b");
}

// Every single cut point, and every pair of cut points, yields the same events.
TEST(SseParser, SplittingAtEveryByteGivesTheSameEvents) {
  const std::string input =
      "\xEF\xBB\xBF: hello\r\n"
      "event: message_start\r\n"
      "data: {\"type\":\"message_start\",\"text\":\"caf\xC3\xA9 \xF0\x9F\x98\x80\"}\r\n\r\n"
      "event: ping\ndata:{}\n\n"
      "data: line1\rdata: line2\r\r"
      "id: 42\ndata: \xE2\x82\xAC\n\n";
  const Collected whole = Parse(input);
  ASSERT_EQ(whole.events.size(), 4u);
  EXPECT_EQ(whole.events[0].data,
            "{\"type\":\"message_start\",\"text\":\"caf\xC3\xA9 \xF0\x9F\x98\x80\"}");
  EXPECT_EQ(whole.events[2].data, "line1\nline2");
  EXPECT_EQ(whole.events[3].data, "\xE2\x82\xAC");
  EXPECT_EQ(whole.events[3].id, "42");
  for (size_t i = 0; i <= input.size(); ++i) {
    ExpectSame(whole.events, Parse(input, {i}).events, "cut at " + std::to_string(i));
  }
  for (size_t i = 0; i <= input.size(); i += 3) {
    for (size_t j = i; j <= input.size(); ++j) {
      ExpectSame(whole.events, Parse(input, {i, j}).events,
                 "cuts at " + std::to_string(i) + "," + std::to_string(j));
    }
  }
  // One byte at a time.
  std::vector<size_t> all;
  for (size_t i = 1; i < input.size(); ++i) all.push_back(i);
  ExpectSame(whole.events, Parse(input, all).events, "byte by byte");
}

}  // namespace
}  // namespace forkbox::agent
