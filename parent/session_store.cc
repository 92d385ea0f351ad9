#include "parent/session_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <type_traits>

#include "base/file.h"

namespace forkbox::parent {
namespace {

// Session files are opened without following a link and only when regular (base/file.h): a
// workdir of $HOME puts the state dir within the tools' reach.
constexpr size_t kMaxSessionFileBytes = size_t{1} << 30;

using nlohmann::json;

json BlockJson(const agent::ContentBlock& block) {
  return std::visit(
      [](const auto& b) -> json {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, agent::TextBlock>) {
          return {{"type", "text"}, {"text", b.text}};
        } else if constexpr (std::is_same_v<T, agent::ToolUseBlock>) {
          return {{"type", "tool_use"}, {"id", b.id}, {"name", b.name}, {"input", b.input}};
        } else if constexpr (std::is_same_v<T, agent::ToolResultBlock>) {
          return {{"type", "tool_result"},
                  {"tool_use_id", b.tool_use_id},
                  {"content", b.content},
                  {"is_error", b.is_error}};
        } else {
          return {{"type", "thinking"}, {"raw", b.raw}};
        }
      },
      block);
}

// Throws nlohmann::json::exception on a malformed block (the caller stops at that line).
agent::ContentBlock BlockFromJson(const json& j) {
  const std::string type = j.at("type");
  if (type == "text") return agent::TextBlock{j.at("text")};
  if (type == "tool_use") return agent::ToolUseBlock{j.at("id"), j.at("name"), j.at("input")};
  if (type == "tool_result") {
    return agent::ToolResultBlock{j.at("tool_use_id"), j.at("content"), j.at("is_error")};
  }
  if (type == "thinking") return agent::ThinkingBlock{j.at("raw")};
  throw json::other_error::create(501, "unknown block type " + type, &j);
}

json MessageToJson(const agent::Message& m) {
  json content = json::array();
  for (const auto& b : m.content) content.push_back(BlockJson(b));
  return {{"role", m.role == agent::Role::kAssistant ? "assistant" : "user"},
          {"content", std::move(content)}};
}

agent::Message MessageFromJson(const json& j) {
  agent::Message m;
  const std::string role = j.at("role");
  if (role != "user" && role != "assistant") {
    throw json::other_error::create(501, "bad role " + role, &j);
  }
  m.role = role == "assistant" ? agent::Role::kAssistant : agent::Role::kUser;
  for (const json& b : j.at("content")) m.content.push_back(BlockFromJson(b));
  return m;
}

Status WriteLine(int fd, const json& j) {
  const std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "writing the session file");
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

bool ValidId(const std::string& id) {
  return !id.empty() && id.size() <= 64 &&
         std::all_of(id.begin(), id.end(), [](char c) { return std::isxdigit(c) || c == '-'; });
}

std::string PathOf(const std::string& dir, const std::string& id) {
  return dir + "/" + id + ".jsonl";
}

}  // namespace

Result<std::string> StateDir(bool create) {
  std::string base;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/') {
    base = x;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    base = std::string(home) + "/.local/state";
  } else {
    return Status::InvalidArgument("no state directory: set XDG_STATE_HOME or HOME");
  }
  std::string dir = base + "/forkbox";
  if (!create) return dir;
  std::error_code ec;
  std::filesystem::create_directories(base, ec);  // The user's state directory: usual modes.
  if (ec) return Status::InvalidArgument("mkdir " + base + ": " + ec.message());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + dir);
  }
  return dir;
}

Result<std::string> SessionsDir(bool create) {
  Result<std::string> state = StateDir(create);
  if (!state.ok()) return state.status();
  std::string dir = *state + "/sessions";
  if (!create) return dir;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + dir);
  }
  if (::chmod(dir.c_str(), 0700) != 0) return Status::FromErrno(errno, "chmod " + dir);
  return dir;
}

Result<LoadedSession> LoadSession(const std::string& dir, const std::string& id) {
  if (!ValidId(id)) return Status::InvalidArgument("not a session id: '" + id + "'");
  const std::string path = PathOf(dir, id);
  struct stat st;
  Result<UniqueFd> fd = OpenRegularFile(path, O_NOFOLLOW, &st);
  Result<std::string> text =
      fd.ok() ? ReadToEnd(fd->get(), kMaxSessionFileBytes, path) : Result<std::string>(fd.status());
  if (!text.ok() && text.status().code() == Status::Code::kNotFound) {
    return Status::Error(Status::Code::kNotFound, "no session " + id + " in " + dir);
  }
  if (!text.ok()) return text.status();
  std::istringstream in(*text);
  LoadedSession out;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const bool complete = !in.eof();  // The last line without its newline is cut.
    try {
      if (!complete) throw json::other_error::create(501, "truncated line", nullptr);
      json j = json::parse(line);
      if (number == 1) {
        if (j.at("type") != "session") throw json::other_error::create(501, "no header", &j);
        out.info.id = j.at("id");
        out.info.workdir = j.at("workdir");
        out.info.created = j.at("created");
        out.info.first_prompt = j.at("first_prompt");
        out.good_bytes += static_cast<int64_t>(line.size()) + 1;
        continue;
      }
      if (j.at("type") == "clear") {
        out.messages.clear();
        out.good_bytes += static_cast<int64_t>(line.size()) + 1;
        continue;
      }
      std::vector<agent::Message> conversation;
      for (const json& m : j.at("messages")) conversation.push_back(MessageFromJson(m));
      if (out.info.first_prompt.empty() && j.contains("prompt")) {
        out.info.first_prompt = j.at("prompt").get<std::string>();
      }
      out.info.turns += 1;
      out.info.tokens += j.at("input_tokens").get<int64_t>() + j.at("output_tokens").get<int64_t>();
      out.messages = std::move(conversation);
      out.good_bytes += static_cast<int64_t>(line.size()) + 1;
    } catch (const json::exception& e) {
      if (number == 1) return Status::InvalidArgument("session " + id + ": unreadable header");
      out.warning = "session " + id + ": line " + std::to_string(number) +
                    " is corrupt or truncated; resuming from the last complete turn (" +
                    std::to_string(out.info.turns) + ")";
      break;
    }
  }
  if (number == 0) return Status::InvalidArgument("session " + id + " is empty");
  out.info.modified = st.st_mtime;
  return out;
}

std::vector<SessionInfo> ListSessions(const std::string& dir) {
  std::vector<SessionInfo> sessions;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return sessions;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (!name.ends_with(".jsonl")) continue;
    auto loaded = LoadSession(dir, name.substr(0, name.size() - 6));
    if (loaded.ok()) sessions.push_back(loaded->info);
  }
  ::closedir(d);
  std::sort(sessions.begin(), sessions.end(),
            [](const SessionInfo& a, const SessionInfo& b) { return a.modified > b.modified; });
  return sessions;
}

Result<std::string> LatestSessionFor(const std::string& dir, const std::string& workdir) {
  for (const SessionInfo& s : ListSessions(dir)) {
    if (s.workdir == workdir) return s.id;
  }
  return Status::Error(Status::Code::kNotFound, "no session to continue for " + workdir);
}

Result<SessionLog> SessionLog::Create(const std::string& dir, const std::string& id,
                                      const std::string& workdir, const std::string& first_prompt) {
  const std::string path = PathOf(dir, id);
  int fd =
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "create " + path);
  SessionLog log{UniqueFd(fd)};
  FORKBOX_RETURN_IF_ERROR(WriteLine(log.fd_.get(), {{"type", "session"},
                                                    {"id", id},
                                                    {"workdir", workdir},
                                                    {"created", std::time(nullptr)},
                                                    {"first_prompt", first_prompt}}));
  return log;
}

Result<SessionLog> SessionLog::Append(const std::string& dir, const LoadedSession& loaded) {
  const std::string path = PathOf(dir, loaded.info.id);
  Result<UniqueFd> fd = OpenRegularFile(path, O_WRONLY | O_APPEND | O_NOFOLLOW);
  if (!fd.ok()) return fd.status();
  SessionLog log{std::move(*fd)};
  if (::ftruncate(log.fd_.get(), loaded.good_bytes) != 0) {
    return Status::FromErrno(errno, "truncate " + path);
  }
  return log;
}

Status SessionLog::AddTurn(const std::string& prompt,
                           const std::vector<agent::Message>& conversation, int64_t turns,
                           const agent::Usage& usage) {
  json messages = json::array();
  for (const auto& m : conversation) messages.push_back(MessageToJson(m));
  return WriteLine(fd_.get(), {{"type", "turn"},
                               {"prompt", prompt},
                               {"messages", std::move(messages)},
                               {"turns", turns},
                               {"input_tokens", usage.input_tokens},
                               {"output_tokens", usage.output_tokens}});
}

Status SessionLog::AddClear() { return WriteLine(fd_.get(), {{"type", "clear"}}); }

}  // namespace forkbox::parent
