#include "sandbox/hygiene.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/unique_fd.h"
#include "sandbox/sandbox.h"

namespace forkbox::sandbox {

int SetNonDumpableAndDeathSignalRaw(pid_t expected_parent, const char** step) {
  *step = "prctl(PR_SET_DUMPABLE, 0)";
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return errno;
  *step = "prctl(PR_SET_PDEATHSIG, SIGKILL)";
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return errno;
  *step = "parent already exited";
  if (getppid() != expected_parent) return ESRCH;
  return 0;
}

void ResetSignalsRaw() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) != 0) continue;
    if (old.sa_handler == SIG_IGN) {
      struct sigaction dfl;
      memset(&dfl, 0, sizeof(dfl));
      dfl.sa_handler = SIG_DFL;
      sigaction(sig, &dfl, nullptr);
    }
  }
}

namespace {

// num_threads of /proc/self/stat (field 20; the fields after the command's closing parenthesis
// start at field 3), or -1 when it cannot be read. Plain reads: on the parent's way to its first
// model call, where a first iostream costs a locale's set-up.
long ThreadCount() {
  // procfs: nothing a tool does can plant a link or a FIFO there; O_NOFOLLOW all the same.
  UniqueFd fd(open("/proc/self/stat", O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return -1;
  char text[1024];
  size_t len = 0;
  while (len < sizeof(text) - 1) {
    const ssize_t n = read(fd.get(), text + len, sizeof(text) - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<size_t>(n);
  }
  text[len] = '\0';
  const char* paren = std::strrchr(text, ')');
  if (paren == nullptr) return -1;
  const char* field = paren + 1;
  for (int i = 3; i <= 20; ++i) {
    field += std::strspn(field, " ");
    if (*field == '\0') return -1;
    if (i < 20) field += std::strcspn(field, " ");
  }
  char* end = nullptr;
  const long threads = std::strtol(field, &end, 10);
  return end != field ? threads : -1;
}

}  // namespace

Status AwaitSingleThreaded(std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (int round = 0;; ++round) {
    const long threads = ThreadCount();
    if (threads < 0) return Status::Internal("cannot read the thread count in /proc/self/stat");
    if (threads == 1) return Status::Ok();
    if (std::chrono::steady_clock::now() >= end) {
      return Status::Timeout(
          std::to_string(threads) +
          " threads are running; entering the sandbox needs a single-threaded process");
    }
    // The exiting thread needs a CPU to finish: yield first, then back off a little.
    if (round < 64) {
      sched_yield();
    } else {
      const timespec pause{0, 100'000};
      nanosleep(&pause, nullptr);
    }
  }
}

std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  // No child at all (ECHILD, one syscall): skip the walk over every process of the system.
  siginfo_t info;
  if (parent == getpid() && waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT | __WALL) != 0 &&
      errno == ECHILD) {
    return out;
  }
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long pid = strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // "pid (comm) state ppid ...": comm may contain spaces and parentheses; parse after the last
    // ')'.
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) out.push_back(static_cast<pid_t>(pid));
  }
  closedir(dir);
  return out;
}

int ReapOrphans(std::span<const pid_t> owned) {
  int reaped = 0;
  for (pid_t pid : ChildrenOf(getpid())) {
    if (std::find(owned.begin(), owned.end(), pid) != owned.end()) continue;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG | __WALL) == pid) ++reaped;
  }
  return reaped;
}

int KillOrphans(std::span<const pid_t> keep) {
  int killed = 0;
  // Each killed one's own children come to us next (the subreaper, or init of the namespace):
  // repeat until none is left.
  for (int round = 0; round < 10000; ++round) {
    std::vector<pid_t> children = ChildrenOf(getpid());
    std::erase_if(children, [&](pid_t pid) {
      return std::find(keep.begin(), keep.end(), pid) != keep.end();
    });
    if (children.empty()) break;
    for (pid_t pid : children) {
      if (kill(pid, SIGKILL) == 0) ++killed;
    }
    for (pid_t pid : children) {
      while (waitpid(pid, nullptr, __WALL) < 0 && errno == EINTR) {
      }
    }
  }
  return killed;
}

int KillAllDescendants() {
  int killed = 0;
  if (getpid() == 1) {
    // PID namespace init: kill(-1) reaches every other process in the namespace.
    if (kill(-1, SIGKILL) == 0) ++killed;
  }
  killed += KillOrphans({});
  // Reap anything that exited on its own in the meantime.
  while (waitpid(-1, nullptr, WNOHANG | __WALL) > 0) {
  }
  return killed;
}

}  // namespace forkbox::sandbox
