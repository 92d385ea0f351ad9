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
#include <string>
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

}  // namespace

int main(int argc, char** argv) {
  using namespace forkbox;
  int n = 200;
  bool agent = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--agent") {
      agent = true;
      continue;
    }
    if (std::string(argv[i]) == "--layer1") {
      // As in a container whose seccomp profile refuses user namespaces.
      if (!sandbox::testing::RefuseUserNamespaces()) {
        std::fprintf(stderr, "sandbox_spawn_bench: cannot install the layer-1 filter\n");
        return 1;
      }
    } else {
      n = std::atoi(argv[i]);
    }
  }
  if (n <= 0) {
    std::fprintf(stderr, "usage: sandbox_spawn_bench [--layer1] [--agent] [N>0]\n");
    return 2;
  }
  sandbox::Policy policy;
  policy.workdir = std::filesystem::current_path().string();
  Result<sandbox::Sandbox> tools = Status::Internal("unreachable");
  if (agent) {
    Result<sandbox::Policy> resolved = sandbox::ResolvePolicy(sandbox::Settings{}, policy.workdir);
    if (!resolved.ok()) {
      std::fprintf(stderr, "sandbox_spawn_bench: %s\n", resolved.status().ToString().c_str());
      return 1;
    }
    policy = *resolved;
    tools = sandbox::EnterAgentSandbox(policy, {});
    if (tools.ok()) (void)tools->Prewarm();
  } else {
    tools = sandbox::Sandbox::ForTools(policy);
  }
  if (!tools.ok()) {
    std::fprintf(stderr, "sandbox_spawn_bench: %s\n", tools.status().ToString().c_str());
    return 1;
  }
  const sandbox::Report& report = tools->report();
  std::vector<double> plain, boxed, spawned, base_spawned, base_total;
  const std::vector<std::string> command = agent
                                               ? std::vector<std::string>{"/bin/bash", "-c", "true"}
                                               : std::vector<std::string>{"/bin/true"};
  // The caller's environment for every variant (without SHELL, bash asks nscd for the user: two
  // brokered socket()+connect() in the sandbox).
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (int i = 0; i < n; ++i) {
    plain.push_back(PlainOnce(command));
    {
      // base's Spawn alone (the same options, no sandbox): what the sandbox adds is the rest.
      auto start = Clock::now();
      SpawnOptions options;
      options.argv = command;
      options.env = env;
      options.new_session = true;
      Result<ChildProcess> child = forkbox::Spawn(options);
      if (!child.ok()) {
        std::fprintf(stderr, "sandbox_spawn_bench: %s\n", child.status().ToString().c_str());
        return 1;
      }
      base_spawned.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      (void)child->Wait();
      base_total.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    auto start = Clock::now();
    SpawnOptions options;
    options.argv = command;
    options.env = env;
    options.new_session = true;
    Result<ChildProcess> child = tools->Spawn(std::move(options));
    if (!child.ok()) {
      std::fprintf(stderr, "sandbox_spawn_bench: %s\n", child.status().ToString().c_str());
      return 1;
    }
    spawned.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    (void)child->Wait();
    boxed.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  double p = Median(plain), b = Median(boxed);
  std::printf("%s\n", report.Banner().c_str());
  std::printf("plain fork+exec %s: median %.0f us\n", command.back().c_str(), p);
  std::printf("sandboxed %s:       median %.0f us\n", command.back().c_str(), b);
  std::printf("  of which Spawn returned after: median %.0f us\n", Median(spawned));
  std::printf("unsandboxed Spawn %s:  median %.0f us (returned after %.0f us)\n",
              command.back().c_str(), Median(base_total), Median(base_spawned));
  std::printf("ratio: %.2fx (n=%d)\n", p > 0 ? b / p : 0.0, n);
  return 0;
}
