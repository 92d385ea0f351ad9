#include "parent/parent.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>

#include "agent/http_client.h"
#include "agent/provider_settings.h"
#include "agent/tools.h"
#include "base/background.h"
#include "base/file.h"
#include "base/format.h"
#include "base/startup.h"
#include "parent/agents_command.h"
#include "parent/cli.h"
#include "parent/config.h"
#include "parent/exit_codes.h"
#include "parent/progress.h"
#include "parent/sandbox_command.h"
#include "parent/session.h"
#include "parent/session_store.h"
#include "parent/sessions_command.h"
#include "parent/signals.h"
#include "parent/spawner.h"
#include "parent/system_prompt.h"
#include "parent/task_runner.h"
#include "parent/terminal.h"
#include "parent/tool_runner.h"
#include "parent/transcripts.h"
#include "sandbox/guard_journal.h"
#include "sandbox/namespaces.h"
#include "sandbox/sandbox.h"

extern char** environ;

#if defined(FORKBOX_SANITIZE)
#include <sanitizer/lsan_interface.h>
#include <sys/prctl.h>
// LeakSanitizer stops the world with ptrace, which a confined forkbox refuses (seccomp): its
// at-exit check would turn every exit code into 1. It stays on for unconfined runs.
extern "C" int __lsan_is_turned_off() { return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1; }
#endif

namespace forkbox::parent {
namespace {

void Err(const std::string& s) { WriteText(STDERR_FILENO, s); }

// The message on stderr; in json and stream-json modes also the error object on stdout.
// `session_ran`: as ErrorResultJson's.
int Fail(OutputFormat format, int code, const std::string& message, bool session_ran = false) {
  Err("forkbox: " + message + "\n");
  if (format != OutputFormat::kText) {
    WriteText(STDOUT_FILENO, ErrorResultJson(code, message, session_ran).dump() + "\n");
  }
  return code;
}

// More than a model's context window could hold many times over: a clear error, not an upload.
constexpr size_t kMaxStdinPromptBytes = size_t{8} << 20;

// Stdin's next bytes, waiting in ppoll with the interrupt signals unblocked only there (`waiting`):
// a signal that came before the wait ends it too, which a plain read() after a flag check would
// miss. nullopt: interrupted (the signal stays recorded for Run).
std::optional<ssize_t> ReadUnlessInterrupted(char* buf, size_t size, const sigset_t& waiting) {
  for (;;) {
    if (InterruptPending()) return std::nullopt;
    pollfd in{STDIN_FILENO, POLLIN, 0};
    if (::ppoll(&in, 1, nullptr, &waiting) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    const ssize_t n = ::read(STDIN_FILENO, buf, size);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    return n;
  }
}

// Stdin to its end. A signal stops the read (Run's handler, in kFlag mode): the error then says
// so, and the signal stays recorded for Run (a pipe that never closes must not outlast Ctrl-C).
Result<std::string> ReadStdin() {
  sigset_t interrupts, waiting;
  sigemptyset(&interrupts);
  for (int sig : kInterruptSignals) sigaddset(&interrupts, sig);
  if (pthread_sigmask(SIG_BLOCK, &interrupts, &waiting) != 0) {
    return Status::Internal("pthread_sigmask failed");
  }
  std::string text;
  char buf[65536];
  Status status;
  for (;;) {
    const std::optional<ssize_t> n = ReadUnlessInterrupted(buf, sizeof buf, waiting);
    if (!n) status = Status::Unavailable("interrupted while reading stdin");
    if (n && *n < 0) status = Status::FromErrno(errno, "read the prompt on stdin");
    if (!n || *n <= 0) break;
    text.append(buf, static_cast<size_t>(*n));
    if (text.size() > kMaxStdinPromptBytes) {
      status = Status::InvalidArgument("the prompt on stdin: larger than " +
                                       std::to_string(kMaxStdinPromptBytes) + " bytes");
      break;
    }
  }
  (void)pthread_sigmask(SIG_SETMASK, &waiting, nullptr);
  if (!status.ok()) return status;
  return text;
}

bool Blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

// Whether stdin is a pipe or a file (`cmd | forkbox -p PROMPT`, `< log`): not a terminal, nor
// /dev/null or a socket that a harness left open and may never close. A directory is an error,
// as `cat < dir` fails (-p PROMPT ignored it, and -p alone said only "Is a directory").
Result<bool> StdinPiped() {
  struct stat st;
  if (fstat(STDIN_FILENO, &st) != 0) return false;
  if (S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(
        "stdin is a directory: forkbox reads a file or a pipe there (< FILE, or COMMAND | "
        "forkbox)");
  }
  return S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode);
}

// --print with a PROMPT: piped stdin goes below it, as `codex exec` and `claude -p` take it.
Result<std::string> WithPipedStdin(const std::string& prompt) {
  Result<std::string> text = ReadStdin();
  if (!text.ok() || Blank(*text)) return text.ok() ? prompt : text;
  const char* end = text->back() == '\n' ? "" : "\n";
  return prompt + "\n\n<stdin>\n" + *text + end + "</stdin>";
}

// The one-shot prompt, or nullopt for an interactive session. Errors are usage errors.
Result<std::optional<std::string>> ReadPrompt(const Options& o) {
  if ((o.has_prompt && o.prompt == "-") || (o.print && !o.has_prompt)) {
    if (isatty(STDIN_FILENO)) {
      if (!o.has_prompt) {
        return Status::InvalidArgument(
            "--print needs a PROMPT, or the prompt piped on stdin (- reads it from the terminal)");
      }
      Err("forkbox: reading the prompt from the terminal; end it with Ctrl-D on an empty line\n");
    }
    if (Result<bool> piped = StdinPiped(); !piped.ok()) return piped.status();
    auto text = ReadStdin();
    if (!text.ok()) return text.status();
    if (Blank(*text)) return Status::InvalidArgument("the prompt read from stdin is empty");
    return std::optional<std::string>(std::move(*text));
  }
  if (o.has_prompt) {
    if (Blank(o.prompt)) return Status::InvalidArgument("the prompt is empty");
    if (!o.print) return std::optional<std::string>(o.prompt);
    Result<bool> piped = StdinPiped();
    if (!piped.ok()) return piped.status();
    if (!*piped) return std::optional<std::string>(o.prompt);
    auto prompt = WithPipedStdin(o.prompt);
    if (!prompt.ok()) return prompt.status();
    return std::optional<std::string>(std::move(*prompt));
  }
  if (!isatty(STDIN_FILENO)) {
    return Status::InvalidArgument(
        "no PROMPT and stdin is not a terminal; pass a prompt, or - to read it from stdin, or "
        "-p to answer what is piped (see --help)");
  }
  if (o.output_format != OutputFormat::kText) {
    return Status::InvalidArgument("--json and --output-format json|stream-json need a PROMPT");
  }
  return std::optional<std::string>();
}

// Everything the command line and the environment decide, resolved and validated once.
struct Settings {
  std::string workdir;
  ipc::ProviderSettings provider;
  std::string child_path;     // Empty with --no-subagents.
  TranscriptDir transcripts;  // fd -1: no --transcript-dir.
};

Result<Settings> ResolveSettings(const Options& o) {
  Settings s;
  auto workdir = ResolveWorkdir(o);
  if (!workdir.ok()) return workdir.status();
  s.workdir = std::move(*workdir);
  s.provider = o.provider;
  FORKBOX_RETURN_IF_ERROR(agent::ResolveProviderSettings(s.provider, o.provider_files));
  if (o.subagents) {
    auto path = ResolveChildPath(o);
    if (!path.ok()) return path.status();
    s.child_path = std::move(*path);
  }
  if (!o.transcript_dir.empty()) {
    auto dir = OpenTranscriptDir(o.transcript_dir);
    if (!dir.ok()) return dir.status();
    s.transcripts = std::move(*dir);
  }
  return s;
}

std::string UnavailableText(const sandbox::Report& report) {
  std::string why = "sandbox unavailable on kernel " + report.kernel + ":\n";
  for (const auto& line : report.lines) {
    if (line.state == "unavailable") why += "  " + line.protection + ": " + line.detail + "\n";
  }
  return why + "refusing to run tools unsandboxed; --sandbox=off overrides (DANGEROUS)";
}

// The session's tool policy, failing closed. Returns an exit code other than kExitOk on failure
// (after printing why).
struct SessionSandbox {
  sandbox::Policy policy;
  sandbox::Report report;
  sandbox::TaskTmpDir tmpdir;                    // Removed when the session ends.
  std::optional<sandbox::GuardJournal> journal;  // The parent's git guard's record on disk.
  UniqueFd cgroup_lock;  // Held for the session's life, by the waiter and the launcher.
  std::string transcript_warning;
  std::string git_warning;  // sandbox::HiddenGitDirWarning
};
int SetUpSandbox(const Options& o, const Settings& s, SessionSandbox* out) {
  // The transcripts hold what the session store holds (every tool output and task prompt, of
  // every session that wrote there): out of every tool's read scope, the children's too.
  sandbox::Settings settings = o.sandbox;
  if (s.transcripts.fd) settings.unreadable.push_back(s.transcripts.path);
  auto p = SessionPolicy(settings, s.workdir, s.provider.base_url);
  if (!p.ok()) return Fail(o.output_format, kExitUsage, p.status().message());
  if (Status scope = sandbox::CheckWorkdirScope(*p); !scope.ok()) {
    return Fail(o.output_format, kExitUsage, scope.message());
  }
  out->report = sandbox::Check(*p);
  if (o.sandbox.enabled && !out->report.enforceable) {
    return Fail(o.output_format, kExitSandbox, UnavailableText(out->report));
  }
  const std::vector<std::string> trees = sandbox::PersistentWritableTrees(*p, out->report.layer);
  if (o.sandbox.enabled && !s.child_path.empty()) {
    Status outside = CheckChildOutsideWritableTrees(s.child_path, trees);
    if (!outside.ok()) return Fail(o.output_format, kExitUsage, outside.message());
  }
  if (s.transcripts.fd) out->transcript_warning = TranscriptDirWarning(s.transcripts.path, trees);
  out->git_warning = sandbox::HiddenGitDirWarning(*p, out->report.layer);
  if (o.sandbox.enabled) {
    // Before this session's guard records anything: what a killed one left is put back first.
    sandbox::JournalStart journal = sandbox::StartGuardJournal(trees, p->user_git_config);
    for (const std::string& line : journal.put_back) Err("forkbox: warning: " + line + "\n");
    if (!journal.warning.empty()) Err("forkbox: warning: " + journal.warning + "\n");
    out->journal = std::move(journal.journal);
    // As root, one pids cgroup for the session holds fork bombs; joining it once here spares
    // every task and tool spawn a slow cgroup v1 attach.
    Result<UniqueFd> joined = sandbox::JoinSessionProcessLimit(*p, o.max_parallel);
    if (!joined.ok()) return Fail(o.output_format, kExitSandbox, joined.status().ToString());
    out->cgroup_lock = std::move(*joined);
  }
  // Read-only: nothing on disk may be written; the temp dir comes once confined (MakeReadOnly).
  if (o.sandbox.read_only) {
    out->policy = std::move(*p);
    return kExitOk;
  }
  // In layer 2 the parent's private /dev/shm gets the short link (it could not remove one here).
  auto tmp = sandbox::TaskTmpDir::Create(s.workdir, o.sandbox.enabled && out->report.layer == 2
                                                        ? sandbox::ShortLink::kInNamespaces
                                                        : sandbox::ShortLink::kHere);
  if (!tmp.ok())
    return Fail(o.output_format, kExitFailure, "tool temp dir: " + tmp.status().ToString());
  tmp->ApplyTo(&*p);
  out->tmpdir = std::move(*tmp);
  out->policy = std::move(*p);
  return kExitOk;
}

// --sandbox read-only, once the parent is confined and still single-threaded: its tools inherit
// the domain stacked here (the spawner's children narrow their own). Writable stay the transcript
// directory, by its descriptor (its path may be under the private /tmp now), and the tools' temp
// dir, made now on the parent's own /dev/shm (private in layer 2): nothing on disk.
Status MakeReadOnly(const Settings& s, SessionSandbox* box, sandbox::Sandbox* tools) {
  Result<sandbox::TaskTmpDir> tmp =
      sandbox::TaskTmpDir::Create(s.workdir, sandbox::ShortLink::kShmDir);
  if (!tmp.ok()) return tmp.status().WithContext("tool temp dir");
  box->tmpdir = std::move(*tmp);
  box->tmpdir.ApplyTo(&box->policy);
  tools->set_tmpdir(box->tmpdir);
  std::vector<int> still_writable;
  if (s.transcripts.fd) still_writable.push_back(s.transcripts.fd.get());
  return sandbox::RestrictToReadOnly(box->policy, still_writable, &box->tmpdir);
}

void PrintBanner(const Options& o, const Settings& s, const SessionSandbox& box,
                 const sandbox::Report& report) {
  if (!o.sandbox.enabled) {
    Err("forkbox: WARNING: --sandbox=off: tool commands run UNSANDBOXED with your full user "
        "rights (files, network, secrets). Use only in a disposable environment.\n");
  }
  if (!box.transcript_warning.empty()) Err("forkbox: warning: " + box.transcript_warning + "\n");
  if (!box.git_warning.empty()) Err("forkbox: warning: " + box.git_warning + "\n");
  if (agent::SendsKeyInCleartext(s.provider)) {
    Err("forkbox: warning: the base URL is plain http:// to another machine: the API key and "
        "every prompt travel in cleartext; use https://\n");
  }
  // As `codex exec -s read-only --add-dir`: the paths are named, not silently dropped.
  if (o.sandbox.read_only && !o.sandbox.writable.empty()) {
    Err("forkbox: warning: --sandbox read-only: --writable is ignored, these stay read-only: " +
        JoinList(o.sandbox.writable) + "\n");
  }
  if (o.quiet) return;
  Err(std::string("forkbox ") + FORKBOX_VERSION_STRING + " · " + s.provider.name + " " +
      s.provider.model + " @ " + s.provider.base_url + " · " +
      (o.subagents ? "subagents on (max " + std::to_string(o.max_parallel) + " parallel)"
                   : "baseline: no subagents") +
      "\n");
  Err((o.sandbox.enabled ? report.Banner() : std::string("sandbox: OFF")) +
      (o.sandbox.read_only ? " · read-only: no file can be written" : "") + "\n");
}

// The parent's own tools: `tools` is the handle the parent's confinement returned.
agent::ToolContext ParentToolContext(const Options& o, const Settings& s,
                                     const sandbox::Policy& policy,
                                     std::shared_ptr<const UniqueFd> workdir_fd,
                                     sandbox::Sandbox tools) {
  agent::ToolContext context;
  context.workdir = s.workdir;
  context.workdir_fd = std::move(workdir_fd);
  context.sandbox = std::make_shared<const sandbox::Sandbox>(std::move(tools));
  context.env = sandbox::ToolEnvironment(policy, environ);
  context.timeout_ms = static_cast<int64_t>(o.tool_timeout_s * 1000.0);
  context.max_output_chars = 50'000;
  context.cancelled = InterruptPending;  // Ctrl-C kills the parent's own running bash command.
  return context;
}

// The spawner, started while this process still has every right it started with: only with
// subagents and the sandbox on (with --sandbox=off nothing is confined, and children start here).
// Its execve overlaps the parent's next steps until FinishSpawner.
Result<std::optional<PendingSpawner>> BeginSpawner(const Options& o, const Settings& s,
                                                   const sandbox::Policy& policy,
                                                   const UniqueFd& workdir) {
  if (!o.subagents || !o.sandbox.enabled) return std::optional<PendingSpawner>();
  SpawnerConfig config;
  config.program = s.child_path;  // forkbox-child serves as the spawner too.
  config.child_path = s.child_path;
  config.child_env = sandbox::ForkboxProcessEnvironment(policy, environ);
  config.workdir = UniqueFd(::fcntl(workdir.get(), F_DUPFD_CLOEXEC, 3));
  if (!config.workdir) return Status::FromErrno(errno, "dup(workdir)");
  config.verbose = s.provider.verbose;
  Result<PendingSpawner> spawner = Spawner::Begin(std::move(config));
  if (!spawner.ok()) return spawner.status();
  return std::optional<PendingSpawner>(std::move(*spawner));
}

Result<std::optional<Spawner>> FinishSpawner(std::optional<PendingSpawner>& pending) {
  if (!pending) return std::optional<Spawner>();
  Result<Spawner> spawner = pending->Finish();
  if (!spawner.ok()) return spawner.status();
  return std::optional<Spawner>(std::move(*spawner));
}

// What the parent itself may write besides the policy's trees: its transcript directory (the
// session file and the rest are open descriptors already).
std::vector<std::string> OwnWritable(const Settings& s) {
  if (!s.transcripts.fd) return {};
  return {s.transcripts.path};
}

// What the children need not find out again (ipc::ChildSandboxHints): the model's port, as the
// session's policy holds it (SessionPolicy; a URL it cannot parse sends 0, and the child reports
// the error), and whether layer 2 works here: the spawner started before this
// process confined itself, so its children see the namespaces this process probed.
ipc::ChildSandboxHints ChildHintsOf(const Options& o, const sandbox::Policy& policy,
                                    const agent::ToolContext& context) {
  ipc::ChildSandboxHints hints;
  hints.model_port = policy.model_port;
  hints.layer2_verified = o.sandbox.enabled && context.sandbox->report().layer == 2;
  return hints;
}

// `policy`: the session's, resolved at start-up; children get its canonical --writable and
// --readable paths, which they must find unchanged (a task may have swapped a directory in the
// workdir for a link since).
std::optional<TaskConfig> TaskConfigOf(const Options& o, const Settings& s,
                                       const sandbox::Policy& policy,
                                       const agent::ToolContext& context, const Spawner* spawner) {
  if (!o.subagents) return std::nullopt;
  TaskConfig t;
  t.spawner = spawner;
  t.child_path = s.child_path;
  t.provider = s.provider;
  t.limits.max_turns = o.task_max_turns;
  t.limits.max_tokens = o.task_max_tokens;
  if (o.max_tokens_total > 0) {
    t.session_budget = std::make_shared<agent::TokenBudget>(o.max_tokens_total);
  }
  t.limits.tool_timeout_ms = context.timeout_ms;
  t.limits.max_tool_output_chars = context.max_output_chars;
  t.workdir = s.workdir;
  t.sandbox = static_cast<const sandbox::Settings&>(policy);
  t.child_hints = ChildHintsOf(o, policy, context);
  t.transcript_dir_fd = s.transcripts.fd ? s.transcripts.fd.get() : -1;
  t.transcript_dir = s.transcripts.path;
  // Scrubbed (no keys: the key travels in the start frame only), the opt-ins parked.
  t.child_env = sandbox::ForkboxProcessEnvironment(policy, environ);
  t.max_parallel = o.max_parallel;
  t.timeout_ms = static_cast<int64_t>(o.task_timeout_s * 1000.0);
  t.standby = o.standby;
  t.agents = LoadAgents(s.workdir);
  if (o.sandbox.read_only) agent::MakeReadOnly(&t.agents);
  agent::RestrictTools(&t.agents, o.tools);
  for (const std::string& w : t.agents.warnings) Err("forkbox: warning: agent file " + w + "\n");
  return t;
}

// The base tools the parent offers: without the writing ones when read-only, and without those
// --tools/--disallowed-tools turned off (named in `removed`, when given).
std::vector<agent::ToolDef> ParentBaseTools(const Options& o, std::vector<std::string>* removed) {
  std::vector<agent::ToolDef> tools = agent::BaseToolDefs();
  if (o.sandbox.read_only)
    std::erase_if(tools, [](const auto& t) { return agent::WritesFiles(t.name); });
  std::erase_if(tools, [&](const agent::ToolDef& t) {
    if (std::find(o.tools.begin(), o.tools.end(), t.name) != o.tools.end()) return false;
    if (removed != nullptr) removed->push_back(t.name);
    return true;
  });
  return tools;
}

agent::LoopOptions ParentLoopOptions(const Options& o, const Settings& s,
                                     const std::optional<TaskConfig>& tasks) {
  agent::LoopOptions loop;
  loop.system =
      o.system_prompt.empty() ? ParentSystemPrompt(s.workdir, o.subagents) : o.system_prompt;
  if (o.sandbox.read_only) loop.system += "\n\n" + std::string(agent::kReadOnlyNote);
  std::vector<std::string> removed;
  loop.tools = ParentBaseTools(o, &removed);
  if (!removed.empty()) loop.system += "\n\n" + agent::RemovedToolsNote(removed);
  if (!o.append_system_prompt.empty()) loop.system += "\n\n" + o.append_system_prompt;
  if (tasks) loop.tools.push_back(agent::TaskToolDefFor(tasks->agents));
  loop.max_turns = o.max_turns;
  loop.max_tokens = s.provider.max_tokens;
  loop.keep_results_of = {"task"};  // Task summaries stay when old tool results are folded.
  loop.fallback_summary = false;    // stdout carries the model's answer or nothing.
  if (tasks) loop.shared_budget = tasks->session_budget;
  if (!loop.shared_budget && o.max_tokens_total > 0) {
    loop.shared_budget = std::make_shared<agent::TokenBudget>(o.max_tokens_total);
  }
  return loop;
}

// The session's id, its log and (when resuming) its conversation.
struct SessionState {
  std::string id;
  std::optional<SessionLog> log;
  std::vector<agent::Message> restored;
};

// Whether this run may go on with the session `loaded`: in the workdir it was recorded in (else
// its tools would work in another tree, and its file would keep naming the old one), and with a
// tool when it called tools.
Status CheckResumable(const Options& o, const Settings& s, const std::string& id,
                      const LoadedSession& loaded) {
  if (loaded.info.workdir != s.workdir) {
    return Status::InvalidArgument(
        "session " + id + " belongs to the workdir " + loaded.info.workdir + ", not " + s.workdir +
        ": resume it there (cd, or pass --workdir/-C " + loaded.info.workdir + ")");
  }
  // The model APIs refuse a conversation holding tool calls in a request that defines no tool.
  const bool calls = std::any_of(loaded.messages.begin(), loaded.messages.end(),
                                 [](const auto& m) { return !agent::ToolUsesOf(m).empty(); });
  if (calls && !o.subagents && ParentBaseTools(o, nullptr).empty()) {
    return Status::InvalidArgument("session " + id +
                                   " called tools, and a model API refuses such a conversation "
                                   "with no tool offered: resume it with at least one tool "
                                   "(--tools)");
  }
  return Status::Ok();
}

// A new session that cannot be saved (no HOME, HOME=/nonexistent, a file or a refused link where
// the state directory should be, one it may not write): not saving is not worth failing the
// user's job, but it is said once, never silent.
void WarnNotSaved(const Status& why) {
  Err("forkbox: warning: this session is not saved (nor can it be resumed): " + why.message() +
      "; --no-session-persistence runs without saving, and without this warning\n");
}

Status OpenSession(const Options& o, const Settings& s, const std::string& first_prompt,
                   SessionState* out) {
  const bool resume = o.continue_session || !o.resume.empty();
  if (!resume && !o.persist_session) {
    out->id = NewSessionId();
    return Status::Ok();
  }
  auto dir = OpenSessionsDir(o.persist_session);
  if (!dir.ok() && resume) return dir.status().WithContext("no session to resume");
  if (!resume) {
    out->id = NewSessionId();
    Result<SessionLog> log =
        dir.ok() ? SessionLog::Create(*dir, out->id, s.workdir, first_prompt) : dir.status();
    if (log.ok()) {
      out->log.emplace(std::move(*log));
    } else {
      WarnNotSaved(log.status());
    }
    return Status::Ok();
  }
  std::string id = o.resume;
  if (id.empty()) {
    auto latest = LatestSessionFor(*dir, s.workdir);
    if (!latest.ok()) return latest.status();
    id = *latest;
  }
  LoadedSession loaded;
  if (o.persist_session) {
    auto log = SessionLog::Resume(*dir, id, &loaded);
    if (!log.ok()) return log.status();
    out->log.emplace(std::move(*log));
  } else {
    auto read = LoadSession(*dir, id);  // Read only: no lock.
    if (!read.ok()) return read.status();
    loaded = std::move(*read);
  }
  FORKBOX_RETURN_IF_ERROR(CheckResumable(o, s, id, loaded));
  if (!loaded.warning.empty()) Err("forkbox: warning: " + loaded.warning + "\n");
  out->id = id;
  out->restored = std::move(loaded.messages);
  return Status::Ok();
}

// Always on stderr, whatever --quiet says: a retry is a wait the user must be able to explain.
void ReportRetry(const agent::RetryNotice& n, EventStream* events) {
  char wait[32];
  if (n.wait_ms < 1000) {
    std::snprintf(wait, sizeof(wait), "%lld ms", static_cast<long long>(n.wait_ms));
  } else if (n.wait_ms % 1000 == 0) {
    std::snprintf(wait, sizeof(wait), "%lld s", static_cast<long long>(n.wait_ms / 1000));
  } else {
    std::snprintf(wait, sizeof(wait), "%.1f s", static_cast<double>(n.wait_ms) / 1000.0);
  }
  const std::string what =
      n.http_status != 0 ? std::to_string(n.http_status) + " from the model" : n.reason;
  Err("forkbox: " + what + "; retrying in " + wait + (n.server_asked ? " (retry-after)" : "") +
      ", attempt " + std::to_string(n.next_attempt) + " of " + std::to_string(n.attempts) + "\n");
  if (events != nullptr) {
    events->Emit({{"type", "system"},
                  {"subtype", "retry"},
                  {"attempt", n.next_attempt},
                  {"max_attempts", n.attempts},
                  {"wait_ms", n.wait_ms},
                  {"http_status", n.http_status},
                  {"error", n.reason}});
  }
}

nlohmann::json InitEvent(const Options& o, const Settings& s, const sandbox::Report& report,
                         const agent::LoopOptions& loop) {
  nlohmann::json tools = nlohmann::json::array();
  for (const auto& tool : loop.tools) tools.push_back(tool.name);
  return {{"type", "system"},
          {"subtype", "init"},
          {"model", s.provider.model},
          {"provider", s.provider.name},
          {"tools", std::move(tools)},
          {"sandbox",
           {{"enabled", o.sandbox.enabled},
            {"layer", o.sandbox.enabled ? report.layer : 0},
            {"read_only", o.sandbox.read_only}}},
          {"workdir", s.workdir},
          {"cwd", s.workdir},
          {"forkbox_version", FORKBOX_VERSION_STRING},
          // Claude Code's words: forkbox never asks before a tool runs (the sandbox confines
          // instead), the nearest of its modes; no MCP server is ever started.
          {"permissionMode", "bypassPermissions"},
          {"apiKeySource", agent::ApiKeySource(s.provider)},
          {"mcp_servers", nlohmann::json::array()}};
}

// Ctrl-C (SIGTERM, SIGHUP, a failed write to stdout) stops the call in flight or the wait before
// a retry; a retry restarts the live stdout stream
// (if any) and is announced (on `events` too when not null); a request on the wire calls
// *request_sent (if set).
agent::ProviderHooks ParentProviderHooks(EventStream* events,
                                         std::function<void()>* stream_restarted,
                                         std::function<void()>* request_sent) {
  agent::ProviderHooks hooks;
  hooks.cancelled = InterruptPending;
  hooks.on_request_sent = [request_sent] {
    if (*request_sent) (*request_sent)();
  };
  hooks.on_retry = [events, stream_restarted](const agent::RetryNotice& n) {
    if (*stream_restarted) (*stream_restarted)();
    ReportRetry(n, events);
  };
  return hooks;
}

// The parent goes on in a launcher below forkbox's pid, which stays behind as the waiter
// (sandbox::EnterLauncher), before its spawner and any thread exist; in layer 2 the launcher is
// pid 1 of a PID namespace of its own. The interrupt handler is installed at once: a namespace
// init gets only the signals it handles from outside, and the waiter's death comes as SIGTERM
// (Run installs the handler again in its final mode).
// `waiter`: its `confined` is what sandbox::AwaitLauncherWaiter takes, before the first model
// call.
int EnterLauncher(const Options& o, const sandbox::Policy& policy, const sandbox::Report& report,
                  sandbox::LauncherWaiter* waiter) {
  // The session process killed from outside (the OOM killer's way) writes no result: forkbox's
  // pid, the waiter, says it instead, as any failure before the session is said.
  auto killed = [format = o.output_format](pid_t launcher, int sig) {
    const std::string by =
        sig == SIGKILL ? "SIGKILL (out of memory?)" : "signal " + std::to_string(sig);
    (void)Fail(format, 128 + sig,
               "the session process (pid " + std::to_string(launcher) + ") was killed by " + by +
                   "; running tasks were killed",
               /*session_ran=*/true);
  };
  if (!o.sandbox.enabled) {
    // No waiter: forkbox's pid is the session's, and stops its tools itself.
    if (Status st = InstallJobControlHandler(); !st.ok()) {
      return Fail(o.output_format, kExitFailure, st.ToString());
    }
    return kExitOk;
  }
  if (Status st = InstallInterruptHandler(InterruptMode::kExit); !st.ok()) {
    return Fail(o.output_format, kExitFailure, st.ToString());
  }
  Result<sandbox::LauncherWaiter> launched =
      sandbox::EnterLauncher(policy, report.layer == 2, o.max_parallel, o.standby, killed);
  if (!launched.ok()) {
    return Fail(o.output_format, kExitSandbox,
                "cannot sandbox the parent: " + launched.status().ToString());
  }
  *waiter = std::move(*launched);
  (void)PrefaultCode();  // A fork copies no page table of code (base/startup.h): a hint again.
  return kExitOk;
}

// What the parent sets up with every right it started with, before it confines itself. The later
// steps borrow from it, so Run declares it first.
struct Launch {
  SessionSandbox box;
  sandbox::LauncherWaiter waiter;
  std::shared_ptr<const UniqueFd> workdir_fd;
  std::optional<PendingSpawner> spawner;
};

// The session's policy, the launcher and the spawner's start, in this order. Returns an exit code
// other than kExitOk on failure (after printing why).
int StartLaunch(const Options& o, const Settings& s, Launch* out) {
  // For an https model the HTTP module and the TLS set-up load on a thread of its own while the
  // sandbox policy is set up; joined before the spawner's start. An http model sets up no TLS,
  // and its module loads at the join.
  Background<Status> http = agent::StartWarmUpHttp(s.provider.base_url);
  if (int code = SetUpSandbox(o, s, &out->box); code != kExitOk) return code;
  // Loaded before confinement: the confined parent might not be able to read the HTTP module.
  // And before the spawner starts: while it shares our memory, every mapping the load changes
  // must reach the spawner's CPU too (twice the load's time here).
  // The launcher's fork copies this process's page tables, and every later write faults
  // copy-on-write: it comes before the module loads, unless the load runs on a thread already (an
  // https model), which must end first.
  const bool loading = http.on_thread();
  Status loaded = loading ? http.Get() : Status::Ok();
  if (int code = EnterLauncher(o, out->box.policy, out->box.report, &out->waiter);
      code != kExitOk) {
    return code;
  }
  if (!loading) loaded = http.Get();
  if (!loaded.ok()) return Fail(o.output_format, kExitUsage, loaded.message());
  // The workdir's identity is fixed here, once: the file tools resolve beneath this descriptor
  // and every child gets it (ipc::kChildWorkdirFd).
  Result<std::shared_ptr<const UniqueFd>> workdir_fd = agent::OpenWorkdir(s.workdir);
  if (!workdir_fd.ok()) return Fail(o.output_format, kExitUsage, workdir_fd.status().message());
  out->workdir_fd = std::move(*workdir_fd);
  Result<std::optional<PendingSpawner>> spawner =
      BeginSpawner(o, s, out->box.policy, *out->workdir_fd);
  if (!spawner.ok()) return Fail(o.output_format, kExitSandbox, spawner.status().ToString());
  out->spawner = std::move(*spawner);
  return kExitOk;
}

// The session's output side. The provider's hooks point into it, so it stays where Run made it.
struct SessionIo {
  SessionIo(const Options& o, const std::string& session_id)
      : streaming(o.output_format == OutputFormat::kStreamJson),
        events(STDOUT_FILENO, session_id, RecordStdoutFailure),
        progress(!o.quiet, TakesCursorControls(STDERR_FILENO), STDERR_FILENO,
                 streaming ? &events : nullptr) {}
  SessionIo(const SessionIo&) = delete;
  SessionIo& operator=(const SessionIo&) = delete;

  const bool streaming;
  EventStream events;
  Progress progress;
  std::function<void()> stream_restarted;  // The session's live stdout stream, if any.
  std::function<void()> request_sent;      // Starts the standby children, once there is a runner.
  LastMessageFile last_message;            // -o/--output-last-message, emptied; fd -1: none.
};

// The confined parent: its spawner (if any), its tools' handle, and the workdir through its own
// mounts.
struct Confined {
  std::optional<Spawner> spawner;
  std::optional<sandbox::Sandbox> tools;
  UniqueFd workdir;
};

// From here on the parent runs confined, like a task child (docs/architecture.md). The spawner's
// execve overlaps the planning; it shares our memory until then, so unshare waits. Returns an exit
// code other than kExitOk on failure (after printing why).
int ConfineParent(const Options& o, const Settings& s, Launch* l, Confined* out) {
  Result<std::optional<Spawner>> spawner = std::optional<Spawner>();
  Result<sandbox::Sandbox> confined =
      sandbox::EnterLauncherSandbox(l->box.policy, l->box.report, OwnWritable(s), [&spawner, l] {
        spawner = FinishSpawner(l->spawner);
        if (!spawner.ok()) return spawner.status();
        return sandbox::AwaitLauncherWaiter(std::move(l->waiter.confined));
      });
  if (!spawner.ok()) return Fail(o.output_format, kExitSandbox, spawner.status().ToString());
  if (!confined.ok()) {
    return Fail(o.output_format, kExitSandbox,
                "cannot sandbox the parent: " + confined.status().ToString());
  }
  if (o.sandbox.read_only) {
    if (Status ro = MakeReadOnly(s, &l->box, &*confined); !ro.ok()) {
      return Fail(o.output_format, kExitSandbox,
                  "cannot make the session read-only: " + ro.ToString());
    }
  }
  // The file tools go through the parent's own mounts from now on (a read-only .git/config).
  Result<UniqueFd> inside = sandbox::ReopenInside(*l->workdir_fd, s.workdir);
  if (!inside.ok()) return Fail(o.output_format, kExitSandbox, inside.status().ToString());
  out->spawner = std::move(*spawner);
  out->tools.emplace(std::move(*confined));
  out->workdir = std::move(*inside);
  return kExitOk;
}

// The confined session to its end: the parent's tools and tasks, the model loop and its output.
// `prompt`: a one-shot run's; none for an interactive session, which reads from `editor`.
int Serve(const Options& o, const Settings& s, const std::optional<std::string>& prompt, Launch& l,
          Confined& c, SessionState& state, SessionIo& io, agent::Provider& provider,
          LineEditor* editor) {
  PrintBanner(o, s, l.box, c.tools->report());
  agent::ToolContext context =
      ParentToolContext(o, s, l.box.policy, std::make_shared<const UniqueFd>(std::move(c.workdir)),
                        std::move(*c.tools));
  std::optional<TaskConfig> tasks =
      TaskConfigOf(o, s, l.box.policy, context, c.spawner ? &*c.spawner : nullptr);
  // From here on an interrupt only stops what runs, and the session ends through its result
  // (one-shot: RunOneShot goes back to kExit to write it).
  if (Status st = InstallInterruptHandler(InterruptMode::kFlag); !st.ok()) {
    return Fail(o.output_format, kExitFailure, st.ToString());
  }
  SessionStats stats;
  agent::LoopOptions loop = ParentLoopOptions(o, s, tasks);
  ParentToolRunner runner(context, std::move(tasks), io.progress, stats,
                          l.box.journal ? &*l.box.journal : nullptr);
  // Interactive: git's trust surface is recorded and the standbys warm up while the user types.
  // One-shot: once the first request is on the wire, so that neither competes with it; the
  // record comes first, before a standby child's sandbox set-up could touch the workdir's git
  // dirs, and before any tool (Run records it too).
  auto prepare = [&runner] {
    runner.RecordGitSurface();
    runner.StartStandby();
  };
  if (!prompt) prepare();
  io.request_sent = prepare;
  TimedProvider timed(provider, &stats.api_ms);
  if (io.streaming) io.events.Emit(InitEvent(o, s, context.sandbox->report(), loop));
  Session session(timed, std::move(loop), runner, stats);
  session.Restore(std::move(state.restored));
  if (state.log) session.set_log(&*state.log);
  OutputOptions out{o.output_format,
                    s.provider.stream,
                    o.quiet,
                    &io.events,
                    s.provider.model,
                    o.persist_session,
                    &io.stream_restarted,
                    [&l] { return sandbox::WaiterDied(l.waiter.pidfd); },
                    l.waiter.pid,
                    io.last_message.fd ? &io.last_message : nullptr};
  if (!prompt) return RunInteractive(session, out, *editor, io.progress);
  return RunOneShot(session, *prompt, out, io.progress);
}

int Run(const Options& o) {
  // Stdin may be a pipe that has not closed yet: a signal meanwhile ends the run with its result.
  if (Status st = InstallInterruptHandler(InterruptMode::kFlag); !st.ok()) {
    return Fail(o.output_format, kExitFailure, st.ToString());
  }
  auto prompt = ReadPrompt(o);
  if (const int sig = TakeInterrupt(); sig != 0) {
    return Fail(o.output_format, EndBySignal(sig),
                std::string("interrupted by ") + SignalName(sig) + " while reading stdin");
  }
  SetInterruptMode(InterruptMode::kExit);  // Start-up ends at once on a signal, as before.
  if (!prompt.ok()) return Fail(o.output_format, kExitUsage, prompt.status().message());
  if (!prompt->has_value() && !o.output_last_message.empty()) {
    return Fail(o.output_format, kExitUsage,
                "--output-last-message needs a PROMPT: it writes the answer of a one-shot run");
  }
  auto settings = ResolveSettings(o);
  if (!settings.ok()) return Fail(o.output_format, kExitUsage, settings.status().message());
  const Settings& s = *settings;
  Launch launch;
  if (int code = StartLaunch(o, s, &launch); code != kExitOk) return code;
  SessionState state;
  if (Status st = OpenSession(o, s, prompt->value_or(""), &state); !st.ok()) {
    return Fail(o.output_format, kExitUsage, st.message());
  }
  SessionIo io(o, state.id);
  Result<std::unique_ptr<agent::Provider>> provider =
      agent::MakeProvider(s.provider, ParentProviderHooks(io.streaming ? &io.events : nullptr,
                                                          &io.stream_restarted, &io.request_sent));
  if (!provider.ok()) return Fail(o.output_format, kExitUsage, provider.status().message());
  // Emptied only once every usage error is behind (an unknown --resume ID, a session of another
  // workdir): such an error leaves FILE as it was. Still before the parent confines itself, so
  // FILE may lie where no tool can write.
  if (!o.output_last_message.empty()) {
    Result<LastMessageFile> file = OpenLastMessageFile(o.output_last_message);
    if (!file.ok()) return Fail(o.output_format, kExitUsage, file.status().message());
    io.last_message = std::move(*file);
  }
  std::unique_ptr<LineEditor> editor;
  if (!prompt->has_value()) editor = MakeSessionEditor(o.persist_session);
  Confined confined;
  if (int code = ConfineParent(o, s, &launch, &confined); code != kExitOk) return code;
  return Serve(o, s, *prompt, launch, confined, state, io, **provider, editor.get());
}

// `forkbox config [FLAGS]`: the effective settings and where each came from.
int ConfigMain(int argc, char** argv) {
  CliOutcome cli = ParseCommandLine(argc, argv, CliCommand::kConfig);
  WriteText(STDERR_FILENO, cli.err);
  if (!cli.options) return PrintOutput(cli.out, cli.exit_code);
  std::string out;
  for (const auto& [name, value] : cli.effective) out += name + " = " + value + "\n";
  return PrintOutput(out, kExitOk);
}

}  // namespace

int ParentMain(int argc, char** argv) {
  if (Status st = ReserveStandardFds(); !st.ok()) {
    WriteText(STDERR_FILENO, "forkbox: " + st.ToString() + "\n");
    return kExitFailure;
  }
  if (argc >= 2 && std::strcmp(argv[1], "sandbox") == 0) {
    return SandboxCommandMain(argc - 1, argv + 1);
  }
  if (argc >= 2 && std::strcmp(argv[1], "sessions") == 0) {
    return SessionsCommandMain(argc - 1, argv + 1);
  }
  if (argc >= 2 && std::strcmp(argv[1], "agents") == 0)
    return AgentsCommandMain(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "config") == 0) return ConfigMain(argc - 1, argv + 1);
  CliOutcome cli = ParseCommandLine(argc, argv);
  if (Status st = HardenProcess(); !st.ok()) return Fail(cli.format, kExitFailure, st.ToString());
  WriteText(STDERR_FILENO, cli.err);
  if (!cli.options && cli.exit_code != kExitOk && cli.format != OutputFormat::kText) {
    std::string first_line = cli.err.substr(0, cli.err.find('\n'));
    if (first_line.starts_with("forkbox: ")) first_line.erase(0, 9);  // As Fail's messages.
    WriteText(STDOUT_FILENO, ErrorResultJson(cli.exit_code, first_line).dump() + "\n");
    return cli.exit_code;
  }
  if (!cli.options) return PrintOutput(cli.out, cli.exit_code);
  int code;
  try {
    code = Run(*cli.options);
  } catch (const std::exception& e) {
    // It may have come after model calls, which are then not known here.
    code = Fail(cli.format, kExitFailure, std::string("internal error: ") + e.what(),
                /*session_ran=*/true);
  }
  // Whatever a tool left behind dies with the session.
  if (!KillAndReapAllChildren() && code == kExitOk) code = kExitFailure;
  ExitIfEndedBySignal(code);
  return code;
}

}  // namespace forkbox::parent
