// GuardJournal: git's trust surface record kept on disk while its guard runs, for when its owner
// cannot put the surface back itself: a SIGKILL of every forkbox process at once (`pkill -9
// forkbox`, `docker kill`), a crash, a power cut. Each owner holds a lock (flock) on a file of its
// own for its life; the next forkbox to start (Recover) puts back the surface of every record
// whose owner is gone, says what it changed, and removes the record.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/git_surface.h"

namespace forkbox::sandbox {

struct JournalStart;

class GuardJournal {
 public:
  // A fresh record file in `dir` (made 0700 where missing, through no link), locked,
  // empty until Write.
  static Result<GuardJournal> Create(const std::string& dir);

  GuardJournal() = default;
  GuardJournal(GuardJournal&&) noexcept = default;
  GuardJournal& operator=(GuardJournal&& other) noexcept;  // Empties the file it replaces.
  // Empties the file: its owner ended, the surface put back. The file goes at the next Recover (a
  // confined owner may not unlink in `dir`).
  ~GuardJournal();

  // The guard's record replaces the file's; nothing is written when it did not change. Works
  // through the descriptor, so a confined owner can write it.
  Status Write(const GitSurfaceGuard& guard);
  bool active() const { return fd_.valid(); }
  // Empties the file now (the destructor does too): the surface is back. No allocation, so a
  // keeper can call it (Sandbox::AfterCommand).
  void Clear();
  // The record's descriptor, for a keeper that closes its others (Sandbox::AfterCommand); -1.
  int descriptor() const { return fd_.get(); }

  // Puts back the surface of each record in `dir` whose owner is gone (its lock is free), then
  // removes the record. Returns one line per change ("/w: remove .git/hooks/pre-commit") and per
  // record it could not use (cut short, its workdir gone). Never blocks: a live owner's record,
  // another user's, a FIFO or a link is left alone; `dir` is reached through no link. `user`: the
  // user's own git config (Policy::user_git_config), which a record does not hold
  // (GitSurfaceGuard::Reload).
  static std::vector<std::string> Recover(const std::string& dir, const UserGitConfig& user);

 private:
  friend JournalStart StartGuardJournal(const std::vector<std::string>& writable_trees,
                                        const UserGitConfig& user);
  explicit GuardJournal(UniqueFd fd) : fd_(std::move(fd)) {}
  // Create and Recover in the open directory `dir`, which `dir_name` names in messages.
  static Result<GuardJournal> CreateIn(int dir, const std::string& dir_name);
  static std::vector<std::string> RecoverIn(int dir, const std::string& dir_name,
                                            const UserGitConfig& user);
  UniqueFd fd_;
  std::string written_;  // The record in the file now.
};

// The start of a session or a `forkbox sandbox` command, before its first guard: what a killed
// one's tools left running killed (PidsCgroup::EndLeftovers), what it left in git's trust surface
// put back (Recover), then a journal of its own, in $XDG_STATE_HOME/forkbox/guards (reached as
// base/state_dir.h says: through no link from `forkbox` down; hidden from the tools' read scope,
// like the rest of forkbox's state, and never writable by them).
// Neither where tools could write the records, so forge what is "put back": the journal's
// directory in one of `writable_trees` (canonical; PersistentWritableTrees). `user`: as Recover's.
struct JournalStart {
  std::optional<GuardJournal> journal;  // None: `warning` says why.
  // EndLeftovers' and Recover's lines, each a warning to print as is: "git trust surface left
  // changed by a killed forkbox, put back: /w: remove .git/hooks/pre-commit".
  std::vector<std::string> put_back;
  std::string warning;
};
JournalStart StartGuardJournal(const std::vector<std::string>& writable_trees,
                               const UserGitConfig& user);

}  // namespace forkbox::sandbox
