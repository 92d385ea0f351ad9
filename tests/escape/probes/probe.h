// Shared by the escape probes. Each probe attempts one escape with raw syscalls and reports the
// outcome on stdout as one line "RESULT <blocked|escaped|error>: <detail>", with the exit code
// kProbeBlocked / kProbeEscaped / kProbeError. The gtest driver (escape_test.cc) never trusts the
// exit code alone: it checks the effect from outside the sandbox wherever that is possible.
#ifndef FORKBOX_TESTS_ESCAPE_PROBES_PROBE_H_
#define FORKBOX_TESTS_ESCAPE_PROBES_PROBE_H_

enum { kProbeBlocked = 0, kProbeEscaped = 10, kProbeError = 2 };

// printf-style reporters; each returns the matching exit code.
int Blocked(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int Escaped(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int ProbeError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Blocked when `rc` is negative (naming errno), else Escaped. `what` describes the attempt.
int ByReturn(long rc, const char* what);
// Like ByReturn, but a failure with an errno other than EPERM/EACCES/ENOSYS means the call got
// past the filter into the kernel (bad arguments are used on purpose), which counts as reached.
int ByRefusal(long rc, const char* what);

typedef int (*ProbeFn)(int argc, char** argv);  // argv[0] is the probe name.
struct Probe {
  const char* name;
  const char* usage;  // The arguments after the name.
  int min_args;
  ProbeFn fn;
};

// Each area exports its table, terminated by an entry with name == 0.
extern const struct Probe kFsProbes[];
extern const struct Probe kProcProbes[];
extern const struct Probe kKernelProbes[];
extern const struct Probe kNetProbes[];

#endif  // FORKBOX_TESTS_ESCAPE_PROBES_PROBE_H_
