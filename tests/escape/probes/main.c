// escape_probe NAME [ARGS...]: the multi-call escape probe. See probe.h for the result protocol.
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

static int Report(int code, const char* verdict, const char* fmt, va_list ap) {
  printf("RESULT %s: ", verdict);
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  return code;
}

int Blocked(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int code = Report(kProbeBlocked, "blocked", fmt, ap);
  va_end(ap);
  return code;
}

int Escaped(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int code = Report(kProbeEscaped, "escaped", fmt, ap);
  va_end(ap);
  return code;
}

int ProbeError(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int code = Report(kProbeError, "error", fmt, ap);
  va_end(ap);
  return code;
}

int ByReturn(long rc, const char* what) {
  if (rc < 0) return Blocked("%s: %s (errno %d)", what, strerror(errno), errno);
  return Escaped("%s succeeded (returned %ld)", what, rc);
}

int ByRefusal(long rc, const char* what) {
  if (rc >= 0) return Escaped("%s succeeded (returned %ld)", what, rc);
  if (errno == EPERM || errno == EACCES || errno == ENOSYS) {
    return Blocked("%s: %s (errno %d)", what, strerror(errno), errno);
  }
  return Escaped("%s reached the kernel: %s (errno %d)", what, strerror(errno), errno);
}

static const struct Probe* const kTables[] = {kFsProbes, kProcProbes, kKernelProbes, kNetProbes};

static void Usage(void) {
  fprintf(stderr, "usage: escape_probe NAME [ARGS...]\n");
  for (size_t t = 0; t < sizeof(kTables) / sizeof(kTables[0]); ++t) {
    for (const struct Probe* p = kTables[t]; p->name; ++p) {
      fprintf(stderr, "  %s %s\n", p->name, p->usage);
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage();
    return kProbeError;
  }
  for (size_t t = 0; t < sizeof(kTables) / sizeof(kTables[0]); ++t) {
    for (const struct Probe* p = kTables[t]; p->name; ++p) {
      if (strcmp(p->name, argv[1]) != 0) continue;
      if (argc - 2 < p->min_args) {
        fprintf(stderr, "escape_probe: usage: %s %s\n", p->name, p->usage);
        return kProbeError;
      }
      printf("PROBE %s start\n", p->name);
      fflush(stdout);
      return p->fn(argc - 1, argv + 1);
    }
  }
  fprintf(stderr, "escape_probe: unknown probe '%s'\n", argv[1]);
  Usage();
  return kProbeError;
}
