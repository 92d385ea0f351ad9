// TaskTmpDir: <workdir>/.forkbox-tmp/task-XXXXXX, git-ignored, removed at the end of the task,
// and its short link /dev/shm/forkbox-XXXXXXXXXX; or (kShmDir) a directory of that name alone.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/file.h"
#include "base/unique_fd.h"
#include "sandbox/sandbox.h"

namespace forkbox::sandbox {
namespace {

constexpr char kDirName[] = ".forkbox-tmp";
constexpr char kLinkDir[] = "/dev/shm";
constexpr char kLinkPrefix[] = "forkbox-";
constexpr int kLinkAttempts = 16;

// 10 characters of [a-z0-9] (51 bits): the link's name cannot be guessed in advance.
Result<std::string> RandomName() {
  unsigned char bytes[10];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    return Status::FromErrno(errno, "getrandom");
  }
  std::string name = kLinkPrefix;
  for (unsigned char b : bytes) name += "abcdefghijklmnopqrstuvwxyz0123456789"[b % 36];
  return name;
}

// Our links whose task dir is gone: left by a forkbox or task killed with SIGKILL (layer 1, or
// --sandbox=off) once its workdir was cleaned. A live task's link never dangles (its directory
// is made before it and removed after it), and another user's links are not ours to remove.
void SweepDanglingLinks(int dir) {
  for (const std::string& name : ListDirNames(dir)) {
    struct stat st;
    char target[4096];
    if (name.rfind(kLinkPrefix, 0) != 0 ||
        fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode) ||
        st.st_uid != geteuid()) {
      continue;
    }
    ssize_t n = readlinkat(dir, name.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::string_view(target).find(std::string("/") + kDirName + "/task-") ==
            std::string_view::npos ||
        stat(target, &st) == 0 || errno != ENOENT) {
      continue;
    }
    (void)unlinkat(dir, name.c_str(), 0);  // Best effort: a leftover, not this task's business.
  }
}

// /dev/shm opened with `flags` (O_PATH or O_RDONLY); an empty descriptor when there is none. One
// writable by everyone must be sticky, or another user could swap what we make there.
Result<UniqueFd> OpenLinkDir(int flags) {
  UniqueFd dir(open(kLinkDir, flags | O_DIRECTORY | O_CLOEXEC));
  if (!dir && errno == ENOENT) return UniqueFd();
  if (!dir) return Status::FromErrno(errno, std::string("open ") + kLinkDir);
  struct stat st;
  if (fstat(dir.get(), &st) != 0) return Status::FromErrno(errno, std::string("stat ") + kLinkDir);
  if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return Status::InvalidArgument(std::string(kLinkDir) +
                                   " is writable by everyone but not sticky: another user could "
                                   "swap the temp dir");
  }
  return dir;
}

// The short link to `target` (see TaskTmpDir), made now with kHere, else only named. Empty
// without /dev/shm. A name that exists already (another process's, or planted) is never reused:
// symlinkat fails with EEXIST and another name is drawn; with a `wanted` name, that is an error.
Result<std::string> MakeShortLink(const std::string& target, ShortLink mode,
                                  const std::string& wanted = "") {
  Result<UniqueFd> opened = OpenLinkDir(O_PATH);
  if (!opened.ok()) return opened.status();
  const UniqueFd dir = std::move(*opened);
  if (!dir) return std::string();
  if (mode == ShortLink::kHere) SweepDanglingLinks(dir.get());
  for (int attempt = 0; attempt < (wanted.empty() ? kLinkAttempts : 1); ++attempt) {
    Result<std::string> name = wanted.empty() ? RandomName() : Result<std::string>(wanted);
    if (!name.ok()) return name.status();
    const std::string path = std::string(kLinkDir) + "/" + *name;
    if (mode != ShortLink::kHere) return path;
    if (symlinkat(target.c_str(), dir.get(), name->c_str()) == 0) return path;
    if (errno != EEXIST || !wanted.empty()) return Status::FromErrno(errno, "symlink " + path);
  }
  return Status::Internal(std::string("no free name for the temp dir's link in ") + kLinkDir);
}

// Removes `link` while it still points at `target` (a tool in layer 1 may have replaced it).
// Best effort, like the tree's removal: the end of a task has no one to report a failure to.
void RemoveShortLink(const std::string& link, const std::string& target) {
  char buf[4096];
  ssize_t n = readlink(link.c_str(), buf, sizeof buf);
  if (n > 0 && static_cast<size_t>(n) < sizeof buf &&
      std::string_view(buf, static_cast<size_t>(n)) == target) {
    (void)unlink(link.c_str());
  }
}

// Creates `name` in `dir` with "*\n" unless it exists: the temp dirs stay out of git.
Status EnsureGitIgnore(int dir) {
  UniqueFd fd(
      openat(dir, ".gitignore", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) {
    if (errno == EEXIST) return Status::Ok();
    return Status::FromErrno(errno, std::string("create ") + kDirName + "/.gitignore");
  }
  if (write(fd.get(), "*\n", 2) != 2) {
    return Status::FromErrno(errno, std::string("write ") + kDirName + "/.gitignore");
  }
  return Status::Ok();
}

// True when `dir` holds nothing but .gitignore.
bool OnlyGitIgnore(int dir) {
  const std::vector<std::string> names = ListDirNames(dir);
  return names.size() == 1 && names[0] == ".gitignore";
}

// The task dir `name` beneath `root`, opened and locked (flock LOCK_EX): its owner holds the lock
// for its life, and the kernel lets go of it when the owner dies, however it dies. Empty when
// another holds it, or the name no longer leads to the directory locked (a sweep removed it).
UniqueFd LockTaskDir(int root, const std::string& name) {
  UniqueFd fd(openat(root, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd || flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return UniqueFd();
  struct stat held, named;
  if (fstat(fd.get(), &held) != 0 ||
      fstatat(root, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
      held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
    return UniqueFd();
  }
  return fd;
}

// Removes the task dirs beneath `root` whose owner died before it could (a task killed on
// Ctrl-C, SIGTERM or its timeout; a session killed with SIGKILL): their locks are free. Names
// start with `prefix`; in the shared /dev/shm (`own_only`) only our own directories are ours to
// remove (root could open another user's).
void SweepDeadTaskDirs(int root, const char* prefix = "task-", bool own_only = false) {
  for (const std::string& name : ListDirNames(root)) {
    // Best effort: what cannot be removed now is tried again by the next task. In /dev/shm only
    // names of our own shape (forkbox-XXXXXXXXXX) are looked at.
    if (name.rfind(prefix, 0) != 0 || (own_only && name.size() != std::strlen(kLinkPrefix) + 10)) {
      continue;
    }
    UniqueFd dead = LockTaskDir(root, name);
    struct stat st;
    if (!dead || (own_only && (fstat(dead.get(), &st) != 0 || st.st_uid != geteuid()))) continue;
    (void)RemoveTreeAt(root, name.c_str());
  }
}

// A fresh directory beneath `root`, locked (*lock): task-XXXXXX (on disk) or, `in_shm`,
// forkbox-XXXXXXXXXX; mkdirat with a random name, never an existing one; a name a concurrent
// sweep took is given up for another.
Result<std::string> MakeTaskDir(int root, UniqueFd* lock, bool in_shm = false) {
  for (int attempt = 0; attempt < kLinkAttempts; ++attempt) {
    Result<std::string> random = RandomName();
    if (!random.ok()) return random.status();
    const std::string name =
        in_shm ? *random : "task-" + random->substr(std::strlen(kLinkPrefix), 6);
    if (mkdirat(root, name.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      return Status::FromErrno(errno,
                               std::string("mkdir ") + (in_shm ? kLinkDir : kDirName) + "/" + name);
    }
    *lock = LockTaskDir(root, name);
    if (*lock) return name;
  }
  return Status::Internal(std::string("no free task directory name in ") + kDirName);
}

// Why <workdir>/.forkbox-tmp (`path`) could not be opened (`open_error`), said so the user can act:
// a directory another user owns and this one may not enter is what their forkbox session, running
// or killed, leaves in a shared workdir, no symbolic link; anything else is refused as before.
Status DotFolderError(int workdir, const std::string& path, const Status& open_error) {
  struct stat st;
  if (fstatat(workdir, kDirName, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid != geteuid()) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
    const std::string uid = std::to_string(st.st_uid);
    return Status::PermissionDenied(
        path + ": a directory of another user (uid " + uid + ", mode " + mode +
        ") that this one may not use (" + open_error.message() +
        "); that user's forkbox made it, in a session running or killed. Run forkbox in a "
        "directory of your own, or have uid " +
        uid +
        " (or root) remove it once no session of "
        "theirs runs here");
  }
  return open_error.WithContext(path + " must be a directory, not a symbolic link");
}

}  // namespace

Result<TaskTmpDir> TaskTmpDir::Create(const std::string& workdir, ShortLink link) {
  if (workdir.empty() || workdir[0] != '/') {
    return Status::InvalidArgument("TaskTmpDir: workdir must be absolute: " + workdir);
  }
  if (link == ShortLink::kPrivateDir) {
    Result<std::string> name = MakeShortLink("", link);
    if (!name.ok()) return name.status().WithContext("the temp dir's short path");
    if (!name->empty()) {
      TaskTmpDir dir;
      dir.short_ = std::move(*name);
      return dir;
    }
    link = ShortLink::kHere;  // No /dev/shm here, so none in layer 2 either.
  }
  if (link == ShortLink::kShmDir) return InShm();
  return OnDiskNamed(workdir, link, "");
}

Result<TaskTmpDir> TaskTmpDir::InShm() {
  Result<UniqueFd> shm = OpenLinkDir(O_RDONLY);
  if (!shm.ok()) return shm.status().WithContext("the temp dir");
  TaskTmpDir dir;
  if (!*shm) return dir;  // No /dev/shm: no temp dir (see kShmDir).
  dir.root_ = std::move(*shm);
  SweepDeadTaskDirs(dir.root_.get(), kLinkPrefix, /*own_only=*/true);
  Result<std::string> name = MakeTaskDir(dir.root_.get(), &dir.lock_, /*in_shm=*/true);
  if (!name.ok()) return name.status();
  dir.name_ = std::move(*name);
  dir.path_ = std::string(kLinkDir) + "/" + dir.name_;
  return dir;
}

Result<TaskTmpDir> TaskTmpDir::OnDiskAt(const std::string& workdir, const std::string& short_path) {
  const std::string prefix = std::string(kLinkDir) + "/" + kLinkPrefix;
  if (short_path.rfind(prefix, 0) != 0 ||
      short_path.find('/', prefix.size()) != std::string::npos) {
    return Status::InvalidArgument("TaskTmpDir::OnDiskAt: not a short path: " + short_path);
  }
  return OnDiskNamed(workdir, ShortLink::kHere, short_path.substr(std::strlen(kLinkDir) + 1));
}

Result<TaskTmpDir> TaskTmpDir::OnDiskNamed(const std::string& workdir, ShortLink link,
                                           const std::string& name) {
  // Everything below is relative to descriptors: a tool that swaps .forkbox-tmp (or a task dir)
  // for a symbolic link never makes us create, or later remove, anything through it. The workdir
  // is canonical (ResolvePolicy): a link in its place is refused too.
  TaskTmpDir dir;
  dir.workdir_ = UniqueFd(open(workdir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.workdir_) return Status::FromErrno(errno, "open " + workdir);
  if (mkdirat(dir.workdir_.get(), kDirName, 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + workdir + "/" + kDirName);
  }
  Result<UniqueFd> root = OpenDirBeneath(dir.workdir_.get(), kDirName, O_RDONLY);
  if (!root.ok())
    return DotFolderError(dir.workdir_.get(), workdir + "/" + kDirName, root.status());
  dir.root_ = std::move(*root);
  FORKBOX_RETURN_IF_ERROR(EnsureGitIgnore(dir.root_.get()));
  SweepDeadTaskDirs(dir.root_.get());
  Result<std::string> task = MakeTaskDir(dir.root_.get(), &dir.lock_);
  if (!task.ok()) return task.status();
  dir.name_ = std::move(*task);
  dir.path_ = workdir + "/" + kDirName + "/" + dir.name_;  // The destructor removes it now.
  Result<std::string> short_path = MakeShortLink(dir.path_, link, name);
  if (!short_path.ok()) return short_path.status().WithContext("the temp dir's short path");
  dir.short_ = std::move(*short_path);
  dir.own_link_ = link == ShortLink::kHere;
  return dir;
}

void TaskTmpDir::ApplyTo(Policy* policy) const {
  policy->tmpdir = path_;
  policy->tmpdir_short = short_;
}

TaskTmpDir::~TaskTmpDir() { Remove(); }

void TaskTmpDir::Remove() {
  if (!root_) return;
  const UniqueFd root = std::move(root_);
  if (!workdir_) {  // kShmDir: a dead one is swept by the next Create.
    // Emptied through its own descriptor, then removed: under RestrictToReadOnly only rmdir is
    // allowed in /dev/shm (RemoveTreeAt would try an unlink there first).
    for (const std::string& name : ListDirNames(lock_.get())) {
      (void)RemoveTreeAt(lock_.get(), name.c_str());
    }
    (void)unlinkat(root.get(), name_.c_str(), AT_REMOVEDIR);  // Best effort: nobody to report to.
    lock_.reset();
    return;
  }
  if (own_link_ && !short_.empty()) RemoveShortLink(short_, path_);
  (void)RemoveTreeAt(root.get(), name_.c_str());  // Best effort: nobody to report to.
  lock_.reset();
  SweepDeadTaskDirs(root.get());
  // Leave no trace: drop .forkbox-tmp when no other task is using it. rmdir never follows a link,
  // and removes only an empty directory, whatever now has that name.
  if (!OnlyGitIgnore(root.get())) return;
  (void)unlinkat(root.get(), ".gitignore", 0);
  if (unlinkat(workdir_.get(), kDirName, AT_REMOVEDIR) != 0) {
    (void)EnsureGitIgnore(root.get());  // Another task created its directory meanwhile.
  }
}

TaskTmpDir::TaskTmpDir(TaskTmpDir&& other) noexcept
    : path_(std::exchange(other.path_, {})),
      short_(std::exchange(other.short_, {})),
      own_link_(std::exchange(other.own_link_, false)),
      workdir_(std::move(other.workdir_)),
      root_(std::move(other.root_)),
      lock_(std::move(other.lock_)),
      name_(std::exchange(other.name_, {})) {}

TaskTmpDir& TaskTmpDir::operator=(TaskTmpDir&& other) noexcept {
  if (this != &other) {
    TaskTmpDir old(std::move(*this));
    path_ = std::exchange(other.path_, {});
    short_ = std::exchange(other.short_, {});
    own_link_ = std::exchange(other.own_link_, false);
    workdir_ = std::move(other.workdir_);
    root_ = std::move(other.root_);
    lock_ = std::move(other.lock_);
    name_ = std::exchange(other.name_, {});
  }
  return *this;
}

}  // namespace forkbox::sandbox
