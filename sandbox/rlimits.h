// Resource limits: core 0, file size, address space, open files, processes.
#pragma once

#include <cstdint>

namespace forkbox::sandbox {

struct Limits {
  int64_t fsize_bytes = 0;
  int64_t as_bytes = 0;  // 0: leave unchanged (e.g. an ASan process, whose shadow is huge).
  int64_t nofile = 0;
  int64_t nproc = 0;
};

// Async-signal-safe. Lowers soft and hard limits to each value; never raises either one.
// Returns 0 or an errno value; `*step` names the failing limit.
int ApplyLimitsRaw(const Limits& limits, const char** step);

}  // namespace forkbox::sandbox
