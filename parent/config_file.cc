#include "parent/config_file.h"

#include <fcntl.h>
#include <toml++/toml.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "base/file.h"

namespace forkbox::parent {
namespace {

constexpr size_t kMaxConfigFileBytes = 1 << 20;

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

// Keys a project file may not set, and why.
struct Refusal {
  const char* key;
  const char* why;
};
constexpr Refusal kProjectRefused[] = {
    {"allow-net", "it would give tools the network"},
    {"writable", "it would make more paths writable"},
    {"readable", "it would make more paths readable"},
    {"allow-broad-workdir", "it would let the workdir cover your credential stores"},
    {"env", "it would pass environment variables to tools"},
    {"base-url", "it would send your API key to another server"},
    {"child-path", "it would choose the binary that runs your tasks"},
    {"transcript-dir", "it would choose where forkbox writes"},
    {"workdir", "the project is the workdir"},
};

std::string UserConfigPath() {
  if (const char* x = Env("XDG_CONFIG_HOME"); x != nullptr && x[0] == '/') {
    return std::string(x) + "/forkbox/config.toml";
  }
  if (const char* home = Env("HOME")) return std::string(home) + "/.config/forkbox/config.toml";
  return "";
}

std::string Where(bool project, const std::string& path, const toml::node& node) {
  return std::string(project ? "project" : "user") + " config " + path + ":" +
         std::to_string(node.source().begin.line);
}

// One value as a command-line argument value; false on a wrong type.
bool ValueText(const toml::node& node, OptionKind kind, std::vector<std::string>* out) {
  if (kind == OptionKind::kList) {
    const toml::array* array = node.as_array();
    if (array == nullptr) return false;
    for (const toml::node& item : *array) {
      if (!item.is_string()) return false;
      out->push_back(*item.value<std::string>());
    }
    return true;
  }
  if (kind == OptionKind::kFlag) {
    if (!node.is_boolean()) return false;
    out->push_back(*node.value<bool>() ? "true" : "false");
    return true;
  }
  if (kind == OptionKind::kString) {
    if (!node.is_string()) return false;
    out->push_back(*node.value<std::string>());
  } else if (node.is_integer()) {
    out->push_back(std::to_string(*node.value<int64_t>()));
  } else if (node.is_floating_point()) {
    out->push_back(std::to_string(*node.value<double>()));
  } else {
    return false;
  }
  return true;
}

Status CheckProjectKey(const std::string& key, const toml::node& node, const std::string& where) {
  if (key == "sandbox" && node.value<std::string>() == std::optional<std::string>("on")) {
    return Status::Ok();  // Narrowing (or a no-op) is fine.
  }
  if (key == "sandbox") {
    return Status::InvalidArgument(where +
                                   ": key \"sandbox\": a project file may not turn the "
                                   "sandbox off; pass --sandbox=off yourself");
  }
  const Refusal* refusal = nullptr;
  for (const Refusal& r : kProjectRefused) {
    if (key == r.key) refusal = &r;
  }
  if (refusal == nullptr) return Status::Ok();
  return Status::InvalidArgument(where + ": key \"" + key + "\": a project file may not set it (" +
                                 refusal->why +
                                 "); put it in your user config (~/.config/forkbox/config.toml) "
                                 "or pass --" +
                                 key);
}

Status ReadOne(const std::string& path, bool project,
               const std::map<std::string, OptionKind>& options, ConfigArgs* out) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    return Status::Ok();
  }
  // A cloned project's file is never followed through a link; neither file may be a FIFO, a
  // device or bigger than any real config.
  Result<std::string> text = ReadRegularFile(path, kMaxConfigFileBytes, project ? O_NOFOLLOW : 0);
  if (!text.ok()) {
    return text.status().WithContext(std::string(project ? "project" : "user") + " config");
  }
  toml::table table;
  try {
    table = toml::parse(*text, path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(std::string(project ? "project" : "user") + " config " + path +
                                   ":" + std::to_string(e.source().begin.line) + ": " +
                                   std::string(e.description()));
  }
  for (const auto& [k, node] : table) {
    const std::string key(k.str());
    const std::string where = Where(project, path, node);
    auto option = options.find(key);
    // No flag carries a secret, so only an unknown key can be an attempt at one
    // (task-max-tokens is an option, api-key or token is not).
    const bool secret_like = key.find("key") != std::string::npos ||
                             key.find("token") != std::string::npos ||
                             key.find("secret") != std::string::npos;
    if (option == options.end() && secret_like) {
      return Status::InvalidArgument(where + ": key \"" + key +
                                     "\": API keys are never read from config files; set "
                                     "ANTHROPIC_API_KEY or OPENAI_API_KEY in the environment");
    }
    if (option == options.end()) {
      return Status::InvalidArgument(where + ": unknown key \"" + key +
                                     "\" (keys are the long flag names without the dashes)");
    }
    if (project) FORKBOX_RETURN_IF_ERROR(CheckProjectKey(key, node, where));
    std::vector<std::string> values;
    if (!ValueText(node, option->second, &values)) {
      const char* want = option->second == OptionKind::kFlag     ? "true or false"
                         : option->second == OptionKind::kList   ? "an array of strings"
                         : option->second == OptionKind::kNumber ? "a number"
                                                                 : "a string";
      return Status::InvalidArgument(where + ": key \"" + key + "\": expected " + want);
    }
    const std::string env = EnvironmentFor(key);
    if (!env.empty() && Env(env.c_str()) != nullptr) continue;  // The environment wins.
    for (const std::string& v : values) out->args.push_back("--" + key + "=" + v);
    out->sources[key] = where;
  }
  return Status::Ok();
}

}  // namespace

std::string EnvironmentFor(const std::string& key) {
  if (key == "provider") return "FORKBOX_PROVIDER";
  if (key == "model") return "FORKBOX_MODEL";
  if (key == "base-url") {
    const char* p = Env("FORKBOX_PROVIDER");
    return p != nullptr && std::string(p) == "openai" ? "OPENAI_BASE_URL" : "ANTHROPIC_BASE_URL";
  }
  return "";
}

Result<ConfigArgs> ReadConfigFiles(const std::map<std::string, OptionKind>& options,
                                   const std::string& workdir) {
  ConfigArgs out;
  FORKBOX_RETURN_IF_ERROR(ReadOne(UserConfigPath(), false, options, &out));
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::absolute(workdir.empty() ? "." : workdir, ec).lexically_normal();
  if (ec) return Status::InvalidArgument("--workdir '" + workdir + "': " + ec.message());
  FORKBOX_RETURN_IF_ERROR(
      ReadOne((dir / ".forkbox" / "config.toml").string(), true, options, &out));
  return out;
}

}  // namespace forkbox::parent
