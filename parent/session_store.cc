#include "parent/session_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <type_traits>

#include "base/file.h"
#include "base/format.h"
#include "base/state_dir.h"
#include "parent/stats.h"

namespace forkbox::parent {
namespace {

// Session files are opened beneath the sessions directory's descriptor, through no link, and only
// when regular (base/state_dir.h): a workdir of $HOME puts the state dir within the tools' reach.
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

Status WriteText(int fd, const std::string& line) {
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "writing the session file");
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status WriteLine(int fd, const json& j) {
  return WriteText(fd, j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

bool ValidId(const std::string& id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == '-';
  });
}

std::string NameOf(const std::string& id) { return id + ".jsonl"; }

std::string PathOf(const OwnedDir& dir, const std::string& id) {
  return dir.path + "/" + NameOf(id);
}

// <id>.jsonl beneath `dir`, opened with `flags` through no link, and only when it is a regular
// file; one with another name (a hard link: it may lie anywhere) is refused when written to.
Result<UniqueFd> OpenSessionFile(const OwnedDir& dir, const std::string& id, int flags,
                                 struct stat* st) {
  if (!ValidId(id)) return Status::InvalidArgument("not a session id: '" + id + "'");
  const std::string path = PathOf(dir, id);
  UniqueFd fd = OpenAt2(dir.fd.get(), NameOf(id).c_str(), flags | O_NONBLOCK | O_NOCTTY,
                        RESOLVE_BENEATH | kResolveNoLinks);
  if (!fd && errno == ENOENT) {
    return Status::Error(Status::Code::kNotFound, "no session " + id + " in " + dir.path);
  }
  if (!fd) return RefusedOwnName(errno, dir.fd.get(), dir.path, NameOf(id));
  if (::fstat(fd.get(), st) != 0) return Status::FromErrno(errno, "fstat " + path);
  if (!S_ISREG(st->st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  if ((flags & O_ACCMODE) != O_RDONLY && st->st_nlink > 1) {
    return Status::PermissionDenied(path + ": a hard link (" + std::to_string(st->st_nlink) +
                                    " names), refused: its other name may lie anywhere");
  }
  return fd;
}

// Held until the fd is closed, by this process or its end (a crash too): two forkbox runs that
// both appended to one session would each drop the other's turns.
Status LockSession(int fd, const std::string& id) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Status::Ok();
  if (errno == EWOULDBLOCK) {
    return Status::Error(Status::Code::kUnavailable,
                         "session " + id +
                             " is in use by another forkbox (still running); resume it once that "
                             "one has ended, or start a new session");
  }
  return Status::FromErrno(errno, "lock session " + id);
}

// Whether `fd` is still the file `name` names beneath `dir`, not replaced nor removed.
bool StillNamed(int fd, int dir, const std::string& name) {
  struct stat open_st, name_st;
  return ::fstat(fd, &open_st) == 0 &&
         ::fstatat(dir, name.c_str(), &name_st, AT_SYMLINK_NOFOLLOW) == 0 &&
         open_st.st_dev == name_st.st_dev && open_st.st_ino == name_st.st_ino;
}

// An empty file is a session that ended before its first turn (its header comes with it). The
// confined parent may not remove its own (the state dir is out of its reach), so a listing
// (`forkbox sessions`, --continue), which reads every session anyway, removes those no live
// forkbox holds (a file is created before it is locked: CreateLocked). Not a new session's start:
// the walk cost it 3-5 ms with 900 saved sessions.
void RemoveTurnlessSessions(const OwnedDir& dir) {
  // Every step beneath the directory's descriptor: no name is resolved twice, none through a link.
  const int listing = dir.fd.get();
  for (const std::string& name : ListDirNames(listing)) {
    if (!name.ends_with(".jsonl") || !ValidId(name.substr(0, name.size() - 6))) continue;
    struct stat st;
    // A stat first: only an empty regular file is opened (a listing opens no other twice).
    if (::fstatat(listing, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size != 0) {
      continue;
    }
    UniqueFd fd(
        ::openat(listing, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // Gone, or a live session.
    // Locked and still empty and still this file: nobody writes a turn into it any more.
    if (::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0 &&
        StillNamed(fd.get(), listing, name)) {
      (void)::unlinkat(listing, name.c_str(), 0);
    }
  }
}

// Creates `name` beneath `dir` (O_EXCL: never through a link) and locks it. Another forkbox's
// RemoveTurnlessSessions may take the new, still empty and unlocked file for a dead session's:
// the lock waits for it to let go, and a file it removed meanwhile is created again.
Result<UniqueFd> CreateLocked(const OwnedDir& dir, const std::string& name) {
  const std::string path = dir.path + "/" + name;
  for (int attempt = 0; attempt < 3; ++attempt) {
    UniqueFd file =
        OpenAt2(dir.fd.get(), name.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW,
                RESOLVE_BENEATH | kResolveNoLinks, 0600);
    if (!file) return Status::FromErrno(errno, "create " + path);
    int locked;
    while ((locked = ::flock(file.get(), LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (locked != 0) return Status::FromErrno(errno, "lock " + path);
    if (StillNamed(file.get(), dir.fd.get(), name)) return file;
  }
  return Status::Error(Status::Code::kUnavailable,
                       "create " + path + ": removed as soon as created, three times");
}

// Line 1. Throws json::exception when it is not a session header.
void ReadHeader(const json& j, SessionInfo* info) {
  if (j.at("type") != "session") throw json::other_error::create(501, "no header", &j);
  info->id = j.at("id");
  info->workdir = j.at("workdir");
  info->created = j.at("created");
  info->first_prompt = j.at("first_prompt");
}

// A line after the header: a turn (the whole conversation after it) or a clear. Throws
// json::exception when the line is malformed, and `out` is then unchanged.
void ApplyRecord(const json& j, LoadedSession* out) {
  if (j.at("type") == "clear") {
    out->messages.clear();
    return;
  }
  std::vector<agent::Message> conversation;
  for (const json& m : j.at("messages")) conversation.push_back(MessageFromJson(m));
  const int64_t tokens = j.at("input_tokens").get<int64_t>() + j.at("output_tokens").get<int64_t>();
  std::string prompt = j.contains("prompt") ? j.at("prompt").get<std::string>() : "";
  if (out->info.first_prompt.empty()) out->info.first_prompt = std::move(prompt);
  out->info.turns += 1;
  out->info.tokens += tokens;
  out->messages = std::move(conversation);
}

// "line 3 was" or "lines 2, 3 were", at most ten numbers.
std::string SkippedLines(const std::vector<size_t>& lines) {
  std::string s = lines.size() == 1 ? "line " : "lines ";
  for (size_t i = 0; i < lines.size() && i < 10; ++i) {
    s += (i == 0 ? "" : ", ") + std::to_string(lines[i]);
  }
  if (lines.size() > 10) s += " and " + std::to_string(lines.size() - 10) + " more";
  return s + (lines.size() == 1 ? " was" : " were");
}

// Every line is a whole snapshot, so a bad line is skipped and the lines after it still count:
// the session resumes from its last good line, and nothing valid is ever dropped.
Result<LoadedSession> ParseSession(const std::string& id, const std::string& text) {
  LoadedSession out;
  std::vector<size_t> skipped;
  size_t number = 0;
  size_t last_good = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    ++number;
    try {
      json j = json::parse(text.begin() + static_cast<std::ptrdiff_t>(start),
                           text.begin() + static_cast<std::ptrdiff_t>(end));
      if (number == 1) {
        ReadHeader(j, &out.info);
        // The id becomes a path when the session is appended to: it must be the file's own.
        if (!ValidId(out.info.id) || out.info.id != id) {
          return Status::InvalidArgument(
              "session " + id + ": refused: its header names session " +
              json(out.info.id).dump(-1, ' ', false, json::error_handler_t::replace) +
              ", not its own id");
        }
      } else {
        ApplyRecord(j, &out);
      }
      last_good = number;
      out.needs_newline = !complete;
    } catch (const json::exception&) {
      if (number == 1) return Status::InvalidArgument("session " + id + ": unreadable header");
      skipped.push_back(number);
      if (!complete) out.cut_at = static_cast<int64_t>(start);
    }
    start = end + 1;
  }
  if (number == 0) return Status::InvalidArgument("session " + id + " is empty");
  out.info.skipped_lines = static_cast<int64_t>(skipped.size());
  if (!skipped.empty()) {
    out.warning = "session " + id + ": " + SkippedLines(skipped) +
                  " corrupt or truncated and skipped; resuming from line " +
                  std::to_string(last_good) + " (" + Plural(out.info.turns, "turn") + ")";
  }
  return out;
}

// The session open on `fd` (stat-ed as `st`), read from its start.
Result<LoadedSession> ReadSession(int fd, const struct stat& st, const OwnedDir& dir,
                                  const std::string& id) {
  Result<std::string> text = ReadToEnd(fd, kMaxSessionFileBytes, PathOf(dir, id));
  if (!text.ok()) return text.status();
  Result<LoadedSession> out = ParseSession(id, *text);
  if (out.ok()) {
    out->info.modified = st.st_mtim.tv_sec;
    out->info.modified_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  }
  return out;
}

// Sessions touched in the same second are common (a one-shot run, then --continue): the
// nanoseconds order them, and a tie still has one order.
bool NewestFirst(const SessionInfo& a, const SessionInfo& b) {
  if (a.modified_ns != b.modified_ns) return a.modified_ns > b.modified_ns;
  if (a.created != b.created) return a.created > b.created;
  return a.id > b.id;
}

// Session `id`'s header (its first line, read up to kMaxHeaderBytes) and mtime, without the rest
// of the file (a session may hold many MB of tool output); nullopt when it is not one.
constexpr size_t kMaxHeaderBytes = 64 << 10;
std::optional<SessionInfo> ReadHeaderOf(const OwnedDir& dir, const std::string& id) {
  struct stat st;
  Result<UniqueFd> fd = OpenSessionFile(dir, id, 0, &st);
  if (!fd.ok()) return std::nullopt;
  std::string text(kMaxHeaderBytes, '\0');
  const ssize_t n = ::pread(fd->get(), text.data(), text.size(), 0);
  if (n <= 0) return std::nullopt;
  const size_t eol = text.find('\n');
  if (eol == std::string::npos && static_cast<size_t>(n) == text.size()) {  // A long first prompt.
    Result<LoadedSession> whole = ReadSession(fd->get(), st, dir, id);
    return whole.ok() ? std::optional<SessionInfo>(std::move(whole->info)) : std::nullopt;
  }
  text.resize(std::min(eol, static_cast<size_t>(n)));
  SessionInfo info;
  try {
    ReadHeader(json::parse(text), &info);
  } catch (const json::exception&) {
    return std::nullopt;
  }
  if (info.id != id) return std::nullopt;
  info.modified_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  return info;
}

}  // namespace

Result<OwnedDir> OpenSessionsDir(bool create) {
  Result<OwnedDir> state = OpenForkboxStateDir(create);
  if (!state.ok()) return state.status();
  return OpenOwnedDir(*state, "sessions", create);
}

Result<LoadedSession> LoadSession(const OwnedDir& dir, const std::string& id) {
  struct stat st;
  Result<UniqueFd> fd = OpenSessionFile(dir, id, 0, &st);
  if (!fd.ok()) return fd.status();
  return ReadSession(fd->get(), st, dir, id);
}

std::vector<SessionInfo> ListSessions(const OwnedDir& dir) {
  RemoveTurnlessSessions(dir);
  std::vector<SessionInfo> sessions;
  for (const std::string& name : ListDirNames(dir.fd.get())) {
    if (!name.ends_with(".jsonl")) continue;
    auto loaded = LoadSession(dir, name.substr(0, name.size() - 6));
    if (loaded.ok()) sessions.push_back(loaded->info);
  }
  std::sort(sessions.begin(), sessions.end(), NewestFirst);
  return sessions;
}

Result<std::string> LatestSessionFor(const OwnedDir& dir, const std::string& workdir) {
  RemoveTurnlessSessions(dir);
  std::vector<SessionInfo> mine;
  for (const std::string& name : ListDirNames(dir.fd.get())) {
    if (!name.ends_with(".jsonl")) continue;
    std::optional<SessionInfo> header = ReadHeaderOf(dir, name.substr(0, name.size() - 6));
    if (header && header->workdir == workdir) mine.push_back(std::move(*header));
  }
  std::sort(mine.begin(), mine.end(), NewestFirst);
  for (const SessionInfo& header : mine) {
    Result<LoadedSession> s = LoadSession(dir, header.id);
    if (s.ok() && s->info.workdir == workdir && (s->info.turns > 0 || s->info.skipped_lines > 0)) {
      return header.id;
    }
  }
  return Status::Error(Status::Code::kNotFound, "no session to continue for " + workdir);
}

Result<SessionLog> SessionLog::Create(const OwnedDir& dir, const std::string& id,
                                      const std::string& workdir, const std::string& first_prompt) {
  if (!ValidId(id)) return Status::InvalidArgument("not a session id: '" + id + "'");
  Result<UniqueFd> file = CreateLocked(dir, NameOf(id));
  if (!file.ok()) return file.status();
  // Kept to remove the file if no turn comes: O_PATH, it lists and opens nothing.
  UniqueFd kept = OpenAt2(dir.fd.get(), ".", O_PATH | O_DIRECTORY, 0);
  if (!kept) return Status::FromErrno(errno, "open " + dir.path);
  // Created now, while the state dir can still be written to (the parent is confined later).
  const json header = {{"type", "session"},
                       {"id", id},
                       {"workdir", workdir},
                       {"created", std::time(nullptr)},
                       {"first_prompt", first_prompt}};
  return SessionLog(std::move(*file), std::move(kept), NameOf(id),
                    header.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

SessionLog::~SessionLog() {
  // No turn: the file is no session. Removed while still locked, if the process still may (an
  // unconfined one); else the next listing removes it (RemoveTurnlessSessions).
  if (fd_ && dir_ && !header_.empty() && StillNamed(fd_.get(), dir_.get(), name_)) {
    (void)::unlinkat(dir_.get(), name_.c_str(), 0);
  }
}

Result<SessionLog> SessionLog::Resume(const OwnedDir& dir, const std::string& id,
                                      LoadedSession* loaded) {
  struct stat st;
  Result<UniqueFd> fd = OpenSessionFile(dir, id, O_RDWR | O_APPEND, &st);
  if (!fd.ok()) return fd.status();
  // Locked before it is read: what is read is then what is appended to.
  FORKBOX_RETURN_IF_ERROR(LockSession(fd->get(), id));
  Result<LoadedSession> read = ReadSession(fd->get(), st, dir, id);
  if (!read.ok()) return read.status();
  *loaded = std::move(*read);
  // A file that was made readable to others (a copy, an older forkbox) is private again before
  // the conversation goes on in it.
  if ((st.st_mode & 07777) != 0600 && ::fchmod(fd->get(), 0600) != 0) {
    return Status::FromErrno(errno, "chmod 0600 " + PathOf(dir, id));
  }
  SessionLog log{std::move(*fd)};
  // Only a cut last line goes: the next line would otherwise be glued to it.
  if (loaded->cut_at >= 0 && ::ftruncate(log.fd_.get(), loaded->cut_at) != 0) {
    return Status::FromErrno(errno, "truncate " + PathOf(dir, id));
  }
  if (loaded->needs_newline) FORKBOX_RETURN_IF_ERROR(WriteText(log.fd_.get(), "\n"));
  return log;
}

Status SessionLog::AddTurn(const std::string& prompt,
                           const std::vector<agent::Message>& conversation, int64_t turns,
                           const agent::Usage& usage) {
  json messages = json::array();
  for (const auto& m : conversation) messages.push_back(MessageToJson(m));
  const json turn = {{"type", "turn"},
                     {"prompt", prompt},
                     {"messages", std::move(messages)},
                     {"turns", turns},
                     {"input_tokens", usage.input_tokens},
                     {"output_tokens", usage.output_tokens}};
  // The header goes with the first turn, in one write.
  FORKBOX_RETURN_IF_ERROR(WriteText(
      fd_.get(), header_ + turn.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"));
  header_.clear();
  return Status::Ok();
}

Status SessionLog::AddClear() {
  if (!header_.empty()) return Status::Ok();  // No turn yet: there is nothing to clear.
  return WriteLine(fd_.get(), {{"type", "clear"}});
}

}  // namespace forkbox::parent
