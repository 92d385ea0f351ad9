// seccomp's runtime half: installing a compiled program and checking for seccomp. Apart from the
// table and its compiler (seccomp_policy.cc, libseccomp), which only the build-time generator and
// the tests link: the executables load no libseccomp.
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/seccomp_policy.h"

namespace forkbox::sandbox::seccomp {

int InstallRaw(std::span<const sock_filter> program, bool all_threads) {
  sock_fprog prog{static_cast<unsigned short>(program.size()),
                  const_cast<sock_filter*>(program.data())};
  unsigned flags = all_threads ? SECCOMP_FILTER_FLAG_TSYNC : 0;
  long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
  if (rc < 0) return errno;
  if (rc > 0) return ESRCH;  // TSYNC: a thread could not be synchronised.
  return 0;
}

int InstallWithListenerRaw(std::span<const sock_filter> program, int* listener) {
  sock_fprog prog{static_cast<unsigned short>(program.size()),
                  const_cast<sock_filter*>(program.data())};
  long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (rc < 0) return errno;
  *listener = static_cast<int>(rc);
  return 0;
}

bool Available(Status* error) {
  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
    if (error) *error = Status::FromErrno(errno, "prctl(PR_GET_SECCOMP)");
    return false;
  }
  uint32_t action = SECCOMP_RET_KILL_PROCESS;
  if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
    if (error) *error = Status::FromErrno(errno, "seccomp(GET_ACTION_AVAIL, KILL_PROCESS)");
    return false;
  }
  return true;
}

}  // namespace forkbox::sandbox::seccomp
