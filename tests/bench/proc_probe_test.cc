// Unit tests of the /proc probes the canary relies on, against a process the test controls: a
// `cat` blocked on an empty pipe whose environment holds a random marker.
#include "tests/bench/proc_probe.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "base/process.h"
#include "base/unique_fd.h"

namespace forkbox::bench {
namespace {

std::string RandomHex(size_t bytes) {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  urandom.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  EXPECT_TRUE(urandom.good());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// A `cat` that blocks reading an empty pipe until the holder closes its write end.
struct HeldProcess {
  ChildProcess process;
  UniqueFd stdin_write;
};

HeldProcess StartCat(const std::string& env_entry) {
  int fds[2];
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]);
  HeldProcess held;
  held.stdin_write = UniqueFd(fds[1]);
  SpawnOptions options;
  options.argv = {"/bin/cat"};
  options.env = {env_entry};
  options.fds = {{read_end.get(), 0}};
  auto child = Spawn(options);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  if (child.ok()) held.process = std::move(*child);
  return held;
}

TEST(ProcProbeTest, ScanFindsAMarkerInTheProcessAndNotAnAbsentOne) {
  const std::string marker = RandomHex(32);
  HeldProcess cat = StartCat("CANARY=" + marker);
  ASSERT_TRUE(cat.process.running());

  auto found = ScanAddressSpace(cat.process.pid(), marker);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_GE(found->matches, 1) << "the environment block holds the marker";
  EXPECT_GT(found->bytes_scanned, 0);
  EXPECT_GT(found->regions, 0);

  auto absent = ScanAddressSpace(cat.process.pid(), RandomHex(32));
  ASSERT_TRUE(absent.ok()) << absent.status().ToString();
  EXPECT_EQ(absent->matches, 0);
}

TEST(ProcProbeTest, ScanRejectsAnEmptyNeedleAndAMissingProcess) {
  EXPECT_FALSE(ScanAddressSpace(getpid(), "").ok());
  HeldProcess cat = StartCat("X=1");
  const pid_t pid = cat.process.pid();
  cat.stdin_write = UniqueFd();  // EOF: cat exits.
  ASSERT_TRUE(cat.process.Wait().ok());
  auto gone = ScanAddressSpace(pid, "anything");
  EXPECT_FALSE(gone.ok());
  EXPECT_FALSE(ReadMemStatus(pid).ok());
}

TEST(ProcProbeTest, MemStatusAndChildrenOfThisProcess) {
  auto self = ReadMemStatus(getpid());
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  EXPECT_GT(self->rss_kib, 0);
  EXPECT_GE(self->hwm_kib, self->rss_kib);

  HeldProcess cat = StartCat("X=1");
  const auto kids = ChildrenNamed(getpid(), "cat");
  EXPECT_NE(std::find(kids.begin(), kids.end(), cat.process.pid()), kids.end());
  EXPECT_TRUE(ChildrenNamed(getpid(), "no-such-comm").empty());
}

}  // namespace
}  // namespace forkbox::bench
