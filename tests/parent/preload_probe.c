// A library a test names in LD_PRELOAD: every process that loads it leaves a file
// "loaded-<program name>" beside the library (where it can write), so the test sees which of
// forkbox's processes took an opted-in loader variable.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>  // program_invocation_short_name
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char kAnchor = 0;  // An address inside this library, for dladdr.

__attribute__((constructor)) static void LeaveMark(void) {
  Dl_info info;
  if (dladdr(&kAnchor, &info) == 0 || info.dli_fname == NULL) return;
  const char* slash = strrchr(info.dli_fname, '/');
  if (slash == NULL) return;
  char path[PATH_MAX];
  int n = snprintf(path, sizeof path, "%.*s/loaded-%s", (int)(slash - info.dli_fname),
                   info.dli_fname, program_invocation_short_name);
  if (n <= 0 || (size_t)n >= sizeof path) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd >= 0) close(fd);
}
