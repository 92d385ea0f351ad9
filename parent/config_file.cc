#include "parent/config_file.h"

#include <fcntl.h>
#include <toml++/toml.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <string_view>

#include "base/file.h"
#include "base/unique_fd.h"

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
    {"system-prompt", "it would replace forkbox's system prompt"},
    {"transcript-dir", "it would choose where forkbox writes"},
    {"tools", "it could offer tools your own config turns off"},
    {"workdir", "the project is the workdir"},
    {"output-format", "it would turn the answer that `answer=$(forkbox ...)` takes into JSON"},
    {"json", "it would turn the answer that `answer=$(forkbox ...)` takes into JSON"},
};

// Long options that choose what one run does, not how forkbox behaves: a file that set them
// would make every plain `forkbox` read stdin (print), reopen an old session (continue, resume)
// or overwrite a file (output-last-message); a prompt file's text is set by its text key, so
// that a file never names another file to read. Refused in both files.
struct CommandLineOnly {
  const char* key;
  const char* flag;
  const char* what;
};
constexpr CommandLineOnly kCommandLineOnly[] = {
    {"print", "-p/--print", "it makes a run read its prompt from stdin"},
    {"continue", "-c/--continue", "it makes a run reopen your last session"},
    {"resume", "-r/--resume", "it makes a run reopen one saved session"},
    {"output-last-message", "-o/--output-last-message", "it chooses a file each run overwrites"},
    {"system-prompt-file", "--system-prompt-file", "in a file, give the text as system-prompt"},
    {"append-system-prompt-file", "--append-system-prompt-file",
     "in a file, give the text as append-system-prompt"},
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

// The shortest text that reads back as `value` ("%g" would turn 1e-7 into 1e-07 but 0.1234567
// into 0.123457).
std::string DoubleText(double value) {
  char buf[32] = "";
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
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
  } else if (kind == OptionKind::kNumber && node.is_floating_point()) {
    out->push_back(DoubleText(*node.value<double>()));
  } else {
    return false;  // 7.5 or 5e0 for a count is a float, not an integer.
  }
  return true;
}

const char* Expected(OptionKind kind) {
  switch (kind) {
    case OptionKind::kFlag:
      return "true or false";
    case OptionKind::kInteger:
      return "an integer";
    case OptionKind::kNumber:
      return "a number";
    case OptionKind::kList:
      return "an array of strings";
    case OptionKind::kString:
      break;
  }
  return "a string";
}

Status CheckProjectKey(const std::string& key, const toml::node& node, const std::string& where) {
  const std::optional<std::string> mode = node.value<std::string>();
  if (key == "sandbox" && (mode == "on" || mode == "read-only" || mode == "workspace-write")) {
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

// Whether a key names a secret by one of its words ("api-key", "auth_token"; not "monkey").
bool SecretLike(const std::string& key) {
  static const std::set<std::string, std::less<>> kWords = {"key",    "apikey",   "token",
                                                            "secret", "password", "passwd"};
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find_first_of("-_.", start);
    if (end == std::string::npos) end = key.size();
    if (kWords.count(std::string_view(key).substr(start, end - start)) > 0) return true;
    start = end + 1;
  }
  return false;
}

// One key of a file, checked, appended to *out.
Status ReadKey(const std::string& key, const toml::node& node, const std::string& where,
               bool project, const std::map<std::string, OptionKind>& options,
               std::vector<ConfigEntry>* out) {
  auto option = options.find(key);
  // No flag carries a secret, so only an unknown key can be an attempt at one
  // (task-max-tokens is an option, api-key or token is not).
  if (option == options.end() && SecretLike(key)) {
    return Status::InvalidArgument(where + ": key \"" + key +
                                   "\": not an option, and API keys are never read from config "
                                   "files; set ANTHROPIC_API_KEY or OPENAI_API_KEY in the "
                                   "environment");
  }
  for (const CommandLineOnly& only : kCommandLineOnly) {
    if (key != only.key) continue;
    return Status::InvalidArgument(where + ": key \"" + key + "\": only a command-line flag (" +
                                   only.what + "); pass " + only.flag + " when you want it");
  }
  if (option == options.end()) {
    return Status::InvalidArgument(where + ": unknown key \"" + key +
                                   "\" (keys are the long flag names without the dashes)");
  }
  if (project) FORKBOX_RETURN_IF_ERROR(CheckProjectKey(key, node, where));
  ConfigEntry entry;
  if (!ValueText(node, option->second, &entry.values)) {
    return Status::InvalidArgument(where + ": key \"" + key + "\": expected " +
                                   Expected(option->second));
  }
  entry.key = key;
  entry.where = where;
  entry.project = project;
  out->push_back(std::move(entry));
  return Status::Ok();
}

constexpr char kProjectConfig[] = ".forkbox/config.toml";

// The text of the file at `path`; neither file may be a FIFO, a device or bigger than any real
// config. The project's (`project_root` not empty: the workdir) is opened beneath the workdir
// through no symbolic link, as a config.toml that is one always was: a cloned
// `.forkbox -> ~/elsewhere` had its config.toml read as the project's (its agent files were
// refused). The user's own file may be a link (dotfile managers).
Result<std::string> ReadConfigText(const std::string& path, const std::string& project_root) {
  if (project_root.empty()) return ReadRegularFile(path, kMaxConfigFileBytes);
  UniqueFd root = OpenAt2(AT_FDCWD, project_root.c_str(), O_PATH | O_DIRECTORY, 0);
  if (!root) return Status::FromErrno(errno, "open " + project_root);
  return ReadRegularFileBeneath(root.get(), kProjectConfig, kMaxConfigFileBytes, path);
}

// `project_root`: empty for the user's file, the workdir for the project's.
Status ReadOne(const std::string& path, const std::string& project_root,
               const std::map<std::string, OptionKind>& options, std::vector<ConfigEntry>* out) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    return Status::Ok();
  }
  const bool project = !project_root.empty();
  Result<std::string> text = ReadConfigText(path, project_root);
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
  // Every good key is kept, so that the error still takes the file's output format; the error
  // reported is the first by line (the table is in key order).
  Status first;
  int64_t first_line = 0;
  for (const auto& [key, node] : table) {
    Status st =
        ReadKey(std::string(key.str()), node, Where(project, path, node), project, options, out);
    const int64_t line = node.source().begin.line;
    if (!st.ok() && (first.ok() || line < first_line)) {
      first = std::move(st);
      first_line = line;
    }
  }
  return first;
}

}  // namespace

Status ReadConfigFiles(const std::map<std::string, OptionKind>& options, const std::string& workdir,
                       std::vector<ConfigEntry>* out) {
  const size_t first = out->size();
  FORKBOX_RETURN_IF_ERROR(ReadOne(UserConfigPath(), "", options, out));
  // The project is the workdir's, wherever it was chosen (a project file cannot choose it).
  std::string chosen = workdir;
  for (size_t i = first; i < out->size() && chosen.empty(); ++i) {
    if ((*out)[i].key == "workdir" && !(*out)[i].values.empty()) chosen = (*out)[i].values[0];
  }
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::absolute(chosen.empty() ? "." : chosen, ec).lexically_normal();
  if (ec) return Status::InvalidArgument("--workdir '" + chosen + "': " + ec.message());
  return ReadOne((dir / kProjectConfig).string(), dir.string(), options, out);
}

}  // namespace forkbox::parent
