// Kernel attack surface: namespaces, mounts, dangerous syscalls and the compat syscall ABIs.
// Calls that would change the machine when allowed are given arguments the kernel rejects only
// after its permission check, so reaching the kernel is visible without doing harm.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/personality.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

static int ProbeUnshare(int argc, char** argv) {
  (void)argc;
  static const struct {
    const char* name;
    int flag;
  } kFlags[] = {{"user", CLONE_NEWUSER},    {"mount", CLONE_NEWNS}, {"net", CLONE_NEWNET},
                {"pid", CLONE_NEWPID},      {"ipc", CLONE_NEWIPC},  {"uts", CLONE_NEWUTS},
                {"cgroup", CLONE_NEWCGROUP}};
  for (size_t i = 0; i < sizeof(kFlags) / sizeof(kFlags[0]); ++i) {
    if (strcmp(kFlags[i].name, argv[1]) == 0) {
      return ByReturn(unshare(kFlags[i].flag), "unshare");
    }
  }
  return ProbeError("unknown namespace %s", argv[1]);
}

// Raw clone(2) with CLONE_NEWUSER; the child exits at once.
static int ProbeCloneNewuser(int argc, char** argv) {
  (void)argc;
  (void)argv;
  long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid((pid_t)pid, NULL, 0);
  return ByReturn(pid, "clone(CLONE_NEWUSER)");
}

static int ProbeClone3(int argc, char** argv) {
  (void)argc;
  (void)argv;
  struct clone_args args;
  memset(&args, 0, sizeof(args));
  args.flags = CLONE_NEWUSER;
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof(args));
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid((pid_t)pid, NULL, 0);
  return ByReturn(pid, "clone3(CLONE_NEWUSER)");
}

static int ProbeMount(int argc, char** argv) {
  (void)argc;
  if (mount("forkbox-escape", argv[1], "tmpfs", 0, "size=1m") == 0) {
    umount2(argv[1], MNT_DETACH);
    return Escaped("mounted a tmpfs on %s", argv[1]);
  }
  return Blocked("mount: %s (errno %d)", strerror(errno), errno);
}

static int ProbeNewMountApi(int argc, char** argv) {
  (void)argc;
  (void)argv;
  long fd = syscall(SYS_fsopen, "tmpfs", 0);
  if (fd >= 0) return Escaped("fsopen returned %ld", fd);
  printf("fsopen: %s\n", strerror(errno));
  fd = syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */);
  if (fd >= 0) return Escaped("open_tree(OPEN_TREE_CLONE) returned %ld", fd);
  printf("open_tree: %s\n", strerror(errno));
  return Blocked("new mount API refused");
}

static int ProbePivotRoot(int argc, char** argv) {
  (void)argc;
  if (chdir(argv[1]) != 0) return ProbeError("chdir %s: %s", argv[1], strerror(errno));
  return ByRefusal(syscall(SYS_pivot_root, ".", "."), "pivot_root");
}

static int ProbeChroot(int argc, char** argv) {
  (void)argc;
  return ByReturn(chroot(argv[1]), "chroot");
}

static int ProbeSetns(int argc, char** argv) {
  (void)argc;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%s/ns/mnt", argv[1]);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Blocked("open %s: %s", path, strerror(errno));
  return ByRefusal(setns(fd, 0), "setns into another mount namespace");
}

static int ProbeIoUring(int argc, char** argv) {
  (void)argc;
  (void)argv;
  struct io_uring_params params;
  memset(&params, 0, sizeof(params));
  return ByReturn(syscall(SYS_io_uring_setup, 4, &params), "io_uring_setup");
}

static int ProbeBpf(int argc, char** argv) {
  (void)argc;
  (void)argv;
  union bpf_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = 4;
  attr.max_entries = 1;
  return ByReturn(syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr)), "bpf(BPF_MAP_CREATE)");
}

static int ProbePerf(int argc, char** argv) {
  (void)argc;
  (void)argv;
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return ByReturn(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0), "perf_event_open");
}

static int ProbeKeyctl(int argc, char** argv) {
  (void)argc;
  (void)argv;
  return ByReturn(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0),
                  "keyctl(KEYCTL_GET_KEYRING_ID)");
}

static int ProbeAddKey(int argc, char** argv) {
  (void)argc;
  (void)argv;
  return ByReturn(syscall(SYS_add_key, "user", "forkbox-escape", "x", 1, KEY_SPEC_PROCESS_KEYRING),
                  "add_key");
}

static int ProbeRequestKey(int argc, char** argv) {
  (void)argc;
  (void)argv;
  return ByRefusal(syscall(SYS_request_key, "user", "forkbox-escape-absent", NULL, 0),
                   "request_key");
}

// Maps the System V segment argv[1] (the test's, holding a secret), reports what it read and
// writes over it: the test sees the change from outside.
static int ProbeSysvShm(int argc, char** argv) {
  (void)argc;
  void* mem = shmat(atoi(argv[1]), NULL, 0);
  if (mem == (void*)-1) return Blocked("shmat: %s", strerror(errno));
  char seen[32];
  snprintf(seen, sizeof seen, "%s", (const char*)mem);
  strcpy((char*)mem, "OVERWRITTEN");
  shmdt(mem);
  return Escaped("shmat read \"%s\" and wrote over it", seen);
}

// Makes a private System V object of kind argv[1] (shm|msg|sem): a host-wide object that would
// outlive the sandbox. Removed at once when it was made.
static int ProbeSysvCreate(int argc, char** argv) {
  (void)argc;
  const char* kind = argv[1];
  int id = -1;
  int removed = -1;
  if (strcmp(kind, "shm") == 0) {
    id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    if (id >= 0) removed = shmctl(id, IPC_RMID, NULL);
  } else if (strcmp(kind, "msg") == 0) {
    id = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    if (id >= 0) removed = msgctl(id, IPC_RMID, NULL);
  } else if (strcmp(kind, "sem") == 0) {
    id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
    if (id >= 0) removed = semctl(id, 0, IPC_RMID);
  } else {
    return ProbeError("unknown System V kind %s", kind);
  }
  if (id < 0) return Blocked("%sget: %s", kind, strerror(errno));
  return Escaped("%sget made id %d (%s)", kind, id, removed == 0 ? "removed" : "left behind");
}

static int ProbeUserfaultfd(int argc, char** argv) {
  (void)argc;
  (void)argv;
  long fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
  if (fd < 0 && errno == EINVAL) fd = syscall(SYS_userfaultfd, O_CLOEXEC);
  return ByReturn(fd, "userfaultfd");
}

// Invalid flags: EINVAL comes only after the CAP_SYS_BOOT check.
static int ProbeKexec(int argc, char** argv) {
  (void)argc;
  (void)argv;
  long rc = syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0xdead0000UL);
  if (rc >= 0 || (errno != EPERM && errno != ENOSYS)) return ByRefusal(rc, "kexec_load");
  return ByRefusal(syscall(SYS_kexec_file_load, -1, -1, 0UL, "", 0xdead0000UL), "kexec_file_load");
}

static int ProbeInitModule(int argc, char** argv) {
  (void)argc;
  (void)argv;
  long rc = syscall(SYS_init_module, NULL, 0UL, "");
  if (rc >= 0 || (errno != EPERM && errno != ENOSYS)) return ByRefusal(rc, "init_module");
  rc = syscall(SYS_finit_module, -1, "", 0);
  if (rc >= 0 || (errno != EPERM && errno != ENOSYS)) return ByRefusal(rc, "finit_module");
  return ByRefusal(syscall(SYS_delete_module, "forkbox_escape_absent", O_NONBLOCK),
                   "delete_module");
}

// Other privileged calls, each with arguments that fail harmlessly after the permission check.
static int ProbePrivileged(int argc, char** argv) {
  (void)argc;
  if (strcmp(argv[1], "swapon") == 0) {
    return ByRefusal(syscall(SYS_swapon, "/forkbox-escape-absent", 0), "swapon");
  }
  if (strcmp(argv[1], "acct") == 0) {
    return ByRefusal(syscall(SYS_acct, "/forkbox-escape-absent"), "acct");
  }
  if (strcmp(argv[1], "syslog") == 0) {
    return ByRefusal(syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0), "syslog");
  }
  if (strcmp(argv[1], "reboot") == 0) {
    return ByRefusal(syscall(SYS_reboot, 0, 0, 0, NULL), "reboot with bad magic");
  }
  return ProbeError("unknown call %s", argv[1]);
}

static int ProbePersonality(int argc, char** argv) {
  (void)argc;
  (void)argv;
  static const struct {
    const char* name;
    unsigned long flag;
  } kFlags[] = {{"READ_IMPLIES_EXEC", READ_IMPLIES_EXEC},
                {"ADDR_NO_RANDOMIZE", ADDR_NO_RANDOMIZE},
                {"ADDR_COMPAT_LAYOUT", ADDR_COMPAT_LAYOUT},
                {"MMAP_PAGE_ZERO", MMAP_PAGE_ZERO}};
  int took = 0;
  for (size_t i = 0; i < sizeof(kFlags) / sizeof(kFlags[0]); ++i) {
    personality(kFlags[i].flag);
    int now = personality(0xffffffff);
    if (now >= 0 && ((unsigned long)now & kFlags[i].flag)) {
      printf("personality %s took effect\n", kFlags[i].name);
      ++took;
    }
  }
  if (took) return Escaped("%d personality flags took effect", took);
  return Blocked("no personality flag took effect");
}

// getpid through the i386 entry point from 64-bit code.
static int ProbeInt80(int argc, char** argv) {
  (void)argc;
  (void)argv;
  long ret = 20;  // __NR_getpid on i386.
  __asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
  if (ret == -ENOSYS) return Blocked("int 0x80: ENOSYS (no ia32 emulation)");
  return Escaped("int 0x80 getpid returned %ld", ret);
}

// getpid through the x32 ABI (syscall number | __X32_SYSCALL_BIT).
static int ProbeX32(int argc, char** argv) {
  (void)argc;
  (void)argv;
  long ret = syscall(SYS_getpid | 0x40000000L);
  if (ret < 0) return Blocked("x32 getpid: %s (errno %d)", strerror(errno), errno);
  return Escaped("x32 getpid returned %ld", ret);
}

const struct Probe kKernelProbes[] = {
    {"unshare", "user|mount|net|pid|ipc|uts|cgroup", 1, ProbeUnshare},
    {"clone_newuser", "", 0, ProbeCloneNewuser},
    {"clone3_newuser", "", 0, ProbeClone3},
    {"mount", "DIR", 1, ProbeMount},
    {"new_mount_api", "", 0, ProbeNewMountApi},
    {"pivot_root", "DIR", 1, ProbePivotRoot},
    {"chroot", "DIR", 1, ProbeChroot},
    {"setns", "PID", 1, ProbeSetns},
    {"io_uring", "", 0, ProbeIoUring},
    {"bpf", "", 0, ProbeBpf},
    {"perf_event_open", "", 0, ProbePerf},
    {"keyctl", "", 0, ProbeKeyctl},
    {"add_key", "", 0, ProbeAddKey},
    {"request_key", "", 0, ProbeRequestKey},
    {"sysv_shm", "ID", 1, ProbeSysvShm},
    {"sysv_create", "shm|msg|sem", 1, ProbeSysvCreate},
    {"userfaultfd", "", 0, ProbeUserfaultfd},
    {"kexec", "", 0, ProbeKexec},
    {"init_module", "", 0, ProbeInitModule},
    {"privileged", "swapon|acct|syslog|reboot", 1, ProbePrivileged},
    {"personality", "", 0, ProbePersonality},
    {"int80", "", 0, ProbeInt80},
    {"x32", "", 0, ProbeX32},
    {0, 0, 0, 0},
};
