#include "sandbox/rlimits.h"

#include <sys/resource.h>

#include <cerrno>

namespace forkbox::sandbox {
namespace {

int Lower(int resource, int64_t value) {
  rlimit current;
  if (getrlimit(resource, &current) != 0) return errno;
  rlim_t want = value < 0 ? 0 : static_cast<rlim_t>(value);
  if (current.rlim_max != RLIM_INFINITY && current.rlim_max < want) want = current.rlim_max;
  rlimit next{want, want};
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
