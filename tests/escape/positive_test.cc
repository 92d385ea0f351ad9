// The other half of the suite: real work must still run inside the sandbox, `--check` must tell
// the truth about the layer in use, and without Landlock forkbox must refuse to run anything.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "tests/escape/fixture.h"

namespace forkbox::escape {
namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

class SandboxWorks : public EscapeTest {};

TEST_P(SandboxWorks, WriteInsideWorkdir) {
  RunResult r = Shell(
      "cd '" + work_ +
      "' && echo inside > inside.txt && mkdir sub && mv inside.txt sub/ && cat sub/inside.txt");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ReadFile(work_ + "/sub/inside.txt"), "inside\n") << r.Describe();
}

TEST_P(SandboxWorks, SocketpairWorks) {
  RunResult r = Probe({"socketpair"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "SOCKETPAIR ok")) << r.Describe();
}

TEST_P(SandboxWorks, AllowNetReachesLoopback) {
  Listener listener = Listener::Tcp("127.0.0.1");
  RunResult r =
      Probe({"tcp", "127.0.0.1", std::to_string(listener.port())}, Flags({"--allow-net"}));
  EXPECT_TRUE(listener.Contacted()) << "--allow-net must let tools connect\n" << r.Describe();
}

TEST_P(SandboxWorks, GitInitAddCommit) {
  RunResult r = Shell("cd '" + work_ +
                      "' && git init -q && echo hello > a.txt && git add a.txt && "
                      "git -c user.name=Escape -c user.email=escape@example.invalid commit -qm "
                      "'first commit' && git log --oneline");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "first commit")) << r.Describe();
  EXPECT_TRUE(Exists(work_ + "/.git/HEAD"));
}

TEST_P(SandboxWorks, CompileAndRunC) {
  WriteFile(work_ + "/hello.c",
            "#include <stdio.h>\nint main(void) { puts(\"hello from the sandbox\"); return 0; }\n");
  ChownTree(work_, uid(), gid());
  RunResult r = Shell("cd '" + work_ + "' && cc -O1 -o hello hello.c && ./hello");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "hello from the sandbox")) << r.Describe();
}

TEST_P(SandboxWorks, PythonTempfile) {
  RunResult r = Shell(
      "/usr/bin/python3 -c 'import tempfile, os\n"
      "with tempfile.NamedTemporaryFile() as f:\n"
      "    f.write(b\"data\"); f.flush(); print(\"tempfile ok\", os.path.getsize(f.name))\n"
      "with tempfile.TemporaryDirectory() as d:\n"
      "    open(os.path.join(d, \"x\"), \"w\").write(\"y\"); print(\"tempdir ok\")'");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "tempfile ok 4")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "tempdir ok")) << r.Describe();
}

TEST_P(SandboxWorks, PythonMultiprocessingPool) {
  RunResult r = Shell(
      "/usr/bin/python3 -c 'from multiprocessing import Pool\n"
      "if __name__ == \"__main__\":\n"
      "    with Pool(2) as p: print(\"pool sum\", sum(p.map(abs, range(-10, 0))))'");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "pool sum 55")) << r.Describe();
}

TEST_P(SandboxWorks, PipesSubshellsAndMake) {
  WriteFile(work_ + "/Makefile",
            "out.txt:\n\t(echo b; echo a; echo c) | sort | tr -d '\\n' > $@\n"
            "\techo \"$$(cat $@)-$$(echo sub)\" >> $@\n");
  ChownTree(work_, uid(), gid());
  RunResult r = Shell("cd '" + work_ + "' && make -s && cat out.txt && (cd / && echo in-subshell)");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ReadFile(work_ + "/out.txt"), "abcabc-sub\n") << r.Describe();
  EXPECT_TRUE(Contains(r.out, "in-subshell")) << r.Describe();
}

TEST_P(SandboxWorks, DevNullAndDevZero) {
  RunResult r = Shell("echo x > /dev/null && head -c 5 /dev/zero | wc -c && echo null-ok");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "5")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "null-ok")) << r.Describe();
}

TEST_P(SandboxWorks, TmpdirIsWritable) {
  RunResult r = Shell("test -n \"$TMPDIR\" && echo tmp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "tmp")) << r.Describe();
}

TEST_P(SandboxWorks, EnvOptInPassesOnlyWhenNamed) {
  RunOptions without;
  without.env = {"MY_SETTING=visible"};
  RunResult r = Shell("echo \"[$MY_SETTING]\"", without);
  EXPECT_TRUE(Contains(r.out, "[]")) << "not allowlisted, must not pass\n" << r.Describe();
  RunOptions with = Flags({"--env", "MY_SETTING"});
  with.env = {"MY_SETTING=visible"};
  r = Shell("echo \"[$MY_SETTING]\"", with);
  EXPECT_TRUE(Contains(r.out, "[visible]")) << "--env MY_SETTING must pass it\n" << r.Describe();
}

TEST_P(SandboxWorks, ExitStatusPassesThrough) {
  EXPECT_EQ(Shell("exit 7").exit_code, 7);
  // A command that died of a signal: `forkbox sandbox` dies of it too, after its clean-up, as
  // `timeout` does (a shell stops its loop on it; an exit of 143 says the command handled it).
  RunResult r = Shell("kill -TERM $$");
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.Describe();
  EXPECT_TRUE(WIFSIGNALED(r.wait_status) && WTERMSIG(r.wait_status) == SIGTERM)
      << "forkbox dies of its command's signal\n"
      << r.Describe();
  r = Shell("exit 143");
  EXPECT_TRUE(WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 143)
      << "control: a command that exits 143 did not die of SIGTERM\n"
      << r.Describe();
}

TEST_P(SandboxWorks, StdinPassesThrough) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  Fd read_end(fds[0]), write_end(fds[1]);
  ASSERT_EQ(write(write_end.get(), "piped data\n", 11), 11);
  write_end.Reset();
  RunResult r = Sandboxed({"/bin/cat"}, Stdin(read_end.get()));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "piped data\n") << r.Describe();
}

TEST_P(SandboxWorks, WritableOptInIsExact) {
  const std::string allowed = outside_ + "/dir";
  RunResult r = Probe({"create", allowed + "/ok"}, Flags({"--writable", allowed}));
  EXPECT_TRUE(Exists(allowed + "/ok")) << "--writable must allow writes there\n" << r.Describe();
  r = Probe({"write", victim_}, Flags({"--writable", allowed}));
  EXPECT_FALSE(VictimChanged()) << "--writable " << allowed << " must not open its siblings\n"
                                << VictimReport() << "\n"
                                << r.Describe();
}

// Layer 2 gives the command a private /tmp; a --readable path below the real one is bound back
// into it, read-only (before, the flag did nothing there: the file was not found). A program the
// command names inside it is bound onto itself there, also read-only.
TEST_P(SandboxWorks, ReadableUnderTmpIsVisibleAndReadOnly) {
  char dir_template[] = "/tmp/forkbox-readable-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr) << strerror(errno);
  const std::string dir = dir_template;
  WriteFile(dir + "/data", "readable " + token_ + "\n", 0644);
  std::filesystem::copy_file("/bin/cat", dir + "/show");
  ChownTree(dir, uid(), gid());
  RunResult r = Shell("'" + dir + "/show' '" + dir + "/data'; echo x > '" + dir + "/new'",
                      Flags({"--readable", dir}));
  const bool created = Exists(dir + "/new");
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(Contains(r.out, "readable " + token_)) << r.Describe();
  if (sandboxed()) {
    EXPECT_FALSE(created) << "--readable must not make it writable\n" << r.Describe();
  }
}

// The largest set of writable trees a policy may have (the workdir and 31 --writable): every one
// is mounted, the workdir too (with exactly 32, layer 2 used to mount none of them).
TEST_P(SandboxWorks, EveryWritableTreeOfTheLargestSetIsWritable) {
  std::vector<std::string> flags;
  for (int i = 0; i < 31; ++i) {
    const std::string w = outside_ + "/w" + std::to_string(i);
    ASSERT_TRUE(std::filesystem::create_directories(w));
    ChownTree(w, uid(), gid());
    flags.insert(flags.end(), {"--writable", w});
  }
  RunResult r =
      Shell("echo a > '" + work_ + "/a' && echo b > '" + outside_ + "/w30/b'", Flags(flags));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Exists(work_ + "/a")) << r.Describe();
  EXPECT_TRUE(Exists(outside_ + "/w30/b")) << r.Describe();
}

TEST_P(SandboxWorks, BadInvocationsFailClearly) {
  struct Case {
    std::vector<std::string> args;
    std::string mentions;
  };
  const Case cases[] = {
      {{"sandbox", "--workdir", root_ + "/missing", "--", "/bin/true"}, "missing"},
      {{"sandbox", "--workdir", work_, "--writable", root_ + "/absent", "--", "/bin/true"},
       "absent"},
      {{"sandbox", "--workdir", work_, "--", root_ + "/no-such-command"}, "no-such-command"},
      {{"sandbox", "--workdir", work_}, ""},
  };
  for (const Case& c : cases) {
    Command command;
    command.argv = Prefix();
    command.argv.push_back(ForkboxPath());
    command.argv.insert(command.argv.end(), c.args.begin(), c.args.end());
    command.env = Environment({});
    command.cwd = outside_;
    RunResult r = RunCommand(command);
    ASSERT_FALSE(r.timed_out) << r.Describe();
    EXPECT_TRUE(WIFEXITED(r.wait_status)) << "forkbox must not crash\n" << r.Describe();
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    EXPECT_FALSE(r.err.empty()) << "a bad invocation needs a message\n" << r.Describe();
    EXPECT_NE(r.err.find(c.mentions), std::string::npos) << r.Describe();
  }
}

// ---------------------------------------------------------------------------------------------
// --check and fail-closed.

std::string KernelRelease() {
  utsname u{};
  uname(&u);
  return u.release;
}

TEST_P(SandboxWorks, CheckNamesLayerLandlockSeccompAndKernel) {
  const RunResult& check = CheckOutput(GetParam());
  ASSERT_FALSE(check.timed_out);
  EXPECT_EQ(check.exit_code, 0) << "the default policy is enforceable here\n" << check.Describe();
  const std::string text = Lower(check.out + check.err);
  EXPECT_TRUE(Contains(text, "landlock")) << check.Describe();
  EXPECT_TRUE(Contains(text, "seccomp")) << check.Describe();
  EXPECT_TRUE(Contains(text, KernelRelease())) << check.Describe();
  EXPECT_TRUE(Contains(text, "fork")) << "--check must name what holds a fork bomb\n"
                                      << check.Describe();
  int layer = Layer();
  EXPECT_TRUE(layer == 1 || layer == 2) << check.Describe();
}

// What this mode's user can set up without the sandbox, as layer 2 needs it: kNone (no user
// namespace), kUserns (one, but no fresh /proc in a new PID namespace in it: a container's masked
// /proc, which the kernel will not reveal), kAll.
enum class Namespaces { kNone, kUserns, kAll };

bool WriteProcFile(const char* path, const std::string& text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

Namespaces NamespacesWorkFor(uid_t uid, gid_t gid) {
  pid_t pid = fork();
  if (pid == 0) {
    if (getuid() != uid && (setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)) {
      _exit(2);
    }
    if (unshare(CLONE_NEWUSER) != 0) _exit(3);
    // A change of uid made the process non-dumpable, and /proc/self root's.
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0 || !WriteProcFile("/proc/self/setgroups", "deny") ||
        !WriteProcFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !WriteProcFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1") ||
        unshare(CLONE_NEWNS | CLONE_NEWPID) != 0) {
      _exit(4);
    }
    pid_t init = fork();
    if (init == 0) {
      _exit(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0
                ? 0
                : 1);
    }
    int status = 0;
    _exit(init > 0 && waitpid(init, &status, 0) == init && WIFEXITED(status) &&
                  WEXITSTATUS(status) == 0
              ? 0
              : 4);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 2 || WEXITSTATUS(status) == 3) {
    return Namespaces::kNone;
  }
  return WEXITSTATUS(status) == 0 ? Namespaces::kAll : Namespaces::kUserns;
}

// Layer 2 wherever its namespaces can be set up; where a user namespace works but a fresh /proc
// does not (Docker without systempaths=unconfined), layer 1, and --check names why.
TEST_P(SandboxWorks, UsesLayer2WhereItsNamespacesCanBeSetUp) {
  if (no_userns()) GTEST_SKIP() << "user namespaces are refused in this mode";
  const Namespaces works = NamespacesWorkFor(uid(), gid());
  if (works == Namespaces::kNone) GTEST_SKIP() << "this kernel refuses user namespaces";
  const RunResult& check = CheckOutput(GetParam());
  if (works == Namespaces::kAll) {
    EXPECT_EQ(Layer(), 2) << check.Describe();
    return;
  }
  EXPECT_EQ(Layer(), 1) << check.Describe();
  EXPECT_TRUE(Contains(check.out, "mount proc /proc")) << check.Describe();
}

TEST_P(SandboxWorks, CheckReportsFallbackWhereUserNamespacesAreRefused) {
  if (!no_userns()) GTEST_SKIP() << "user namespaces are available in this mode";
  const RunResult& check = CheckOutput(GetParam());
  EXPECT_EQ(check.exit_code, 0) << "layer 1 alone is enforceable\n" << check.Describe();
  EXPECT_EQ(Layer(), 1) << check.Describe();
  const std::string text = Lower(check.out + check.err);
  EXPECT_TRUE(Contains(text, "namespace")) << "--check must name the missing namespaces\n"
                                           << check.Describe();
  // The layer-2 protections that are then missing, by name.
  EXPECT_TRUE(Contains(text, "hooks")) << check.Describe();
  EXPECT_TRUE(Contains(text, "chmod") || Contains(text, "metadata")) << check.Describe();
}

// `forkbox sandbox` probes nothing up front: its command is the layer-2 probe, and where user
// namespaces are refused it runs in layer 1. Either way the command runs, in the layer --check
// names: pid 2 of its own PID namespace (under its init) in layer 2, a pid of the caller's
// namespace in layer 1.
TEST_P(SandboxWorks, TheCommandRunsInTheLayerCheckReports) {
  RunResult r = Shell("echo $$");
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const int pid = std::atoi(r.out.c_str());
  ASSERT_GT(pid, 0) << r.Describe();
  if (Layer() == 2) {
    EXPECT_EQ(pid, 2) << r.Describe();
  } else {
    EXPECT_GT(pid, 2) << "layer 1 has no PID namespace\n" << r.Describe();
  }
}

TEST_P(SandboxWorks, FailsClosedWithoutLandlock) {
  if (!no_userns()) GTEST_SKIP() << "runs once per user, in the container modes";
  std::vector<std::string> prefix = {NoUsernsPath(), "--no-landlock"};
  if (as_user() && geteuid() == 0) {
    prefix.insert(prefix.end(), {RunAsPath(), std::to_string(uid()), std::to_string(gid())});
  }
  prefix.push_back(ForkboxPath());
  Command c;
  c.argv = prefix;
  c.argv.insert(c.argv.end(), {"sandbox", "--workdir", work_, "--", ProbePath(), "write", victim_});
  c.env = Environment({});
  c.cwd = outside_;
  RunResult r = RunCommand(c);
  ASSERT_FALSE(r.timed_out) << r.Describe();
  EXPECT_NE(r.exit_code, 0) << "must refuse without Landlock\n" << r.Describe();
  EXPECT_FALSE(Contains(r.out, "PROBE ")) << "the command must not run at all\n" << r.Describe();
  EXPECT_FALSE(VictimChanged()) << VictimReport();
  const std::string text = r.out + r.err;
  EXPECT_TRUE(Contains(Lower(text), "landlock")) << r.Describe();
  EXPECT_TRUE(Contains(text, KernelRelease())) << r.Describe();
  EXPECT_TRUE(Contains(text, "--sandbox=off")) << r.Describe();

  c.argv = prefix;
  c.argv.insert(c.argv.end(), {"sandbox", "--check"});
  RunResult check = RunCommand(c);
  EXPECT_NE(check.exit_code, 0) << "--check must fail without Landlock\n" << check.Describe();
  EXPECT_TRUE(Contains(Lower(check.out + check.err), "landlock")) << check.Describe();
}

INSTANTIATE_TEST_SUITE_P(Modes, SandboxWorks,
                         ::testing::Values(Mode::kRoot, Mode::kUser, Mode::kRootNoUserns,
                                           Mode::kUserNoUserns),
                         ModeName);

}  // namespace
}  // namespace forkbox::escape
