#include "base/process.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace forkbox {
namespace {

// What the forked child was doing when it failed; sent over the error pipe with errno.
enum class Stage : int32_t { kSetsid = 1, kDupFd, kDup2, kCloseRange, kChdir, kStep, kExec };

struct Report {
  int32_t stage;
  int32_t err;       // errno.
  uint32_t msg_len;  // Bytes of the failing step's name that follow.
};
constexpr size_t kMaxReportMessage = 512;
static_assert(sizeof(Report) + kMaxReportMessage <= PIPE_BUF, "one report is one atomic write");

// --- Async-signal-safe helpers for the forked child. No allocation, no locks. ---

void WriteFully(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // Nothing to do about it: the parent then sees a short report.
    p += n;
    len -= static_cast<size_t>(n);
  }
}

[[noreturn]] void Fail(int err_fd, Stage stage, int err, const char* msg = nullptr) {
  size_t msg_len = msg == nullptr ? 0 : ::strnlen(msg, kMaxReportMessage);
  Report r{static_cast<int32_t>(stage), err, static_cast<uint32_t>(msg_len)};
  WriteFully(err_fd, &r, sizeof r);
  if (msg_len > 0) WriteFully(err_fd, msg, msg_len);
  _exit(127);
}

int CloseRange(unsigned lo, unsigned hi) {
  if (lo > hi) return 0;
  if (::close_range(lo, hi, 0) == 0) return 0;
  if (errno != ENOSYS) return -1;
  // Kernels before 5.9: close one by one up to the descriptor limit.
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  uint64_t end = std::min<uint64_t>(hi, rl.rlim_cur == RLIM_INFINITY ? 1 << 20 : rl.rlim_cur);
  for (uint64_t fd = lo; fd <= end; ++fd) ::close(static_cast<int>(fd));
  return 0;
}

// Marks every fd from `lo` up close-on-exec.
int CloexecFrom(unsigned lo) {
  if (::close_range(lo, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return 0;
  if (errno != ENOSYS && errno != EINVAL) return -1;
  // Kernels before 5.11: one by one up to the descriptor limit.
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  uint64_t end = rl.rlim_cur == RLIM_INFINITY ? 1 << 20 : rl.rlim_cur;
  for (uint64_t fd = lo; fd < end; ++fd) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return 0;
}

struct ChildPlan {
  char* const* argv;
  char* const* envp;
  const char* cwd;  // nullptr: inherit.
  const std::vector<std::pair<int, int>>* fds;
  int* temps;              // One slot per mapping, preallocated.
  const int* keep_sorted;  // Target fds, sorted ascending.
  size_t keep_count;
  int above;  // Higher than every source and target fd.
  bool new_session;
  const std::vector<int*>* carry;
  const std::vector<SpawnStep>* steps;
  // The signals to reset to their default (bit sig-1). Read by the caller before the clone when
  // the child borrows our memory: it then makes no call that can fail on its way to execve, so it
  // never writes errno, which it shares with the calling thread (the same thread-local storage).
  // nullopt: the child, on a copy of our memory, reads them itself, alongside the caller.
  std::optional<uint64_t> reset_signals;
};

// Parses the hex mask after `key` (e.g. "SigCgt:\t") in a /proc status text. False if absent.
bool StatusMask(const char* text, const char* key, uint64_t* mask) {
  const char* p = ::strstr(text, key);
  if (p == nullptr) return false;
  p += ::strlen(key);
  uint64_t m = 0;
  int digits = 0;
  for (; *p != '\n' && *p != '\0'; ++p, ++digits) {
    const char c = *p;
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0 || digits == 16) return false;
    m = (m << 4) | static_cast<uint64_t>(v);
  }
  *mask = m;
  return digits > 0;
}

// The signals this process ignores or catches (bit sig-1), from its /proc/self/status: one read
// instead of a sigaction per signal. All ones where /proc cannot tell, or is not procfs (a file
// planted there must not spare a handler its reset; a FIFO must not block).
uint64_t NonDefaultSignals() {
  constexpr uint64_t kAll = ~uint64_t{0};
  char text[8192];
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return kAll;
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC) {
    ::close(fd);
    return kAll;
  }
  size_t len = 0;
  for (ssize_t n; len < sizeof(text) - 1; len += static_cast<size_t>(n)) {
    n = ::read(fd, text + len, sizeof(text) - 1 - len);
    if (n < 0 && errno == EINTR) n = 0;
    if (n <= 0) break;
  }
  ::close(fd);
  text[len] = '\0';
  uint64_t ignored = 0, caught = 0;
  if (!StatusMask(text, "\nSigIgn:\t", &ignored) || !StatusMask(text, "\nSigCgt:\t", &caught)) {
    return kAll;
  }
  return ignored | caught;
}

[[noreturn]] void RunStepsAndExec(const ChildPlan& plan, int err_fd, size_t first);

// The command below a keeper step: the steps after it, then the exec.
struct CommandTail {
  const ChildPlan* plan;
  int err_fd;
  size_t first;
};

int RunCommandTail(void* arg) {
  const auto* tail = static_cast<const CommandTail*>(arg);
  RunStepsAndExec(*tail->plan, tail->err_fd, tail->first);
}

// Steps `first`.. in order, then chdir and execve. After a keeper step (SpawnStep::keep) this
// process stays behind: the rest runs in a child that borrows its memory until execve
// (CloneProcess, share_memory: no page table of this process is copied). Signals are still
// blocked here, as CloneProcess requires.
[[noreturn]] void RunStepsAndExec(const ChildPlan& plan, int err_fd, size_t first) {
  for (size_t i = first; i < plan.steps->size(); ++i) {
    const SpawnStep& step = (*plan.steps)[i];
    const char* what = step.name;
    if (int err = step.run(&what)) Fail(err_fd, Stage::kStep, err, what);
    if (!step.keep) continue;
    CommandTail tail{&plan, err_fd, i + 1};
    int pidfd = -1;
    long pid = CloneProcess(RunCommandTail, &tail, 0, /*share_memory=*/true, &pidfd);
    if (pid < 0) Fail(err_fd, Stage::kStep, errno, "clone (the command under its keeper)");
    ::close(pidfd);
    step.keep(static_cast<pid_t>(pid));
    ::_exit(127);  // keep never returns.
  }
  if (plan.cwd != nullptr && ::chdir(plan.cwd) != 0) Fail(err_fd, Stage::kChdir, errno);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(plan.argv[0], plan.argv, plan.envp);
  Fail(err_fd, Stage::kExec, errno);
}

// Whether sigaction may change `sig`: not SIGKILL or SIGSTOP, nor the signals glibc keeps for
// itself below SIGRTMIN (it refuses them with EINVAL).
bool ResettableSignal(int sig) {
  return sig != SIGKILL && sig != SIGSTOP && (sig < 32 || sig >= SIGRTMIN);
}

[[noreturn]] void RunChild(const ChildPlan& plan, int err_fd) {
  // Default dispositions: a handler must not run in this half-copied process, and an ignored
  // SIGPIPE (or any SIG_IGN) of the parent must not leak into the program we exec. Signals stay
  // blocked until then.
  struct sigaction dfl;
  ::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  const uint64_t reset = plan.reset_signals ? *plan.reset_signals : NonDefaultSignals();
  for (int sig = 1; sig < NSIG && sig <= 64; ++sig) {
    if (ResettableSignal(sig) && (reset >> (sig - 1) & 1) != 0) {
      ::sigaction(sig, &dfl, nullptr);
    }
  }
  if (plan.new_session && ::setsid() < 0) Fail(err_fd, Stage::kSetsid, errno);

  // Park the error pipe and every source above all targets first, so the dup2s below cannot
  // clobber a source that is also some other mapping's target (e.g. {3->4, 4->3}).
  int moved_err = ::fcntl(err_fd, F_DUPFD_CLOEXEC, plan.above);
  if (moved_err < 0) Fail(err_fd, Stage::kDupFd, errno);
  err_fd = moved_err;
  const auto& fds = *plan.fds;
  for (size_t i = 0; i < fds.size(); ++i) {
    plan.temps[i] = ::fcntl(fds[i].first, F_DUPFD_CLOEXEC, plan.above);
    if (plan.temps[i] < 0) Fail(err_fd, Stage::kDupFd, errno);
  }
  for (int* fd : *plan.carry) {
    *fd = ::fcntl(*fd, F_DUPFD_CLOEXEC, plan.above);
    if (*fd < 0) Fail(err_fd, Stage::kDupFd, errno);
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    // dup2 clears FD_CLOEXEC on the target, so exactly the targets survive exec.
    while (::dup2(plan.temps[i], fds[i].second) < 0) {
      if (errno != EINTR) Fail(err_fd, Stage::kDup2, errno);
    }
  }
  // Close everything above 2 except the targets, and mark everything above them close-on-exec:
  // the error pipe and the carried fds stay for the steps, the parked copies go at exec.
  unsigned lo = 3;
  for (size_t i = 0; i < plan.keep_count; ++i) {
    unsigned keep = static_cast<unsigned>(plan.keep_sorted[i]);
    if (keep < lo) continue;
    if (keep > lo && CloseRange(lo, keep - 1) != 0) Fail(err_fd, Stage::kCloseRange, errno);
    lo = keep + 1;
  }
  if (CloseRange(lo, static_cast<unsigned>(plan.above) - 1) != 0) {
    Fail(err_fd, Stage::kCloseRange, errno);
  }
  if (CloexecFrom(static_cast<unsigned>(plan.above)) != 0) Fail(err_fd, Stage::kCloseRange, errno);
  RunStepsAndExec(plan, err_fd, 0);
}

struct SharedChild {
  const ChildPlan* plan;
  int err_fd;
};

int RunSharedChild(void* arg) {
  const auto* c = static_cast<const SharedChild*>(arg);
  RunChild(*c->plan, c->err_fd);
}

// A stack for a child that borrows our memory: a guard page below kStack bytes. 0 or errno.
constexpr size_t kGuard = 4096, kStack = 256 * 1024;

int MapCloneStack(void** map) {
  void* m = ::mmap(nullptr, kGuard + kStack, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (m == MAP_FAILED) return errno;
  if (::mprotect(m, kGuard, PROT_NONE) != 0) {  // An overflow faults instead of corrupting.
    const int err = errno;
    ::munmap(m, kGuard + kStack);
    return err;
  }
  *map = m;
  return 0;
}

// The process's kept stack, lent to one clone at a time, and whether it is lent. Kept: a munmap
// after a child ran on our memory from another CPU waits for a TLB-shootdown IPI (0.07-0.5 ms per
// clone on a VM, README "the fifteenth round"), and a fresh stack faults its pages in again. A
// flag, not a mutex: a concurrent clone, or a process forked while the flag was set (it inherits
// it set), maps a stack of its own instead, and nothing can deadlock.
std::atomic<void*> kept_stack{nullptr};
std::atomic<bool> kept_stack_lent{false};

// The stack of one child that borrows our memory: the kept one when it is free, else one mapped
// for this child. Given back (or unmapped) on destruction, so destroy it only once the child has
// exec'ed or exited.
class CloneStack {
 public:
  CloneStack() = default;
  CloneStack(const CloneStack&) = delete;
  CloneStack& operator=(const CloneStack&) = delete;
  ~CloneStack() { Release(); }

  int Take() {  // 0 or errno.
    borrowed_ = !kept_stack_lent.exchange(true, std::memory_order_acquire);
    map_ = borrowed_ ? kept_stack.load(std::memory_order_relaxed) : nullptr;
    if (map_ != nullptr) return 0;
    if (int err = MapCloneStack(&map_)) {
      Release();
      return err;
    }
    return 0;
  }
  char* top() const { return static_cast<char*>(map_) + kGuard + kStack; }
  void Release() {
    if (borrowed_) {
      if (map_ != nullptr) kept_stack.store(map_, std::memory_order_relaxed);
      kept_stack_lent.store(false, std::memory_order_release);
    } else if (map_ != nullptr) {
      ::munmap(map_, kGuard + kStack);
    }
    map_ = nullptr;
    borrowed_ = false;
  }

 private:
  void* map_ = nullptr;
  bool borrowed_ = false;
};

// The borrowed-stack half of CloneProcess. `stack` null: CLONE_VFORK, and the stack is free again
// on return. Otherwise the child runs alongside the caller, and *stack keeps its stack until the
// caller has seen it exec or exit.
long CloneSharingMemory(int (*fn)(void*), void* arg, unsigned long flags, int* pidfd,
                        CloneStack* stack) {
  CloneStack own;
  CloneStack& use = stack != nullptr ? *stack : own;
  if (int err = use.Take()) {
    errno = err;
    return -1;
  }
  const unsigned long vfork = stack != nullptr ? 0 : CLONE_VFORK;
  const long pid =
      ::clone(fn, use.top(), CLONE_VM | vfork | CLONE_PIDFD | SIGCHLD | flags, arg, pidfd);
  const int err = errno;
  if (pid < 0 || stack == nullptr) use.Release();  // Failed, or exec'ed or exited (vfork).
  errno = err;
  return pid;
}

Status CheckNoNul(const std::string& s, const std::string& what) {
  if (s.find('\0') != std::string::npos) {
    return Status::InvalidArgument("spawn: " + what + " contains a NUL byte");
  }
  return Status::Ok();
}

Status ValidateOptions(const SpawnOptions& o) {
  if (o.argv.empty() || o.argv[0].empty()) {
    return Status::InvalidArgument("spawn: argv[0] (the program path) is empty");
  }
  for (size_t i = 0; i < o.argv.size(); ++i) {
    FORKBOX_RETURN_IF_ERROR(CheckNoNul(o.argv[i], "argv[" + std::to_string(i) + "]"));
  }
  for (const auto& e : o.env) {
    FORKBOX_RETURN_IF_ERROR(CheckNoNul(e, "an env entry"));
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("spawn: env entry \"" + e + "\" is not NAME=value");
    }
  }
  FORKBOX_RETURN_IF_ERROR(CheckNoNul(o.cwd, "cwd"));
  std::vector<int> targets;
  for (const auto& [source, target] : o.fds) {
    if (target < 0) {
      return Status::InvalidArgument("spawn: target fd " + std::to_string(target) + " is negative");
    }
    if (source < 0 || ::fcntl(source, F_GETFD) < 0) {
      return Status::FromErrno(EBADF, "spawn: source fd " + std::to_string(source) +
                                          " for target " + std::to_string(target));
    }
    targets.push_back(target);
  }
  for (const int* fd : o.carry_fds) {
    if (fd == nullptr || *fd < 0 || ::fcntl(*fd, F_GETFD) < 0) {
      return Status::FromErrno(EBADF, "spawn: a carried fd");
    }
  }
  std::sort(targets.begin(), targets.end());
  auto dup = std::adjacent_find(targets.begin(), targets.end());
  if (dup != targets.end()) {
    return Status::InvalidArgument("spawn: target fd " + std::to_string(*dup) + " is mapped twice");
  }
  return Status::Ok();
}

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kSetsid:
      return "setsid";
    case Stage::kDupFd:
      return "fcntl(F_DUPFD_CLOEXEC)";
    case Stage::kDup2:
      return "dup2";
    case Stage::kCloseRange:
      return "close_range";
    case Stage::kChdir:
      return "chdir";
    case Stage::kStep:
      return "step";
    case Stage::kExec:
      return "execve";
  }
  return "unknown step";
}

// Reads the child's report until EOF (exec closed the pipe) and turns it into a Status.
// `settled`: the pipe is non-blocking and the child has exec'ed or exited already (a CLONE_VFORK
// caller resumes only then, and a failing child wrote its whole report before _exit), so an empty
// pipe means exec succeeded: no waiting for exec to get round to closing the pipe.
Status ReadReport(int fd, const SpawnOptions& o, bool settled) {
  std::string data;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && settled) break;
    if (n < 0) return Status::FromErrno(errno, "spawn: read(error pipe)");
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > sizeof(Report) + kMaxReportMessage) break;
  }
  if (data.empty()) return Status::Ok();
  if (data.size() < sizeof(Report)) {
    return Status::Internal("spawn " + o.argv[0] + ": the child died before exec (short report)");
  }
  Report r;
  ::memcpy(&r, data.data(), sizeof r);
  auto stage = static_cast<Stage>(r.stage);
  std::string what = StageName(stage);
  if (stage == Stage::kStep) {
    what = data.substr(sizeof r, std::min<size_t>(r.msg_len, data.size() - sizeof r));
  }
  if (stage == Stage::kExec) what += "(" + o.argv[0] + ")";
  if (stage == Stage::kChdir) what += "(" + o.cwd + ")";
  if (stage != Stage::kExec) what = "spawn " + o.argv[0] + ": " + what;
  return Status::FromErrno(r.err, what);
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

bool HasKeeper(const SpawnOptions& options) {
  return std::any_of(options.steps.begin(), options.steps.end(),
                     [](const SpawnStep& step) { return bool(step.keep); });
}

// What a spawned child reads from the caller's memory until its execve, built before the clone
// (the child may not allocate) from `options`, which must outlive it.
struct Launch {
  explicit Launch(const SpawnOptions& options);
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<int> temps;  // One slot per mapping.
  std::vector<int> keep;   // The targets, sorted.
  ChildPlan plan;
  SharedChild shared;
};

Launch::Launch(const SpawnOptions& options)
    : argv(CStrings(options.argv)), envp(CStrings(options.env)), temps(options.fds.size(), -1) {
  int above = 3;
  for (const auto& [source, target] : options.fds) {
    keep.push_back(target);
    above = std::max({above, source + 1, target + 1});
  }
  std::sort(keep.begin(), keep.end());
  plan = ChildPlan{
      argv.data(),        envp.data(),    options.cwd.empty() ? nullptr : options.cwd.c_str(),
      &options.fds,       temps.data(),   keep.data(),
      keep.size(),        above,          options.new_session,
      &options.carry_fds, &options.steps, std::nullopt};
  shared = SharedChild{&plan, -1};
}

// Clones the child that runs `launch` and reports on `err_fd`. All signals stay blocked across
// the clone until the child has reset its dispositions. `stack` null: as CloneProcess; else the
// child borrows our memory without CLONE_VFORK and *stack keeps its stack.
Result<ChildProcess> CloneLaunch(const SpawnOptions& options, Launch& launch, int err_fd,
                                 bool share_memory, CloneStack* stack) {
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  // One decision for both: how the child is cloned, and who reads the signals it resets.
  const bool shares = stack != nullptr || (share_memory && kCloneCanShareMemory);
  launch.plan.reset_signals = shares ? std::optional<uint64_t>(NonDefaultSignals()) : std::nullopt;
  launch.shared.err_fd = err_fd;
  int pidfd = -1;
  const long pid = shares ? CloneSharingMemory(RunSharedChild, &launch.shared, options.clone_flags,
                                               &pidfd, stack)
                          : CloneProcess(RunSharedChild, &launch.shared, options.clone_flags,
                                         /*share_memory=*/false, &pidfd);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return Status::FromErrno(clone_errno, "clone");
  return ChildProcess(static_cast<pid_t>(pid), UniqueFd(pidfd), options.new_session);
}

}  // namespace

ChildProcess::ChildProcess(pid_t pid, UniqueFd pidfd, bool own_group)
    : pid_(pid), pidfd_(std::move(pidfd)), own_group_(own_group) {}

ChildProcess::~ChildProcess() { KillAndReap(); }

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pidfd_(std::move(other.pidfd_)),
      own_group_(other.own_group_),
      reaped_(other.reaped_),
      status_(other.status_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::move(other.pidfd_);
    own_group_ = other.own_group_;
    reaped_ = other.reaped_;
    status_ = other.status_;
  }
  return *this;
}

UniqueFd ChildProcess::Release() {
  pid_ = -1;
  reaped_ = false;
  return std::move(pidfd_);
}

void ChildProcess::KillAndReap() {
  if (!running()) return;
  (void)Signal(SIGKILL);
  // A group leader that already exited cannot be signalled through the group if it never
  // got to setsid; make sure the leader itself is hit too.
  if (own_group_ && pidfd_)
    (void)::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  (void)Reap(/*block=*/true);
}

Result<std::optional<int>> ChildProcess::Reap(bool block) {
  if (pid_ <= 0) return Status::InvalidArgument("no process to wait for");
  if (reaped_) return std::optional<int>(status_);
  // Peek without reaping: the zombie keeps the process group id reserved while we kill what is
  // left of the group, so the signal cannot reach a recycled group.
  siginfo_t info;
  ::memset(&info, 0, sizeof info);
  int flags = WEXITED | WNOWAIT | (block ? 0 : WNOHANG);
  while (::waitid(P_PID, static_cast<id_t>(pid_), &info, flags) != 0) {
    if (errno != EINTR) return Status::FromErrno(errno, "waitid(" + std::to_string(pid_) + ")");
  }
  if (info.si_pid == 0) return std::optional<int>();
  if (own_group_) (void)::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) return Status::FromErrno(errno, "waitpid(" + std::to_string(pid_) + ")");
  }
  reaped_ = true;
  status_ = status;
  return std::optional<int>(status);
}

Result<std::optional<int>> ChildProcess::TryWait() { return Reap(/*block=*/false); }

Result<int> ChildProcess::Wait() {
  Result<std::optional<int>> r = Reap(/*block=*/true);
  if (!r.ok()) return r.status();
  return **r;
}

Status ChildProcess::Signal(int sig) {
  if (pid_ <= 0) return Status::InvalidArgument("no process to signal");
  if (reaped_) {
    return Status::InvalidArgument("process " + std::to_string(pid_) + " was already reaped");
  }
  if (own_group_) {
    if (::kill(-pid_, sig) != 0) {
      return Status::FromErrno(errno, "kill(-" + std::to_string(pid_) + ")");
    }
    return Status::Ok();
  }
  if (pidfd_) {
    if (::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) != 0) {
      return Status::FromErrno(errno, "pidfd_send_signal(" + std::to_string(pid_) + ")");
    }
    return Status::Ok();
  }
  if (::kill(pid_, sig) != 0) return Status::FromErrno(errno, "kill(" + std::to_string(pid_) + ")");
  return Status::Ok();
}

long CloneProcess(int (*fn)(void*), void* arg, unsigned long flags, bool share_memory, int* pidfd) {
  if (share_memory && kCloneCanShareMemory) {
    return CloneSharingMemory(fn, arg, flags, pidfd, nullptr);
  }
  // Raw clone: glibc's fork() takes no namespace flags, and a child that makes only
  // async-signal-safe calls needs no atfork handlers.
  long pid = ::syscall(SYS_clone, flags | CLONE_PIDFD | SIGCHLD, nullptr, pidfd, nullptr, nullptr);
  if (pid == 0) ::_exit(fn(arg));
  return pid;
}

Result<ChildProcess> Spawn(const SpawnOptions& options) {
  FORKBOX_RETURN_IF_ERROR(ValidateOptions(options));
  Launch launch(options);
  // CLONE_PARENT changes only whose child it is, not what the child does with the memory.
  const bool share_memory = kCloneCanShareMemory && (options.clone_flags & ~CLONE_PARENT) == 0 &&
                            !HasKeeper(options) && !options.while_starting;
  // The report (at most sizeof(Report) + kMaxReportMessage < PIPE_BUF) fits an empty pipe whole.
  Result<Pipe> err_pipe = MakePipe(share_memory ? O_NONBLOCK : 0);
  if (!err_pipe.ok()) return err_pipe.status().WithContext("spawn");
  Result<ChildProcess> child =
      CloneLaunch(options, launch, err_pipe->write.get(), share_memory, nullptr);
  if (!child.ok()) return child.status();
  err_pipe->write.reset();
  if (options.while_starting) FORKBOX_RETURN_IF_ERROR(options.while_starting(child->pid()));
  Status report = ReadReport(err_pipe->read.get(), options, /*settled=*/share_memory);
  if (!report.ok()) return report;  // The child has _exit(127)ed; its destructor reaps it.
  return child;
}

// Members in this order: the child is killed and reaped (if Finish did not take it) before its
// stack is given back and what it read is freed.
struct PendingChild::State {
  explicit State(SpawnOptions o) : options(std::move(o)), launch(options) {}
  SpawnOptions options;
  Launch launch;
  CloneStack stack;
  UniqueFd report;  // The child's error pipe: EOF once it has exec'ed or exited.
  ChildProcess child;
};

PendingChild::PendingChild(std::unique_ptr<State> state) : state_(std::move(state)) {}
PendingChild::PendingChild(PendingChild&&) noexcept = default;
PendingChild& PendingChild::operator=(PendingChild&&) noexcept = default;
PendingChild::~PendingChild() = default;

Result<PendingChild> StartSpawn(SpawnOptions options) {
  FORKBOX_RETURN_IF_ERROR(ValidateOptions(options));
  if (!options.carry_fds.empty() || HasKeeper(options) || options.while_starting ||
      options.clone_flags != 0) {
    return Status::InvalidArgument(
        "StartSpawn: carry_fds, keeper steps, while_starting and clone flags need Spawn");
  }
  auto state = std::make_unique<PendingChild::State>(std::move(options));
  Result<Pipe> err_pipe = MakePipe();
  if (!err_pipe.ok()) return err_pipe.status().WithContext("spawn");
  Result<ChildProcess> child =
      CloneLaunch(state->options, state->launch, err_pipe->write.get(), kCloneCanShareMemory,
                  kCloneCanShareMemory ? &state->stack : nullptr);
  if (!child.ok()) return child.status();
  err_pipe->write.reset();
  state->report = std::move(err_pipe->read);
  state->child = std::move(*child);
  return PendingChild(std::move(state));
}

Result<ChildProcess> PendingChild::Finish() {
  if (!state_) return Status::InvalidArgument("PendingChild::Finish: nothing pending");
  std::unique_ptr<State> state = std::move(state_);
  // Until EOF: the child no longer runs on our memory only once it has exec'ed or exited.
  Status report = ReadReport(state->report.get(), state->options, /*settled=*/false);
  if (!report.ok()) return report;  // `state` kills and reaps the child, then frees its stack.
  return std::move(state->child);
}

int ExitCodeFromWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  if (WIFSTOPPED(wait_status)) return 128 + WSTOPSIG(wait_status);
  return 255;
}

void DieOfSignalRaw(int sig) {
  const rlimit no_core{0, 0};
  (void)setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  (void)sigaction(sig, &dfl, nullptr);  // Fails only for SIGKILL and SIGSTOP: nothing to reset.
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  (void)pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  (void)raise(sig);
  _exit(128 + sig);
}

void StopAsDefaultRaw(int sig) {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  (void)sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  (void)kill(getpid(), sig);
  (void)pthread_sigmask(SIG_UNBLOCK, &one, nullptr);  // Delivered here.
  (void)pthread_sigmask(SIG_BLOCK, &one, nullptr);
}

bool SignalIgnored(int sig) {
  struct sigaction now = {};
  return sigaction(sig, nullptr, &now) == 0 && (now.sa_flags & SA_SIGINFO) == 0 &&
         now.sa_handler == SIG_IGN;
}

void EndAsRaw(int wait_status) {
  if (WIFEXITED(wait_status)) _exit(WEXITSTATUS(wait_status));
  DieOfSignalRaw(WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : SIGKILL);
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char* name = ::sigdescr_np(sig);
    std::string s = "killed by signal " + std::to_string(sig) + " (" +
                    (name != nullptr ? name : "unknown signal") + ")";
    if (WCOREDUMP(wait_status)) s += ", core dumped";
    return s;
  }
  if (WIFSTOPPED(wait_status)) {
    return "stopped by signal " + std::to_string(WSTOPSIG(wait_status));
  }
  return "unknown wait status " + std::to_string(wait_status);
}

}  // namespace forkbox
