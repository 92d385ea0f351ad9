// A parent conversation (the context persists across prompts) and the two ways to drive it:
// one-shot (answer on stdout, exit code) and the interactive prompt (/context, /quit).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/loop.h"
#include "agent/provider.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "parent/events.h"
#include "parent/line_editor.h"
#include "parent/progress.h"
#include "parent/session_store.h"
#include "parent/stats.h"
#include "parent/tool_runner.h"

namespace forkbox::parent {

class Session {
 public:
  Session(agent::Provider& provider, agent::LoopOptions options, ParentToolRunner& runner,
          SessionStats& stats);

  struct Turn {
    agent::LoopOutcome outcome;
    int interrupt_signal = 0;  // Non-zero: the turn was cancelled.
  };
  // Runs one user prompt to the end. on_text receives streamed assistant text (fragments of an
  // attempt that is then retried included); on_response receives each complete model reply;
  // on_results each user message of tool results, as the model is sent it.
  Turn Ask(const std::string& prompt, const agent::TextSink& on_text,
           const std::function<void(const agent::Response&)>& on_response = {},
           const std::function<void(const agent::Message&)>& on_results = {});

  // Replaces the conversation with a resumed one (parent/session_store.h).
  void Restore(std::vector<agent::Message> messages) { messages_ = std::move(messages); }
  // Empties the conversation (/clear), in the session file too: a resumed session starts fresh.
  void Clear();
  // Where each completed prompt is persisted; null: nowhere (--no-session-persistence).
  void set_log(SessionLog* log) { log_ = log; }
  int64_t context_bytes() const { return ContextBytes(messages_); }
  size_t message_count() const { return messages_.size(); }
  const SessionStats& stats() const { return stats_; }

 private:
  // A failed write is said once; the session goes on without its file.
  void Saved(const Status& st);

  agent::Provider& provider_;
  agent::LoopOptions options_;
  ParentToolRunner& runner_;
  SessionStats& stats_;
  std::vector<agent::Message> messages_;
  SessionLog* log_ = nullptr;
};

// The -o file, opened before the sandbox (it may lie anywhere the user may write) and emptied,
// so that a run without an answer never leaves an older run's answer there. Unlike a shell's `>`
// it follows no symbolic link: this runs with the user's rights, and a tool of an earlier session
// could have planted `answer.md -> ~/.bashrc` in the workdir for the model's text to land in. It
// must be a regular file of one name: a FIFO without a reader fails at once instead of blocking,
// a device or a hard link is refused. Its directory is held too (O_PATH), so that the end of the
// run finds the file by its name whatever mounts the sandbox gave the parent since, and opens it
// again under the same rules when a tool replaced or removed it.
struct LastMessageFile {
  UniqueFd fd;
  UniqueFd dir;
  std::string name;  // In `dir`.
  std::string path;  // As given.
};
Result<LastMessageFile> OpenLastMessageFile(const std::string& path);

struct OutputOptions {
  OutputFormat format = OutputFormat::kText;
  bool stream = true;  // Interactive mode streams the model's text to the terminal.
  bool quiet = false;
  EventStream* events = nullptr;  // The session id; the stream-json events.
  std::string model;
  bool save_history = true;  // Interactive prompts are appended to the history file.
  // Called by the provider's retry hook before it announces a retry; the session points it at
  // its live stdout stream while one runs. May be null.
  std::function<void()>* stream_restarted = nullptr;
  // True once forkbox's pid, the waiter above the session (sandbox::EnterLauncher), has died:
  // its death comes as SIGTERM, which a one-shot run then reports as that death. May be empty.
  std::function<bool()> waiter_died;
  pid_t waiter_pid = 0;
  // -o/--output-last-message: a one-shot answer is written here too (as stdout's text form),
  // before the result; a failed write fails the run. Null: none.
  const LastMessageFile* last_message = nullptr;
};

// Adds the wall time of every model call to *api_ms (duration_api_ms).
class TimedProvider : public agent::Provider {
 public:
  TimedProvider(agent::Provider& inner, int64_t* api_ms) : inner_(inner), api_ms_(api_ms) {}
  agent::CallResult Complete(const agent::Request& request,
                             const agent::TextSink& on_text) override;
  const agent::ProviderConfig& config() const override { return inner_.config(); }

 private:
  agent::Provider& inner_;
  int64_t* api_ms_;
};

// Returns the exit code (parent/exit_codes.h). One-shot stdout carries exactly the final answer
// (the same bytes with or without streaming, ending in one newline; nothing of a failed attempt),
// or the --json object; the text of the turns that call tools is narration and goes to stderr
// as progress.
int RunOneShot(Session& session, const std::string& prompt, const OutputOptions& out,
               Progress& progress);
// The interactive editor with the prompt history next to the sessions (a warning on stderr when
// the history cannot be used). Made before the parent confines itself: the history file lies
// outside the directories the confined parent may write.
std::unique_ptr<LineEditor> MakeSessionEditor(bool save_history);

int RunInteractive(Session& session, const OutputOptions& out, LineEditor& editor,
                   Progress& progress);

}  // namespace forkbox::parent
