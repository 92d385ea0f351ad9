#include "sandbox/hygiene.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/process.h"
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

// 8 bytes: one pass holds kMaxLinks of them on the stack, a keeper's too (a 256 KiB clone stack).
struct ProcLink {
  pid_t pid;
  uint32_t ppid : 30;  // Fits: PID_MAX_LIMIT is 2^22.
  uint32_t state : 2;  // What a SIGSTOP does to it (LinkState).
};
static_assert(sizeof(ProcLink) == 8);

enum LinkState : uint32_t {
  kRuns = 0,     // Stops when it next runs.
  kSettled = 1,  // Stopped or traced already, or a zombie: a SIGSTOP changes nothing.
  // In an uninterruptible wait ('D': a vfork parent, a hung NFS read): it stops only when it
  // leaves the wait, which may be never.
  kWaits = 2,
};

// The link of /proc/<name>/stat ("pid (comm) state ppid ..."; comm may hold spaces and
// parentheses) into `out`; false when it cannot be read. Raw calls and a stack buffer.
bool ReadLinkRaw(int proc, const char* name, pid_t pid, ProcLink* out) {
  char path[32] = {};
  const size_t len = strlen(name);
  if (len + sizeof("/stat") > sizeof(path)) return false;
  memcpy(path, name, len);
  memcpy(path + len, "/stat", sizeof("/stat"));
  const int fd = openat(proc, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* close_paren = strrchr(buf, ')');
  // ") S ppid": the ppid starts 4 bytes on, within what was read.
  if (close_paren == nullptr || close_paren + 4 >= buf + n || close_paren[1] != ' ') return false;
  const long ppid = strtol(close_paren + 4, nullptr, 10);
  if (ppid < 0 || ppid > INT32_MAX) return false;
  const char state = close_paren[2];
  out->pid = pid;
  out->ppid = static_cast<uint32_t>(ppid);
  const bool settled = state == 'T' || state == 't' || state == 'Z' || state == 'X';
  out->state = settled ? kSettled : state == 'D' ? kWaits : kRuns;
  return true;
}

// Processes one pass over /proc holds at most (the rest wait for a round that sees them). Host
// daemons (parent 1, outside a namespace init) and kernel threads (parent 0
// or 2) are not kept, so this bounds the other processes of the host with a parent of their own
// (shells, terminals' children) and ours (RLIMIT_NPROC, 512 by default, bounds ours).
constexpr int kMaxLinks = 8192;
constexpr int kMaxKillRounds = 10000;
// How long a stop rescans while only processes in an uninterruptible wait are left (a fork there
// adds its child when the wait ends: in milliseconds, unless the wait never ends).
constexpr int64_t kWaitGraceNs = 20'000'000;

// Every process whose parent could be a descendant of `self`, from one pass over the /proc
// `proc_fd` (-1: /proc), into `links` (the first kMaxLinks), sorted by parent; -1 with errno when
// /proc cannot be opened.
int ScanLinksRaw(int proc_fd, pid_t self, ProcLink* links) {
  const int proc = proc_fd >= 0 ? proc_fd : open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return -1;
  if (proc_fd >= 0 && lseek(proc, 0, SEEK_SET) != 0) return -1;
  int count = 0;
  alignas(8) char buf[4096];
  long n = 0;
  while ((n = syscall(SYS_getdents64, proc, buf, sizeof(buf))) > 0) {
    for (long off = 0; off < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buf + off);
      off += entry->d_reclen;
      char* end = nullptr;
      const long pid = strtol(entry->d_name, &end, 10);
      if (pid <= 0 || *end != '\0') continue;
      ProcLink link;
      if (!ReadLinkRaw(proc, entry->d_name, static_cast<pid_t>(pid), &link)) continue;
      const pid_t ppid = static_cast<pid_t>(link.ppid);
      if (ppid <= 0 || ppid == 2 || (ppid == 1 && self != 1)) continue;
      if (count == kMaxLinks) break;
      links[count++] = link;
    }
  }
  if (proc_fd < 0) close(proc);
  std::sort(links, links + count,
            [](const ProcLink& a, const ProcLink& b) { return a.ppid < b.ppid; });
  return count;
}

// The children of `parent` among `links` (ScanLinksRaw's).
std::span<const ProcLink> ChildrenIn(const ProcLink* links, int count, pid_t parent) {
  const ProcLink* first = std::lower_bound(links, links + count, parent,
                                           [](const ProcLink& l, pid_t p) { return l.ppid < p; });
  const ProcLink* last = first;
  while (last < links + count && last->ppid == parent) ++last;
  return {first, last};
}

// The tree below `self` in `links` (but `keep` and theirs), breadth first, so a parent comes
// before its children: `visit(link)` for each. How many visits returned true.
template <typename Visit>
int VisitTreeRaw(pid_t self, std::span<const pid_t> keep, const ProcLink* links, int count,
                 Visit visit) {
  pid_t queue[kMaxLinks + 1];
  int head = 0, tail = 0, hits = 0;
  queue[tail++] = self;
  while (head < tail) {
    for (const ProcLink& l : ChildrenIn(links, count, queue[head++])) {
      if (std::find(keep.begin(), keep.end(), l.pid) != keep.end()) continue;
      if (visit(l)) ++hits;
      if (tail <= kMaxLinks) queue[tail++] = l.pid;
    }
  }
  return hits;
}

// One round: the tree below `self` (but `keep` and theirs) killed, from one scan; its members
// that are children of `self` reaped. How many it signalled, or -1 as ScanLinksRaw.
int KillTreeRoundRaw(pid_t self, std::span<const pid_t> keep) {
  ProcLink links[kMaxLinks];
  const int count = ScanLinksRaw(-1, self, links);
  if (count < 0) return -1;
  const int killed = VisitTreeRaw(self, keep, links, count,
                                  [](const ProcLink& l) { return kill(l.pid, SIGKILL) == 0; });
  for (const ProcLink& l : ChildrenIn(links, count, self)) {
    if (std::find(keep.begin(), keep.end(), l.pid) != keep.end()) continue;
    while (waitpid(l.pid, nullptr, __WALL) < 0 && errno == EINTR) {
    }
  }
  return killed;
}

}  // namespace

int StopDescendantsRaw(int proc) {
  const pid_t self = getpid();
  int stopped = 0;
  bool only_waiting = false;  // The last round found only waiting processes left,
  timespec waits_since{};     // since then.
  for (int round = 0; round < kMaxKillRounds; ++round) {
    ProcLink links[kMaxLinks];
    const int count = ScanLinksRaw(proc, self, links);
    if (count < 0) return -1;
    // A zombie or a dying process never shows 'T'; one stopped already needs nothing.
    int waiting = 0;
    const int n = VisitTreeRaw(self, {}, links, count, [&waiting](const ProcLink& l) {
      if (l.state == kSettled) return false;
      (void)kill(l.pid, SIGSTOP);
      waiting += l.state == kWaits ? 1 : 0;
      return true;
    });
    stopped += n;
    if (n == 0) return stopped;
    if (n > waiting) {
      only_waiting = false;
      sched_yield();  // The kernel stops each when it next runs.
      continue;
    }
    // Only waiting ones left. One in a fork may still add a child, which the next round finds:
    // rescanned for kWaitGraceNs, then left to take its stop when its wait ends.
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!only_waiting) waits_since = now;
    only_waiting = true;
    const int64_t waited =
        (now.tv_sec - waits_since.tv_sec) * 1'000'000'000LL + (now.tv_nsec - waits_since.tv_nsec);
    if (waited >= kWaitGraceNs) return stopped;
    const timespec tick = {0, 1'000'000};
    (void)nanosleep(&tick, nullptr);
  }
  errno = EAGAIN;
  return -1;
}

int ContinueDescendantsRaw(int proc) {
  ProcLink links[kMaxLinks];
  const int count = ScanLinksRaw(proc, getpid(), links);
  if (count < 0) return -1;
  return VisitTreeRaw(getpid(), {}, links, count,
                      [](const ProcLink& l) { return kill(l.pid, SIGCONT) == 0; });
}

void StopAsJobRaw(int sig, int proc) {
  if (StopDescendantsRaw(proc) < 0) {
    const char* why = KillFailureText(errno);
    for (const char* part : {"forkbox: processes below may run on while stopped: ", why, "\n"}) {
      (void)!write(STDERR_FILENO, part, strlen(part));
    }
  }
  StopAsDefaultRaw(sig);
  (void)ContinueDescendantsRaw(proc);
}

int KillDescendantsRaw(std::span<const pid_t> keep) {
  const pid_t self = getpid();
  int killed = 0;
  for (int round = 0; round < kMaxKillRounds; ++round) {
    // No child at all (ECHILD, one syscall): nothing below, and no walk over every process.
    siginfo_t info;
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT | __WALL) != 0 && errno == ECHILD) {
      return killed;
    }
    const int n = KillTreeRoundRaw(self, keep);
    // Not "none left": children it cannot look for are not killed.
    if (n < 0) return -1;
    if (n == 0) return killed;
    killed += n;
  }
  errno = EAGAIN;
  return -1;
}

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

int KillOrphans(std::span<const pid_t> keep) { return KillDescendantsRaw(keep); }

int KillAllDescendants() {
  int killed = 0;
  if (getpid() == 1) {
    // PID namespace init: kill(-1) reaches every other process in the namespace.
    if (kill(-1, SIGKILL) == 0) ++killed;
  }
  const int orphans = KillOrphans({});
  const int err = errno;  // Why it failed, for the caller.
  // Reap anything that exited on its own in the meantime.
  while (waitpid(-1, nullptr, WNOHANG | __WALL) > 0) {
  }
  errno = err;
  return orphans < 0 ? -1 : killed + orphans;
}

const char* KillFailureText(int err) {
  return err == EAGAIN ? "still there after every round"
                       : "not looked for: /proc could not be read";
}

}  // namespace forkbox::sandbox
