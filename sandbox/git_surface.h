// Git's trust surface, guarded by comparison: both layers, and the only git protection of layer 1
// (no mount namespace there). The surface is what PlanMounts binds read-only in layer 2: config,
// config.worktree, commondir, hooks/, info/, worktrees/*/, modules/**/ (config, hooks), a `.git`
// file, and every nested repository's `.git` below the workdir. A guard records it once; after each
// tool call or task (when every process the call started is gone) Restore puts back every change
// and reports it, so nothing a tool leaves there runs at the user's next git command outside the
// sandbox. Only paths beneath the workdir are guarded (Landlock keeps the rest unwritable), and
// every change is made through descriptors beneath the workdir, never following a symlink.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/file.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/git_config.h"
#include "sandbox/namespaces.h"

namespace forkbox::sandbox {

class GitSurfaceGuard {
 public:
  // Records the surface below `workdir` (absolute, canonical) and below each `writable` tree (the
  // policy's --writable paths) outside it (OtherSurfaceTrees): a tool plants in any writable tree
  // alike, e.g. the repository of a worktree made writable so that tools can commit. Creates a
  // missing hooks/ and info/ in each git dir within the workdir or a `writable` tree, like
  // layer 2's plan. `surface`, when given, receives the surface found (PlanGitSurface), so that a
  // spawn made right after need not walk the workdir again (Sandbox::Spawn's `git_surface`).
  // `user`: the user's own git config (Policy::user_git_config), followed by this walk and by
  // every later one of Restore.
  // `workdir_id`: the workdir the caller holds (a session's descriptor of it, IdentityOf); the
  // record is refused (kNotFound) when the name `workdir` no longer leads to it without a link:
  // moved or swapped from outside since start-up, it would guard another tree than the one tools
  // write through that descriptor. Without it, the directory the name leads to now is guarded.
  // Refused (kResourceExhausted) when the surface cannot be recorded whole: more than 100,000
  // entries or 256 MiB, or a directory 16 levels down that is not empty. What a record misses
  // could not be put back. A directory it cannot list (another user's) is recorded as itself.
  static Result<GitSurfaceGuard> Take(const std::string& workdir, const UserGitConfig& user,
                                      MountPlan* surface = nullptr,
                                      const std::vector<std::string>& writable = {},
                                      std::optional<FileIdentity> workdir_id = std::nullopt);

  // Puts the recorded surface back and returns one line per change undone, relative to the
  // workdir ("restored .git/config", "removed .git/hooks/pre-commit"), in another writable tree
  // after its path ("/src/repo: removed .git/hooks/pre-commit"). A repository that appeared
  // meanwhile (git init) keeps only what git init makes: config with safe keys only (core
  // basics, user, branch, remote url/fetch, extensions), hooks named *.sample, info/; anything
  // else in its surface is removed. A repository that was deleted stays deleted; a `.git`
  // directory replaced by a file loses the file. A part of the surface that cannot be walked
  // whole now (a tool flooded or chmodded it) is put back whole ("restored .git/hooks whole
  // (...)"): what the walk did not see is not kept. The new state becomes the record, unless
  // `after` is kDone (a one-shot command: the guard is not used again, so no new record).
  // A tree whose name no longer leads to it (InPlace) has its record put back through its
  // descriptor, and no more: what appeared in it can only be found by name ("could NOT look for
  // new git surface: ...").
  enum class After { kKeepGuarding, kDone };
  std::vector<std::string> Restore(After after = After::kKeepGuarding);

  // Whether the workdir's name, and each other tree's, still leads to the directory guarded, with
  // no link on the way (kNotFound, saying which, if not). The walks that find new surface go by
  // name, so a caller stops running tools once this fails: their new repositories go unseen.
  Status InPlace() const;

  // Whether a git config file holds only keys a fresh `git init` (and clone) writes, none that
  // makes git run a program or read config from elsewhere. `why` receives the first other line.
  static bool ConfigIsSafe(const std::string& text, std::string* why);

  // The record as bytes, for a GuardJournal: the workdir (path, device and inode) and every
  // recorded entry, then each other tree's record, ending in a checksum.
  std::string Serialize() const;
  // The guard a record (Serialize) describes, for a process that did not take it. Refused: a
  // record cut short or garbled, a path in it that is not plainly beneath the workdir, and a
  // workdir that is not the very directory it was taken in (kNotFound: removed, made again, or a
  // link now). Another tree that is no longer its directory is left out, the rest kept; so is
  // the workdir's own part when other trees remain (Restore says it was not put back). A record
  // in the format before other trees were guarded (2: the workdir's alone, left by an older
  // forkbox killed before an upgrade) is reloaded as a guard of the workdir alone, refused as
  // above; Serialize writes the new one. The record does not hold the user's git config: `user`
  // is what the reloaded guard follows (Take's).
  static Result<GitSurfaceGuard> Reload(std::string_view record, const UserGitConfig& user);
  const std::string& workdir() const { return workdir_; }
  // No repository and no agent config was found in any tree: nothing to guard.
  bool empty() const;

  // The O_PATH descriptors of the trees that Restore works through, the workdir's first: a
  // process that closes its other descriptors before it restores (a keeper, Sandbox::Spawn's
  // `orphaned`) keeps these. descriptor(i) for i < descriptors(); no allocation (a keeper calls
  // it after a fork).
  size_t descriptors() const { return 1 + trees_.size(); }
  int descriptor(size_t i = 0) const { return i == 0 ? root_.get() : trees_[i - 1].root_.get(); }

  struct Entry {
    enum class Kind { kAbsent, kFile, kDir, kSymlink, kOther } kind = Kind::kAbsent;
    unsigned mode = 0;
    std::string data;  // File content or symlink target.
    bool operator==(const Entry&) const = default;
  };

 private:
  GitSurfaceGuard() = default;
  // The record of `plan`'s surface (PlanGitSurface(workdir, user, ...)) below `workdir` as it is
  // now. `expected`: what `workdir` must still lead to (Take's `workdir_id`).
  static Result<GitSurfaceGuard> Record(const std::string& workdir,
                                        const std::vector<std::string>& writable,
                                        const UserGitConfig& user, const MountPlan& plan,
                                        std::optional<FileIdentity> expected = std::nullopt);
  // InPlace for this tree alone.
  Status TreeInPlace() const;
  // The guard of one tree, `workdir` (its surface alone walked; `writable`: the other trees),
  // which must still be `expected`.
  static Result<GitSurfaceGuard> TakeTree(const std::string& workdir,
                                          const std::vector<std::string>& writable,
                                          const UserGitConfig& user, FileIdentity expected);
  // Restore of this tree alone (trees_ untouched).
  std::vector<std::string> RestoreTree(After after);
  // Restore's steps: the recorded .git directories now gone (a replacement is removed), the
  // recorded surface put back, the surface that appeared cleaned. Each appends to `lines`.
  std::vector<std::string> ForgetGoneRepos(std::vector<std::string>& lines) const;
  void RestoreRecorded(const std::vector<std::string>& gone, std::vector<std::string>& lines) const;
  // The surface now, root by root (those in `gone` left out). A root that cannot be walked whole
  // (past the walk's budget, too deep, or a directory listed in the record that cannot be listed
  // now) is put back whole from the record instead, and named in `whole`.
  std::map<std::string, Entry> WalkCurrent(const std::vector<std::string>& gone,
                                           std::vector<std::string>& whole,
                                           std::vector<std::string>& lines) const;
  // CleanNewPath for each of `paths` (absolute) below the workdir and outside the record.
  void CleanNewPaths(const std::vector<std::string>& paths, const std::vector<std::string>& gone,
                     std::vector<std::string>& lines) const;
  // Also returns the surface it walked.
  MountPlan CleanNewSurface(const std::vector<std::string>& gone,
                            std::vector<std::string>& lines) const;
  // The operations in progress in `plan` (MountPlan::operations), those of repositories that
  // appeared too: what changed since the record and would make git run a command when the user
  // continues the operation is undone (an exec line a tool added to a rebase's todo is dropped, a
  // strategy that is not git's own is put back as recorded, a link in a directory's place goes).
  // The rest stays, so a rebase a tool started stays continuable.
  void UndoOperations(const MountPlan& plan, std::vector<std::string>& lines) const;
  std::string workdir_;
  std::vector<std::string> writable_;     // The other writable trees (Take's `writable`).
  UserGitConfig user_;                    // Take's `user`: every walk of the surface follows it.
  UniqueFd root_;                         // O_PATH of the workdir.
  std::vector<std::string> roots_;        // Surface roots, relative to the workdir.
  std::vector<std::string> git_dirs_;     // `.git` directories (relative), recorded as such.
  std::map<std::string, Entry> entries_;  // Every path at or below a root.
  // MountPlan::operations below the workdir that existed (relative), compared, never put back.
  std::map<std::string, Entry> operations_;
  // The guards of the other writable trees (OtherSurfaceTrees), each rooted at its tree, with no
  // trees_ of its own.
  std::vector<GitSurfaceGuard> trees_;
  // Reload: why the workdir's own record was left out (its trees kept); empty: it was not.
  std::string left_out_;
};

}  // namespace forkbox::sandbox
