// FrameDecoder and EncodeFrame: the byte format, every split, truncation, caps and bad payloads.
#include "ipc/frame.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/ipc/alloc_tracker.h"
#include "tests/ipc/test_util.h"

namespace forkbox::ipc {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::SampleError;
using testing::SampleEvent;
using testing::SampleResult;
using testing::SampleStart;

std::string Le32(uint32_t n) {
  return std::string{static_cast<char>(n & 0xFF), static_cast<char>((n >> 8) & 0xFF),
                     static_cast<char>((n >> 16) & 0xFF), static_cast<char>((n >> 24) & 0xFF)};
}

std::string RawFrame(std::string_view payload) {
  return Le32(static_cast<uint32_t>(payload.size())) + std::string(payload);
}

std::vector<Message> AllSamples() {
  return {SampleStart(), SampleEvent(), SampleResult(), SampleError()};
}

std::string EncodeAll(const std::vector<Message>& messages) {
  std::string stream;
  for (const Message& m : messages) {
    Result<std::string> frame = EncodeMessage(m);
    EXPECT_TRUE(frame.ok()) << frame.status().ToString();
    stream += *frame;
  }
  return stream;
}

// Feeds the chunks, pulls every message; returns the first error or the messages.
Result<std::vector<Message>> DecodeChunks(const std::vector<std::string_view>& chunks,
                                          FrameDecoder& decoder) {
  std::vector<Message> out;
  for (std::string_view chunk : chunks) {
    FORKBOX_RETURN_IF_ERROR(decoder.Feed(chunk));
    for (;;) {
      Result<std::optional<Message>> next = decoder.Next();
      if (!next.ok()) return next.status();
      if (!next->has_value()) break;
      out.push_back(std::move(**next));
    }
  }
  FORKBOX_RETURN_IF_ERROR(decoder.Finish());
  return out;
}

Status DecodeOne(std::string_view bytes) {
  FrameDecoder decoder;
  Result<std::vector<Message>> r = DecodeChunks({bytes}, decoder);
  return r.status();
}

TEST(FrameTest, EncodesLittleEndianLengthThenCompactJson) {
  json payload = {{"type", "error"}, {"code", "x"}, {"message", std::string(300, 'm')}};
  Result<std::string> frame = EncodeFrame(payload);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  std::string body = payload.dump();
  ASSERT_EQ(frame->size(), 4 + body.size());
  size_t n = body.size();  // > 255, so two length bytes are non-zero.
  EXPECT_EQ(static_cast<unsigned char>((*frame)[0]), n & 0xFF);
  EXPECT_EQ(static_cast<unsigned char>((*frame)[1]), (n >> 8) & 0xFF);
  EXPECT_EQ((*frame)[2], 0);
  EXPECT_EQ((*frame)[3], 0);
  EXPECT_EQ(frame->substr(4), body);
}

TEST(FrameTest, EncodeRejectsNonObjectsOversizeAndInvalidUtf8) {
  EXPECT_EQ(EncodeFrame(json::array()).status().code(), Status::Code::kInvalidArgument);
  json big = {{"type", "error"}, {"code", "x"}, {"message", std::string(2000, 'm')}};
  Result<std::string> r = EncodeFrame(big, 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("exceeds the cap of 1000 bytes"));

  StartMessage start = SampleStart();
  start.provider.model = "bad\xFF";
  r = EncodeMessage(start);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("start message: cannot encode frame: invalid UTF-8 in field "
                        "\"provider.model\" at byte 3"));
}

TEST(FrameTest, RoundTripsEveryMessageType) {
  for (const Message& m : AllSamples()) {
    FrameDecoder decoder;
    Result<std::vector<Message>> r = DecodeChunks({EncodeAll({m})}, decoder);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0], m);
  }
}

TEST(FrameTest, SplitAtEveryByteBoundary) {
  const std::vector<Message> messages = AllSamples();
  const std::string stream = EncodeAll(messages);
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    std::string_view all(stream);
    FrameDecoder decoder;
    Result<std::vector<Message>> r = DecodeChunks({all.substr(0, cut), all.substr(cut)}, decoder);
    ASSERT_TRUE(r.ok()) << "cut at " << cut << ": " << r.status().ToString();
    ASSERT_EQ(*r, messages) << "cut at " << cut;
  }
}

TEST(FrameTest, ByteByByteAndThreeWaySplits) {
  const std::vector<Message> messages = {SampleEvent(), SampleError(), SampleEvent()};
  const std::string stream = EncodeAll(messages);
  std::string_view all(stream);
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < all.size(); ++i) bytes.push_back(all.substr(i, 1));
  FrameDecoder decoder;
  Result<std::vector<Message>> r = DecodeChunks(bytes, decoder);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, messages);
  for (size_t a = 0; a <= all.size(); a += 3) {
    for (size_t b = a; b <= all.size(); b += 5) {
      FrameDecoder d;
      Result<std::vector<Message>> r3 =
          DecodeChunks({all.substr(0, a), all.substr(a, b - a), all.substr(b)}, d);
      ASSERT_TRUE(r3.ok()) << a << "," << b << ": " << r3.status().ToString();
      ASSERT_EQ(*r3, messages);
    }
  }
}

TEST(FrameTest, TruncatedInsideTheLengthField) {
  std::string frame = EncodeAll({SampleEvent()});
  for (size_t n = 1; n < 4; ++n) {
    Status st = DecodeOne(std::string_view(frame).substr(0, n));
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(st.message(),
              "truncated frame: got " + std::to_string(n) + " of 4 bytes of the length field");
  }
}

TEST(FrameTest, TruncatedInsideThePayload) {
  std::string frame = EncodeAll({SampleEvent()});
  for (size_t n = 4; n < frame.size(); ++n) {
    Status st = DecodeOne(std::string_view(frame).substr(0, n));
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(st.message(), "truncated frame: got " + std::to_string(n) + " of " +
                                std::to_string(frame.size()) + " bytes");
  }
  // A whole frame followed by a partial one: the first is delivered, Finish reports the rest.
  std::string two = frame + frame.substr(0, 10);
  FrameDecoder decoder;
  ASSERT_TRUE(decoder.Feed(two).ok());
  Result<std::optional<Message>> first = decoder.Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_THAT(decoder.Finish().message(), HasSubstr("truncated frame: got 10 of"));
}

TEST(FrameTest, EmptyStreamAndWholeFramesFinishCleanly) {
  FrameDecoder decoder;
  EXPECT_TRUE(decoder.Finish().ok());
  ASSERT_TRUE(decoder.Feed(EncodeAll({SampleEvent()})).ok());
  EXPECT_TRUE(decoder.Finish().ok());  // A whole, not yet pulled frame is not a truncation.
}

TEST(FrameTest, HostileLengthFieldIsRejectedWithoutAllocating) {
  FrameDecoder decoder;
  const std::string header("\xFF\xFF\xFF\xFF", 4);
  testing::AllocationTracker tracker;
  Status st = decoder.Feed(header);
  size_t largest = tracker.largest();
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(), "frame length 4294967295 exceeds the cap of 1048576 bytes");
  EXPECT_LT(largest, 4096u);
  // Sticky: nothing after it is accepted.
  EXPECT_EQ(decoder.Feed(EncodeAll({SampleEvent()})).message(), st.message());
  EXPECT_EQ(decoder.Next().status().message(), st.message());
  EXPECT_EQ(decoder.Finish().message(), st.message());
}

TEST(FrameTest, LengthFieldIsCheckedBeforeThePayloadArrives) {
  FrameDecoder decoder(/*max_frame_bytes=*/100);
  ASSERT_TRUE(
      decoder.Feed(RawFrame(std::string(R"({"type":"error","code":"c","message":"m"})"))).ok());
  Status st = decoder.Feed(Le32(101));  // Only the header of the second frame.
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
}

TEST(FrameTest, FrameExactlyAtTheCapIsAccepted) {
  std::string payload = R"({"type":"error","code":"c","message":")";
  const size_t cap = 200;
  payload += std::string(cap - payload.size() - 2, 'm') + "\"}";
  ASSERT_EQ(payload.size(), cap);
  FrameDecoder ok_decoder(cap);
  Result<std::vector<Message>> r = DecodeChunks({RawFrame(payload)}, ok_decoder);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  FrameDecoder small(cap - 1);
  EXPECT_EQ(small.Feed(RawFrame(payload)).code(), Status::Code::kResourceExhausted);
}

TEST(FrameTest, ZeroAndOneByteLengthsAreRejected) {
  for (uint32_t n : {0u, 1u}) {
    Status st = DecodeOne(Le32(n) + std::string(n, '{'));
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("frame length " + std::to_string(n) + " is too small"));
  }
}

TEST(FrameTest, TotalBytesCap) {
  const std::string frame = EncodeAll({SampleEvent()});
  FrameDecoder decoder(kDefaultMaxFrameBytes, /*max_total_bytes=*/frame.size() * 2 + 3);
  ASSERT_TRUE(decoder.Feed(frame).ok());
  ASSERT_TRUE(decoder.Feed(frame).ok());
  EXPECT_EQ(decoder.total_bytes_left(), 3u);
  Status st = decoder.Feed(frame);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("more than the cap of"));
  EXPECT_EQ(decoder.Feed("x").message(), st.message());  // Sticky.
  // The two frames inside the cap are still delivered, then the error, for good.
  for (int i = 0; i < 2; ++i) {
    Result<std::optional<Message>> m = decoder.Next();
    ASSERT_TRUE(m.ok() && m->has_value()) << i;
  }
  EXPECT_EQ(decoder.Next().status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(decoder.Next().status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(decoder.Finish().code(), Status::Code::kResourceExhausted);
}

TEST(FrameTest, NonJsonPayload) {
  Status st = DecodeOne(RawFrame("{not json"));
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("frame 1: frame payload is not valid JSON"));
  st = DecodeOne(RawFrame(R"({"type":"event","turn":1,"tool":"bash","detail":"x"} trailing)"));
  EXPECT_THAT(st.message(), HasSubstr("not valid JSON"));
  st = DecodeOne(RawFrame(R"({"type":"event","turn":tru})"));
  EXPECT_THAT(st.message(), HasSubstr("not valid JSON in field \"turn\""));
}

TEST(FrameTest, JsonThatIsNotAnObject) {
  for (std::string payload : {"[1,2,3]", "\"start\"", "42", "null"}) {
    Status st = DecodeOne(RawFrame(payload));
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << payload;
    EXPECT_THAT(st.message(), HasSubstr("must be a JSON object")) << payload;
  }
}

TEST(FrameTest, WrongTypesAndUnknownTypeThroughTheDecoder) {
  Status st = DecodeOne(RawFrame(R"({"type":"event","turn":"1","tool":"bash","detail":"x"})"));
  EXPECT_THAT(st.message(),
              HasSubstr("event message: field \"turn\": expected an integer, got string"));
  st = DecodeOne(RawFrame(R"({"type":"hello"})"));
  EXPECT_THAT(st.message(), HasSubstr("unknown message type \"hello\""));
  st = DecodeOne(RawFrame(R"({"type":"error","code":"c"})"));
  EXPECT_THAT(st.message(), HasSubstr("missing field \"message\""));
}

TEST(FrameTest, InvalidUtf8PayloadNamesTheField) {
  json j = json::parse(R"({"type":"error","code":"c","message":"PLACEHOLDER"})");
  std::string payload = j.dump();
  payload.replace(payload.find("PLACEHOLDER"), 11, "ab\xC0\xAF");  // Overlong '/'.
  Status st = DecodeOne(RawFrame(payload));
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("not valid UTF-8: bad byte 0xc0 at offset"));
  EXPECT_THAT(st.message(), HasSubstr("in field \"message\""));

  // Nested field, and a bad key.
  st = DecodeOne(RawFrame("{\"type\":\"start\",\"provider\":{\"api_key\":\"k\xED\xA0\x80\"}}"));
  EXPECT_THAT(st.message(), HasSubstr("in field \"provider.api_key\""));
  st = DecodeOne(RawFrame("{\"type\":\"start\",\"k\xFF\":1}"));
  EXPECT_THAT(st.message(), HasSubstr("in a key of the top-level object"));
}

TEST(FrameTest, DeepNestingIsRejected) {
  std::string payload = R"({"type":"error","code":"c","message":"m","x":)";
  payload += std::string(10000, '[') + std::string(10000, ']') + "}";
  Status st = DecodeOne(RawFrame(payload));
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("nests deeper than 32 levels"));
  // Exactly 32 levels (the object and 31 arrays) pass; one more does not.
  std::string at_limit = R"({"type":"error","code":"c","message":"m","x":)";
  at_limit += std::string(31, '[') + std::string(31, ']') + "}";
  EXPECT_TRUE(DecodeOne(RawFrame(at_limit)).ok());
  std::string over = R"({"type":"error","code":"c","message":"m","x":)";
  over += std::string(32, '[') + std::string(32, ']') + "}";
  EXPECT_THAT(DecodeOne(RawFrame(over)).message(), HasSubstr("nests deeper than 32 levels"));
  // Brackets inside strings do not count.
  json j = ToJson(SampleError());
  j["message"] = std::string(1000, '[');
  EXPECT_TRUE(DecodeOne(RawFrame(j.dump())).ok());
}

// A frame whose object names a key twice is refused, naming the key. Before, nlohmann kept the
// last value: two summaries, or two types, decoded as whichever came last. Both directions decode
// here (the parent a child's frames; the child its start frame, FrameReader). Controls: each frame
// as encoded decodes, and a key repeated in another object (nested) is no repeat.
TEST(FrameTest, ARepeatedKeyIsRefusedNamingIt) {
  struct Case {
    Message message;
    std::string object;  // The start of the object the member goes into.
    std::string member;  // Its key is one the object already has.
    std::string key;
  };
  for (const Case& c :
       {Case{SampleResult(), "{", R"("summary":"decoy")", "summary"},
        Case{SampleEvent(), "{", R"("type":"error")", "type"},
        Case{SampleResult(), R"("stats":{)", R"("turns":0)", "turns"},
        Case{SampleStart(), R"("provider":{)", R"("api_key":"decoy")", "api_key"}}) {
    SCOPED_TRACE(c.member);
    std::string payload = ToJson(c.message).dump();
    FrameDecoder decoder;
    Result<std::vector<Message>> once = DecodeChunks({RawFrame(payload)}, decoder);
    ASSERT_TRUE(once.ok()) << once.status().ToString();
    EXPECT_EQ(*once, std::vector<Message>{c.message});
    payload.insert(payload.find(c.object) + c.object.size(), c.member + ",");
    Status st = DecodeOne(RawFrame(payload));
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("frame 1: frame payload repeats the key \"" + c.key +
                                        "\" in one object"));
  }
  // The empty key is a key too.
  const std::string error = ToJson(SampleError()).dump();
  EXPECT_TRUE(DecodeOne(RawFrame(R"({"":1,)" + error.substr(1))).ok());
  EXPECT_THAT(DecodeOne(RawFrame(R"({"":1,"":2,)" + error.substr(1))).message(),
              HasSubstr("repeats the key \"\" in one object"));
  // The same key in two objects.
  std::string nested = ToJson(SampleResult()).dump();
  nested.insert(nested.find(R"("stats":{)") + 9, R"("type":"result",)");
  EXPECT_TRUE(DecodeOne(RawFrame(nested)).ok());
}

TEST(FrameTest, FramesBeforeABadLengthAreDeliveredWhateverTheChunking) {
  const std::string good = EncodeAll({SampleEvent(), SampleError()});
  const std::string stream = good + Le32(0xFFFFFFFF) + "{}";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    FrameDecoder decoder;
    std::string_view all(stream);
    Status first = decoder.Feed(all.substr(0, cut));
    Status second = decoder.Feed(all.substr(cut));
    EXPECT_FALSE(second.ok()) << cut;  // The bad header is in or before this part.
    std::vector<Message> got;
    Status end;
    for (;;) {
      Result<std::optional<Message>> next = decoder.Next();
      if (!next.ok()) {
        end = next.status();
        break;
      }
      ASSERT_TRUE(next->has_value()) << "a failed decoder must end in its error, cut " << cut;
      got.push_back(std::move(**next));
    }
    EXPECT_EQ(got, (std::vector<Message>{SampleEvent(), SampleError()})) << cut;
    EXPECT_EQ(end.code(), Status::Code::kResourceExhausted) << cut;
  }
}

TEST(FrameTest, ErrorIsStickyAndLaterFramesAreNotDelivered) {
  FrameDecoder decoder;
  ASSERT_TRUE(decoder.Feed(RawFrame("[]") + EncodeAll({SampleEvent()})).ok());
  Result<std::optional<Message>> first = decoder.Next();
  ASSERT_FALSE(first.ok());
  Result<std::optional<Message>> second = decoder.Next();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), first.status().message());
}

TEST(FrameTest, BytesNeededTracksTheCurrentFrame) {
  const std::string frame = EncodeAll({SampleEvent()});
  FrameDecoder decoder;
  EXPECT_EQ(decoder.bytes_needed(), 4u);
  ASSERT_TRUE(decoder.Feed(std::string_view(frame).substr(0, 2)).ok());
  EXPECT_EQ(decoder.bytes_needed(), 2u);
  ASSERT_TRUE(decoder.Feed(std::string_view(frame).substr(2, 8)).ok());
  EXPECT_EQ(decoder.bytes_needed(), frame.size() - 10);
  ASSERT_TRUE(decoder.Feed(std::string_view(frame).substr(10)).ok());
  EXPECT_EQ(decoder.bytes_needed(), 0u);
}

TEST(FrameTest, LongStreamKeepsTheBufferSmall) {
  const std::string frame = EncodeAll({SampleEvent()});
  FrameDecoder decoder;
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(decoder.Feed(frame).ok());
    Result<std::optional<Message>> m = decoder.Next();
    ASSERT_TRUE(m.ok() && m->has_value());
    ASSERT_EQ(decoder.buffered_bytes(), 0u);
  }
}

}  // namespace
}  // namespace forkbox::ipc
