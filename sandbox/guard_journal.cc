#include "sandbox/guard_journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <string_view>

#include "base/file.h"
#include "base/path.h"
#include "base/state_dir.h"
#include "sandbox/cgroup.h"

namespace forkbox::sandbox {
namespace {

constexpr std::string_view kPrefix = "guard-";
constexpr std::string_view kNewPrefix = "new-";  // A record being made (Create).
// A record's parse holds about four times its size: a bound well above any real surface (hooks and
// configs of kilobytes), well below what a garbled one could make us allocate.
constexpr size_t kMaxRecordBytes = size_t{64} << 20;

// The record named `name` in `dir`, opened and locked when its owner is gone: a regular file of
// ours, still under that name (another Recover may have removed it). Empty otherwise.
UniqueFd LockDeadRecord(int dir, const std::string& name) {
  UniqueFd fd(openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat held, named;
  if (!fd || fstat(fd.get(), &held) != 0 || !S_ISREG(held.st_mode) || held.st_uid != geteuid() ||
      flock(fd.get(), LOCK_EX | LOCK_NB) != 0 ||
      fstatat(dir, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 || named.st_ino != held.st_ino ||
      named.st_dev != held.st_dev) {
    return UniqueFd();
  }
  return fd;
}

// Puts back the surface `record` describes; appends what it did, or why it could not. Nothing
// thrown leaves it (the library's edge: a session's start or `forkbox sandbox`'s).
void PutBack(const std::string& record, const UserGitConfig& user,
             std::vector<std::string>& lines) {
  try {
    Result<GitSurfaceGuard> guard = GitSurfaceGuard::Reload(record, user);
    if (!guard.ok()) {
      lines.push_back("a record not used: " + guard.status().message());
      return;
    }
    for (const std::string& line : guard->Restore(GitSurfaceGuard::After::kDone)) {
      lines.push_back(guard->workdir() + ": " + line);
    }
  } catch (const std::exception& e) {
    lines.push_back(std::string("a record not put back: ") + e.what());
  }
}

}  // namespace

Result<GuardJournal> GuardJournal::Create(const std::string& dir) {
  Result<UniqueFd> d = CreateDirectoriesNoLinks(dir, 0700);
  if (!d.ok()) return d.status().WithContext("the git guard's journal");
  return CreateIn(d->get(), dir);
}

Result<GuardJournal> GuardJournal::CreateIn(int d, const std::string& dir) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    unsigned char bytes[8];
    if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
      return Status::FromErrno(errno, "getrandom");
    }
    std::string hex;
    for (unsigned char b : bytes) {
      hex += "0123456789abcdef"[b >> 4];
      hex += "0123456789abcdef"[b & 15];
    }
    // Made under a name Recover never reads and locked before it gets a record's name: a record
    // is never seen unlocked while its owner lives. A Recover may sweep the new name before the
    // lock (a dead creator's, as far as it can tell): the rename then fails and another is drawn.
    const std::string made = std::string(kNewPrefix) + hex;
    const std::string name = std::string(kPrefix) + hex;
    UniqueFd fd(openat(d, made.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd && errno == EEXIST) continue;
    if (!fd) return Status::FromErrno(errno, "create " + dir + "/" + made);
    // Held for the owner's life; the kernel lets go of it however the owner dies.
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    if (renameat2(d, made.c_str(), d, name.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == ENOENT || errno == EEXIST) continue;
      return Status::FromErrno(errno, "rename " + dir + "/" + made);
    }
    return GuardJournal(std::move(fd));
  }
  return Status::Internal("no free name for the git guard's journal in " + dir);
}

GuardJournal::~GuardJournal() { Clear(); }

GuardJournal& GuardJournal::operator=(GuardJournal&& other) noexcept {
  if (this != &other) {
    Clear();
    fd_ = std::move(other.fd_);
    written_ = std::move(other.written_);
  }
  return *this;
}

void GuardJournal::Clear() {
  if (fd_) (void)ftruncate(fd_.get(), 0);  // Best effort: an old record only restores again.
  written_.clear();
}

Status GuardJournal::Write(const GitSurfaceGuard& guard) {
  if (!fd_) return Status::Internal("GuardJournal::Write without a journal");
  std::string record = guard.Serialize();
  if (record == written_) return Status::Ok();
  // The new record over the old; a kill part way leaves a checksum that fails, which Recover
  // reports. Records change only between tool calls, never while one runs.
  for (size_t done = 0; done < record.size();) {
    const ssize_t n =
        pwrite(fd_.get(), record.data() + done, record.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, "write the git guard's journal");
    done += static_cast<size_t>(n);
  }
  if (ftruncate(fd_.get(), static_cast<off_t>(record.size())) != 0) {
    return Status::FromErrno(errno, "truncate the git guard's journal");
  }
  written_ = std::move(record);
  return Status::Ok();
}

std::vector<std::string> GuardJournal::Recover(const std::string& dir, const UserGitConfig& user) {
  // Through no link anywhere, as Create made it.
  UniqueFd d = OpenAt2(AT_FDCWD, dir.c_str(), O_RDONLY | O_DIRECTORY,
                       RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (!d) return {};  // No journal yet, or a link on the way.
  return RecoverIn(d.get(), dir, user);
}

std::vector<std::string> GuardJournal::RecoverIn(int d, const std::string& dir,
                                                 const UserGitConfig& user) {
  std::vector<std::string> lines;
  for (const std::string& name : ListDirNames(d)) {
    const bool made = name.rfind(kNewPrefix, 0) == 0;  // A creator that died before the rename.
    if (!made && name.rfind(kPrefix, 0) != 0) continue;
    UniqueFd record = LockDeadRecord(d, name);
    if (!record) continue;
    Result<std::string> bytes = ReadToEnd(record.get(), kMaxRecordBytes, dir + "/" + name);
    if (!bytes.ok()) lines.push_back("a record not used: " + bytes.status().message());
    if (!made && bytes.ok() && !bytes->empty()) PutBack(*bytes, user, lines);
    (void)unlinkat(d, name.c_str(), 0);  // Best effort: the next Recover tries again.
  }
  return lines;
}

namespace {

// Why this run keeps no journal, and what that costs: the guard still puts the surface back at
// the end, but only a journal lets the next start do it after a SIGKILL.
std::string NotJournaled(const std::string& why) {
  return "git trust surface not journaled (if this forkbox is killed, the next start cannot put "
         "back what its tools changed there; set XDG_STATE_HOME to a directory of yours that "
         "tools cannot write): " +
         why;
}

}  // namespace

JournalStart StartGuardJournal(const std::vector<std::string>& writable_trees,
                               const UserGitConfig& user) {
  JournalStart start;
  // First what a killed forkbox's tools left running, so that none plants again after the put-back.
  start.put_back = PidsCgroup::EndLeftovers();
  // The user's state directory as laid out, links included; from forkbox's own down, no link.
  Result<OwnedDir> state = OpenForkboxStateDir(true);
  Result<OwnedDir> made = state.ok() ? OpenOwnedDir(*state, "guards", true) : state.status();
  if (!made.ok()) {
    start.warning = NotJournaled(made.status().message());
    return start;
  }
  const std::string& canonical = made->path;  // Resolved once, then reached through no link.
  for (const std::string& tree : writable_trees) {
    if (PathWithin(canonical, tree)) {
      start.warning = NotJournaled(canonical + " lies in " + tree + ", which tools can write");
      return start;
    }
  }
  for (const std::string& line : GuardJournal::RecoverIn(made->fd.get(), canonical, user)) {
    start.put_back.push_back("git trust surface left changed by a killed forkbox, put back: " +
                             line);
  }
  Result<GuardJournal> journal = GuardJournal::CreateIn(made->fd.get(), canonical);
  if (!journal.ok()) {
    start.warning = NotJournaled(journal.status().message());
    return start;
  }
  start.journal.emplace(std::move(*journal));
  return start;
}

}  // namespace forkbox::sandbox
