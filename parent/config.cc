#include "parent/config.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace forkbox::parent {

Result<agent::ProviderConfig> ResolveProviderConfig(const Options& options) {
  agent::ProviderConfig config;
  config.name = options.provider;  // Empty lets FORKBOX_PROVIDER fill it.
  config.model = options.model;
  config.base_url = options.base_url;
  config.max_tokens = options.max_tokens;
  config.max_retries = options.max_retries;
  config.stream = options.stream;
  config.verbose = options.verbose;
  agent::ApplyEnvironmentDefaults(config);
  if (config.name.empty()) config.name = "anthropic";
  if (config.name != "anthropic" && config.name != "openai") {
    return Status::InvalidArgument("unknown provider '" + config.name +
                                   "' (from FORKBOX_PROVIDER); use anthropic or openai");
  }
  if (config.base_url.empty()) config.base_url = agent::DefaultBaseUrl(config.name);
  if (config.model.empty()) config.model = agent::DefaultModel(config.name);
  if (config.name == "anthropic" && config.api_key.empty()) {
    return Status::InvalidArgument(
        "no API key: set ANTHROPIC_API_KEY (or use --provider openai with OPENAI_BASE_URL)");
  }
  return config;
}

namespace {

Result<std::string> Canonical(const std::string& path, const char* what) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    return Status::FromErrno(errno, std::string(what) + " '" + path + "'");
  }
  return std::string(buf);
}

}  // namespace

Result<std::string> ResolveWorkdir(const Options& options) {
  std::string dir = options.workdir.empty() ? "." : options.workdir;
  auto canonical = Canonical(dir, "--workdir");
  if (!canonical.ok()) return canonical.status();
  struct stat st;
  if (stat(canonical->c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + *canonical);
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("--workdir '" + dir + "' is not a directory");
  }
  return canonical;
}

ipc::SandboxSettings ToSandboxSettings(const Options& options) {
  ipc::SandboxSettings s;
  s.enabled = options.sandbox;
  s.allow_net = options.allow_net;
  s.writable = options.writable;
  s.env = options.env;
  return s;
}

Result<std::string> ResolveChildPath(const Options& options) {
  std::string path = options.child_path;
  const char* source = "--child-path";
  if (path.empty()) {
    const char* env = getenv("FORKBOX_CHILD");
    if (env != nullptr && *env != '\0') {
      path = env;
      source = "FORKBOX_CHILD";
    }
  }
  if (path.empty()) {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return Status::Internal("readlink /proc/self/exe: " + ec.message());
    path = (self.parent_path() / "forkbox-child").string();
    source = "the default (next to forkbox)";
  }
  auto canonical = Canonical(path, "forkbox-child");
  if (!canonical.ok()) {
    return Status::InvalidArgument(canonical.status().message() + " (from " + source + ")");
  }
  if (access(canonical->c_str(), X_OK) != 0) {
    return Status::FromErrno(errno, std::string("forkbox-child '") + *canonical +
                                        "' is not executable (from " + source + ")");
  }
  return canonical;
}

Result<std::string> PrepareTranscriptDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("--transcript-dir '" + dir + "': " + ec.message());
  auto canonical = Canonical(dir, "--transcript-dir");
  if (!canonical.ok()) return canonical.status();
  if (access(canonical->c_str(), W_OK) != 0) {
    return Status::FromErrno(errno, "--transcript-dir '" + *canonical + "'");
  }
  return canonical;
}

}  // namespace forkbox::parent
