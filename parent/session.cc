#include "parent/session.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <utility>

#include "base/file.h"
#include "base/format.h"
#include "parent/exit_codes.h"
#include "parent/line_editor.h"
#include "parent/signals.h"
#include "parent/terminal.h"

namespace forkbox::parent {
namespace {

void WriteFd(int fd, std::string_view s) { WriteText(fd, s); }

// The session's output: a failed write stops the session (RecordStdoutFailure).
void WriteStdout(std::string_view s) {
  if (const int err = WriteAll(STDOUT_FILENO, s); err != 0) RecordStdoutFailure(err);
}

// Length of an incomplete UTF-8 sequence at the end of `s` (0 when it ends complete): held back
// so a character split between two stream fragments is neutralised whole on a terminal.
size_t IncompleteTail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // A continuation byte: look further back.
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// Streams assistant text to stdout and keeps the output line-aligned between turns. While it
// lives, `restart_hook` (OutputOptions::stream_restarted) is its Restart: a retried attempt
// starts on a fresh line, after the retry notice, instead of being glued to the cut text.
class StdoutStream {
 public:
  explicit StdoutStream(std::function<void()>* restart_hook) : hook_(restart_hook) {
    if (hook_ != nullptr) *hook_ = [this] { Restart(); };
  }
  ~StdoutStream() {
    if (hook_ != nullptr) *hook_ = nullptr;
  }
  StdoutStream(const StdoutStream&) = delete;
  StdoutStream& operator=(const StdoutStream&) = delete;

  void Write(std::string_view fragment) {
    pending_.append(fragment);
    const std::string_view ready(pending_.data(), pending_.size() - IncompleteTail(pending_));
    if (ready.empty()) return;
    if (turn_ended_) {
      turn_ended_ = false;
      WriteStdout(at_line_start_ ? "\n" : "\n\n");
    }
    WriteStdout(ready);
    at_line_start_ = ready.back() == '\n';
    wrote_ = in_attempt_ = true;
    pending_.erase(0, ready.size());
  }
  // The next text starts a new paragraph (a new model turn).
  void TurnEnded() {
    turn_ended_ = wrote_;
    in_attempt_ = false;
  }
  // Ends the last line; no paragraph break (Write would add one after TurnEnded).
  void EndLine() {
    if (!pending_.empty()) WriteStdout(std::exchange(pending_, ""));
    if (wrote_ && !at_line_start_) WriteStdout("\n");
    at_line_start_ = true;
    turn_ended_ = false;
  }
  // The provider retries: what this attempt printed is void; the new attempt starts below.
  void Restart() {
    pending_.clear();
    if (!in_attempt_) return;
    EndLine();
    in_attempt_ = false;
    WriteFd(STDERR_FILENO, "forkbox: the reply above was cut off; it starts again below\n");
  }
  bool wrote() const { return wrote_; }

 private:
  std::function<void()>* hook_;
  std::string pending_;  // An incomplete UTF-8 sequence.
  bool at_line_start_ = true;
  bool wrote_ = false;
  bool in_attempt_ = false;  // Text of the current model call is on screen.
  bool turn_ended_ = false;
};

// Whether the file's name still names the file held, and it alone: a tool may have replaced it
// (write_file makes a new file), removed it or linked it elsewhere meanwhile.
bool StillNamed(const LastMessageFile& file) {
  struct stat held, named;
  if (::fstat(file.fd.get(), &held) != 0) return false;
  if (::fstatat(file.dir.get(), file.name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) return false;
  return held.st_dev == named.st_dev && held.st_ino == named.st_ino && named.st_nlink == 1;
}

// The -o file's `path` beneath `dir`, under the rules of base/file.h's CreateRegularFileNoLinks,
// emptied.
Result<UniqueFd> CreateEmptied(int dir, const std::string& path) {
  Result<UniqueFd> fd = CreateRegularFileNoLinks(path, 0644, dir);
  if (!fd.ok()) return fd.status().WithContext("--output-last-message");
  if (::ftruncate(fd->get(), 0) != 0) {
    return Status::FromErrno(errno, "--output-last-message '" + path + "'");
  }
  return fd;
}

}  // namespace

Result<LastMessageFile> OpenLastMessageFile(const std::string& path) {
  LastMessageFile file;
  Result<UniqueFd> fd = CreateEmptied(AT_FDCWD, path);
  if (!fd.ok()) return fd.status();
  file.fd = std::move(*fd);
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  file.name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  file.dir = OpenAt2(AT_FDCWD, dir.c_str(), O_PATH | O_DIRECTORY, kResolveNoLinks);
  file.path = path;
  if (!file.dir) return Status::FromErrno(errno, "--output-last-message: open " + dir);
  // The directory held must be the one the file was opened in (a rename may have raced).
  if (!StillNamed(file)) {
    return Status::Unavailable("--output-last-message: " + path + " changed while it was opened");
  }
  return file;
}

agent::CallResult TimedProvider::Complete(const agent::Request& request,
                                          const agent::TextSink& on_text) {
  const auto started = std::chrono::steady_clock::now();
  agent::CallResult result = inner_.Complete(request, on_text);
  *api_ms_ += std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - started)
                  .count();
  return result;
}

Session::Session(agent::Provider& provider, agent::LoopOptions options, ParentToolRunner& runner,
                 SessionStats& stats)
    : provider_(provider), options_(std::move(options)), runner_(runner), stats_(stats) {}

Session::Turn Session::Ask(const std::string& prompt, const agent::TextSink& on_text,
                           const std::function<void(const agent::Response&)>& on_response,
                           const std::function<void(const agent::Message&)>& on_results) {
  size_t before = messages_.size();
  // After an interrupt the context ends with the user's tool results: the new prompt joins that
  // message, since roles must alternate.
  bool joined = !messages_.empty() && messages_.back().role == agent::Role::kUser;
  if (joined) {
    messages_.back().content.push_back(agent::TextBlock{prompt});
  } else {
    messages_.push_back(agent::Message{agent::Role::kUser, {agent::TextBlock{prompt}}});
  }
  agent::LoopObserver observer;
  observer.on_text = on_text;
  if (on_response) {
    observer.on_response = [&](int, const agent::Response& r) { on_response(r); };
  }
  if (on_results) observer.on_tool_results = [&](int, const agent::Message& m) { on_results(m); };
  Turn turn;
  turn.outcome = agent::RunLoop(provider_, messages_, options_, runner_, observer);
  turn.interrupt_signal = turn.outcome.interrupt_signal;  // Tools interrupted (answered as such).
  if (turn.outcome.error && turn.outcome.error->kind == agent::ModelError::Kind::kCancelled) {
    // Ctrl-C stopped a model call in flight: an interrupt, not a model error. The prompt stays,
    // marked, so the user can refer to it; the next prompt joins this user message.
    const int sig = TakeInterrupt();
    turn.interrupt_signal = sig != 0 ? sig : SIGINT;
    turn.outcome.stop = agent::LoopStop::kInterrupted;
    turn.outcome.error.reset();
    if (!messages_.empty() && messages_.back().role == agent::Role::kUser) {
      // GCC 12 reports a false maybe-uninitialized inside nlohmann's move for the variant here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
      messages_.back().content.push_back(
          agent::TextBlock{"[interrupted by the user before the model answered]"});
#pragma GCC diagnostic pop
    }
  }
  stats_.parent_turns += turn.outcome.turns;
  stats_.parent_usage.input_tokens += turn.outcome.usage.input_tokens;
  stats_.parent_usage.output_tokens += turn.outcome.usage.output_tokens;
  stats_.parent_usage.cache_read_input_tokens += turn.outcome.usage.cache_read_input_tokens;
  stats_.parent_usage.cache_creation_input_tokens += turn.outcome.usage.cache_creation_input_tokens;
  if (turn.outcome.error && messages_.size() == before + (joined ? 0 : 1)) {
    // The prompt got no answer: do not leave it dangling in the context.
    if (joined) {
      messages_.back().content.pop_back();
    } else {
      messages_.pop_back();
    }
  }
  if (log_ != nullptr)
    Saved(log_->AddTurn(prompt, messages_, turn.outcome.turns, turn.outcome.usage));
  return turn;
}

void Session::Clear() {
  messages_.clear();
  if (log_ != nullptr) Saved(log_->AddClear());
}

void Session::Saved(const Status& st) {
  if (st.ok()) return;
  WriteFd(STDERR_FILENO, "forkbox: warning: session not saved: " + st.ToString() + "\n");
  log_ = nullptr;  // Said once; the session goes on.
}

namespace {

struct OneShotEnd {
  int code = kExitOk;
  std::string problem;  // Empty: a clean answer.
  const char* subtype = "success";
  bool no_answer = false;  // Stopped early (exit 5) before there was any answer.
  // There is an answer to give (stdout, the -o file): whole, or what a run stopped early has.
  bool Answered() const { return !no_answer && (code == kExitOk || code == kExitIncomplete); }
};

bool Blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

OneShotEnd Interrupted(int sig, const OutputOptions& out) {
  int code = EndBySignal(sig);  // forkbox dies of it (parent/signals.h) unless another code wins.
  std::string why = std::string("interrupted by ") + SignalName(sig);
  if (sig == SIGTERM && out.waiter_died && out.waiter_died()) {
    // What forkbox's caller saw: its pid killed. The waiter blocks every signal it can.
    code = 128 + SIGKILL;
    why = "forkbox (pid " + std::to_string(out.waiter_pid) + ") was killed by SIGKILL";
  }
  return {code, why + "; running tasks were killed", "error_interrupted"};
}

// How a loop that was not interrupted and got no model error ended.
OneShotEnd Stopped(const agent::LoopOutcome& o) {
  switch (o.stop) {
    case agent::LoopStop::kRefusal:
      return {kExitModel, "the model refused to answer", "error_during_execution"};
    case agent::LoopStop::kMalformedToolCalls:
      return {kExitModel,
              "the model gave up: " + std::to_string(agent::kMaxMalformedTurns) +
                  " turns in a row of only malformed tool calls",
              "error_during_execution"};
    case agent::LoopStop::kMaxTurns:
      return {kExitIncomplete, "stopped at the parent turn limit (--max-turns)", "error_max_turns"};
    case agent::LoopStop::kBudget:
      // The answer was written from what the session had when --max-tokens-total ran out:
      // usable, but a script must be able to tell it from a finished one (like --max-turns).
      return {kExitIncomplete, "stopped at the session token budget (--max-tokens-total)",
              "error_max_budget"};
    case agent::LoopStop::kMaxTokens:
    case agent::LoopStop::kContextWindow:
      return {kExitIncomplete,
              "the answer was cut short (" + std::string(agent::LoopStopName(o.stop)) + ")",
              "error_during_execution"};
    default:
      return {};
  }
}

// --max-tokens-total ran out before any answer: the run stopped early (exit 5, as at the budget
// with an answer), which is no model error; its message says when no model call fit at all.
OneShotEnd NoAnswerWithinBudget(const agent::LoopOutcome& o) {
  const std::string why =
      o.turns == 0 ? "the session token budget (--max-tokens-total) was exhausted before the "
                     "first model call"
                   : "stopped at the session token budget (--max-tokens-total) before any answer";
  return {kExitIncomplete, why + "; no answer", "error_max_budget", true};
}

OneShotEnd Classify(const Session::Turn& turn, const OutputOptions& out) {
  if (const OutputFailure failed = FirstOutputFailure(); failed.err != 0) {
    return {
        failed.err == EPIPE ? kExitBrokenPipe : kExitFailure,
        Status::FromErrno(failed.err, std::string("cannot write to ") + failed.stream).message(),
        "error_during_execution"};
  }
  if (turn.interrupt_signal != 0) return Interrupted(turn.interrupt_signal, out);
  const agent::LoopOutcome& o = turn.outcome;
  if (o.error) return {kExitModel, "model error: " + o.error->ToString(), "error_during_execution"};
  OneShotEnd end = Stopped(o);
  if (end.Answered() && Blank(o.final_text)) {
    if (o.stop == agent::LoopStop::kBudget) return NoAnswerWithinBudget(o);
    // Nothing to print: not an answer, whatever the stop.
    end.code = kExitModel;
    end.problem =
        o.stop == agent::LoopStop::kCompleted
            ? "the model's final reply was empty"
            : "the model gave no answer (stop: " + std::string(agent::LoopStopName(o.stop)) +
                  "); " + end.problem;
    if (std::string_view(end.subtype) == "success") end.subtype = "error_during_execution";
  }
  return end;
}

// What RunOneShot saw of a run besides the session's stats.
struct RunFacts {
  // The run has an answer to give (OneShotEnd::Answered); else `result` is "", as stdout in text
  // form gets nothing (a refusal's text is no answer).
  bool answered = false;
  int64_t duration_ms = 0;
  std::optional<std::string> stop_reason;  // The last reply's (ClaudeStopReason).
};

// The one result object of both JSON modes: Claude Code's fields (ResultJson) with forkbox's
// stats beside them (StatsJson) and the session's model; the stream adds what EventStream::Line
// does, and --json prints that same line.
nlohmann::json ResultEvent(const Session& session, const Session::Turn& turn, const OneShotEnd& end,
                           const RunFacts& facts, const OutputOptions& out) {
  const SessionStats& stats = session.stats();
  ResultFields f;
  f.subtype = end.subtype;
  f.exit_code = end.code;
  f.is_error = end.code != kExitOk || !end.problem.empty();
  f.error = end.problem;
  f.result = facts.answered ? turn.outcome.final_text : std::string();
  f.duration_ms = facts.duration_ms;
  f.duration_api_ms = stats.api_ms;
  f.num_turns = stats.parent_turns;
  f.usage = stats.parent_usage;
  f.total_cost_usd = SessionCostUsd(stats, out.model);
  f.stop_reason = facts.stop_reason;
  nlohmann::json j =
      StatsJson(stats, f.result, agent::LoopStopName(turn.outcome.stop), session.context_bytes());
  j.update(ResultJson(f));
  j["model"] = out.model;
  return j;
}

// The answer in text form, as stdout and the -o file get it: ending in exactly one newline.
std::string AnswerText(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text + "\n";
}

// The answer into the -o file, when there is one to give (exit 0 or 5, text on stdout). A file a
// tool replaced or removed is opened again under the first open's rules: the answer goes where
// the user asked, never through what a tool planted there.
Status SaveLastMessage(const Session::Turn& turn, const OneShotEnd& end, const OutputOptions& out) {
  if (out.last_message == nullptr || !end.Answered()) return Status::Ok();
  const LastMessageFile& file = *out.last_message;
  int fd = file.fd.get();
  UniqueFd reopened;
  if (!StillNamed(file)) {
    Result<UniqueFd> again = CreateEmptied(file.dir.get(), file.name);
    if (!again.ok()) {
      return Status::Error(again.status().code(),
                           "cannot write --output-last-message '" + file.path +
                               "': it was replaced or removed during the run and cannot be "
                               "opened again: " +
                               again.status().message());
    }
    reopened = std::move(*again);
    fd = reopened.get();
  }
  // Emptied again: in a writable tree a tool may have written there since the start.
  int err = ::ftruncate(fd, 0) == 0 ? 0 : errno;
  if (err == 0) err = ::lseek(fd, 0, SEEK_SET) == 0 ? 0 : errno;
  if (err == 0) err = WriteAll(fd, AnswerText(turn.outcome.final_text));
  if (err == 0) return Status::Ok();
  // No part of an answer is left to pass for the whole (a write past `ulimit -f` stops midway).
  const bool emptied = ::ftruncate(fd, 0) == 0;
  return Status::FromErrno(
      err, "cannot write --output-last-message '" + file.path + (emptied ? "' (left empty)" : "'"));
}

// Classify, with a failed -o write as the run's failure.
OneShotEnd ClassifySaved(const Session::Turn& turn, const OutputOptions& out, const Status& saved) {
  OneShotEnd end = Classify(turn, out);
  if (saved.ok() || !end.Answered()) return end;
  return {kExitFailure, saved.message(), "error_during_execution"};
}

// What is left (writing the result) polls no flag and may block on a full pipe: from here on a
// signal ends forkbox at once (kExit). One that came after the last cancel check still stops the
// session: its answer is not given.
void TakeLateInterrupt(Session::Turn& turn) {
  SetInterruptMode(InterruptMode::kExit);
  const int sig = TakeInterrupt();
  if (sig == 0 || turn.interrupt_signal != 0) return;
  turn.interrupt_signal = sig;
  turn.outcome.stop = agent::LoopStop::kInterrupted;
  turn.outcome.final_text.clear();
}

// The result (json, stream-json) or the answer (text; `live`: on the terminal already). With
// facts.answered the loop's answer is whole, to print even when the -o file failed (as `tee`
// does). A failed write is recorded (RecordStdoutFailure).
void WriteResult(const Session& session, const Session::Turn& turn, const OneShotEnd& end,
                 const RunFacts& facts, const OutputOptions& out, bool live) {
  if (out.format == OutputFormat::kStreamJson) {
    out.events->Emit(ResultEvent(session, turn, end, facts, out));
  } else if (out.format == OutputFormat::kJson) {
    WriteStdout(out.events->Line(ResultEvent(session, turn, end, facts, out)));
  } else if (facts.answered && !live) {
    WriteStdout(AnswerText(turn.outcome.final_text));
  }
}

}  // namespace

int RunOneShot(Session& session, const std::string& prompt, const OutputOptions& out,
               Progress& progress) {
  const auto started = std::chrono::steady_clock::now();
  const bool streaming = out.format == OutputFormat::kStreamJson;
  // Piped, nothing is streamed to stdout: a streamed attempt can still fail and be retried, and
  // the turns before the last are narration; the answer is known only when the loop ends. On a
  // terminal (text format, streaming, not --quiet) every turn streams as it comes, narration
  // included, and a retried attempt is announced and printed again (StdoutStream::Restart).
  const bool live =
      out.format == OutputFormat::kText && out.stream && !out.quiet && ::isatty(STDOUT_FILENO) != 0;
  StdoutStream stream(live ? out.stream_restarted : nullptr);
  agent::TextSink sink;
  if (live) sink = [&](std::string_view s) { stream.Write(s); };
  RunFacts facts;
  auto on_response = [&](const agent::Response& r) {
    facts.stop_reason = ClaudeStopReason(r);
    if (streaming) {
      out.events->Emit({{"type", "assistant"},
                        {"message", AssistantMessageJson(r, out.model)},
                        {"parent_tool_use_id", nullptr}});
    }
    if (live) {
      stream.EndLine();  // The progress block starts on a line of its own.
      stream.TurnEnded();
      return;  // The narration is on the screen already.
    }
    if (agent::ToolUsesOf(r.message).empty()) return;
    std::string narration = agent::TextOf(r.message);
    while (!narration.empty() && narration.back() == '\n') narration.pop_back();
    if (!narration.empty()) progress.Note(narration);
  };
  auto on_results = [&](const agent::Message& results) {
    if (!streaming) return;
    out.events->Emit(
        {{"type", "user"}, {"message", MessageJson(results)}, {"parent_tool_use_id", nullptr}});
  };
  Session::Turn turn = session.Ask(prompt, sink, on_response, on_results);
  stream.EndLine();
  TakeLateInterrupt(turn);
  facts.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - started)
                          .count();
  const OneShotEnd answered = Classify(turn, out);
  const Status saved = SaveLastMessage(turn, answered, out);
  facts.answered = answered.Answered();
  WriteResult(session, turn, ClassifySaved(turn, out, saved), facts, out, live);
  // Again: the result's own write may have failed.
  const OneShotEnd end = ClassifySaved(turn, out, saved);
  if (!end.problem.empty()) WriteFd(STDERR_FILENO, "forkbox: " + end.problem + "\n");
  if (out.format == OutputFormat::kText && !out.quiet) {
    progress.Note("stats: " + StatsLine(session.stats(), session.context_bytes()));
  }
  return end.code;
}

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// What /tasks prints.
std::string TasksText(const SessionStats& s) {
  if (s.tasks.empty()) return "no tasks yet\n";
  std::string out;
  for (const TaskRecord& t : s.tasks) {
    out += "[task " + std::to_string(t.number) + "] " + t.description + ": " +
           (t.ok ? "ok" : "failed") + " (" + t.stats.stop_reason + "), " +
           Plural(t.stats.turns, "turn") + ", " +
           Plural(t.stats.input_tokens + t.stats.output_tokens, "token") + ", " +
           FormatSeconds(t.stats.elapsed_ms) + ", " + HumanBytes(t.stats.tool_output_bytes) +
           " of tool output kept out\n";
  }
  return out;
}

// A /command is "/" and a word of letters ("/help", "/quit now"), as in Claude Code; anything
// else starting with "/" (a path: "/usr/bin/python3 crashes") is a prompt.
bool IsSlashCommand(const std::string& input) {
  if (input.size() < 2 || input[0] != '/' || input.find('\n') != std::string::npos) return false;
  const size_t end = std::min(input.find_first_of(" \t"), input.size());
  for (size_t i = 1; i < end; ++i) {
    const char c = input[i];
    if ((c < 'a' || c > 'z') && (c < 'A' || c > 'Z')) return false;
  }
  return end > 1;
}

// A /command. Returns false for /quit.
bool RunCommand(Session& session, const std::string& input) {
  if (input == "/quit" || input == "/exit") return false;
  if (input == "/context") {
    const SessionStats& s = session.stats();
    const int64_t bytes = session.context_bytes();
    WriteFd(STDOUT_FILENO, "parent context: " + Plural(bytes, "byte") + " (~" +
                               Plural((bytes + 3) / 4, "token") + ") in " +
                               Plural(static_cast<int64_t>(session.message_count()), "message") +
                               "\n" + "kept out by subagents: " + Plural(s.KeptOutBytes(), "byte") +
                               " of tool output over " +
                               Plural(static_cast<int64_t>(s.tasks.size()), "task") + "\n");
  } else if (input == "/tasks") {
    WriteFd(STDOUT_FILENO, TasksText(session.stats()));
  } else if (input == "/clear") {
    session.Clear();
    WriteFd(STDOUT_FILENO, "context cleared\n");
  } else if (input == "/help") {
    WriteFd(STDOUT_FILENO,
            "/context  parent context size\n/tasks    what each task did and cost\n"
            "/clear    start a fresh context\n/quit     leave (or Ctrl-D)\n");
  } else {
    WriteFd(STDERR_FILENO, "unknown command " + input + " (try /help)\n");
  }
  return true;
}

// One prompt, streamed to the terminal. Returns non-zero to end the session (SIGTERM, SIGHUP).
int AskInteractively(Session& session, const std::string& input, const OutputOptions& out) {
  StdoutStream stream(out.stream_restarted);
  agent::TextSink sink;
  if (out.stream) sink = [&](std::string_view s) { stream.Write(s); };
  // A reply ends its line: the progress block of the tasks it starts begins on a line of its own
  // (parent/progress.h), and never erases the end of the text.
  Session::Turn turn = session.Ask(input, sink, [&](const agent::Response&) {
    stream.EndLine();
    stream.TurnEnded();
  });
  stream.EndLine();
  if (!out.stream && !turn.outcome.final_text.empty()) {
    WriteFd(STDOUT_FILENO, turn.outcome.final_text + "\n");
  }
  int late = TakeInterrupt();  // Ctrl-C during a model call that then answered without tools.
  if (turn.interrupt_signal != 0 || late != 0) {
    int sig = turn.interrupt_signal != 0 ? turn.interrupt_signal : late;
    if (sig != SIGINT) return EndBySignal(sig);
    WriteFd(STDERR_FILENO, "(interrupted)\n");
  } else if (turn.outcome.error) {
    WriteFd(STDERR_FILENO, "forkbox: model error: " + turn.outcome.error->ToString() + "\n");
  } else if (turn.outcome.stop == agent::LoopStop::kRefusal) {
    WriteFd(STDERR_FILENO, "forkbox: the model refused\n");
  } else if (turn.outcome.stop == agent::LoopStop::kMaxTurns) {
    WriteFd(STDERR_FILENO, "forkbox: stopped at the parent turn limit (--max-turns)\n");
  } else if (OneShotEnd end = Stopped(turn.outcome); end.code != kExitOk) {
    WriteFd(STDERR_FILENO, "forkbox: " + end.problem + "\n");
  } else if (Blank(turn.outcome.final_text)) {
    WriteFd(STDERR_FILENO, "forkbox: the model gave no answer\n");
  }
  return 0;
}

}  // namespace

std::unique_ptr<LineEditor> MakeSessionEditor(bool save_history) {
  LineEditorOptions options;
  options.in_fd = STDIN_FILENO;
  options.out_fd = STDERR_FILENO;
  options.save_history = save_history;
  // Held only while the editor reads the history and opens it for appending.
  Result<OwnedDir> dir = OpenForkboxStateDir(save_history);
  if (dir.ok()) {
    options.history_dir = &*dir;
  } else if (save_history || dir.status().code() != Status::Code::kNotFound) {
    WriteFd(STDERR_FILENO,
            "forkbox: warning: no prompt history: " + dir.status().ToString() + "\n");
  }
  return MakeLineEditor(options);
}

int RunInteractive(Session& session, const OutputOptions& out, LineEditor& editor,
                   Progress& progress) {
  (void)progress;
  WriteFd(STDERR_FILENO,
          "forkbox: interactive session. /help lists the commands, /quit or Ctrl-D leaves. "
          "Ctrl-C cancels running work.\n");
  while (true) {
    PromptInput in = editor.Read();
    if (in.kind == PromptInput::Kind::kEof) return kExitOk;
    if (in.kind == PromptInput::Kind::kInterrupted) return EndBySignal(in.signal);
    std::string input = Trim(in.text);
    if (input.empty()) continue;
    if (IsSlashCommand(input)) {
      if (!RunCommand(session, input)) return kExitOk;
      continue;
    }
    if (int code = AskInteractively(session, input, out); code != 0) return code;
  }
}

}  // namespace forkbox::parent
