// The sandbox escape suite: each test runs one probe through `forkbox sandbox` in every mode and
// checks from outside that the escape did not happen (file unchanged, nothing connected, victim
// alive). The control modes run the same probe without the sandbox and require the escape to
// succeed, so a broken probe or outside check cannot pass silently.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "tests/escape/fixture.h"

namespace forkbox::escape {
namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool ProbeSaysEscaped(const RunResult& r) { return Contains(r.out, "RESULT escaped"); }

// ---------------------------------------------------------------------------------------------
// Writes outside the workdir.

TEST_P(EscapeTest, WriteOutsideByPath) {
  RunResult r = Probe({"write", victim_});
  Verdict(r, VictimChanged(), Control::kAlways, "write outside by path\n" + VictimReport());
}

TEST_P(EscapeTest, CreateOutside) {
  const std::string target = outside_ + "/created";
  RunResult r = Probe({"create", target});
  Verdict(r, Exists(target), Control::kAlways, "create a file outside");
}

TEST_P(EscapeTest, DotDotRelative) {
  RunResult r = Shell("cd '" + work_ + "' && exec " + ProbePath() + " write ../outside/victim");
  Verdict(r, VictimChanged(), Control::kAlways,
          "write via ../ from the workdir\n" + VictimReport());
}

TEST_P(EscapeTest, DotDotAbsolute) {
  RunResult r = Probe({"write", work_ + "/../outside/victim"});
  Verdict(r, VictimChanged(), Control::kAlways, "write via workdir/../\n" + VictimReport());
}

TEST_P(EscapeTest, SymlinkCreatedInside) {
  RunResult r = Probe({"symlink_write", victim_, work_ + "/link"});
  Verdict(r, VictimChanged(), Control::kAlways, "write through a new symlink\n" + VictimReport());
}

TEST_P(EscapeTest, SymlinkPlantedInRepo) {
  const std::string link = work_ + "/planted";
  ASSERT_EQ(symlink(victim_.c_str(), link.c_str()), 0) << strerror(errno);
  RunResult r = Probe({"write", link});
  Verdict(r, VictimChanged(), Control::kAlways,
          "write through a symlink already in the workdir\n" + VictimReport());
}

TEST_P(EscapeTest, SymlinkedDirectoryPlantedInRepo) {
  const std::string link = work_ + "/outside-dir";
  ASSERT_EQ(symlink(outside_.c_str(), link.c_str()), 0) << strerror(errno);
  RunResult r = Probe({"create", link + "/via-dir-link"});
  Verdict(r, Exists(outside_ + "/via-dir-link"), Control::kAlways,
          "create through a directory symlink in the workdir");
}

TEST_P(EscapeTest, Hardlink) {
  RunResult r = Probe({"hardlink_write", victim_, work_ + "/hardlink"});
  Verdict(r, VictimChanged(), Control::kAlways, "hard link then write\n" + VictimReport());
}

TEST_P(EscapeTest, OPathLinkViaProcSelfFd) {
  RunResult r = Probe({"fd_link", victim_, work_ + "/opath-link"});
  Verdict(r, VictimChanged(), Control::kAlways,
          "hard link an O_PATH fd via /proc/self/fd, then write\n" + VictimReport());
}

TEST_P(EscapeTest, RenameExchange) {
  const std::string mine = work_ + "/mine";
  WriteFile(mine, "mine\n");
  ChownTree(mine, uid(), gid());
  RunResult r = Probe({"rename_exchange", mine, victim_});
  Verdict(r, VictimChanged(), Control::kAlways,
          "swap a workdir file with an outside file (RENAME_EXCHANGE)\n" + VictimReport());
}

TEST_P(EscapeTest, RenameOut) {
  const std::string mine = work_ + "/mine";
  WriteFile(mine, "mine\n");
  ChownTree(mine, uid(), gid());
  RunResult r = Probe({"rename", mine, outside_ + "/moved"});
  Verdict(r, Exists(outside_ + "/moved"), Control::kAlways, "rename a file out of the workdir");
}

TEST_P(EscapeTest, RenameIn) {
  RunResult r = Probe({"rename", victim_, work_ + "/stolen"});
  Verdict(r, VictimChanged(), Control::kAlways, "rename a file into the workdir");
}

TEST_P(EscapeTest, RenameDirectoryIn) {
  RunResult r = Probe({"rename", outside_ + "/dir", work_ + "/stolen-dir"});
  Verdict(r, !Exists(outside_ + "/dir"), Control::kAlways, "rename a directory into the workdir");
}

TEST_P(EscapeTest, Unlink) {
  RunResult r = Probe({"unlink", victim_});
  Verdict(r, VictimChanged(), Control::kAlways, "unlink outside");
}

TEST_P(EscapeTest, Mkdir) {
  RunResult r = Probe({"mkdir", outside_ + "/newdir"});
  Verdict(r, Exists(outside_ + "/newdir"), Control::kAlways, "mkdir outside");
}

TEST_P(EscapeTest, Rmdir) {
  RunResult r = Probe({"rmdir", outside_ + "/dir"});
  Verdict(r, !Exists(outside_ + "/dir"), Control::kAlways, "rmdir outside");
}

TEST_P(EscapeTest, ProcSelfRoot) {
  RunResult r = Probe({"write", "/proc/self/root" + victim_});
  Verdict(r, VictimChanged(), Control::kAlways, "write via /proc/self/root\n" + VictimReport());
}

TEST_P(EscapeTest, ProcSelfCwd) {
  RunResult r = Probe({"cwd_write", outside_, "victim"});
  Verdict(r, VictimChanged(), Control::kAlways, "write via /proc/self/cwd\n" + VictimReport());
}

TEST_P(EscapeTest, ProcLauncherCwd) {
  // forkbox runs with its cwd in the outside directory.
  RunResult r = Probe({"write", "/proc/@PID@/cwd/victim"}, AtForkbox());
  Verdict(r, VictimChanged(), Control::kAlways, "write via /proc/<forkbox>/cwd\n" + VictimReport());
}

TEST_P(EscapeTest, ProcChildCwd) {
  RunResult r = Probe({"child_cwd_write", outside_, "victim"});
  Verdict(r, VictimChanged(), Control::kAlways, "write via /proc/<child>/cwd\n" + VictimReport());
}

TEST_P(EscapeTest, ProcSelfFdReopen) {
  RunResult r = Probe({"fd_reopen", victim_});
  Verdict(r, VictimChanged(), Control::kAlways,
          "reopen a read-only fd via /proc/self/fd for writing\n" + VictimReport());
}

TEST_P(EscapeTest, InheritedDescriptor) {
  Fd fd(open(victim_.c_str(), O_RDWR));  // Deliberately without O_CLOEXEC.
  ASSERT_TRUE(fd.valid()) << strerror(errno);
  RunResult r = Probe({"fd_write", std::to_string(fd.get())});
  Verdict(r, VictimChanged(), Control::kAlways,
          "write to a descriptor the launcher leaked\n" + VictimReport());
}

TEST_P(EscapeTest, NoDescriptorAbove2IsInherited) {
  Fd fd(open(victim_.c_str(), O_RDWR));  // Deliberately without O_CLOEXEC.
  ASSERT_TRUE(fd.valid()) << strerror(errno);
  RunResult r = Probe({"fd_scan"});
  Verdict(r, VictimChanged() || ProbeSaysEscaped(r), Control::kAlways,
          "descriptors above 2 reach the command");
}

TEST_P(EscapeTest, DevShm) {
  FORKBOX_SKIP_UNLESS_LAYER2(
      "/dev/shm is writable in layer 1 on purpose: SemLock and shared memory live only there");
  const std::string target = "/dev/shm/forkbox-escape-" + token_;
  RunResult r = Probe({"create", target});
  // Layer 2 gives a private /dev/shm: creating there is fine as long as it is not the host's.
  Verdict(r, Exists(target), Control::kAlways, "create in the host's /dev/shm",
          sandboxed() && Layer() == 2 ? r.exit_code : 0);
}

TEST_P(EscapeTest, Tmp) {
  const std::string target = "/tmp/forkbox-escape-" + token_;
  RunResult r = Probe({"create", target});
  Verdict(r, Exists(target), Control::kAlways, "create in the host's /tmp",
          sandboxed() && Layer() == 2 ? r.exit_code : 0);
}

TEST_P(EscapeTest, VarTmp) {
  const std::string target = "/var/tmp/forkbox-escape-" + token_;
  RunResult r = Probe({"create", target});
  Verdict(r, Exists(target), Control::kAlways, "create in /var/tmp");
}

TEST_P(EscapeTest, HomeCreate) {
  RunResult r = Probe({"create_in_home", "forkbox-escape"});
  Verdict(r, Exists(home_ + "/forkbox-escape"), Control::kAlways, "create a file in $HOME");
}

TEST_P(EscapeTest, HomeBashrcAppend) {
  RunResult r = Probe({"append", home_ + "/.bashrc"});
  Verdict(r, ReadFile(home_ + "/.bashrc") != "# original\n", Control::kAlways,
          "append to ~/.bashrc");
}

TEST_P(EscapeTest, Truncate) {
  RunResult r = Probe({"truncate", victim_});
  Verdict(r, VictimChanged(), Control::kAlways, "truncate outside\n" + VictimReport());
}

TEST_P(EscapeTest, Chmod) {
  FORKBOX_SKIP_UNLESS_LAYER2("Landlock has no metadata rights, so chmod outside is not refused");
  RunResult r = Probe({"chmod", victim_});
  Verdict(r, VictimChanged(), Control::kAlways, "chmod outside\n" + VictimReport());
}

TEST_P(EscapeTest, Chown) {
  FORKBOX_SKIP_UNLESS_LAYER2("Landlock has no metadata rights, so chown outside is not refused");
  RunResult r = Probe({"chown", victim_});
  Verdict(r, VictimChanged(), Control::kAlways, "chown outside (changes ctime)\n" + VictimReport());
}

TEST_P(EscapeTest, Utime) {
  FORKBOX_SKIP_UNLESS_LAYER2("Landlock has no metadata rights, so utime outside is not refused");
  RunResult r = Probe({"utime", victim_});
  Verdict(r, VictimChanged(), Control::kAlways, "utimensat outside\n" + VictimReport());
}

TEST_P(EscapeTest, Xattr) {
  FORKBOX_SKIP_UNLESS_LAYER2("Landlock has no metadata rights, so setxattr outside is not refused");
  RunResult r = Probe({"xattr", victim_});
  Verdict(r, VictimChanged(), Control::kIfPossible, "setxattr outside\n" + VictimReport());
}

TEST_P(EscapeTest, Mkfifo) {
  RunResult r = Probe({"mkfifo", outside_ + "/fifo"});
  Verdict(r, Exists(outside_ + "/fifo"), Control::kAlways, "mkfifo outside");
}

TEST_P(EscapeTest, DeviceNodeInWorkdir) {
  const std::string node = work_ + "/devnode";
  RunResult r = Probe({"mknod_char", node});
  struct stat st {};
  bool made = lstat(node.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
  Verdict(r, made, Control::kRootOnly, "mknod a character device in the workdir");
}

TEST_P(EscapeTest, SysctlWrite) {
  // Writes back the current value: harmless even unsandboxed.
  RunResult r = Probe({"rewrite", "/proc/sys/kernel/core_pattern"});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "write /proc/sys/kernel/core_pattern");
}

TEST_P(EscapeTest, LeaveThePidsCgroup) {
  const std::string procs = "/sys/fs/cgroup/pids/cgroup.procs";
  if (!Exists(procs)) GTEST_SKIP() << "no cgroup v1 pids hierarchy at " << procs;
  RunResult r = Probe({"rewrite", procs, "@SELF@"});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly,
          "move the command into the root pids cgroup (escaping the fork-bomb cap)");
}

TEST_P(EscapeTest, BindUnixSocketOutside) {
  RunResult r = Probe({"bind_unix", sock_dir_ + "/bound.sock"});
  Verdict(r, Exists(sock_dir_ + "/bound.sock"), Control::kAlways, "bind a unix socket outside");
}

TEST_P(EscapeTest, BindUnixSocketOutsideEvenWithAllowNet) {
  RunResult r = Probe({"bind_unix", sock_dir_ + "/bound.sock"}, Flags({"--allow-net"}));
  Verdict(r, Exists(sock_dir_ + "/bound.sock"), Control::kAlways,
          "bind a unix socket outside with --allow-net (Landlock must still refuse)");
}

TEST_P(EscapeTest, OpenByHandleAt) {
  alignas(file_handle) unsigned char storage[sizeof(file_handle) + MAX_HANDLE_SZ];
  auto* fh = reinterpret_cast<file_handle*>(storage);
  fh->handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  if (name_to_handle_at(AT_FDCWD, victim_.c_str(), fh, &mount_id, 0) != 0) {
    GTEST_SKIP() << "the filesystem has no file handles: " << strerror(errno);
  }
  RunResult r = Probe({"open_by_handle", std::to_string(fh->handle_type),
                       ToHex(fh->f_handle, fh->handle_bytes), outside_});
  Verdict(r, VictimChanged(), Control::kRootOnly,
          "open_by_handle_at with a handle made outside\n" + VictimReport());
}

TEST_P(EscapeTest, NameToHandleAt) {
  RunResult r = Probe({"name_to_handle", victim_});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "name_to_handle_at");
}

void GitInit(const std::string& dir, uid_t uid, gid_t gid) {
  Command git;
  git.argv = {"/usr/bin/git", "init", "-q", dir};
  git.env = {"HOME=/nonexistent", "PATH=/usr/bin:/bin"};
  RunResult r = RunCommand(git);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  ChownTree(dir, uid, gid);
}

TEST_P(EscapeTest, GitHooks) {
  FORKBOX_SKIP_UNLESS_LAYER2(".git/hooks is only read-only under layer 2's mounts");
  ASSERT_NO_FATAL_FAILURE(GitInit(work_, uid(), gid()));
  const std::string hook = work_ + "/.git/hooks/post-checkout";
  RunResult r = Probe({"create", hook});
  Verdict(r, Exists(hook), Control::kAlways,
          "plant a git hook (it would run unsandboxed at the user's next git command)");
}

TEST_P(EscapeTest, GitConfig) {
  FORKBOX_SKIP_UNLESS_LAYER2(".git/config is only read-only under layer 2's mounts");
  ASSERT_NO_FATAL_FAILURE(GitInit(work_, uid(), gid()));
  const std::string config = work_ + "/.git/config";
  const std::string before = ReadFile(config);
  RunResult r = Probe({"append", config});
  Verdict(r, ReadFile(config) != before, Control::kAlways,
          "edit .git/config (core.fsmonitor would run unsandboxed)");
}

// ---------------------------------------------------------------------------------------------
// Namespaces and mounts.

TEST_P(EscapeTest, UnshareUser) {
  RunResult r = Probe({"unshare", "user"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "unshare(CLONE_NEWUSER)");
}

TEST_P(EscapeTest, UnshareMount) {
  RunResult r = Probe({"unshare", "mount"});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "unshare(CLONE_NEWNS)");
}

TEST_P(EscapeTest, UnshareNet) {
  RunResult r = Probe({"unshare", "net"});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "unshare(CLONE_NEWNET)");
}

TEST_P(EscapeTest, CloneNewUser) {
  RunResult r = Probe({"clone_newuser"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "clone(CLONE_NEWUSER)");
}

TEST_P(EscapeTest, Clone3NewUser) {
  RunResult r = Probe({"clone3_newuser"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "clone3(CLONE_NEWUSER)");
}

TEST_P(EscapeTest, Mount) {
  const std::string dir = work_ + "/mnt";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  RunResult r = Probe({"mount", dir});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "mount a tmpfs");
}

TEST_P(EscapeTest, NewMountApi) {
  RunResult r = Probe({"new_mount_api"});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "fsopen / open_tree");
}

TEST_P(EscapeTest, PivotRoot) {
  RunResult r = Probe({"pivot_root", work_});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "pivot_root");
}

TEST_P(EscapeTest, Chroot) {
  RunResult r = Probe({"chroot", work_});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "chroot");
}

TEST_P(EscapeTest, Setns) {
  Victim victim(uid(), gid());
  RunResult r = Probe({"setns", std::to_string(victim.pid())});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly,
          "setns into an outside process's mount namespace");
}

// ---------------------------------------------------------------------------------------------
// Secrets and other processes.

TEST_P(EscapeTest, SecretsNotInEnvironment) {
  RunResult r = Probe({"env"});
  Verdict(r, Contains(r.out, secret_) || ProbeSaysEscaped(r), Control::kAlways,
          "API keys and tokens in the command's environment");
}

TEST_P(EscapeTest, SecretsNotPassedEvenWhenNamed) {
  FORKBOX_SKIP_UNSANDBOXED("tests the --env allowlist");
  RunResult r = Probe({"env"}, Flags({"--env", "FOO_TOKEN"}));
  EXPECT_FALSE(Contains(r.out, secret_)) << "ESCAPE: --env FOO_TOKEN passed a secret\n"
                                         << r.Describe();
  if (!Contains(r.out, "PROBE ")) {
    // Refusing the flag outright is fine, with a clear message.
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    EXPECT_TRUE(Contains(r.err, "FOO_TOKEN")) << r.Describe();
  }
}

TEST_P(EscapeTest, LauncherEnviron) {
  RunResult r = Probe({"read_environ", "@PID@"}, AtForkbox());
  Verdict(r, Contains(r.out, secret_) || ProbeSaysEscaped(r), Control::kAlways,
          "read /proc/<forkbox>/environ");
}

TEST_P(EscapeTest, LauncherMemory) {
  RunResult r = Probe({"read_mem", "@PID@"}, AtForkbox());
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "open /proc/<forkbox>/mem");
}

TEST_P(EscapeTest, PtraceLauncher) {
  RunResult r = Probe({"ptrace", "@PID@"}, AtForkbox());
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "ptrace forkbox");
}

TEST_P(EscapeTest, ProcessVmReadvLauncher) {
  RunResult r = Probe({"vm_readv", "@PID@"}, AtForkbox());
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "process_vm_readv on forkbox");
}

TEST_P(EscapeTest, PtraceUnrelatedProcess) {
  Victim victim(uid(), gid());
  RunResult r = Probe({"ptrace", std::to_string(victim.pid())});
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "ptrace an unrelated process of the same user");
}

TEST_P(EscapeTest, ProcessVmReadvUnrelatedProcess) {
  Victim victim(uid(), gid());
  RunResult r = Probe({"vm_readv", std::to_string(victim.pid())});
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "process_vm_readv on an unrelated process");
}

TEST_P(EscapeTest, PidfdGetfdUnrelatedProcess) {
  Victim victim(uid(), gid());
  RunResult r =
      Probe({"pidfd_getfd", std::to_string(victim.pid()), std::to_string(victim.held_fd())});
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "pidfd_getfd from an unrelated process");
}

TEST_P(EscapeTest, KillLauncher) {
  RunResult r = Probe({"kill", "@PID@"}, AtForkbox());
  Verdict(r, !WIFEXITED(r.wait_status) || ProbeSaysEscaped(r), Control::kAlways, "SIGKILL forkbox");
}

TEST_P(EscapeTest, KillUnrelatedProcess) {
  Victim victim(uid(), gid());
  RunResult r = Probe({"kill", std::to_string(victim.pid())});
  Verdict(r, !victim.Alive(), Control::kAlways, "SIGKILL an unrelated process of the same user");
}

TEST_P(EscapeTest, DaemonViaSetsid) {
  const std::string marker = "forkbox-escape-daemon-" + token_;
  RunResult r = Probe({"daemon", work_ + "/daemon.pid", marker});
  ASSERT_TRUE(Contains(r.out, "RESULT started")) << "the daemon never started\n" << r.Describe();
  Verdict(r, !ProcessesWithMarker(marker).empty(), Control::kAlways,
          "a setsid daemon outlives the command (pid file says " + ReadFile(work_ + "/daemon.pid") +
              ")");
}

TEST_P(EscapeTest, DaemonViaDoubleFork) {
  const std::string marker = "forkbox-escape-daemon-" + token_;
  RunResult r = Probe({"daemon", work_ + "/daemon.pid", marker, "double"});
  ASSERT_TRUE(Contains(r.out, "RESULT started")) << "the daemon never started\n" << r.Describe();
  Verdict(r, !ProcessesWithMarker(marker).empty(), Control::kAlways,
          "a double-forked daemon outlives the command (pid file says " +
              ReadFile(work_ + "/daemon.pid") + ")");
}

// ---------------------------------------------------------------------------------------------
// Resource exhaustion.

TEST_P(EscapeTest, MemoryHogIsCapped) {
  RunResult r = Probe({"memory_hog", "16384"});  // 16 GiB, twice the default RLIMIT_AS.
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "map 16 GiB");
}

TEST_P(EscapeTest, MemoryHogIsCappedAfterRaisingSoftLimit) {
  RunResult r = Probe({"memory_hog", "16384", "raise"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible,
          "map 16 GiB after raising the soft RLIMIT_AS to the hard limit");
}

TEST_P(EscapeTest, DiskFillerIsCappedAfterRaisingSoftLimit) {
  const std::string big = work_ + "/big";
  RunResult r = Probe({"disk_filler", big, "2048", "raise"});
  struct stat st {};
  stat(big.c_str(), &st);
  Verdict(r, st.st_size > (off_t{1} << 30), Control::kAlways,
          "after raising the soft RLIMIT_FSIZE, the file grew to " + std::to_string(st.st_size) +
              " bytes");
}

TEST_P(EscapeTest, DiskFillerIsCapped) {
  const std::string big = work_ + "/big";
  RunResult r = Probe({"disk_filler", big, "2048"});  // A sparse byte at 2 GiB.
  struct stat st {};
  stat(big.c_str(), &st);
  Verdict(r, st.st_size > (off_t{1} << 30), Control::kAlways,
          "file grew to " + std::to_string(st.st_size) + " bytes, over the 1 GiB RLIMIT_FSIZE");
}

// The other rlimits README claims (core 0, open files, processes): a tool lifts the soft limit
// to the hard one; past the policy's value is an escape. NPROC is set for root too, where only
// the pids cgroup or pid_max holds (ForkBomb.IsCapped). The controls need the host's hard limits
// above these values (a container may set them lower): kIfPossible.
TEST_P(EscapeTest, CoreLimitStaysZeroAfterRaisingSoftLimit) {
  RunResult r = Probe({"rlimit", "core", "0"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "a core limit above 0");
}

TEST_P(EscapeTest, OpenFilesAreCappedAfterRaisingSoftLimit) {
  RunResult r = Probe({"rlimit", "nofile", "1024"});  // fd 1024 is the 1025th open file.
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "more than 1024 open files");
}

TEST_P(EscapeTest, ProcessLimitStaysAfterRaisingSoftLimit) {
  RunResult r = Probe({"rlimit", "nproc", "512"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "an RLIMIT_NPROC above 512");
}

// ---------------------------------------------------------------------------------------------
// The terminal.

// A pty pair in raw mode: the slave becomes the command's stdin.
struct Pty {
  Fd master;
  Fd slave;
  Pty() {
    master.Reset(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!master.valid() || grantpt(master.get()) != 0 || unlockpt(master.get()) != 0) {
      ADD_FAILURE() << "posix_openpt: " << strerror(errno);
      return;
    }
    slave.Reset(open(ptsname(master.get()), O_RDWR | O_NOCTTY | O_CLOEXEC));
    termios t{};
    tcgetattr(slave.get(), &t);
    cfmakeraw(&t);
    tcsetattr(slave.get(), TCSANOW, &t);
  }
  // Injected input is queued synchronously by TIOCSTI, so a zero-timeout poll sees it.
  bool HasInput() const {
    pollfd pfd{slave.get(), POLLIN, 0};
    return poll(&pfd, 1, 0) == 1;
  }
};

TEST_P(EscapeTest, WriteToAnotherTerminal) {
  Pty pty;
  ASSERT_TRUE(pty.slave.valid());
  const std::string device = ptsname(pty.master.get());
  ASSERT_EQ(chown(device.c_str(), uid(), gid()), 0) << strerror(errno);  // The user's own tty.
  RunResult r = Probe({"tty_write", device});
  // pty output reaches the master through a workqueue, so also trust the probe's own report.
  pollfd pfd{pty.master.get(), POLLIN, 0};
  Verdict(r, poll(&pfd, 1, 0) == 1 || ProbeSaysEscaped(r), Control::kAlways,
          "write to a terminal outside the sandbox (" + device + ")");
}

TEST_P(EscapeTest, TiocstiFromPty) {
  Pty pty;
  ASSERT_TRUE(pty.slave.valid());
  RunResult r = Probe({"tiocsti"}, Stdin(pty.slave.get()));
  Verdict(r, pty.HasInput() || ProbeSaysEscaped(r), Control::kIfPossible,
          "TIOCSTI input injection into the user's terminal");
}

TEST_P(EscapeTest, TiocstiWithHighBitsSet) {
  Pty pty;
  ASSERT_TRUE(pty.slave.valid());
  RunResult r = Probe({"tiocsti", "high"}, Stdin(pty.slave.get()));
  Verdict(r, pty.HasInput() || ProbeSaysEscaped(r), Control::kIfPossible,
          "TIOCSTI with bits set above 32 (the filter must compare the low 32 bits)");
}

TEST_P(EscapeTest, Tioclinux) {
  Pty pty;
  ASSERT_TRUE(pty.slave.valid());
  RunResult r = Probe({"tioclinux"}, Stdin(pty.slave.get()));
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "ioctl TIOCLINUX must be refused (EPERM)");
}

// ---------------------------------------------------------------------------------------------
// Dangerous syscalls: each must be refused before it reaches the kernel.

#define FORKBOX_SYSCALL_TEST(Name, control, ...)                        \
  TEST_P(EscapeTest, Name) {                                            \
    RunResult r = Probe({__VA_ARGS__});                                 \
    Verdict(r, ProbeSaysEscaped(r), control, #Name " must be refused"); \
  }

FORKBOX_SYSCALL_TEST(IoUring, Control::kIfPossible, "io_uring")
FORKBOX_SYSCALL_TEST(Bpf, Control::kRootOnly, "bpf")
FORKBOX_SYSCALL_TEST(PerfEventOpen, Control::kIfPossible, "perf_event_open")
FORKBOX_SYSCALL_TEST(Keyctl, Control::kAlways, "keyctl")
FORKBOX_SYSCALL_TEST(AddKey, Control::kAlways, "add_key")
FORKBOX_SYSCALL_TEST(RequestKey, Control::kAlways, "request_key")
FORKBOX_SYSCALL_TEST(Userfaultfd, Control::kIfPossible, "userfaultfd")
FORKBOX_SYSCALL_TEST(SysvSharedMemoryCreated, Control::kAlways, "sysv_create", "shm")
FORKBOX_SYSCALL_TEST(SysvMessageQueueCreated, Control::kAlways, "sysv_create", "msg")
FORKBOX_SYSCALL_TEST(SysvSemaphoreCreated, Control::kAlways, "sysv_create", "sem")

// System V shared memory is host-wide (no IPC namespace in layer 1; layer 2 shares the host's
// too): a tool could map a segment of another process of the same user by its id, read it and
// write it. The test's segment holds a secret; a change to it is seen from here. The control
// reads the secret and writes over it.
TEST_P(EscapeTest, SysvSharedMemoryOfAnotherProcess) {
  const int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
  ASSERT_GE(id, 0) << strerror(errno);
  struct Remove {
    int id;
    ~Remove() { shmctl(id, IPC_RMID, nullptr); }
  } remove{id};
  if (as_user()) {  // The user's own segment, as another of the user's processes would hold it.
    shmid_ds ds{};
    ASSERT_EQ(shmctl(id, IPC_STAT, &ds), 0);
    ds.shm_perm.uid = uid();
    ds.shm_perm.gid = gid();
    ASSERT_EQ(shmctl(id, IPC_SET, &ds), 0) << strerror(errno);
  }
  void* mem = shmat(id, nullptr, 0);
  ASSERT_NE(mem, reinterpret_cast<void*>(-1)) << strerror(errno);
  std::strcpy(static_cast<char*>(mem), "HOST-SECRET");
  RunResult r = Probe({"sysv_shm", std::to_string(id)});
  const bool changed = std::string(static_cast<const char*>(mem)) != "HOST-SECRET";
  shmdt(mem);
  Verdict(r, changed || ProbeSaysEscaped(r), Control::kAlways,
          "map another process's System V shared memory");
}
FORKBOX_SYSCALL_TEST(Kexec, Control::kIfPossible, "kexec")
FORKBOX_SYSCALL_TEST(InitModule, Control::kIfPossible, "init_module")
FORKBOX_SYSCALL_TEST(Swapon, Control::kRootOnly, "privileged", "swapon")
FORKBOX_SYSCALL_TEST(Acct, Control::kRootOnly, "privileged", "acct")
FORKBOX_SYSCALL_TEST(Syslog, Control::kIfPossible, "privileged", "syslog")
FORKBOX_SYSCALL_TEST(Reboot, Control::kRootOnly, "privileged", "reboot")
FORKBOX_SYSCALL_TEST(Personality, Control::kAlways, "personality")

// Whether this kernel has the i386 syscall entry: a forked child's `int 0x80` getpid answers.
// Without IA32 emulation the instruction faults (SIGSEGV) even unsandboxed: nothing to refuse.
bool I386EntryExists() {
#if defined(__x86_64__)
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);  // A sanitizer's handler would turn the fault into an exit.
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
    _exit(ret > 0 ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return true;  // Unknown: probe it anyway.
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
#else
  return false;
#endif
}

TEST_P(EscapeTest, I386AbiIsKilled) {
  if (!I386EntryExists()) GTEST_SKIP() << "this kernel has no i386 syscall entry (int 0x80 faults)";
  RunResult r = Probe({"int80"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "int 0x80 from 64-bit code", 128 + SIGSYS);
}

TEST_P(EscapeTest, X32AbiIsKilled) {
  RunResult r = Probe({"x32"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "x32 syscall (nr | 0x40000000)",
          128 + SIGSYS);
}

// ---------------------------------------------------------------------------------------------
// Network.

TEST_P(EscapeTest, TcpToLoopback) {
  Listener listener = Listener::Tcp("127.0.0.1");
  RunResult r = Probe({"tcp", "127.0.0.1", std::to_string(listener.port())});
  Verdict(r, listener.Contacted(), Control::kAlways, "TCP connect to 127.0.0.1");
}

TEST_P(EscapeTest, TcpToHostAddress) {
  std::optional<std::string> host = HostAddress();
  if (!host) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
  Listener listener = Listener::Tcp(*host);
  RunResult r = Probe({"tcp", *host, std::to_string(listener.port())});
  Verdict(r, listener.Contacted(), Control::kAlways, "TCP connect to the host's " + *host);
}

TEST_P(EscapeTest, Udp) {
  Listener listener = Listener::Udp("127.0.0.1");
  RunResult r = Probe({"udp", "127.0.0.1", std::to_string(listener.port())});
  Verdict(r, listener.Contacted(), Control::kAlways, "UDP datagram to 127.0.0.1");
}

TEST_P(EscapeTest, RawSocket) {
  RunResult r = Probe({"socket", "raw"});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "raw IP socket");
}

TEST_P(EscapeTest, PacketSocket) {
  RunResult r = Probe({"socket", "packet"});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "AF_PACKET socket");
}

TEST_P(EscapeTest, PingSocket) {
  RunResult r = Probe({"socket", "ping"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "ICMP ping socket");
}

TEST_P(EscapeTest, NetlinkSocket) {
  RunResult r = Probe({"socket", "netlink"});
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "netlink route socket");
}

TEST_P(EscapeTest, VsockSocket) {
  RunResult r = Probe({"socket", "vsock"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "AF_VSOCK socket");
}

TEST_P(EscapeTest, Ipv6Socket) {
  RunResult r = Probe({"socket", "inet6"});
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "AF_INET6 socket");
}

TEST_P(EscapeTest, UnixSocketToListeningDaemon) {
  const std::string path = sock_dir_ + "/daemon.sock";
  Listener listener = Listener::Unix(path);
  RunResult r = Probe({"unix_connect", path});
  Verdict(r, listener.Contacted(), Control::kAlways, "connect to a daemon's unix socket");
}

TEST_P(EscapeTest, AbstractUnixSocket) {
  const std::string name = "@forkbox-escape-" + token_;
  Listener listener = Listener::Unix(name);
  RunResult r = Probe({"unix_connect", name});
  Verdict(r, listener.Contacted(), Control::kAlways, "connect to an abstract unix socket");
}

TEST_P(EscapeTest, AbstractUnixSocketEvenWithAllowNet) {
  const std::string name = "@forkbox-escape-" + token_;
  Listener listener = Listener::Unix(name);
  RunResult r = Probe({"unix_connect", name}, Flags({"--allow-net"}));
  Verdict(r, listener.Contacted(), Control::kAlways,
          "connect to an abstract unix socket outside the sandbox with --allow-net (scoped)");
}

// ---------------------------------------------------------------------------------------------
// The process's own state.

TEST_P(EscapeTest, NoNewPrivsSeccompNoCapabilities) {
  RunResult r = Probe({"status"});
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways,
          "/proc/self/status must show NoNewPrivs 1, Seccomp 2 and no capabilities");
}

TEST_P(EscapeTest, BoundingSetEmptyOrReported) {
  FORKBOX_SKIP_UNSANDBOXED("checks the sandbox's report");
  RunResult r = Probe({"status"});
  size_t at = r.out.find("CapBnd:\t");
  ASSERT_NE(at, std::string::npos) << r.Describe();
  if (r.out.compare(at + 8, 16, "0000000000000000") == 0) return;
  // Without CAP_SETPCAP the bounding set cannot be emptied; --check must not claim it was.
  const RunResult& check = CheckOutput(GetParam());
  const std::string report = check.out + check.err;
  size_t line = report.find("capabilities");
  ASSERT_NE(line, std::string::npos) << check.Describe();
  std::string claim = report.substr(line, report.find('\n', line) - line);
  EXPECT_EQ(claim.find("bounding"), std::string::npos)
      << "--check claims the bounding set is dropped, but the command has " << r.out.substr(at, 24)
      << "\n--check: " << claim;
}

INSTANTIATE_TEST_SUITE_P(Modes, EscapeTest, ::testing::ValuesIn(AllModes()), ModeName);

}  // namespace
}  // namespace forkbox::escape
