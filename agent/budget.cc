#include "agent/budget.h"

#include <algorithm>

#include "base/saturate.h"

namespace forkbox::agent {

int64_t TokenBudget::Remaining() const {
  return std::max<int64_t>(0, SaturatingAdd(total_ - spent_, -reserved_));
}

int64_t TokenBudget::Reserve(int64_t want) {
  const int64_t left = Remaining();
  const int64_t granted = std::max<int64_t>(1, std::min(want, left));
  reserved_ += granted;
  return granted;
}

void TokenBudget::Release(int64_t reserved, int64_t used) {
  reserved_ = std::max<int64_t>(0, reserved_ - reserved);
  spent_ = SaturatingAdd(spent_, used);  // `used` is what a child reported.
}

}  // namespace forkbox::agent
