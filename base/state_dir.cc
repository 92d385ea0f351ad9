#include "base/state_dir.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "base/file.h"

namespace forkbox {
namespace {

// The user's state directory: $XDG_STATE_HOME when absolute, else $HOME/.local/state.
Result<std::string> UserStateDir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/') {
    return std::string(x);
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return std::string(home) + "/.local/state";
  }
  return Status::InvalidArgument(
      "no state directory: neither XDG_STATE_HOME nor HOME is an absolute path");
}

// Makes the user's state directory `user` when missing (mkdir -p, usual modes, links followed),
// but never HOME or anything above it: a HOME that does not exist (Debian's /nonexistent for
// nobody, common in CI, where root could make it) is a deliberate "no home", and a state directory
// beneath it is an error. One elsewhere (XDG_STATE_HOME outside HOME) is made whole.
Status MakeUserStateDir(const std::string& user) {
  namespace fs = std::filesystem;
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') {
    const fs::path base = fs::path(home).lexically_normal();
    const fs::path rel = fs::path(user).lexically_normal().lexically_relative(base);
    const bool beneath = !rel.empty() && *rel.begin() != "..";
    struct stat st;
    if (beneath && ::stat(home, &st) != 0 && errno == ENOENT) {
      return Status::Error(Status::Code::kNotFound,
                           user + ": HOME (" + home +
                               ") does not exist; forkbox makes its state directory below HOME, "
                               "never HOME itself");
    }
  }
  std::error_code ec;
  fs::create_directories(user, ec);
  if (ec) return Status::FromErrno(ec.value(), "mkdir " + user);
  return Status::Ok();
}

// `name` in `parent`, made 0700 when `create` and missing (mkdirat follows no link: EEXIST),
// then opened through no link.
Result<OwnedDir> OpenDirIn(int parent, const std::string& parent_path, const std::string& name,
                           bool create) {
  const std::string path = parent_path + "/" + name;
  if (create && ::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + path);
  }
  UniqueFd fd = OpenAt2(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                        RESOLVE_BENEATH | kResolveNoLinks);
  if (!fd) return RefusedOwnName(errno, parent, parent_path, name);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "fstat " + path);
  // Private: it holds prompts and tool outputs. Through the descriptor, never a path.
  if (create && (st.st_mode & 07777) != 0700 && ::fchmod(fd.get(), 0700) != 0) {
    return Status::FromErrno(errno, "chmod 0700 " + path);
  }
  return OwnedDir{std::move(fd), path};
}

}  // namespace

Result<std::string> ForkboxStateDir() {
  Result<std::string> user = UserStateDir();
  if (!user.ok()) return user.status();
  return *user + "/forkbox";
}

Result<OwnedDir> OpenForkboxStateDir(bool create) {
  Result<std::string> user = UserStateDir();
  if (!user.ok()) return user.status();
  if (create) FORKBOX_RETURN_IF_ERROR(MakeUserStateDir(*user));
  std::error_code ec;
  // Resolved once: from here on every step is beneath a descriptor, through no link.
  const std::string canonical = std::filesystem::canonical(*user, ec).string();
  if (ec) {
    return Status::Error(ec == std::errc::no_such_file_or_directory ? Status::Code::kNotFound
                                                                    : Status::Code::kInternal,
                         *user + ": " + ec.message());
  }
  UniqueFd base = OpenAt2(AT_FDCWD, canonical.c_str(), O_PATH | O_DIRECTORY, kResolveNoLinks);
  if (!base) return Status::FromErrno(errno, "open " + canonical);
  return OpenDirIn(base.get(), canonical, "forkbox", create);
}

Result<OwnedDir> OpenOwnedDir(const OwnedDir& parent, const std::string& name, bool create) {
  return OpenDirIn(parent.fd.get(), parent.path, name, create);
}

Status RefusedOwnName(int err, int dir, const std::string& dir_path, const std::string& name) {
  const std::string path = dir_path + "/" + name;
  if (err != ELOOP && err != ENOTDIR) return Status::FromErrno(err, "open " + path);
  // What is there, as found (O_NOFOLLOW | O_DIRECTORY says ENOTDIR of a link).
  struct stat st;
  std::string found = "not a directory";
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    const ssize_t n = ::readlinkat(dir, name.c_str(), target, sizeof(target));
    found = "a symbolic link";
    if (n > 0) found += " (to " + std::string(target, static_cast<size_t>(n)) + ")";
  }
  return Status::PermissionDenied(
      path + ": " + found +
      " where forkbox keeps its own; not followed (a tool that could write there may have "
      "planted it): move it away, or set XDG_STATE_HOME to keep forkbox's state elsewhere");
}

}  // namespace forkbox
