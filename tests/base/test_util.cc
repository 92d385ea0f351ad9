#include "tests/base/test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "base/unique_fd.h"

namespace forkbox::testing {

std::string ReadAllFromFd(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    EXPECT_GE(n, 0) << "read: " << errno;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool MakeGitWorktree(const std::string& main, const std::string& worktree) {
  const std::string script = "git init -q '" + main + "' && git -C '" + main +
                             "' -c user.email=a@b -c user.name=n commit -q --allow-empty -m init "
                             "&& git -C '" +
                             main + "' worktree add -q '" + worktree + "' 2>/dev/null";
  return std::system(script.c_str()) == 0;
}

namespace {

// Whether `fd` polls readable within `timeout_ms`.
bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

// The FIFOs live where a sandboxed command may write: a regular file or a device put in a FIFO's
// place is refused (a link already is, by O_NOFOLLOW).
bool IsFifo(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

}  // namespace

std::optional<std::string> ReadFifoUnless(const std::string& path, int stop_fd) {
  // Non-blocking: the open returns at once, and before any writer came poll reports nothing.
  UniqueFd fifo(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
  if (!fifo || !IsFifo(fifo.get())) return std::nullopt;
  std::string text;
  while (true) {
    pollfd fds[2] = {{fifo.get(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    if (fds[0].revents != 0) {
      char buf[4096];
      const ssize_t n = ::read(fifo.get(), buf, sizeof buf);
      if (n > 0) {
        text.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) return text;  // The writer closed it.
      if (errno != EAGAIN && errno != EINTR) return std::nullopt;
      continue;
    }
    if (fds[1].revents != 0) return std::nullopt;
  }
}

bool WriteFifoUnless(const std::string& path, const std::string& text, int stop_fd) {
  UniqueFd fifo;
  while (true) {
    fifo.reset(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
    if (fifo) break;
    if (errno != ENXIO) return false;  // ENXIO: no reader yet.
    if (Readable(stop_fd, 10)) return false;
  }
  if (!IsFifo(fifo.get())) return false;
  const int flags = ::fcntl(fifo.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fifo.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) return false;
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fifo.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace forkbox::testing
