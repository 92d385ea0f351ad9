#include "agent/provider_settings.h"

#include <cstdlib>
#include <initializer_list>
#include <utility>

#include "agent/http_url.h"
#include "agent/wire.h"

namespace forkbox::agent {
namespace {

// The variable's value in the environment block, copied nowhere; "" when unset.
std::string_view EnvView(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string_view() : std::string_view(v);
}

std::string Env(const char* name) { return std::string(EnvView(name)); }

Status Invalid(const ipc::ProviderSettings& s, const std::string& message) {
  // A key pasted into another field must not end up in an error message.
  return Status::InvalidArgument(RedactKey(message, s.api_key.str()));
}

// An empty `value` becomes the first non-empty of the variables (nullptr: none), the file's value
// and `fallback`.
void Fill(std::string& value, std::initializer_list<const char*> variables, const std::string& file,
          const std::string& fallback, SettingSource* source) {
  SettingSource from;
  for (const char* variable : variables) {
    if (variable != nullptr && value.empty() && !(value = Env(variable)).empty()) {
      from = {SettingSource::kEnvironment, variable};
    }
  }
  if (value.empty() && !(value = file).empty()) {
    from.kind = SettingSource::kFile;
  } else if (value.empty()) {
    value = fallback;
    from.kind = SettingSource::kDefault;
  }
  if (source != nullptr) *source = std::move(from);
}

// Why no key was found, naming the variables that are set but not used (never their values):
// ANTHROPIC_AUTH_TOKEN (a bearer token; the Anthropic API takes a key in x-api-key) and
// OPENAI_API_KEY (another provider's, which forkbox never switches to by itself).
std::string NoAnthropicKey() {
  std::string why = "no API key: set ANTHROPIC_API_KEY";
  if (!Env("ANTHROPIC_AUTH_TOKEN").empty()) {
    why +=
        "; ANTHROPIC_AUTH_TOKEN is set but not used: the Anthropic API takes a key (x-api-key), "
        "not a bearer token";
  }
  if (!Env("OPENAI_API_KEY").empty()) {
    return why + "; OPENAI_API_KEY" +
           (Env("OPENAI_BASE_URL").empty() ? "" : " (and OPENAI_BASE_URL)") +
           " is set: pass --provider openai (or FORKBOX_PROVIDER=openai) to use it";
  }
  return why + " (or use --provider openai with OPENAI_BASE_URL)";
}

// The variable a provider's key is read from.
const char* KeyVariable(const std::string& provider) {
  return provider == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
}

}  // namespace

std::optional<std::string> ClaudeModelAlias(std::string_view name) {
  static constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
      {"sonnet", "claude-sonnet-4-5"}, {"opus", "claude-opus-4-1"}, {"haiku", "claude-haiku-4-5"}};
  for (const auto& [alias, model] : kAliases) {
    if (name == alias) return std::string(model);
  }
  return std::nullopt;
}

std::string DefaultBaseUrl(const std::string& provider) {
  return provider == "openai" ? "https://api.openai.com/v1" : "https://api.anthropic.com";
}

std::string DefaultModel(const std::string& provider) {
  return provider == "openai" ? "gpt-4.1" : "claude-sonnet-4-5";
}

void ApplyEnvironmentDefaults(ipc::ProviderSettings& s, const ProviderFileSettings& files,
                              ProviderSources* sources) {
  SettingSource name_source;
  Fill(s.name, {"FORKBOX_PROVIDER"}, files.name, "anthropic", &name_source);
  // The variables of the provider chosen above: another provider's URL or key is not for it.
  const bool openai = s.name == "openai";
  // Straight from the environment block into the SecretString: a temporary would be freed unwiped.
  if (s.api_key.empty()) s.api_key = EnvView(KeyVariable(s.name));
  // Nor is the files' URL, when the project's file chose a provider the user's did not.
  const bool project_switched =
      name_source.kind == SettingSource::kFile && files.name_from_project &&
      s.name != (files.user_name.empty() ? std::string("anthropic") : files.user_name);
  Fill(s.base_url, {openai ? "OPENAI_BASE_URL" : "ANTHROPIC_BASE_URL"},
       project_switched ? std::string() : files.base_url, DefaultBaseUrl(s.name),
       sources ? &sources->base_url : nullptr);
  if (sources != nullptr) sources->name = std::move(name_source);
  // Claude Code's variable ranks below forkbox's own, and counts for anthropic only.
  Fill(s.model, {"FORKBOX_MODEL", openai ? nullptr : "ANTHROPIC_MODEL"}, files.model,
       DefaultModel(s.name), sources ? &sources->model : nullptr);
  if (std::optional<std::string> full = ClaudeModelAlias(s.model); full && !openai) {
    s.model = std::move(*full);
  }
}

std::string ApiKeySource(const ipc::ProviderSettings& s) {
  return s.api_key.empty() ? "none" : KeyVariable(s.name);
}

bool SendsKeyInCleartext(const ipc::ProviderSettings& s) {
  Result<ParsedUrl> url = ParseHttpUrl(s.base_url);
  if (!url.ok() || url->tls || s.api_key.empty()) return false;
  const std::string& host = url->host;
  return !(host == "localhost" || host.ends_with(".localhost") || host == "::1" ||
           host.rfind("127.", 0) == 0);
}

Status ValidateProviderSettings(const ipc::ProviderSettings& s) {
  if (s.name != "anthropic" && s.name != "openai") {
    return Invalid(s, "unknown provider \"" + s.name + "\" (expected anthropic or openai)");
  }
  const bool anthropic = s.name == "anthropic";
  if (anthropic && s.api_key.empty()) return Invalid(s, NoAnthropicKey());
  if (s.api_key.str().find_first_of("\r\n") != std::string::npos) {
    return Invalid(s, "the API key contains a line break");
  }
  if (!s.base_url.starts_with("http://") && !s.base_url.starts_with("https://")) {
    return Invalid(s, "base URL \"" + s.base_url + "\" must start with http:// or https://");
  }
  if (s.base_url.find_first_of(" \t\r\n") != std::string::npos) {
    return Invalid(s, "base URL contains whitespace");
  }
  // Refused here, before any banner or config listing could print the password.
  if (Result<ParsedUrl> url = ParseHttpUrl(s.base_url); url.ok() && url->has_userinfo) {
    return Invalid(s,
                   "the base URL carries user:password@ credentials, which are never sent: put "
                   "the key in the settings and the host alone in the URL");
  }
  if (anthropic && (s.base_url.ends_with("/v1") || s.base_url.ends_with("/v1/"))) {
    return Invalid(s, "Anthropic base URL \"" + s.base_url +
                          "\" must not end in /v1 (the client adds /v1/messages)");
  }
  if (s.max_tokens <= 0) return Invalid(s, "max_tokens must be positive");
  if (s.max_retries < 0 || s.max_retries > 100) {
    return Invalid(s, "max_retries must be between 0 and 100");
  }
  if (s.connect_timeout_ms <= 0 || s.idle_timeout_ms <= 0 || s.total_timeout_ms <= 0) {
    return Invalid(s, "timeouts must be positive");
  }
  if (s.context_window < 0) return Invalid(s, "the context window must be positive");
  if (s.thinking_budget_tokens != 0) {
    // The Messages API's own rules for extended thinking.
    if (!anthropic) return Invalid(s, "--thinking needs the anthropic provider");
    if (s.thinking_budget_tokens < 1024 || s.thinking_budget_tokens >= s.max_tokens) {
      return Invalid(s,
                     "the thinking budget must be at least 1024 tokens and less than "
                     "max_tokens (" +
                         std::to_string(s.max_tokens) + ")");
    }
  }
  return Status::Ok();
}

Status ResolveProviderSettings(ipc::ProviderSettings& s, const ProviderFileSettings& files) {
  ApplyEnvironmentDefaults(s, files);
  while (s.base_url.size() > 1 && s.base_url.back() == '/') s.base_url.pop_back();
  return ValidateProviderSettings(s);
}

}  // namespace forkbox::agent
