// forkbox-bench-memory: the "memory reclaimed" benchmark driver for scripts/bench.
//
//   forkbox-bench-memory --bin-dir DIR --workdir DIR --tasks N [--per-turn K] [--bytes B]
//
// Serves an in-process mock model whose parent script calls `task` N times (1 task in the first
// turn, then K per turn) and whose children each run one bash command printing B bytes. The mock
// handler runs when a request arrives, i.e. while its sender waits for the reply, so that is when
// it samples: the parent's VmRSS/VmHWM at every parent request (tagged with the number of task
// results the request carries), and VmHWM of the running forkbox-child processes at every child's
// final request (after its bash ran). Prints one JSON object on stdout; exit 0 only when forkbox
// exited 0.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/process.h"
#include "tests/bench/forkbox_launch.h"
#include "tests/bench/proc_probe.h"
#include "tests/mock/mock_server.h"

namespace {

using forkbox::bench::ChildrenNamed;
using forkbox::bench::ReadMemStatus;
using nlohmann::json;

struct Flags {
  std::string bin_dir;
  std::string workdir;
  int tasks = 200;
  int per_turn = 10;
  long long bytes = 100'000'000;
};

bool ParseInt(const char* s, long long min, long long max, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "forkbox-bench-memory: %s\nusage: forkbox-bench-memory --bin-dir DIR --workdir DIR "
               "--tasks N [--per-turn K] [--bytes B]\n",
               why.c_str());
  return 2;
}

class Recorder {
 public:
  void Parent(int tasks_done, int task_errors, const forkbox::bench::MemStatus& s) {
    std::lock_guard lock(mu_);
    parent_.push_back({{"tasks_done", tasks_done},
                       {"task_errors", task_errors},
                       {"rss_kib", s.rss_kib},
                       {"hwm_kib", s.hwm_kib}});
  }
  void Child(int64_t hwm_kib) {
    std::lock_guard lock(mu_);
    child_.push_back(hwm_kib);
  }
  void Error(const std::string& e) {
    std::lock_guard lock(mu_);
    errors_.push_back(e);
  }
  json ToJson() const {
    std::lock_guard lock(mu_);
    return {{"parent_samples", parent_}, {"child_hwm_kib", child_}, {"sample_errors", errors_}};
  }

 private:
  mutable std::mutex mu_;
  json parent_ = json::array();
  std::vector<int64_t> child_;
  std::vector<std::string> errors_;
};

// Reads the flags into `f`: what is wrong with them, or "" when nothing is.
std::string ParseFlags(int argc, char** argv, Flags& f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return a + " needs a value";
    long long v = 0;
    if (a == "--bin-dir") {
      f.bin_dir = argv[++i];
    } else if (a == "--workdir") {
      f.workdir = argv[++i];
    } else if (a == "--tasks" && ParseInt(argv[i + 1], 1, 100000, &v)) {
      f.tasks = static_cast<int>(v), ++i;
    } else if (a == "--per-turn" && ParseInt(argv[i + 1], 1, 64, &v)) {
      f.per_turn = static_cast<int>(v), ++i;
    } else if (a == "--bytes" && ParseInt(argv[i + 1], 1, 1LL << 40, &v)) {
      f.bytes = v, ++i;
    } else {
      return "bad argument " + a + " " + argv[i + 1];
    }
  }
  if (f.bin_dir.empty() || f.workdir.empty()) return "--bin-dir and --workdir are required";
  return "";
}

// Tasks per parent turn: 1 first (the "after task 1" sample), then per_turn.
std::vector<int> Schedule(const Flags& f) {
  std::vector<int> schedule;
  for (int done = 0; done < f.tasks;) {
    const int n = schedule.empty() ? 1 : std::min(f.per_turn, f.tasks - done);
    schedule.push_back(n);
    done += n;
  }
  return schedule;
}

// The parent's memory at its request `r`, tagged with the task results `r` carries.
void SampleParent(const forkbox::mock::RecordedRequest& r, pid_t pid, Recorder& rec) {
  auto s = ReadMemStatus(pid);
  if (s.ok()) {
    int errors = 0;
    for (const auto& result : r.view.tool_results) errors += result.is_error ? 1 : 0;
    rec.Parent(static_cast<int>(r.view.tool_results.size()), errors, *s);
  } else {
    rec.Error(s.status().ToString());
  }
}

// The parent's reply at `turn`: that turn's task calls of the schedule, or the end.
forkbox::mock::Reply ParentReply(int turn, const std::vector<int>& schedule, const Flags& f) {
  forkbox::mock::Reply reply;
  if (turn < static_cast<int>(schedule.size())) {
    int first = 0;
    for (int t = 0; t < turn; ++t) first += schedule[t];
    reply.text = "Running " + std::to_string(schedule[turn]) + " more tasks.";
    for (int k = first; k < first + schedule[turn]; ++k) {
      reply.tool_calls.push_back(
          {"task",
           {{"description", "noisy task " + std::to_string(k + 1)},
            {"prompt", "Task " + std::to_string(k + 1) + ": print the noise, report its size."}},
           "toolu_mem_" + std::to_string(k)});
    }
  } else {
    reply.text = "All " + std::to_string(f.tasks) + " tasks are done.";
  }
  return reply;
}

// VmHWM of the forkbox-child processes below `pid` that still run.
void SampleChildren(pid_t pid, Recorder& rec) {
  for (pid_t c : ChildrenNamed(pid, "forkbox-child")) {
    auto s = ReadMemStatus(c);
    if (s.ok()) rec.Child(s->hwm_kib);  // A child that just exited has no status: skip it.
  }
}

// Scripts `server` as the file's comment says, sampling into `rec` below the forkbox whose pid
// `parent_pid` holds once it runs. The references must outlive the server's handler.
void ScriptTheModel(forkbox::mock::MockServer& server, const Flags& f,
                    const std::vector<int>& schedule, const std::atomic<pid_t>& parent_pid,
                    Recorder& rec) {
  const std::string noise = "head -c " + std::to_string(f.bytes) + " /dev/zero | tr '\\0' x";
  server.SetHandler(
      [&f, &schedule, &parent_pid, &rec, noise](const forkbox::mock::RecordedRequest& r) {
        const pid_t pid = forkbox::bench::SessionProcess(parent_pid.load());
        if (r.view.HasTool("task")) {
          if (pid > 0) SampleParent(r, pid, rec);
          return ParentReply(r.view.assistant_turns, schedule, f);
        }
        forkbox::mock::Reply reply;
        if (r.view.assistant_turns == 0) {
          reply.tool_calls.push_back({"bash", {{"command", noise}}, "toolu_noise"});
          return reply;
        }
        if (pid > 0) SampleChildren(pid, rec);
        reply.text = "It printed " + std::to_string(f.bytes) + " bytes of 'x'.";
        return reply;
      });
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (const std::string why = ParseFlags(argc, argv, f); !why.empty()) return Usage(why);
  const std::vector<int> schedule = Schedule(f);
  std::atomic<pid_t> parent_pid{0};
  Recorder rec;
  forkbox::mock::MockServer server;
  ScriptTheModel(server, f, schedule, parent_pid, rec);
  server.Start();

  const auto t0 = std::chrono::steady_clock::now();
  auto run = forkbox::bench::LaunchForkbox({f.bin_dir,
                                            server.anthropic_base_url(),
                                            f.workdir,
                                            "Run " + std::to_string(f.tasks) + " noisy tasks.",
                                            {"--max-turns", std::to_string(schedule.size() + 5)}});
  if (!run.ok()) {
    std::fprintf(stderr, "forkbox-bench-memory: %s\n", run.status().ToString().c_str());
    return 1;
  }
  parent_pid.store(run->process.pid());
  auto status = run->process.Wait();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  server.Stop();
  if (!status.ok()) {
    std::fprintf(stderr, "forkbox-bench-memory: %s\n", status.status().ToString().c_str());
    return 1;
  }
  json out = rec.ToJson();
  out["tasks"] = f.tasks;
  out["bytes_per_task"] = f.bytes;
  out["wall_s"] = wall;
  out["exit"] = forkbox::DescribeWaitStatus(*status);
  out["forkbox_stdout"] = forkbox::bench::ReadCaptured(run->out);
  const std::string err = forkbox::bench::ReadCaptured(run->err);
  out["forkbox_stderr_tail"] = err.size() > 4000 ? err.substr(err.size() - 4000) : err;
  std::puts(out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  return forkbox::ExitCodeFromWaitStatus(*status) == 0 ? 0 : 1;
}
