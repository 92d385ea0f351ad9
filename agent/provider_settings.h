// The provider settings, resolved once. The parent turns flags plus the environment into one
// ipc::ProviderSettings (ResolveProviderSettings) and from then on every consumer takes it as it
// is: the parent's own provider, the start frame, the child's provider. ValidateProviderSettings
// is the only place that knows which settings are valid (MakeProvider calls it too, since it is a
// library entry point).
#pragma once

#include <string>

#include "base/status.h"
#include "ipc/messages.h"

namespace forkbox::agent {

// Default base URL and model of a valid provider name ("anthropic" or "openai").
std::string DefaultBaseUrl(const std::string& provider);
std::string DefaultModel(const std::string& provider);

// Fills the fields the caller left empty from the environment (FORKBOX_PROVIDER, then
// ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL or OPENAI_API_KEY / OPENAI_BASE_URL for that provider,
// FORKBOX_MODEL), then from the provider's defaults. The name defaults to anthropic.
void ApplyEnvironmentDefaults(ipc::ProviderSettings& settings);

// Name, key (required for anthropic, no line breaks), an http(s) base URL without whitespace (and
// without /v1 for anthropic), positive token limit and timeouts, retries in [0, 100]. The error
// message never contains the key.
Status ValidateProviderSettings(const ipc::ProviderSettings& settings);

// ApplyEnvironmentDefaults, drops trailing slashes of the base URL, then validates.
Status ResolveProviderSettings(ipc::ProviderSettings& settings);

}  // namespace forkbox::agent
