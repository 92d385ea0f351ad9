#include "agent/agent_types.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "agent/provider_settings.h"
#include "agent/tools.h"
#include "base/file.h"
#include "base/format.h"
#include "base/path.h"
#include "base/unique_fd.h"

namespace forkbox::agent {
namespace {

std::vector<std::string> BaseToolNames() {
  std::vector<std::string> names;
  for (const ToolDef& def : BaseToolDefs()) names.push_back(def.name);
  return names;
}

constexpr char kExplorePrompt[] =
    "You are an explore agent: you find things and report them. Search with bash (grep -rn, "
    "find, ls, git log, git grep) and read_file. Report every finding with its file path and line "
    "number (path:line), quote the few lines that matter, and say what you searched when "
    "something is not there. You cannot change anything: every file, the project included, is "
    "read-only for you and for every command you run, so do not try to fix, write or build.";

// With `confine_to`, the opened file's real path (read back from the descriptor, so no rename
// can race the check) must lie beneath it.
Status CheckConfined(const std::string& path, int fd, const std::string& confine_to) {
  if (confine_to.empty()) return Status::Ok();
  char root[PATH_MAX];
  if (::realpath(confine_to.c_str(), root) == nullptr) {
    return Status::FromErrno(errno, confine_to);
  }
  char real[PATH_MAX];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), real, sizeof(real) - 1);
  if (n < 0) return Status::FromErrno(errno, "readlink " + link);
  std::string target(real, static_cast<size_t>(n));
  if (!PathBelow(target, root)) {
    return Status::PermissionDenied(path + ":1: leads outside the project (" + target + ")");
  }
  return Status::Ok();
}

Result<std::string> ReadAgentFile(const std::string& path, const std::string& confine_to) {
  // Errors read "<file>:1: why", like every other problem with an agent file.
  auto at_line_1 = [&](const Status& st) {
    std::string why = st.message();
    for (const std::string& prefix : {path + ": ", "open " + path + ": "}) {
      if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    }
    return Status::Error(st.code(), path + ":1: " + why);
  };
  Result<UniqueFd> fd = OpenRegularFile(path);
  if (!fd.ok()) return at_line_1(fd.status());
  FORKBOX_RETURN_IF_ERROR(CheckConfined(path, fd->get(), confine_to));
  Result<std::string> text = ReadToEnd(fd->get(), static_cast<size_t>(kMaxAgentFileBytes), path);
  if (!text.ok()) return at_line_1(text.status());
  return text;
}

// The frontmatter between a first line "---" and the next "---" line, and the body after it.
struct Split {
  std::string frontmatter;
  std::string body;
};

std::string StripCr(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

Result<Split> SplitFrontmatter(const std::string& path, std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 BOM.
  size_t eol = text.find('\n');
  if (StripCr(std::string(text.substr(0, eol))) != "---") {
    return Status::InvalidArgument(path + ":1: no YAML frontmatter (the file must start with ---)");
  }
  Split split;
  size_t pos = eol == std::string_view::npos ? text.size() : eol + 1;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    size_t next = end == std::string_view::npos ? text.size() : end + 1;
    size_t line_end = end == std::string_view::npos ? text.size() : end;
    if (StripCr(std::string(text.substr(pos, line_end - pos))) == "---") {
      split.body = std::string(text.substr(next));
      size_t first = split.body.find_first_not_of(" \t\r\n");
      size_t last = split.body.find_last_not_of(" \t\r\n");
      split.body = first == std::string::npos ? "" : split.body.substr(first, last - first + 1);
      return split;
    }
    split.frontmatter.append(text.substr(pos, next - pos));
    pos = next;
  }
  return Status::InvalidArgument(path + ":1: the frontmatter is not closed by a --- line");
}

bool IsAgentName(const std::string& name) {
  return !name.empty() && name.size() <= 64 &&
         name.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
             std::string::npos;
}

// Builds one AgentType from a parsed frontmatter map; every error and note names FILE:LINE.
class FrontmatterReader {
 public:
  FrontmatterReader(const std::string& path, AgentType* out) : path_(path), out_(out) {}

  Status Read(const YAML::Node& root);

 private:
  // Frontmatter line N is file line N + 2 (after the opening ---).
  std::string Where(const YAML::Node& node) const {
    int line = node.Mark().line >= 0 ? node.Mark().line + 2 : 1;
    return path_ + ":" + std::to_string(line);
  }
  Status Bad(const YAML::Node& node, const std::string& key, const std::string& why) const {
    return Status::InvalidArgument(Where(node) + ": " + key + ": " + why);
  }
  void Note(const YAML::Node& node, const std::string& text) {
    out_->notes.push_back(Where(node) + ": " + text);
  }
  Result<std::string> Scalar(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) return Bad(node, key, "must be a string");
    return node.Scalar();
  }
  Result<int64_t> Integer(const YAML::Node& node, const std::string& key, int64_t max) const;
  Status Tools(const YAML::Node& node, const std::string& key, std::vector<std::string>* out);
  Status Sandbox(const YAML::Node& node);
  Status Key(const std::string& key, const YAML::Node& value);
  // An error when `key` (or its alias) came before in the same map: the last would win unseen.
  Status Once(const YAML::Node& node, const std::string& key,
              std::map<std::string, int>* seen) const;

  const std::string& path_;
  AgentType* out_;
  std::vector<std::string> disallowed_;
  bool has_tools_ = false;
};

Result<int64_t> FrontmatterReader::Integer(const YAML::Node& node, const std::string& key,
                                           int64_t max) const {
  Result<std::string> s = Scalar(node, key);
  if (!s.ok()) return s.status();
  const std::string& text = *s;
  if (text.empty() || text.size() > 9 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return Bad(node, key,
               "must be an integer in [1, " + std::to_string(max) + "], got \"" + text + "\"");
  }
  int64_t value = std::stoll(text);
  if (value < 1 || value > max) {
    return Bad(node, key, "must be an integer in [1, " + std::to_string(max) + "]");
  }
  return value;
}

// A list, or Claude Code's comma-separated string. Claude Code's names for the same tools map to
// forkbox's; other names are ignored with a note.
Status FrontmatterReader::Tools(const YAML::Node& node, const std::string& key,
                                std::vector<std::string>* out) {
  static const std::map<std::string, std::string> kClaudeNames = {{"Bash", "bash"},
                                                                  {"Read", "read_file"},
                                                                  {"Write", "write_file"},
                                                                  {"Edit", "edit_file"},
                                                                  {"MultiEdit", "edit_file"}};
  std::vector<std::string> names;
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) return Bad(item, key, "every item must be a tool name");
      names.push_back(item.Scalar());
    }
  } else if (node.IsScalar()) {
    std::string all = node.Scalar();
    size_t start = 0;
    while (start <= all.size()) {
      size_t comma = all.find(',', start);
      std::string name =
          all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      size_t a = name.find_first_not_of(" \t");
      size_t b = name.find_last_not_of(" \t");
      if (a != std::string::npos) names.push_back(name.substr(a, b - a + 1));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if (!node.IsNull()) {
    return Bad(node, key, "must be a list of tool names or a comma-separated string");
  }
  const std::vector<std::string> base = BaseToolNames();
  std::set<std::string> chosen;
  for (const std::string& name : names) {
    if (std::find(base.begin(), base.end(), name) != base.end()) {
      chosen.insert(name);
    } else if (auto it = kClaudeNames.find(name); it != kClaudeNames.end()) {
      chosen.insert(it->second);
      Note(node, key + ": Claude Code's " + name + " is forkbox's " + it->second);
    } else {
      Note(node, key + ": '" + name + "' is not a forkbox tool (bash, read_file, write_file, " +
                     "edit_file); ignored");
    }
  }
  out->clear();
  for (const std::string& name : base) {
    if (chosen.count(name) != 0) out->push_back(name);
  }
  return Status::Ok();
}

Status FrontmatterReader::Once(const YAML::Node& node, const std::string& key,
                               std::map<std::string, int>* seen) const {
  static const std::map<std::string, std::string> kAliases = {
      {"maxTurns", "max_turns"}, {"disallowed_tools", "disallowedTools"}};
  auto alias = kAliases.find(key);
  const std::string canonical = alias == kAliases.end() ? key : alias->second;
  const int line = node.Mark().line >= 0 ? node.Mark().line + 2 : 1;
  auto [it, inserted] = seen->emplace(canonical, line);
  if (inserted) return Status::Ok();
  return Bad(node, key, "duplicate key (first given at line " + std::to_string(it->second) + ")");
}

Status FrontmatterReader::Sandbox(const YAML::Node& node) {
  if (!node.IsMap()) return Bad(node, "sandbox", "must be a map with write and network");
  std::map<std::string, int> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = it->first.Scalar();
    FORKBOX_RETURN_IF_ERROR(Once(it->first, "sandbox." + key, &seen));
    const YAML::Node value = it->second;  // A copy: *it is a temporary proxy.
    if (key == "write") {
      Result<std::string> v = Scalar(value, "sandbox.write");
      if (!v.ok()) return v.status();
      if (*v != "workdir" && *v != "none") {
        return Bad(value, "sandbox.write", "must be workdir or none, got \"" + *v + "\"");
      }
      out_->write = *v == "none" ? WriteAccess::kNone : WriteAccess::kWorkdir;
    } else if (key == "network") {
      Result<std::string> v = Scalar(value, "sandbox.network");
      if (!v.ok()) return v.status();
      if (*v != "off" && *v != "inherit") {
        return Bad(value, "sandbox.network",
                   "must be off or inherit (an agent file cannot grant network; --allow-net "
                   "does), got \"" +
                       *v + "\"");
      }
      out_->network = *v == "inherit" ? NetworkAccess::kInherit : NetworkAccess::kOff;
    } else {
      Note(it->first, "sandbox." + key +
                          ": unknown key, ignored (an agent file can only narrow the sandbox: "
                          "write and network)");
    }
  }
  return Status::Ok();
}

Status FrontmatterReader::Key(const std::string& key, const YAML::Node& value) {
  if (key == "name") {
    Result<std::string> v = Scalar(value, key);
    if (!v.ok()) return v.status();
    const std::string& name = *v;
    if (!IsAgentName(name)) {
      return Bad(value, key, "must be 1-64 letters, digits, - or _, got \"" + name + "\"");
    }
    out_->name = name;
  } else if (key == "description" || key == "model") {
    Result<std::string> v = Scalar(value, key);
    if (!v.ok()) return v.status();
    if (key == "description" && v->size() > kMaxAgentDescriptionBytes) {
      return Bad(value, key,
                 std::to_string(v->size()) + " bytes, more than the limit of " +
                     std::to_string(kMaxAgentDescriptionBytes) +
                     " (every request of the parent model carries it; put the details in the "
                     "body, the agent's own prompt)");
    }
    (key == "model" ? out_->model : out_->description) = *v;
  } else if (key == "tools") {
    has_tools_ = true;
    return Tools(value, key, &out_->tools);
  } else if (key == "disallowedTools" || key == "disallowed_tools") {
    return Tools(value, key, &disallowed_);
  } else if (key == "max_turns" || key == "maxTurns") {
    Result<int64_t> v = Integer(value, key, 10000);
    if (!v.ok()) return v.status();
    out_->max_turns = *v;
  } else if (key == "timeout") {
    Result<int64_t> v = Integer(value, key, 86400);
    if (!v.ok()) return v.status();
    out_->timeout_ms = *v * 1000;
  } else if (key == "sandbox") {
    return Sandbox(value);
  } else {
    Note(value, key + ": unknown key, ignored");
  }
  return Status::Ok();
}

Status FrontmatterReader::Read(const YAML::Node& root) {
  if (!root.IsMap()) {
    return Status::InvalidArgument(Where(root) + ": the frontmatter must be a YAML map");
  }
  out_->tools = BaseToolNames();
  std::map<std::string, int> seen;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!it->first.IsScalar()) return Bad(it->first, "(key)", "keys must be strings");
    FORKBOX_RETURN_IF_ERROR(Once(it->first, it->first.Scalar(), &seen));
    FORKBOX_RETURN_IF_ERROR(Key(it->first.Scalar(), it->second));
  }
  std::vector<std::string> kept;
  for (const std::string& t : out_->tools) {
    if (std::find(disallowed_.begin(), disallowed_.end(), t) == disallowed_.end()) {
      kept.push_back(t);
    }
  }
  out_->tools = std::move(kept);
  if (has_tools_ && out_->tools.empty()) {
    out_->notes.push_back(path_ + ":1: no forkbox tool left: the agent can only answer");
  }
  return Status::Ok();
}

std::string Stem(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = file.rfind('.');
  return dot == std::string::npos ? file : file.substr(0, dot);
}

// The *.md files of `dir`, sorted; nonexistent directories are empty.
Result<std::vector<std::string>> ListAgentFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (d == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) return files;
    return Status::FromErrno(errno, dir);
  }
  while (dirent* e = ::readdir(d.get())) {
    std::string name = e->d_name;
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".md") == 0 && name[0] != '.') {
      files.push_back(dir + "/" + name);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// What an agent adds to the task tool's description.
std::string CatalogEntry(const AgentType& type) {
  return "\n- " + type.name + ": " +
         (type.description.empty() ? std::string("(no description)") : type.description);
}

// The agents read so far by name, and the bytes their entries take in the task tool.
struct Loaded {
  std::map<std::string, AgentType> by_name;
  size_t entry_bytes = 0;
};

// Adds `type` unless a higher-precedence agent has its name (then it is recorded as shadowed);
// an error when its entry would take the catalog past kMaxAgentCatalogBytes.
Status AddOrShadow(AgentType type, Loaded& loaded) {
  auto it = loaded.by_name.find(type.name);
  if (it != loaded.by_name.end()) {
    it->second.overrides.push_back(type.source);
    return Status::Ok();
  }
  const size_t bytes = CatalogEntry(type).size();
  if (loaded.entry_bytes + bytes > kMaxAgentCatalogBytes) {
    return Status::ResourceExhausted(
        type.source + ":1: its name and description (" + std::to_string(bytes) +
        " bytes) would take the agents' descriptions past their limit of " +
        std::to_string(kMaxAgentCatalogBytes) +
        " bytes in all (every request of the parent model carries them)");
  }
  loaded.entry_bytes += bytes;
  loaded.by_name.emplace(type.name, std::move(type));
  return Status::Ok();
}

// The agent files of one directory into `loaded`; what is skipped goes to `warnings`.
void LoadDir(const AgentDir& dir, Loaded& loaded, std::vector<std::string>& warnings) {
  Result<std::vector<std::string>> files = ListAgentFiles(dir.path);
  if (!files.ok()) {
    warnings.push_back(files.status().ToString() + " (" + dir.label + " agents)");
    return;
  }
  if (files->size() > kMaxAgentFilesPerDir) {
    warnings.push_back(dir.path + ": more than " + std::to_string(kMaxAgentFilesPerDir) +
                       " agent files; only the first " + std::to_string(kMaxAgentFilesPerDir) +
                       " by name are read");
    files->resize(kMaxAgentFilesPerDir);
  }
  std::set<std::string> in_this_dir;
  for (const std::string& file : *files) {
    Result<std::string> text = ReadAgentFile(file, dir.confine_to);
    Result<AgentType> type =
        text.ok() ? ParseAgentFile(file, *text) : Result<AgentType>(text.status());
    if (!type.ok()) {
      warnings.push_back(type.status().message() + " (skipped)");
      continue;
    }
    if (!in_this_dir.insert(type->name).second) {
      warnings.push_back(file + ":1: a second agent named " + type->name + " in " + dir.path +
                         " (skipped)");
      continue;
    }
    Status added = AddOrShadow(std::move(*type), loaded);
    if (!added.ok()) warnings.push_back(added.message() + " (skipped)");
  }
}

}  // namespace

std::vector<AgentDir> AgentDirs(const std::string& workdir, const std::string& home) {
  std::vector<AgentDir> dirs = {{workdir + "/.forkbox/agents", "project forkbox", workdir},
                                {workdir + "/.claude/agents", "project claude", workdir}};
  if (!home.empty()) {
    dirs.push_back({home + "/.config/forkbox/agents", "user forkbox", ""});
    dirs.push_back({home + "/.claude/agents", "user claude", ""});
  }
  return dirs;
}

const AgentType* AgentCatalog::Find(std::string_view name) const {
  for (const AgentType& a : agents) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::vector<std::string> AgentCatalog::Names() const {
  std::vector<std::string> names;
  for (const AgentType& a : agents) names.push_back(a.name);
  return names;
}

std::vector<AgentType> BuiltinAgentTypes() {
  AgentType general;
  general.name = kDefaultAgentType;
  general.description =
      "General-purpose subagent: reads, runs, writes and tests code in the project (bash, "
      "read_file, write_file, edit_file).";
  general.tools = BaseToolNames();
  general.network = NetworkAccess::kInherit;  // Today's subagent: the user's --allow-net.
  AgentType explore;
  explore.name = "explore";
  explore.description =
      "Read-only explorer: finds where things are and reports them with file paths and line "
      "numbers. It cannot modify any file (enforced by the kernel).";
  explore.tools = {"bash", "read_file"};
  explore.write = WriteAccess::kNone;
  explore.prompt = kExplorePrompt;
  return {general, explore};
}

Result<AgentType> ParseAgentFile(const std::string& path, std::string_view text) {
  Result<Split> split = SplitFrontmatter(path, text);
  if (!split.ok()) return split.status();
  AgentType type;
  type.source = path;
  type.prompt = split->body;
  try {
    YAML::Node root = YAML::Load(split->frontmatter);
    if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    FrontmatterReader reader(path, &type);
    FORKBOX_RETURN_IF_ERROR(reader.Read(root));
  } catch (const YAML::DeepRecursion& e) {
    // Its own message is only "bad file".
    const int line = e.mark.line >= 0 ? e.mark.line + 2 : 1;
    return Status::InvalidArgument(path + ":" + std::to_string(line) +
                                   ": the YAML is nested too deeply (the parser stops at " +
                                   std::to_string(e.depth()) +
                                   " levels; an agent's frontmatter needs 2)");
  } catch (const YAML::Exception& e) {
    int line = e.mark.line >= 0 ? e.mark.line + 2 : 1;
    return Status::InvalidArgument(path + ":" + std::to_string(line) + ": " + e.msg);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(path + ":1: " + e.what());
  }
  if (type.name.empty()) {
    if (!IsAgentName(Stem(path))) {
      return Status::InvalidArgument(path + ":1: no name, and the file name is not one (1-64 " +
                                     "letters, digits, - or _)");
    }
    type.name = Stem(path);
    type.notes.push_back(path + ":1: no name; named after the file: " + type.name);
  }
  if (type.description.empty()) {
    type.notes.push_back(path + ":1: no description; the parent model sees none");
  }
  return type;
}

AgentCatalog LoadAgentCatalog(const std::vector<AgentDir>& dirs) {
  AgentCatalog catalog;
  Loaded loaded;
  for (const AgentDir& dir : dirs) LoadDir(dir, loaded, catalog.warnings);
  // The built-ins' entries are small and fixed: they always fit, as forkbox's own.
  for (AgentType& builtin : BuiltinAgentTypes()) {
    auto it = loaded.by_name.find(builtin.name);
    if (it != loaded.by_name.end()) {
      it->second.overrides.push_back(builtin.source);
    } else {
      loaded.by_name.emplace(builtin.name, std::move(builtin));
    }
  }
  auto general = loaded.by_name.find(kDefaultAgentType);
  catalog.agents.push_back(std::move(general->second));
  loaded.by_name.erase(general);
  for (auto& [name, type] : loaded.by_name) catalog.agents.push_back(std::move(type));
  return catalog;
}

ToolDef TaskToolDefFor(const AgentCatalog& catalog) {
  ToolDef def = TaskToolDef();
  def.description += "\n\nChoose the agent with subagent_type (default general). Available agents:";
  for (const AgentType& a : catalog.agents) def.description += CatalogEntry(a);
  def.input_schema["properties"]["subagent_type"] = {
      {"type", "string"},
      {"enum", catalog.Names()},
      {"description", "Which agent runs the task (default general)."}};
  return def;
}

std::string ResolveAgentModel(const AgentType& type, const std::string& provider,
                              const std::string& session_model, std::string* note) {
  if (type.model.empty() || type.model == "inherit") return session_model;
  std::optional<std::string> alias = ClaudeModelAlias(type.model);
  if (!alias) return type.model;
  if (provider == "anthropic") {
    if (note) *note = "model " + type.model + " is " + *alias;
    return *alias;
  }
  if (note) {
    *note = "model " + type.model + " is a Claude alias; the " + provider +
            " provider uses the session's model " + session_model;
  }
  return session_model;
}

bool EffectiveAllowNet(const AgentType& type, bool user_allow_net) {
  return user_allow_net && type.network == NetworkAccess::kInherit;
}

std::string DescribeSandbox(const AgentType& type, bool user_allow_net, bool sandbox_enabled) {
  if (!sandbox_enabled) return "OFF (--sandbox=off): nothing is enforced";
  std::string s = type.write == WriteAccess::kNone
                      ? "write none (every file read-only; a TMPDIR of its own)"
                      : "write workdir";
  s += type.network == NetworkAccess::kOff
           ? ", network off"
           : std::string(", network inherit (--allow-net: ") + (user_allow_net ? "on)" : "off)");
  return s;
}

void MakeReadOnly(AgentCatalog* catalog) {
  for (AgentType& type : catalog->agents) {
    if (type.write == WriteAccess::kNone) continue;
    type.write = WriteAccess::kNone;
    std::erase_if(type.tools, WritesFiles);
    type.notes.push_back("read-only: --sandbox=read-only makes every file read-only");
  }
}

void RestrictTools(AgentCatalog* catalog, const std::vector<std::string>& offered) {
  for (AgentType& type : catalog->agents) {
    std::vector<std::string> removed;
    std::erase_if(type.tools, [&](const std::string& tool) {
      if (std::find(offered.begin(), offered.end(), tool) != offered.end()) return false;
      removed.push_back(tool);
      return true;
    });
    if (removed.empty()) continue;
    const std::string note = RemovedToolsNote(removed);
    type.prompt = type.prompt.empty() ? note : type.prompt + "\n\n" + note;
    type.notes.push_back("without " + JoinList(removed) +
                         ": turned off by --tools/--disallowed-tools");
  }
}

void ApplyAgentType(const AgentType& type, ipc::StartMessage* start) {
  start->agent.type = type.name;
  start->agent.tools = type.tools;
  start->agent.prompt = type.prompt;
  start->agent.write = type.write == WriteAccess::kNone ? "none" : "workdir";
  start->agent.network = type.network == NetworkAccess::kInherit ? "inherit" : "off";
  start->provider.model =
      ResolveAgentModel(type, start->provider.name, start->provider.model, nullptr);
  // An agent file only narrows: it can lower the user's --task-max-turns, never raise it.
  if (type.max_turns > 0 && type.max_turns < start->limits.max_turns) {
    start->limits.max_turns = type.max_turns;
  }
}

}  // namespace forkbox::agent
