#include "agent/provider_settings.h"

#include <gtest/gtest.h>

namespace forkbox::agent {
namespace {

// Every field set away from its default, so a field dropped in either direction shows up.
TEST(ProviderSettings, EveryFieldSurvivesTheStartFrameBothWays) {
  ProviderConfig config;
  config.name = "openai";
  config.api_key = "sk-test";
  config.base_url = "http://127.0.0.1:9/v1";
  config.model = "local-model";
  config.max_tokens = 123;
  config.max_retries = 7;
  config.connect_timeout_ms = 11;
  config.idle_timeout_ms = 22;
  config.total_timeout_ms = 33;
  config.stream = false;
  config.verbose = true;

  ipc::ProviderSettings wire = ToProviderSettings(config);
  EXPECT_EQ(wire.name, "openai");
  EXPECT_EQ(wire.api_key, "sk-test");
  EXPECT_EQ(wire.base_url, "http://127.0.0.1:9/v1");
  EXPECT_EQ(wire.model, "local-model");
  EXPECT_EQ(wire.max_tokens, 123);
  EXPECT_EQ(wire.max_retries, 7);
  EXPECT_EQ(wire.connect_timeout_ms, 11);
  EXPECT_EQ(wire.idle_timeout_ms, 22);
  EXPECT_EQ(wire.total_timeout_ms, 33);
  EXPECT_FALSE(wire.stream);
  EXPECT_TRUE(wire.verbose);

  ProviderConfig back = FromProviderSettings(wire);
  EXPECT_EQ(back.name, config.name);
  EXPECT_EQ(back.api_key, config.api_key);
  EXPECT_EQ(back.base_url, config.base_url);
  EXPECT_EQ(back.model, config.model);
  EXPECT_EQ(back.max_tokens, config.max_tokens);
  EXPECT_EQ(back.max_retries, config.max_retries);
  EXPECT_EQ(back.connect_timeout_ms, config.connect_timeout_ms);
  EXPECT_EQ(back.idle_timeout_ms, config.idle_timeout_ms);
  EXPECT_EQ(back.total_timeout_ms, config.total_timeout_ms);
  EXPECT_EQ(back.stream, config.stream);
  EXPECT_EQ(back.verbose, config.verbose);
}

}  // namespace
}  // namespace forkbox::agent
