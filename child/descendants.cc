#include "child/descendants.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace forkbox::child {
namespace {

// Children of `self`, from /proc/<pid>/stat (field 4 is the ppid; field 2 may contain spaces and
// parentheses, so parse after the last ')').
std::vector<pid_t> ChildrenOf(pid_t self) {
  std::vector<pid_t> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE* f = std::fopen(path, "re");
    if (f == nullptr) continue;
    char buf[1024];
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char* close = std::strrchr(buf, ')');
    if (close == nullptr) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(close + 1, " %c %ld", &state, &ppid) == 2 && ppid == self) {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  ::closedir(dir);
  return out;
}

}  // namespace

Status BecomeSubreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return Status::FromErrno(errno, "prctl(PR_SET_CHILD_SUBREAPER)");
  }
  return Status::Ok();
}

int KillAllDescendants() {
  const pid_t self = ::getpid();
  int killed = 0;
  // Bounded: each round kills every current child; orphans of those appear in the next round.
  for (int round = 0; round < 1000; ++round) {
    std::vector<pid_t> children = ChildrenOf(self);
    if (children.empty()) break;
    for (pid_t pid : children) {
      if (::kill(pid, SIGKILL) == 0) ++killed;
    }
    for (pid_t pid : children) {
      while (::waitpid(pid, nullptr, __WALL) < 0 && errno == EINTR) {
      }
    }
  }
  return killed;
}

}  // namespace forkbox::child
