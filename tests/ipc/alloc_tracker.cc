#include "tests/ipc/alloc_tracker.h"

#include <cstdlib>
#include <new>

namespace {
thread_local bool g_tracking = false;
thread_local size_t g_largest = 0;
}  // namespace

namespace forkbox::ipc::testing {
AllocationTracker::AllocationTracker() {
  g_largest = 0;
  g_tracking = true;
}
AllocationTracker::~AllocationTracker() { g_tracking = false; }
size_t AllocationTracker::largest() const { return g_largest; }
}  // namespace forkbox::ipc::testing

// Replacements of the global allocation functions for this test binary (malloc-backed, so
// new/delete stay paired; the sanitizers still see every malloc/free).
void* operator new(size_t size) {
  if (g_tracking && size > g_largest) g_largest = size;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
