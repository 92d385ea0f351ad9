// Test hooks on the global allocation functions of the ipc test binary.
//
// Records the largest single operator-new allocation made by this thread while a tracker is
// alive, to prove that a hostile length field is never used to size a buffer.
#pragma once

#include <cstddef>
#include <string_view>

namespace forkbox::ipc::testing {

class AllocationTracker {
 public:
  AllocationTracker();
  ~AllocationTracker();
  AllocationTracker(const AllocationTracker&) = delete;
  AllocationTracker& operator=(const AllocationTracker&) = delete;
  size_t largest() const;
};

// While alive, every block this thread frees through operator delete is searched for `needle`
// first (the whole usable size of the block): hits() counts the blocks that still held it. Every
// operator-new block is zeroed whole when allocated, so a hit is what the block's owner wrote,
// never what an earlier owner of the memory left (the tests' order does not matter).
class FreedMemoryScanner {
 public:
  explicit FreedMemoryScanner(std::string_view needle);
  ~FreedMemoryScanner();
  FreedMemoryScanner(const FreedMemoryScanner&) = delete;
  FreedMemoryScanner& operator=(const FreedMemoryScanner&) = delete;
  size_t hits() const;
};

}  // namespace forkbox::ipc::testing
