#include "tests/ipc/alloc_tracker.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

namespace {
thread_local bool g_tracking = false;
thread_local size_t g_largest = 0;
thread_local std::string_view g_needle;
thread_local size_t g_hits = 0;

void ScanBeforeFree(void* p) {
  if (g_needle.empty() || p == nullptr) return;
  const std::string_view block(static_cast<const char*>(p), malloc_usable_size(p));
  if (block.find(g_needle) != std::string_view::npos) ++g_hits;
}
}  // namespace

namespace forkbox::ipc::testing {
AllocationTracker::AllocationTracker() {
  g_largest = 0;
  g_tracking = true;
}
AllocationTracker::~AllocationTracker() { g_tracking = false; }
size_t AllocationTracker::largest() const { return g_largest; }

FreedMemoryScanner::FreedMemoryScanner(std::string_view needle) {
  g_hits = 0;
  g_needle = needle;
}
FreedMemoryScanner::~FreedMemoryScanner() { g_needle = {}; }
size_t FreedMemoryScanner::hits() const { return g_hits; }
}  // namespace forkbox::ipc::testing

// Replacements of the global allocation functions for this test binary (malloc-backed, so
// new/delete stay paired; the sanitizers still see every malloc/free).
void* operator new(size_t size) {
  if (g_tracking && size > g_largest) g_largest = size;
  if (void* p = std::malloc(size == 0 ? 1 : size)) {
    // Zeroed whole: a block's tail past `size` would otherwise keep what an earlier owner of the
    // memory left there (a copy of the key freed unwiped earlier, as the control frees one), and
    // the scan of its free would blame the code under test for it. Found in a freed block, the key
    // was written by that block's owner.
    std::memset(p, 0, malloc_usable_size(p));
    return p;
  }
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void operator delete(void* p) noexcept {
  ScanBeforeFree(p);
  std::free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }
