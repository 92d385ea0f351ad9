// `forkbox sandbox [options] -- CMD [ARGS...]` and `forkbox sandbox --check`.
#include "parent/sandbox_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/process.h"
#include "base/unique_fd.h"
#include "parent/cli.h"
#include "parent/signals.h"
#include "parent/terminal.h"
#include "sandbox/git_surface.h"
#include "sandbox/guard_journal.h"
#include "sandbox/sandbox.h"

extern char** environ;

namespace forkbox::parent {
namespace {

constexpr int kSandboxError = 125;  // Like env(1)/docker: the wrapper itself failed.

// One line on stderr after "forkbox sandbox: ", its control characters escaped on a terminal: a
// file name a tool chose (a planted hook's) may hold escape sequences.
void Say(const std::string& text) { WriteText(STDERR_FILENO, "forkbox sandbox: " + text + "\n"); }

struct CommandLine {
  sandbox::Settings settings;
  std::string workdir;
  bool check = false;
  std::vector<std::string> command;
};

std::string FindInPath(const std::string& cmd, const std::vector<std::string>& env) {
  if (cmd.find('/') != std::string::npos) return cmd;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& e : env) {
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + cmd;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return "";
}

void PrintCheck(const sandbox::Report& report) {
  std::printf("forkbox sandbox --check: kernel %s, layer %d, landlock ABI %d\n",
              report.kernel.c_str(), report.layer, report.landlock_abi);
  for (const sandbox::Report::Line& line : report.lines) {
    std::printf("  %-26s %-12s %s\n", line.protection.c_str(), line.state.c_str(),
                line.detail.c_str());
  }
  std::printf("%s\n", report.Banner().c_str());
  if (!report.enforceable) {
    std::printf(
        "the default policy CANNOT be enforced here: forkbox refuses to run tools "
        "(override: --sandbox=off)\n");
  }
}

// Job control: the terminal's stops (Ctrl-Z, a background read or write) and the continue.
constexpr int kJobControlSignals[] = {SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT};

// The stop signals (kInterruptSignals), taken through a signalfd from before the journal is written
// until this process ends, never by their default action: one during the start used to end this
// process with its journal written (the next start then put back that record over the user's later
// git changes) and its command's init waiting for a ruleset that never came. The job-control
// signals too: the command has a process group of its own, which the terminal's never reach.
class TakenSignals {
 public:
  static Result<TakenSignals> Create() {
    TakenSignals t;
    sigset_t mask;
    sigemptyset(&mask);
    for (const auto& list :
         {std::span<const int>(kInterruptSignals), std::span<const int>(kJobControlSignals)}) {
      for (int sig : list) {
        // One the caller ignored (nohup) stays ignored: blocked, it would be queued and taken.
        if (!SignalIgnored(sig)) sigaddset(&mask, sig);
      }
    }
    if (sigprocmask(SIG_BLOCK, &mask, &t.old_) != 0) return Status::FromErrno(errno, "sigprocmask");
    t.active_ = true;
    t.fd_.reset(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!t.fd_) return Status::FromErrno(errno, "signalfd");
    return t;
  }
  TakenSignals(TakenSignals&& other) noexcept
      : fd_(std::move(other.fd_)), old_(other.old_), active_(std::exchange(other.active_, false)) {}
  ~TakenSignals() {
    if (active_) sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  int fd() const { return fd_.get(); }
  // The next signal taken, or 0.
  int Next() const {
    signalfd_siginfo info;
    return read(fd_.get(), &info, sizeof(info)) == sizeof(info) ? static_cast<int>(info.ssi_signo)
                                                                : 0;
  }
  // The next stop signal taken, or 0. With no command running, this process alone stops at a
  // job-control stop and goes on.
  int NextStop() const {
    for (int sig = Next(); sig != 0; sig = Next()) {
      if (sig == SIGCONT) continue;
      if (!IsJobStop(sig)) return sig;
      StopAsDefaultRaw(sig);
    }
    return 0;
  }
  static bool IsJobStop(int sig) { return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU; }

 private:
  TakenSignals() = default;
  UniqueFd fd_;
  sigset_t old_;
  bool active_ = false;
};

// Waits for the command, forwarding terminal and termination signals to its process group, and
// answers its unix connect broker meanwhile (ForCommand: this thread is the broker).
Result<int> WaitForwardingSignals(const sandbox::Sandbox& sandbox, ChildProcess& child,
                                  const TakenSignals& signals) {
  for (;;) {
    pollfd fds[2] = {{child.pidfd(), POLLIN, 0}, {signals.fd(), POLLIN, 0}};
    FORKBOX_RETURN_IF_ERROR(sandbox.ServeUntil(fds));
    if (fds[1].revents & POLLIN) {
      while (int sig = signals.Next()) {
        if (!TakenSignals::IsJobStop(sig)) {
          (void)child.Signal(sig);  // SIGCONT too: `kill -CONT`, the shell's `bg`.
          continue;
        }
        // The whole job stops, as a shell's job does, and goes on when this process is continued:
        // every process below this one, a daemon the command detached with setsid too.
        sandbox::StopAsJobRaw(sig);
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP)) break;
  }
  return child.Wait();
}

// Parses the options before "--"; nullopt with *exit_code set on --help or a usage error.
std::optional<CommandLine> Parse(int argc, char** argv, int* exit_code) {
  CommandLine cl;
  int opt_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      opt_argc = i;
      cl.command.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  CLI::App app{"Runs CMD under exactly the sandbox policy that forkbox's tool calls get.",
               "forkbox sandbox"};
  app.footer("Usage: forkbox sandbox [OPTIONS] -- CMD [ARGS...]   |   forkbox sandbox --check");
  std::string mode = "on";
  app.add_option("--workdir", cl.workdir, "The only writable tree (default: the current directory)")
      ->check(NonEmpty());
  app.add_flag("--allow-net", cl.settings.allow_net, "Let the command create sockets");
  app.add_option("--writable", cl.settings.writable, "An extra writable path (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--env", cl.settings.env, "Pass this environment variable through (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--readable", cl.settings.readable,
                 "Let the command read this credential store, hidden by default (repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--allow-broad-workdir", cl.settings.allow_broad_workdir,
               "Accept a workdir of /, $HOME or an ancestor of a credential store");
  app.add_option("-s,--sandbox", mode,
                 "on (default), read-only (the command writes only its own TMPDIR) or off (run "
                 "WITHOUT any sandbox); codex's workspace-write is on, danger-full-access is off")
      ->check(CLI::IsMember(
          std::vector<std::string>(sandbox::kSandboxModes.begin(), sandbox::kSandboxModes.end())));
  app.add_flag("--check", cl.check, "Print what the sandbox enforces here and exit");
  if (std::optional<std::string> empty = EmptyInlineValue(opt_argc, argv)) {
    std::fprintf(stderr, "forkbox sandbox: %s: the value is empty\n", empty->c_str());
    *exit_code = 2;
    return std::nullopt;
  }
  try {
    app.parse(opt_argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = SubcommandParseExit(app, e);
    return std::nullopt;
  }
  sandbox::ApplySandboxMode(mode, &cl.settings);
  if (cl.settings.read_only && !cl.settings.writable.empty()) {
    std::fprintf(stderr,
                 "forkbox sandbox: --writable cannot be combined with --sandbox read-only, which "
                 "lets the command write only its own TMPDIR\n");
    *exit_code = 2;
    return std::nullopt;
  }
  return cl;
}

void WarnAbout(const sandbox::Policy& policy, const std::string& program) {
  for (const std::string& name : policy.env) {
    if (sandbox::IsSecretName(name)) {
      std::fprintf(stderr,
                   "forkbox sandbox: warning: --env %s looks like a secret and is never "
                   "passed to tools\n",
                   name.c_str());
    }
  }
  if (!policy.enabled) {
    std::fprintf(stderr,
                 "forkbox sandbox: WARNING: --sandbox=off: %s runs with your full privileges, "
                 "unconfined\n",
                 program.c_str());
  }
}

// The command's spawn: its environment, its program found in that environment's PATH, a session of
// its own. nullopt: no such program.
std::optional<SpawnOptions> CommandOptions(const sandbox::Sandbox& sandbox,
                                           const std::vector<std::string>& command) {
  SpawnOptions options;
  options.env = sandbox::ToolEnvironment(sandbox.policy(), environ);
  options.argv = command;
  options.argv[0] = FindInPath(command[0], options.env);
  if (options.argv[0].empty()) return std::nullopt;
  options.new_session = true;
  return options;
}

// Puts git's trust surface back once nothing of the command is left, and names each change.
void PutBack(sandbox::GitSurfaceGuard* git) {
  for (const std::string& line : git->Restore(sandbox::GitSurfaceGuard::After::kDone)) {
    Say("git trust surface changed by the command: " + line);
  }
}

// Puts back what a killed forkbox left in git's trust surface (sandbox::StartGuardJournal),
// saying so on stderr, and returns the start, with this command's journal.
sandbox::JournalStart StartJournal(const sandbox::Policy& policy, int layer) {
  sandbox::JournalStart start = sandbox::StartGuardJournal(
      sandbox::PersistentWritableTrees(policy, layer), policy.user_git_config);
  for (const std::string& line : start.put_back) {
    Say("warning: " + line);
  }
  return start;
}

// The journal of `git`'s record, or why there is none (unsaid where no journal could be made and
// the surface is empty: a workdir without a repository, wrapped command after command).
std::optional<sandbox::GuardJournal> JournalOf(const sandbox::GitSurfaceGuard& git,
                                               sandbox::JournalStart start) {
  std::string warning = git.empty() && !start.journal ? "" : start.warning;
  if (Status st = start.journal ? start.journal->Write(git) : Status::Ok(); !st.ok()) {
    warning = "git trust surface not journaled: " + st.message();
  }
  if (warning.empty()) return std::move(start.journal);
  Say("warning: " + warning);
  return std::nullopt;
}

// Says why the command could not run, or its end could not be told; returns kSandboxError.
int SandboxError(const Status& st) {
  Say(st.message());
  return kSandboxError;
}

// Waits for the command, kills what it left and puts `git`'s surface back (when given); returns
// the command's exit code, and sets *die_of when the command died of a signal (its init or keeper
// says so through `recorded`, when given).
int AwaitCommand(const sandbox::Sandbox& sandbox, ChildProcess& child, const TakenSignals& signals,
                 sandbox::GitSurfaceGuard* git, const sandbox::CommandStatus* recorded,
                 int* die_of) {
  Result<int> status = WaitForwardingSignals(sandbox, child, signals);
  const bool all_killed = sandbox::KillAllDescendants() >= 0;
  const char* why = all_killed ? "" : sandbox::KillFailureText(errno);
  if (git != nullptr) PutBack(git);
  if (!all_killed) {  // What they do after the put-back is not undone: never a quiet success.
    Say(std::string("processes the command left may still run (") + why +
        "); what they change from now on is not undone");
    return kSandboxError;
  }
  if (!status.ok()) return SandboxError(status.status());
  const int command_status = recorded != nullptr ? recorded->Resolve(*status) : *status;
  if (WIFSIGNALED(command_status)) *die_of = WTERMSIG(command_status);
  return ExitCodeFromWaitStatus(command_status);
}

// Runs the command under the policy and returns its exit code. Sets *die_of to the signal this
// process is to die of once everything Run holds is undone: the command's, when it died of one,
// or the one taken before it started (a shell ends its loop at Ctrl-C only when its command died
// of SIGINT; an exit with 130 says the command handled it).
int Run(const sandbox::Policy& policy, const std::vector<std::string>& command,
        const TakenSignals& signals, int* die_of) {
  WarnAbout(policy, command[0]);
  // Fail closed before touching the workdir.
  // This process only runs the command: it scopes itself, and the command spawns from here.
  Result<sandbox::Sandbox> sandbox = sandbox::Sandbox::ForCommand(policy);
  if (!sandbox.ok()) return SandboxError(sandbox.status());
  // Layer 2's private /dev/shm holds the temp dir: nothing on disk (see TaskTmpDir).
  Result<sandbox::TaskTmpDir> tmp =
      sandbox::TaskTmpDir::Create(policy.workdir, policy.enabled && sandbox->report().layer == 2
                                                      ? sandbox::ShortLink::kPrivateDir
                                                      : sandbox::ShortLink::kHere);
  if (!tmp.ok()) return SandboxError(tmp.status());
  sandbox->set_tmpdir(*tmp);
  if (std::string hidden = sandbox::HiddenGitDirWarning(policy, sandbox->report().layer);
      !hidden.empty()) {
    Say("warning: " + hidden);
  }
  // Git's trust surface, recorded before the command and put back after it (layer 1 has no
  // read-only binds; in layer 2 it also catches what the binds cannot), and journaled for the next
  // start should every forkbox process die at once; what a killed one left goes back first.
  // Its walk of the workdir also serves layer 2's binds (Spawn's git_surface).
  std::optional<sandbox::JournalStart> start;
  if (policy.enabled) start = StartJournal(policy, sandbox->report().layer);
  sandbox::MountPlan surface;
  Result<sandbox::GitSurfaceGuard> git = sandbox::GitSurfaceGuard::Take(
      policy.workdir, policy.user_git_config, &surface, policy.writable);
  if (policy.enabled && !git.ok()) return SandboxError(git.status());
  std::optional<sandbox::GuardJournal> journal =
      policy.enabled ? JournalOf(*git, std::move(*start)) : std::nullopt;
  // Collect re-parented daemons so they can be killed when the command ends.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return SandboxError(Status::FromErrno(errno, "prctl(PR_SET_CHILD_SUBREAPER)"));
  }
  std::optional<SpawnOptions> options = CommandOptions(*sandbox, command);
  if (!options) {
    Say(command[0] + ": command not found");
    return 127;
  }
  if (const int sig = signals.NextStop(); sig != 0) {  // Nothing ran: nothing to put back.
    Say(std::string("interrupted by SIG") + sigabbrev_np(sig) + " before the command started");
    *die_of = sig;
    return 128 + sig;
  }
  Result<sandbox::CommandStatus> recorded = sandbox::CommandStatus::Create();
  if (!recorded.ok()) return SandboxError(recorded.status());
  // Should this process die first (a SIGKILL), the command's keeper or init puts the surface back
  // and removes the temp dir.
  const sandbox::Sandbox::AfterCommand after{git.ok() ? &*git : nullptr, &*tmp,
                                             journal ? &*journal : nullptr, &*recorded};
  Result<ChildProcess> child = sandbox->Spawn(std::move(*options), git.ok() ? &surface : nullptr,
                                              policy.enabled ? &after : nullptr);
  if (!child.ok()) {
    Say(child.status().message());
    return child.status().code() == Status::Code::kNotFound ? 127 : kSandboxError;
  }
  return AwaitCommand(*sandbox, *child, signals, policy.enabled ? &*git : nullptr,
                      policy.enabled ? &*recorded : nullptr, die_of);
}

}  // namespace

int SandboxCommandMain(int argc, char** argv) {
  int exit_code = 0;
  std::optional<CommandLine> cl = Parse(argc, argv, &exit_code);
  if (!cl) return exit_code;
  if (cl->workdir.empty()) {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) {
      Say(Status::FromErrno(errno, "getcwd").message());
      return kSandboxError;
    }
    cl->workdir = cwd;
  }
  // This process never confines its own reads: the grants are listed with the ruleset.
  Result<sandbox::Policy> policy =
      sandbox::ResolvePolicy(cl->settings, cl->workdir, sandbox::GrantListing::kAtTheRuleset);
  if (!policy.ok()) {
    Say(policy.status().message());
    return 2;
  }
  if (cl->check) {
    sandbox::Report report = sandbox::Check(*policy);
    PrintCheck(report);
    return report.enforceable ? 0 : 1;
  }
  if (Status scope = sandbox::CheckWorkdirScope(*policy); !scope.ok()) {
    Say(scope.message());
    return 2;
  }
  if (cl->command.empty()) {
    std::fprintf(stderr,
                 "forkbox sandbox: missing command: forkbox sandbox [OPTIONS] -- CMD "
                 "[ARGS...]\n");
    return 2;
  }
  Result<TakenSignals> signals = TakenSignals::Create();
  if (!signals.ok()) return SandboxError(signals.status());
  int die_of = 0;
  const int code = Run(*policy, cl->command, *signals, &die_of);
  // Taken until here: a stop signal that came during the clean-up must not replace the death the
  // command had (a SIGINT after its SIGHUP), and after an exit it ends this process now, with no
  // core (SIGQUIT's default action), rather than by its default action once unblocked.
  if (die_of == 0) die_of = signals->NextStop();
  if (die_of != 0) DieOfSignalRaw(die_of);  // After Run's clean-up, as the command ended.
  return code;
}

}  // namespace forkbox::parent
