// forkbox-bench-spawn N -- CMD [ARGS...]: runs CMD N times (after one untimed warm-up), each with a
// plain fork + execve + waitpid, stdio on /dev/null, and prints {"ns":[...]}: the wall time of each
// run on CLOCK_MONOTONIC, and {"cpu_ns":[...]}: the user+system CPU time of each run's whole
// process tree (wait4's rusage: the child and every descendant it reaped), which a loaded machine
// stretches far less than the wall time. scripts/bench uses it so that interpreter overhead does
// not distort the spawn figures. A run that fails (exec error, non-zero exit, signal) fails the
// whole measurement: timing a command that did not do its job would be meaningless.
#include <fcntl.h>
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

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t CpuNs(const rusage& ru) {
  auto ns = [](const timeval& tv) {
    return static_cast<int64_t>(tv.tv_sec) * 1'000'000'000 + tv.tv_usec * 1000;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// Returns the wall time in ns (and the tree's CPU time in *cpu), or -1 after printing why the run
// failed.
int64_t RunOnce(char** argv, int devnull, int64_t* cpu) {
  const int64_t start = NowNs();
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "forkbox-bench-spawn: fork: %s\n", std::strerror(errno));
    return -1;
  }
  if (pid == 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execve(argv[0], argv, environ);
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "forkbox-bench-spawn: waitpid: %s\n", std::strerror(errno));
      return -1;
    }
  }
  const int64_t elapsed = NowNs() - start;
  *cpu = CpuNs(ru);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "forkbox-bench-spawn: %s %s %d\n", argv[0],
                 WIFEXITED(status) ? "exited with code" : "was killed by signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return -1;
  }
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "usage: forkbox-bench-spawn N -- /ABSOLUTE/CMD [ARGS...]\n");
    return 2;
  }
  char* end = nullptr;
  const long runs = std::strtol(argv[1], &end, 10);
  if (*end != '\0' || runs < 1 || runs > 100000) {
    std::fprintf(stderr, "forkbox-bench-spawn: N must be an integer in 1..100000, got '%s'\n",
                 argv[1]);
    return 2;
  }
  if (argv[3][0] != '/') {
    std::fprintf(stderr, "forkbox-bench-spawn: CMD must be an absolute path (no PATH search)\n");
    return 2;
  }
  const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) {
    std::fprintf(stderr, "forkbox-bench-spawn: /dev/null: %s\n", std::strerror(errno));
    return 1;
  }
  std::vector<int64_t> ns, cpu_ns;
  ns.reserve(runs);
  cpu_ns.reserve(runs);
  for (long i = 0; i <= runs; ++i) {
    int64_t cpu = 0;
    const int64_t t = RunOnce(argv + 3, devnull, &cpu);
    if (t < 0) return 1;
    if (i > 0) {  // Run 0 warms the page cache.
      ns.push_back(t);
      cpu_ns.push_back(cpu);
    }
  }
  auto list = [](const std::vector<int64_t>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(v[i]);
    return s;
  };
  std::string out = "{\"ns\":[" + list(ns) + "],\"cpu_ns\":[" + list(cpu_ns) + "]}\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}
