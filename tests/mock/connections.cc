#include "tests/mock/connections.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <functional>

namespace forkbox::mock {
namespace {

int PortOf(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return -1;
}

// Calls `fn(fd, peer_port)` for each connected TCP socket of this process bound to local_port.
int ForEachConnection(int local_port, const std::function<bool(int, int)>& fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  const int dir_fd = dirfd(dir);
  int count = 0;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dir_fd) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t len = sizeof local;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    if (PortOf(local) != local_port) continue;
    len = sizeof peer;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    ++count;
    if (!fn(static_cast<int>(fd), PortOf(peer))) break;
  }
  closedir(dir);
  return count;
}

}  // namespace

bool ShutdownConnection(int local_port, int peer_port) {
  bool found = false;
  ForEachConnection(local_port, [&](int fd, int port) {
    if (port != peer_port) return true;
    found = shutdown(fd, SHUT_RDWR) == 0;
    return false;
  });
  return found;
}

int ShutdownAllConnections(int local_port) {
  int n = 0;
  ForEachConnection(local_port, [&](int fd, int) {
    n += shutdown(fd, SHUT_RDWR) == 0 ? 1 : 0;
    return true;
  });
  return n;
}

}  // namespace forkbox::mock
