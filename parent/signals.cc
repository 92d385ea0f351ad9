#include "parent/signals.h"

#include <pthread.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sandbox/sandbox.h"

namespace forkbox::parent {
namespace {

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_exit_mode = 0;
int g_stdout_errno = 0;

// Async-signal-safe: one write to stderr, its result ignored (nothing to do if it fails).
void WriteRaw(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

void OnInterrupt(int signo) {
  if (g_exit_mode) {
    WriteRaw("\nforkbox: interrupted\n");
    (void)KillAndReapAllChildren();
    _exit(128 + signo);
  }
  g_signal = signo;
}

}  // namespace

bool KillAndReapAllChildren() {
  if (sandbox::KillAllDescendants() >= 0) return true;
  const char* why = sandbox::KillFailureText(errno);
  WriteRaw("forkbox: processes the tools started may still run: ");
  WriteRaw(why);
  WriteRaw("\n");
  return false;
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
  // sandbox::KillAllDescendants can end them with the session.
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
