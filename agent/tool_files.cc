#include "agent/tool_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "agent/message.h"
#include "agent/tool_output.h"
#include "base/unique_fd.h"

namespace forkbox::agent {
namespace {

constexpr size_t kSniffBytes = 8 * 1024;
// edit_file loads the whole file; beyond this it refuses rather than balloon memory.
constexpr int64_t kMaxEditBytes = 64LL << 20;

ToolOutput Error(std::string message) { return ToolOutput{std::move(message), true, 0}; }

// Reads a required string field; sets *error when it is missing or not a string.
std::optional<std::string> StringField(const nlohmann::json& input, const char* tool,
                                       const char* name, std::string* error) {
  auto it = input.find(name);
  if (it == input.end() || !it->is_string()) {
    *error = std::string(tool) + ": missing required string field '" + name + "'";
    return std::nullopt;
  }
  return it->get<std::string>();
}

// Optional positive integer (models sometimes send numbers as strings: accept "10" too).
bool PositiveField(const nlohmann::json& input, const char* name, int64_t* value,
                   std::string* error) {
  auto it = input.find(name);
  if (it == input.end() || it->is_null()) return true;
  int64_t v = 0;
  if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else if (it->is_number_float() &&
             it->get<double>() == static_cast<int64_t>(it->get<double>())) {
    v = static_cast<int64_t>(it->get<double>());
  } else if (it->is_string()) {
    const std::string s = it->get<std::string>();
    char* end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0) {
      *error =
          std::string("read_file: '") + name + "' must be a positive integer, got \"" + s + "\"";
      return false;
    }
    v = parsed;
  } else {
    *error = std::string("read_file: '") + name + "' must be a positive integer";
    return false;
  }
  if (v < 1) {
    *error = std::string("read_file: '") + name +
             "' must be >= 1 (lines are numbered from 1), got " + std::to_string(v);
    return false;
  }
  *value = v;
  return true;
}

// Resolves the path field; on failure returns the error output.
std::optional<ToolOutput> ResolvePath(const nlohmann::json& input, const ToolContext& ctx,
                                      const char* tool, std::string* path, std::string* resolved) {
  std::string error;
  auto p = StringField(input, tool, "path", &error);
  if (!p) return Error(error);
  *path = *p;
  if (!ResolveInWorkdir(ctx.workdir, *path, resolved, &error)) {
    return Error(std::string(tool) + ": " + error);
  }
  return std::nullopt;
}

std::string Errno(const std::string& tool, const std::string& what, const std::string& path) {
  return tool + ": cannot " + what + " '" + path + "': " + std::strerror(errno);
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

Status ReadWhole(int fd, std::string* out, int64_t cap) {
  char buf[64 * 1024];
  for (;;) {
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

Status WriteWhole(const std::string& path, std::string_view data) {
  // O_NOFOLLOW: the resolved path is final; a symlink swapped in afterwards is not followed.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return Status::FromErrno(errno, "open " + path);
  while (!data.empty()) {
    ssize_t n = ::write(fd.get(), data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "write " + path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Opens an existing regular file for reading (never blocks on a FIFO).
std::optional<ToolOutput> OpenRegular(const char* tool, const std::string& path,
                                      const std::string& resolved, UniqueFd* fd, struct stat* st) {
  fd->reset(::open(resolved.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!*fd) {
    if (errno == ENOENT) return Error(std::string(tool) + ": file not found: '" + path + "'");
    return Error(Errno(tool, "open", path));
  }
  if (::fstat(fd->get(), st) != 0) return Error(Errno(tool, "stat", path));
  if (S_ISDIR(st->st_mode)) {
    return Error(std::string(tool) + ": '" + path + "' is a directory (use bash `ls` to list it)");
  }
  if (!S_ISREG(st->st_mode))
    return Error(std::string(tool) + ": '" + path + "' is not a regular file");
  return std::nullopt;
}

}  // namespace

ToolOutput RunReadFileTool(const nlohmann::json& input, const ToolContext& ctx) {
  std::string path, resolved, error;
  if (auto e = ResolvePath(input, ctx, "read_file", &path, &resolved)) return *e;
  int64_t offset = 1;
  int64_t limit = -1;
  if (!PositiveField(input, "offset", &offset, &error) ||
      !PositiveField(input, "limit", &limit, &error)) {
    return Error(error);
  }
  UniqueFd fd;
  struct stat st {};
  if (auto e = OpenRegular("read_file", path, resolved, &fd, &st)) return *e;

  // Stream the file: skip to `offset`, keep at most max_output_chars characters.
  const int64_t max_chars = std::max<int64_t>(ctx.max_output_chars, 1);
  std::string out;
  int64_t chars = 0;
  int64_t line = 1;       // Line number of the byte being looked at.
  int64_t last_line = 0;  // Last line with content in `out`.
  bool cut = false;       // Stopped at the character cap.
  bool more = false;      // Stopped at `limit` with more content after it.
  bool sniffed = false;
  int64_t total = 0;
  std::string sniff;
  char last_byte = '\n';
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error(Errno("read_file", "read", path));
    }
    total += n;
    if (!sniffed) {
      sniff.append(buf, static_cast<size_t>(std::min<ssize_t>(n, kSniffBytes - sniff.size())));
      if (sniff.size() >= kSniffBytes || n == 0) {
        sniffed = true;
        if (!LooksLikeText(sniff, n == 0 || sniff.size() < kSniffBytes)) {
          return ToolOutput{"read_file: '" + path + "' is a binary file (" +
                                std::to_string(st.st_size) +
                                " bytes; NUL bytes or invalid UTF-8 near the start), not shown. "
                                "Use bash (e.g. `file`, `xxd | head`) to inspect it.",
                            false, static_cast<int64_t>(sniff.size())};
        }
      }
    }
    if (n == 0) break;
    last_byte = buf[n - 1];
    for (ssize_t i = 0; i < n; ++i) {
      char c = buf[i];
      bool wanted = line >= offset && (limit < 0 || line < offset + limit);
      if (!wanted && line >= offset) {
        more = true;
        break;
      }
      if (wanted) {
        bool start = IsCharStart(static_cast<unsigned char>(c));
        if (start && chars == max_chars) {
          cut = true;
          break;
        }
        if (start) ++chars;
        out.push_back(c);
        last_line = line;
      }
      if (c == '\n') ++line;
    }
    if (cut || more) break;
  }
  if (!sniffed && !LooksLikeText(sniff, true)) {
    return ToolOutput{"read_file: '" + path + "' is a binary file, not shown.", false, total};
  }
  if (st.st_size == 0 && total == 0) {
    return ToolOutput{"(empty file)", false, 0};
  }
  if (out.empty() && !cut) {
    return Error("read_file: offset " + std::to_string(offset) + " is past the end of '" + path +
                 "', which has " + std::to_string(line - 1 + (last_byte != '\n' ? 1 : 0)) +
                 " line(s)");
  }
  ToolOutput result;
  result.raw_bytes = total;
  size_t replaced = MakeValidUtf8(out);
  result.content = std::move(out);
  if (replaced > 0) {
    result.content += "\n[" + std::to_string(replaced) + " invalid UTF-8 sequences replaced]";
  }
  if (cut) {
    int64_t next = last_line + (result.content.back() == '\n' ? 1 : 0);
    result.content += "\n[... output truncated at " + std::to_string(max_chars) +
                      " characters inside line " + std::to_string(last_line) + " of a " +
                      std::to_string(st.st_size) +
                      "-byte file; continue with offset=" + std::to_string(next) + " ...]";
  } else if (more) {
    result.content +=
        "\n[... more lines follow; continue with offset=" + std::to_string(offset + limit) +
        " ...]";
  }
  return result;
}

ToolOutput RunWriteFileTool(const nlohmann::json& input, const ToolContext& ctx) {
  std::string path, resolved, error;
  if (auto e = ResolvePath(input, ctx, "write_file", &path, &resolved)) return *e;
  auto content = StringField(input, "write_file", "content", &error);
  if (!content) return Error(error);
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(resolved).parent_path();
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    return Error("write_file: cannot create directory '" + parent.string() + "': " + ec.message());
  }
  bool existed = ::access(resolved.c_str(), F_OK) == 0;
  if (Status st = WriteWhole(resolved, *content); !st.ok()) {
    return Error("write_file: " + st.message());
  }
  return ToolOutput{(existed ? "overwrote '" : "created '") + path + "' (" +
                        std::to_string(content->size()) + " bytes)",
                    false, 0};
}

ToolOutput RunEditFileTool(const nlohmann::json& input, const ToolContext& ctx) {
  std::string path, resolved, error;
  if (auto e = ResolvePath(input, ctx, "edit_file", &path, &resolved)) return *e;
  auto old_text = StringField(input, "edit_file", "old_text", &error);
  if (!old_text) return Error(error);
  auto new_text = StringField(input, "edit_file", "new_text", &error);
  if (!new_text) return Error(error);
  if (old_text->empty()) {
    return Error(
        "edit_file: 'old_text' is empty; use write_file to create or replace a whole file");
  }
  if (*old_text == *new_text) return Error("edit_file: 'old_text' and 'new_text' are identical");
  UniqueFd fd;
  struct stat st {};
  if (auto e = OpenRegular("edit_file", path, resolved, &fd, &st)) return *e;
  std::string data;
  if (Status s = ReadWhole(fd.get(), &data, kMaxEditBytes); !s.ok()) {
    return Error("edit_file: '" + path + "': " + s.message());
  }
  fd.reset();
  size_t first = data.find(*old_text);
  if (first == std::string::npos) {
    return Error("edit_file: old_text not found in '" + path +
                 "' (it must match exactly, including whitespace and indentation; read the file "
                 "again to copy it)");
  }
  size_t count = 0;
  for (size_t pos = first; pos != std::string::npos; pos = data.find(*old_text, pos + 1)) ++count;
  if (count > 1) {
    return Error("edit_file: old_text found " + std::to_string(count) + " times in '" + path +
                 "'; it must match exactly once, so include more surrounding lines to make it "
                 "unique");
  }
  int64_t line = 1 + std::count(data.begin(), data.begin() + static_cast<ptrdiff_t>(first), '\n');
  data.replace(first, old_text->size(), *new_text);
  if (Status s = WriteWhole(resolved, data); !s.ok()) return Error("edit_file: " + s.message());
  return ToolOutput{"edited '" + path + "': replaced 1 occurrence at line " + std::to_string(line),
                    false, 0};
}

}  // namespace forkbox::agent
