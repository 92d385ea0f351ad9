// Provider configuration: environment defaults, validation with clear errors, error text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "agent/provider.h"
#include "agent/provider_settings.h"

namespace forkbox::agent {
namespace {

using testing::HasSubstr;
using testing::Not;

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* name : {"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                             "OPENAI_BASE_URL", "FORKBOX_PROVIDER", "FORKBOX_MODEL"}) {
      const char* old = getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(name);
    }
    for (const auto& [name, value] : vars) setenv(name, value, 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(ProviderConfig, EnvironmentFillsOnlyEmptyFields) {
  ScopedEnv env({{"FORKBOX_PROVIDER", "openai"},
                 {"OPENAI_API_KEY", "sk-env"},
                 {"OPENAI_BASE_URL", "http://localhost:11434/v1"},
                 {"FORKBOX_MODEL", "qwen3"},
                 {"ANTHROPIC_API_KEY", "wrong-one"}});
  ProviderConfig c;
  ApplyEnvironmentDefaults(c);
  EXPECT_EQ(c.name, "openai");
  EXPECT_EQ(c.api_key, "sk-env");
  EXPECT_EQ(c.base_url, "http://localhost:11434/v1");
  EXPECT_EQ(c.model, "qwen3");

  ProviderConfig explicit_config;
  explicit_config.name = "anthropic";
  explicit_config.model = "claude-x";
  ApplyEnvironmentDefaults(explicit_config);
  EXPECT_EQ(explicit_config.name, "anthropic");
  EXPECT_EQ(explicit_config.api_key, "wrong-one");  // ANTHROPIC_API_KEY for anthropic.
  EXPECT_EQ(explicit_config.base_url, "https://api.anthropic.com");
  EXPECT_EQ(explicit_config.model, "claude-x");
}

TEST(ProviderConfig, DefaultsWithoutEnvironment) {
  ScopedEnv env({});
  ProviderConfig c;
  ApplyEnvironmentDefaults(c);
  EXPECT_EQ(c.name, "anthropic");
  EXPECT_EQ(c.base_url, "https://api.anthropic.com");
  EXPECT_THAT(c.model, HasSubstr("claude"));
  EXPECT_EQ(DefaultBaseUrl("openai"), "https://api.openai.com/v1");
  EXPECT_FALSE(DefaultModel("openai").empty());
  EXPECT_EQ(c.max_retries, 2);
}

// The configuration error MakeProvider refuses `c` with.
std::string MakeError(ProviderConfig c) {
  Result<std::unique_ptr<Provider>> made = MakeProvider(c);
  EXPECT_FALSE(made.ok());
  if (made.ok()) return "";
  EXPECT_THAT(made.status().message(), HasSubstr("configuration error"));
  return made.status().message();
}

TEST(ProviderConfig, BadConfigurationIsAClearError) {
  ProviderConfig c;
  c.name = "gemini";
  c.api_key = "k";
  EXPECT_THAT(MakeError(c), HasSubstr("unknown provider \"gemini\""));

  c = ProviderConfig{};
  c.name = "anthropic";
  EXPECT_THAT(MakeError(c), HasSubstr("ANTHROPIC_API_KEY"));

  c.api_key = "sk-ant-secret-value";
  c.base_url = "ftp://example.com";
  EXPECT_THAT(MakeError(c), HasSubstr("http://"));
  c.base_url = "http://127.0.0.1:1/v1";
  EXPECT_THAT(MakeError(c), HasSubstr("must not end in /v1"));
  c.base_url = "https://api.anthropic.com";
  c.max_tokens = 0;
  EXPECT_THAT(MakeError(c), HasSubstr("max_tokens"));
  c.max_tokens = 10;
  c.idle_timeout_ms = 0;
  EXPECT_THAT(MakeError(c), HasSubstr("timeouts"));
  c.idle_timeout_ms = 10;
  c.max_retries = -1;
  EXPECT_THAT(MakeError(c), HasSubstr("max_retries"));
  c.max_retries = 2;
  c.api_key = "sk-ant\r\nX-Evil: 1";
  const std::string e = MakeError(c);
  EXPECT_THAT(e, HasSubstr("line break"));
  EXPECT_THAT(e, Not(HasSubstr("X-Evil")));
}

TEST(ProviderConfig, OpenAiNeedsNoKeyAndSettingsAreTakenAsTheyAre) {
  ProviderConfig c;
  c.name = "openai";
  c.base_url = "http://127.0.0.1:8080/v1";
  c.model = "m";
  Result<std::unique_ptr<Provider>> p = MakeProvider(c);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->config(), c);
}

TEST(ModelError, ToStringSaysWhatHappened) {
  ModelError e;
  e.provider = "anthropic";
  e.kind = ModelError::Kind::kHttp;
  e.http_status = 401;
  e.error_type = "authentication_error";
  e.message = "invalid x-api-key";
  e.request_id = "req_123";
  e.attempts = 1;
  EXPECT_EQ(e.ToString(),
            "anthropic: HTTP 401 authentication_error: invalid x-api-key (request_id req_123) "
            "after 1 attempt");
  e.kind = ModelError::Kind::kTransport;
  e.http_status = 0;
  e.error_type.clear();
  e.request_id.clear();
  e.message = "Couldn't connect to server";
  e.attempts = 3;
  EXPECT_EQ(e.ToString(),
            "anthropic: connection error: Couldn't connect to server after 3 attempts");
}

}  // namespace
}  // namespace forkbox::agent
