// The provider settings, resolved once. The parent turns flags, the environment and the config
// files into one
// ipc::ProviderSettings (ResolveProviderSettings) and from then on every consumer takes it as it
// is: the parent's own provider, the start frame, the child's provider. ValidateProviderSettings
// is the only place that knows which settings are valid (MakeProvider calls it too, since it is a
// library entry point).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "ipc/messages.h"

namespace forkbox::agent {

// Default base URL and model of a valid provider name ("anthropic" or "openai").
std::string DefaultBaseUrl(const std::string& provider);
std::string DefaultModel(const std::string& provider);

// The Anthropic model a Claude Code alias names (sonnet, opus, haiku); nullopt for any other name.
// The one mapping: the session's model (ApplyEnvironmentDefaults) and agent files' use it.
std::optional<std::string> ClaudeModelAlias(std::string_view name);

// The config files' values of the settings the environment also sets. They rank below the
// environment and above the provider's defaults (flags > environment > files). Empty: unset.
struct ProviderFileSettings {
  std::string name;
  std::string model;
  std::string base_url;
  // The provider the user's own file names ("": none, the default), set when the project's file
  // names another (`name`): a base_url is for the user's provider, never for the project's (it
  // would send that provider's key to the user's gateway for another).
  std::string user_name;
  bool name_from_project = false;
};

// Where ApplyEnvironmentDefaults took a value from (`forkbox config` prints it).
struct SettingSource {
  enum Kind { kGiven, kEnvironment, kFile, kDefault };
  Kind kind = kGiven;
  std::string variable;  // kEnvironment: the variable's name.
};
struct ProviderSources {
  SettingSource name;
  SettingSource base_url;
  SettingSource model;
};

// Fills the fields the caller left empty, each from the first that sets it: the environment
// (FORKBOX_PROVIDER; ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL or OPENAI_API_KEY / OPENAI_BASE_URL
// of the provider chosen so, never of the other one; FORKBOX_MODEL, then ANTHROPIC_MODEL for
// anthropic, as Claude Code reads it), then `files`, then the provider's defaults. The name
// defaults to anthropic. API keys come from the environment only. On anthropic a model that is a
// Claude alias (ClaudeModelAlias), wherever it came from, becomes the model it names; another
// provider gets the name as given.
void ApplyEnvironmentDefaults(ipc::ProviderSettings& settings,
                              const ProviderFileSettings& files = {},
                              ProviderSources* sources = nullptr);

// Name, key (required for anthropic, no line breaks), an http(s) base URL without whitespace (and
// without user:password@, without /v1 for anthropic), positive token limit and timeouts, retries in
// [0, 100]. The error message never contains the key.
Status ValidateProviderSettings(const ipc::ProviderSettings& settings);

// Where the settings' key came from, as Claude Code's `apiKeySource` says it: the variable
// ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"), or "none" without a key. Never the key.
std::string ApiKeySource(const ipc::ProviderSettings& settings);

// True when a key would go to a host other than this machine over plain http:// (readable and
// changeable on the way): the parent warns.
bool SendsKeyInCleartext(const ipc::ProviderSettings& settings);

// ApplyEnvironmentDefaults, drops trailing slashes of the base URL, then validates.
Status ResolveProviderSettings(ipc::ProviderSettings& settings,
                               const ProviderFileSettings& files = {});

}  // namespace forkbox::agent
