// The API key's copies in a provider: the request header lines built with it for each call (kept
// across its retries), the request head the HTTP client writes them into, and the key taken from
// the environment. Every block freed meanwhile is scanned for the key (tests/ipc/alloc_tracker.h):
// none may hold it. The controls: the scan finds a copy freed unwiped, and the server got the key
// in every request (what the scan looks for was there to be found).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/provider.h"
#include "agent/provider_settings.h"
#include "base/unique_fd.h"
#include "tests/agent/loopback_listener.h"
#include "tests/ipc/alloc_tracker.h"

namespace forkbox::agent {
namespace {

using ipc::testing::FreedMemoryScanner;

// Long enough to live on the heap; and one so short that its Anthropic header line ("x-api-key:
// q7Z3", 15 characters) is held in the string's inline buffer, inside the block of the list.
const char kKey[] = "sk-ant-api03-SECRET-7f3a9c2e1b4d8f6a0e5c7b9d2f4a6c8e0b1d3f5a7c9e";
const char kShortKey[] = "q7Z3";

const char kAnthropicReply[] =
    R"({"id":"msg_1","type":"message","role":"assistant","model":"m",)"
    R"("content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",)"
    R"("usage":{"input_tokens":1,"output_tokens":1}})";
const char kOpenAiReply[] =
    R"({"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,)"
    R"("message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],)"
    R"("usage":{"prompt_tokens":1,"completion_tokens":1}})";

std::string Response(const std::string& status, const std::string& body) {
  return "HTTP/1.1 " + status +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

TEST(ProviderSecretWipeTest, ControlAnUnwipedCopyIsFound) {
  FreedMemoryScanner scanner(kKey);
  {
    auto copy = std::make_unique<std::string>(std::string("x-api-key: ") + kKey);
    asm volatile("" : : "r"(copy.get()) : "memory");  // Seen escaping: not elided.
  }
  EXPECT_EQ(scanner.hits(), 1u);
}

// Three calls, the first retried once (a 503): four requests built from two header builds kept
// across the retry. Before, the header lines (and, for Anthropic, the copies its list was made
// from) were freed with the key in them after every call.
TEST(ProviderSecretWipeTest, RequestHeadersLeaveNoKeyInFreedMemory) {
  for (const char* name : {"anthropic", "openai"}) {
    for (const char* key : {kKey, kShortKey}) {
      SCOPED_TRACE(std::string(name) + (key == kKey ? " heap key" : " short key"));
      const bool anthropic = std::string(name) == "anthropic";
      const std::string ok = Response("200 OK", anthropic ? kAnthropicReply : kOpenAiReply);
      loopback::ScriptedServer server({Response("503 Service Unavailable", "{}"), ok, ok, ok});
      {
        FreedMemoryScanner scanner(key);
        {
          ProviderConfig config;
          config.name = name;
          config.api_key = key;
          config.base_url = server.url() + (anthropic ? "" : "/v1");
          config.model = "m";
          config.stream = false;
          config.max_retries = 1;
          ProviderHooks hooks;
          hooks.sleep = [](std::chrono::milliseconds) {};
          Result<std::unique_ptr<Provider>> provider = MakeProvider(config, hooks);
          ASSERT_TRUE(provider.ok()) << provider.status().ToString();
          config.api_key.clear();
          for (int call = 0; call < 3; ++call) {
            Request request;
            request.messages.push_back(Message{Role::kUser, {TextBlock{"hi"}}});
            CallResult r = (*provider)->Complete(request, {});
            ASSERT_TRUE(r.ok()) << r.error->ToString();
          }
        }
        EXPECT_EQ(scanner.hits(), 0u);
      }
      const std::string header =
          std::string(anthropic ? "x-api-key: " : "authorization: Bearer ") + key + "\r\n";
      ASSERT_EQ(server.requests().size(), 4u);
      for (const std::string& request : server.requests()) {
        EXPECT_THAT(request, testing::HasSubstr(header));
      }
    }
  }
}

// The key read from ANTHROPIC_API_KEY or OPENAI_API_KEY goes straight into the settings'
// SecretString. Before, it went through a temporary std::string freed unwiped. (The environment
// block itself is the process's, and not forkbox's to wipe.)
TEST(ProviderSecretWipeTest, TheKeyTakenFromTheEnvironmentLeavesNoCopyInFreedMemory) {
  for (const char* name : {"anthropic", "openai"}) {
    SCOPED_TRACE(name);
    const char* variable = std::string(name) == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
    ASSERT_EQ(::setenv(variable, kKey, 1), 0);
    {
      FreedMemoryScanner scanner(kKey);
      {
        ipc::ProviderSettings settings;
        settings.name = name;
        ApplyEnvironmentDefaults(settings, {});
        EXPECT_TRUE(settings.api_key == std::string_view(kKey));
      }
      EXPECT_EQ(scanner.hits(), 0u);
    }
    ASSERT_EQ(::unsetenv(variable), 0);
  }
}

}  // namespace
}  // namespace forkbox::agent
