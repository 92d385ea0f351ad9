#include "base/file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

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

Result<UniqueFd> OpenDirBeneath(int root, const std::string& rel, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_DIRECTORY | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const char* path = rel.empty() ? "." : rel.c_str();
  for (;;) {
    long fd = ::syscall(SYS_openat2, root, path, &how, sizeof(how));
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    if (errno != EAGAIN && errno != EINTR) return Status::FromErrno(errno, "openat2(" + rel + ")");
  }
}

Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes, int extra_flags) {
  Result<UniqueFd> fd = OpenRegularFile(path, extra_flags);
  if (!fd.ok()) return fd.status();
  return ReadToEnd(fd->get(), max_bytes, path);
}

}  // namespace forkbox
