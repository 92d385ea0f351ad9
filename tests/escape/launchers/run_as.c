// escape_run_as UID GID CMD [ARGS...]: drops to UID/GID (no supplementary groups) and execs CMD.
// Not setuid: the suite runs it as root to run forkbox as an unprivileged user.
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: escape_run_as UID GID CMD [ARGS...]\n");
    return 125;
  }
  uid_t uid = (uid_t)strtoul(argv[1], NULL, 10);
  gid_t gid = (gid_t)strtoul(argv[2], NULL, 10);
  if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
    fprintf(stderr, "escape_run_as: dropping to %u:%u: %s\n", uid, gid, strerror(errno));
    return 125;
  }
  if (setuid(0) == 0 && uid != 0) {
    fprintf(stderr, "escape_run_as: could regain root after dropping privileges\n");
    return 125;
  }
  execv(argv[3], argv + 3);
  fprintf(stderr, "escape_run_as: exec %s: %s\n", argv[3], strerror(errno));
  return 127;
}
