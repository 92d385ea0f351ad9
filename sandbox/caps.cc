#include "sandbox/caps.h"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace forkbox::sandbox {
namespace {

bool HasEffectiveSetpcap() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[0].effective & (1U << CAP_SETPCAP)) != 0;
}

}  // namespace

int DropAllCapabilitiesRaw(const char** step) {
  const bool can_setpcap = HasEffectiveSetpcap();
  if (can_setpcap) {
    // uid 0 would otherwise regain a full set at the next execve.
    *step = "prctl(PR_SET_SECUREBITS)";
    unsigned long bits = SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_SETUID_FIXUP |
                         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NOROOT | SECBIT_NOROOT_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) return errno;
    // Bounding set: needs CAP_SETPCAP. Without it (an unprivileged process) the bounding set
    // cannot be used anyway: no_new_privs forbids gaining anything at execve.
    *step = "prctl(PR_CAPBSET_DROP)";
    for (int cap = 0; cap <= 63; ++cap) {
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
        if (errno == EINVAL) break;  // Past the kernel's last capability.
        return errno;
      }
    }
  }
  *step = "prctl(PR_CAP_AMBIENT_CLEAR_ALL)";
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return errno;
  *step = "capset(all zero)";
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &header, data) != 0) return errno;
  return 0;
}

bool HasAnyCapability() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return true;
  for (const auto& d : data) {
    if (d.effective != 0 || d.permitted != 0 || d.inheritable != 0) return true;
  }
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) == 1) return true;
  }
  return false;
}

}  // namespace forkbox::sandbox
