// forkbox-bench-spawn [--warmup K] N -- CMD [ARGS...]: runs CMD N times (after K untimed warm-up
// runs, 1 unless told), each with a plain fork + execve + waitpid, stdio on /dev/null, and prints
// {"ns":[...]}: the wall time of each run on CLOCK_MONOTONIC, {"cpu_ns":[...]}: the user+system
// CPU time of each run's whole process tree (wait4's rusage: the child and every descendant it
// reaped), which a loaded machine stretches far less than the wall time, and
// {"start_unix_ns":[...]}: CLOCK_REALTIME just before each run's fork, to hold against another
// process's clock (the mock's receive time of a request). scripts/bench uses it so that
// interpreter overhead does not distort the spawn figures: Python forks its whole image, without
// vfork, whenever it must change the user. A run that fails (exec error, non-zero exit, signal)
// fails the whole measurement: timing a command that did not do its job would be meaningless.
//
// forkbox-bench-spawn --machine N: what this machine charges for the two things start-up does
// most, N samples each: {"fresh_page_ns":[...]}: the first write to a fresh anonymous page, per
// page (256 pages mapped for each sample), and {"fork_child_ns":[...]}: from fork() until the
// child runs (it writes its clock to a shared page and exits). A guest whose host backs memory
// lazily pays both many times over, and the one-shot figure is largely made of them.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

extern char** environ;

namespace {

int64_t NowNs(clockid_t clock = CLOCK_MONOTONIC) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t CpuNs(const rusage& ru) {
  auto ns = [](const timeval& tv) {
    return static_cast<int64_t>(tv.tv_sec) * 1'000'000'000 + tv.tv_usec * 1000;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// fork(), saying why it failed (-1).
pid_t Fork() {
  const pid_t pid = fork();
  if (pid < 0) std::fprintf(stderr, "forkbox-bench-spawn: fork: %s\n", std::strerror(errno));
  return pid;
}

// Waits for `pid` (EINTR retried); false after saying why.
bool Reap(pid_t pid, int* status, rusage* ru) {
  while (wait4(pid, status, 0, ru) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "forkbox-bench-spawn: waitpid: %s\n", std::strerror(errno));
      return false;
    }
  }
  return true;
}

struct Sample {
  int64_t wall_ns = 0;
  int64_t cpu_ns = 0;
  int64_t start_unix_ns = 0;
};

// Fills *sample; false after printing why the run failed.
bool RunOnce(char** argv, int devnull, Sample* sample) {
  sample->start_unix_ns = NowNs(CLOCK_REALTIME);
  const int64_t start = NowNs();
  const pid_t pid = Fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execve(argv[0], argv, environ);
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  if (!Reap(pid, &status, &ru)) return false;
  const int64_t elapsed = NowNs() - start;
  sample->cpu_ns = CpuNs(ru);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "forkbox-bench-spawn: %s %s %d\n", argv[0],
                 WIFEXITED(status) ? "exited with code" : "was killed by signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return false;
  }
  sample->wall_ns = elapsed;
  return true;
}

// Parses a count in [lo, hi]; -1 (after saying why) if `text` is not one.
long ParseCount(const char* what, const char* text, long lo, long hi) {
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || n < lo || n > hi) {
    std::fprintf(stderr, "forkbox-bench-spawn: %s must be an integer in %ld..%ld, got '%s'\n", what,
                 lo, hi, text);
    return -1;
  }
  return n;
}

std::string List(const std::vector<Sample>& v, int64_t Sample::*field) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(v[i].*field);
  return s;
}

std::string List(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(v[i]);
  return s;
}

// One sample of each --machine figure; false after printing why.
bool MachineSample(int64_t* shared, std::vector<int64_t>* fresh, std::vector<int64_t>* forked) {
  constexpr size_t kPages = 256;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem =
      mmap(nullptr, kPages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "forkbox-bench-spawn: mmap: %s\n", std::strerror(errno));
    return false;
  }
  auto* bytes = static_cast<volatile char*>(mem);
  const int64_t start = NowNs();
  for (size_t i = 0; i < kPages; ++i) bytes[i * page] = 1;
  fresh->push_back((NowNs() - start) / static_cast<int64_t>(kPages));
  munmap(mem, kPages * page);
  const int64_t forked_at = NowNs();
  const pid_t pid = Fork();
  if (pid < 0) return false;
  if (pid == 0) {
    *shared = NowNs();
    _exit(0);
  }
  int status = 0;
  rusage ru{};
  if (!Reap(pid, &status, &ru)) return false;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "forkbox-bench-spawn: the forked child failed (status %d)\n", status);
    return false;
  }
  forked->push_back(*shared - forked_at);
  return true;
}

int MachineMain(const char* count) {
  const long samples = ParseCount("N", count, 1, 100000);
  if (samples < 0) return 2;
  void* page =
      mmap(nullptr, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    std::fprintf(stderr, "forkbox-bench-spawn: mmap: %s\n", std::strerror(errno));
    return 1;
  }
  std::vector<int64_t> fresh;
  std::vector<int64_t> forked;
  for (long i = 0; i < samples; ++i) {
    if (!MachineSample(static_cast<int64_t*>(page), &fresh, &forked)) return 1;
  }
  const std::string out =
      "{\"fresh_page_ns\":[" + List(fresh) + "],\"fork_child_ns\":[" + List(forked) + "]}\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--machine") == 0) return MachineMain(argv[2]);
  long warmup = 1;
  if (argc > 2 && std::strcmp(argv[1], "--warmup") == 0) {
    warmup = ParseCount("K", argv[2], 0, 100);
    if (warmup < 0) return 2;
    argc -= 2;
    argv += 2;
  }
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr,
                 "usage: forkbox-bench-spawn [--warmup K] N -- /ABSOLUTE/CMD [ARGS...]\n"
                 "       forkbox-bench-spawn --machine N\n");
    return 2;
  }
  const long runs = ParseCount("N", argv[1], 1, 100000);
  if (runs < 0) return 2;
  if (argv[3][0] != '/') {
    std::fprintf(stderr, "forkbox-bench-spawn: CMD must be an absolute path (no PATH search)\n");
    return 2;
  }
  const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) {
    std::fprintf(stderr, "forkbox-bench-spawn: /dev/null: %s\n", std::strerror(errno));
    return 1;
  }
  std::vector<Sample> samples;
  samples.reserve(runs);
  for (long i = 0; i < warmup + runs; ++i) {
    Sample sample;
    if (!RunOnce(argv + 3, devnull, &sample)) return 1;
    if (i >= warmup) samples.push_back(sample);  // The warm-up runs fill the page cache.
  }
  const std::string out = "{\"ns\":[" + List(samples, &Sample::wall_ns) + "],\"cpu_ns\":[" +
                          List(samples, &Sample::cpu_ns) + "],\"start_unix_ns\":[" +
                          List(samples, &Sample::start_unix_ns) + "]}\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}
