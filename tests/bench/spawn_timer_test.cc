// forkbox-bench-spawn, the clock scripts/bench reads every spawn figure and the one-shot runs'
// start from: one entry per timed run in each list, none for the warm-up runs, start times that are
// this machine's unix time in order, and a clear refusal of a bad count or a failing command; and
// its --machine figures.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct TimerRun {
  int exit_code = -1;
  std::string out;
};

TimerRun Timer(const std::string& args) {
  TimerRun r;
  const std::string cmd = std::string(FORKBOX_BIN_DIR) + "/forkbox-bench-spawn " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int status = pclose(f);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

int64_t UnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(SpawnTimer, ReportsEachTimedRunWithItsUnixStart) {
  const int64_t before = UnixNs();
  // The warm-up runs append to the file too: 2 + 3 lines, but only 3 timed entries.
  // A fresh private directory: no other process can have planted the file's name.
  std::string dir = ::testing::TempDir() + "/spawn-timer-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string file = dir + "/runs";
  TimerRun r = Timer("--warmup 2 3 -- /bin/sh -c 'echo x >> " + file + "'");
  const int64_t after = UnixNs();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json got = nlohmann::json::parse(r.out);
  ASSERT_EQ(got["ns"].size(), 3u) << r.out;
  ASSERT_EQ(got["cpu_ns"].size(), 3u) << r.out;
  ASSERT_EQ(got["start_unix_ns"].size(), 3u) << r.out;
  int64_t last = before;
  for (const auto& start : got["start_unix_ns"]) {
    EXPECT_GE(start.get<int64_t>(), last) << r.out;
    last = start.get<int64_t>();
  }
  EXPECT_LE(last, after);
  for (const auto& ns : got["ns"]) EXPECT_GT(ns.get<int64_t>(), 0);
  FILE* f = std::fopen(file.c_str(), "r");
  ASSERT_NE(f, nullptr);
  int lines = 0;
  for (int c = 0; (c = std::fgetc(f)) != EOF;) lines += c == '\n';
  std::fclose(f);
  EXPECT_EQ(lines, 5) << "2 warm-up runs and 3 timed ones";
  std::remove(file.c_str());
  rmdir(dir.c_str());
  // Without --warmup: one warm-up run, as before.
  TimerRun plain = Timer("2 -- /bin/true");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["start_unix_ns"].size(), 2u);
}

TEST(SpawnTimer, RefusesBadCountsAndFailingCommands) {
  for (const char* args : {"--warmup x 1 -- /bin/true", "--warmup 101 1 -- /bin/true",
                           "0 -- /bin/true", "1 -- true"}) {
    TimerRun r = Timer(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("forkbox-bench-spawn"), std::string::npos) << r.out;
  }
  TimerRun failed = Timer("--warmup 0 1 -- /bin/false");
  EXPECT_EQ(failed.exit_code, 1) << failed.out;
  EXPECT_NE(failed.out.find("/bin/false exited with code 1"), std::string::npos) << failed.out;
}

// --machine: one figure of each kind per sample. A first write to a fresh page zeroes 4 KiB in a
// page fault, which no machine does in under 50 ns; the fork's figure comes from the child's own
// clock (unset, it would be negative).
TEST(SpawnTimer, MachineReportsAFreshPageAndAForkPerSample) {
  TimerRun r = Timer("--machine 3");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json got = nlohmann::json::parse(r.out);
  ASSERT_EQ(got["fresh_page_ns"].size(), 3u) << r.out;
  ASSERT_EQ(got["fork_child_ns"].size(), 3u) << r.out;
  for (const auto& ns : got["fresh_page_ns"]) EXPECT_GE(ns.get<int64_t>(), 50) << r.out;
  for (const auto& ns : got["fork_child_ns"]) EXPECT_GT(ns.get<int64_t>(), 0) << r.out;
  for (const char* args : {"--machine 0", "--machine x"}) {
    TimerRun bad = Timer(args);
    EXPECT_EQ(bad.exit_code, 2) << args << ": " << bad.out;
  }
}

// `forkbox-bench-spawn --machine 1`, under `refusal` (a seccomp filter) unless it is null: its exit
// status and output.
TimerRun MachineUnder(const std::function<bool(scmp_filter_ctx)>& refusal) {
  TimerRun r;
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return r;
  const std::string bin = std::string(FORKBOX_BIN_DIR) + "/forkbox-bench-spawn";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(out[1], 2);
    if (refusal) {
      scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
      if (ctx == nullptr || !refusal(ctx) || seccomp_load(ctx) != 0) _exit(120);
    }
    execl(bin.c_str(), bin.c_str(), "--machine", "1", static_cast<char*>(nullptr));
    _exit(121);
  }
  close(out[1]);
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(out[0], buf, sizeof buf)) > 0) r.out.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  }
  return r;
}

// --machine when the kernel refuses its fork: exit 1 and the reason, never a figure. The timer runs
// under a filter that fails clone (what glibc's fork calls) with EAGAIN and clone3 with ENOSYS; the
// control, the same run without the filter, succeeds.
TEST(SpawnTimer, MachineSaysWhyWhenItsForkFails) {
  TimerRun refused = MachineUnder([](scmp_filter_ctx ctx) {
    return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAGAIN), SCMP_SYS(clone), 0) == 0 &&
           seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) == 0;
  });
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(refused.out.find("forkbox-bench-spawn: fork: Resource temporarily unavailable"),
            std::string::npos)
      << refused.out;
  EXPECT_EQ(refused.out.find("fork_child_ns"), std::string::npos) << refused.out;
  TimerRun control = MachineUnder(nullptr);
  EXPECT_EQ(control.exit_code, 0) << control.out;
  EXPECT_NE(control.out.find("fork_child_ns"), std::string::npos) << control.out;
}

// --machine when its fresh pages cannot be mapped: exit 1 and the reason, never a figure. The
// filter fails only the probe's own mapping (1 MiB, private and anonymous) with ENOMEM;
// AddressSanitizer maps regions of that kind for itself at start, so a sanitizer build cannot tell
// them apart.
TEST(SpawnTimer, MachineSaysWhyWhenItsMmapFails) {
#if defined(FORKBOX_SANITIZE)
  GTEST_SKIP() << "AddressSanitizer's own 1 MiB mappings would fail first";
#endif
  TimerRun refused = MachineUnder([](scmp_filter_ctx ctx) {
    return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOMEM), SCMP_SYS(mmap), 2,
                            SCMP_A1(SCMP_CMP_EQ, 256 * static_cast<uint64_t>(getpagesize())),
                            SCMP_A3(SCMP_CMP_EQ, MAP_PRIVATE | MAP_ANONYMOUS)) == 0;
  });
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(refused.out.find("forkbox-bench-spawn: mmap: Cannot allocate memory"),
            std::string::npos)
      << refused.out;
  EXPECT_EQ(refused.out.find("fresh_page_ns"), std::string::npos) << refused.out;
}

}  // namespace
