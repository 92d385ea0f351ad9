// TaskTmpDir: <workdir>/.forkbox-tmp/task-XXXXXX, git-ignored, removed at the end of the task.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "sandbox/sandbox.h"

namespace forkbox::sandbox {
namespace {

namespace fs = std::filesystem;
constexpr char kDirName[] = ".forkbox-tmp";

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

Result<TaskTmpDir> TaskTmpDir::Create(const std::string& workdir) {
  if (workdir.empty() || workdir[0] != '/') {
    return Status::InvalidArgument("TaskTmpDir: workdir must be absolute: " + workdir);
  }
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
  dir.path_ = templ;
  return dir;
}

TaskTmpDir::~TaskTmpDir() {
  if (path_.empty()) return;
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

TaskTmpDir::TaskTmpDir(TaskTmpDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}

TaskTmpDir& TaskTmpDir::operator=(TaskTmpDir&& other) noexcept {
  if (this != &other) {
    TaskTmpDir old(std::move(*this));
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

}  // namespace forkbox::sandbox
