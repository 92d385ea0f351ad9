#include "parent/signals.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

namespace forkbox::parent {
namespace {

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_exit_mode = 0;
int g_stdout_errno = 0;

void OnInterrupt(int signo) {
  if (g_exit_mode) {
    static const char kMsg[] = "\nforkbox: interrupted\n";
    ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    KillAndReapAllChildren();
    _exit(128 + signo);
  }
  g_signal = signo;
}

struct LinuxDirent64 {
  ino64_t d_ino;
  off64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];  // Really d_reclen - 19 bytes, NUL-terminated (no flexible arrays in ISO C++).
};

// Parses a decimal number; -1 when `s` is not one.
long ParsePid(const char* s, const char* end) {
  if (s == end) return -1;
  long v = 0;
  for (; s < end; ++s) {
    if (*s < '0' || *s > '9' || v > 10'000'000) return -1;
    v = v * 10 + (*s - '0');
  }
  return v;
}

// SIGKILLs the children listed in /proc/self/task/<tid>/children. Async-signal-safe.
int KillChildrenOfTask(const char* tid) {
  char path[64] = "/proc/self/task/";
  size_t n = sizeof("/proc/self/task/") - 1;
  for (const char* p = tid; *p != '\0' && n < sizeof(path) - 16; ++p) path[n++] = *p;
  for (const char* p = "/children"; *p != '\0'; ++p) path[n++] = *p;
  path[n] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  ssize_t len = read(fd, buf, sizeof(buf));
  close(fd);
  int killed = 0;
  const char* start = buf;
  for (ssize_t i = 0; i < len; ++i) {
    if (buf[i] != ' ' && buf[i] != '\n') continue;
    long pid = ParsePid(start, buf + i);
    if (pid > 0 && kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++killed;
    start = buf + i + 1;
  }
  return killed;
}

// One round over every thread's children (a subreaper's orphans may land on any thread).
int KillChildrenOnce() {
  int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  int killed = 0;
  alignas(8) char buf[4096];
  long n;
  while ((n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
      if (d->d_name[0] != '.') killed += KillChildrenOfTask(d->d_name);
      off += d->d_reclen;
    }
  }
  close(dir);
  return killed;
}

}  // namespace

void KillAndReapAllChildren() {
  while (true) {
    KillChildrenOnce();
    // Each death may re-parent the dead one's children to us: the next round kills them.
    pid_t pid = waitpid(-1, nullptr, 0);
    if (pid < 0 && errno == ECHILD) return;
    if (pid < 0 && errno != EINTR) return;
  }
}

const char* SignalName(int signo) {
  switch (signo) {
    case SIGINT:
      return "Ctrl-C";
    case SIGHUP:
      return "SIGHUP";
    case SIGTERM:
      return "SIGTERM";
    case SIGPIPE:
      return "a failed write to stdout";
  }
  return "a signal";
}

Status HardenProcess() {
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return Status::FromErrno(errno, "prctl(PR_SET_DUMPABLE, 0)");
  }
  // Orphans of our tools (a `setsid -f` daemon) come to us, not to init, so that
  // KillAndReapAllChildren can end them with the session.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return Status::FromErrno(errno, "prctl(PR_SET_CHILD_SUBREAPER)");
  }
  // A write past the reader's end (SIGPIPE) or past `ulimit -f` (SIGXFSZ) fails with EPIPE or
  // EFBIG, which the writer reports, instead of killing forkbox before it restores the git
  // surface and kills its children. Every spawn resets them for the program it runs.
  struct sigaction sa = {};
  sa.sa_handler = SIG_IGN;
  for (int sig : {SIGPIPE, SIGXFSZ}) {
    if (sigaction(sig, &sa, nullptr) != 0) return Status::FromErrno(errno, "sigaction");
  }
  return Status::Ok();
}

Status InstallInterruptHandler(InterruptMode mode) {
  SetInterruptMode(mode);
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // No SA_RESTART: a read() at the interactive prompt returns EINTR.
  for (int sig : kInterruptSignals) {
    if (sigaction(sig, &sa, nullptr) != 0) return Status::FromErrno(errno, "sigaction");
  }
  return Status::Ok();
}

void SetInterruptMode(InterruptMode mode) { g_exit_mode = mode == InterruptMode::kExit ? 1 : 0; }

int TakeInterrupt() {
  int s = g_signal;
  g_signal = 0;
  return s;
}

void RecordInterrupt(int signo) { g_signal = signo; }

bool InterruptPending() { return g_signal != 0; }

void RecordStdoutFailure(int err) {
  if (g_stdout_errno == 0) g_stdout_errno = err;
  if (g_signal == 0) g_signal = SIGPIPE;
}

int StdoutFailure() { return g_stdout_errno; }

Result<BlockedSignals> BlockedSignals::Create() {
  sigset_t set, old;
  sigemptyset(&set);
  for (int sig : kInterruptSignals) sigaddset(&set, sig);
  if (int err = pthread_sigmask(SIG_BLOCK, &set, &old); err != 0) {
    return Status::FromErrno(err, "pthread_sigmask(SIG_BLOCK)");
  }
  int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    Status st = Status::FromErrno(errno, "signalfd");
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return st;
  }
  return BlockedSignals(UniqueFd(fd), old);
}

BlockedSignals::BlockedSignals(BlockedSignals&& other) noexcept
    : fd_(std::move(other.fd_)), old_mask_(other.old_mask_), active_(other.active_) {
  other.active_ = false;
}

BlockedSignals::~BlockedSignals() {
  if (!active_) return;
  // Signals that arrived but were not read stay pending and reach the handler on unblock.
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

int BlockedSignals::Read() {
  struct signalfd_siginfo info;
  ssize_t n = read(fd_.get(), &info, sizeof(info));
  if (n != static_cast<ssize_t>(sizeof(info))) return 0;
  return static_cast<int>(info.ssi_signo);
}

}  // namespace forkbox::parent
