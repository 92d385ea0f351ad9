#include "parent/signals.h"

#include <pthread.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace forkbox::parent {
namespace {

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_exit_mode = 0;

void OnInterrupt(int signo) {
  if (g_exit_mode) {
    static const char kMsg[] = "\nforkbox: interrupted\n";
    ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    _exit(128 + signo);
  }
  g_signal = signo;
}

}  // namespace

Status HardenProcess() {
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return Status::FromErrno(errno, "prctl(PR_SET_DUMPABLE, 0)");
  }
  struct sigaction sa = {};
  sa.sa_handler = SIG_IGN;
  if (sigaction(SIGPIPE, &sa, nullptr) != 0) return Status::FromErrno(errno, "sigaction(SIGPIPE)");
  return Status::Ok();
}

Status InstallInterruptHandler(InterruptMode mode) {
  SetInterruptMode(mode);
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // No SA_RESTART: a read() at the interactive prompt returns EINTR.
  for (int sig : {SIGINT, SIGTERM}) {
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

Result<BlockedSignals> BlockedSignals::Create() {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
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
