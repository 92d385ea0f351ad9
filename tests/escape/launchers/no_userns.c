// escape_no_userns [--no-landlock] CMD [ARGS...]: execs CMD under a seccomp filter that refuses
// user namespaces the way Docker's default profile does (unshare and clone with CLONE_NEWUSER get
// EPERM, clone3 ENOSYS so libc falls back to clone). --no-landlock also makes the Landlock
// syscalls return ENOSYS, as on a kernel without Landlock.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static int Install(int no_landlock) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return -ENOMEM;
  int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0);
  if (rc == 0) {
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
  }
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setns), 0);
  if (no_landlock) {
    const int calls[] = {SCMP_SYS(landlock_create_ruleset), SCMP_SYS(landlock_add_rule),
                         SCMP_SYS(landlock_restrict_self)};
    for (size_t i = 0; rc == 0 && i < sizeof(calls) / sizeof(calls[0]); ++i) {
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), calls[i], 0);
    }
  }
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  return rc;
}

int main(int argc, char** argv) {
  int no_landlock = argc > 1 && strcmp(argv[1], "--no-landlock") == 0;
  char** cmd = argv + 1 + no_landlock;
  if (!*cmd) {
    fprintf(stderr, "usage: escape_no_userns [--no-landlock] CMD [ARGS...]\n");
    return 125;
  }
  // Loading a filter without CAP_SYS_ADMIN needs no_new_privs; forkbox sets it anyway.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    fprintf(stderr, "escape_no_userns: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
    return 125;
  }
  int rc = Install(no_landlock);
  if (rc != 0) {
    fprintf(stderr, "escape_no_userns: seccomp: %s\n", strerror(-rc));
    return 125;
  }
  execv(cmd[0], cmd);
  fprintf(stderr, "escape_no_userns: exec %s: %s\n", cmd[0], strerror(errno));
  return 127;
}
