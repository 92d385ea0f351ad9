#include "tests/mock/connections.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace forkbox::mock {
namespace {

int PortOf(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return -1;
}

}  // namespace

void ForEachSocket(int local_port, const std::function<bool(int, int)>& fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int dir_fd = dirfd(dir);
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long n = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || n == dir_fd) continue;
    const int fd = static_cast<int>(n);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t len = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    if (PortOf(local) != local_port) continue;
    len = sizeof peer;
    const int peer_port =
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 ? PortOf(peer) : -1;
    if (!fn(fd, peer_port)) break;
  }
  closedir(dir);
}

bool ShutdownConnection(int local_port, int peer_port) {
  bool found = false;
  ForEachSocket(local_port, [&](int fd, int port) {
    if (port != peer_port) return true;
    found = shutdown(fd, SHUT_RDWR) == 0;
    return false;
  });
  return found;
}

int ShutdownAllConnections(int local_port) {
  int n = 0;
  ForEachSocket(local_port, [&](int fd, int peer_port) {
    if (peer_port >= 0 && shutdown(fd, SHUT_RDWR) == 0) ++n;
    return true;
  });
  return n;
}

int MarkCloseOnExec(int local_port) {
  int n = 0;
  ForEachSocket(local_port, [&](int fd, int) {
    const int flags = fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC) && fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == 0) ++n;
    return true;
  });
  return n;
}

}  // namespace forkbox::mock
