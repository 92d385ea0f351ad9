#include "tests/escape/fixture.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace forkbox::escape {
namespace {

constexpr char kUserName[] = "forkbox-escape";

struct Traits {
  const char* name;
  bool as_user;
  bool no_userns;
  bool sandboxed;
};

Traits TraitsOf(Mode mode) {
  switch (mode) {
    case Mode::kRoot:
      return {"Root", false, false, true};
    case Mode::kUser:
      return {"User", true, false, true};
    case Mode::kRootNoUserns:
      return {"RootNoUserns", false, true, true};
    case Mode::kUserNoUserns:
      return {"UserNoUserns", true, true, true};
    case Mode::kRootUnsandboxed:
      return {"RootControl", false, false, false};
    case Mode::kUserUnsandboxed:
      return {"UserControl", true, false, false};
  }
  return {"?", false, false, false};
}

// The unprivileged account: created when running as root (idempotent), else ourselves.
struct Account {
  bool ok = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string error;
};

std::string TempBase() {
  const char* env = getenv("FORKBOX_ESCAPE_TMPDIR");
  return env && *env ? env : FORKBOX_ESCAPE_TMP;
}

void MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    ADD_FAILURE() << "mkdir " << path << ": " << strerror(errno);
  }
  chmod(path.c_str(), mode);
}

const Account& UnprivilegedAccount() {
  static const Account account = [] {
    Account a;
    if (geteuid() != 0) {
      a = {true, getuid(), getgid(), ""};
      return a;
    }
    // CTest runs test processes in parallel: serialize the lookup-or-create across them.
    MakeDir(TempBase(), 0755);
    const std::string lock_path = TempBase() + "/.account.lock";
    Fd lock(open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!lock.valid() || flock(lock.get(), LOCK_EX) != 0) {
      a.error = "lock " + lock_path + ": " + strerror(errno);
      return a;
    }
    if (!getpwnam(kUserName)) {
      Command useradd;
      useradd.argv = {"/usr/sbin/useradd", "--system", "--no-create-home",  "--home-dir",
                      "/nonexistent",      "--shell",  "/usr/sbin/nologin", kUserName};
      useradd.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
      RunResult r = RunCommand(useradd);
      if (r.exit_code != 0) {
        a.error = "useradd " + std::string(kUserName) + " failed: " + r.Describe();
        return a;
      }
    }
    const passwd* pw = getpwnam(kUserName);
    if (!pw) {
      a.error = "no user " + std::string(kUserName);
      return a;
    }
    a = {true, pw->pw_uid, pw->pw_gid, ""};
    return a;
  }();
  return account;
}

// Every ancestor of `path` must be searchable by others, or the unprivileged user cannot reach
// the binaries and temp dirs. Returns the first one that is not.
std::string UnreachableAncestor(const std::string& path) {
  for (std::string dir = path; !dir.empty() && dir != "/"; dir = dir.substr(0, dir.rfind('/'))) {
    struct stat st {};
    if (stat(dir.c_str(), &st) == 0 && !(st.st_mode & S_IXOTH)) return dir;
  }
  return "";
}

const std::vector<std::string>& BaseEnvironment() {
  static const std::vector<std::string> env = [] {
    std::vector<std::string> e = {
        "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin", "LANG=C.UTF-8",
        "TERM=dumb"};
    for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
      if (const char* v = getenv(name)) e.push_back(std::string(name) + "=" + v);
    }
    return e;
  }();
  return env;
}

}  // namespace

std::string ModeName(const ::testing::TestParamInfo<Mode>& info) {
  return TraitsOf(info.param).name;
}

const std::vector<Mode>& AllModes() {
  static const std::vector<Mode> modes = {Mode::kRoot,
                                          Mode::kUser,
                                          Mode::kRootNoUserns,
                                          Mode::kUserNoUserns,
                                          Mode::kRootUnsandboxed,
                                          Mode::kUserUnsandboxed};
  return modes;
}

const char* ForkboxPath() {
  const char* env = getenv("FORKBOX_ESCAPE_FORKBOX");
  return env && *env ? env : FORKBOX_ESCAPE_FORKBOX;
}
const char* ProbePath() { return FORKBOX_ESCAPE_PROBE; }
const char* RunAsPath() { return FORKBOX_ESCAPE_RUN_AS; }
const char* NoUsernsPath() { return FORKBOX_ESCAPE_NO_USERNS; }

RunOptions Flags(std::vector<std::string> flags) {
  RunOptions options;
  options.flags = std::move(flags);
  return options;
}

RunOptions AtForkbox() {
  RunOptions options;
  options.at_forkbox = true;
  return options;
}

RunOptions Stdin(int fd) {
  RunOptions options;
  options.stdin_fd = fd;
  return options;
}

RunOptions KillSwitch(int seconds) {
  RunOptions options;
  options.kill_switch_seconds = seconds;
  return options;
}

bool EscapeTest::sandboxed() const { return TraitsOf(GetParam()).sandboxed; }
bool EscapeTest::as_user() const { return TraitsOf(GetParam()).as_user; }
bool EscapeTest::no_userns() const { return TraitsOf(GetParam()).no_userns; }

void EscapeTest::SetUp() {
  if (!as_user() && geteuid() != 0) GTEST_SKIP() << "root modes need the suite to run as root";
  if (as_user()) {
    const Account& account = UnprivilegedAccount();
    ASSERT_TRUE(account.ok) << account.error;
    uid_ = account.uid;
    gid_ = account.gid;
    for (const std::string& path :
         {TempBase(), std::string(ProbePath()), std::string(ForkboxPath())}) {
      const std::string blocked = UnreachableAncestor(path.substr(0, path.rfind('/')));
      ASSERT_TRUE(blocked.empty())
          << blocked << " is not searchable by others, so the unprivileged user cannot reach "
          << path << "; build elsewhere or set FORKBOX_ESCAPE_TMPDIR";
    }
  }
  if (sandboxed()) {
    ASSERT_EQ(access(ForkboxPath(), X_OK), 0)
        << ForkboxPath() << " is not built (" << strerror(errno) << ")";
  }
  token_ = RandomToken();
  secret_ = "escape-secret-" + token_;
  const std::string base = TempBase();
  MakeDir(base, 0755);
  root_ = base + "/" + token_;
  MakeDir(root_, 0755);
  work_ = root_ + "/work";
  outside_ = root_ + "/outside";
  home_ = outside_ + "/home";
  victim_ = outside_ + "/victim";
  MakeDir(work_, 0755);
  MakeDir(outside_, 0755);
  MakeDir(home_, 0755);
  MakeDir(outside_ + "/dir", 0755);
  WriteFile(victim_, "original\n");
  WriteFile(home_ + "/.bashrc", "# original\n");
  ChownTree(root_, uid_, gid_);
  char sock_dir[] = "/var/tmp/fbx-XXXXXX";
  ASSERT_NE(mkdtemp(sock_dir), nullptr) << "mkdtemp " << sock_dir << ": " << strerror(errno);
  sock_dir_ = sock_dir;
  chmod(sock_dir_.c_str(), 0755);
  ChownTree(sock_dir_, uid_, gid_);
  victim_before_ = Snapshot(victim_);
}

void EscapeTest::TearDown() {
  if (token_.empty()) return;
  KillProcessesWithMarker(token_);
  for (const char* dir : {"/tmp", "/var/tmp", "/dev/shm"}) {
    std::string path = std::string(dir) + "/forkbox-escape-" + token_;
    if (Exists(path)) RemoveTree(path);
  }
  if (!root_.empty()) RemoveTree(root_);
  if (!sock_dir_.empty()) RemoveTree(sock_dir_);
}

std::vector<std::string> EscapeTest::Prefix() const {
  std::vector<std::string> prefix;
  if (no_userns()) prefix.push_back(NoUsernsPath());
  if (as_user() && geteuid() == 0) {
    prefix.insert(prefix.end(), {RunAsPath(), std::to_string(uid_), std::to_string(gid_)});
  }
  return prefix;
}

std::vector<std::string> EscapeTest::Environment(const RunOptions& options) const {
  std::vector<std::string> env = BaseEnvironment();
  env.push_back("HOME=" + home_);
  env.push_back(std::string("USER=") + (as_user() ? kUserName : "root"));
  env.push_back("ANTHROPIC_API_KEY=sk-ant-" + secret_);
  env.push_back("OPENAI_API_KEY=sk-" + secret_);
  env.push_back("FOO_TOKEN=tok-" + secret_);
  env.push_back("FOO_SECRET=sec-" + secret_);
  env.insert(env.end(), options.env.begin(), options.env.end());
  return env;
}

RunResult EscapeTest::Sandboxed(std::vector<std::string> cmd, const RunOptions& options) {
  Command c;
  c.argv = options.outer;
  const std::vector<std::string> prefix = Prefix();
  c.argv.insert(c.argv.end(), prefix.begin(), prefix.end());
  c.env = Environment(options);
  c.stdin_fd = options.stdin_fd;
  c.kill_switch_seconds = options.kill_switch_seconds;
  if (sandboxed() || options.at_forkbox) {
    c.argv.insert(c.argv.end(), {ForkboxPath(), "sandbox", "--workdir", work_});
    if (!sandboxed()) c.argv.push_back("--sandbox=off");
    c.argv.insert(c.argv.end(), options.flags.begin(), options.flags.end());
    c.argv.push_back("--");
    c.cwd = outside_;
  } else {
    c.cwd = work_;
  }
  c.argv.insert(c.argv.end(), cmd.begin(), cmd.end());
  return RunCommand(c);
}

RunResult EscapeTest::Probe(std::vector<std::string> args, const RunOptions& options) {
  args.insert(args.begin(), ProbePath());
  return Sandboxed(std::move(args), options);
}

RunResult EscapeTest::Shell(const std::string& script, const RunOptions& options) {
  return Sandboxed({"/bin/sh", "-c", script}, options);
}

void EscapeTest::Verdict(const RunResult& r, bool escaped, Control control, const std::string& what,
                         int sandboxed_exit) {
  ASSERT_FALSE(r.timed_out) << what << "\n" << r.Describe();
  ASSERT_NE(r.out.find("PROBE "), std::string::npos) << what << ": the probe never ran\n"
                                                     << r.Describe();
  if (sandboxed()) {
    EXPECT_FALSE(escaped) << "ESCAPE: " << what << "\n" << r.Describe();
    EXPECT_EQ(r.exit_code, sandboxed_exit)
        << what << ": the probe did not end as a refused attack must\n"
        << r.Describe();
    return;
  }
  switch (control) {
    case Control::kNone:
      GTEST_SKIP() << "no meaningful unsandboxed control for: " << what;
    case Control::kRootOnly:
      if (as_user()) GTEST_SKIP() << "control needs root: " << what;
      break;
    case Control::kIfPossible:
      if (!escaped) GTEST_SKIP() << "not possible here even unsandboxed: " << what << "\n" << r.out;
      break;
    case Control::kAlways:
      break;
  }
  EXPECT_TRUE(escaped) << "CONTROL: without the sandbox this probe must escape, or it proves "
                          "nothing: "
                       << what << "\n"
                       << r.Describe();
}

std::string EscapeTest::VictimReport() const {
  return "victim before: " + victim_before_.Describe() +
         "\nvictim after:  " + Snapshot(victim_).Describe();
}

const RunResult& CheckOutput(Mode mode) {
  static std::map<Mode, RunResult> cache;
  auto it = cache.find(mode);
  if (it != cache.end()) return it->second;
  const Traits traits = TraitsOf(mode);
  Command c;
  if (traits.no_userns) c.argv.push_back(NoUsernsPath());
  if (traits.as_user && geteuid() == 0) {
    const Account& account = UnprivilegedAccount();
    c.argv.insert(c.argv.end(),
                  {RunAsPath(), std::to_string(account.uid), std::to_string(account.gid)});
  }
  c.argv.insert(c.argv.end(), {ForkboxPath(), "sandbox", "--check"});
  c.env = BaseEnvironment();
  c.env.push_back("HOME=/");
  c.cwd = "/";
  return cache[mode] = RunCommand(c);
}

int EscapeTest::Layer() {
  const RunResult& check = CheckOutput(GetParam());
  // The first "layer N" in the report (no std::regex: it trips GCC 12's -Wmaybe-uninitialized
  // under the sanitizers).
  const std::string text = check.out + check.err;
  for (size_t at = text.find("layer "); at != std::string::npos; at = text.find("layer ", at + 1)) {
    char digit = at + 6 < text.size() ? text[at + 6] : 0;
    if (digit == '1' || digit == '2') return digit - '0';
  }
  ADD_FAILURE() << "`forkbox sandbox --check` names no layer\n" << check.Describe();
  return 0;
}

bool EscapeTest::Layer1Gap() { return sandboxed() && Layer() < 2; }

}  // namespace forkbox::escape
