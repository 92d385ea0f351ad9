#include "parent/transcripts.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>

#include "base/file.h"
#include "base/path.h"
#include "parent/config.h"

namespace forkbox::parent {
namespace {

Result<std::string> RandomHex64() {
  uint64_t bits = 0;
  ssize_t n = getrandom(&bits, sizeof(bits), 0);
  if (n < 0) return Status::FromErrno(errno, "getrandom");
  if (n != static_cast<ssize_t>(sizeof(bits))) return Status::Internal("getrandom: short read");
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(bits));
  return std::string(buf);
}

// The kernel filesystem the directory `fd` lies on, or nullptr: none of them takes a file, and
// root's faccessat passes on /proc all the same.
const char* KernelFilesystem(int fd) {
  struct statfs st;
  if (::fstatfs(fd, &st) != 0) return nullptr;
  switch (st.f_type) {
    case PROC_SUPER_MAGIC:
      return "proc";
    case SYSFS_MAGIC:
      return "sysfs";
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
      return "cgroup";
    case DEBUGFS_MAGIC:
      return "debugfs";
    case TRACEFS_MAGIC:
      return "tracefs";
    case SECURITYFS_MAGIC:
      return "securityfs";
    default:
      return nullptr;
  }
}

// Whether a file can be made in the directory `fd`: one is, then removed. What faccessat cannot
// tell (a read-only bind, an inode limit, a filesystem that takes no regular files) fails here
// once, at start, instead of at every task.
Status ProbeCreate(int fd) {
  Result<std::string> random = RandomHex64();
  if (!random.ok()) return random.status();
  const std::string name = ".forkbox-probe-" + *random;
  UniqueFd probe(
      ::openat(fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!probe) return Status::FromErrno(errno, "cannot create a file there");
  (void)::unlinkat(fd, name.c_str(), 0);
  return Status::Ok();
}

}  // namespace

Result<TranscriptDir> OpenTranscriptDir(const std::string& dir) {
  // Through no link: one a tool planted in the workdir (`transcripts -> ~/.config/...`) would
  // take the files, written with the user's rights, wherever it leads.
  // 0700: the transcripts hold every tool output of every task, like the sessions.
  Result<UniqueFd> opened = CreateDirectoriesNoLinks(dir, 0700);
  if (!opened.ok()) {
    return Status::InvalidArgument("--transcript-dir '" + dir + "': " + opened.status().message());
  }
  TranscriptDir out;
  out.fd = std::move(*opened);
  const int fd = out.fd.get();
  // The path of what we opened, not a second resolution of the name.
  char buf[PATH_MAX];
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(self.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) return Status::FromErrno(errno, "readlink " + self);
  out.path.assign(buf, static_cast<size_t>(n));
  const std::string named = "--transcript-dir '" + out.path + "'";
  if (const char* kernel = KernelFilesystem(fd)) {
    return Status::InvalidArgument(named + ": on " + kernel +
                                   ", a kernel filesystem that takes no files; give a directory "
                                   "on a disk");
  }
  if (::faccessat(fd, ".", W_OK, AT_EACCESS) != 0) return Status::FromErrno(errno, named);
  if (Status probe = ProbeCreate(fd); !probe.ok()) {
    return Status::InvalidArgument(named + ": " + probe.message());
  }
  return out;
}

std::string TranscriptDirWarning(const std::string& path,
                                 const std::vector<std::string>& writable_trees) {
  for (const std::string& tree : writable_trees) {
    if (PathWithin(path, tree)) {
      return "--transcript-dir '" + path + "' is inside the writable tree '" + tree +
             "': tools can plant files there, and read every transcript in it (it cannot be "
             "hidden from them there)";
    }
    if (PathWithin(tree, path)) {
      return "--transcript-dir '" + path + "' holds the writable tree '" + tree +
             "': tools can read every transcript in it (it cannot be hidden from them without "
             "hiding that tree)";
    }
  }
  return "";
}

Result<UniqueFd> OpenTranscriptFile(int dir_fd, const std::string& dir_path, int number) {
  char stamp[32];
  std::time_t now = std::time(nullptr);
  struct tm tm_utc;
  gmtime_r(&now, &tm_utc);
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm_utc);
  Result<std::string> random = RandomHex64();
  if (!random.ok()) return random.status();
  const std::string name =
      "task-" + std::to_string(number) + "-" + stamp + "-" + *random + ".jsonl";
  int fd = ::openat(dir_fd, name.c_str(),
                    O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::FromErrno(
        errno, "create transcript " + name + " in --transcript-dir '" + dir_path + "'");
  }
  return UniqueFd(fd);
}

}  // namespace forkbox::parent
