// Records the largest single operator-new allocation made by this thread while a tracker is
// alive, to prove that a hostile length field is never used to size a buffer.
#pragma once

#include <cstddef>

namespace forkbox::ipc::testing {

class AllocationTracker {
 public:
  AllocationTracker();
  ~AllocationTracker();
  AllocationTracker(const AllocationTracker&) = delete;
  AllocationTracker& operator=(const AllocationTracker&) = delete;
  size_t largest() const;
};

}  // namespace forkbox::ipc::testing
