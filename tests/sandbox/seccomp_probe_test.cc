// The seccomp programs installed in forked children that try the refused calls.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/seccomp_policy.h"
#include "tests/sandbox/probe_util.h"

namespace forkbox::sandbox::seccomp {
namespace {

using testing::ProbeResult;
using testing::RunProbe;

std::function<bool()> Install(std::vector<Program> programs) {
  return [programs] {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    for (Program p : programs) {
      Result<std::span<const sock_filter>> prog = Compiled(p);
      if (!prog.ok() || InstallRaw(*prog, false) != 0) return false;
    }
    return true;
  };
}
// Compile in the parent, before fork (what the sandbox does too).
void Precompile() {
  for (Program p : {Program::kBase, Program::kAgentNet, Program::kToolNoNet}) {
    ASSERT_TRUE(Compiled(p).ok());
  }
}
bool NoFilter() { return true; }

const std::vector<Program> kTool = {Program::kBase, Program::kToolNoNet};
const std::vector<Program> kAgent = {Program::kBase, Program::kAgentNet};
const std::vector<Program> kAgentThenTool = {Program::kBase, Program::kAgentNet,
                                             Program::kToolNoNet};

void ExpectRefused(const std::vector<Program>& programs, const std::function<long()>& probe,
                   int expected_errno, const char* what) {
  ProbeResult r = RunProbe(Install(programs), probe);
  ASSERT_TRUE(r.reported) << what << ": probe died (signal " << r.signal << ")";
  EXPECT_EQ(r.value, -1) << what;
  EXPECT_EQ(r.err, expected_errno) << what;
}

class SeccompProbe : public ::testing::Test {
 protected:
  void SetUp() override { Precompile(); }
};

TEST_F(SeccompProbe, CrossProcessAccessIsRefused) {
  ExpectRefused(
      kTool, [] { return ptrace(PTRACE_TRACEME, 0, nullptr, nullptr); }, EPERM, "ptrace");
  ExpectRefused(
      kTool,
      [] {
        char buf[8];
        iovec local{buf, sizeof(buf)};
        iovec remote{buf, sizeof(buf)};
        return static_cast<long>(process_vm_readv(getppid(), &local, 1, &remote, 1, 0));
      },
      EPERM, "process_vm_readv");
  ExpectRefused(
      kTool, [] { return syscall(SYS_kcmp, getpid(), getppid(), 0, 0, 0); }, EPERM, "kcmp");
  ExpectRefused(
      kTool, [] { return syscall(SYS_pidfd_getfd, 0, 0, 0); }, EPERM, "pidfd_getfd");
}

TEST_F(SeccompProbe, NamespacesAndMountsAreRefused) {
  // Control: unfiltered, a user namespace can be created here, so the refusal is the filter's.
  ProbeResult control =
      RunProbe(NoFilter, [] { return static_cast<long>(unshare(CLONE_NEWUSER)); });
  ASSERT_TRUE(control.reported);
  EXPECT_EQ(control.value, 0) << "user namespaces unavailable: the control proves nothing";
  ExpectRefused(
      kTool, [] { return static_cast<long>(unshare(CLONE_NEWUSER)); }, EPERM, "unshare");
  ExpectRefused(
      kTool, [] { return static_cast<long>(mount("none", "/mnt", "tmpfs", 0, nullptr)); }, EPERM,
      "mount");
  ExpectRefused(
      kTool, [] { return static_cast<long>(umount2("/proc", MNT_DETACH)); }, EPERM, "umount2");
  ExpectRefused(
      kTool, [] { return static_cast<long>(chroot("/tmp")); }, EPERM, "chroot");
  ExpectRefused(
      kTool, [] { return syscall(SYS_pivot_root, "/tmp", "/tmp"); }, EPERM, "pivot_root");
  ExpectRefused(
      kTool, [] { return static_cast<long>(setns(0, CLONE_NEWNET)); }, EPERM, "setns");
  for (long flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUTS,
                    CLONE_NEWIPC, CLONE_NEWCGROUP}) {
    ExpectRefused(
        kTool,
        [flag] {
          long pid = syscall(SYS_clone, flag | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
          if (pid == 0) _exit(0);
          return pid;
        },
        EPERM, "clone(CLONE_NEW*)");
  }
}

TEST_F(SeccompProbe, PlainForkStillWorks) {
  ProbeResult r = RunProbe(Install(kTool), [] {
    long pid = syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) _exit(0);
    return pid > 0 ? 1L : pid;
  });
  ASSERT_TRUE(r.reported);
  EXPECT_EQ(r.value, 1);
}

TEST_F(SeccompProbe, NewMountApiAndClone3GetEnosys) {
  ExpectRefused(
      kTool, [] { return syscall(SYS_clone3, nullptr, 0); }, ENOSYS, "clone3");
  ExpectRefused(
      kTool, [] { return syscall(SYS_open_tree, AT_FDCWD, "/", 1); }, ENOSYS, "open_tree");
  ExpectRefused(
      kTool, [] { return syscall(SYS_fsopen, "tmpfs", 0); }, ENOSYS, "fsopen");
  ExpectRefused(
      kTool, [] { return syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, nullptr, 0); }, ENOSYS,
      "mount_setattr");
}

TEST_F(SeccompProbe, KernelAttackSurfaceIsRefused) {
  ExpectRefused(
      kTool,
      [] {
        io_uring_params params{};
        return syscall(SYS_io_uring_setup, 8, &params);
      },
      EPERM, "io_uring_setup");
  ExpectRefused(
      kTool, [] { return syscall(SYS_bpf, 0, nullptr, 0); }, EPERM, "bpf");
  ExpectRefused(
      kTool, [] { return syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0); }, EPERM,
      "perf_event_open");
  ExpectRefused(
      kTool, [] { return syscall(SYS_keyctl, 0, 0, 0, 0, 0); }, EPERM, "keyctl");
  ExpectRefused(
      kTool, [] { return syscall(SYS_userfaultfd, 0); }, EPERM, "userfaultfd");
  ExpectRefused(
      kTool, [] { return syscall(SYS_open_by_handle_at, AT_FDCWD, nullptr, 0); }, EPERM,
      "open_by_handle_at");
  ExpectRefused(
      kTool, [] { return syscall(SYS_name_to_handle_at, AT_FDCWD, "/", nullptr, nullptr, 0); },
      EPERM, "name_to_handle_at");
  ExpectRefused(
      kTool, [] { return syscall(SYS_init_module, nullptr, 0, ""); }, EPERM, "init_module");
  ExpectRefused(
      kTool, [] { return syscall(SYS_kexec_load, 0, 0, nullptr, 0); }, EPERM, "kexec_load");
  ExpectRefused(
      kTool, [] { return syscall(SYS_syslog, 3, nullptr, 0); }, EPERM, "syslog");
}

TEST_F(SeccompProbe, TerminalInjectionIsRefusedOnTheLow32Bits) {
  auto sti = [](unsigned long request) {
    return [request] {
      char c = 'x';
      return syscall(SYS_ioctl, 0, request, &c);
    };
  };
  ExpectRefused(kTool, sti(TIOCSTI), EPERM, "TIOCSTI");
  ExpectRefused(kTool, sti(0xdead000000000000UL | TIOCSTI), EPERM, "TIOCSTI with high bits");
  ExpectRefused(kTool, sti(TIOCLINUX), EPERM, "TIOCLINUX");
  // Other ioctls pass: TCGETS on /dev/null reaches the kernel and fails with ENOTTY.
  ProbeResult r = RunProbe(Install(kTool), [] {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    char buf[64];
    return syscall(SYS_ioctl, fd, TCGETS, buf);
  });
  ASSERT_TRUE(r.reported);
  EXPECT_EQ(r.err, ENOTTY);
}

TEST_F(SeccompProbe, PersonalityOnlyWithDefaults) {
  ExpectRefused(
      kTool, [] { return static_cast<long>(personality(ADDR_NO_RANDOMIZE)); }, EPERM,
      "personality(ADDR_NO_RANDOMIZE)");
  ExpectRefused(
      kTool, [] { return static_cast<long>(personality(READ_IMPLIES_EXEC)); }, EPERM,
      "personality(READ_IMPLIES_EXEC)");
  ProbeResult query =
      RunProbe(Install(kTool), [] { return static_cast<long>(personality(0xffffffff)); });
  ASSERT_TRUE(query.reported);
  EXPECT_GE(query.value, 0);
  ProbeResult set_default =
      RunProbe(Install(kTool), [] { return static_cast<long>(personality(PER_LINUX)); });
  ASSERT_TRUE(set_default.reported);
  EXPECT_GE(set_default.value, 0);
}

long Socket(int family, int type) {
  int fd = socket(family, type | SOCK_CLOEXEC, 0);
  if (fd >= 0) close(fd);
  return fd >= 0 ? 0 : -1;
}

TEST_F(SeccompProbe, ToolsGetNoSocketsButSocketpair) {
  ExpectRefused(
      kTool, [] { return Socket(AF_UNIX, SOCK_STREAM); }, EPERM, "socket(AF_UNIX)");
  ExpectRefused(
      kTool, [] { return Socket(AF_INET, SOCK_STREAM); }, EPERM, "socket(AF_INET)");
  ExpectRefused(
      kTool, [] { return Socket(AF_INET6, SOCK_DGRAM); }, EPERM, "socket(AF_INET6)");
  ExpectRefused(
      kTool, [] { return Socket(AF_NETLINK, SOCK_RAW); }, EPERM, "socket(AF_NETLINK)");
  ExpectRefused(
      kTool, [] { return Socket(AF_VSOCK, SOCK_STREAM); }, EPERM, "socket(AF_VSOCK)");
  ProbeResult pair = RunProbe(Install(kTool), [] {
    int sv[2];
    return static_cast<long>(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
  });
  ASSERT_TRUE(pair.reported);
  EXPECT_EQ(pair.value, 0);
}

TEST_F(SeccompProbe, AgentGetsInetSocketsOnlyAndToolFilterStacksOnTop) {
  for (int family : {AF_INET, AF_INET6}) {
    ProbeResult r = RunProbe(Install(kAgent), [family] { return Socket(family, SOCK_STREAM); });
    ASSERT_TRUE(r.reported);
    EXPECT_EQ(r.value, 0) << "family " << family << " errno " << r.err;
  }
  ExpectRefused(
      kAgent, [] { return Socket(AF_UNIX, SOCK_STREAM); }, EPERM, "agent AF_UNIX");
  ExpectRefused(
      kAgent, [] { return Socket(AF_NETLINK, SOCK_RAW); }, EPERM, "agent AF_NETLINK");
  ExpectRefused(
      kAgent, [] { return Socket(AF_PACKET, SOCK_RAW); }, EPERM, "agent AF_PACKET");
  // Only the low 32 bits count (the kernel truncates the int): high bits do not smuggle AF_UNIX.
  ExpectRefused(
      kAgent, [] { return syscall(SYS_socket, 0x200000000L | AF_UNIX, SOCK_STREAM, 0); }, EPERM,
      "agent AF_UNIX with high bits");
  ExpectRefused(
      kAgentThenTool, [] { return Socket(AF_INET, SOCK_STREAM); }, EPERM, "tool on agent AF_INET");
}

// chmod, fchmod, fchmodat and fchmodat2 setting S_ISUID or S_ISGID: refused under the base filter
// (checked from outside with stat), while the same probe unsandboxed sets the bit.
TEST_F(SeccompProbe, SetuidAndSetgidChmodIsRefusedAndTheControlSucceeds) {
  const std::string file = testing::MakeTempDir("setid") + "/prog";
  int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
  ASSERT_GE(fd, 0);
  close(fd);
  auto mode = [&file] {
    struct stat st {};
    return stat(file.c_str(), &st) == 0 ? st.st_mode & 07777 : 0u;
  };
  const std::vector<std::pair<const char*, std::function<long(mode_t)>>> calls = {
      {"chmod", [file](mode_t m) { return static_cast<long>(chmod(file.c_str(), m)); }},
      {"fchmod",
       [file](mode_t m) {
         int f = open(file.c_str(), O_RDONLY | O_CLOEXEC);
         return f < 0 ? -2L : static_cast<long>(fchmod(f, m));
       }},
      {"fchmodat", [file](mode_t m) { return syscall(SYS_fchmodat, AT_FDCWD, file.c_str(), m); }},
      {"fchmodat2",
       [file](mode_t m) { return syscall(452 /* fchmodat2 */, AT_FDCWD, file.c_str(), m, 0); }},
  };
  for (const auto& [name, call] : calls) {
    for (mode_t bits : {mode_t{S_ISUID}, mode_t{S_ISGID}}) {
      ASSERT_EQ(chmod(file.c_str(), 0755), 0);
      ExpectRefused(
          kTool, [&call, bits] { return call(0755 | bits); }, EPERM, name);
      EXPECT_EQ(mode(), 0755u) << name;
      ProbeResult allowed = RunProbe(Install(kTool), [&call] { return call(0700); });
      EXPECT_EQ(allowed.value, 0) << name << ": a plain chmod stays allowed";
      EXPECT_EQ(mode(), 0700u) << name;
      ProbeResult control = RunProbe(NoFilter, [&call, bits] { return call(0755 | bits); });
      if (control.value != 0 && control.err == ENOSYS) continue;  // No fchmodat2 here.
      EXPECT_EQ(control.value, 0) << name << ": the unsandboxed control must set the bit";
      EXPECT_EQ(mode(), 0755u | bits) << name;
    }
  }
}

// A set-id file made directly (open, openat, creat, mknod, mknodat with S_ISUID or S_ISGID in the
// mode): refused under the tool filters, checked from outside; openat2 answers ENOSYS there. The
// control makes each file with the bit.
TEST_F(SeccompProbe, SetuidAndSetgidCreationIsRefusedAndTheControlSucceeds) {
  const std::string dir = testing::MakeTempDir("setid-create");
  using Make = std::function<long(const char*, mode_t)>;
  const std::vector<std::pair<const char*, Make>> calls = {
      {"open", [](const char* f, mode_t m) { return syscall(SYS_open, f, O_CREAT | O_WRONLY, m); }},
      {"openat", [](const char* f,
                    mode_t m) { return syscall(SYS_openat, AT_FDCWD, f, O_CREAT | O_WRONLY, m); }},
      {"creat", [](const char* f, mode_t m) { return syscall(SYS_creat, f, m); }},
      {"mknod", [](const char* f, mode_t m) { return syscall(SYS_mknod, f, S_IFREG | m, 0); }},
      {"mknodat",
       [](const char* f, mode_t m) { return syscall(SYS_mknodat, AT_FDCWD, f, S_IFREG | m, 0); }},
  };
  auto mode = [](const std::string& f) {
    struct stat st {};
    return stat(f.c_str(), &st) == 0 ? st.st_mode & 07777 : 0u;
  };
  int n = 0;
  for (const auto& [name, call] : calls) {
    for (mode_t bits : {mode_t{S_ISUID}, mode_t{S_ISGID}}) {
      const std::string file = dir + "/f" + std::to_string(n++);
      const std::string control = file + "-control";
      ExpectRefused(
          kTool,
          [&call, &file, bits] {
            umask(0);
            return call(file.c_str(), 0755 | bits);
          },
          EPERM, name);
      EXPECT_EQ(mode(file), 0u) << name << ": nothing was made";
      ProbeResult plain = RunProbe(Install(kTool), [&call, &file] {
        umask(0);
        return call(file.c_str(), 0755) < 0 ? -1L : 0L;
      });
      EXPECT_EQ(plain.value, 0) << name << ": a plain mode stays allowed";
      EXPECT_EQ(mode(file), 0755u) << name;
      ProbeResult made = RunProbe(NoFilter, [&call, &control, bits] {
        umask(0);
        return call(control.c_str(), 0755 | bits) < 0 ? -1L : 0L;
      });
      EXPECT_EQ(made.value, 0) << name << ": the unsandboxed control must make the file";
      EXPECT_EQ(mode(control), 0755u | bits) << name << ": with the bit";
    }
  }
  const std::string via2 = dir + "/openat2";
  auto openat2_call = [&via2] {
    open_how how{};
    how.flags = O_CREAT | O_WRONLY;
    how.mode = 04755;
    umask(0);
    return syscall(SYS_openat2, AT_FDCWD, via2.c_str(), &how, sizeof how);
  };
  ExpectRefused(kTool, openat2_call, ENOSYS, "openat2");
  EXPECT_EQ(mode(via2), 0u);
  ProbeResult control =
      RunProbe(NoFilter, [&openat2_call] { return openat2_call() < 0 ? -1L : 0L; });
  EXPECT_EQ(control.value, 0);
  EXPECT_EQ(mode(via2), 04755u) << "the unsandboxed control makes a setuid file with openat2";
}

TEST_F(SeccompProbe, X32AbiIsKilled) {
  ProbeResult r = RunProbe(Install(kTool), [] { return syscall(0x40000000 | SYS_getpid); });
  EXPECT_FALSE(r.reported);
  EXPECT_EQ(r.signal, SIGSYS);
  // Control: without the filter the kernel answers (ENOSYS, or a pid where x32 is enabled).
  ProbeResult control = RunProbe(NoFilter, [] { return syscall(0x40000000 | SYS_getpid); });
  EXPECT_TRUE(control.reported);
}

#if defined(__x86_64__)
TEST_F(SeccompProbe, I386AbiIsKilled) {
  auto int80 = [] {
    long ret;
    // getpid through the 32-bit entry point (i386 __NR_getpid is 20).
    asm volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
    return ret;
  };
  // Control: without the filter the kernel answers, unless it has no 32-bit entry at all (a
  // kernel without IA32 emulation faults the instruction: SIGSEGV, nothing there to refuse).
  ProbeResult control = RunProbe(NoFilter, int80);
  if (!control.reported) {
    GTEST_SKIP() << "this kernel has no i386 syscall entry: int 0x80 dies of signal "
                 << control.signal << " even unfiltered";
  }
  ProbeResult r = RunProbe(Install(kTool), int80);
  EXPECT_FALSE(r.reported);
  EXPECT_EQ(r.signal, SIGSYS);
}
#endif

}  // namespace
}  // namespace forkbox::sandbox::seccomp
