// Filesystem escapes: writes, metadata changes and node creation outside the workdir.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "probe.h"

static const char kPayload[] = "ESCAPED\n";

// Writes the payload through an open descriptor; escaped when the write lands.
static int WriteFd(int fd, const char* what) {
  ssize_t n = write(fd, kPayload, sizeof(kPayload) - 1);
  int saved = errno;
  close(fd);
  errno = saved;
  if (n < 0) return Blocked("%s opened but write failed: %s", what, strerror(errno));
  return Escaped("%s: wrote %zd bytes", what, n);
}

static int OpenWrite(const char* path, int flags, const char* what) {
  int fd = open(path, flags | O_CLOEXEC, 0644);
  if (fd < 0) return Blocked("%s: open %s: %s (errno %d)", what, path, strerror(errno), errno);
  return WriteFd(fd, what);
}

static int ProbeWrite(int argc, char** argv) {
  (void)argc;
  return OpenWrite(argv[1], O_WRONLY | O_TRUNC, "write existing file");
}

// Writes to a terminal device outside (another pty): escape sequences or fake output.
static int ProbeTtyWrite(int argc, char** argv) {
  (void)argc;
  return OpenWrite(argv[1], O_WRONLY | O_NOCTTY, "write to another terminal");
}

static int ProbeAppend(int argc, char** argv) {
  (void)argc;
  return OpenWrite(argv[1], O_WRONLY | O_APPEND, "append to existing file");
}

static int ProbeCreate(int argc, char** argv) {
  (void)argc;
  return OpenWrite(argv[1], O_WRONLY | O_CREAT | O_EXCL, "create file");
}

static int ProbeCreateInHome(int argc, char** argv) {
  const char* home = getenv("HOME");
  if (!home) return Blocked("HOME is not set");
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", home, argv[1]);
  (void)argc;
  return OpenWrite(path, O_WRONLY | O_CREAT | O_EXCL, "create file in $HOME");
}

static int ProbeSymlinkWrite(int argc, char** argv) {
  (void)argc;
  if (symlink(argv[1], argv[2]) != 0) {
    return Blocked("symlink %s -> %s: %s", argv[2], argv[1], strerror(errno));
  }
  return OpenWrite(argv[2], O_WRONLY | O_TRUNC, "write through a fresh symlink");
}

static int ProbeHardlinkWrite(int argc, char** argv) {
  (void)argc;
  if (link(argv[1], argv[2]) != 0) {
    return Blocked("link %s -> %s: %s (errno %d)", argv[1], argv[2], strerror(errno), errno);
  }
  return OpenWrite(argv[2], O_WRONLY | O_TRUNC, "write through a hard link");
}

static int ProbeRename(int argc, char** argv) {
  (void)argc;
  return ByReturn(rename(argv[1], argv[2]), "rename");
}

static int ProbeUnlink(int argc, char** argv) {
  (void)argc;
  return ByReturn(unlink(argv[1]), "unlink");
}

static int ProbeMkdir(int argc, char** argv) {
  (void)argc;
  return ByReturn(mkdir(argv[1], 0755), "mkdir");
}

static int ProbeRmdir(int argc, char** argv) {
  (void)argc;
  return ByReturn(rmdir(argv[1]), "rmdir");
}

// chdir into DIR (reading is allowed), then write NAME through /proc/self/cwd and relatively.
static int ProbeCwdWrite(int argc, char** argv) {
  (void)argc;
  if (chdir(argv[1]) != 0) return Blocked("chdir %s: %s", argv[1], strerror(errno));
  char path[4096];
  snprintf(path, sizeof(path), "/proc/self/cwd/%s", argv[2]);
  int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd >= 0) return WriteFd(fd, "write via /proc/self/cwd");
  printf("open %s: %s\n", path, strerror(errno));
  return OpenWrite(argv[2], O_WRONLY | O_TRUNC, "write relative to a cwd outside");
}

// A child chdirs outside; the probe then writes through /proc/<child>/cwd.
static int ProbeChildCwdWrite(int argc, char** argv) {
  (void)argc;
  int ready[2];
  int hold[2];
  if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(hold, O_CLOEXEC) != 0) return ProbeError("pipe");
  pid_t pid = fork();
  if (pid < 0) return ProbeError("fork: %s", strerror(errno));
  if (pid == 0) {
    char ok = chdir(argv[1]) == 0 ? 'y' : 'n';
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    char c;
    (void)!read(hold[0], &c, 1);  // Stay until the parent is done.
    _exit(0);
  }
  close(hold[0]);
  char ok = 'n';
  if (read(ready[0], &ok, 1) != 1 || ok != 'y') {
    close(hold[1]);
    return Blocked("child could not chdir to %s", argv[1]);
  }
  char path[4096];
  snprintf(path, sizeof(path), "/proc/%d/cwd/%s", (int)pid, argv[2]);
  int rc = OpenWrite(path, O_WRONLY | O_TRUNC, "write via /proc/<child>/cwd");
  close(hold[1]);
  return rc;
}

static int ProbeFdReopen(int argc, char** argv) {
  (void)argc;
  int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Blocked("open %s read-only: %s", argv[1], strerror(errno));
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  return OpenWrite(path, O_WRONLY | O_TRUNC, "reopen /proc/self/fd for writing");
}

static int ProbeFdWrite(int argc, char** argv) {
  (void)argc;
  int fd = atoi(argv[1]);
  if (fcntl(fd, F_GETFD) < 0) return Blocked("fd %d is not open: %s", fd, strerror(errno));
  return WriteFd(fd, "write to inherited descriptor");
}

// Lists every descriptor above 2; any at all is a leak, and a writable one is written to.
static int ProbeFdScan(int argc, char** argv) {
  (void)argc;
  (void)argv;
  int found = 0;
  for (int fd = 3; fd < 65536; ++fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) continue;
    char link[64];
    char target[4096] = "?";
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n >= 0) target[n] = 0;
    printf("open fd %d -> %s (flags 0x%x)\n", fd, target, (unsigned)flags);
    if ((flags & O_ACCMODE) != O_RDONLY) (void)!write(fd, kPayload, sizeof(kPayload) - 1);
    ++found;
  }
  if (found) return Escaped("%d descriptors above 2 were inherited", found);
  return Blocked("no descriptor above 2 is open");
}

// O_PATH descriptor of an outside file, linked into the workdir through /proc/self/fd.
static int ProbeFdLink(int argc, char** argv) {
  (void)argc;
  int fd = open(argv[1], O_PATH | O_CLOEXEC);
  if (fd < 0) return Blocked("open O_PATH %s: %s", argv[1], strerror(errno));
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  if (linkat(AT_FDCWD, path, AT_FDCWD, argv[2], AT_SYMLINK_FOLLOW) != 0) {
    return Blocked("linkat via %s: %s (errno %d)", path, strerror(errno), errno);
  }
  return OpenWrite(argv[2], O_WRONLY | O_TRUNC, "write through an O_PATH hard link");
}

static int ProbeRenameExchange(int argc, char** argv) {
  (void)argc;
  return ByReturn(renameat2(AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE),
                  "renameat2(RENAME_EXCHANGE)");
}

// PATH MARKER: reads a file; escaped when its content holds MARKER (an empty file, e.g. /dev/null
// bound over it, or a refused open is blocked).
static int ProbeReadSecret(int argc, char** argv) {
  (void)argc;
  int fd = open(argv[1], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Blocked("open %s: %s (errno %d)", argv[1], strerror(errno), errno);
  char buf[4096];
  ssize_t len = read(fd, buf, sizeof(buf) - 1);
  int saved = errno;
  close(fd);
  if (len < 0) return Blocked("read %s: %s (errno %d)", argv[1], strerror(saved), saved);
  buf[len] = 0;
  if (strstr(buf, argv[2]) != NULL) return Escaped("read the secret in %s", argv[1]);
  return Blocked("%s opened but holds no secret (%zd bytes)", argv[1], len);
}

// PATH: lists a directory (opendir, readdir to the end); escaped when it is listed.
static int ProbeListDir(int argc, char** argv) {
  (void)argc;
  DIR* dir = opendir(argv[1]);
  if (dir == NULL) return Blocked("opendir %s: %s (errno %d)", argv[1], strerror(errno), errno);
  int entries = 0;
  errno = 0;
  while (readdir(dir) != NULL) ++entries;
  int saved = errno;
  closedir(dir);
  if (saved != 0) return Blocked("readdir %s: %s (errno %d)", argv[1], strerror(saved), saved);
  return Escaped("listed %d entries of %s", entries, argv[1]);
}

// A character device node (1:3, /dev/null's numbers: harmless even when it works).
static int ProbeMknodChar(int argc, char** argv) {
  (void)argc;
  return ByReturn(mknod(argv[1], S_IFCHR | 0666, makedev(1, 3)), "mknod a character device");
}

// PATH: writes the file's current content back (a no-op even when allowed) to a sysctl or cgroup
// file; "@SELF@" as the second argument writes our pid instead (moving us out of a cgroup).
static int ProbeRewrite(int argc, char** argv) {
  char buf[4096];
  ssize_t len;
  if (argc > 2 && strcmp(argv[2], "@SELF@") == 0) {
    len = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
  } else {
    int in = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (in < 0) return Blocked("read %s: %s", argv[1], strerror(errno));
    len = read(in, buf, sizeof(buf));
    close(in);
    if (len <= 0) return ProbeError("read %s: %s", argv[1], strerror(errno));
  }
  int fd = open(argv[1], O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Blocked("open %s for writing: %s (errno %d)", argv[1], strerror(errno), errno);
  ssize_t n = write(fd, buf, (size_t)len);
  int saved = errno;
  close(fd);
  if (n < 0) return Blocked("write %s: %s (errno %d)", argv[1], strerror(saved), saved);
  return Escaped("wrote %zd bytes to %s", n, argv[1]);
}

static int ProbeTruncate(int argc, char** argv) {
  (void)argc;
  return ByReturn(truncate(argv[1], 0), "truncate");
}

static int ProbeChmod(int argc, char** argv) {
  (void)argc;
  return ByReturn(chmod(argv[1], 0777), "chmod 0777");
}

// Owner-to-self chown still changes ctime, which the driver checks.
static int ProbeChown(int argc, char** argv) {
  (void)argc;
  return ByReturn(chown(argv[1], getuid(), getgid()), "chown");
}

static int ProbeUtime(int argc, char** argv) {
  (void)argc;
  struct timespec times[2] = {{1, 0}, {1, 0}};
  return ByReturn(utimensat(AT_FDCWD, argv[1], times, 0), "utimensat to 1970");
}

static int ProbeXattr(int argc, char** argv) {
  (void)argc;
  return ByReturn(setxattr(argv[1], "user.forkbox_escape", "x", 1, 0), "setxattr user.*");
}

static int ProbeMkfifo(int argc, char** argv) {
  (void)argc;
  return ByReturn(mkfifo(argv[1], 0644), "mkfifo");
}

static int ProbeBindUnix(int argc, char** argv) {
  (void)argc;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Blocked("socket(AF_UNIX): %s", strerror(errno));
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(argv[1]) >= sizeof(addr.sun_path)) return ProbeError("path too long");
  strcpy(addr.sun_path, argv[1]);
  return ByReturn(bind(fd, (struct sockaddr*)&addr, sizeof(addr)), "bind unix socket");
}

static int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// HANDLE_TYPE HEX MOUNT_DIR: a file handle computed outside the sandbox, opened for writing.
static int ProbeOpenByHandle(int argc, char** argv) {
  (void)argc;
  size_t len = strlen(argv[2]) / 2;
  struct file_handle* fh = malloc(sizeof(*fh) + len);
  if (!fh) return ProbeError("malloc");
  fh->handle_bytes = (unsigned)len;
  fh->handle_type = atoi(argv[1]);
  for (size_t i = 0; i < len; ++i) {
    int hi = HexValue(argv[2][2 * i]);
    int lo = HexValue(argv[2][2 * i + 1]);
    if (hi < 0 || lo < 0) return ProbeError("bad hex handle");
    fh->f_handle[i] = (unsigned char)(hi * 16 + lo);
  }
  int mount_fd = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mount_fd < 0) return Blocked("open %s: %s", argv[3], strerror(errno));
  int fd = open_by_handle_at(mount_fd, fh, O_WRONLY | O_TRUNC | O_CLOEXEC);
  free(fh);
  if (fd < 0) return Blocked("open_by_handle_at: %s (errno %d)", strerror(errno), errno);
  return WriteFd(fd, "open_by_handle_at for writing");
}

static int ProbeNameToHandle(int argc, char** argv) {
  (void)argc;
  struct {
    struct file_handle fh;
    unsigned char bytes[MAX_HANDLE_SZ];
  } h;
  h.fh.handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  return ByReturn(name_to_handle_at(AT_FDCWD, argv[1], &h.fh, &mount_id, 0), "name_to_handle_at");
}

const struct Probe kFsProbes[] = {
    {"write", "PATH", 1, ProbeWrite},
    {"append", "PATH", 1, ProbeAppend},
    {"tty_write", "DEVICE", 1, ProbeTtyWrite},
    {"create", "PATH", 1, ProbeCreate},
    {"create_in_home", "NAME", 1, ProbeCreateInHome},
    {"symlink_write", "TARGET LINK", 2, ProbeSymlinkWrite},
    {"hardlink_write", "EXISTING NEWLINK", 2, ProbeHardlinkWrite},
    {"rename", "FROM TO", 2, ProbeRename},
    {"unlink", "PATH", 1, ProbeUnlink},
    {"mkdir", "PATH", 1, ProbeMkdir},
    {"rmdir", "PATH", 1, ProbeRmdir},
    {"cwd_write", "DIR NAME", 2, ProbeCwdWrite},
    {"child_cwd_write", "DIR NAME", 2, ProbeChildCwdWrite},
    {"fd_reopen", "PATH", 1, ProbeFdReopen},
    {"fd_write", "FD", 1, ProbeFdWrite},
    {"fd_scan", "", 0, ProbeFdScan},
    {"fd_link", "OUTSIDE_FILE NEWLINK", 2, ProbeFdLink},
    {"rename_exchange", "A B", 2, ProbeRenameExchange},
    {"mknod_char", "PATH", 1, ProbeMknodChar},
    {"rewrite", "PATH [@SELF@]", 1, ProbeRewrite},
    {"read_secret", "PATH MARKER", 2, ProbeReadSecret},
    {"list_dir", "PATH", 1, ProbeListDir},
    {"truncate", "PATH", 1, ProbeTruncate},
    {"chmod", "PATH", 1, ProbeChmod},
    {"chown", "PATH", 1, ProbeChown},
    {"utime", "PATH", 1, ProbeUtime},
    {"xattr", "PATH", 1, ProbeXattr},
    {"mkfifo", "PATH", 1, ProbeMkfifo},
    {"bind_unix", "PATH", 1, ProbeBindUnix},
    {"open_by_handle", "TYPE HEX MOUNT_DIR", 3, ProbeOpenByHandle},
    {"name_to_handle", "PATH", 1, ProbeNameToHandle},
    {0, 0, 0, 0},
};
