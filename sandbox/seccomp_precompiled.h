// The seccomp programs as forkbox-seccomp-gen (sandbox/gen/seccomp_gen.cc) wrote them at build
// time from the table in seccomp_policy.cc: one BPF program per seccomp::Program, by its value.
#pragma once

#include <linux/filter.h>

#include <span>

#include "sandbox/seccomp_policy.h"

namespace forkbox::sandbox::seccomp {

extern const std::span<const sock_filter> kPrecompiled[kProgramCount];

}  // namespace forkbox::sandbox::seccomp
