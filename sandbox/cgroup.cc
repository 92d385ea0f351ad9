#include "sandbox/cgroup.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/file.h"
#include "sandbox/namespaces.h"
#include "sandbox/sandbox.h"

namespace forkbox::sandbox {
namespace {

bool WritableDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && access(path.c_str(), W_OK) == 0;
}

Status WriteString(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  UniqueFd owned(fd);
  ssize_t n = write(fd, value.data(), value.size());
  if (n != static_cast<ssize_t>(value.size())) {
    return Status::FromErrno(n < 0 ? errno : EIO, "write " + path);
  }
  return Status::Ok();
}

using Clock = std::chrono::steady_clock;

// What is left until `deadline`, in whole milliseconds for poll(2): 0 once it has passed.
int MillisecondsUntil(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// The pids cgroup of `pid` ("self" too) as /proc/<pid>/cgroup names it
// ("/forkbox/task-12-session"), or "": v1's pids line ("7:pids:/forkbox/task-..."), else v2's
// ("0::/forkbox/task-..."), which a v1 machine lists too, for systemd's hierarchy.
std::string PidsCgroupOf(const std::string& pid) {
  Result<std::string> text = ReadRegularFile("/proc/" + pid + "/cgroup", 1 << 16);
  std::istringstream in(text.ok() ? *text : "");
  std::string unified;
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    const size_t second = colon == std::string::npos ? colon : line.find(':', colon + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(colon + 1, second - colon - 1);
    if (controllers == "pids") return line.substr(second + 1);
    if (controllers.empty()) unified = line.substr(second + 1);
  }
  return unified;
}

// SIGKILLs each process listed in `dir`/cgroup.procs that still sits in the cgroup named `name`
// (its pid may have been reused since the read: the check and the signal go through one pidfd)
// and waits until each has exited or `deadline` has passed. The number signalled.
size_t KillListed(const std::string& dir, const std::string& name, Clock::time_point deadline) {
  Result<std::string> procs = ReadRegularFile(dir + "/cgroup.procs", 1 << 20);
  std::istringstream in(procs.ok() ? *procs : "");
  std::vector<UniqueFd> killed;
  for (std::string pid; in >> pid;) {
    UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, std::atoi(pid.c_str()), 0)));
    const std::string cgroup = pidfd ? PidsCgroupOf(pid) : "";
    const std::string tail = "/forkbox/" + name;
    if (cgroup.size() < tail.size() ||
        cgroup.compare(cgroup.size() - tail.size(), tail.size(), tail) != 0) {
      continue;
    }
    if (syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0) == 0) {
      killed.push_back(std::move(pidfd));
    }
  }
  for (const UniqueFd& pidfd : killed) {
    pollfd exited{pidfd.get(), POLLIN, 0};
    // Readable once it exited; it leaves the cgroup on its way.
    (void)poll(&exited, 1, MillisecondsUntil(deadline));
  }
  return killed.size();
}

// The lock of the cgroup directory `path` that LookedAfter probes: a shared flock, so that every
// holder of the descriptor (a fork shares it) keeps the cgroup looked after.
Result<UniqueFd> LockShared(const std::string& path) {
  UniqueFd lock(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!lock || flock(lock.get(), LOCK_SH) != 0) return Status::FromErrno(errno, "lock " + path);
  return lock;
}

// True while a process holds the lock of the cgroup directory `name` in `parent`: the session
// cgroup's (JoinSession) or a command's (Create), which every process that looks after the cgroup
// keeps. A probe for the lock itself, not /proc/locks: in a container's PID namespace /proc/locks
// shows a dead taker's lock under pid 0, so it cannot tell whose lock is still held.
bool LookedAfter(int parent, const std::string& name) {
  UniqueFd dir(openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return false;                                      // Gone: nothing left to look after.
  if (flock(dir.get(), LOCK_EX | LOCK_NB) == 0) return false;  // Released with `dir`.
  return errno == EWOULDBLOCK;
}

// Removes the task cgroups of dead processes. A live process's cgroups (this one's included: a
// fresh one is empty until its spawn joins it) are its own to remove, in ~PidsCgroup; one still
// busy then is collected here once its owner is gone. With `kill_leftovers` (EndLeftovers), what
// is left in one that nothing looks after (LookedAfter) is killed first, within two seconds per
// cgroup. Returns one line per cgroup that held processes.
std::vector<std::string> CollectStale(const std::string& parent, bool kill_leftovers) {
  std::vector<std::string> lines;
  // cgroupfs: only root makes entries there, and it holds no links; O_NOFOLLOW all the same.
  UniqueFd dir(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return lines;
  for (const std::string& name : ListDirNames(dir.get())) {
    if (name.rfind("task-", 0) != 0) continue;
    pid_t owner = static_cast<pid_t>(std::strtol(name.c_str() + 5, nullptr, 10));
    if (owner <= 0 || kill(owner, 0) == 0 || errno != ESRCH) continue;
    const std::string path = parent + "/" + name;
    if (rmdir(path.c_str()) == 0 || errno != EBUSY || !kill_leftovers ||
        LookedAfter(dir.get(), name)) {
      continue;
    }
    // A process stuck in an uninterruptible sleep must not hold up the start for long.
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
    size_t killed = 0;
    // A process may fork until its SIGKILL lands: what it made is listed at the next pass.
    for (int pass = 0;
         pass < 16 && MillisecondsUntil(deadline) > 0 && rmdir(path.c_str()) != 0 && errno == EBUSY;
         ++pass) {
      killed += KillListed(path, name, deadline);
    }
    if (killed == 0) continue;
    lines.push_back("killed " + std::to_string(killed) + " process" + (killed == 1 ? "" : "es") +
                    " a killed forkbox left running (" + path +
                    (access(path.c_str(), F_OK) == 0 ? ", still busy)" : ")"));
  }
  return lines;
}

}  // namespace

std::string PidsCgroup::Hierarchy() {
  if (geteuid() != 0) return "";
  if (WritableDir("/sys/fs/cgroup/pids") && access("/sys/fs/cgroup/pids/cgroup.procs", W_OK) == 0) {
    return "/sys/fs/cgroup/pids";
  }
  std::ifstream controllers("/sys/fs/cgroup/cgroup.subtree_control");
  std::string word;
  while (controllers >> word) {
    if (word == "pids" && WritableDir("/sys/fs/cgroup")) return "/sys/fs/cgroup";
  }
  return "";
}

namespace {

// The hierarchy's forkbox/ directory (made if missing), stale task cgroups removed from it: where
// a cgroup of pids.max = max_pids goes.
Result<std::string> ForkboxParent(int64_t max_pids) {
  std::string root = PidsCgroup::Hierarchy();
  if (root.empty()) return Status::Unavailable("no writable pids cgroup hierarchy");
  if (max_pids <= 0) return Status::InvalidArgument("pids.max must be positive");
  std::string parent = root + "/forkbox";
  if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + parent);
  }
  (void)CollectStale(parent, false);  // Removes; killing is EndLeftovers' (at start-up).
  return parent;
}

}  // namespace

std::vector<std::string> PidsCgroup::EndLeftovers() {
  const std::string root = Hierarchy();
  return root.empty() ? std::vector<std::string>{} : CollectStale(root + "/forkbox", true);
}

Result<PidsCgroup> PidsCgroup::Create(int64_t max_pids) {
  Result<std::string> parent = ForkboxParent(max_pids);
  if (!parent.ok()) return parent.status();
  static std::atomic<uint64_t> counter{0};
  PidsCgroup cg;
  cg.path_ = *parent + "/task-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  if (mkdir(cg.path_.c_str(), 0755) != 0) return Status::FromErrno(errno, "mkdir " + cg.path_);
  Status st = WriteString(cg.path_ + "/pids.max", std::to_string(max_pids));
  if (!st.ok()) {
    rmdir(cg.path_.c_str());
    return st;
  }
  int fd = open((cg.path_ + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    rmdir(cg.path_.c_str());
    return Status::FromErrno(err, "open " + cg.path_ + "/cgroup.procs");
  }
  cg.procs_.reset(fd);
  Result<UniqueFd> lock = LockShared(cg.path_);
  if (!lock.ok()) {
    rmdir(cg.path_.c_str());
    return lock.status();
  }
  cg.lock_ = std::move(*lock);
  return cg;
}

PidsCgroup::~PidsCgroup() {
  procs_.reset();
  lock_.reset();
  if (path_.empty()) return;
  rmdir(path_.c_str());  // EBUSY while something survives: CollectStale removes it later.
}

PidsCgroup::PidsCgroup(PidsCgroup&& other) noexcept
    : path_(std::exchange(other.path_, {})),
      procs_(std::move(other.procs_)),
      lock_(std::move(other.lock_)) {}

PidsCgroup& PidsCgroup::operator=(PidsCgroup&& other) noexcept {
  if (this != &other) {
    PidsCgroup old(std::move(*this));
    path_ = std::exchange(other.path_, {});
    procs_ = std::move(other.procs_);
    lock_ = std::move(other.lock_);
  }
  return *this;
}

Result<UniqueFd> PidsCgroup::JoinSession(int64_t max_pids) {
  if (InForkboxCgroup()) return UniqueFd();
  Result<std::string> parent = ForkboxParent(max_pids);
  if (!parent.ok()) return parent.status();
  std::string path = *parent + "/task-" + std::to_string(getpid()) + "-session";
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + path);
  }
  FORKBOX_RETURN_IF_ERROR(WriteString(path + "/pids.max", std::to_string(max_pids)));
  Result<UniqueFd> lock = LockShared(path);
  if (!lock.ok()) return lock.status();
  FORKBOX_RETURN_IF_ERROR(WriteString(path + "/cgroup.procs", "0"));
  return lock;
}

bool PidsCgroup::InForkboxCgroup() {
  return PidsCgroupOf("self").find("/forkbox/task-") != std::string::npos;
}

Result<UniqueFd> JoinSessionProcessLimit(const Policy& policy, int64_t concurrent_tasks) {
  if (!policy.enabled || PidsCgroup::Hierarchy().empty()) return UniqueFd();
  // Every task and tool then gets a PID namespace capped by its pid_max: no cgroup is needed.
  if (RootPidNamespaceMax(Layer2Available(), policy.rlimit_nproc) > 0) return UniqueFd();
  const int64_t tasks = concurrent_tasks < 1 ? 1 : concurrent_tasks;
  Result<UniqueFd> lock = PidsCgroup::JoinSession(policy.rlimit_nproc * (tasks + 1));
  if (!lock.ok()) return lock.status().WithContext("fork-bomb limit for uid 0");
  return lock;
}

int JoinCgroupRaw(int procs_fd) {
  if (write(procs_fd, "0", 1) != 1) return errno;
  return 0;
}

int64_t PidNamespaceMaxFor(int64_t max_pids) {
  constexpr int64_t kMinPidMax = 301;  // RESERVED_PIDS + 1, the kernel's floor for pid_max.
  if (max_pids <= 0 || max_pids + 1 < kMinPidMax) return 0;
  utsname u{};
  int major = 0, minor = 0;
  if (uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return 0;
  if (major < 6 || (major == 6 && minor < 14)) return 0;
  return max_pids + 1;
}

int64_t RootPidNamespaceMax(bool layer2, int64_t max_pids) {
  return layer2 && geteuid() == 0 ? PidNamespaceMaxFor(max_pids) : 0;
}

int LimitPidNamespaceRaw(int64_t pid_max, const char** step) {
  *step = "open /proc/sys/kernel/pid_max of the command's PID namespace";
  int fd = open("/proc/sys/kernel/pid_max", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char digits[24];
  char* end = digits + sizeof(digits);
  char* p = end;
  for (uint64_t v = static_cast<uint64_t>(pid_max); p == end || v != 0; v /= 10) {
    *--p = static_cast<char>('0' + v % 10);
  }
  *step = "write /proc/sys/kernel/pid_max of the command's PID namespace";
  ssize_t n = write(fd, p, static_cast<size_t>(end - p));
  int err = n == end - p ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return err;
}

}  // namespace forkbox::sandbox
