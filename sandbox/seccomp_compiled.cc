// seccomp::Compiled: the programs generated at build time (seccomp_precompiled.h).
#include "sandbox/seccomp_precompiled.h"

namespace forkbox::sandbox::seccomp {

Result<std::span<const sock_filter>> Compiled(Program program) {
  const size_t index = static_cast<size_t>(program);
  if (index >= kProgramCount || kPrecompiled[index].empty()) {
    return Status::Internal("seccomp: no precompiled program " + std::to_string(index));
  }
  return kPrecompiled[index];
}

}  // namespace forkbox::sandbox::seccomp
