// TaskTmpDir: <workdir>/.forkbox-tmp/task-XXXXXX, git-ignored, removed at the end of the task,
// and its short link /dev/shm/forkbox-XXXXXXXXXX.
#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include "base/unique_fd.h"
#include "sandbox/sandbox.h"

namespace forkbox::sandbox {
namespace {

namespace fs = std::filesystem;
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
  UniqueFd listing(openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* entries = listing ? fdopendir(listing.get()) : nullptr;
  if (entries == nullptr) return;
  (void)listing.release();  // Owned by `entries` now.
  while (const dirent* e = readdir(entries)) {
    struct stat st;
    char target[4096];
    if (std::string_view(e->d_name).rfind(kLinkPrefix, 0) != 0 ||
        fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode) ||
        st.st_uid != geteuid()) {
      continue;
    }
    ssize_t n = readlinkat(dir, e->d_name, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::string_view(target).find(std::string("/") + kDirName + "/task-") ==
            std::string_view::npos ||
        stat(target, &st) == 0 || errno != ENOENT) {
      continue;
    }
    (void)unlinkat(dir, e->d_name, 0);  // Best effort: a leftover, not this task's business.
  }
  closedir(entries);
}

// The short link to `target` (see TaskTmpDir), made now with kHere, else only named. Empty
// without /dev/shm. A name that exists already (another process's, or planted) is never reused:
// symlinkat fails with EEXIST and another name is drawn; with a `wanted` name, that is an error.
Result<std::string> MakeShortLink(const std::string& target, ShortLink mode,
                                  const std::string& wanted = "") {
  UniqueFd dir(open(kLinkDir, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir && errno == ENOENT) return std::string();
  if (!dir) return Status::FromErrno(errno, std::string("open ") + kLinkDir);
  struct stat st;
  if (fstat(dir.get(), &st) != 0) return Status::FromErrno(errno, std::string("stat ") + kLinkDir);
  if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return Status::InvalidArgument(std::string(kLinkDir) +
                                   " is writable by everyone but not sticky: another user could "
                                   "swap the temp dir's link");
  }
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

// Makes every directory in the tree writable first: a tool may have left read-only ones behind.
void RemoveTree(const std::string& path) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(
           path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
  }
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(path, ec);
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
  return OnDiskNamed(workdir, link, "");
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
  std::string root = workdir + "/" + kDirName;
  if (mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + root);
  }
  struct stat st;
  if (lstat(root.c_str(), &st) != 0) return Status::FromErrno(errno, "lstat " + root);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(root + " exists and is not a directory");
  std::string ignore = root + "/.gitignore";
  int fd = open(ignore.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0) {
    ssize_t n = write(fd, "*\n", 2);
    int err = errno;
    close(fd);
    if (n != 2) return Status::FromErrno(n < 0 ? err : EIO, "write " + ignore);
  } else if (errno != EEXIST) {
    return Status::FromErrno(errno, "create " + ignore);
  }
  std::string templ = root + "/task-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return Status::FromErrno(errno, "mkdtemp " + templ);
  TaskTmpDir dir;
  dir.path_ = templ;  // From here on the destructor removes it.
  Result<std::string> short_path = MakeShortLink(templ, link, name);
  if (!short_path.ok()) return short_path.status().WithContext("the temp dir's short path");
  dir.short_ = std::move(*short_path);
  dir.own_link_ = link == ShortLink::kHere;
  return dir;
}

void TaskTmpDir::ApplyTo(Policy* policy) const {
  policy->tmpdir = path_;
  policy->tmpdir_short = short_;
}

TaskTmpDir::~TaskTmpDir() {
  if (path_.empty()) return;
  if (own_link_ && !short_.empty()) RemoveShortLink(short_, path_);
  RemoveTree(path_);
  // Leave no trace: drop .forkbox-tmp when no other task is using it.
  fs::path root = fs::path(path_).parent_path();
  std::error_code ec;
  bool only_ignore = true;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path().filename() != ".gitignore") only_ignore = false;
  }
  if (!ec && only_ignore) {
    fs::remove(root / ".gitignore", ec);
    if (rmdir(root.c_str()) != 0) {
      // Another task created its directory meanwhile: keep it git-ignored.
      int fd = open((root / ".gitignore").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ssize_t n = write(fd, "*\n", 2);
        (void)n;
        close(fd);
      }
    }
  }
}

TaskTmpDir::TaskTmpDir(TaskTmpDir&& other) noexcept
    : path_(std::exchange(other.path_, {})),
      short_(std::exchange(other.short_, {})),
      own_link_(std::exchange(other.own_link_, false)) {}

TaskTmpDir& TaskTmpDir::operator=(TaskTmpDir&& other) noexcept {
  if (this != &other) {
    TaskTmpDir old(std::move(*this));
    path_ = std::exchange(other.path_, {});
    short_ = std::exchange(other.short_, {});
    own_link_ = std::exchange(other.own_link_, false);
  }
  return *this;
}

}  // namespace forkbox::sandbox
