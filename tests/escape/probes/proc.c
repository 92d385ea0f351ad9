// Process escapes: secrets, other processes, daemons, resource exhaustion and the terminal.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

extern char** environ;

// no_new_privs, the seccomp mode and the capability sets, as /proc/self/status shows them. The
// bounding set is only printed: without CAP_SETPCAP (an unprivileged user in layer 1) it cannot be
// emptied, and no_new_privs already makes it moot; the driver checks --check is honest about it.
static int ProbeStatus(int argc, char** argv) {
  (void)argc;
  (void)argv;
  FILE* f = fopen("/proc/self/status", "re");
  if (!f) return ProbeError("open /proc/self/status: %s", strerror(errno));
  static const char* const kWanted[] = {
      "NoNewPrivs:\t1\n",
      "Seccomp:\t2\n",
      "CapEff:\t0000000000000000\n",
      "CapPrm:\t0000000000000000\n",
      "CapInh:\t0000000000000000\n",
      "CapAmb:\t0000000000000000\n",
  };
  int seen[sizeof(kWanted) / sizeof(kWanted[0])] = {0};
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, "CapBnd:", 7) == 0) printf("%s", line);
    for (size_t i = 0; i < sizeof(kWanted) / sizeof(kWanted[0]); ++i) {
      size_t key = strchr(kWanted[i], ':') - kWanted[i] + 1;
      if (strncmp(line, kWanted[i], key) != 0) continue;
      printf("%s", line);
      seen[i] = strcmp(line, kWanted[i]) == 0;
    }
  }
  fclose(f);
  for (size_t i = 0; i < sizeof(kWanted) / sizeof(kWanted[0]); ++i) {
    if (!seen[i]) return Escaped("expected %.*s", (int)strlen(kWanted[i]) - 1, kWanted[i]);
  }
  return Blocked("no_new_privs, seccomp filter mode and no capabilities");
}

static int LooksSecret(const char* entry) {
  const char* eq = strchr(entry, '=');
  size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
  static const char* const kSuffixes[] = {"_API_KEY", "_TOKEN", "_SECRET"};
  for (size_t i = 0; i < 3; ++i) {
    size_t s = strlen(kSuffixes[i]);
    if (n >= s && strncmp(entry + n - s, kSuffixes[i], s) == 0) return 1;
  }
  return strncmp(entry, "ANTHROPIC_", 10) == 0 || strncmp(entry, "OPENAI_", 7) == 0;
}

// Prints the whole environment (the driver greps it for the secret values) and flags secrets.
static int ProbeEnv(int argc, char** argv) {
  (void)argc;
  (void)argv;
  int secrets = 0;
  for (char** e = environ; *e; ++e) {
    printf("ENV %s\n", *e);
    secrets += LooksSecret(*e);
  }
  if (secrets) return Escaped("%d secret-looking variables are visible", secrets);
  return Blocked("no secret-looking variable in the environment");
}

// The pids to attack: the one named on the command line and our parent.
static int Targets(char** argv, pid_t out[2]) {
  out[0] = (pid_t)atoi(argv[1]);
  out[1] = getppid();
  return out[1] > 0 && out[1] != out[0] ? 2 : 1;
}

static int ProbeReadEnviron(int argc, char** argv) {
  (void)argc;
  pid_t pids[2];
  int n = Targets(argv, pids);
  int secrets = 0;
  for (int i = 0; i < n; ++i) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pids[i]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      printf("open %s: %s\n", path, strerror(errno));
      continue;
    }
    static char buf[1 << 20];
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len < 0) {
      printf("read %s: %s\n", path, strerror(errno));
      continue;
    }
    buf[len] = 0;
    for (char* e = buf; e < buf + len; e += strlen(e) + 1) {
      printf("ENVIRON %d %s\n", (int)pids[i], e);
      secrets += LooksSecret(e);
    }
  }
  if (secrets) return Escaped("read %d secret-looking variables of another process", secrets);
  return Blocked("no secret read from /proc/<pid>/environ");
}

static int ProbeReadMem(int argc, char** argv) {
  (void)argc;
  pid_t pids[2];
  int n = Targets(argv, pids);
  for (int i = 0; i < n; ++i) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pids[i]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      return Escaped("opened %s", path);
    }
    printf("open %s: %s\n", path, strerror(errno));
  }
  return Blocked("/proc/<pid>/mem refused");
}

static int ProbePtrace(int argc, char** argv) {
  (void)argc;
  pid_t pids[2];
  int n = Targets(argv, pids);
  for (int i = 0; i < n; ++i) {
    if (ptrace(PTRACE_SEIZE, pids[i], 0, 0) == 0) {
      ptrace(PTRACE_DETACH, pids[i], 0, 0);
      return Escaped("PTRACE_SEIZE of %d succeeded", (int)pids[i]);
    }
    printf("PTRACE_SEIZE %d: %s\n", (int)pids[i], strerror(errno));
  }
  return Blocked("ptrace refused");
}

static int ProbeVmReadv(int argc, char** argv) {
  (void)argc;
  pid_t pids[2];
  int n = Targets(argv, pids);
  for (int i = 0; i < n; ++i) {
    char buf[16];
    struct iovec local = {buf, sizeof(buf)};
    struct iovec remote = {(void*)0x10000, sizeof(buf)};  // EFAULT once permission is granted.
    ssize_t rc = process_vm_readv(pids[i], &local, 1, &remote, 1, 0);
    if (rc >= 0 || errno == EFAULT) {
      return Escaped("process_vm_readv on %d passed the permission check", (int)pids[i]);
    }
    printf("process_vm_readv %d: %s\n", (int)pids[i], strerror(errno));
  }
  return Blocked("process_vm_readv refused");
}

// PID FD: steal a descriptor of another process.
static int ProbePidfdGetfd(int argc, char** argv) {
  (void)argc;
  int pidfd = (int)syscall(SYS_pidfd_open, atoi(argv[1]), 0);
  if (pidfd < 0) return Blocked("pidfd_open: %s", strerror(errno));
  return ByReturn(syscall(SYS_pidfd_getfd, pidfd, atoi(argv[2]), 0), "pidfd_getfd");
}

static int ProbeKill(int argc, char** argv) {
  (void)argc;
  return ByReturn(kill((pid_t)atoi(argv[1]), SIGKILL), "kill SIGKILL");
}

// Runs in the daemon: stdio to /dev/null, pid to PIDFILE, tell the launcher, then stay.
static void BecomeDaemon(const char* pidfile, int ready_fd) {
  int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
  }
  char pid[32];
  int len = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
  int fd = open(pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    (void)!write(fd, pid, (size_t)len);
    close(fd);
  }
  (void)!write(ready_fd, "y", 1);
  close(ready_fd);
  for (;;) pause();
}

// PIDFILE MARKER [double]: the marker only has to be in argv, where the driver looks for it.
static int ProbeDaemon(int argc, char** argv) {
  int double_fork = argc > 3 && strcmp(argv[3], "double") == 0;
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return ProbeError("pipe");
  pid_t pid = fork();
  if (pid < 0) return Blocked("fork: %s", strerror(errno));
  if (pid == 0) {
    close(ready[0]);
    if (setsid() < 0) _exit(1);
    if (double_fork) {
      pid_t grandchild = fork();
      if (grandchild < 0) _exit(1);
      if (grandchild > 0) _exit(0);
    }
    BecomeDaemon(argv[1], ready[1]);
  }
  close(ready[1]);
  if (double_fork) waitpid(pid, NULL, 0);
  char c;
  if (read(ready[0], &c, 1) != 1) return Blocked("the daemon did not start");
  // Starting is allowed; outliving the command is the escape, which only the driver can see.
  printf("RESULT started: %s daemon\n", double_fork ? "double-fork" : "setsid");
  return 0;
}

// MAX: forks children that wait on a pipe until MAX or the first failure, then releases them.
static int ProbeForkBomb(int argc, char** argv) {
  (void)argc;
  long max = atol(argv[1]);
  int hold[2];
  if (pipe2(hold, O_CLOEXEC) != 0) return ProbeError("pipe");
  long count = 0;
  int err = 0;
  for (; count < max; ++count) {
    pid_t pid = fork();
    if (pid < 0) {
      err = errno;
      break;
    }
    if (pid == 0) {
      close(hold[1]);
      char c;
      (void)!read(hold[0], &c, 1);  // EOF once the bomb (or its killer) is done.
      _exit(0);
    }
  }
  close(hold[1]);
  while (wait(NULL) > 0) {
  }
  printf("FORKED %ld\n", count);
  if (count < max) return Blocked("fork failed after %ld children: %s", count, strerror(err));
  return Escaped("forked all %ld children", count);
}

// With "raise": first lift the soft limit to the hard one, as any tool may. A cap that is only a
// soft limit is no cap.
static void MaybeRaise(int argc, char** argv, int arg, int resource) {
  if (argc <= arg || strcmp(argv[arg], "raise") != 0) return;
  struct rlimit lim;
  if (getrlimit(resource, &lim) != 0) return;
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(resource, &lim) != 0) printf("setrlimit: %s\n", strerror(errno));
  printf("soft limit raised to %llu\n", (unsigned long long)lim.rlim_max);
}

static int ProbeMemoryHog(int argc, char** argv) {
  MaybeRaise(argc, argv, 2, RLIMIT_AS);
  size_t bytes = (size_t)atol(argv[1]) << 20;
  void* p =
      mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return Blocked("mmap %s MiB: %s", argv[1], strerror(errno));
  munmap(p, bytes);
  return Escaped("mapped %s MiB", argv[1]);
}

// PATH OFFSET_MIB: a sparse write far past RLIMIT_FSIZE; the driver checks the file size.
static int ProbeDiskFiller(int argc, char** argv) {
  MaybeRaise(argc, argv, 3, RLIMIT_FSIZE);
  signal(SIGXFSZ, SIG_IGN);
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ProbeError("open %s: %s", argv[1], strerror(errno));
  off_t offset = (off_t)atol(argv[2]) << 20;
  ssize_t n = pwrite(fd, "x", 1, offset);
  close(fd);
  if (n < 0) return Blocked("pwrite at %s MiB: %s (errno %d)", argv[2], strerror(errno), errno);
  return Escaped("wrote at offset %s MiB", argv[2]);
}

// NAME MAX: lifts the soft limit to the hard one, as any tool may, and escapes if the soft limit
// is then above MAX. For nofile the effect itself: a descriptor numbered MAX (MAX + 1 open files).
static int ProbeRlimit(int argc, char** argv) {
  (void)argc;
  static const struct {
    const char* name;
    int resource;
  } kLimits[] = {{"core", RLIMIT_CORE}, {"nofile", RLIMIT_NOFILE}, {"nproc", RLIMIT_NPROC}};
  int resource = -1;
  for (size_t i = 0; i < sizeof(kLimits) / sizeof(kLimits[0]); ++i) {
    if (strcmp(argv[1], kLimits[i].name) == 0) resource = kLimits[i].resource;
  }
  if (resource < 0) return ProbeError("unknown limit %s", argv[1]);
  struct rlimit lim;
  if (getrlimit(resource, &lim) != 0) return ProbeError("getrlimit: %s", strerror(errno));
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(resource, &lim) != 0) printf("setrlimit: %s\n", strerror(errno));
  if (getrlimit(resource, &lim) != 0) return ProbeError("getrlimit: %s", strerror(errno));
  printf("%s soft %llu hard %llu\n", argv[1], (unsigned long long)lim.rlim_cur,
         (unsigned long long)lim.rlim_max);
  const unsigned long long max = strtoull(argv[2], NULL, 10);
  if (resource == RLIMIT_NOFILE) {
    if (dup2(1, (int)max) < 0) return Blocked("dup2 to fd %llu: %s", max, strerror(errno));
    return Escaped("opened fd %llu", max);
  }
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > max) {
    return Escaped("raised the soft %s limit above %llu", argv[1], max);
  }
  return Blocked("the %s limit stays at most %llu", argv[1], max);
}

// Injects "echo ESCAPED\n" into stdin's terminal, making it our controlling tty first.
static int ProbeTiocsti(int argc, char** argv) {
  unsigned long high = argc > 1 && strcmp(argv[1], "high") == 0 ? 1UL << 32 : 0;
  if (ioctl(0, TIOCSCTTY, 0) != 0) printf("TIOCSCTTY: %s\n", strerror(errno));
  const char* text = "echo ESCAPED\n";
  int injected = 0;
  for (const char* c = text; *c; ++c) {
    if (syscall(SYS_ioctl, 0, (unsigned long)TIOCSTI | high, c) == 0) {
      ++injected;
    } else if (c == text) {
      printf("TIOCSTI: %s (errno %d)\n", strerror(errno), errno);
    }
  }
  if (injected) return Escaped("injected %d characters", injected);
  return Blocked("TIOCSTI refused");
}

static int ProbeTioclinux(int argc, char** argv) {
  (void)argc;
  (void)argv;
  char subcode[2] = {6, 0};  // TIOCL_GETSHIFTSTATE: harmless even where it works.
  return ByRefusal(syscall(SYS_ioctl, 0, (unsigned long)TIOCLINUX, subcode), "ioctl TIOCLINUX");
}

enum { kChainLinks = 200, kChainSeconds = 60 };

// Whether a link of fork_chain stops: ./STOP exists, or the chain has lived kChainSeconds (no
// leftover outlives a test that was killed before it could write STOP).
static int ChainEnds(time_t born) {
  return access("STOP", F_OK) == 0 || time(NULL) - born > kChainSeconds;
}

// What each link of fork_chain does once born: plant the hook whenever it is missing, once a
// second, until the chain ends.
static void RunChainLink(time_t born) {
  for (;;) {
    if (ChainEnds(born)) _exit(0);
    if (access(".git/hooks/pre-commit", F_OK) != 0) {
      const int fd = open(".git/hooks/pre-commit.tmp", O_WRONLY | O_CREAT | O_TRUNC, 0755);
      if (fd >= 0) {
        static const char kHook[] = "#!/bin/sh\necho PLANTED-BY-A-CHAIN\n";
        if (write(fd, kHook, sizeof kHook - 1) < 0) {
        }
        close(fd);
        rename(".git/hooks/pre-commit.tmp", ".git/hooks/pre-commit");
      }
    }
    sleep(1);
  }
}

// A chain of processes, at most kChainLinks alive at once, whose bottom link forks a new one
// whenever fewer are alive: it regrows as fast as a killer that takes one level a round (its
// children, then theirs) peels its top, and it stays bounded where no process limit holds (root,
// unsandboxed). Every link but the bottom plants .git/hooks/pre-commit. The first process, the
// command, returns after a second; the links stay until ./STOP exists (a minute at most). The test
// judges from outside: links alive after the command's end, or the hook.
static int ProbeForkChain(int argc, char** argv) {
  (void)argc;
  (void)argv;
  pid_t* slots = mmap(NULL, sizeof(pid_t) * kChainLinks, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) return ProbeError("mmap: %s", strerror(errno));
  const pid_t first = fork();
  if (first < 0) return ProbeError("fork: %s", strerror(errno));
  if (first > 0) {
    sleep(1);
    printf("chain started below pid %d\n", (int)first);
    return kProbeBlocked;
  }
  setsid();
  const time_t born = time(NULL);
  signal(SIGCHLD, SIG_IGN);                    // No zombies: a dead link's slot frees at once.
  const int null = open("/dev/null", O_RDWR);  // Holds no pipe of the caller's open.
  for (int fd = 0; fd < 3 && null >= 0; ++fd) dup2(null, fd);
  for (;;) {
    if (ChainEnds(born)) _exit(0);
    int free_slot = -1;
    for (int i = 0; i < kChainLinks; ++i) {
      if (slots[i] == 0 || kill(slots[i], 0) != 0) free_slot = i;
    }
    if (free_slot < 0) {
      usleep(1000);
      continue;
    }
    slots[free_slot] = getpid();
    const pid_t child = fork();
    if (child == 0) continue;  // The new bottom.
    if (child > 0) RunChainLink(born);
    usleep(1000);
  }
}

const struct Probe kProcProbes[] = {
    {"status", "", 0, ProbeStatus},
    {"env", "", 0, ProbeEnv},
    {"read_environ", "PID", 1, ProbeReadEnviron},
    {"read_mem", "PID", 1, ProbeReadMem},
    {"ptrace", "PID", 1, ProbePtrace},
    {"vm_readv", "PID", 1, ProbeVmReadv},
    {"pidfd_getfd", "PID FD", 2, ProbePidfdGetfd},
    {"kill", "PID", 1, ProbeKill},
    {"daemon", "PIDFILE MARKER [double]", 2, ProbeDaemon},
    {"fork_bomb", "MAX", 1, ProbeForkBomb},
    {"fork_chain", "TOKEN", 1, ProbeForkChain},
    {"memory_hog", "MIB [raise]", 1, ProbeMemoryHog},
    {"disk_filler", "PATH OFFSET_MIB [raise]", 2, ProbeDiskFiller},
    {"rlimit", "core|nofile|nproc MAX", 2, ProbeRlimit},
    {"tiocsti", "[high]", 0, ProbeTiocsti},
    {"tioclinux", "", 0, ProbeTioclinux},
    {0, 0, 0, 0},
};
