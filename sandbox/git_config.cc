#include "sandbox/git_config.h"

#include <cctype>
#include <filesystem>
#include <map>
#include <string_view>

#include "base/file.h"

namespace forkbox::sandbox {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string SectionOf(const std::string& line) {
  if (line.size() < 3 || line.back() != ']') return "";
  const std::string inner = line.substr(1, line.size() - 2);
  const size_t space = inner.find(' ');
  const std::string name = Lower(inner.substr(0, space));
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return "";
  }
  if (space == std::string::npos) return name;
  const std::string sub = Trim(inner.substr(space));
  if (sub.size() < 2 || sub.front() != '"' || sub.back() != '"' ||
      sub.substr(1, sub.size() - 2).find_first_of("\"\\") != std::string::npos) {
    return "";
  }
  return name + ".*";
}

namespace {

// A value as git reads it, one line at a time: quotes dropped, `\"`, `\\` and `\t` unescaped, a
// comment cut. Each line is read once, where the whole value so far was parsed again after each
// continued line (a tool's 300 KB of them took 42 s).
class ValueReader {
 public:
  // True when `line` ends in a backslash outside a comment: git reads the next line on as more
  // of this value (a `[section]` line there included).
  bool Add(std::string_view line) {
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (c == '"') {
        quoted_ = !quoted_;
      } else if (c == '\\' && i + 1 == line.size()) {
        return true;
      } else if (c == '\\') {
        const char next = line[++i];
        value_ += next == 't' ? '\t' : next == 'n' ? '\n' : next;
      } else if (!quoted_ && (c == '#' || c == ';')) {
        return false;
      } else {
        value_ += c;
      }
    }
    return false;
  }
  std::string Value() const { return Trim(value_); }

 private:
  std::string value_;
  bool quoted_ = false;
};

std::string Resolve(const std::string& value, const std::string& relative_to,
                    const std::string& home) {
  namespace fs = std::filesystem;
  fs::path path = value;
  if (value.rfind("~/", 0) == 0) {
    if (home.empty()) return "";
    path = fs::path(home) / value.substr(2);
  } else if (path.is_relative()) {
    path = fs::path(relative_to) / path;
  }
  path = path.lexically_normal();
  if (!path.has_filename() && path.has_relative_path()) path = path.parent_path();  // "hooks/"
  return path.string();
}

}  // namespace

std::vector<GitConfigEntry> GitConfigEntries(const std::string& text) {
  std::vector<GitConfigEntry> entries;
  std::string section;
  const auto next_line = [&text](size_t& start) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    return line;
  };
  // git skips a UTF-8 byte order mark at the start of a file (an editor's): unskipped, it hid
  // the first section's header, and the keys under it were read as no section's.
  for (size_t start = text.starts_with("\xEF\xBB\xBF") ? 3 : 0; start <= text.size();) {
    std::string line = Trim(next_line(start));
    if (!line.empty() && line[0] == '[') {
      const size_t close = line.find(']');
      if (close == std::string::npos) continue;
      section = Lower(line.substr(1, line.find_first_of(" \"]") - 1));
      line = Trim(line.substr(close + 1));  // git takes a key after the header too.
    }
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    ValueReader value;
    bool continues = value.Add(std::string_view(line).substr(eq + 1));
    while (continues && start <= text.size()) {
      std::string more = next_line(start);
      if (!more.empty() && more.back() == '\r') more.pop_back();  // git reads CRLF as LF.
      continues = value.Add(more);
    }
    entries.push_back({section, Lower(Trim(line.substr(0, eq))), value.Value()});
  }
  return entries;
}

std::vector<GitConfigPath> GitConfigPaths(const std::string& text, const std::string& config_path,
                                          const std::string& hooks_cwd, const std::string& home) {
  const std::string config_dir = std::filesystem::path(config_path).parent_path().string();
  std::vector<GitConfigPath> paths;
  for (const GitConfigEntry& e : GitConfigEntries(text)) {
    if (e.value.empty()) continue;
    if (e.section == "core" && e.key == "hookspath") {
      const std::string path = Resolve(e.value, hooks_cwd, home);
      if (!path.empty()) paths.push_back({path, false});
    } else if ((e.section == "include" || e.section == "includeif") && e.key == "path") {
      const std::string path = Resolve(e.value, config_dir, home);
      if (!path.empty()) paths.push_back({path, true});
    }
  }
  return paths;
}

namespace {

// How deep the user's config files' includes are followed (as the repository's: namespaces.cc).
constexpr int kUserIncludeLevels = 4;

// `read`: each file read so far and the shallowest level it was read at; one is read again only
// from a shallower level (a file that includes itself N times was read N^4 times, and listed).
void AddUserConfigFile(const std::string& path, const std::string& home, int level,
                       std::map<std::string, int>& read, UserGitConfig& out) {
  const auto [at, first] = read.try_emplace(path, level);
  if (!first && at->second <= level) return;
  at->second = level;
  Result<std::string> text = ReadRegularFile(path, 1 << 20);
  if (!text.ok()) return;
  for (GitConfigPath& named : GitConfigPaths(*text, path, "", home)) {
    if (!named.include) {
      out.hooks_paths.push_back(std::move(named.path));
      continue;
    }
    out.includes.push_back(named.path);
    if (level + 1 < kUserIncludeLevels) AddUserConfigFile(named.path, home, level + 1, read, out);
  }
}

}  // namespace

UserGitConfig ReadUserGitConfig(const std::function<const char*(const char*)>& getenv) {
  const auto var = [&getenv](const char* name) {
    const char* value = getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  const std::string home = var("HOME");
  std::vector<std::string> files = {var("GIT_CONFIG_GLOBAL"), var("GIT_CONFIG_SYSTEM"),
                                    "/etc/gitconfig"};
  if (!var("XDG_CONFIG_HOME").empty()) files.push_back(var("XDG_CONFIG_HOME") + "/git/config");
  if (!home.empty()) {
    files.push_back(home + "/.gitconfig");
    files.push_back(home + "/.config/git/config");
  }
  UserGitConfig config;
  config.home = home;
  std::map<std::string, int> read;
  for (const std::string& file : files) {
    std::error_code ec;
    if (!file.empty()) {
      AddUserConfigFile(std::filesystem::absolute(file, ec).lexically_normal().string(), home, 0,
                        read, config);
    }
  }
  return config;
}

}  // namespace forkbox::sandbox
