#include "base/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <vector>

namespace forkbox {

Result<UniqueFd> OpenRegularFile(const std::string& path, int extra_flags, struct stat* st) {
  UniqueFd fd(::open(path.c_str(), extra_flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) return Status::FromErrno(errno, "open " + path);
  struct stat local;
  struct stat* s = st != nullptr ? st : &local;
  if (::fstat(fd.get(), s) != 0) return Status::FromErrno(errno, "fstat " + path);
  if (!S_ISREG(s->st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  return fd;
}

Result<std::string> ReadToEnd(int fd, size_t max_bytes, const std::string& what) {
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read " + what);
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      return Status::ResourceExhausted(what + ": larger than " + std::to_string(max_bytes) +
                                       " bytes");
    }
  }
}

UniqueFd OpenAt2(int dir, const char* path, uint64_t flags, uint64_t resolve, mode_t mode) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  // openat2 refuses a mode without a file to create (EINVAL).
  const bool creates = (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
  how.mode = creates ? mode : 0;
  how.resolve = resolve;
  for (int attempt = 1;; ++attempt) {
    const long fd = ::syscall(SYS_openat2, dir, path, &how, sizeof(how));
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    if ((errno != EAGAIN && errno != EINTR) || attempt == kOpenAt2Attempts) return UniqueFd();
  }
}

Result<UniqueFd> OpenDirBeneath(int root, const std::string& rel, int flags) {
  UniqueFd fd = OpenAt2(root, rel.empty() ? "." : rel.c_str(), flags | O_DIRECTORY,
                        RESOLVE_BENEATH | kResolveNoLinks);
  if (!fd) return Status::FromErrno(errno, "openat2(" + rel + ")");
  return fd;
}

FileIdentity IdentityOf(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

Result<UniqueFd> ReopenDirectory(const std::string& path, FileIdentity id,
                                 const std::string& what) {
  UniqueFd dir = OpenAt2(AT_FDCWD, path.c_str(), O_PATH | O_DIRECTORY, kResolveNoLinks);
  if (!dir && errno != ENOENT && errno != ELOOP && errno != ENOTDIR) {
    return Status::FromErrno(errno, "open " + path);
  }
  const FileIdentity now = dir ? IdentityOf(dir.get()) : FileIdentity{};
  if (id.ino == 0 || now.ino != id.ino || now.dev != id.dev) {
    return Status::Error(Status::Code::kNotFound,
                         path + " no longer leads to " + what + " (moved, removed or replaced)");
  }
  return dir;
}

namespace {

// A failed open of `path` through no link: ELOOP (a link on the way) is worded for the user.
Status NoLinksError(int err, const std::string& path) {
  if (err == ELOOP) {
    return Status::PermissionDenied(path +
                                    ": a symbolic link on the way; it is not followed (a tool "
                                    "could have planted it): give the real path");
  }
  if (err == ENXIO) {  // O_NONBLOCK's answer for a FIFO (or a device) with no other end.
    return Status::InvalidArgument(path + ": not a regular file (a FIFO without a reader)");
  }
  return Status::FromErrno(err, "open " + path);
}

// Opens `path` beneath `dir` with `flags` through no link of either kind (see
// CreateRegularFileNoLinks), `resolve` added; `one_name`: a hard link is refused. Errors name
// `shown` (empty: `path`).
Result<UniqueFd> OpenRegularFileNoLinks(int dir, const std::string& path, int flags, mode_t mode,
                                        uint64_t resolve = 0, bool one_name = true,
                                        const std::string& shown = "") {
  const std::string& name = shown.empty() ? path : shown;
  UniqueFd file =
      OpenAt2(dir, path.c_str(), flags | O_NONBLOCK | O_NOCTTY, kResolveNoLinks | resolve, mode);
  if (!file) return NoLinksError(errno, name);
  struct stat st;
  if (::fstat(file.get(), &st) != 0) return Status::FromErrno(errno, "fstat " + name);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(name + ": not a regular file");
  if (one_name && st.st_nlink > 1) {
    return Status::PermissionDenied(path + ": a hard link (" + std::to_string(st.st_nlink) +
                                    " names), refused: its other name may lie anywhere; give a "
                                    "file of its own");
  }
  return file;
}

}  // namespace

Result<UniqueFd> CreateRegularFileNoLinks(const std::string& path, mode_t mode, int dir) {
  return OpenRegularFileNoLinks(dir, path, O_WRONLY | O_CREAT, mode);
}

Result<std::string> ReadRegularFileNoLinks(const std::string& path, size_t max_bytes) {
  Result<UniqueFd> fd = OpenRegularFileNoLinks(AT_FDCWD, path, O_RDONLY, 0);
  if (!fd.ok()) return fd.status();
  return ReadToEnd(fd->get(), max_bytes, path);
}

Result<std::string> ReadRegularFileBeneath(int dir, const std::string& rel, size_t max_bytes,
                                           const std::string& shown) {
  Result<UniqueFd> fd = OpenRegularFileNoLinks(dir, rel, O_RDONLY, 0, RESOLVE_BENEATH,
                                               /*one_name=*/false, shown);
  if (!fd.ok()) return fd.status();
  return ReadToEnd(fd->get(), max_bytes, shown);
}

Result<UniqueFd> CreateDirectoriesNoLinks(const std::string& path, mode_t mode) {
  if (path.empty()) return Status::InvalidArgument("an empty directory path");
  UniqueFd dir = OpenAt2(AT_FDCWD, path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY, 0);
  if (!dir) return Status::FromErrno(errno, "open " + path);
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string name = path.substr(start, end - start);
    start = end + 1;
    if (name.empty() || name == ".") continue;
    UniqueFd next = OpenAt2(dir.get(), name.c_str(), O_PATH | O_DIRECTORY, kResolveNoLinks);
    // mkdirat never follows a link at `name` (EEXIST), and the open after it refuses one.
    if (!next && errno == ENOENT &&
        (::mkdirat(dir.get(), name.c_str(), mode) == 0 || errno == EEXIST)) {
      next = OpenAt2(dir.get(), name.c_str(), O_PATH | O_DIRECTORY, kResolveNoLinks);
    }
    if (!next) return NoLinksError(errno, path.substr(0, end));
    dir = std::move(next);
  }
  UniqueFd out = OpenAt2(dir.get(), ".", O_RDONLY | O_DIRECTORY, 0);
  if (!out) return Status::FromErrno(errno, "open " + path);
  return out;
}

Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes, int extra_flags) {
  Result<UniqueFd> fd = OpenRegularFile(path, extra_flags);
  if (!fd.ok()) return fd.status();
  return ReadToEnd(fd->get(), max_bytes, path);
}

namespace {

constexpr int kMaxRemoveDepth = 256;  // Each level holds a descriptor until it is done.

// A directory's owner rights, set on the directory `fd` pins (O_PATH): through its /proc magic
// link, so a name swapped for a symbolic link meanwhile changes nothing elsewhere.
void AddOwnerRights(int fd) {
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  struct stat st;
  if (fstat(fd, &st) == 0) (void)chmod(self.c_str(), (st.st_mode & 07777) | S_IRWXU);
}

}  // namespace

std::vector<std::string> ListDirNames(int dir) {
  std::vector<std::string> names;
  UniqueFd listing(openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* entries = listing ? fdopendir(listing.get()) : nullptr;
  if (entries == nullptr) return names;
  (void)listing.release();  // Owned by `entries` now.
  while (const dirent* e = readdir(entries)) {
    const std::string_view n(e->d_name);
    if (n != "." && n != "..") names.emplace_back(n);
  }
  closedir(entries);
  return names;
}

namespace {

int RemoveTreeBelow(int parent, const char* name, int depth) {
  if (unlinkat(parent, name, 0) == 0) return 0;
  if (errno != EISDIR) return errno == ENOENT ? 0 : errno;
  UniqueFd pinned(openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!pinned) return errno == ENOENT ? 0 : errno;
  if (depth > kMaxRemoveDepth) return ELOOP;
  AddOwnerRights(pinned.get());
  // Beneath a directory opened for this pass: `name` may be swapped meanwhile.
  const UniqueFd dir(openat(pinned.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir) {
    for (const std::string& n : ListDirNames(dir.get())) {
      (void)RemoveTreeBelow(dir.get(), n.c_str(), depth + 1);
    }
  }
  if (unlinkat(parent, name, AT_REMOVEDIR) == 0) return 0;
  return errno == ENOENT ? 0 : errno;
}

}  // namespace

int RemoveTreeAt(int parent, const char* name) { return RemoveTreeBelow(parent, name, 0); }

}  // namespace forkbox
