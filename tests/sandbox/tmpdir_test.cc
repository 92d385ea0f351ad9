#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sandbox/sandbox.h"
#include "tests/sandbox/probe_util.h"

namespace forkbox::sandbox {
namespace {

using testing::FileExists;
using testing::ReadFile;

TEST(TaskTmpDir, LivesInAGitIgnoredDotFolderAndIsRemoved) {
  std::string work = testing::MakeTempDir("tmpdir");
  std::string path;
  {
    Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    path = dir->path();
    EXPECT_EQ(path.rfind(work + "/.forkbox-tmp/", 0), 0u) << path;
    EXPECT_EQ(ReadFile(work + "/.forkbox-tmp/.gitignore"), "*\n");
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    // A tool leaves a read-only tree behind.
    ASSERT_EQ(mkdir((path + "/ro").c_str(), 0755), 0);
    std::ofstream(path + "/ro/file") << "x";
    ASSERT_EQ(chmod((path + "/ro").c_str(), 0500), 0);
  }
  EXPECT_FALSE(FileExists(path));
  EXPECT_FALSE(FileExists(work + "/.forkbox-tmp")) << "no trace left when no task uses it";
}

TEST(TaskTmpDir, TwoTasksGetDistinctDirectoriesAndMovesTransferOwnership) {
  std::string work = testing::MakeTempDir("tmpdir2");
  Result<TaskTmpDir> a = TaskTmpDir::Create(work);
  Result<TaskTmpDir> b = TaskTmpDir::Create(work);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->path(), b->path());
  std::string a_path = a->path();
  {
    TaskTmpDir moved = std::move(*a);
    EXPECT_EQ(moved.path(), a_path);
    EXPECT_TRUE(a->path().empty());
  }
  EXPECT_FALSE(FileExists(a_path));
  EXPECT_TRUE(FileExists(b->path()));
  EXPECT_EQ(ReadFile(work + "/.forkbox-tmp/.gitignore"), "*\n") << "still used by b";
}

// A TaskTmpDir made in a forked process that then waits; its path comes back over a pipe.
struct Holder {
  pid_t pid = -1;
  std::string path;
};
Holder HoldTaskTmpDir(const std::string& work, ShortLink link = ShortLink::kInNamespaces) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  Holder h;
  h.pid = fork();
  if (h.pid == 0) {
    close(fds[0]);
    Result<TaskTmpDir> dir = TaskTmpDir::Create(work, link);
    const std::string path = dir.ok() ? dir->path() : "";
    std::ofstream(path + "/left") << "by a killed task";
    if (write(fds[1], path.data(), path.size()) != static_cast<ssize_t>(path.size())) _exit(1);
    close(fds[1]);
    pause();  // Until killed: its destructor never runs.
    _exit(0);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) h.path.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  return h;
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

// A task killed before its destructor ran (Ctrl-C, a timeout, SIGKILL) leaves its directory: the
// next Create in that workdir removes it, while a live task's stays; the last Remove takes the
// rest and the dot folder. Without the locks, the killed task's directory stays for good.
TEST(TaskTmpDir, ADeadTasksDirectoryIsSweptALiveOnesIsNot) {
  const std::string work = testing::MakeTempDir("tmpdir-sweep");
  Holder killed = HoldTaskTmpDir(work);
  Holder live = HoldTaskTmpDir(work);
  ASSERT_FALSE(killed.path.empty());
  ASSERT_FALSE(live.path.empty());
  KillAndReap(killed.pid);
  ASSERT_TRUE(FileExists(killed.path + "/left"));
  {
    Result<TaskTmpDir> next = TaskTmpDir::Create(work, ShortLink::kInNamespaces);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    EXPECT_FALSE(FileExists(killed.path)) << "the dead task's directory is swept";
    EXPECT_TRUE(FileExists(live.path + "/left")) << "a live task's directory is kept";
    KillAndReap(live.pid);
  }
  EXPECT_FALSE(FileExists(live.path)) << "the last Remove sweeps it";
  EXPECT_FALSE(FileExists(work + "/.forkbox-tmp"));
}

std::string LinkTarget(const std::string& link) {
  char buf[4096];
  ssize_t n = readlink(link.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The short path that tools get as TMPDIR: a link in /dev/shm, short enough for Python's
// forkserver socket ($TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX in 108 bytes) whatever the workdir.
TEST(TaskTmpDir, ShortLinkInDevShmPointsAtTheDirectoryAndGoesWithIt) {
  std::string work = testing::MakeTempDir("tmpdir-link");
  std::string link, path;
  {
    Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    link = dir->short_path();
    path = dir->path();
    EXPECT_EQ(link.rfind("/dev/shm/forkbox-", 0), 0u) << link;
    EXPECT_EQ(link.size(), std::string("/dev/shm/forkbox-").size() + 10);
    struct stat st;
    ASSERT_EQ(lstat(link.c_str(), &st), 0) << strerror(errno);
    EXPECT_TRUE(S_ISLNK(st.st_mode));
    EXPECT_EQ(st.st_uid, geteuid());
    EXPECT_EQ(LinkTarget(link), path);
    std::ofstream(link + "/via-link") << "x";
    EXPECT_EQ(ReadFile(path + "/via-link"), "x");
    Policy policy;
    dir->ApplyTo(&policy);
    EXPECT_EQ(policy.tmpdir, path);
    EXPECT_EQ(policy.tmpdir_short, link);
  }
  struct stat st;
  EXPECT_NE(lstat(link.c_str(), &st), 0) << link << " left behind";
  EXPECT_FALSE(FileExists(path));
}

TEST(TaskTmpDir, InNamespacesOnlyNamesTheLink) {
  std::string work = testing::MakeTempDir("tmpdir-ns");
  Result<TaskTmpDir> dir = TaskTmpDir::Create(work, ShortLink::kInNamespaces);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(dir->short_path().rfind("/dev/shm/forkbox-", 0), 0u);
  struct stat st;
  EXPECT_NE(lstat(dir->short_path().c_str(), &st), 0) << "made in the namespaces, not here";
}

// `forkbox sandbox` in layer 2: the temp dir is made on the private /dev/shm, nothing on disk.
TEST(TaskTmpDir, PrivateDirLeavesTheDiskAlone) {
  std::string work = testing::MakeTempDir("tmpdir-private");
  Result<TaskTmpDir> dir = TaskTmpDir::Create(work, ShortLink::kPrivateDir);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(dir->path(), "");
  EXPECT_EQ(dir->short_path().rfind("/dev/shm/forkbox-", 0), 0u);
  EXPECT_EQ(dir->short_path().size(), std::string("/dev/shm/forkbox-").size() + 10);
  struct stat st;
  EXPECT_NE(lstat(dir->short_path().c_str(), &st), 0) << "made in the namespaces, not here";
  EXPECT_FALSE(FileExists(work + "/.forkbox-tmp"));
  Policy policy;
  dir->ApplyTo(&policy);
  EXPECT_EQ(policy.tmpdir, "");
  EXPECT_EQ(policy.tmpdir_short, dir->short_path());
  // Its fall back to layer 1: the task dir on disk, the link at the same short path.
  std::string path;
  {
    Result<TaskTmpDir> disk = TaskTmpDir::OnDiskAt(work, dir->short_path());
    ASSERT_TRUE(disk.ok()) << disk.status().ToString();
    path = disk->path();
    EXPECT_EQ(path.rfind(work + "/.forkbox-tmp/task-", 0), 0u) << path;
    EXPECT_EQ(disk->short_path(), dir->short_path());
    EXPECT_EQ(LinkTarget(dir->short_path()), path);
    EXPECT_FALSE(TaskTmpDir::OnDiskAt(work, dir->short_path()).ok()) << "the name is taken";
    EXPECT_FALSE(TaskTmpDir::OnDiskAt(work, "/tmp/x").ok());
  }
  EXPECT_NE(lstat(dir->short_path().c_str(), &st), 0) << "link left behind";
  EXPECT_FALSE(FileExists(path));
}

// A read-only session's parent and a `write: none` task: the temp dir is a directory on
// /dev/shm, nothing on disk, removed with what tools left in it (a read-only tree too). A dead
// owner's is swept by the next one made, a live owner's is kept, and, as root, so is another
// user's, dead or not. Without the locks, or without the owner check, the test fails.
TEST(TaskTmpDir, AShmDirLeavesTheDiskAloneAndIsSweptWhenItsOwnerDies) {
  struct stat st;
  if (stat("/dev/shm", &st) != 0) GTEST_SKIP() << "no /dev/shm";
  const std::string work = testing::MakeTempDir("tmpdir-shm");
  std::string path;
  {
    Result<TaskTmpDir> dir = TaskTmpDir::Create(work, ShortLink::kShmDir);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    path = dir->path();
    EXPECT_EQ(path.rfind("/dev/shm/forkbox-", 0), 0u) << path;
    EXPECT_EQ(path.size(), std::string("/dev/shm/forkbox-").size() + 10);
    EXPECT_EQ(dir->short_path(), "");
    ASSERT_EQ(lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    EXPECT_FALSE(FileExists(work + "/.forkbox-tmp"));
    ASSERT_EQ(mkdir((path + "/ro").c_str(), 0755), 0);
    std::ofstream(path + "/ro/file") << "x";
    ASSERT_EQ(chmod((path + "/ro").c_str(), 0500), 0);
  }
  EXPECT_FALSE(FileExists(path));

  Holder killed = HoldTaskTmpDir(work, ShortLink::kShmDir);
  Holder live = HoldTaskTmpDir(work, ShortLink::kShmDir);
  Holder other = HoldTaskTmpDir(work, ShortLink::kShmDir);
  ASSERT_EQ(killed.path.rfind("/dev/shm/forkbox-", 0), 0u);
  ASSERT_EQ(live.path.rfind("/dev/shm/forkbox-", 0), 0u);
  KillAndReap(killed.pid);
  KillAndReap(other.pid);
  const bool root = geteuid() == 0;
  if (root) {
    ASSERT_EQ(chown(other.path.c_str(), 65534, 65534), 0);
  }
  // A directory of another shape is none of ours, though its name starts the same.
  const std::string foreign = "/dev/shm/forkbox-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(foreign.c_str(), 0700), 0);
  {
    Result<TaskTmpDir> next = TaskTmpDir::Create(work, ShortLink::kShmDir);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    EXPECT_TRUE(FileExists(foreign));
    (void)rmdir(foreign.c_str());
    EXPECT_FALSE(FileExists(killed.path)) << "the dead owner's directory is swept";
    EXPECT_TRUE(FileExists(live.path + "/left")) << "a live owner's directory is kept";
    if (root) {
      EXPECT_TRUE(FileExists(other.path + "/left")) << "another user's is not ours";
    }
  }
  KillAndReap(live.pid);
  ASSERT_TRUE(FileExists(live.path + "/left")) << "a dead owner's stays until the next";
  Result<TaskTmpDir> last = TaskTmpDir::Create(work, ShortLink::kShmDir);
  ASSERT_TRUE(last.ok());
  EXPECT_FALSE(FileExists(live.path));
  if (root) {
    EXPECT_TRUE(FileExists(other.path + "/left"));
    std::filesystem::remove_all(other.path);
  }
}

// A /dev/shm that everyone may write but that is not sticky would let another user swap the
// temp dir: the shm temp dir is refused there, with a message saying why. Probed in a mount
// namespace of its own (root) over a fresh tmpfs; the control is the same tmpfs with the bit.
TEST(TaskTmpDir, AShmDirRefusesADevShmWithoutTheStickyBit) {
  if (geteuid() != 0) GTEST_SKIP() << "mounts a tmpfs over /dev/shm in a namespace of its own";
  const std::string work = testing::MakeTempDir("tmpdir-shm-sticky");
  auto made_with = [&work](const char* mode) {
    return testing::RunProbe(
        [mode] {
          return unshare(CLONE_NEWNS) == 0 &&
                 mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                 mount("tmpfs", "/dev/shm", "tmpfs", 0, mode) == 0;
        },
        [&work] {
          Result<TaskTmpDir> dir = TaskTmpDir::Create(work, ShortLink::kShmDir);
          if (dir.ok()) return dir->path().rfind("/dev/shm/forkbox-", 0) == 0 ? 0L : -2L;
          return dir.status().message().find("not sticky") != std::string::npos ? 1L : -1L;
        });
  };
  testing::ProbeResult refused = made_with("mode=0777");
  ASSERT_TRUE(refused.reported) << "could not mount the probe's /dev/shm";
  EXPECT_EQ(refused.value, 1L);
  testing::ProbeResult control = made_with("mode=1777");
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.value, 0L);
}

// A tool in layer 1 may replace the link (same uid, /dev/shm writable): the end of the task
// removes only the link it made.
TEST(TaskTmpDir, AReplacedLinkIsNotRemoved) {
  std::string work = testing::MakeTempDir("tmpdir-swap");
  std::string link;
  {
    Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    link = dir->short_path();
    ASSERT_EQ(unlink(link.c_str()), 0);
    ASSERT_EQ(symlink(work.c_str(), link.c_str()), 0);
  }
  EXPECT_EQ(LinkTarget(link), work);
  unlink(link.c_str());
}

// Another local user cannot swap the link to redirect a task's temp files: /dev/shm is sticky.
// Control: the same unlink in a world-writable directory without the sticky bit succeeds.
int UnlinkAsNobody(const std::string& path) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    _exit(unlink(path.c_str()) == 0 ? 0 : (errno == EPERM || errno == EACCES ? 1 : 3));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TaskTmpDir, AnotherUserCannotSwapTheLink) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  std::string work = testing::MakeTempDir("tmpdir-other");
  ASSERT_EQ(chmod(work.c_str(), 0755), 0);
  Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(UnlinkAsNobody(dir->short_path()), 1) << "another user removed the link";
  EXPECT_EQ(LinkTarget(dir->short_path()), dir->path());
  std::string open_dir = testing::MakeTempDir("tmpdir-open");
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  std::string control = open_dir + "/link";
  ASSERT_EQ(symlink(dir->path().c_str(), control.c_str()), 0);
  EXPECT_EQ(UnlinkAsNobody(control), 0) << "control: without the sticky bit it can be swapped";
}

// F4 (rt61): in a shared (1777) workdir, another user's session leaves its .forkbox-tmp (0700).
// This user's temp dir then failed with "must be a directory, not a symbolic link: ...
// Permission denied", which it is not. Now the error names the owner and what to do. As uid 4242
// (no right to enter it), in a child.
TEST(TaskTmpDir, AnotherUsersDotFolderIsNamedAsSuch) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as other users";
  const std::string work = testing::MakeTempDir("tmpdir-shared");
  ASSERT_EQ(chmod(work.c_str(), 01777), 0);
  const std::string dot = work + "/.forkbox-tmp";
  ASSERT_EQ(mkdir(dot.c_str(), 0700), 0);
  ASSERT_EQ(chown(dot.c_str(), 65534, 65534), 0);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(out[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(4242, 4242, 4242) != 0 ||
        setresuid(4242, 4242, 4242) != 0) {
      _exit(2);
    }
    Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
    const std::string text = dir.ok() ? "made" : dir.status().ToString();
    _exit(write(out[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : 3);
  }
  close(out[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
  close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(text.find(dot + ": a directory of another user (uid 65534, mode 0700)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("have uid 65534 (or root) remove it"), std::string::npos) << text;
  EXPECT_EQ(text.find("symbolic link"), std::string::npos) << text;
}

// A link left by a killed task whose directory is gone is swept when the next link is made;
// a link whose task dir exists (a live task) and one not into a task dir are kept.
TEST(TaskTmpDir, MakingALinkSweepsOurDanglingOnes) {
  std::string work = testing::MakeTempDir("tmpdir-sweep");
  const std::string token = std::to_string(getpid());
  const std::string gone = "/dev/shm/forkbox-sweep-gone-" + token;
  const std::string live = "/dev/shm/forkbox-sweep-live-" + token;
  const std::string other = "/dev/shm/forkbox-sweep-other-" + token;
  ASSERT_EQ(mkdir((work + "/.forkbox-tmp").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((work + "/.forkbox-tmp/task-live").c_str(), 0700), 0);
  // A live task holds its directory's lock (else the directory is a dead task's, and swept).
  const int held = open((work + "/.forkbox-tmp/task-live").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  ASSERT_EQ(symlink((work + "/.forkbox-tmp/task-gone").c_str(), gone.c_str()), 0);
  ASSERT_EQ(symlink((work + "/.forkbox-tmp/task-live").c_str(), live.c_str()), 0);
  ASSERT_EQ(symlink((work + "/not-a-task").c_str(), other.c_str()), 0);
  Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  struct stat st;
  EXPECT_NE(lstat(gone.c_str(), &st), 0) << "the dangling link was kept";
  EXPECT_EQ(lstat(live.c_str(), &st), 0) << "a live task's link was removed";
  EXPECT_EQ(lstat(other.c_str(), &st), 0) << "a link that is not a task's was removed";
  unlink(gone.c_str());
  unlink(live.c_str());
  unlink(other.c_str());
  close(held);
}

// The names in `dir`, "." and ".." left out.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename());
  }
  return names;
}

// The inode `path` names after following every link, or 0.
ino_t InodeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// A tool planted .forkbox-tmp as a link out of the workdir before the task: nothing is made
// through it. The control shows the link is a working way out for anything that goes by path.
TEST(TaskTmpDir, APlantedDotFolderLinkIsRefusedAndNothingIsMadeThrough) {
  const std::string work = testing::MakeTempDir("tmpdir-plant");
  const std::string outside = testing::MakeTempDir("tmpdir-plant-out");
  ASSERT_EQ(symlink(outside.c_str(), (work + "/.forkbox-tmp").c_str()), 0);
  // Control: a mkdir by path lands outside.
  ASSERT_EQ(mkdir((work + "/.forkbox-tmp/probe").c_str(), 0700), 0);
  ASSERT_TRUE(FileExists(outside + "/probe"));
  ASSERT_EQ(rmdir((outside + "/probe").c_str()), 0);

  Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().ToString().find("not a symbolic link"), std::string::npos)
      << dir.status().ToString();
  EXPECT_EQ(Entries(outside), std::vector<std::string>{});
}

// After the task dir exists, a tool moves .forkbox-tmp away and puts a link to a directory
// outside in its place, holding a tree of the task dir's name: the end of the task removes the
// real task dir (where it now is) and nothing outside. Control: the task dir's path now leads to
// the outside file, so a removal by path would delete it.
TEST(TaskTmpDir, ASwappedDotFolderNeverLeadsTheRemovalOutside) {
  const std::string work = testing::MakeTempDir("tmpdir-swap");
  const std::string outside = testing::MakeTempDir("tmpdir-swap-out");
  std::string name;
  {
    Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    name = dir->path().substr(dir->path().rfind('/') + 1);
    std::ofstream(dir->path() + "/mine") << "task's";
    ASSERT_EQ(mkdir((outside + "/" + name).c_str(), 0700), 0);
    std::ofstream(outside + "/" + name + "/keep") << "precious";
    ASSERT_EQ(rename((work + "/.forkbox-tmp").c_str(), (work + "/moved").c_str()), 0);
    ASSERT_EQ(symlink(outside.c_str(), (work + "/.forkbox-tmp").c_str()), 0);
    ASSERT_NE(InodeOf(dir->path() + "/keep"), 0u);  // Control.
    ASSERT_EQ(InodeOf(dir->path() + "/keep"), InodeOf(outside + "/" + name + "/keep"));
  }
  EXPECT_EQ(ReadFile(outside + "/" + name + "/keep"), "precious");
  EXPECT_FALSE(FileExists(work + "/moved/" + name)) << "the real task dir is removed";
}

// A link a tool left in its temp dir is removed, never followed. Control: it leads outside.
TEST(TaskTmpDir, ALinkInsideIsRemovedNotFollowed) {
  const std::string work = testing::MakeTempDir("tmpdir-inner");
  const std::string outside = testing::MakeTempDir("tmpdir-inner-out");
  std::ofstream(outside + "/keep") << "precious";
  std::string path;
  {
    Result<TaskTmpDir> dir = TaskTmpDir::Create(work);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    path = dir->path();
    ASSERT_EQ(mkdir((path + "/sub").c_str(), 0700), 0);
    ASSERT_EQ(symlink(outside.c_str(), (path + "/sub/out").c_str()), 0);
    ASSERT_EQ(InodeOf(path + "/sub/out/keep"), InodeOf(outside + "/keep"));  // Control.
  }
  EXPECT_EQ(ReadFile(outside + "/keep"), "precious");
  EXPECT_FALSE(FileExists(path));
}

TEST(TaskTmpDir, RejectsABadWorkdir) {
  EXPECT_FALSE(TaskTmpDir::Create("relative").ok());
  EXPECT_FALSE(TaskTmpDir::Create("/nonexistent/forkbox").ok());
}

}  // namespace
}  // namespace forkbox::sandbox
