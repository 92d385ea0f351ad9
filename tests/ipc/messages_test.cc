#include "ipc/messages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "ipc/frame.h"
#include "tests/ipc/test_util.h"

namespace forkbox::ipc {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::SampleError;
using testing::SampleEvent;
using testing::SamplePrepare;
using testing::SampleResult;
using testing::SampleStart;

std::vector<Message> AllSamples() {
  return {SampleStart(), SampleEvent(), SampleResult(), SampleError(), SamplePrepare()};
}

// Every field path of a JSON object, as (dotted path, JSON pointer) pairs, leaves and inner
// objects alike (array elements excluded).
void CollectPaths(const json& j, const std::string& dotted, const json::json_pointer& ptr,
                  std::vector<std::pair<std::string, json::json_pointer>>* out) {
  for (const auto& [key, value] : j.items()) {
    std::string sub = dotted.empty() ? key : dotted + "." + key;
    out->emplace_back(sub, ptr / key);
    if (value.is_object()) CollectPaths(value, sub, ptr / key, out);
  }
}

// A value of a different JSON type than v.
json WrongTypeFor(const json& v) {
  if (v.is_string()) return 42;
  if (v.is_number()) return "42";
  if (v.is_boolean()) return 1;
  if (v.is_array()) return json::object();
  return json::array();
}

TEST(MessagesTest, EveryTypeRoundTrips) {
  for (const Message& m : AllSamples()) {
    json j = ToJson(m);
    EXPECT_EQ(j["type"], MessageTypeName(m));
    Result<Message> back = FromJson(j);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, m) << j.dump();
  }
}

TEST(MessagesTest, StartWithoutTranscriptRoundTrips) {
  StartMessage m = SampleStart();
  m.transcript_fd.reset();
  json j = ToJson(m);
  EXPECT_FALSE(j.contains("transcript_fd"));
  Result<Message> back = FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, Message(m));

  j["transcript_fd"] = nullptr;  // null means "none" too.
  back = FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(std::get<StartMessage>(*back).transcript_fd.has_value());
}

TEST(MessagesTest, DefaultsRoundTrip) {
  StartMessage m;
  m.prompt = "p";
  m.provider.name = "anthropic";
  m.workdir = "/";
  Result<Message> back = FromJson(ToJson(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, Message(m));
}

TEST(MessagesTest, EveryMissingFieldIsNamed) {
  for (const Message& m : AllSamples()) {
    json j = ToJson(m);
    std::vector<std::pair<std::string, json::json_pointer>> paths;
    CollectPaths(j, "", json::json_pointer(), &paths);
    for (const auto& [dotted, ptr] : paths) {
      if (dotted == "transcript_fd" || dotted == "agent") continue;  // Optional.
      // Optional: added by issue 15, absent from older frames.
      if (dotted == "provider.context_window" || dotted == "provider.thinking_budget_tokens" ||
          dotted == "limits.max_tokens" || dotted == "stats.cache_read_input_tokens" ||
          dotted == "stats.cache_creation_input_tokens" ||
          // Optional: the sandbox hints of issue 18.
          dotted == "model_port" || dotted == "layer2_verified" ||
          // Optional: an event's tool calls so far (a failed task's count).
          dotted == "tool_calls") {
        json older = j;
        older[ptr.parent_pointer()].erase(ptr.back());
        EXPECT_TRUE(FromJson(older).ok()) << dotted;
        continue;
      }
      json broken = j;
      broken[ptr.parent_pointer()].erase(ptr.back());
      Result<Message> r = FromJson(broken);
      ASSERT_FALSE(r.ok()) << "accepted without " << dotted;
      EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
      EXPECT_THAT(r.status().message(), HasSubstr("missing field \"" + dotted + "\"")) << dotted;
    }
  }
}

TEST(MessagesTest, EveryMistypedFieldIsNamed) {
  for (const Message& m : AllSamples()) {
    json j = ToJson(m);
    std::vector<std::pair<std::string, json::json_pointer>> paths;
    CollectPaths(j, "", json::json_pointer(), &paths);
    for (const auto& [dotted, ptr] : paths) {
      json broken = j;
      broken[ptr] = WrongTypeFor(j[ptr]);
      Result<Message> r = FromJson(broken);
      ASSERT_FALSE(r.ok()) << "accepted mistyped " << dotted << ": " << broken.dump();
      EXPECT_THAT(r.status().message(), HasSubstr(dotted)) << r.status().ToString();
    }
  }
}

TEST(MessagesTest, MistypedListElementIsNamed) {
  json j = ToJson(SampleStart());
  j["sandbox"]["writable"][1] = 5;
  Result<Message> r = FromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("sandbox.writable[1]"));
  EXPECT_THAT(r.status().message(), HasSubstr("expected a string, got integer"));
}

TEST(MessagesTest, RejectsNonIntegerAndHugeNumbers) {
  json j = ToJson(SampleStart());
  j["limits"]["max_turns"] = 2.5;
  EXPECT_THAT(FromJson(j).status().message(),
              HasSubstr("\"limits.max_turns\": expected an integer"));
  j["limits"]["max_turns"] = 18446744073709551615ULL;
  EXPECT_THAT(FromJson(j).status().message(),
              HasSubstr("\"limits.max_turns\": must be an integer"));
}

TEST(MessagesTest, RejectsNegativeAndZeroLimits) {
  const char* fields[] = {"max_turns", "tool_timeout_ms", "max_tool_output_chars",
                          "max_summary_bytes"};
  for (const char* field : fields) {
    for (int value : {-1, 0}) {
      json j = ToJson(SampleStart());
      j["limits"][field] = value;
      Result<Message> r = FromJson(j);
      ASSERT_FALSE(r.ok()) << field << "=" << value;
      EXPECT_THAT(r.status().message(),
                  HasSubstr("\"limits." + std::string(field) + "\": must be an integer >= 1"));
    }
  }
  json j = ToJson(SampleEvent());
  j["turn"] = -1;
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"turn\""));
  j = ToJson(SampleResult());
  j["stats"]["input_tokens"] = -5;
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"stats.input_tokens\""));
}

TEST(MessagesTest, RejectsUnknownAndMissingType) {
  json j = ToJson(SampleEvent());
  j["type"] = "evnt";
  Result<Message> r = FromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("unknown message type \"evnt\""));

  j.erase("type");
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("missing field \"type\""));
  j["type"] = 3;
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"type\": expected a string"));
  EXPECT_THAT(FromJson(json::array()).status().message(), HasSubstr("must be a JSON object"));
  EXPECT_THAT(FromJson(json("start")).status().message(), HasSubstr("must be a JSON object"));
}

TEST(MessagesTest, RejectsUnknownProvider) {
  json j = ToJson(SampleStart());
  j["provider"]["name"] = "gemini";
  Result<Message> r = FromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("\"provider.name\": unknown provider \"gemini\""));
}

TEST(MessagesTest, TranscriptFdRange) {
  for (int fd : {-1, 0, 1, 2, 3, 4, 1 << 20}) {
    json j = ToJson(SampleStart());
    j["transcript_fd"] = fd;
    Result<Message> r = FromJson(j);
    ASSERT_FALSE(r.ok()) << fd;
    EXPECT_THAT(r.status().message(), HasSubstr("\"transcript_fd\": must be an integer in [5,"));
  }
  json j = ToJson(SampleStart());
  j["transcript_fd"] = 5;
  Result<Message> r = FromJson(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::get<StartMessage>(*r).transcript_fd, 5);
}

TEST(MessagesTest, RejectsBadStartValues) {
  json j = ToJson(SampleStart());
  j["workdir"] = "relative/dir";
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"workdir\": must be an absolute path"));
  j = ToJson(SampleStart());
  j["prompt"] = "";
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"prompt\": must not be empty"));
  j = ToJson(SampleStart());
  j["sandbox"]["env"] = {"A=B"};
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"sandbox.env\""));
  j = ToJson(SampleStart());
  j["sandbox"]["writable"] = {std::string("/a\0b", 4)};
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("NUL"));
}

TEST(MessagesTest, RejectsBadPrepareValues) {
  json j = ToJson(SamplePrepare());
  j["workdir"] = "relative/dir";
  EXPECT_EQ(FromJson(j).status().message(),
            "prepare message: field \"workdir\": must be an absolute path, got \"relative/dir\"");
  j = ToJson(SamplePrepare());
  j["model_url"] = "";
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"model_url\": must not be empty"));
  j = ToJson(SamplePrepare());
  j["sandbox"]["rlimit_nproc"] = 0;
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"sandbox.rlimit_nproc\""));
  // A prepare frame never carries a secret: there is no field for one.
  EXPECT_EQ(ToJson(SamplePrepare()).dump().find("api_key"), std::string::npos);
}

// The sandbox hints (issue 18): absent in an older parent's frames, which the child then works
// out itself; a port outside 0..65535 is refused.
TEST(MessagesTest, SandboxHintsAreOptionalAndRangeChecked) {
  for (const Message& m : {Message(SampleStart()), Message(SamplePrepare())}) {
    json j = ToJson(m);
    EXPECT_EQ(j["model_port"], 8080);
    EXPECT_EQ(j["layer2_verified"], true);
    j.erase("model_port");
    j.erase("layer2_verified");
    Result<Message> older = FromJson(j);
    ASSERT_TRUE(older.ok()) << older.status().ToString();
    const ChildSandboxHints hints = std::visit(
        [](const auto& msg) {
          if constexpr (requires { msg.hints; }) return msg.hints;
          return ChildSandboxHints{-1, true};
        },
        *older);
    EXPECT_EQ(hints, ChildSandboxHints{});
    for (int64_t bad : {-1, 65536}) {
      j["model_port"] = bad;
      EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"model_port\"")) << bad;
    }
  }
}

TEST(MessagesTest, EventDetailLimits) {
  json j = ToJson(SampleEvent());
  j["detail"] = std::string(kMaxEventDetailBytes, 'x');
  EXPECT_TRUE(FromJson(j).ok());
  j["detail"] = std::string(kMaxEventDetailBytes + 1, 'x');
  Result<Message> r = FromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("\"detail\": 201 bytes exceeds the limit of 200"));
  j["detail"] = "two\nlines";
  EXPECT_THAT(FromJson(j).status().message(), HasSubstr("\"detail\": must be a single line"));
}

// Audit A(c): what the parent shows as one line (progress, the tool result, --json's "stop") is
// refused when long or carrying controls, as the detail always was.
TEST(MessagesTest, ToolNamesStopReasonsAndErrorCodesAreShortPlainLines) {
  const std::string too_long(kMaxLabelBytes + 1, 'T');
  json event = ToJson(SampleEvent());
  event["tool"] = std::string(kMaxLabelBytes, 'T');
  EXPECT_TRUE(FromJson(event).ok());
  for (const std::string& bad : {too_long, std::string("ba\nsh"), std::string("x\x1b]0;pwn\x07"),
                                 std::string("csi\xC2\x9B")}) {
    event["tool"] = bad;
    EXPECT_THAT(FromJson(event).status().message(), HasSubstr("\"tool\"")) << bad;
  }
  json result = ToJson(SampleResult());
  for (const std::string& bad : {too_long, std::string("context_window\n\x1b[2J")}) {
    result["stats"]["stop_reason"] = bad;
    EXPECT_THAT(FromJson(result).status().message(), HasSubstr("\"stats.stop_reason\"")) << bad;
  }
  json error = ToJson(SampleError());
  error["code"] = "model\r\nforged: line";
  EXPECT_THAT(FromJson(error).status().message(), HasSubstr("\"code\""));
  json unknown = {{"type", std::string(100'000, 'Y')}};
  EXPECT_LT(FromJson(unknown).status().message().size(), 200u);
}

// Audit D: reported counters are bounded, so the parent's sums cannot overflow.
TEST(MessagesTest, CountersBeyondTheirBoundsAreProtocolErrors) {
  json event = ToJson(SampleEvent());
  event["input_tokens"] = kMaxReportedCount;
  EXPECT_TRUE(FromJson(event).ok());
  event["input_tokens"] = kMaxReportedCount + 1;
  EXPECT_THAT(FromJson(event).status().message(), HasSubstr("\"input_tokens\""));
  event = ToJson(SampleEvent());
  event["turn"] = kMaxReportedTurns + 1;
  EXPECT_THAT(FromJson(event).status().message(), HasSubstr("\"turn\""));
  event = ToJson(SampleEvent());
  event["tool_calls"] = kMaxReportedCount + 1;
  EXPECT_THAT(FromJson(event).status().message(), HasSubstr("\"tool_calls\""));
  const json ok = ToJson(SampleResult());
  for (const char* field :
       {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
        "tool_calls", "tool_output_bytes", "elapsed_ms", "turns"}) {
    json result = ok;
    result["stats"][field] = std::numeric_limits<int64_t>::max();
    EXPECT_THAT(FromJson(result).status().message(), HasSubstr(field)) << field;
  }
  json result = ok;
  result["stats"]["turns"] = kMaxReportedTurns;
  EXPECT_TRUE(FromJson(result).ok());
}

// An event's tool-call count round-trips; an event without one (an older child's) counts none.
TEST(MessagesTest, AnEventsToolCallsAreOptional) {
  EventMessage with = SampleEvent();
  with.tool_calls = 5;
  Result<Message> back = FromJson(ToJson(with));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<EventMessage>(*back).tool_calls, 5);
  json without = ToJson(SampleEvent());
  without.erase("tool_calls");
  back = FromJson(without);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<EventMessage>(*back), SampleEvent());
}

TEST(EnforceCutTest, PassesTheSendersOwnCutAndCutsAnythingLonger) {
  const std::string own = CutUtf8WithNote(std::string(5000, 'a'), 100, "summary");
  EXPECT_EQ(EnforceCut(own, 100, "summary"), own);
  // Three-byte characters: 100 is no boundary, and the cut must not split one.
  std::string euros;
  for (int i = 0; i < 1000; ++i) euros += "\xE2\x82\xAC";
  const std::string cut = EnforceCut(euros, 100, "summary");
  EXPECT_TRUE(IsValidUtf8(cut));
  EXPECT_EQ(cut.substr(0, 99), euros.substr(0, 99));
  EXPECT_THAT(cut, HasSubstr("[... summary truncated: 2901 bytes dropped ...]"));
  EXPECT_LE(cut.size(), 100 + kMaxCutNoteBytes + 7);
}

// Invalid UTF-8 is refused once per direction, by the frame layer (frame_test: the decoder
// checks the raw bytes, the encoder's dump); the error names the field.
TEST(MessagesTest, InvalidUtf8InAnyStringIsNamedWhenEncoded) {
  const std::string bad = "ok\xC3\x28";
  StartMessage start = SampleStart();
  start.provider.api_key = bad;
  EXPECT_THAT(EncodeMessage(start).status().message(), HasSubstr("\"provider.api_key\" at byte 2"));
  start = SampleStart();
  start.sandbox.writable = {bad};
  EXPECT_THAT(EncodeMessage(start).status().message(), HasSubstr("\"sandbox.writable[0]\""));
  ResultMessage result = SampleResult();
  result.summary = bad;
  EXPECT_THAT(EncodeMessage(result).status().message(), HasSubstr("\"summary\""));
}

TEST(MessagesTest, ErrorsNameTheMessageType) {
  json j = ToJson(SampleResult());
  j["stats"].erase("stop_reason");
  EXPECT_EQ(FromJson(j).status().message(), "result message: missing field \"stats.stop_reason\"");
}

TEST(MessagesTest, IgnoresUnknownExtraFields) {
  json j = ToJson(SampleError());
  j["added_in_v2"] = {{"x", 1}};
  Result<Message> r = FromJson(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, Message(SampleError()));
}

TEST(MakeEventDetailTest, OneLineWithControlBytesReplaced) {
  EXPECT_EQ(MakeEventDetail("ls -la\nfoo\r\nbar\tbaz\x1b[31m"), "ls -la foo  bar baz [31m");
  EXPECT_EQ(MakeEventDetail(""), "");
  EXPECT_EQ(MakeEventDetail("a\xC2\x9B"
                            "31mb\x7F\xC2\xA0"),
            "a 31mb \xC2\xA0");  // C1 CSI and DEL go; U+00A0 stays.
}

TEST(MakeEventDetailTest, CutsAtTheLimitWithoutSplittingSequences) {
  EXPECT_EQ(MakeEventDetail(std::string(500, 'a')), std::string(kMaxEventDetailBytes, 'a'));
  // 199 ASCII bytes then a 2-byte é: the é does not fit and must not be half-included.
  std::string s = std::string(199, 'a') + "\xC3\xA9" + "tail";
  EXPECT_EQ(MakeEventDetail(s), std::string(199, 'a'));
  // 4-byte emoji straddling the cut at 198..201.
  s = std::string(198, 'a') + "\xF0\x9F\x9A\x80";
  EXPECT_EQ(MakeEventDetail(s), std::string(198, 'a'));
  s = std::string(196, 'a') + "\xF0\x9F\x9A\x80" + "zzz";
  EXPECT_EQ(MakeEventDetail(s), std::string(196, 'a') + "\xF0\x9F\x9A\x80");
}

TEST(MakeEventDetailTest, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(MakeEventDetail("a\xFF"
                            "b"),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(MakeEventDetailTest, AlwaysDecodableForArbitraryInput) {
  std::mt19937 rng(12345);  // Fixed seed: reproducible.
  for (int round = 0; round < 2000; ++round) {
    std::string text(rng() % 600, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    std::string detail = MakeEventDetail(text);
    ASSERT_LE(detail.size(), kMaxEventDetailBytes);
    ASSERT_TRUE(IsValidUtf8(detail)) << ::testing::PrintToString(text);
    ASSERT_EQ(detail.find_first_of("\r\n"), std::string::npos);
    EventMessage e{1, "bash", detail};
    ASSERT_TRUE(FromJson(ToJson(e)).ok());
  }
}

}  // namespace
}  // namespace forkbox::ipc
