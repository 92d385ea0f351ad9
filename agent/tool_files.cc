#include "agent/tool_files.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "agent/message.h"
#include "agent/tool_output.h"
#include "base/file.h"
#include "base/path.h"
#include "base/run_clock.h"
#include "base/unique_fd.h"

namespace forkbox::agent {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kSniffBytes = 8 * 1024;
// edit_file loads the whole file; beyond this it refuses rather than balloon memory.
constexpr int64_t kMaxEditBytes = 64LL << 20;

ToolOutput Error(std::string message) { return ToolOutput{std::move(message), true, 0}; }

// One tool call's identity for messages and its deadline (every file tool call is bounded; a
// stop of the session counts only as RunClock says). `clock` is looked at by each check.
struct Call {
  const char* tool;
  std::string path;  // As the model wrote it.
  std::string rel;   // Relative to the workdir descriptor.
  int workdir_fd;
  RunClock::Duration deadline;
  mutable RunClock clock;
};

std::string Quote(const Call& c) { return "'" + c.path + "'"; }

// Reads a required string field; a missing or mistyped one is the error.
Result<std::string> StringField(const nlohmann::json& input, const char* tool, const char* name) {
  auto it = input.find(name);
  if (it == input.end() || !it->is_string()) {
    return Status::InvalidArgument(std::string(tool) + ": missing required string field '" + name +
                                   "'");
  }
  return it->get<std::string>();
}

// A double that converts to int64_t exactly. The range comes first: the cast of 1e300 or NaN is
// undefined. (No std::floor: the executables link no libm.)
bool IsWholeNumber(double d) {
  return d >= -1e15 && d <= 1e15 && static_cast<double>(static_cast<int64_t>(d)) == d;
}

// Optional positive integer (models sometimes send numbers as strings: accept "10" too).
Result<int64_t> PositiveField(const nlohmann::json& input, const char* name, int64_t fallback) {
  auto it = input.find(name);
  if (it == input.end() || it->is_null()) return fallback;
  const std::string what = std::string("read_file: '") + name + "' must be a positive integer";
  int64_t v = 0;
  if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else if (it->is_number_float() && IsWholeNumber(it->get<double>())) {
    v = static_cast<int64_t>(it->get<double>());
  } else if (it->is_string()) {
    const std::string s = it->get<std::string>();
    char* end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0) {
      return Status::InvalidArgument(what + ", got \"" + s + "\"");
    }
    v = parsed;
  } else {
    return Status::InvalidArgument(what);
  }
  if (v < 1) {
    return Status::InvalidArgument(std::string("read_file: '") + name +
                                   "' must be >= 1 (lines are numbered from 1), got " +
                                   std::to_string(v));
  }
  return v;
}

// The path relative to the workdir. Absolute paths must name the workdir lexically; the kernel
// then resolves everything beneath the descriptor.
Result<std::string> RelativeToWorkdir(const ToolContext& ctx, const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("path is empty");
  if (path.find('\0') != std::string::npos) {
    return Status::InvalidArgument("path contains a NUL byte");
  }
  if (path[0] != '/') return path;
  const std::string& root = ctx.workdir;
  const std::string tidy = TidySeparators(path);  // "/w//a" names "/w/a" as the kernel sees it.
  if (tidy == root || tidy == root + "/") return std::string(".");
  if (std::optional<std::string> below = PathBelow(tidy, root)) return *below;
  return Status::InvalidArgument("path '" + path + "' is outside the workdir '" + root +
                                 "'; file tools only work inside the workdir");
}

// The kernel's limits, checked before write_file creates a parent directory for a path that
// could never be opened.
Status CheckNameLengths(const std::string& rel) {
  if (rel.size() >= PATH_MAX) {
    return Status::InvalidArgument("the path is longer than " + std::to_string(PATH_MAX - 1) +
                                   " bytes");
  }
  for (size_t start = 0; start < rel.size();) {
    size_t slash = rel.find('/', start);
    if (slash == std::string::npos) slash = rel.size();
    if (slash - start > NAME_MAX) {
      return Status::InvalidArgument("a file name in the path is longer than " +
                                     std::to_string(NAME_MAX) + " bytes");
    }
    start = slash + 1;
  }
  return Status::Ok();
}

// Resolves the path field into a Call.
Result<Call> Begin(const nlohmann::json& input, const ToolContext& ctx, const char* tool) {
  Result<std::string> path = StringField(input, tool, "path");
  if (!path.ok()) return path.status();
  if (ctx.workdir_fd == nullptr || !*ctx.workdir_fd) {
    return Status::Internal(std::string(tool) +
                            ": internal error: the workdir was not opened (OpenWorkdir)");
  }
  Result<std::string> rel = RelativeToWorkdir(ctx, *path);
  if (!rel.ok()) return Status::InvalidArgument(std::string(tool) + ": " + rel.status().message());
  if (Status s = CheckNameLengths(*rel); !s.ok()) {
    return Status::InvalidArgument(std::string(tool) + ": '" + *path + "': " + s.message());
  }
  const auto budget = std::chrono::milliseconds(std::max<int64_t>(ctx.timeout_ms, 1));
  return Call{tool, *path, *rel, ctx.workdir_fd->get(), budget, RunClock()};
}

Status CheckDeadline(const Call& c) {
  if (c.clock.Now() < c.deadline) return Status::Ok();
  return Status::Timeout("timed out (the tool timeout); nothing was changed");
}

// An open descriptor, or the errno that refused it (the tools word each errno for the model).
struct Opened {
  UniqueFd fd;
  int err = 0;
  bool ok() const { return err == 0; }
  Status status() const { return Status::FromErrno(err, "openat2"); }
};

// openat2 beneath `dirfd`: no "..", absolute path or symlink may leave it, no magic links.
Opened OpenBeneath(int dirfd, const std::string& rel, uint64_t flags, mode_t mode = 0) {
  UniqueFd fd = OpenAt2(dirfd, rel.c_str(), flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, mode);
  if (!fd) return Opened{UniqueFd(), errno};
  return Opened{std::move(fd), 0};
}

// The model-facing text of a failed open.
ToolOutput OpenError(const Call& c, int err) {
  const std::string who = std::string(c.tool) + ": " + Quote(c);
  switch (err) {
    case ENOENT:
      return Error(std::string(c.tool) + ": file not found: " + Quote(c));
    case EXDEV:
      return Error(who +
                   " resolves outside the workdir (through '..', an absolute symbolic link or one "
                   "pointing outside); file tools only work inside the workdir");
    case ELOOP:
      return Error(who + " goes through a symbolic link loop or a /proc magic link; refused");
    case ENXIO:
    case EWOULDBLOCK:
      return Error(who +
                   " is not a regular file (a FIFO or socket); file tools read and write "
                   "regular files only");
    case EISDIR:
      return Error(who + " is a directory (use bash `ls` to list it)");
    default:
      return Error(who + ": " + Status::FromErrno(err, "open").message());
  }
}

// Only regular files: a FIFO, socket or device is refused, never read or written.
std::optional<ToolOutput> RefuseIfNotRegular(const Call& c, int fd, struct stat* st) {
  if (::fstat(fd, st) != 0) {
    return Error(std::string(c.tool) + ": " + Status::FromErrno(errno, "fstat").message());
  }
  if (S_ISDIR(st->st_mode)) return OpenError(c, EISDIR);
  if (!S_ISREG(st->st_mode)) {
    return Error(std::string(c.tool) + ": " + Quote(c) +
                 " is not a regular file (a FIFO, socket or device); file tools read and write "
                 "regular files only");
  }
  return std::nullopt;
}

// Opens an existing regular file beneath the workdir, non-blocking (a FIFO never hangs). On
// failure `fd` is empty and `refusal` is what the model is told.
struct FileOpen {
  UniqueFd fd;
  ToolOutput refusal;
  struct stat st {};
};
FileOpen OpenRegular(const Call& c, int flags, struct stat* st) {
  Opened o = OpenBeneath(c.workdir_fd, c.rel, flags | O_NONBLOCK | O_NOCTTY);
  if (!o.ok()) return {UniqueFd(), OpenError(c, o.err), {}};
  if (auto refused = RefuseIfNotRegular(c, o.fd.get(), st)) return {UniqueFd(), *refused, {}};
  return {std::move(o.fd), {}, *st};
}

// Creates the missing directories above c.rel, each beneath the workdir descriptor, and lists
// those it created in `created` (outermost first). Returns 0 or the errno that stopped it.
int MakeParents(const Call& c, std::vector<std::string>* created) {
  std::vector<std::string> parts;
  for (size_t start = 0, slash; (slash = c.rel.find('/', start)) != std::string::npos;
       start = slash + 1) {
    parts.push_back(c.rel.substr(start, slash - start));
  }
  std::string prefix = ".";
  for (const std::string& part : parts) {
    if (part.empty() || part == ".") continue;
    const std::string next = prefix + "/" + part;
    Opened dir = OpenBeneath(c.workdir_fd, next, O_PATH | O_DIRECTORY);
    if (dir.err == ENOENT) {
      Opened parent = OpenBeneath(c.workdir_fd, prefix, O_PATH | O_DIRECTORY);
      if (!parent.ok()) return parent.err;
      if (::mkdirat(parent.fd.get(), part.c_str(), 0755) == 0) {
        created->push_back(next);
      } else if (errno != EEXIST) {
        return errno;
      }
      dir = OpenBeneath(c.workdir_fd, next, O_PATH | O_DIRECTORY);
    }
    if (!dir.ok()) return dir.err;
    prefix = next;
  }
  return 0;
}

// Removes what MakeParents created, innermost first, when the write it was for failed. Best
// effort: a directory something else filled meanwhile stays (rmdir refuses it).
void RemoveCreated(const Call& c, const std::vector<std::string>& created) {
  for (auto it = created.rbegin(); it != created.rend(); ++it) {
    const size_t slash = it->rfind('/');
    Opened parent = OpenBeneath(c.workdir_fd, it->substr(0, slash), O_PATH | O_DIRECTORY);
    if (!parent.ok() || ::unlinkat(parent.fd.get(), it->c_str() + slash + 1, AT_REMOVEDIR) != 0) {
      return;
    }
  }
}

// Opens c.rel for writing, created if missing: beneath the workdir, regular files only.
FileOpen OpenForWrite(const Call& c, bool* existed) {
  constexpr int kFlags = O_WRONLY | O_NONBLOCK | O_NOCTTY;
  Opened o = OpenBeneath(c.workdir_fd, c.rel, kFlags | O_CREAT | O_EXCL, 0644);
  *existed = o.err == EEXIST;
  if (*existed) o = OpenBeneath(c.workdir_fd, c.rel, kFlags);
  if (!o.ok()) {
    if (*existed && o.err == ENOENT) {
      return {UniqueFd(),
              Error(std::string(c.tool) + ": " + Quote(c) +
                    " is a dangling symbolic link; refusing to follow it"),
              {}};
    }
    return {UniqueFd(), OpenError(c, o.err), {}};
  }
  struct stat st {};
  if (auto refused = RefuseIfNotRegular(c, o.fd.get(), &st)) return {UniqueFd(), *refused, {}};
  return {std::move(o.fd), {}, st};
}

Status ReadWhole(const Call& c, int fd, std::string* out, int64_t cap) {
  char buf[64 * 1024];
  for (;;) {
    FORKBOX_RETURN_IF_ERROR(CheckDeadline(c));
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return Status::Ok();
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "read");
    }
    out->append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(out->size()) > cap) {
      return Status::ResourceExhausted("file is larger than " + std::to_string(cap) + " bytes");
    }
  }
}

// Writes all of `data` at the start of `fd`; with a deadline, each write checks it first.
Status WriteAll(const Call* deadline, int fd, std::string_view data) {
  off_t offset = 0;
  while (!data.empty()) {
    if (deadline != nullptr) FORKBOX_RETURN_IF_ERROR(CheckDeadline(*deadline));
    ssize_t n = ::pwrite(fd, data.data(), data.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "write");
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += n;
  }
  return Status::Ok();
}

// The directory holding c.rel's last component (opened beneath the workdir) and that name.
struct Place {
  UniqueFd dir;
  std::string name;
};
std::optional<Place> PlaceOf(const Call& c) {
  const size_t slash = c.rel.rfind('/');
  std::string dir = slash == std::string::npos ? "." : c.rel.substr(0, slash);
  std::string name = slash == std::string::npos ? c.rel : c.rel.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return std::nullopt;
  Opened d = OpenBeneath(c.workdir_fd, dir.empty() ? "." : dir, O_PATH | O_DIRECTORY);
  if (!d.ok()) return std::nullopt;
  return Place{std::move(d.fd), std::move(name)};
}

// A fresh hidden name next to `name`, within NAME_MAX.
std::string TempNameFor(const std::string& name) {
  uint64_t r = 0;
  if (::getrandom(&r, sizeof r, 0) != sizeof r)
    r = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".forkbox-%016llx", static_cast<unsigned long long>(r));
  return "." + name.substr(0, NAME_MAX - 1 - std::strlen(suffix)) + suffix;
}

// Puts `data` in place of the existing file `st` names by writing a temporary file next to it and
// renaming it over the name: a failure or a timeout leaves the old content whole, and the file's
// other hard links (perhaps outside the workdir) keep it. The copy keeps the mode and the owner.
// false: not possible here (the name is a symbolic link, the directory is not writable, the owner
// cannot be kept, a mount point); an error: the write itself failed, the file is unchanged.
Result<bool> ReplaceByRename(const Call& c, const struct stat& st, std::string_view data) {
  std::optional<Place> p = PlaceOf(c);
  struct stat named {};
  if (!p || ::fstatat(p->dir.get(), p->name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
      named.st_ino != st.st_ino || named.st_dev != st.st_dev) {
    return false;
  }
  std::string tmp_name;
  UniqueFd tmp;
  for (int attempt = 0; attempt < 8 && !tmp; ++attempt) {
    tmp_name = TempNameFor(p->name);
    tmp = UniqueFd(::openat(p->dir.get(), tmp_name.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!tmp && errno != EEXIST) return false;
  }
  if (!tmp) return false;
  struct stat made {};
  Status written = WriteAll(&c, tmp.get(), data);
  bool kept =
      written.ok() && ::fchmod(tmp.get(), st.st_mode & 0777) == 0 && ::fstat(tmp.get(), &made) == 0;
  if (kept && (made.st_uid != st.st_uid || made.st_gid != st.st_gid)) {
    kept = ::fchown(tmp.get(), st.st_uid, st.st_gid) == 0;
  }
  if (kept && ::renameat(p->dir.get(), tmp_name.c_str(), p->dir.get(), p->name.c_str()) == 0) {
    return true;
  }
  // Nothing to report if this fails too: the name is fresh and only ours.
  (void)::unlinkat(p->dir.get(), tmp_name.c_str(), 0);
  if (!written.ok()) return written;
  return false;
}

// Replaces the content of the existing file open as `fd` (see ReplaceByRename). Where a rename
// cannot, it is rewritten in place through `fd` (no second open by name), the deadline checked
// before the truncation only: a timeout never leaves it half written. A file with other hard links
// is then refused: writing through it would change them too. `note` says what the links kept.
Status ReplaceContent(const Call& c, int fd, const struct stat& st, std::string_view data,
                      std::string* note) {
  Result<bool> renamed = ReplaceByRename(c, st, data);
  if (!renamed.ok()) return renamed.status();
  if (*renamed) {
    if (st.st_nlink > 1) {
      *note = "; it had " + std::to_string(st.st_nlink) +
              " hard links: this name has its own copy now, the other names keep the old content";
    }
    return Status::Ok();
  }
  if (st.st_nlink > 1) {
    return Status::PermissionDenied(
        "has " + std::to_string(st.st_nlink) +
        " hard links and cannot be replaced by a new file here; writing through it would change "
        "the other names too, which may lie outside the workdir: refused");
  }
  FORKBOX_RETURN_IF_ERROR(CheckDeadline(c));
  if (::ftruncate(fd, 0) != 0) return Status::FromErrno(errno, "ftruncate");
  return WriteAll(nullptr, fd, data);
}

// True when `s` looks like text: no NUL and valid UTF-8, ignoring a character that the end of
// the sniffed window cut (a lead byte followed only by continuation bytes).
bool LooksLikeText(std::string_view s, bool at_eof) {
  if (s.find('\0') != std::string_view::npos) return false;
  const size_t bad = FindInvalidUtf8(s);
  if (bad == std::string_view::npos) return true;
  if (at_eof || s.size() - bad >= 4 || IsUtf8Continuation(s[bad])) return false;
  for (size_t i = bad + 1; i < s.size(); ++i) {
    if (!IsUtf8Continuation(s[i])) return false;
  }
  return true;
}

// read_file's streaming state: skip to `offset`, keep at most max_chars characters.
struct LineReader {
  int64_t offset = 1;
  int64_t limit = -1;
  int64_t max_chars = 1;
  std::string out;
  int64_t chars = 0;
  int64_t line = 1;       // Line number of the byte being looked at.
  int64_t last_line = 0;  // Last line with content in `out`.
  bool cut = false;       // Stopped at the character cap.
  bool more = false;      // Stopped at `limit` with more content after it.
  int64_t total = 0;
  char last_byte = '\n';
  Utf8CharStarts scan;  // Counts the characters of the text as it will be shown (made valid).

  int64_t cut_at = 0;  // With `cut`: the file's byte offset of the first byte not shown.

  // Consumes one chunk; false once nothing more is wanted.
  bool Feed(std::string_view chunk) {
    const int64_t base = total;
    total += static_cast<int64_t>(chunk.size());
    if (!chunk.empty()) last_byte = chunk.back();
    for (size_t i = 0; i < chunk.size(); ++i) {
      const char c = chunk[i];
      const bool wanted = line >= offset && (limit < 0 || line < offset + limit);
      if (!wanted && line >= offset) {
        more = true;
        return false;
      }
      if (wanted) {
        const bool start = scan.Starts(c);
        if (start && chars == max_chars) {
          cut = true;
          cut_at = base + static_cast<int64_t>(i);
          return false;
        }
        if (start) ++chars;
        out.push_back(c);
        last_line = line;
      }
      if (c == '\n') ++line;
    }
    return true;
  }
};

ToolOutput BinaryFile(const Call& c, int64_t size, int64_t seen) {
  return ToolOutput{"read_file: " + Quote(c) + " is a binary file (" + std::to_string(size) +
                        " bytes; NUL bytes or invalid UTF-8 near the start), not shown. Use bash "
                        "(e.g. `file`, `xxd | head`) to inspect it.",
                    false, seen};
}

// What read_file returns once the reader stopped.
ToolOutput ReadResult(const Call& c, LineReader& r, int64_t file_size) {
  if (file_size == 0 && r.total == 0) return ToolOutput{"(empty file)", false, 0};
  if (r.out.empty() && !r.cut) {
    return Error("read_file: offset " + std::to_string(r.offset) + " is past the end of " +
                 Quote(c) + ", which has " +
                 std::to_string(r.line - 1 + (r.last_byte != '\n' ? 1 : 0)) + " line(s)");
  }
  ToolOutput result;
  result.raw_bytes = r.total;
  // Where the next call starts: the line after the last whole one shown.
  const bool whole_lines = !r.out.empty() && r.out.back() == '\n';
  const int64_t next = r.last_line + (whole_lines ? 1 : 0);
  const size_t replaced = MakeValidUtf8(r.out);
  result.content = std::move(r.out);
  if (replaced > 0) {
    result.content += "\n[" + std::to_string(replaced) + " invalid UTF-8 sequences replaced]";
  }
  if (r.cut && next > r.offset) {
    result.content += "\n[... output truncated at " + std::to_string(r.max_chars) +
                      (whole_lines ? " characters after line " : " characters inside line ") +
                      std::to_string(r.last_line) + " of a " + std::to_string(file_size) +
                      "-byte file; continue with offset=" + std::to_string(next) + " ...]";
  } else if (r.cut) {
    // An offset cannot reach past the cut of a line longer than the cap.
    result.content += "\n[... output truncated: line " + std::to_string(r.last_line) +
                      " alone is longer than " + std::to_string(r.max_chars) +
                      " characters; the rest of the " + std::to_string(file_size) +
                      "-byte file starts at byte " + std::to_string(r.cut_at) +
                      ": read it with bash, e.g. `tail -c +" + std::to_string(r.cut_at + 1) +
                      " FILE | head -c " + std::to_string(r.max_chars) + "` ...]";
  } else if (r.more) {
    result.content +=
        "\n[... more lines follow; continue with offset=" + std::to_string(r.offset + r.limit) +
        " ...]";
  }
  return result;
}

}  // namespace

Result<std::shared_ptr<const UniqueFd>> OpenWorkdir(const std::string& workdir) {
  UniqueFd fd(::open(workdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Status::FromErrno(errno, "open workdir " + workdir);
  return std::make_shared<const UniqueFd>(std::move(fd));
}

ToolOutput RunReadFileTool(const nlohmann::json& input, const ToolContext& ctx) {
  Result<Call> c = Begin(input, ctx, "read_file");
  if (!c.ok()) return Error(c.status().message());
  Result<int64_t> offset = PositiveField(input, "offset", 1);
  if (!offset.ok()) return Error(offset.status().message());
  Result<int64_t> limit = PositiveField(input, "limit", -1);
  if (!limit.ok()) return Error(limit.status().message());
  struct stat st {};
  FileOpen f = OpenRegular(*c, O_RDONLY, &st);
  if (!f.fd) return f.refusal;

  LineReader r;
  r.offset = *offset;
  r.limit = *limit;
  r.max_chars = std::max<int64_t>(ctx.max_output_chars, 1);
  std::string sniff;
  char buf[64 * 1024];
  for (;;) {
    if (Status s = CheckDeadline(*c); !s.ok()) {
      return Error("read_file: " + Quote(*c) + ": timed out (the tool timeout)");
    }
    ssize_t n = ::read(f.fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return Error("read_file: " + Quote(*c) + ": " + Status::FromErrno(errno, "read").message());
    const std::string_view chunk(buf, static_cast<size_t>(n));
    if (sniff.size() < kSniffBytes) {
      sniff.append(chunk.substr(0, kSniffBytes - sniff.size()));
      const bool whole = n == 0 || sniff.size() < kSniffBytes;
      if ((sniff.size() >= kSniffBytes || n == 0) && !LooksLikeText(sniff, whole)) {
        return BinaryFile(*c, st.st_size, static_cast<int64_t>(sniff.size()));
      }
    }
    if (n == 0 || !r.Feed(chunk)) break;
  }
  if (!LooksLikeText(sniff, true) && sniff.size() < kSniffBytes) {
    return BinaryFile(*c, st.st_size, r.total);
  }
  return ReadResult(*c, r, st.st_size);
}

ToolOutput RunWriteFileTool(const nlohmann::json& input, const ToolContext& ctx) {
  Result<Call> c = Begin(input, ctx, "write_file");
  if (!c.ok()) return Error(c.status().message());
  Result<std::string> content = StringField(input, "write_file", "content");
  if (!content.ok()) return Error(content.status().message());
  if (c->rel.ends_with('/')) return OpenError(*c, EISDIR);
  std::vector<std::string> created;
  if (const int err = MakeParents(*c, &created); err != 0) {
    RemoveCreated(*c, created);
    return OpenError(*c, err);
  }
  bool existed = false;
  FileOpen f = OpenForWrite(*c, &existed);
  if (!f.fd) {
    RemoveCreated(*c, created);
    return f.refusal;
  }
  std::string note;
  Status s = existed ? ReplaceContent(*c, f.fd.get(), f.st, *content, &note)
                     : WriteAll(&*c, f.fd.get(), *content);
  if (!s.ok()) {
    if (!existed) {
      // What this call created goes again: a half-written new file helps no one.
      std::optional<Place> p = PlaceOf(*c);
      if (p) (void)::unlinkat(p->dir.get(), p->name.c_str(), 0);
      RemoveCreated(*c, created);
    }
    return Error("write_file: " + Quote(*c) + ": " + s.message());
  }
  return ToolOutput{(existed ? "overwrote " : "created ") + Quote(*c) + " (" +
                        std::to_string(content->size()) + " bytes" + note + ")",
                    false, 0};
}

ToolOutput RunEditFileTool(const nlohmann::json& input, const ToolContext& ctx) {
  Result<Call> c = Begin(input, ctx, "edit_file");
  if (!c.ok()) return Error(c.status().message());
  Result<std::string> old_text = StringField(input, "edit_file", "old_text");
  if (!old_text.ok()) return Error(old_text.status().message());
  Result<std::string> new_text = StringField(input, "edit_file", "new_text");
  if (!new_text.ok()) return Error(new_text.status().message());
  if (old_text->empty()) {
    return Error(
        "edit_file: 'old_text' is empty; use write_file to create or replace a whole file");
  }
  if (*old_text == *new_text) return Error("edit_file: 'old_text' and 'new_text' are identical");
  struct stat st {};
  // One descriptor for the read and the write: the file edited is the file read.
  FileOpen f = OpenRegular(*c, O_RDWR, &st);
  if (!f.fd) return f.refusal;
  std::string data;
  if (Status s = ReadWhole(*c, f.fd.get(), &data, kMaxEditBytes); !s.ok()) {
    return Error("edit_file: " + Quote(*c) + ": " + s.message());
  }
  const size_t first = data.find(*old_text);
  if (first == std::string::npos) {
    return Error("edit_file: old_text not found in " + Quote(*c) +
                 " (it must match exactly, including whitespace and indentation; read the file "
                 "again to copy it)");
  }
  size_t count = 0;
  for (size_t pos = first; pos != std::string::npos; pos = data.find(*old_text, pos + 1)) ++count;
  if (count > 1) {
    return Error("edit_file: old_text found " + std::to_string(count) + " times in " + Quote(*c) +
                 "; it must match exactly once, so include more surrounding lines to make it "
                 "unique");
  }
  const int64_t line =
      1 + std::count(data.begin(), data.begin() + static_cast<ptrdiff_t>(first), '\n');
  data.replace(first, old_text->size(), *new_text);
  std::string note;
  if (Status s = ReplaceContent(*c, f.fd.get(), st, data, &note); !s.ok()) {
    return Error("edit_file: " + Quote(*c) + ": " + s.message());
  }
  return ToolOutput{
      "edited " + Quote(*c) + ": replaced 1 occurrence at line " + std::to_string(line) + note,
      false, 0};
}

}  // namespace forkbox::agent
