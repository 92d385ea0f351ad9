// Sums of figures that come from elsewhere (a child's token counts): clamped at the int64_t range
// instead of overflowing, which is undefined behaviour and would show negative totals.
#pragma once

#include <cstdint>
#include <limits>

namespace forkbox {

inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

}  // namespace forkbox
