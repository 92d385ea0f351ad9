#include "parent/signals.h"

#include <pthread.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/process.h"
#include "sandbox/sandbox.h"

namespace forkbox::parent {
namespace {

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_exit_mode = 0;
volatile sig_atomic_t g_ended_by = 0;     // EndBySignal's.
volatile sig_atomic_t g_stops_ended = 0;  // OnJobControl's count, unsandboxed.

// SetIdleTerminal's; read by the handlers only while g_idle_set.
struct IdleTerminal {
  int in_fd = -1;
  int out_fd = -1;
  termios quiet{};
  bool paste = false;
};
IdleTerminal g_idle;
volatile sig_atomic_t g_idle_set = 0;

// Async-signal-safe: tcsetattr and write.
void RestoreIdleTerminalRaw() {
  if (g_idle_set == 0) return;
  (void)tcsetattr(g_idle.in_fd, TCSANOW, &g_idle.quiet);  // Best effort, as QuietTerminal.
  static constexpr char kPasteOn[] = "\x1b[?2004h";
  if (g_idle.paste) (void)!write(g_idle.out_fd, kPasteOn, sizeof(kPasteOn) - 1);
}
OutputFailure g_output_failure;  // The first one.

// Per interrupt signal, the copies that came directly and whose copy from the waiter has not come
// yet, and the waiter's last sequence number seen (sandbox::PassedOnByWaiter).
struct Copies {
  volatile sig_atomic_t direct_unpaired = 0;
  volatile sig_atomic_t last_sequence = 0;
};
Copies g_copies[NSIG];

// Async-signal-safe: one write to stderr, its result ignored (nothing to do if it fails).
void WriteRaw(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

// Whether a delivery of `signo` is a signal of its own, and not the waiter's copy of one that was
// sent to the whole process group and came here directly first (the kernel signals a group's
// newest member first, and the waiter passes its copy on only after that). A copy the waiter sent
// but that never came was dropped by the kernel while the same signal was still pending here (one
// pending instance of a standard signal): it was the pair of a direct one, which is then no longer
// waiting for its own. Without a waiter no copy comes and nothing is dropped. Async-signal-safe.
bool FreshSignal(int signo, int code, int value) {
  if (signo <= 0 || signo >= NSIG) return true;
  Copies& c = g_copies[signo];
  uint16_t sequence = 0;
  if (!sandbox::PassedOnByWaiter(code, value, &sequence)) {
    // The waiter passes on every one but the terminal's SIGINT (sandbox::EnterLauncher).
    if (signo != SIGINT || code != SI_KERNEL) c.direct_unpaired = c.direct_unpaired + 1;
    return true;
  }
  const uint16_t lost = static_cast<uint16_t>(sequence - c.last_sequence - 1);
  c.last_sequence = sequence;
  c.direct_unpaired = lost >= c.direct_unpaired ? 0 : c.direct_unpaired - lost;
  if (c.direct_unpaired == 0) return true;
  c.direct_unpaired = c.direct_unpaired - 1;
  return false;
}

void OnInterrupt(int signo, siginfo_t* info, void*) {
  if (!FreshSignal(signo, info->si_code, info->si_value.sival_int)) return;
  if (g_exit_mode) {
    WriteRaw("\nforkbox: interrupted\n");
    (void)KillAndReapAllChildren();
    DieOfSignal(signo);
  }
  g_signal = signo;
}

// Ctrl-Z of a session with no launcher (--sandbox=off), whose pid is forkbox's: the tools and
// tasks stop first, each a process group of its own, then this process, as the sandboxed
// session's waiter does it (sandbox/contain.cc); all go on together.
void OnJobControl(int signo) {
  const int saved = errno;
  sandbox::StopAsJobRaw(signo);  // Leaves the signal at its default action: this handler again.
  g_stops_ended = g_stops_ended + 1;  // The continue's SIGCONT put the idle terminal back.
  struct sigaction sa = {};
  sa.sa_handler = OnJobControl;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  (void)sigaction(signo, &sa, nullptr);
  errno = saved;
}

// What a stop ended is counted (JobStopsEnded); this handler makes a wait return EINTR (and a
// PID namespace's init get SIGCONT at all), and puts the idle terminal back.
void OnContinue(int) {
  const int saved = errno;
  RestoreIdleTerminalRaw();
  errno = saved;
}

}  // namespace

Status InstallJobControlHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnJobControl;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU}) {
    if (SignalIgnored(sig)) continue;  // As the caller left it: it stays ignored.
    if (sigaction(sig, &sa, nullptr) != 0) return Status::FromErrno(errno, "sigaction");
  }
  return Status::Ok();
}

Status InstallContinueHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnContinue;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGCONT, &sa, nullptr) != 0) return Status::FromErrno(errno, "sigaction(SIGCONT)");
  return Status::Ok();
}

void SetIdleTerminal(int in_fd, int out_fd, const termios& quiet, bool paste) {
  g_idle_set = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_idle = {in_fd, out_fd, quiet, paste};
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_idle_set = 1;
}

void ClearIdleTerminal() { g_idle_set = 0; }

uint32_t JobStopsEnded() { return sandbox::JobStopsEnded() + static_cast<uint32_t>(g_stops_ended); }

bool KillAndReapAllChildren() {
  if (sandbox::KillAllDescendants() >= 0) return true;
  const char* why = sandbox::KillFailureText(errno);
  WriteRaw("forkbox: processes the tools started may still run: ");
  WriteRaw(why);
  WriteRaw("\n");
  return false;
}

void DieOfSignal(int signo) {
  if (sandbox::TellWaiterTheSessionEndsBy(signo)) _exit(128 + signo);
  DieOfSignalRaw(signo);
}

int EndBySignal(int signo) {
  for (int sig : kInterruptSignals) {
    if (signo == sig) g_ended_by = signo;
  }
  return 128 + signo;
}

void ExitIfEndedBySignal(int code) {
  const int signo = g_ended_by;
  if (signo != 0 && code == 128 + signo) DieOfSignal(signo);
}

const char* SignalName(int signo) {
  switch (signo) {
    case SIGINT:
      return "Ctrl-C";
    case SIGHUP:
      return "SIGHUP";
    case SIGTERM:
      return "SIGTERM";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGPIPE:
      return std::strcmp(g_output_failure.stream, "stderr") == 0 ? "a failed write to stderr"
                                                                 : "a failed write to stdout";
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
  sa.sa_sigaction = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO;  // No SA_RESTART: a read() at the interactive prompt returns EINTR.
  for (int sig : kInterruptSignals) {
    if (SignalIgnored(sig)) continue;  // As the caller left it (nohup): it stays ignored.
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
  if (g_output_failure.err == 0) g_output_failure = {err, "stdout"};
  if (g_signal == 0) g_signal = SIGPIPE;
}

void RecordStderrFailure(int err) {
  if (err != EPIPE) return;
  if (g_output_failure.err == 0) g_output_failure = {err, "stderr"};
  if (g_signal == 0) g_signal = SIGPIPE;
}

OutputFailure FirstOutputFailure() { return g_output_failure; }

Result<BlockedSignals> BlockedSignals::Create() {
  sigset_t set, old;
  sigemptyset(&set);
  for (int sig : kInterruptSignals) {
    if (!SignalIgnored(sig)) sigaddset(&set, sig);  // Blocked, an ignored one would be queued.
  }
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
  while (read(fd_.get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    const int signo = static_cast<int>(info.ssi_signo);
    if (FreshSignal(signo, info.ssi_code, info.ssi_int)) return signo;
  }
  return 0;
}

}  // namespace forkbox::parent
