// Session persistence: the parent's conversation in $XDG_STATE_HOME/forkbox/sessions/<id>.jsonl
// (default ~/.local/state; the directory 0700, each file 0600, created O_EXCL). Every file and
// directory from `forkbox` down is reached relative to an open directory through no link
// (base/state_dir.h says where the line is and why): a link a tool planted there is refused and
// named, so no forkbox run writes, chmods or removes through it. Line 1
// is a header {"type":"session", id, workdir, created, first_prompt}; then one line per completed
// prompt {"type":"turn", prompt, messages (the whole conversation after it: the parent's context
// is small by design), turns, input_tokens, output_tokens}, appended when the prompt ends, so a
// crash loses at most the prompt in flight, and {"type":"clear"} when /clear emptied the context
// (a resumed session starts from there). An interactive session's header has no first prompt: its
// first turn's `prompt` is the session's first prompt. The header is written with the first turn:
// a session without turns leaves at most an empty file, which is no session: removed when it
// ends, or (a crash; a confined forkbox, which may not write the state dir) when the next new
// session starts (SessionLog::Create). The forkbox that writes a
// session holds an flock on it (SessionLog), so that no other one appends to it meanwhile. Only
// the parent's conversation is kept: children's contexts are never persisted (only
// --transcript-dir records them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/message.h"
#include "base/state_dir.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::parent {

struct SessionInfo {
  std::string id;
  std::string workdir;
  int64_t created = 0;      // Unix seconds.
  int64_t modified = 0;     // Unix seconds (the file's mtime).
  int64_t modified_ns = 0;  // The same mtime in nanoseconds since the epoch.
  std::string first_prompt;
  int64_t turns = 0;  // Completed prompts.
  int64_t tokens = 0;
  int64_t skipped_lines = 0;  // Corrupt or truncated lines (LoadedSession::warning names them).
};

struct LoadedSession {
  SessionInfo info;
  std::vector<agent::Message> messages;
  std::string warning;  // Non-empty when corrupt or truncated lines were skipped (named).
  // >= 0: the last line is cut (no newline, not JSON) and starts at this offset.
  int64_t cut_at = -1;
  bool needs_newline = false;  // The last line is whole but lost its newline.
};

// OpenForkboxStateDir()'s sessions/, made 0700 when `create` (and made 0700 if it is not). A link
// at `forkbox` or `sessions` is kPermissionDenied (RefusedOwnName): the caller says so and saves
// nothing; a missing one without `create` is kNotFound.
Result<OwnedDir> OpenSessionsDir(bool create);

// Every readable session, most recently modified first (to the nanosecond; then the latest
// created, then the greatest id).
std::vector<SessionInfo> ListSessions(const OwnedDir& dir);

// Resumes from the last good line: a corrupt or truncated line is skipped (each line is a whole
// snapshot) and named in `warning`. A missing or headerless file is an error, and so is a header
// whose id is not `id` (the file's name): that id would be the path appended to.
Result<LoadedSession> LoadSession(const OwnedDir& dir, const std::string& id);
// The most recently modified session of `workdir` that has a turn, or whose turns were all lost
// to corrupt lines (resumed with the warning that names them: an older session continued instead
// took the new prompt silently). Reads only the header (first line) of other workdirs' sessions.
Result<std::string> LatestSessionFor(const OwnedDir& dir, const std::string& workdir);

class SessionLog {
 public:
  // Creates <dir>/<id>.jsonl, empty: its header is written with the first turn, so a session
  // left before any prompt is no session (LoadSession refuses an empty file), and its file is
  // removed when the log goes. Locked like Resume. First removes the empty files no live forkbox
  // holds: sessions that ended so (a crash, or a confined forkbox that could not remove its own).
  static Result<SessionLog> Create(const OwnedDir& dir, const std::string& id,
                                   const std::string& workdir, const std::string& first_prompt);
  // Opens <dir>/<id>.jsonl for appending, locks it (flock) for as long as the log lives, and only
  // then loads it into *loaded (as LoadSession). A session another live forkbox holds is
  // kUnavailable, naming it. The file is made 0600 if it is not. Only a cut last line
  // (LoadedSession::cut_at) is cut off; every other line, corrupt or not, stays.
  static Result<SessionLog> Resume(const OwnedDir& dir, const std::string& id,
                                   LoadedSession* loaded);
  // Appends one completed prompt: the prompt, the conversation after it, and what it cost.
  Status AddTurn(const std::string& prompt, const std::vector<agent::Message>& conversation,
                 int64_t turns, const agent::Usage& usage);
  // Records that the conversation was emptied (/clear).
  Status AddClear();

  SessionLog(SessionLog&&) noexcept = default;
  SessionLog& operator=(SessionLog&&) = delete;
  ~SessionLog();

 private:
  explicit SessionLog(UniqueFd fd, UniqueFd dir = UniqueFd(), std::string name = "",
                      std::string header = "")
      : fd_(std::move(fd)),
        dir_(std::move(dir)),
        name_(std::move(name)),
        header_(std::move(header)) {}
  UniqueFd fd_;
  // Created by this log (`name_` in the sessions directory `dir_`, an O_PATH descriptor): removed
  // at its end while header_ is unwritten.
  UniqueFd dir_;
  std::string name_;
  std::string header_;  // Not yet written: the header line, written with the first turn.
};

}  // namespace forkbox::parent
