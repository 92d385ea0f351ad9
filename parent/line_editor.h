// The interactive prompt's input, one logical prompt at a time. The session knows only this
// interface, not libedit.
//
// On a terminal (stdin and stderr both TTYs) it is a libedit editor: arrow keys and emacs editing,
// Ctrl-R searches the history backwards, a line ending in `\` continues on the next line, and a
// bracketed paste (the terminal's `\e[200~` ... `\e[201~`, enabled while the editor lives) is
// taken as text, newlines included, never as separate prompts: a paste with newlines is shown and
// the prompt continues on a new line, Enter on it sends everything. The history is kept in a file
// (see HistoryFile) when one is given. While the session works on a prompt, the terminal neither
// echoes nor line-edits (type-ahead appears in the editor at the next prompt instead of inside
// the output or the progress block).
// Without a terminal: plain lines read with read(2), as typed or piped.
//
// A pasted CR or CRLF is one newline. Input is decoded as UTF-8 whatever the locale (C.UTF-8 when
// the locale's codeset is not UTF-8); a paste libedit cannot insert is kept as if it had several
// lines, never dropped.
//
// Ctrl-C (SIGINT, recorded by the parent's handler; parent/signals.h) while reading drops the
// line being typed (with a bracketed paste still waiting for its end marker), or on an empty line
// says how to leave, and reads on. Ctrl-D on an empty line is the end, and so is a Ctrl-D typed
// into a bracketed paste still waiting for its end marker (a 0x04 with nothing after it; one in
// the middle of a paste is pasted text, dropped with the other control bytes). SIGTERM and SIGHUP
// end the read with kInterrupted, even inside an unfinished paste; so does the terminal going away
// (a read that returns 0 or fails with EIO: SIGHUP, whether or not the signal came first).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/state_dir.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::parent {

struct PromptInput {
  enum class Kind { kPrompt, kEof, kInterrupted };
  Kind kind = Kind::kEof;
  std::string text;  // kPrompt: the prompt, continuation lines joined with '\n'.
  int signal = 0;    // kInterrupted: SIGTERM or SIGHUP.
};

// The prompt history on disk: one JSON string per line (a prompt may span lines), appended as
// prompts are entered. Opened beneath forkbox's own directory through no link (base/state_dir.h:
// a planted link is refused and named), only when it is a regular file of one name, made 0600;
// more than twice kMaxEntries lines are cut to the last kMaxEntries when opened.
class HistoryFile {
 public:
  static constexpr size_t kMaxEntries = 1000;
  // Opens `name` in `dir` (writable: created when missing; else read only, a missing file holds
  // nothing); `entries` receives what it holds, oldest first.
  static Result<HistoryFile> Open(const OwnedDir& dir, const std::string& name, bool writable,
                                  std::vector<std::string>* entries);
  Status Append(const std::string& entry);

 private:
  explicit HistoryFile(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

class LineEditor {
 public:
  virtual ~LineEditor() = default;
  virtual PromptInput Read() = 0;
};

struct LineEditorOptions {
  int in_fd = 0;
  int out_fd = 2;  // The prompt and the echo.
  // The directory of the history file `history_name` (null: none), used while the editor is
  // made. save: new entries are appended (false: read only, as with --no-session-persistence).
  const OwnedDir* history_dir = nullptr;
  std::string history_name = "history";
  bool save_history = true;
};

// The libedit editor when in_fd and out_fd are terminals, else the plain reader. A history file
// that cannot be used is a warning on out_fd; the editor works without it.
std::unique_ptr<LineEditor> MakeLineEditor(const LineEditorOptions& options);

// What Ctrl-C on an empty prompt prints.
inline constexpr const char* kQuitHint = "(to leave, press Ctrl-D or type /quit)";

}  // namespace forkbox::parent
