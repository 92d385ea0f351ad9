// The provider settings are resolved once (flags, then environment, then defaults, then one
// validation) and then travel unchanged: through the start frame into the child's provider.
#include "agent/provider_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "agent/provider.h"

namespace forkbox::agent {
namespace {

using testing::HasSubstr;

// Every field set away from its default, so a field the start frame drops shows up.
TEST(ProviderSettings, EveryFieldSurvivesTheStartFrame) {
  ipc::StartMessage start;
  start.prompt = "p";
  start.workdir = "/w";
  ProviderConfig& c = start.provider;
  c.name = "openai";
  c.api_key = "sk-test";
  c.base_url = "http://127.0.0.1:9/v1";
  c.model = "local-model";
  c.max_tokens = 123;
  c.max_retries = 7;
  c.connect_timeout_ms = 11;
  c.idle_timeout_ms = 22;
  c.total_timeout_ms = 33;
  c.stream = false;
  c.verbose = true;
  c.prompt_caching = false;
  c.context_window = 44'000;
  c.thinking_budget_tokens = 2048;
  Result<ipc::Message> back = ipc::FromJson(ipc::ToJson(start));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<ipc::StartMessage>(*back).provider, c);
}

TEST(ProviderSettings, ResolveTrimsTheUrlAndValidatesOnce) {
  unsetenv("FORKBOX_PROVIDER");
  unsetenv("FORKBOX_MODEL");
  ProviderConfig c;
  c.name = "openai";
  c.base_url = "http://127.0.0.1:8080/v1/";
  ASSERT_TRUE(ResolveProviderSettings(c).ok());
  EXPECT_EQ(c.base_url, "http://127.0.0.1:8080/v1");
  EXPECT_EQ(c.model, DefaultModel("openai"));

  ProviderConfig bad;
  bad.name = "gemini";
  Status st = ResolveProviderSettings(bad);
  EXPECT_THAT(st.message(), HasSubstr("unknown provider \"gemini\""));
  // MakeProvider refuses exactly what the resolution refuses: one validation.
  Result<std::unique_ptr<Provider>> made = MakeProvider(bad);
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.status().message(), HasSubstr(ValidateProviderSettings(bad).message()));
}

// Flags > environment > files > defaults; a provider's variables count for that provider only, so
// another provider's base URL neither overrides nor drops the file's (defect 4).
TEST(ProviderSettings, TheFilesRankBelowTheEffectiveProvidersVariables) {
  unsetenv("FORKBOX_PROVIDER");
  unsetenv("FORKBOX_MODEL");
  unsetenv("OPENAI_BASE_URL");
  setenv("ANTHROPIC_BASE_URL", "http://anthropic.example", 1);
  ProviderFileSettings files;
  files.name = "openai";
  files.base_url = "http://127.0.0.1:9/v1";
  files.model = "m-file";
  ProviderConfig c;
  ProviderSources from;
  ApplyEnvironmentDefaults(c, files, &from);
  EXPECT_EQ(c.name, "openai");
  EXPECT_EQ(c.base_url, "http://127.0.0.1:9/v1");
  EXPECT_EQ(c.model, "m-file");
  EXPECT_EQ(from.base_url.kind, SettingSource::kFile);
  setenv("OPENAI_BASE_URL", "http://openai.example/v1", 1);
  setenv("FORKBOX_MODEL", "m-env", 1);
  ProviderConfig env;
  ApplyEnvironmentDefaults(env, files, &from);
  EXPECT_EQ(env.base_url, "http://openai.example/v1");
  EXPECT_EQ(env.model, "m-env");
  EXPECT_EQ(from.base_url.kind, SettingSource::kEnvironment);
  EXPECT_EQ(from.base_url.variable, "OPENAI_BASE_URL");
  EXPECT_EQ(from.name.kind, SettingSource::kFile);
  ProviderConfig flag;
  flag.model = "m-flag";
  ApplyEnvironmentDefaults(flag, files, &from);
  EXPECT_EQ(flag.model, "m-flag");
  EXPECT_EQ(from.model.kind, SettingSource::kGiven);
  for (const char* name : {"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "FORKBOX_MODEL"}) {
    unsetenv(name);
  }
}

// Claude Code's ANTHROPIC_MODEL ranks below FORKBOX_MODEL and counts for anthropic only; a Claude
// alias (sonnet, opus, haiku) from a flag, a variable or a file names the full model there, and
// is sent as given to another provider.
TEST(ProviderSettings, AnthropicModelAndClaudesAliases) {
  unsetenv("FORKBOX_PROVIDER");
  unsetenv("FORKBOX_MODEL");
  setenv("ANTHROPIC_MODEL", "opus", 1);
  ProviderConfig c;
  ProviderSources from;
  ApplyEnvironmentDefaults(c, {}, &from);
  EXPECT_EQ(c.model, "claude-opus-4-1");
  EXPECT_EQ(from.model.variable, "ANTHROPIC_MODEL");
  setenv("FORKBOX_MODEL", "m-forkbox", 1);
  ProviderConfig ours;
  ApplyEnvironmentDefaults(ours, {}, &from);
  EXPECT_EQ(ours.model, "m-forkbox");
  unsetenv("FORKBOX_MODEL");
  ProviderConfig openai;
  openai.name = "openai";
  ApplyEnvironmentDefaults(openai, {}, &from);
  EXPECT_EQ(openai.model, DefaultModel("openai"));
  ProviderConfig flag;
  flag.model = "haiku";
  ApplyEnvironmentDefaults(flag);
  EXPECT_EQ(flag.model, "claude-haiku-4-5");
  ProviderConfig openai_alias;
  openai_alias.name = "openai";
  openai_alias.model = "sonnet";
  ApplyEnvironmentDefaults(openai_alias);
  EXPECT_EQ(openai_alias.model, "sonnet");
  EXPECT_EQ(ClaudeModelAlias("sonnet"), "claude-sonnet-4-5");
  EXPECT_EQ(ClaudeModelAlias("claude-sonnet-4-5"), std::nullopt);
  unsetenv("ANTHROPIC_MODEL");
}

// --thinking follows the Messages API's rules: Anthropic only, >= 1024, below max_tokens.
TEST(ProviderSettings, ThinkingBudgetIsChecked) {
  ProviderConfig c;
  c.name = "anthropic";
  c.api_key = "k";
  c.base_url = "https://api.anthropic.com";
  c.model = "claude-sonnet-4-5";
  c.max_tokens = 4096;
  c.thinking_budget_tokens = 1024;
  EXPECT_TRUE(ValidateProviderSettings(c).ok());
  c.thinking_budget_tokens = 4096;
  EXPECT_THAT(ValidateProviderSettings(c).message(), HasSubstr("less than max_tokens"));
  c.thinking_budget_tokens = 512;
  EXPECT_THAT(ValidateProviderSettings(c).message(), HasSubstr("at least 1024"));
  c.thinking_budget_tokens = 1024;
  c.name = "openai";
  EXPECT_THAT(ValidateProviderSettings(c).message(), HasSubstr("anthropic"));
}

TEST(ProviderSettings, ErrorsNeverCarryTheKey) {
  ProviderConfig c;
  c.name = "openai";
  c.api_key = "sk-secret-1234";
  c.base_url = "sk-secret-1234";  // A key pasted into the wrong place.
  Status st = ValidateProviderSettings(c);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), testing::Not(HasSubstr("sk-secret-1234")));
}

// A password in the base URL is refused before anything prints the URL (the banner printed it,
// and the request then refused it); the error does not repeat it. The control: the same URL
// without it is valid.
TEST(ProviderSettings, ABaseUrlWithCredentialsIsRefusedWithoutEchoingThem) {
  ProviderConfig c;
  c.name = "openai";
  c.base_url = "https://me:hunter2@llm.example/v1";
  Status st = ValidateProviderSettings(c);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("user:password@"));
  EXPECT_THAT(st.message(), testing::Not(HasSubstr("hunter2")));
  c.base_url = "https://llm.example/v1";
  EXPECT_TRUE(ValidateProviderSettings(c).ok());
}

// Plain http:// carries the key readable to any host but this machine; loopback and https do not.
TEST(ProviderSettings, CleartextIsToldForAKeySentOffTheMachine) {
  ProviderConfig c;
  c.name = "openai";
  c.api_key = "sk-x";
  for (const auto& [url, cleartext] :
       std::vector<std::pair<std::string, bool>>{{"http://llm.example:8080/v1", true},
                                                 {"http://10.0.0.5/v1", true},
                                                 {"https://llm.example/v1", false},
                                                 {"http://127.0.0.1:8080/v1", false},
                                                 {"http://localhost:11434/v1", false},
                                                 {"http://[::1]:8080/v1", false}}) {
    c.base_url = url;
    EXPECT_EQ(SendsKeyInCleartext(c), cleartext) << url;
  }
  c.api_key.clear();  // No key (a local server): nothing to leak.
  c.base_url = "http://llm.example/v1";
  EXPECT_FALSE(SendsKeyInCleartext(c));
}

// stream-json's init says where the key came from in Claude Code's words (`apiKeySource`): the
// variable of the provider in use, or "none"; never the key.
TEST(ProviderSettings, TheKeysSourceIsItsVariableNeverTheKey) {
  ProviderConfig c;
  c.name = "anthropic";
  c.api_key = "sk-ant-secret";
  EXPECT_EQ(ApiKeySource(c), "ANTHROPIC_API_KEY");
  c.name = "openai";
  EXPECT_EQ(ApiKeySource(c), "OPENAI_API_KEY");
  c.api_key.clear();
  EXPECT_EQ(ApiKeySource(c), "none");
}

}  // namespace
}  // namespace forkbox::agent
