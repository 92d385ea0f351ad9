#include "base/startup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace forkbox {
namespace {

// The smaps Size and Rss (kB) of the mapping that holds `addr`; {-1, -1} if none does.
struct Mapping {
  long size_kb = -1;
  long rss_kb = -1;
};
Mapping MappingOf(const void* addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  Mapping m;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(' ') > 8) {
      if (inside) break;  // The next mapping starts.
      inside = lo <= a && a < hi;
      continue;
    }
    if (!inside) continue;
    std::istringstream fields(line);
    std::string key;
    long kb = 0;
    fields >> key >> kb;
    if (key == "Size:") m.size_kb = kb;
    if (key == "Rss:") m.rss_kb = kb;
  }
  return m;
}

// libc's code (getpid lives there) is only partly mapped in a test process until PrefaultCode
// maps every page of it, and of the executable's code. (This small test binary's code is mapped
// whole by the first faults already; TheParentMapsAllItsCodeTheSpawnerOnlyWhatItRuns in
// tests/parent checks forkbox's own.)
TEST(PrefaultCode, MapsEveryCodePageOfTheExecutableAndLibc) {
  const void* ours = reinterpret_cast<const void*>(&MappingOf);
  const void* libc = reinterpret_cast<const void*>(&::getpid);
  const Mapping before = MappingOf(libc);
  ASSERT_GT(before.size_kb, 0);
  ASSERT_GT(MappingOf(ours).size_kb, 0);
  // The control: without the advice, libc code that never ran is not mapped.
  ASSERT_LT(before.rss_kb, before.size_kb);
  ASSERT_TRUE(PrefaultCode().ok());
  const Mapping after = MappingOf(libc);
  EXPECT_EQ(after.rss_kb, after.size_kb) << "before: " << before.rss_kb << " kB";
  EXPECT_EQ(MappingOf(ours).rss_kb, MappingOf(ours).size_kb);
}

}  // namespace
}  // namespace forkbox
