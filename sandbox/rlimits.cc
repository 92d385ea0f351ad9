#include "sandbox/rlimits.h"

#include <sys/resource.h>

#include <cerrno>

namespace forkbox::sandbox {
namespace {

// The smaller of two limits, RLIM_INFINITY being the largest.
rlim_t Min(rlim_t a, rlim_t b) {
  if (a == RLIM_INFINITY) return b;
  if (b == RLIM_INFINITY) return a;
  return a < b ? a : b;
}

int Lower(int resource, int64_t value) {
  rlimit current;
  if (getrlimit(resource, &current) != 0) return errno;
  const rlim_t want = value < 0 ? 0 : static_cast<rlim_t>(value);
  // The caller's soft limit stays if it is lower (a `ulimit -S -f` holds for the sandbox too).
  rlimit next{Min(want, current.rlim_cur), Min(want, current.rlim_max)};
  if (setrlimit(resource, &next) != 0) return errno;
  return 0;
}

}  // namespace

int ApplyLimitsRaw(const Limits& limits, const char** step) {
  *step = "setrlimit(RLIMIT_CORE)";
  if (int err = Lower(RLIMIT_CORE, 0)) return err;
  if (limits.fsize_bytes > 0) {
    *step = "setrlimit(RLIMIT_FSIZE)";
    if (int err = Lower(RLIMIT_FSIZE, limits.fsize_bytes)) return err;
  }
  if (limits.as_bytes > 0) {
    *step = "setrlimit(RLIMIT_AS)";
    if (int err = Lower(RLIMIT_AS, limits.as_bytes)) return err;
  }
  if (limits.nofile > 0) {
    *step = "setrlimit(RLIMIT_NOFILE)";
    if (int err = Lower(RLIMIT_NOFILE, limits.nofile)) return err;
  }
  if (limits.nproc > 0) {
    *step = "setrlimit(RLIMIT_NPROC)";
    if (int err = Lower(RLIMIT_NPROC, limits.nproc)) return err;
  }
  return 0;
}

}  // namespace forkbox::sandbox
