// Issue 12, "every forkbox process runs sandboxed": the parent confines itself before its first
// model call, and a spawner forked before that starts the task children.
//   - Mock-driven sessions of the real binaries, as root in layer 2 and inside the escape suite's
//     jail refusing user namespaces (layer 1); each attack also runs with --sandbox=off, the
//     unconfined path, which must escape (the control).
//   - The spawner itself: its requests, its seccomp filter (forked probes with a control), its
//     death with the parent.
// No sleeps: the mock's handler runs the outside step while forkbox waits for its reply.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/http_client.h"
#include "base/fd_passing.h"
#include "base/process.h"
#include "ipc/spawner_wire.h"
#include "parent/spawner.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "tests/base/test_util.h"
#include "tests/bench/proc_probe.h"
#include "tests/mock/mock_server.h"

namespace forkbox::escape {
namespace {

namespace fs = std::filesystem;
using mock::MockServer;
using mock::RecordedRequest;
using mock::Reply;
using mock::ToolCall;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Reply Calls(std::vector<ToolCall> calls) {
  Reply r;
  r.tool_calls = std::move(calls);
  return r;
}
Reply Text(const std::string& text) {
  Reply r;
  r.text = text;
  return r;
}
bool IsParent(const RecordedRequest& r) { return r.view.HasTool("task"); }

// The "Name:\tvalue" line of /proc/<pid>/status.
std::string StatusField(pid_t pid, const std::string& name) {
  std::istringstream in(ReadAll("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + ":", 0) == 0)
      return line.substr(line.find_first_not_of(" \t", name.size() + 1));
  }
  return "";
}

struct Session {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Root or the escape suite's unprivileged user, each in layer 2 and in the jail that refuses user
// namespaces (layer 1, as Docker's default profile).
enum class Where { kLayer2, kLayer1Jail, kUserLayer2, kUserLayer1Jail };
struct Param {
  Where where;
  bool sandboxed;  // false: --sandbox=off, the control that must escape.
};
std::string NameOf(const ::testing::TestParamInfo<Param>& info) {
  const char* where = info.param.where == Where::kLayer2       ? "Root"
                      : info.param.where == Where::kLayer1Jail ? "RootNoUserns"
                      : info.param.where == Where::kUserLayer2 ? "User"
                                                               : "UserNoUserns";
  return std::string(where) + (info.param.sandboxed ? "" : "Unsandboxed");
}

class ConfineTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-confine-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    work_ = root_ + "/proj";
    outside_ = root_ + "/outside";
    fs::create_directories(work_);
    fs::create_directories(outside_);
    if (AsUser()) {
      // The escape suite's unprivileged account (tests/escape/fixture.cc creates it).
      const passwd* pw = ::getpwnam("forkbox-escape");
      if (pw == nullptr) GTEST_SKIP() << "no forkbox-escape user (run escape_test once)";
      uid_ = pw->pw_uid;
      gid_ = pw->pw_gid;
      ::chmod(root_.c_str(), 0755);
    }
  }
  void TearDown() override {
    server_.Stop();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  void ExpectSigkillFate(bool by_parent);
  void ExpectKillAllFate(bool by_parent);
  UniqueFd StartPlanting(bool by_parent, const std::string& tag, std::thread* session,
                         pid_t* forkbox = nullptr);

  // forkbox, forkbox-child and the HTTP modules, copied to `bin` and its module directory.
  static void CopyForkboxTo(const std::string& bin) {
    const std::string modules = agent::HttpModuleDirOf(bin + "/forkbox");
    fs::create_directories(bin);
    fs::create_directories(modules);
    for (const char* name : {"forkbox", "forkbox-child"}) {
      fs::copy_file(std::string(FORKBOX_BIN_DIR) + "/" + name, bin + "/" + name);
    }
    const std::string built = agent::HttpModuleDirOf(std::string(FORKBOX_BIN_DIR) + "/forkbox");
    for (const auto& entry : fs::directory_iterator(built)) {
      fs::copy_file(entry.path(), modules + "/" + entry.path().filename().string());
    }
  }

  // The parent starts two tasks; each task's bash renames a script over `bin`/forkbox-child that
  // writes outside_/planted, so the second task runs it if the first one's swap reached it.
  void TasksSwapTheChildProgramIn(const std::string& bin) {
    server_.SetHandler([this, bin](const RecordedRequest& r) {
      const int turn = r.view.assistant_turns;
      if (IsParent(r) && turn < 2) {
        const char* what = turn == 0 ? "swap" : "next";
        return Calls({ToolCall{"task", {{"prompt", what}, {"description", what}}, ""}});
      }
      if (IsParent(r) || turn > 0) return Text("done");
      return Calls({ToolCall{"bash",
                             {{"command", "printf '#!/bin/sh\\necho x > " + outside_ +
                                              "/planted\\n' > " + bin + "/x && chmod +x " + bin +
                                              "/x && mv " + bin + "/x " + bin + "/forkbox-child"}},
                             ""}});
    });
  }

  // forkbox one-shot in work_ with `flags`, in this mode; stdout and stderr through files (no
  // pipe to pump), reaped before returning. `pid` gets forkbox's pid as soon as it runs.
  Session Run(std::vector<std::string> flags, pid_t* pid = nullptr,
              const std::string& program = std::string(FORKBOX_BIN_DIR) + "/forkbox") {
    server_.Start();
    SpawnOptions opts;
    if (Jailed()) opts.argv.push_back(FORKBOX_ESCAPE_NO_USERNS);
    if (AsUser()) {
      opts.argv.insert(opts.argv.end(),
                       {FORKBOX_ESCAPE_RUN_AS, std::to_string(uid_), std::to_string(gid_)});
      for (const auto& entry : fs::recursive_directory_iterator(root_)) {
        (void)::lchown(entry.path().c_str(), uid_, gid_);
      }
      (void)::lchown(root_.c_str(), uid_, gid_);
    }
    opts.argv.push_back(program);
    opts.argv.insert(opts.argv.end(), flags.begin(), flags.end());
    if (!GetParam().sandboxed) opts.argv.push_back("--sandbox=off");
    opts.argv.insert(opts.argv.end(), {"--quiet", "--no-session-persistence", "go"});
    opts.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root_, "LANG=C.UTF-8",
                "ANTHROPIC_API_KEY=sk-confine",
                "ANTHROPIC_BASE_URL=" + server_.anthropic_base_url()};
    opts.cwd = work_;
    UniqueFd out(::open((root_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    UniqueFd err(::open((root_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    opts.fds = {{in.get(), 0}, {out.get(), 1}, {err.get(), 2}};
    if (own_group_) {
      // A shell's job: its own process group in our session, which the kernel does not take for
      // an orphaned one (whose stop signals it discards).
      opts.steps.push_back(
          {"setpgid", [](const char**) { return ::setpgid(0, 0) == 0 ? 0 : errno; }});
    }
    Session s;
    Result<ChildProcess> child = Spawn(opts);
    if (!child.ok()) {
      s.err = child.status().ToString();
      return s;
    }
    if (pid != nullptr) *pid = child->pid();
    {
      std::lock_guard<std::mutex> lock(pid_mu_);
      pid_ = child->pid();
    }
    pid_cv_.notify_all();
    Result<int> status = child->Wait();
    s.exit_code = status.ok() ? ExitCodeFromWaitStatus(*status) : -1;
    s.out = ReadAll(root_ + "/out");
    s.err = ReadAll(root_ + "/err");
    return s;
  }

  bool Jailed() const {
    return GetParam().where == Where::kLayer1Jail || GetParam().where == Where::kUserLayer1Jail;
  }
  bool Layer2() const { return !Jailed(); }
  bool AsUser() const {
    return GetParam().where == Where::kUserLayer2 || GetParam().where == Where::kUserLayer1Jail;
  }
  bool own_group_ = false;  // Run: forkbox leads a process group of its own.
  // Runs forkbox with `flags`; its first reply has the parent's bash run `command`. Returns that
  // command's tool result (or forkbox's stderr when there was none); `exit_code` gets forkbox's.
  std::string ParentBash(const std::string& command, std::vector<std::string> flags,
                         int* exit_code) {
    std::mutex mu;
    std::string result;
    server_.SetHandler([&](const RecordedRequest& r) {
      if (r.view.assistant_turns == 0) {
        return Calls({ToolCall{"bash", {{"command", command}}, ""}});
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!r.view.tool_results.empty()) result = r.view.tool_results[0].text;
      return Text("done");
    });
    Session s = Run(std::move(flags));
    *exit_code = s.exit_code;
    std::lock_guard<std::mutex> lock(mu);
    return result.empty() ? s.err : result;
  }
  // Sends `before` (unless 0), then `sig`, to forkbox while it waits for its first reply;
  // expects `expected_exit`.
  // `group`: the signal goes to forkbox's whole process group, as a terminal sends it.
  Session ExpectSignalFate(int sig, int expected_exit, int before = 0, bool group = false);
  Session RunStoppedWhileWaiting(bool by_parent, const std::string& command,
                                 std::vector<std::string> flags, std::chrono::seconds hold,
                                 size_t min_job, std::string* result);

  std::string root_, work_, outside_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  // forkbox's pid, published once Spawn returns. Its first model request can come before that
  // (a loaded machine preempts the test thread), so the mock's handlers wait for it.
  pid_t Pid() {
    std::unique_lock<std::mutex> lock(pid_mu_);
    pid_cv_.wait_for(lock, std::chrono::seconds(30), [this] { return pid_ != 0; });
    return pid_;
  }
  std::mutex pid_mu_;
  std::condition_variable pid_cv_;
  pid_t pid_ = 0;
  MockServer server_;
};

// The parent's own file tool edits git's trust surface: kernel-refused in layer 2 (the parent's
// mount namespace binds .git/config read-only), undone by the git surface guard in layer 1
// (sandbox/git_surface.h), written by the unconfined parent.
TEST_P(ConfineTest, ParentFileToolCannotPlantAGitFsmonitor) {
  ASSERT_EQ(std::system(("git init -q " + work_).c_str()), 0);
  const std::string config = work_ + "/.git/config";
  const std::string before = ReadAll(config);
  server_.SetHandler([](const RecordedRequest& r) {
    if (r.view.assistant_turns == 0) {
      return Calls({ToolCall{"write_file",
                             {{"path", ".git/config"}, {"content", "[core]\n\tfsmonitor = evil\n"}},
                             ""}});
    }
    return Text("done");
  });
  Session s = Run({"--no-subagents"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  if (GetParam().sandboxed) {
    EXPECT_EQ(ReadAll(config), before) << "the parent's write_file changed .git/config";
  } else {
    EXPECT_NE(ReadAll(config).find("fsmonitor"), std::string::npos) << "control did not escape";
  }
}

// The same from a task child's write_file: it resolves beneath the workdir as its sandbox mounts
// it, not through a descriptor of the mounts outside.
TEST_P(ConfineTest, ChildFileToolCannotPlantAGitFsmonitor) {
  ASSERT_EQ(std::system(("git init -q " + work_).c_str()), 0);
  const std::string config = work_ + "/.git/config";
  const std::string before = ReadAll(config);
  server_.SetHandler([](const RecordedRequest& r) {
    if (IsParent(r) && r.view.assistant_turns == 0) {
      return Calls({ToolCall{"task", {{"prompt", "plant"}, {"description", "plant"}}, ""}});
    }
    if (!IsParent(r) && r.view.assistant_turns == 0) {
      return Calls({ToolCall{"write_file",
                             {{"path", ".git/config"}, {"content", "[core]\n\tfsmonitor = evil\n"}},
                             ""}});
    }
    return Text("done");
  });
  Session s = Run({});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  if (GetParam().sandboxed) {
    EXPECT_EQ(ReadAll(config), before) << "the child's write_file changed .git/config";
  } else {
    EXPECT_NE(ReadAll(config).find("fsmonitor"), std::string::npos) << "control did not escape";
  }
}

// Sandboxed, forkbox's pid is the waiter of its launcher (tests/bench/proc_probe.h).
pid_t LauncherOf(pid_t forkbox) { return forkbox::bench::SessionProcess(forkbox); }

// The parent process itself runs under no_new_privs and seccomp while it talks to the model
// (read from outside, in the mock's handler, while forkbox waits for the reply); it runs in a
// launcher (in layer 2 pid 1 of its own PID namespace), and forkbox's pid, its waiter, is confined
// too: no_new_privs, the base filter, no capability, no descriptor but stdio and /proc.
TEST_P(ConfineTest, ParentProcessIsConfinedBeforeItsFirstModelCall) {
  struct Seen {
    std::string nnp, filters, caps, fds;
  };
  std::mutex mu;
  Seen launcher, waiter;
  pid_t launcher_pid = 0;
  auto read = [](pid_t pid) {
    std::error_code ec;
    const fs::path fd_dir = "/proc/" + std::to_string(pid) + "/fd";
    std::map<int, std::string> fds;  // In order: stdio by number, the others by what they open.
    for (const auto& e : fs::directory_iterator(fd_dir, ec)) {
      const int fd = std::stoi(e.path().filename());
      std::error_code link_ec;
      fds[fd] = fd <= 2 ? std::to_string(fd) : fs::read_symlink(e.path(), link_ec).string();
    }
    std::string numbers;
    for (const auto& [fd, shown] : fds) numbers += (numbers.empty() ? "" : ",") + shown;
    return Seen{StatusField(pid, "NoNewPrivs"), StatusField(pid, "Seccomp_filters"),
                StatusField(pid, "CapEff") + "/" + StatusField(pid, "CapBnd"), ec ? "?" : numbers};
  };
  server_.SetHandler([&](const RecordedRequest&) {
    std::lock_guard<std::mutex> lock(mu);
    if (launcher_pid == 0) {
      const pid_t pid = Pid();
      launcher_pid = LauncherOf(pid);
      launcher = read(launcher_pid);
      waiter = read(pid);
    }
    return Text("done");
  });
  Session s = Run({"--no-subagents"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const int jail = Layer2() ? 0 : 1;  // The jail installs one filter of its own.
  if (!GetParam().sandboxed) {
    EXPECT_EQ(launcher_pid, Pid()) << "control: no PID namespace without the sandbox";
    EXPECT_EQ(launcher.filters, std::to_string(jail)) << "control: the unconfined parent";
    return;
  }
  EXPECT_EQ(launcher.nnp, "1");
  EXPECT_EQ(launcher.filters, std::to_string(jail + 1)) << "the agent's program: base + network";
  // In both layers the parent runs in a launcher below forkbox's pid, its waiter (in layer 2 the
  // launcher is pid 1 of a PID namespace of its own): a SIGKILL of forkbox's pid still lets the
  // launcher end the session.
  EXPECT_NE(launcher_pid, Pid()) << "the parent runs in a launcher below its waiter";
  EXPECT_EQ(waiter.nnp, "1");
  EXPECT_EQ(waiter.filters, std::to_string(jail + 1)) << "the waiter: the base filter";
  // An unprivileged process without a user namespace (layer 1 as a user) has no CAP_SETPCAP to
  // empty its bounding set (caps.cc): it keeps its caller's, which no_new_privs makes moot.
  const std::string bounding =
      AsUser() && Jailed() ? StatusField(getpid(), "CapBnd") : "0000000000000000";
  EXPECT_EQ(waiter.caps, "0000000000000000/" + bounding);
  // Only stdout and stderr: it reports a session process killed under it (the OOM killer's pick;
  // RealChildTest.ASigkillOfTheSessionProcessIsReportedAsSuch); and the host's /proc, a
  // directory it reads for Ctrl-Z (CtrlZStopsTheWholeSessionAndFgResumesIt). No workdir, socket
  // or file.
  EXPECT_EQ(waiter.fds, "1,2,/proc") << "the waiter keeps stdout, stderr and /proc only";
}

// forkbox's pid is what its caller signals. In layer 2 that is the waiter of the parent, which is
// pid 1 of its own PID namespace and gets no signal from outside it has no handler for: the
// waiter relays them. Each signal comes while the parent waits for its first reply, which waits
// (bounded) until the signal had its effect; the unsandboxed control, where forkbox's pid is the
// parent itself, behaves the same.
Session ConfineTest::ExpectSignalFate(int sig, int expected_exit, int before, bool group) {
  own_group_ = true;
  std::mutex mu;
  bool stopped = false;
  server_.SetHandler([&](const RecordedRequest& r) {
    if (r.view.assistant_turns > 0) return Text("done");
    const pid_t pid = Pid();
    const pid_t launcher = LauncherOf(pid);
    UniqueFd gone(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (before != 0) {
      EXPECT_EQ(::kill(pid, before), 0);
    }
    EXPECT_EQ(::kill(group ? -pid : pid, sig), 0);
    if (sig != SIGTSTP) {
      pollfd pfd{gone.get(), POLLIN, 0};
      EXPECT_EQ(::poll(&pfd, 1, 30'000), 1) << "forkbox still runs after signal " << sig;
      return Text("done");
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((forkbox::bench::ProcessState(launcher) != 'T' ||
            forkbox::bench::ProcessState(pid) != 'T') &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      stopped =
          forkbox::bench::ProcessState(launcher) == 'T' && forkbox::bench::ProcessState(pid) == 'T';
    }
    EXPECT_EQ(::kill(pid, SIGCONT), 0);
    return Text("done");
  });
  Session s = Run({"--no-subagents"});
  EXPECT_EQ(s.exit_code, expected_exit) << s.err;
  std::lock_guard<std::mutex> lock(mu);
  if (sig == SIGTSTP) {
    EXPECT_TRUE(stopped) << "SIGTSTP stopped forkbox and its parent";
  }
  return s;
}

// The parent's handler ends the session: 128 + SIGTERM.
TEST_P(ConfineTest, SigtermOfForkboxEndsTheSession) { ExpectSignalFate(SIGTERM, 128 + SIGTERM); }

// SIGQUIT (Ctrl-\) ends the session as SIGTERM does, and forkbox then dies of it. Before, it had no
// handler: the waiter ended the launcher by SIGTERM, so the result said "interrupted by SIGTERM"
// (rt63 P6), and unsandboxed its default action ended forkbox at once, silent, its tools left
// running.
TEST_P(ConfineTest, SigquitOfForkboxEndsTheSessionAsSuch) {
  const Session s = ExpectSignalFate(SIGQUIT, 128 + SIGQUIT);
  EXPECT_NE(s.err.find("interrupted by SIGQUIT"), std::string::npos) << s.err;
}

// Ctrl-\ at a terminal: SIGQUIT to forkbox's whole process group. In layer 1 the session process
// is in that group and is no PID namespace's init, so the default action ended it at once: its
// tools went on running, what they planted in git's trust surface stayed, stderr said nothing
// (rt63 P2). Now it ends the session, once (the waiter's copy pairs with the direct one).
TEST_P(ConfineTest, SigquitOfForkboxsProcessGroupEndsTheSession) {
  const Session s = ExpectSignalFate(SIGQUIT, 128 + SIGQUIT, 0, /*group=*/true);
  EXPECT_NE(s.err.find("interrupted by SIGQUIT"), std::string::npos) << s.err;
}

// What forkbox ignored, it still ignores: SIGPIPE changes nothing, and the SIGTERM after it (the
// waiter takes pending signals lowest number first) ends the session as usual; were SIGPIPE taken
// for a fatal signal, forkbox would die of it (141).
TEST_P(ConfineTest, SigpipeOfForkboxIsIgnored) {
  ExpectSignalFate(SIGTERM, 128 + SIGTERM, SIGPIPE);
}

// Job control: SIGTSTP stops forkbox's pid and the parent, SIGCONT resumes both, and the session
// ends normally.
TEST_P(ConfineTest, SigtstpStopsTheParentAndSigcontResumesIt) { ExpectSignalFate(SIGTSTP, 0); }

// A session with `flags` whose bash command (the parent's, or a task's) runs `command`, which
// writes "waiting" to the FIFO `ready` and then reads a word from the FIFO `go`: once it waits,
// Ctrl-Z (SIGTSTP to forkbox's process group, as a terminal sends it), every process of the
// session (`min_job` processes at least) checked stopped (the kernel stops a process when it next
// runs: 30 s at most) and held so for `hold`, then `fg` (SIGCONT to the group) and "on" written
// to `go`. The session, and the parent's last tool result in `result`.
Session ConfineTest::RunStoppedWhileWaiting(bool by_parent, const std::string& command,
                                            std::vector<std::string> flags,
                                            std::chrono::seconds hold, size_t min_job,
                                            std::string* result) {
  own_group_ = true;
  const std::string ready = work_ + "/ready", go = work_ + "/go";
  (void)::unlink(ready.c_str());
  (void)::unlink(go.c_str());
  EXPECT_EQ(::mkfifo(ready.c_str(), 0666), 0);
  EXPECT_EQ(::mkfifo(go.c_str(), 0666), 0);
  std::mutex mu;
  server_.SetHandler([&](const RecordedRequest& r) {
    const int turn = r.view.assistant_turns;
    if (IsParent(r) && turn == 0 && !by_parent) {
      return Calls({ToolCall{"task", {{"prompt", "wait"}, {"description", "wait"}}, ""}});
    }
    if (turn == 0) return Calls({ToolCall{"bash", {{"command", command}}, ""}});
    std::lock_guard<std::mutex> lock(mu);
    if (IsParent(r)) *result = r.view.LastUserText();
    return Text(IsParent(r) ? "done" : r.view.LastUserText());
  });
  UniqueFd ended(::eventfd(0, EFD_CLOEXEC));
  EXPECT_TRUE(ended) << std::strerror(errno);
  Session s;
  std::thread session([&] {
    s = Run(flags);
    const uint64_t one = 1;
    EXPECT_EQ(::write(ended.get(), &one, sizeof one), 8);
  });
  EXPECT_EQ(forkbox::testing::ReadFifoUnless(ready, ended.get()), "waiting\n");
  const std::vector<pid_t> job = forkbox::bench::ProcessTree(Pid());
  EXPECT_GE(job.size(), min_job) << forkbox::bench::DescribeProcesses(job);
  EXPECT_EQ(::kill(-Pid(), SIGTSTP), 0);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!forkbox::bench::AllStopped(job) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(forkbox::bench::AllStopped(job)) << "part of the session ran on while stopped:\n"
                                               << forkbox::bench::DescribeProcesses(job);
  std::this_thread::sleep_for(hold);  // The stop's length is the stimulus, not a wait for an event.
  EXPECT_EQ(::kill(-Pid(), SIGCONT), 0);
  EXPECT_TRUE(forkbox::testing::WriteFifoUnless(go, "on\n", ended.get()));
  session.join();
  std::lock_guard<std::mutex> lock(pid_mu_);
  pid_ = 0;
  return s;
}

// Ctrl-Z while a bash command, the parent's own or a task's, waits on a FIFO with a child in the
// background: the whole session stops, down to that child (each command leads a process group of
// its own, which the terminal's signal does not reach), and the shell's `fg` resumes it: the
// command reads its word and the session ends normally. Before, only forkbox and its parent
// stopped; the task, its command and the command's child ran on.
TEST_P(ConfineTest, CtrlZStopsTheWholeSessionAndFgResumesIt) {
  for (const bool by_parent : {true, false}) {
    SCOPED_TRACE(by_parent ? "the parent's bash" : "a task's bash");
    std::string result;
    const Session s = RunStoppedWhileWaiting(
        by_parent,
        "sleep 600 & echo waiting > ready; read word < go; kill $!; echo \"finished $word\"",
        {"--standby", "0"}, std::chrono::seconds(0), by_parent ? 3u : 4u, &result);
    EXPECT_EQ(s.exit_code, 0) << s.err;
    EXPECT_NE(result.find("finished on"), std::string::npos) << result << s.err;
  }
}

// A stop longer than --tool-timeout and --task-timeout counts toward neither: a task's bash
// command that waits on a FIFO, stopped for longer than both timeouts, finishes once `fg`
// continues the session and the FIFO is written. Before, the deadlines ran on steady_clock, which
// runs on while stopped: at `fg` the command was killed as timed out, and the task with it. Root
// only, sandboxed (the launcher's waiter stops the session) and not (forkbox's own handler).
TEST_P(ConfineTest, TimeStoppedByCtrlZCountsTowardNoTimeout) {
  if (AsUser() || Jailed()) GTEST_SKIP() << "the clock is the same in every layer";
  std::string result;
  const Session s = RunStoppedWhileWaiting(
      /*by_parent=*/false, "echo waiting > ready; read word < go; echo \"got $word\"",
      {"--standby", "0", "--tool-timeout", "3", "--task-timeout", "5"}, std::chrono::seconds(6), 3u,
      &result);
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(result.find("got on"), std::string::npos) << result << s.err;
  EXPECT_EQ(result.find("timed out"), std::string::npos) << result;
}

// As root RLIMIT_NPROC does not apply: in layer 2 the parent's PID namespace's pid_max holds a
// fork bomb of its own bash (rlimit_nproc x (max parallel + 1) + standbys + 2 = 1,026 here; a
// pids cgroup of 1,024 in layer 1); the unsandboxed control forks all 1,500. As the unprivileged
// user RLIMIT_NPROC holds it, which counts every process of that user, also other tests': the
// serial ForkBomb suite (forkbomb_test.cc) covers it.
TEST_P(ConfineTest, ParentBashForkBombIsCappedAsRoot) {
  if (AsUser()) GTEST_SKIP() << "root only; see forkbomb_test.cc";
  const std::string command = std::string(FORKBOX_ESCAPE_PROBE) + " fork_bomb 1500 2>&1";
  int exit_code = -1;
  const std::string result =
      ParentBash(command, {"--max-parallel", "1", "--standby", "0"}, &exit_code);
  ASSERT_EQ(exit_code, 0) << result;
  const char* want = GetParam().sandboxed ? "RESULT blocked" : "RESULT escaped";
  EXPECT_NE(result.find(want), std::string::npos) << result;
}

// The parent's bash and its file tools cannot write outside the workdir.
TEST_P(ConfineTest, ParentToolsCannotWriteOutside) {
  const std::string target = outside_ + "/pwned";
  server_.SetHandler([target](const RecordedRequest& r) {
    if (r.view.assistant_turns == 0) {
      return Calls({ToolCall{"bash", {{"command", "echo x > " + target}}, ""},
                    ToolCall{"write_file", {{"path", target + ".2"}, {"content", "x"}}, ""}});
    }
    return Text("done");
  });
  Session s = Run({"--no-subagents"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_FALSE(fs::exists(target + ".2")) << "write_file outside the workdir, in every mode";
  EXPECT_EQ(fs::exists(target), !GetParam().sandboxed);
}

// In layer 2 the parent is pid 1 of a PID namespace of its own
// (sandbox::EnterLauncher), so its bash sees only the session's processes: no command
// line of an outside process (a password on a command line). Layer 1 has no PID namespace: there it
// sees them (the measured gap README.md states), and their environments stay closed to it in every
// mode (Landlock scopes ptrace, which /proc/<pid>/environ needs). A process of the same user
// outside holds a marker in its environment and another on its command line; the control
// (--sandbox=off) reads both.
TEST_P(ConfineTest, ParentBashSeesNoOutsideProcessInLayer2NorAnyEnvironment) {
  const std::string marker = "forkbox-victim-" + std::to_string(::getpid());
  const std::string argv_marker = "0.000" + std::to_string(::getpid()) + "7";  // sleep adds it.
  Result<Pipe> ready = MakePipe();
  ASSERT_TRUE(ready.ok());
  SpawnOptions victim;
  if (AsUser()) {
    victim.argv = {FORKBOX_ESCAPE_RUN_AS, std::to_string(uid_), std::to_string(gid_)};
  }
  victim.argv.insert(victim.argv.end(),
                     {"/bin/sh", "-c", "echo ready; exec sleep 1000 " + argv_marker});
  victim.env = {"PATH=/usr/bin:/bin", "FORKBOX_VICTIM=" + marker};
  victim.fds = {{ready->write.get(), 1}};
  Result<ChildProcess> outside = Spawn(victim);  // Killed and reaped with the handle.
  ASSERT_TRUE(outside.ok()) << outside.status().ToString();
  ready->write.reset();
  char line[6] = {};
  ASSERT_EQ(::read(ready->read.get(), line, sizeof(line)), 6) << "the outside process started";
  // The pattern ends in "[7]": grep's own command line then holds no match of it.
  const std::string pattern = argv_marker.substr(0, argv_marker.size() - 1) + "[7]";
  const std::string command = "tr '\\0' '\\n' < /proc/" + std::to_string(outside->pid()) +
                              "/environ; echo rc=$?; echo processes=$(ls -d /proc/[0-9]* | wc -l)" +
                              "; grep -l -a -e '" + pattern + "' /proc/[0-9]*/cmdline" +
                              " 2>/dev/null | wc -l | sed 's/^/outside=/'";
  int exit_code = -1;
  const std::string result = ParentBash(command, {"--no-subagents"}, &exit_code);
  ASSERT_EQ(exit_code, 0) << result;
  ASSERT_NE(result.find("rc="), std::string::npos) << result;
  EXPECT_EQ(result.find("processes=0"), std::string::npos) << "the listing works: " << result;
  if (!GetParam().sandboxed) {
    EXPECT_NE(result.find("FORKBOX_VICTIM=" + marker), std::string::npos) << "control: " << result;
    EXPECT_NE(result.find("outside=1"), std::string::npos) << "control: " << result;
    return;
  }
  EXPECT_EQ(result.find(marker), std::string::npos) << result;
  if (Layer2()) {
    EXPECT_NE(result.find("outside=0"), std::string::npos) << "an outside command line: " << result;
    EXPECT_NE(result.find("No such file or directory"), std::string::npos) << result;
  } else {
    EXPECT_NE(result.find("outside=1"), std::string::npos) << "measured gap: " << result;
    EXPECT_NE(result.find("Permission denied"), std::string::npos) << result;
  }
}

// The workdir is swapped for a link to the outside after the git guard's record (the parent's
// first tool call, `true`, comes after it), from outside the sandbox; then a task
// (--standby 0, started after the swap) writes a file. Layer 2's parent sees the swap in no
// name (its mounts pinned the workdir), so the task writes into the real workdir, which it got
// as a descriptor. Layer 1's parent resolves names on the host: the guard's search for new
// surface goes by name, so it refuses the task and says why. Nothing lands outside; the
// unconfined control, which goes by the name, writes there.
TEST_P(ConfineTest, ATaskAfterTheWorkdirWasSwappedWritesIntoTheRealOneOrIsRefused) {
  const std::string real = root_ + "/proj.real";
  std::mutex mu;
  std::string task_result;
  server_.SetHandler([&](const RecordedRequest& r) {
    const int turn = r.view.assistant_turns;
    if (IsParent(r) && turn == 0) return Calls({ToolCall{"bash", {{"command", "true"}}, ""}});
    if (IsParent(r) && turn == 1) {
      // One step (RENAME_EXCHANGE): the workdir's name never misses.
      const std::string link = root_ + "/proj.link";
      fs::create_directory_symlink(outside_, link);
      EXPECT_EQ(renameat2(AT_FDCWD, link.c_str(), AT_FDCWD, work_.c_str(), RENAME_EXCHANGE), 0);
      fs::rename(link, real);
      return Calls({ToolCall{"task", {{"prompt", "plant"}, {"description", "plant"}}, ""}});
    }
    if (IsParent(r)) {
      std::lock_guard<std::mutex> lock(mu);
      task_result = r.view.LastUserText();
      return Text("done");
    }
    if (turn == 0)
      return Calls({ToolCall{"write_file", {{"path", "planted"}, {"content", "x"}}, ""}});
    return Text("planted");
  });
  Session s = Run({"--standby", "0"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  std::lock_guard<std::mutex> lock(mu);
  if (!GetParam().sandboxed) {
    EXPECT_TRUE(fs::exists(outside_ + "/planted")) << "control: the name-resolved child escapes";
    return;
  }
  EXPECT_FALSE(fs::exists(outside_ + "/planted"));
  if (Layer2()) {
    EXPECT_TRUE(fs::exists(real + "/planted")) << s.err;
    EXPECT_NE(task_result.find("planted"), std::string::npos) << task_result;
    return;
  }
  EXPECT_FALSE(fs::exists(real + "/planted"));
  EXPECT_NE(task_result.find("refused: task may change files, and git's trust surface is not "
                             "guarded (" +
                             work_ +
                             " no longer leads to the directory whose git surface is "
                             "guarded"),
            std::string::npos)
      << task_result;
}

// A --writable path inside the workdir: one task swaps a directory on its way for one holding a
// link to the outside (`mv a a.old`, `mkdir a`, `ln -s OUTSIDE a/out`; in layer 2 `a/out` itself
// is a mount point and cannot be renamed, its parent can), and the next task writes through
// `a/out`. Children get the session's canonical path and refuse one that no longer resolves to
// itself (and every writable rule and mount is walked without following links), so the write
// fails and nothing lands outside; the unconfined control writes outside.
TEST_P(ConfineTest, ATaskThatSwapsAWritablePathForALinkCannotWidenTheNextTask) {
  fs::create_directories(work_ + "/a/out");
  std::mutex mu;
  std::string second_result;
  server_.SetHandler([&](const RecordedRequest& r) {
    const int turn = r.view.assistant_turns;
    if (IsParent(r) && turn < 2) {
      const char* what = turn == 0 ? "swap" : "plant";
      return Calls({ToolCall{"task", {{"prompt", what}, {"description", what}}, ""}});
    }
    if (IsParent(r)) {
      std::lock_guard<std::mutex> lock(mu);
      second_result = r.view.LastUserText();
      return Text("done");
    }
    if (turn > 0) return Text("ok");
    const std::string command = r.view.FirstUserText() == "swap"
                                    ? "mv a a.old && mkdir a && ln -s " + outside_ + " a/out"
                                    : "echo x > a/out/planted";
    return Calls({ToolCall{"bash", {{"command", command}}, ""}});
  });
  Session s = Run({"--standby", "0", "--writable", work_ + "/a/out"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  ASSERT_TRUE(fs::is_symlink(work_ + "/a/out")) << "the swap did not happen: " << s.err;
  if (GetParam().sandboxed) {
    EXPECT_FALSE(fs::exists(outside_ + "/planted"));
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_NE(second_result.find("a symbolic link appeared in it since the session started"),
              std::string::npos)
        << second_result;
  } else {
    EXPECT_TRUE(fs::exists(outside_ + "/planted")) << "control: the unconfined task escapes";
  }
}

// forkbox run from a build tree inside the project: forkbox-child lies in the workdir, so a task
// could rename a program of its own over it, and the spawner would start that, with the spawner's
// rights, for the next task. Refused at start-up, before any model call; the control
// (--sandbox=off) runs, and the second task starts the replaced program, which writes outside.
TEST_P(ConfineTest, AChildProgramATaskCouldReplaceIsRefused) {
  const std::string bin = work_ + "/fb/bin";
  CopyForkboxTo(bin);
  TasksSwapTheChildProgramIn(bin);
  Session s = Run({"--standby", "0"}, nullptr, bin + "/forkbox");
  if (GetParam().sandboxed) {
    EXPECT_EQ(s.exit_code, 2) << s.err;
    EXPECT_NE(s.err.find("forkbox-child '" + bin + "/forkbox-child' is inside the writable tree"),
              std::string::npos)
        << s.err;
    EXPECT_TRUE(server_.requests().empty()) << "refused before the first model call";
    EXPECT_FALSE(fs::exists(outside_ + "/planted"));
  } else {
    EXPECT_EQ(s.exit_code, 0) << s.err;
    EXPECT_TRUE(fs::exists(outside_ + "/planted")) << "control: the replaced program started";
  }
}

// forkbox installed under /dev/shm: layer-1 tools write the host's /dev/shm (multiprocessing's
// SemLock needs it), so a task could replace forkbox-child there. Refused in layer 1, before any
// model call. In layer 2 tools get a private /dev/shm, so the run goes on and the task's swap
// lands in its own tmpfs. The control (--sandbox=off) swaps the real one: task 2 writes outside.
TEST_P(ConfineTest, AChildProgramInTheHostsDevShmIsRefusedInLayer1) {
  struct statvfs shm_fs;
  if (::statvfs("/dev/shm", &shm_fs) != 0 || (shm_fs.f_flag & ST_NOEXEC) != 0) {
    GTEST_SKIP() << "no executable /dev/shm here";
  }
  char tmpl[] = "/dev/shm/forkbox-confine-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl, bin = root + "/bin";
  struct RemoveAtEnd {
    std::string dir;
    ~RemoveAtEnd() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove_at_end{root};
  ::chmod(root.c_str(), 0755);
  const std::string modules = agent::HttpModuleDirOf(bin + "/forkbox");
  ASSERT_TRUE(fs::path(modules).lexically_normal().string().starts_with(root + "/")) << modules;
  CopyForkboxTo(bin);
  if (AsUser()) {
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      (void)::lchown(entry.path().c_str(), uid_, gid_);
    }
    (void)::lchown(root.c_str(), uid_, gid_);
  }
  TasksSwapTheChildProgramIn(bin);
  Session s = Run({"--standby", "0"}, nullptr, bin + "/forkbox");
  if (GetParam().sandboxed && Jailed()) {
    EXPECT_EQ(s.exit_code, 2) << s.err;
    EXPECT_NE(s.err.find("forkbox-child '" + bin + "/forkbox-child' is inside the writable tree '" +
                         fs::canonical("/dev/shm").string() + "'"),
              std::string::npos)
        << s.err;
    EXPECT_TRUE(server_.requests().empty()) << "refused before the first model call";
  } else if (GetParam().sandboxed) {
    EXPECT_EQ(s.exit_code, 0) << s.err;
    EXPECT_EQ(server_.requests().size(), 7u) << "both tasks ran: the swap stayed in its tmpfs";
  } else {
    EXPECT_EQ(s.exit_code, 0) << s.err;
    EXPECT_TRUE(fs::exists(outside_ + "/planted")) << "control: the replaced program started";
    return;
  }
  EXPECT_FALSE(fs::exists(outside_ + "/planted"));
}

// The transcripts (--transcript-dir: every tool output and task prompt of every session that
// wrote there) are out of every tool's read scope, as the session store is: the next session's
// bash, the parent's and a task's, cannot read the first one's, in either layer and with
// --sandbox=read-only; both sessions still write theirs (in layer 2 the directory is under an
// empty tmpfs in every namespace, written through descriptors opened before). Under /var/tmp:
// layer 2's private /tmp would hide it anyway. Before, both read it. The control (--sandbox=off)
// reads it from both.
TEST_P(ConfineTest, ATranscriptOfAnEarlierSessionIsUnreadable) {
  char tmpl[] = "/var/tmp/forkbox-confine-transcripts-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string transcripts = tmpl;
  struct RemoveAtEnd {
    std::string dir;
    ~RemoveAtEnd() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove_at_end{transcripts};
  if (AsUser()) (void)::lchown(tmpl, uid_, gid_);
  const std::string secret = "TRANSCRIBED-" + std::to_string(::getpid()) + "-SECRET";
  std::ofstream(work_ + "/secret.txt") << secret << "\n";
  std::string command = "cat secret.txt";  // The first session's task: into its transcript.
  server_.SetHandler([&command](const RecordedRequest& r) {
    if (r.view.assistant_turns > 0) return Text("done");
    const ToolCall bash{"bash", {{"command", command}}, ""};
    if (!IsParent(r)) return Calls({bash});
    const ToolCall task{"task", {{"prompt", "look"}, {"description", "look"}}, ""};
    return command == "cat secret.txt" ? Calls({task}) : Calls({bash, task});
  });
  Session first = Run({"--transcript-dir", transcripts});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto files = [&transcripts] {
    std::vector<std::string> texts;
    for (const auto& entry : fs::directory_iterator(transcripts)) {
      texts.push_back(ReadAll(entry.path().string()));
    }
    return texts;
  };
  ASSERT_EQ(files().size(), 1u);
  ASSERT_NE(files()[0].find(secret), std::string::npos) << "the first task's transcript";
  fs::remove(work_ + "/secret.txt");
  command = "cat " + transcripts + "/*; echo listed=$(ls " + transcripts + " | wc -l)";
  std::vector<std::vector<std::string>> runs = {{}};
  if (GetParam().sandboxed) runs.push_back({"--sandbox=read-only"});
  for (std::vector<std::string> flags : runs) {
    SCOPED_TRACE(flags.empty() ? "default" : flags[0]);
    server_.ClearRequests();
    flags.insert(flags.end(), {"--transcript-dir", transcripts});
    Session next = Run(flags);
    ASSERT_EQ(next.exit_code, 0) << next.err;
    bool parent_read = false, task_read = false, parent_ran = false, task_ran = false;
    for (const RecordedRequest& r : server_.requests()) {
      (IsParent(r) ? parent_read : task_read) |= r.body.find(secret) != std::string::npos;
      (IsParent(r) ? parent_ran : task_ran) |= r.body.find("listed=") != std::string::npos;
    }
    EXPECT_TRUE(parent_ran && task_ran) << "both commands ran";
    EXPECT_EQ(parent_read, !GetParam().sandboxed) << "the parent's bash";
    EXPECT_EQ(task_read, !GetParam().sandboxed) << "a task's bash";
  }
  size_t later = 0;
  for (const std::string& text : files()) later += text.find("listed=") != text.npos ? 1 : 0;
  EXPECT_EQ(files().size(), runs.size() + 1);
  EXPECT_EQ(later, runs.size()) << "each later session's task wrote its transcript";
}

// Issue 13: AF_UNIX in the parent's bash and a task's bash goes through the unix connect broker
// (sandbox/unix_broker.h), in both layers: multiprocessing's forkserver and an abstract server
// and client inside work, a socket bound outside after the start (under /var/tmp: layer 2's
// private /tmp would hide one in /tmp anyway) is refused, and the refusal is in the tool result.
// The control (--sandbox=off) reaches the outside socket. With --allow-net the broker stays on.
class BrokerTest : public ConfineTest {
 protected:
  void Check(bool in_task, bool allow_net = false) {
    char tmpl[] = "/var/tmp/fbx-broker-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl, sock = dir + "/daemon.sock";
    ::chmod(tmpl, 0755);
    std::ofstream(work_ + "/mp.py")
        << "import multiprocessing as mp, socket, sys\n"
           "def sq(x): return x * x\n"
           "if __name__ == '__main__':\n"
           "    with mp.get_context('forkserver').Pool(2) as p:\n"
           "        print('forkserver ok', sum(p.map(sq, range(4))))\n"
           "    s = socket.socket(socket.AF_UNIX); s.bind('\\0' + sys.argv[1]); s.listen(1)\n"
           "    c = socket.socket(socket.AF_UNIX); c.connect('\\0' + sys.argv[1])\n"
           "    a, _ = s.accept(); c.send(b'k'); print('abstract ok', a.recv(1).decode())\n"
           "    try:\n"
           "        socket.socket(socket.AF_UNIX).connect(sys.argv[2]); print('outside reached')\n"
           "    except OSError as e: print('outside refused', e.errno)\n"
           "    if len(sys.argv) > 3:\n"
           "        l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)\n"
           "        t = socket.create_connection(l.getsockname()); l.accept()[0].send(b'n')\n"
           "        print('tcp ok', t.recv(1).decode())\n";
    const std::string command = "python3 mp.py fbx-abs-" + std::to_string(::getpid()) + " " + sock +
                                (allow_net ? " net" : "");
    std::mutex mu;
    std::string result;
    UniqueFd listener;
    server_.SetHandler([&](const RecordedRequest& r) {
      std::lock_guard<std::mutex> lock(mu);
      const bool tool_side = in_task ? !IsParent(r) : true;
      if (in_task && IsParent(r) && r.view.assistant_turns == 0) {
        return Calls({ToolCall{"task", {{"prompt", "mp"}, {"description", "mp"}}, ""}});
      }
      if (tool_side && r.view.assistant_turns == 0) {
        listener = BindListener(sock);  // After every sandbox was set up.
        return Calls({ToolCall{"bash", {{"command", command}}, ""}});
      }
      if (tool_side && result.empty()) result = r.body;
      return Text("done");
    });
    std::vector<std::string> flags;
    if (!in_task) flags.push_back("--no-subagents");
    if (allow_net) flags.push_back("--allow-net");
    Session s = Run(flags);
    ::unlink(sock.c_str());
    ::rmdir(tmpl);
    ASSERT_EQ(s.exit_code, 0) << s.err;
    EXPECT_NE(result.find("forkserver ok 14"), std::string::npos) << result;
    EXPECT_NE(result.find("abstract ok k"), std::string::npos) << result;
    if (allow_net) {
      EXPECT_NE(result.find("tcp ok n"), std::string::npos) << result;
    }
    if (GetParam().sandboxed) {
      EXPECT_NE(result.find("outside refused"), std::string::npos) << result;
      EXPECT_NE(result.find("forkbox: connect to " + sock + " refused"), std::string::npos)
          << result;
    } else {
      EXPECT_NE(result.find("outside reached"), std::string::npos) << "control\n" << result;
    }
  }

  UniqueFd BindListener(const std::string& path) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd.get(), 8), 0);
    ::chmod(path.c_str(), 0777);
    return fd;
  }
};

TEST_P(BrokerTest, ParentBashBrokersUnixSockets) { Check(/*in_task=*/false); }
TEST_P(BrokerTest, TaskBashBrokersUnixSockets) { Check(/*in_task=*/true); }
TEST_P(BrokerTest, ParentBashBrokersUnixSocketsWithAllowNet) {
  Check(/*in_task=*/false, /*allow_net=*/true);
}
TEST_P(BrokerTest, TaskBashBrokersUnixSocketsWithAllowNet) {
  Check(/*in_task=*/true, /*allow_net=*/true);
}

// bash processes whose command line contains `token` (not the setsid that starts one, whose
// argv holds it too until it exits).
std::vector<pid_t> ProcessesWith(const std::string& token) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadAll(entry.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(token) == std::string::npos) continue;
    if (ReadAll(entry.path().string() + "/comm") != "bash\n") continue;
    out.push_back(std::stoi(name));
  }
  // A fork of the daemon on its way to exec sleep still looks like it: keep the topmost.
  std::vector<pid_t> top;
  for (pid_t pid : out) {
    const std::string ppid = StatusField(pid, "PPid");
    if (std::find(out.begin(), out.end(), std::atoi(ppid.c_str())) == out.end()) top.push_back(pid);
  }
  return top;
}

// Starts a session on `session` whose bash command, the parent's own (`by_parent`) or a task's,
// plants git's trust surface (a .git/commondir, which redirects your next git command to a
// directory of its choosing; a hook, which layer 2's read-only binds refuse), detaches a setsid
// daemon and waits. Returns once the daemon runs, with its pidfd (empty unless found exactly
// once, by a token made of `tag` that only its command line holds whole).
UniqueFd ConfineTest::StartPlanting(bool by_parent, const std::string& tag, std::thread* session,
                                    pid_t* forkbox) {
  EXPECT_EQ(std::system(("git init -q " + work_).c_str()), 0);
  const std::string suffix = tag + std::to_string(::getpid()) + root_.substr(root_.size() - 6);
  const std::string fifo = work_ + "/ready";
  EXPECT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  const std::string command =
      "echo ../planted > .git/commondir; echo 'echo hook' > .git/hooks/pre-commit; "
      "t=fbdaemon; setsid -f bash -c \"echo up > ready; sleep 600; true ${t}" +
      suffix + "\"; exec sleep 600";
  server_.SetHandler([by_parent, command](const RecordedRequest& r) {
    if (IsParent(r) && !by_parent) {
      return Calls({ToolCall{"task", {{"prompt", "d"}, {"description", "d"}}, ""}});
    }
    return Calls({ToolCall{"bash", {{"command", command}}, ""}});
  });
  // Signalled when the session has ended: a run that failed early fails the test, no hang.
  auto ended = std::make_shared<UniqueFd>(::eventfd(0, EFD_CLOEXEC));
  EXPECT_TRUE(*ended) << std::strerror(errno);
  *session = std::thread([this, forkbox, ended] {
    Run({"--standby", "0"}, forkbox);
    const uint64_t one = 1;
    EXPECT_EQ(::write(ended->get(), &one, sizeof one), 8);
  });
  // Until the plants are in place and the daemon runs.
  EXPECT_TRUE(forkbox::testing::ReadFifoUnless(fifo, ended->get())) << "the session ended first";
  const std::vector<pid_t> daemons = ProcessesWith("fbdaemon" + suffix);
  return UniqueFd(daemons.size() == 1 ? static_cast<int>(::syscall(SYS_pidfd_open, daemons[0], 0))
                                      : -1);
}

// SIGKILL of forkbox while a bash command runs, has planted git's trust surface (a
// .git/commondir, which redirects your next git command to a directory of its choosing; a hook,
// which layer 2's read-only binds refuse) and detached a setsid daemon: a task's command
// (`by_parent` false) or the parent's own (true). forkbox's pid is the launcher's waiter; its
// death comes to the launcher as SIGTERM (sandbox::EnterLauncher), whose teardown kills what the
// tools left and puts the surface back, in both layers (in layer 2 the PID namespaces take the
// rest down too). The unsandboxed control keeps the daemon and the planted files. Survivors are
// counted from outside once forkbox and its launcher are gone.
void ConfineTest::ExpectSigkillFate(bool by_parent) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);  // Orphans come to us: we reap.
  std::thread session;
  pid_t forkbox = 0;
  // Held before the kill, so that a quick death cannot be mistaken for a missing process.
  UniqueFd daemon = StartPlanting(by_parent, "surv", &session, &forkbox);
  const pid_t launcher_pid = LauncherOf(Pid());  // forkbox's own pid: no launcher.
  UniqueFd launcher(
      launcher_pid != Pid() ? static_cast<int>(::syscall(SYS_pidfd_open, launcher_pid, 0)) : -1);
  // Held while forkbox's pid dies, the launcher has not cleaned up yet when another forkbox
  // starts: its cgroup's lock tells that start to leave the session to it.
  if (launcher) ::kill(launcher_pid, SIGSTOP);
  EXPECT_EQ(::kill(Pid(), SIGKILL), 0);
  session.join();
  const std::vector<std::string> cleared = forkbox::sandbox::PidsCgroup::EndLeftovers();
  if (launcher) ::kill(launcher_pid, SIGCONT);
  for (const std::string& line : cleared) {
    EXPECT_EQ(line.find("/task-" + std::to_string(Pid()) + "-"), std::string::npos)
        << "a start killed what the launcher was still to end: " << line;
  }
  ASSERT_TRUE(daemon) << "no daemon found: " << std::strerror(errno);
  const bool sandboxed = GetParam().sandboxed;
  ASSERT_EQ(static_cast<bool>(launcher), sandboxed) << "a launcher below forkbox's pid";
  pollfd ended{launcher.get(), POLLIN, 0};
  const bool launcher_ended = launcher && ::poll(&ended, 1, 30'000) == 1;
  pollfd pfd{daemon.get(), POLLIN, 0};
  const bool died = daemon && ::poll(&pfd, 1, sandboxed ? 30'000 : 2'000) == 1;
  // symlink_status: a planted link counts even when it leads nowhere.
  const bool commondir = fs::exists(fs::symlink_status(work_ + "/.git/commondir"));
  const bool hook = fs::exists(fs::symlink_status(work_ + "/.git/hooks/pre-commit"));
  (void)::syscall(SYS_pidfd_send_signal, daemon.get(), SIGKILL, nullptr, 0);
  // What else survived (the command's own `exec sleep 600`, the daemon's sleep) was re-parented
  // to us, the subreaper: killed and reaped, so no run leaves sleeps behind.
  forkbox::sandbox::KillAllDescendants();
  const char* whose = by_parent ? "the parent's own bash command" : "a task's bash command";
  std::string err;
  std::getline(std::ifstream(root_ + "/err"), err, '\0');
  if (sandboxed) {
    EXPECT_TRUE(launcher_ended) << "the launcher outlived forkbox's pid by 30 s";
    // The launcher says what happened: not the SIGTERM the waiter's death came as.
    EXPECT_NE(err.find(") was killed by SIGKILL; running tasks were killed"), std::string::npos)
        << err;
    EXPECT_TRUE(died) << "a daemon of " << whose << " survived SIGKILL of forkbox";
    EXPECT_FALSE(commondir) << "the .git/commondir " << whose << " planted survived SIGKILL";
    EXPECT_FALSE(hook) << "the hook " << whose << " planted survived SIGKILL";
  } else {
    EXPECT_FALSE(died) << "control: the daemon of " << whose << " did not survive";
    EXPECT_TRUE(commondir && hook) << "control: " << whose << " planted nothing";
  }
}

TEST_P(ConfineTest, SigkillOfForkboxLeavesNoProcessAndNoPlantedGitFileOfATask) {
  ExpectSigkillFate(false);
}

TEST_P(ConfineTest, SigkillOfForkboxLeavesNoProcessAndNoPlantedGitFileOfTheParentsBash) {
  ExpectSigkillFate(true);
}

// A SIGKILL of the launcher alone (the OOM killer's pick: the largest process), forkbox's pid still
// alive: what the tools left dies too. In layer 2 the launcher is its PID namespace's init; in
// layer 1 its orphans come to the waiter (a subreaper), which kills them before it relays the
// death. Before, the waiter relayed at once and a daemon a tool detached went on under init. The
// unsandboxed control (no launcher: forkbox itself is killed) keeps the daemon.
TEST_P(ConfineTest, SigkillOfTheLauncherAloneLeavesNoProcessOfItsTools) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);  // Orphans come to us: we reap.
  std::thread session;
  pid_t forkbox = 0;
  UniqueFd daemon = StartPlanting(/*by_parent=*/true, "oom", &session, &forkbox);
  ASSERT_TRUE(daemon) << "no daemon found: " << std::strerror(errno);
  const pid_t launcher = LauncherOf(Pid());
  const bool sandboxed = GetParam().sandboxed;
  ASSERT_EQ(launcher != Pid(), sandboxed) << "a launcher below forkbox's pid";
  EXPECT_EQ(::kill(launcher, SIGKILL), 0);
  session.join();
  pollfd pfd{daemon.get(), POLLIN, 0};
  const bool died = ::poll(&pfd, 1, sandboxed ? 30'000 : 2'000) == 1;
  (void)::syscall(SYS_pidfd_send_signal, daemon.get(), SIGKILL, nullptr, 0);
  forkbox::sandbox::KillAllDescendants();  // The control's survivors, re-parented to us.
  if (sandboxed) {
    EXPECT_TRUE(died) << "a daemon of the parent's bash outlived a SIGKILL of the launcher";
  } else {
    EXPECT_FALSE(died) << "control: the daemon did not survive";
  }
}

// Every process below this one whose name starts with "forkbox": forkbox, its launcher, the
// spawner, the children and the namespace inits; not the tools (bash, sleep).
std::vector<pid_t> ForkboxProcessesBelowUs() {
  std::map<pid_t, pid_t> parent_of;
  std::vector<pid_t> named;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    parent_of[pid] = std::atoi(StatusField(pid, "PPid").c_str());
    if (ReadAll(entry.path().string() + "/comm").rfind("forkbox", 0) == 0) named.push_back(pid);
  }
  std::vector<pid_t> out;
  for (pid_t pid : named) {
    for (pid_t up = parent_of[pid]; up > 1; up = parent_of[up]) {
      if (up != ::getpid()) continue;
      out.push_back(pid);
      break;
    }
  }
  return out;
}

// A SIGKILL of every forkbox process at once (`pkill -9 forkbox`, `docker kill`) while a bash
// command of the parent (`by_parent`) or of a task has planted a hook and a .git/commondir and
// detached a daemon: nobody is left to put them back, so they stay; the next forkbox started puts
// them back from the dead session's journal (sandbox::GuardJournal) before anything else, and says
// so. The daemon is gone by then: in layer 2 with its PID namespace, in layer 1 as root killed by
// that start in the dead session's pids cgroup (PidsCgroup::EndLeftovers). The control:
// unsandboxed, nothing guards the surface, and the plants and the daemon stay after the next start
// too.
void ConfineTest::ExpectKillAllFate(bool by_parent) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);  // Orphans come to us: we reap.
  std::thread session;
  UniqueFd daemon = StartPlanting(by_parent, "all", &session);
  const auto pidfd_of = [](pid_t pid) {
    return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  };
  const auto ended = [](const UniqueFd& pidfd, int ms) {
    pollfd p{pidfd.get(), POLLIN, 0};
    return ::poll(&p, 1, ms) == 1;
  };

  // Stopped first, so that none of them sees another die and cleans up: all at once.
  const std::vector<pid_t> forkbox = ForkboxProcessesBelowUs();
  std::vector<UniqueFd> dying;
  for (pid_t pid : forkbox) dying.push_back(pidfd_of(pid));
  for (pid_t pid : forkbox) ::kill(pid, SIGSTOP);
  for (pid_t pid : forkbox) ::kill(pid, SIGKILL);
  session.join();
  for (const UniqueFd& pidfd : dying) EXPECT_TRUE(!pidfd || ended(pidfd, 30'000));
  ASSERT_TRUE(daemon) << "no daemon found";
  // Layer 2 binds hooks/ read-only, so there only the commondir is planted.
  const bool hook_writable = !GetParam().sandboxed || Jailed();
  const auto exists = [this](const char* rel) {
    return fs::exists(fs::symlink_status(work_ + "/" + rel));
  };
  EXPECT_GE(forkbox.size(), by_parent ? 1U : 2U);
  EXPECT_TRUE(exists(".git/commondir")) << "the kill-all left nobody to put it back";
  EXPECT_EQ(exists(".git/hooks/pre-commit"), hook_writable);
  server_.SetHandler([](const RecordedRequest&) { return Text("done"); });
  Session next = Run({});
  EXPECT_EQ(next.exit_code, 0) << next.err;
  const bool daemon_ended = ended(daemon, GetParam().sandboxed ? 10'000 : 0);
  (void)::syscall(SYS_pidfd_send_signal, daemon.get(), SIGKILL, nullptr, 0);
  forkbox::sandbox::KillAllDescendants();  // The control's tools, re-parented to us.
  const char* whose = by_parent ? "the parent's own bash command" : "a task's bash command";
  const std::string put_back =
      "git trust surface left changed by a killed forkbox, put back: " + work_ + ": remove ";
  // Layer 1 without a pids cgroup (a user's; root's with cgroup v1 here) has nothing to find it by.
  const bool findable =
      Layer2() || (!AsUser() && !forkbox::sandbox::PidsCgroup::Hierarchy().empty());
  if (GetParam().sandboxed) {
    EXPECT_TRUE(daemon_ended || !findable)
        << "the daemon of " << whose << " outlived the next start";
    EXPECT_FALSE(exists(".git/commondir")) << whose;
    EXPECT_FALSE(exists(".git/hooks/pre-commit")) << whose;
    EXPECT_NE(next.err.find(put_back + ".git/commondir"), std::string::npos) << next.err;
    if (hook_writable) {
      EXPECT_NE(next.err.find(put_back + ".git/hooks/pre-commit"), std::string::npos) << next.err;
    }
  } else {
    EXPECT_TRUE(exists(".git/commondir") && exists(".git/hooks/pre-commit"))
        << "control: nothing guards an unsandboxed session";
    EXPECT_FALSE(daemon_ended) << "control: the daemon of " << whose << " did not survive";
    EXPECT_EQ(next.err.find("put back"), std::string::npos) << next.err;
  }
}

TEST_P(ConfineTest, KillAllLeavesNoPlantedGitFileOfATaskPastTheNextStart) {
  ExpectKillAllFate(false);
}

TEST_P(ConfineTest, KillAllLeavesNoPlantedGitFileOfTheParentsBashPastTheNextStart) {
  ExpectKillAllFate(true);
}

// Every suite here runs in each layer as root and as the unprivileged user, sandboxed and not.
const auto kAllModes =
    ::testing::Values(Param{Where::kLayer2, true}, Param{Where::kLayer2, false},
                      Param{Where::kLayer1Jail, true}, Param{Where::kLayer1Jail, false},
                      Param{Where::kUserLayer2, true}, Param{Where::kUserLayer2, false},
                      Param{Where::kUserLayer1Jail, true}, Param{Where::kUserLayer1Jail, false});

INSTANTIATE_TEST_SUITE_P(Modes, ConfineTest, kAllModes, NameOf);
INSTANTIATE_TEST_SUITE_P(Modes, BrokerTest, kAllModes, NameOf);

// Issue 13: Python multiprocessing (fork, spawn, forkserver, shared_memory) in the parent's bash
// and a task's bash from a workdir of 100+ characters, whose task temp dir is too deep for
// forkserver's socket: tools get the short TMPDIR /dev/shm/forkbox-* (sandbox/sandbox.h,
// TaskTmpDir). Nothing is left behind. --sandbox=off gets the short TMPDIR too. A read-only
// session's tools (and its `write: none` tasks') get a temp dir on /dev/shm, the only place they
// can write; it goes at the end.
class ShortTmpConfineTest : public ConfineTest {
 protected:
  void Check(bool in_task, bool read_only = false) {
    if (read_only && !GetParam().sandboxed) GTEST_SKIP() << "read-only keeps the sandbox on";
    work_ = root_ + "/proj/home/alice/src/github.com/acme-corporation/some-project";
    while (work_.size() < 100) work_ += "/sub";
    fs::create_directories(work_);
    std::ofstream(work_ + "/mp.py")
        << "import multiprocessing as mp, os, sys\n"
           "from multiprocessing import shared_memory\n"
           "def sq(x): return x * x\n"
           "if __name__ == '__main__':\n"
           "    print('TMPDIR=' + os.environ['TMPDIR'])\n"
           "    for m in ('fork', 'spawn', 'forkserver'):\n"
           "        with mp.get_context(m).Pool(2) as p: print(m, 'ok', sum(p.map(sq, range(4))))\n"
           "    s = shared_memory.SharedMemory(create=True, size=8); s.buf[0] = 7\n"
           "    print('shm ok', s.buf[0]); s.close(); s.unlink()\n";
    std::mutex mu;
    std::string result;
    server_.SetHandler([&](const RecordedRequest& r) {
      std::lock_guard<std::mutex> lock(mu);
      const bool tool_side = in_task ? !IsParent(r) : true;
      if (in_task && IsParent(r) && r.view.assistant_turns == 0) {
        return Calls({ToolCall{"task", {{"prompt", "mp"}, {"description", "mp"}}, ""}});
      }
      if (tool_side && r.view.assistant_turns == 0) {
        return Calls({ToolCall{"bash", {{"command", "python3 mp.py"}}, ""}});
      }
      if (tool_side && result.empty()) result = r.body;
      return Text("done");
    });
    std::vector<std::string> flags;
    if (!in_task) flags.push_back("--no-subagents");
    if (read_only) flags.push_back("--sandbox=read-only");
    Session s = Run(flags);
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const size_t at = result.find("TMPDIR=/dev/shm/forkbox-");
    ASSERT_NE(at, std::string::npos) << result;
    const std::string tmpdir = result.substr(at + 7, std::string("/dev/shm/forkbox-").size() + 10);
    EXPECT_FALSE(fs::exists(tmpdir)) << tmpdir << " left behind";
    for (const char* m : {"fork", "spawn", "forkserver"}) {
      EXPECT_NE(result.find(std::string(m) + " ok 14"), std::string::npos) << m << "\n" << result;
    }
    EXPECT_NE(result.find("shm ok 7"), std::string::npos) << result;
    std::string left;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(work_ + "/.forkbox-tmp", ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      left += it->path().string() + "\n";
    }
    EXPECT_FALSE(fs::exists(work_ + "/.forkbox-tmp")) << "the task temp dir was not removed:\n"
                                                      << left;
    for (const auto& entry : fs::directory_iterator("/dev/shm")) {
      std::error_code ec;
      const fs::path target = fs::read_symlink(entry.path(), ec);
      EXPECT_TRUE(ec || target.string().rfind(root_, 0) != 0)
          << entry.path() << " -> " << target << " left behind";
    }
  }
};

TEST_P(ShortTmpConfineTest, ParentBashRunsMultiprocessingFromADeepWorkdir) { Check(false); }
TEST_P(ShortTmpConfineTest, TaskBashRunsMultiprocessingFromADeepWorkdir) { Check(true); }
TEST_P(ShortTmpConfineTest, ParentBashRunsMultiprocessingInAReadOnlySession) { Check(false, true); }
TEST_P(ShortTmpConfineTest, TaskBashRunsMultiprocessingInAReadOnlySession) { Check(true, true); }

INSTANTIATE_TEST_SUITE_P(Modes, ShortTmpConfineTest, kAllModes, NameOf);

// ---- The spawner.

const std::string kSpawnerProgram = std::string(FORKBOX_BIN_DIR) + "/forkbox-child";

class SpawnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-spawner-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  parent::Spawner Start(const std::string& program) {
    parent::SpawnerConfig config;
    config.program = kSpawnerProgram;
    config.child_path = program;
    config.workdir = UniqueFd(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    Result<parent::Spawner> spawner = parent::Spawner::Start(std::move(config));
    EXPECT_TRUE(spawner.ok()) << spawner.status().ToString();
    return std::move(*spawner);
  }
  std::string dir_;
};

// A raw request and the spawner's reply.
ipc::SpawnReply Ask(const parent::Spawner& s, const void* data, size_t size, std::vector<int> fds) {
  Status sent = SendWithFds(s.socket_fd(), data, size, fds);
  EXPECT_TRUE(sent.ok()) << sent.ToString();
  ipc::SpawnReply reply;
  EXPECT_EQ(::recv(s.socket_fd(), &reply, sizeof(reply), 0), static_cast<ssize_t>(sizeof(reply)));
  return reply;
}

// The children of this process other than the spawner (none may appear for a refused request).
std::vector<std::string> OurChildren() {
  std::istringstream in(ReadAll("/proc/self/task/" + std::to_string(::getpid()) + "/children"));
  std::vector<std::string> out;
  for (std::string pid; in >> pid;) out.push_back(pid);
  return out;
}

TEST_F(SpawnerTest, StartsTheChildAsOursWithItsPipes) {
  parent::Spawner spawner = Start("/bin/true");
  Result<Pipe> control = MakePipe();
  Result<Pipe> report = MakePipe();
  ASSERT_TRUE(control.ok() && report.ok());
  Result<ChildProcess> child = spawner.Launch(control->read.get(), report->write.get(), -1);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  Result<int> status = child->Wait();  // waitid works: CLONE_PARENT made it our child.
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0);
}

// The page faults of rewriting pages this process wrote before.
long FaultsRewriting(std::vector<char>& pages) {
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  for (size_t i = 0; i < pages.size(); i += 4096) pages[i] = static_cast<char>(pages[i] + 1);
  ::getrusage(RUSAGE_SELF, &after);
  return after.ru_minflt - before.ru_minflt;
}

// The spawner is forkbox-child exec'ed in its spawner mode, not a fork of ours: it holds none of
// our memory (a key), and none of our pages was write-protected for it, so rewriting 256 of them
// takes no faults. Control: after a plain fork the same rewrite faults.
TEST_F(SpawnerTest, IsItsOwnProgramAndCopiesNothingOfOurs) {
  if (!kCloneCanShareMemory) GTEST_SKIP() << "sanitizer builds copy the memory";
  std::vector<char> pages(256 * 4096, 1);
  (void)FaultsRewriting(pages);
  parent::Spawner spawner = Start("/bin/true");
  EXPECT_LT(FaultsRewriting(pages), 64);
  const std::string proc = "/proc/" + std::to_string(spawner.pid());
  EXPECT_EQ(fs::read_symlink(proc + "/exe"), fs::canonical(kSpawnerProgram));
  // Start returns once the exec has replaced our memory in the spawner; the kernel sets up its
  // arguments a moment later, and until then its cmdline reads empty (seen: 1 run in 6).
  std::string cmdline;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((cmdline = ReadAll(proc + "/cmdline")).empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  EXPECT_EQ(cmdline, kSpawnerProgram + " --spawner /bin/true ");
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  EXPECT_GE(FaultsRewriting(pages), 64) << "control: a fork write-protects our pages";
}

// Started by hand (no socket on fd 3), or with a relative child path, or an unknown flag, it
// refuses with a usage error and serves nothing.
TEST_F(SpawnerTest, RefusesToStartByHandOrWithABadCommandLine) {
  struct Case {
    std::string args;
    std::string says;
  };
  const std::vector<Case> cases = {{"--spawner /bin/true 3<&- 4<&-", "fd 3 is not open"},
                                   {"--spawner bin/true 3</dev/null 4</dev/null", "usage"},
                                   {"--spawner /bin/true --debug 3</dev/null 4</dev/null", "usage"},
                                   {"--spawner 3</dev/null 4</dev/null", "usage"}};
  for (const Case& c : cases) {
    const std::string cmd = kSpawnerProgram + " " + c.args + " 2>&1; echo \"exit=$?\"";
    FILE* out = ::popen(cmd.c_str(), "r");
    ASSERT_NE(out, nullptr);
    std::string text;
    char buf[512];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), out)) > 0;) text.append(buf, n);
    ::pclose(out);
    EXPECT_NE(text.find(c.says), std::string::npos) << c.args << ": " << text;
    EXPECT_NE(text.find("exit=2"), std::string::npos) << c.args << ": " << text;
  }
}

TEST_F(SpawnerTest, RefusesMalformedRequestsAndAnyOtherKindStartingNothing) {
  parent::Spawner spawner = Start("/bin/true");
  Result<Pipe> control = MakePipe();
  Result<Pipe> report = MakePipe();
  ASSERT_TRUE(control.ok() && report.ok());
  const std::vector<std::string> before = OurChildren();
  const std::vector<int> pipes = {control->read.get(), report->write.get()};

  EXPECT_NE(Ask(spawner, "xyz", 3, pipes).error, 0) << "garbage";
  ipc::SpawnRequest bad_magic;
  bad_magic.magic = 0x12345678;
  EXPECT_NE(Ask(spawner, &bad_magic, sizeof(bad_magic), pipes).error, 0);
  // "Run another binary": a kind the spawner does not have, with a path after the header.
  struct {
    ipc::SpawnRequest header;
    char path[16] = "/bin/sh";
  } other_binary;
  other_binary.header.kind = 2;
  ipc::SpawnReply reply = Ask(spawner, &other_binary, sizeof(other_binary), pipes);
  EXPECT_NE(reply.error, 0);
  EXPECT_NE(std::string(reply.message).find("spawner refused"), std::string::npos);
  other_binary.header.kind = ipc::kSpawnLaunchChild;
  EXPECT_NE(Ask(spawner, &other_binary, sizeof(other_binary), pipes).error, 0) << "oversized";
  ipc::SpawnRequest good;
  EXPECT_NE(Ask(spawner, &good, sizeof(good), {pipes[0]}).error, 0) << "one fd missing";
  EXPECT_NE(Ask(spawner, &good, sizeof(good), {pipes[1], pipes[0]}).error, 0) << "swapped pipes";
  UniqueFd file(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_NE(Ask(spawner, &good, sizeof(good), {file.get(), pipes[1]}).error, 0) << "not a pipe";
  good.flags = 0x80;
  EXPECT_NE(Ask(spawner, &good, sizeof(good), pipes).error, 0) << "unknown flag";
  EXPECT_EQ(OurChildren(), before) << "a refused request started a process";

  // It is still serving, and a valid request works.
  Result<ChildProcess> child = spawner.Launch(control->read.get(), report->write.get(), -1);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_TRUE(child->Wait().ok());
}

// A spawner that cannot exec is a Status from Finish, naming the exec: Begin returned before the
// exec was tried. The control: the real program starts.
TEST_F(SpawnerTest, AProgramThatCannotRunFailsFinishWithItsExecError) {
  for (const std::string& program : {std::string("/usr"), kSpawnerProgram}) {
    parent::SpawnerConfig config;
    config.program = program;  // A directory: absolute, so Begin takes it; execve refuses it.
    config.child_path = "/bin/true";
    config.workdir = UniqueFd(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    Result<parent::PendingSpawner> pending = parent::Spawner::Begin(std::move(config));
    ASSERT_TRUE(pending.ok()) << pending.status().ToString();
    Result<parent::Spawner> spawner = pending->Finish();
    if (program == kSpawnerProgram) {
      EXPECT_TRUE(spawner.ok()) << spawner.status().ToString();
      continue;
    }
    ASSERT_FALSE(spawner.ok());
    EXPECT_EQ(spawner.status().message(), "spawner: execve(/usr): Permission denied (errno 13)");
  }
}

TEST_F(SpawnerTest, DiesWithItsParent) {
  Result<Pipe> pid_pipe = MakePipe();
  Result<Pipe> go = MakePipe();
  ASSERT_TRUE(pid_pipe.ok() && go.ok());
  pid_t helper = ::fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {
    parent::SpawnerConfig config;
    config.program = kSpawnerProgram;
    config.child_path = "/bin/true";
    config.workdir = UniqueFd(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    Result<parent::Spawner> spawner = parent::Spawner::Start(std::move(config));
    pid_t pid = spawner.ok() ? spawner->pid() : -1;
    (void)!::write(pid_pipe->write.get(), &pid, sizeof(pid));
    char byte;
    (void)!::read(go->read.get(), &byte, 1);
    ::_exit(0);  // No destructor: only PDEATHSIG and the socket's EOF end the spawner.
  }
  pid_t spawner = -1;
  ASSERT_EQ(::read(pid_pipe->read.get(), &spawner, sizeof(spawner)),
            static_cast<ssize_t>(sizeof(spawner)));
  ASSERT_GT(spawner, 0);
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, spawner, 0)));
  ASSERT_TRUE(pidfd) << std::strerror(errno);
  ASSERT_EQ(::write(go->write.get(), "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(helper, &status, 0), helper);
  pollfd pfd{pidfd.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 30'000), 1) << "the spawner outlived its parent";
}

// Forked probes of the spawner's seccomp filter, each with its unconfined control. The filter is
// inherited by every task child across execve, so it leaves alone what a child's own set-up
// needs (a user namespace); it refuses the kernel attack surface no child needs.
int ProbeExitCode(bool confined) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (confined && !sandbox::ConfineSpawner({}).ok()) ::_exit(100);
    int refused = 0;
    errno = 0;
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0 && errno == EPERM) refused |= 1;
    union bpf_attr attr = {};
    errno = 0;
    if (::syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr)) != 0 && errno == EPERM) {
      refused |= 2;
    }
    if (::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1) refused |= 4;
    ::_exit(refused);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SpawnerSeccomp, RefusesPtraceAndBpfUnderNoNewPrivs) {
  EXPECT_EQ(ProbeExitCode(true), 1 | 2 | 4);
  // Control: the same probe unconfined gets past ptrace (bpf: EINVAL for an empty program, or
  // EPERM without privileges, so only ptrace and no_new_privs are compared).
  EXPECT_EQ(ProbeExitCode(false) & (1 | 4), 0);
}

}  // namespace
}  // namespace forkbox::escape
