#include "agent/provider_settings.h"

namespace forkbox::agent {

ipc::ProviderSettings ToProviderSettings(const ProviderConfig& config) {
  ipc::ProviderSettings s;
  s.name = config.name;
  s.api_key = config.api_key;
  s.base_url = config.base_url;
  s.model = config.model;
  s.max_tokens = config.max_tokens;
  s.max_retries = config.max_retries;
  s.connect_timeout_ms = config.connect_timeout_ms;
  s.idle_timeout_ms = config.idle_timeout_ms;
  s.total_timeout_ms = config.total_timeout_ms;
  s.stream = config.stream;
  s.verbose = config.verbose;
  return s;
}

ProviderConfig FromProviderSettings(const ipc::ProviderSettings& settings) {
  ProviderConfig c;
  c.name = settings.name;
  c.api_key = settings.api_key;
  c.base_url = settings.base_url;
  c.model = settings.model;
  c.max_tokens = settings.max_tokens;
  c.max_retries = static_cast<int>(settings.max_retries);
  c.connect_timeout_ms = settings.connect_timeout_ms;
  c.idle_timeout_ms = settings.idle_timeout_ms;
  c.total_timeout_ms = settings.total_timeout_ms;
  c.stream = settings.stream;
  c.verbose = settings.verbose;
  return c;
}

}  // namespace forkbox::agent
