// sandbox_spawn_bench [--layer1] [--agent] [N]: median wall time of N spawns of /bin/true,
// sandboxed (Sandbox::Spawn, the layer this machine gets) against a plain fork+execve, and the
// ratio. --agent: from inside an agent sandbox (EnterAgentSandbox, then Prewarm), as a child's
// tool calls are, of `bash -c true`; the plain fork+execve is then the agent's own. Also base's
// Spawn alone (vfork, no sandbox), so what the sandbox adds is the difference. Prints only.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/sandbox.h"
#include "tests/sandbox/probe_util.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double PlainOnce(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  auto start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    execve(argv[0], argv.data(), environ);
    _exit(127);
  }
  waitpid(pid, nullptr, 0);
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// The command line but --layer1, which acts as it is read.
struct Args {
  int n = 200;
  bool agent = false;
};

// Reads the command line into `args`: the exit code when the bench must not run, or nullopt.
std::optional<int> ParseArgs(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--agent") {
      args.agent = true;
      continue;
    }
    if (std::string(argv[i]) == "--layer1") {
      // As in a container whose seccomp profile refuses user namespaces.
      if (!forkbox::sandbox::testing::RefuseUserNamespaces()) {
        std::fprintf(stderr, "sandbox_spawn_bench: cannot install the layer-1 filter\n");
        return 1;
      }
    } else {
      args.n = std::atoi(argv[i]);
    }
  }
  if (args.n <= 0) {
    std::fprintf(stderr, "usage: sandbox_spawn_bench [--layer1] [--agent] [N>0]\n");
    return 2;
  }
  return std::nullopt;
}

// The sandbox the timed commands run in: the tools' (ForTools) for the current directory, or
// with `agent` the one this process enters as an agent (prewarmed).
forkbox::Result<forkbox::sandbox::Sandbox> MakeSandbox(bool agent) {
  namespace sandbox = forkbox::sandbox;
  sandbox::Policy policy;
  policy.workdir = std::filesystem::current_path().string();
  if (!agent) return sandbox::Sandbox::ForTools(policy);
  forkbox::Result<sandbox::Policy> resolved =
      sandbox::ResolvePolicy(sandbox::Settings{}, policy.workdir);
  if (!resolved.ok()) return resolved.status();
  policy = *resolved;
  forkbox::Result<sandbox::Sandbox> tools = sandbox::EnterAgentSandbox(policy, {});
  if (tools.ok()) (void)tools->Prewarm();
  return tools;
}

// Times one `spawn` of `command` with `env`: into `returned` when it returned, into `total` once
// the command was waited for.
forkbox::Status TimeSpawn(
    const std::function<forkbox::Result<forkbox::ChildProcess>(forkbox::SpawnOptions)>& spawn,
    const std::vector<std::string>& command, const std::vector<std::string>& env,
    std::vector<double>& returned, std::vector<double>& total) {
  auto start = Clock::now();
  forkbox::SpawnOptions options;
  options.argv = command;
  options.env = env;
  options.new_session = true;
  forkbox::Result<forkbox::ChildProcess> child = spawn(std::move(options));
  if (!child.ok()) return child.status();
  returned.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  (void)child->Wait();
  total.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  return forkbox::Status::Ok();
}

// Microseconds per run of each variant.
struct Timings {
  std::vector<double> plain, boxed, spawned, base_spawned, base_total;
};

// One round of each variant: a plain fork+execve, base's Spawn alone, the sandbox's Spawn.
forkbox::Status TimeRound(const forkbox::sandbox::Sandbox& tools,
                          const std::vector<std::string>& command,
                          const std::vector<std::string>& env, Timings& t) {
  using forkbox::SpawnOptions;
  t.plain.push_back(PlainOnce(command));
  // base's Spawn alone (the same options, no sandbox): what the sandbox adds is the rest.
  forkbox::Status base = TimeSpawn([](SpawnOptions options) { return forkbox::Spawn(options); },
                                   command, env, t.base_spawned, t.base_total);
  if (!base.ok()) return base;
  return TimeSpawn([&](SpawnOptions options) { return tools.Spawn(std::move(options)); }, command,
                   env, t.spawned, t.boxed);
}

// The banner of the sandbox, each variant's medians and the ratio of sandboxed to plain.
void Print(const forkbox::sandbox::Report& report, const std::vector<std::string>& command,
           const Timings& t, int n) {
  double p = Median(t.plain), b = Median(t.boxed);
  std::printf("%s\n", report.Banner().c_str());
  std::printf("plain fork+exec %s: median %.0f us\n", command.back().c_str(), p);
  std::printf("sandboxed %s:       median %.0f us\n", command.back().c_str(), b);
  std::printf("  of which Spawn returned after: median %.0f us\n", Median(t.spawned));
  std::printf("unsandboxed Spawn %s:  median %.0f us (returned after %.0f us)\n",
              command.back().c_str(), Median(t.base_total), Median(t.base_spawned));
  std::printf("ratio: %.2fx (n=%d)\n", p > 0 ? b / p : 0.0, n);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace forkbox;
  Args args;
  if (std::optional<int> code = ParseArgs(argc, argv, args)) return *code;
  Result<sandbox::Sandbox> tools = MakeSandbox(args.agent);
  if (!tools.ok()) {
    std::fprintf(stderr, "sandbox_spawn_bench: %s\n", tools.status().ToString().c_str());
    return 1;
  }
  Timings t;
  const std::vector<std::string> command = args.agent
                                               ? std::vector<std::string>{"/bin/bash", "-c", "true"}
                                               : std::vector<std::string>{"/bin/true"};
  // The caller's environment for every variant (without SHELL, bash asks nscd for the user: two
  // brokered socket()+connect() in the sandbox).
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (int i = 0; i < args.n; ++i) {
    if (Status timed = TimeRound(*tools, command, env, t); !timed.ok()) {
      std::fprintf(stderr, "sandbox_spawn_bench: %s\n", timed.ToString().c_str());
      return 1;
    }
  }
  // Read once the spawns ran: a refused layer 2 falls back to layer 1 at the first one.
  Print(tools->report(), command, t, args.n);
  return 0;
}
