// The API key travels in the start frame. Every buffer of the frame layer that held it (the
// decoder's buffer as it grows, compacts and dies, the parsed JSON, the reader's read chunk, the
// SecretString the message holds it in) is zeroed before it is freed: a scan of every block freed
// while a start frame is decoded finds the key in none of them. The control frees one unwiped copy
// and must be caught.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <string.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "base/process.h"
#include "base/secret.h"
#include "ipc/frame.h"
#include "tests/ipc/alloc_tracker.h"
#include "tests/ipc/test_util.h"

namespace forkbox::ipc {
namespace {

using testing::FreedMemoryScanner;

// Long enough to live on the heap (no small-string buffer), unlike any other field.
const char kKey[] = "sk-ant-api03-SECRET-7f3a9c2e1b4d8f6a0e5c7b9d2f4a6c8e0b1d3f5a7c9e";

void Wipe(std::string& s) { ::explicit_bzero(s.data(), s.size()); }

// A key too short for the heap: held in a string's inline buffer, inside the block of whatever
// holds the string.
const char kShortKey[] = "sk-short-7f3a";

// `prompt_bytes`: a long prompt means several reads and buffer growths before the key (which
// comes after the prompt); a short one puts the key in the buffer before it grows. `start`: the
// other fields.
std::string StartFrame(size_t prompt_bytes = 20000, StartMessage start = testing::SampleStart()) {
  start.provider.api_key = kKey;
  start.prompt = std::string(prompt_bytes, 'p');
  Result<std::string> frame = EncodeMessage(start);
  start.provider.api_key.clear();
  EXPECT_TRUE(frame.ok());
  return frame.ok() ? *frame : std::string();
}

// Takes the key out of the decoded message and zeroes it, as the child does.
void ConsumeKey(Message& message) {
  auto* start = std::get_if<StartMessage>(&message);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start->provider.api_key, kKey);
  start->provider.api_key.clear();
}

// Decodes an event frame and then `frame` (a start frame), fed in chunks of several sizes: no
// block freed meanwhile holds the key.
void DecodeInChunks(const std::string& frame) {
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, frame.size()}) {
    FreedMemoryScanner scanner(kKey);
    {
      FrameDecoder decoder;
      // A frame before the start frame makes the decoder compact its buffer too.
      Result<std::string> event = EncodeMessage(testing::SampleEvent());
      ASSERT_TRUE(event.ok());
      std::string stream = *event + frame;
      for (size_t off = 0; off < stream.size(); off += chunk) {
        ASSERT_TRUE(decoder.Feed(std::string_view(stream).substr(off, chunk)).ok());
      }
      Wipe(stream);
      for (int i = 0; i < 2; ++i) {
        Result<std::optional<Message>> next = decoder.Next();
        ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
        if (i == 1) ConsumeKey(**next);
      }
      // Zeroed as soon as the frame was returned, not only when the decoder goes.
      EXPECT_EQ(decoder.raw_buffer().find(kKey), std::string_view::npos) << "chunk " << chunk;
    }
    EXPECT_EQ(scanner.hits(), 0u) << "chunk " << chunk;
  }
}

TEST(SecretWipeTest, ControlAnUnwipedFreeIsFound) {
  FreedMemoryScanner scanner(kKey);
  { std::string copy = kKey; }
  EXPECT_EQ(scanner.hits(), 1u);
}

// The control for short keys: a std::string in a freed block is found by its inline buffer.
TEST(SecretWipeTest, ControlAShortUnwipedStringInAFreedBlockIsFound) {
  FreedMemoryScanner scanner(kShortKey);
  {
    auto copy = std::make_unique<std::string>(kShortKey);
    // Seen escaping: the compiler may not elide the unused allocation.
    asm volatile("" : : "r"(copy.get()) : "memory");
  }
  EXPECT_EQ(scanner.hits(), 1u);
}

// SecretString zeroes whatever it lets go of: copies, a moved-from one (a short string's inline
// buffer keeps the bytes it moved), one assigned over, and every one destroyed. Each lives in a
// block of its own, so that its inline buffer is scanned when it goes.
TEST(SecretWipeTest, ASecretStringLeavesNoKeyInFreedMemory) {
  for (const char* key : {kKey, kShortKey}) {
    SCOPED_TRACE(key == kKey ? "on the heap" : "inline");
    FreedMemoryScanner scanner(key);
    {
      auto held = std::make_unique<SecretString>(key);
      auto copied = std::make_unique<SecretString>(*held);
      auto moved = std::make_unique<SecretString>(std::move(*copied));
      *copied = *moved;
      *held = std::string(100, 'v');  // Longer than the key: a new buffer.
      auto move_assigned = std::make_unique<SecretString>("x");
      *move_assigned = std::move(*moved);
      EXPECT_TRUE(*move_assigned == std::string_view(key));
      EXPECT_TRUE(moved->empty());
      move_assigned->clear();
      EXPECT_TRUE(move_assigned->empty());
      *move_assigned = std::string_view(key);
    }
    EXPECT_EQ(scanner.hits(), 0u);
  }
}

// SecretLines (a request's header lines) wipes every line it lets go of: when it grows past the
// four it makes room for (the old array holds a short line's bytes in place, all but the first),
// when it is assigned over, cleared or destroyed. A short key's line ("k:" and the key, 15
// characters) lives in the array's block; a long one's in its own.
TEST(SecretWipeTest, SecretLinesLeaveNoKeyInFreedMemory) {
  for (const char* key : {kKey, kShortKey}) {
    SCOPED_TRACE(key == kKey ? "on the heap" : "inline");
    const std::string line = std::string("k:") + key;
    FreedMemoryScanner scanner(key);
    {
      auto lines = std::make_unique<SecretLines>();
      lines->Add(std::string(line));
      for (int i = 0; i < 8; ++i) lines->Add("name-" + std::to_string(i) + ": value");
      ASSERT_EQ(lines->lines().size(), 9u);
      EXPECT_EQ(lines->lines()[0], line);
      SecretLines moved = std::move(*lines);
      EXPECT_TRUE(lines->lines().empty());
      lines->Add(std::string(line));
      *lines = std::move(moved);  // Its own line goes first.
      lines->clear();
      lines->Add(std::string(line));
    }
    EXPECT_EQ(scanner.hits(), 0u);
  }
}

TEST(SecretWipeTest, DecoderLeavesNoKeyInFreedMemoryWhateverTheChunking) {
  for (size_t prompt_bytes : {size_t{20000}, size_t{1}}) {
    SCOPED_TRACE(prompt_bytes);
    std::string frame = StartFrame(prompt_bytes);
    DecodeInChunks(frame);
    Wipe(frame);
  }
}

// A decoder that dies with a start frame half fed, the key in its buffer, wipes it too.
TEST(SecretWipeTest, ADecoderDestroyedMidFrameLeavesNoKeyInFreedMemory) {
  std::string frame = StartFrame(1);
  {
    FreedMemoryScanner scanner(kKey);
    {
      FrameDecoder decoder;
      ASSERT_TRUE(decoder.Feed(std::string_view(frame).substr(0, frame.size() - 1)).ok());
    }
    EXPECT_EQ(scanner.hits(), 0u);
  }
  Wipe(frame);
}

// A start frame refused after its key was read leaves it in no freed block either: a field of the
// provider after the key is out of range, or one of the limits (read after the provider); or the
// frame is read whole and then dropped, its key never taken, as the child drops a start its own
// checks refuse (a summary limit past its cap: child::CheckStart). Before, the half-read or
// dropped message died with the key unwiped.
TEST(SecretWipeTest, AStartRefusedAfterItsKeyWasReadLeavesNoKeyInFreedMemory) {
  for (const std::string field : {"provider.max_tokens", "limits.max_turns", ""}) {
    SCOPED_TRACE(field.empty() ? "read whole, then dropped" : field);
    StartMessage bad = testing::SampleStart();
    if (field == "provider.max_tokens") bad.provider.max_tokens = 0;
    if (field == "limits.max_turns") bad.limits.max_turns = 0;
    if (field.empty()) bad.limits.max_summary_bytes = int64_t{1} << 40;
    std::string frame = StartFrame(1, bad);
    {
      FreedMemoryScanner scanner(kKey);
      {
        FrameDecoder decoder;
        ASSERT_TRUE(decoder.Feed(frame).ok());
        Result<std::optional<Message>> next = decoder.Next();
        if (field.empty()) {
          ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
        } else {
          ASSERT_FALSE(next.ok());
          EXPECT_THAT(next.status().message(), ::testing::HasSubstr("field \"" + field + "\""));
        }
      }
      EXPECT_EQ(scanner.hits(), 0u);
    }
    Wipe(frame);
  }
}

// The sending side: encoding a start frame leaves the key in no freed block (the JSON built from
// the message, each buffer its text outgrew as it was serialized, the text itself), nor does
// WriteMessage's frame once written. Before, all of them were freed unwiped: the parent's start
// frame to every child. The frame EncodeMessage returns is its caller's to wipe (the parent's
// StartFrameWriter does).
TEST(SecretWipeTest, EncodingAStartFrameLeavesNoKeyInFreedMemory) {
  // A long prompt (which the key follows) makes the text grow before the key is written into it;
  // a short one, after.
  for (size_t prompt_bytes : {size_t{1}, size_t{20000}}) {
    SCOPED_TRACE(prompt_bytes);
    StartMessage start = testing::SampleStart();
    start.provider.api_key = kKey;
    start.prompt = std::string(prompt_bytes, 'p');
    const Message message = start;
    start.provider.api_key.clear();
    {
      FreedMemoryScanner scanner(kKey);
      {
        Result<std::string> frame = EncodeMessage(message);
        ASSERT_TRUE(frame.ok()) << frame.status().ToString();
        EXPECT_NE(frame->find(kKey), std::string::npos);  // The key was there to be found.
        Wipe(*frame);
      }
      EXPECT_EQ(scanner.hits(), 0u);
    }
    Result<Pipe> pipe = MakePipe();
    ASSERT_TRUE(pipe.ok());
    {
      FreedMemoryScanner scanner(kKey);
      ASSERT_TRUE(WriteMessage(pipe->write.get(), message).ok());
      EXPECT_EQ(scanner.hits(), 0u);
    }
  }
}

TEST(SecretWipeTest, ReaderLeavesNoKeyInFreedMemory) {
  std::string frame = StartFrame();
  Result<Pipe> pipe = MakePipe();
  ASSERT_TRUE(pipe.ok());
  ASSERT_EQ(::write(pipe->write.get(), frame.data(), frame.size()),
            static_cast<ssize_t>(frame.size()));
  Wipe(frame);
  pipe->write.reset();
  FreedMemoryScanner scanner(kKey);
  {
    FrameReader reader(pipe->read.get());
    Result<Message> message = reader.Read();
    ASSERT_TRUE(message.ok()) << message.status().ToString();
    ConsumeKey(*message);
  }
  EXPECT_EQ(scanner.hits(), 0u);
}

}  // namespace
}  // namespace forkbox::ipc
