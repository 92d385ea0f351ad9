// Issue 13: the read scope (credential stores, also ones created after the start), a workdir that
// would cover them, git's trust surface checked by running real git OUTSIDE the sandbox
// afterwards, unix sockets of local daemons with --allow-net, and the real work that must run
// (git operations, every multiprocessing start method). Every attack in every mode, with its
// unsandboxed control.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "tests/escape/fixture.h"

namespace forkbox::escape {
namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
bool ProbeSaysEscaped(const RunResult& r) { return Contains(r.out, "RESULT escaped"); }

// Opens one of a test's FIFOs in the tool-writable workdir: never through a link the command put
// there (O_NOFOLLOW), and nothing but a FIFO (a regular file or a hard link in its place would
// take the bytes written to it).
Fd OpenFifo(const std::string& path, int flags) {
  Fd fd(open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISFIFO(st.st_mode)) return Fd();
  return fd;
}

class ScopeTest : public EscapeTest {
 protected:
  // Runs `cd <workdir> && <tail>` as the mode's command, once `outside` ran after the command
  // started (after every rule and mount was made): a FIFO handshake, no sleeps.
  RunResult AfterStart(const std::string& tail, const std::function<void()>& outside,
                       const RunOptions& options = {}) {
    const std::string started = work_ + "/started", go = work_ + "/go";
    EXPECT_EQ(mkfifo(started.c_str(), 0666), 0) << strerror(errno);
    EXPECT_EQ(mkfifo(go.c_str(), 0666), 0) << strerror(errno);
    ChownTree(work_, uid(), gid());
    std::thread helper([&] {
      Fd in = OpenFifo(started, O_RDONLY);
      char c;
      if (!in.valid() || read(in.get(), &c, 1) != 1 || c != 's') return;
      outside();
      Fd out = OpenFifo(go, O_WRONLY);
      if (out.valid()) (void)!write(out.get(), "g\n", 2);
    });
    RunResult r =
        Shell("cd '" + work_ + "' && echo s > started && read x < go && " + tail, options);
    // A command that never wrote `started`, or never read `go`, must not leave the helper blocked
    // in its open: an O_RDWR open never blocks, and the helper takes an 'x' for no start.
    Fd unblock_started = OpenFifo(started, O_RDWR | O_NONBLOCK);
    Fd unblock_go = OpenFifo(go, O_RDWR | O_NONBLOCK);
    if (unblock_started.valid()) (void)!write(unblock_started.get(), "x", 1);
    helper.join();
    return r;
  }
  // A secret file below $HOME, owned by the mode's user.
  void PlantSecret(const std::string& rel) {
    const std::string path = home_ + "/" + rel;
    const std::string dir = path.substr(0, path.rfind('/'));
    ASSERT_EQ(system(("mkdir -p '" + dir + "'").c_str()), 0);
    WriteFile(path, "SECRET " + secret_ + "\n", 0600);
    ChownTree(home_, uid(), gid());
  }
  void ExpectSecretUnreadable(const std::string& rel) {
    ASSERT_NO_FATAL_FAILURE(PlantSecret(rel));
    RunResult r = Probe({"read_secret", home_ + "/" + rel, secret_});
    Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "read ~/" + rel);
  }
  // Plants a secret in each of `stores` (below $HOME) and greps them all in one command: none is
  // read sandboxed, every one in the control.
  void ExpectStoresUnreadable(const std::vector<std::string>& stores, const RunOptions& options,
                              const std::string& what) {
    for (const std::string& rel : stores) ASSERT_NO_FATAL_FAILURE(PlantSecret(rel));
    ExpectNoneRead(Shell(GrepStores(stores), options), stores.size(), what);
  }
  // A script that greps each of `stores` (below $HOME) for the secret: "READ <store>" per read.
  std::string GrepStores(const std::vector<std::string>& stores) const {
    std::string script = "echo PROBE read-stores; ";
    for (const std::string& rel : stores) {
      script += "grep -qs " + secret_ + " '" + home_ + "/" + rel + "' && echo 'READ " + rel + "'; ";
    }
    return script + "true";
  }
  // GrepStores' verdict: no store read sandboxed, all `stores` of them in the control.
  void ExpectNoneRead(const RunResult& r, size_t stores, const std::string& what) {
    size_t read = 0;
    for (size_t at = r.out.find("READ "); at != std::string::npos;
         at = r.out.find("READ ", at + 1)) {
      ++read;
    }
    if (!sandboxed()) {
      EXPECT_EQ(read, stores) << r.out;
    }
    Verdict(r, read > 0, Control::kAlways, what);
  }
  // Runs `git ARGS` in `dir` as the mode's user, outside any sandbox.
  RunResult GitOutside(const std::string& dir, std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-C", dir});
    return Outside("", args);
  }
  // Runs the shell `script` in `dir` as the mode's user, outside any sandbox, with git's
  // committer set and no editor.
  RunResult ShellOutside(const std::string& dir, const std::string& script) {
    return Outside(dir, {"/bin/sh", "-c", script});
  }
  // The names whose `mark` + name file a planted command made, each after a blank: "" for none.
  static std::string MarksLeft(const std::string& mark, std::initializer_list<const char*> names) {
    std::string ran;
    for (const char* name : names) {
      if (Exists(mark + name)) ran += std::string(" ") + name;
    }
    return ran;
  }
  RunResult Outside(const std::string& cwd, const std::vector<std::string>& argv) {
    Command c;
    if (as_user()) c.argv = {RunAsPath(), std::to_string(uid()), std::to_string(gid())};
    c.argv.insert(c.argv.end(), argv.begin(), argv.end());
    c.env = {"HOME=" + home_,        "PATH=/usr/bin:/bin",
             "GIT_AUTHOR_NAME=u",    "GIT_AUTHOR_EMAIL=u@example.invalid",
             "GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@example.invalid",
             "GIT_EDITOR=true"};
    c.cwd = cwd;
    return RunCommand(c);
  }
};

TEST_P(ScopeTest, ReadSshKey) { ExpectSecretUnreadable(".ssh/id_x"); }
TEST_P(ScopeTest, ReadAwsCredentials) { ExpectSecretUnreadable(".aws/credentials"); }
TEST_P(ScopeTest, ReadNetrc) { ExpectSecretUnreadable(".netrc"); }
TEST_P(ScopeTest, ReadGhToken) { ExpectSecretUnreadable(".config/gh/hosts.yml"); }

// forkbox's own prompt history and sessions where $XDG_STATE_HOME puts them (outside the home's
// .local/state): the history holds what the user typed, the sessions every tool output of every
// project. The control reads both.
TEST_P(ScopeTest, ForkboxsOwnStateUnderXdgStateHomeIsUnreadable) {
  for (const char* rel : {"xdg/forkbox/history", "xdg/forkbox/sessions/s.jsonl"}) {
    ASSERT_NO_FATAL_FAILURE(PlantSecret(rel));
  }
  RunOptions options;
  options.env = {"XDG_STATE_HOME=" + home_ + "/xdg"};
  RunResult r = Shell("echo PROBE read-state; cat '" + home_ + "/xdg/forkbox/history' '" + home_ +
                          "/xdg/forkbox/sessions/s.jsonl'; true",
                      options);
  size_t read = 0;
  for (size_t at = r.out.find(secret_); at != std::string::npos; at = r.out.find(secret_, at + 1)) {
    ++read;
  }
  if (!sandboxed()) {
    EXPECT_EQ(read, 2u) << r.out;
  }
  Verdict(r, read > 0, Control::kAlways, "read forkbox's history or sessions under XDG_STATE_HOME");
}

// The stores the XDG variables move out of ~/.config and ~/.local/share, and podman's auth file
// in $XDG_RUNTIME_DIR: before, the table's paths below $HOME alone were hidden, so gh's token under
// $XDG_CONFIG_HOME was read. The control reads every one.
TEST_P(ScopeTest, StoresTheXdgVariablesMoveAreUnreadable) {
  const std::vector<std::string> stores = {"xdgc/gh/hosts.yml",
                                           "xdgc/git/credentials",
                                           "xdgc/glab-cli/config.yml",
                                           "xdgc/pip/pip.conf",
                                           "xdgd/keyrings/login.keyring",
                                           "xdgd/zsh/history",
                                           "xdgd/com.vercel.cli/auth.json",
                                           "xdgr/containers/auth.json"};
  RunOptions options;
  options.env = {"XDG_CONFIG_HOME=" + home_ + "/xdgc", "XDG_DATA_HOME=" + home_ + "/xdgd",
                 "XDG_RUNTIME_DIR=" + home_ + "/xdgr"};
  ExpectStoresUnreadable(stores, options, "read a store the XDG variables moved");
}

// Every store the README lists, below $HOME (a file in each directory store).
std::vector<std::string> ListedStores() {
  return {".ssh/id_ed25519",
          ".gnupg/private-keys-v1.d/k.key",
          ".aws/credentials",
          ".azure/msal_token_cache.json",
          ".config/gcloud/credentials.db",
          ".kube/config",
          ".oci/config",
          ".docker/config.json",
          ".dockercfg",
          ".config/containers/auth.json",
          ".netrc",
          ".git-credentials",
          ".config/git/credentials",
          ".config/gh/hosts.yml",
          ".config/hub",
          ".config/glab-cli/config.yml",
          ".subversion/auth/svn.simple/0a1b",
          ".npmrc",
          ".pypirc",
          ".cargo/credentials",
          ".cargo/credentials.toml",
          ".composer/auth.json",
          ".config/composer/auth.json",
          ".yarnrc.yml",
          ".bundle/config",
          ".config/pip/pip.conf",
          ".pip/pip.conf",
          ".m2/settings-security.xml",
          ".claude/.credentials.json",
          ".codex/auth.json",
          ".gemini/oauth_creds.json",
          ".config/github-copilot/apps.json",
          ".config/io.datasette.llm/keys.json",
          ".gem/credentials",
          ".config/ngrok/ngrok.yml",
          ".fly/config.yml",
          ".ollama/id_ed25519",
          ".config/configstore/firebase-tools.json",
          ".env",
          ".pgpass",
          ".my.cnf",
          ".vault-token",
          ".terraform.d/credentials.tfrc.json",
          ".s3cfg",
          ".boto",
          ".config/rclone/rclone.conf",
          ".config/doctl/config.yaml",
          ".huggingface/token",
          ".password-store/site.gpg",
          ".local/share/keyrings/login.keyring",
          ".pulumi/credentials.json",
          ".databrickscfg",
          ".kaggle/kaggle.json",
          ".config/kaggle/kaggle.json",
          ".config/hcloud/cli.toml",
          ".config/op/config",
          ".op/config",
          ".wrangler/config/default.toml",
          ".config/.wrangler/config/default.toml",
          ".config/netlify/config.json",
          ".netlify/config.json",
          ".vercel/auth.json",
          ".local/share/com.vercel.cli/auth.json",
          ".tsh/keys/proxy/user",
          ".mozilla/firefox/p/logins.json",
          ".thunderbird/p/key4.db",
          ".config/google-chrome/Default/Cookies",
          ".config/chromium/Default/Cookies",
          ".config/BraveSoftware/Default/Cookies",
          ".bash_history",
          ".zsh_history",
          ".zhistory",
          ".histfile",
          ".local/share/zsh/history",
          ".python_history",
          ".psql_history",
          ".mysql_history",
          ".local/share/fish/fish_history",
          ".node_repl_history",
          ".sqlite_history",
          ".rediscli_history",
          ".irb_history",
          ".viminfo",
          ".local/state/forkbox/history",
          ".local/state/forkbox/sessions/s.jsonl"};
}

// Every listed store planted: none is readable, and the control reads every one, so a store
// dropped from the table fails here.
TEST_P(ScopeTest, EveryListedStoreIsUnreadable) {
  ExpectStoresUnreadable(ListedStores(), {}, "read a listed credential store");
}

// Every listed store created while the command runs, after every rule and mount was made (the
// FIFO handshake of ReadCredentialCreatedAfterStart), the ones below ~/.config, ~/.local/share and
// ~/.local/state in directories that existed at the start: no mount of layer 2 covers them, only
// the read scope. None is readable; the control reads every one.
TEST_P(ScopeTest, EveryListedStoreCreatedAfterTheStartIsUnreadable) {
  for (const char* dir : {".config", ".local/share", ".local/state"}) {
    ASSERT_EQ(system(("mkdir -p '" + home_ + "/" + dir + "'").c_str()), 0);
  }
  ChownTree(home_, uid(), gid());
  const std::vector<std::string> stores = ListedStores();
  RunResult r = AfterStart(GrepStores(stores), [&] {
    for (const std::string& rel : stores) PlantSecret(rel);
  });
  ExpectNoneRead(r, stores.size(), "read a listed store created after the start");
}

// A store kept elsewhere and linked in (a dotfiles manager): denied where it really is. The
// stores are canonicalised with a fast path that must leave symlinks to weakly_canonical.
TEST_P(ScopeTest, ReadSymlinkedStoreAtItsTarget) {
  ASSERT_NO_FATAL_FAILURE(PlantSecret("dotfiles/aws/credentials"));
  ASSERT_EQ(symlink((home_ + "/dotfiles/aws").c_str(), (home_ + "/.aws").c_str()), 0)
      << strerror(errno);
  ChownTree(home_, uid(), gid());
  RunResult r = Probe({"read_secret", home_ + "/dotfiles/aws/credentials", secret_});
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "read the target of a symlinked ~/.aws");
}

// The same with a symlinked directory above the store (~/.config linked to dotfiles/config).
TEST_P(ScopeTest, ReadStoreBelowSymlinkedDirAtItsTarget) {
  ASSERT_NO_FATAL_FAILURE(PlantSecret("dotfiles/config/gh/hosts.yml"));
  ASSERT_EQ(symlink((home_ + "/dotfiles/config").c_str(), (home_ + "/.config").c_str()), 0)
      << strerror(errno);
  ChownTree(home_, uid(), gid());
  RunResult r = Probe({"read_secret", home_ + "/dotfiles/config/gh/hosts.yml", secret_});
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways,
          "read ~/.config/gh/hosts.yml where the ~/.config symlink leads");
}

// The store appears while the command runs (after every rule and mount was made): the command
// signals through a FIFO in the workdir, the test creates ~/.aws/credentials, then lets it read.
TEST_P(ScopeTest, ReadCredentialCreatedAfterStart) {
  RunResult r = AfterStart(std::string("exec ") + ProbePath() + " read_secret '" + home_ +
                               "/.aws/credentials' " + secret_,
                           [&] { PlantSecret(".aws/credentials"); });
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways,
          "read a credential file created after the start");
}

TEST_P(ScopeTest, ReadEtcShadowAsRoot) {
  RunResult r = Probe({"read_secret", "/etc/shadow", "root:"});
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "read /etc/shadow");
}

// The host files CandidatePaths (sandbox/env.cc) hides as root by name; it adds every
// /etc/ssh/*_key it finds, which ASshHostKeyIsUnreadableAsRoot plants.
constexpr const char* kRootHostSecrets[] = {"/etc/shadow", "/etc/shadow-", "/etc/gshadow",
                                            "/etc/gshadow-"};

// What a read of `path` must show to count as one: its first line up to the first ':' (an
// account or group name), so that no password hash is put on a command line.
std::string MarkerOf(const std::string& path) {
  std::string line = ReadFile(path);
  line.resize(std::min(line.find('\n'), line.size()));
  if (line.find(':') != std::string::npos) line.resize(line.find(':') + 1);
  return line;
}

// As root, each shadow file and backup this host has (and each ssh host key) is unreadable in
// each layer; the root control reads every one. A file the host lacks is named and skipped.
TEST_P(ScopeTest, EveryHostSecretIsUnreadableAsRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "the suite must be root to know what the files hold";
  if (!sandboxed() && as_user()) GTEST_SKIP() << "control needs root: the files are root's";
  std::vector<std::string> files;
  for (const char* file : kRootHostSecrets) {
    if (Exists(file)) {
      files.push_back(file);
    } else {
      std::printf("%s is not on this host: not probed\n", file);
    }
  }
  ASSERT_FALSE(files.empty()) << "none of /etc/shadow, /etc/shadow-, /etc/gshadow, /etc/gshadow-";
  const size_t shadow_files = files.size();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/etc/ssh", ec)) {
    if (entry.path().filename().string().ends_with("_key")) files.push_back(entry.path().string());
  }
  if (files.size() == shadow_files) {
    std::printf(
        "/etc/ssh holds no *_key here: no host key probed (ASshHostKeyIsUnreadableAsRoot "
        "plants one)\n");
  }
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const std::string marker = MarkerOf(file);
    ASSERT_FALSE(marker.empty()) << file << " is empty: nothing to recognise a read by";
    RunResult r = Probe({"read_secret", file, marker});
    Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "read " + file);
  }
}

// An ssh host key, planted in a private mount namespace forkbox then starts in (a tmpfs over
// /etc/ssh: the host's own is left alone, and may hold none): unreadable as root in each layer;
// the root control reads it.
TEST_P(ScopeTest, ASshHostKeyIsUnreadableAsRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "planting in /etc/ssh needs root";
  if (!sandboxed() && as_user()) GTEST_SKIP() << "control needs root: the key is root's, 0600";
  const std::string key = "/etc/ssh/ssh_host_fbx" + token_ + "_key";
  RunOptions options;
  options.outer = {"/usr/bin/unshare",
                   "--mount",
                   "--propagation",
                   "private",
                   "/bin/sh",
                   "-c",
                   "mount -t tmpfs -o mode=0755 fbx /etc/ssh && umask 077 && echo 'PRIVATE KEY " +
                       secret_ + "' > " + key + " && exec \"$@\"",
                   "plant"};
  RunResult r = Probe({"read_secret", key, secret_}, options);
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "read an ssh host key");
  EXPECT_FALSE(Exists(key)) << "planted in the host's /etc/ssh";
}

// The read scope is an allow-list carved around the stores (docs/architecture.md): /, $HOME and
// the other directories above a store (~/.config, ~/.local/share, there at the start) have no
// rule of their own, so none can be listed (EACCES). The control lists each.
TEST_P(ScopeTest, RootHomeAndTheDirectoriesAboveAStoreCannotBeListed) {
  for (const char* dir : {".config", ".local/share"}) {
    ASSERT_EQ(system(("mkdir -p '" + home_ + "/" + dir + "'").c_str()), 0);
  }
  ChownTree(home_, uid(), gid());
  for (const std::string& dir :
       {std::string("/"), home_, home_ + "/.config", home_ + "/.local/share"}) {
    SCOPED_TRACE(dir);
    RunResult r = Probe({"list_dir", dir});
    Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "list " + dir);
    if (sandboxed()) {
      EXPECT_TRUE(Contains(r.out, "(errno 13)")) << "EACCES\n" << r.Describe();
    }
  }
}

// A plain file (no store's name) made directly in $HOME while the command runs (the FIFO
// handshake of ReadCredentialCreatedAfterStart) is unreadable: $HOME's entries at the start got
// their rules, a new one none. ~/.bashrc, there at the start, stays readable. The control reads
// both.
TEST_P(ScopeTest, AFileCreatedInHomeAfterTheStartIsUnreadable) {
  RunResult r = AfterStart("cat '" + home_ + "/.bashrc' && exec " + ProbePath() + " read_secret '" +
                               home_ + "/notes.txt' " + secret_,
                           [&] { PlantSecret("notes.txt"); });
  EXPECT_TRUE(Contains(r.out, "# original")) << "~/.bashrc, there at the start\n" << r.Describe();
  Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "read a file created in $HOME after the start");
  if (sandboxed()) {
    EXPECT_TRUE(Contains(r.out, "(errno 13)")) << "EACCES\n" << r.Describe();
  }
}

TEST_P(ScopeTest, ReadableOptsBackIn) {
  FORKBOX_SKIP_UNSANDBOXED("--readable is a sandbox flag");
  ASSERT_NO_FATAL_FAILURE(PlantSecret(".ssh/id_x"));
  RunResult r =
      Probe({"read_secret", home_ + "/.ssh/id_x", secret_}, Flags({"--readable", home_ + "/.ssh"}));
  EXPECT_TRUE(ProbeSaysEscaped(r)) << "--readable must opt the store back in\n" << r.Describe();
}

TEST_P(ScopeTest, BroadWorkdirRefused) {
  FORKBOX_SKIP_UNSANDBOXED("the refusal is forkbox's");
  // /dev and /usr/lib: a tool could write devices (/dev/kmsg, /dev/loop0 were writable) or the
  // programs everything else runs.
  for (const std::string& workdir :
       {home_, outside_, std::string("/"), std::string("/dev"), std::string("/usr/lib")}) {
    Command c;
    c.argv = Prefix();
    c.argv.insert(c.argv.end(),
                  {ForkboxPath(), "sandbox", "--workdir", workdir, "--", "/bin/true"});
    c.env = Environment({});
    RunResult r = RunCommand(c);
    EXPECT_EQ(r.exit_code, 2) << workdir << "\n" << r.Describe();
    EXPECT_TRUE(Contains(r.err, "--allow-broad-workdir")) << r.Describe();
    const bool system_tree = workdir == "/dev" || workdir == "/usr/lib";
    EXPECT_EQ(Contains(r.err, ", a system tree"), system_tree) << r.Describe();
    // Accepting these would scan whole system trees for repositories.
    if (workdir == "/" || system_tree) continue;
    c.argv.insert(c.argv.end() - 2, "--allow-broad-workdir");
    r = RunCommand(c);
    EXPECT_EQ(r.exit_code, 0) << workdir << " with --allow-broad-workdir\n" << r.Describe();
  }
  // /dev/shm is a user's tmpfs, not a system tree.
  char shm[] = "/dev/shm/forkbox-scope-XXXXXX";
  ASSERT_NE(mkdtemp(shm), nullptr);
  ChownTree(shm, uid(), gid());
  Command c;
  c.argv = Prefix();
  c.argv.insert(c.argv.end(), {ForkboxPath(), "sandbox", "--workdir", shm, "--", "/bin/true"});
  c.env = Environment({});
  RunResult r = RunCommand(c);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  std::filesystem::remove_all(shm);
}

// A --writable tree gets every right in layer 1, reading included, which the read scope's carving
// cannot take back below it: `--writable ~/.local` (for `pip --user`) let a tool read
// ~/.local/share/keyrings and every saved session, `--writable ~` ~/.ssh. Such a tree is now
// refused as a workdir would be (exit 2, naming the store); with --allow-broad-workdir layer 2
// still hides the store. The control reads it.
TEST_P(ScopeTest, AWritableTreeOverAStoreIsRefused) {
  ASSERT_NO_FATAL_FAILURE(PlantSecret(".local/share/keyrings/login.keyring"));
  ASSERT_NO_FATAL_FAILURE(PlantSecret(".ssh/id_x"));
  for (const std::string& tree : {home_ + "/.local", home_}) {
    SCOPED_TRACE("--writable " + tree);
    const std::string secret = home_ + (tree == home_ ? "/.ssh/id_x"
                                                      : "/.local/share/keyrings/"
                                                        "login.keyring");
    RunResult r = Probe({"read_secret", secret, secret_}, Flags({"--writable", tree}));
    if (!sandboxed()) {
      Verdict(r, ProbeSaysEscaped(r), Control::kAlways, "read a store in a --writable tree");
      continue;
    }
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_TRUE(Contains(r.err, "--writable " + tree + ": refused")) << r.Describe();
    EXPECT_TRUE(Contains(r.err, "--allow-broad-workdir")) << r.Describe();
    EXPECT_FALSE(ProbeSaysEscaped(r)) << r.Describe();
  }
  // A tree beside the stores stays a plain opt-in.
  const std::string bin = home_ + "/.local/bin";
  ASSERT_EQ(system(("mkdir -p '" + bin + "'").c_str()), 0);
  ChownTree(home_, uid(), gid());
  RunResult r = Probe({"create", bin + "/tool"}, Flags({"--writable", bin}));
  EXPECT_TRUE(ProbeSaysEscaped(r)) << "the write it opts in\n" << r.Describe();
  EXPECT_TRUE(Exists(bin + "/tool")) << r.Describe();
}

// A tool plants everything git trusts (hooks, fsmonitor in config, config.worktree, a commondir
// redirect, a nested repository's hook, a new nested repository, a `.git` file); then the user
// runs git status, commit and checkout outside. Nothing may run.
// The project's agent config as the next session and `claude` read it (.forkbox/config.toml and
// agents/, .claude/settings.json's hooks and agents/): whatever a command changes or plants there
// is undone once it ends. The control keeps all of it.
TEST_P(ScopeTest, ProjectAgentConfigIsPutBack) {
  const std::string config = work_ + "/.forkbox/config.toml";
  ASSERT_EQ(mkdir((work_ + "/.forkbox").c_str(), 0755), 0);
  WriteFile(config, "max-turns = 5\n");
  ChownTree(work_, uid(), gid());
  RunResult r =
      Shell("cd '" + work_ +
            "'; echo PROBE plant-agent-config; echo 'model = \"x\"' >> .forkbox/config.toml; "
            "mkdir -p .forkbox/agents .claude/agents; echo evil > .forkbox/agents/explore.md; "
            "echo '{\"hooks\":{}}' > .claude/settings.json; echo evil > .claude/agents/a.md; true");
  std::string planted;
  if (ReadFile(config) != "max-turns = 5\n") planted += " config.toml";
  for (const char* rel : {"/.forkbox/agents", "/.claude"}) {
    if (Exists(work_ + rel)) planted += rel;
  }
  Verdict(r, !planted.empty(), Control::kAlways, "plant the project's agent config:" + planted);
}

// The same below the workdir: a session started in a subdirectory (`cd sub; forkbox`) trusts its
// .forkbox, and a `claude` there its .claude. A tool changes an existing sub/.forkbox and plants
// new ones down to the deepest level the guard looks (5 below the workdir); all are undone. The
// control keeps all of it.
TEST_P(ScopeTest, NestedProjectAgentConfigIsPutBack) {
  const std::string old_config = work_ + "/old/.forkbox/config.toml";
  ASSERT_TRUE(std::filesystem::create_directories(work_ + "/old/.forkbox"));
  WriteFile(old_config, "max-turns = 5\n");
  ChownTree(work_, uid(), gid());
  RunResult r = Shell(
      "cd '" + work_ +
      "'; echo PROBE plant-nested-agent-config; echo 'model = \"x\"' >> old/.forkbox/config.toml; "
      "mkdir -p sub/.forkbox/agents sub/.claude a/b/c/d/e/.forkbox; "
      "echo evil > sub/.forkbox/agents/explore.md; echo '{\"hooks\":{}}' > "
      "sub/.claude/settings.json; "
      "echo 'model = \"x\"' > a/b/c/d/e/.forkbox/config.toml; true");
  std::string planted;
  if (ReadFile(old_config) != "max-turns = 5\n") planted += " old/.forkbox/config.toml";
  for (const char* rel : {"/sub/.forkbox", "/sub/.claude/settings.json", "/a/b/c/d/e/.forkbox"}) {
    if (Exists(work_ + rel)) planted += rel;
  }
  Verdict(r, !planted.empty(), Control::kAlways, "plant agent config below the workdir:" + planted);
}

// An existing .claude holds Claude Code's state too: a tool keeps writing that, but what Claude
// Code trusts (settings.json's hooks, agents, commands) is put back, and a .claude swapped for
// another holds nothing planted. The control keeps the planted hooks.
TEST_P(ScopeTest, AnExistingClaudeFolderKeepsItsStateAndLosesWhatIsPlanted) {
  const std::string claude = work_ + "/.claude";
  ASSERT_EQ(mkdir(claude.c_str(), 0755), 0);
  WriteFile(claude + "/settings.json", "{}\n");
  ChownTree(work_, uid(), gid());
  RunResult r = Shell("cd '" + work_ +
                      "'; echo PROBE plant-claude; mkdir -p .claude/projects .claude/agents; "
                      "echo state > .claude/projects/t.jsonl; echo '{\"hooks\":1}' > "
                      ".claude/settings.json; echo evil > .claude/agents/a.md; "
                      "mv .claude .claude-old && mkdir .claude && echo '{\"hooks\":2}' > "
                      ".claude/settings.json; true");
  std::string planted;
  if (ReadFile(claude + "/settings.json").find("hooks") != std::string::npos) planted += " hooks";
  if (Exists(claude + "/agents/a.md")) planted += " agent";
  Verdict(r, !planted.empty(), Control::kAlways, "plant Claude Code's config:" + planted);
  if (sandboxed()) {
    const std::string kept = Exists(claude + "/projects") ? claude : work_ + "/.claude-old";
    EXPECT_EQ(ReadFile(kept + "/projects/t.jsonl"), "state\n") << "its own state stays writable";
  }
}

// Developer tools' project config, which they run from with the user's rights once the folder is
// trusted: VS Code's settings.json changed and a folderOpen task planted, mise's hooks in the
// workdir's mise.toml and a new .config/mise.toml, an opencode plugin below the workdir. All are
// undone; what those directories hold besides (launch.json, a new .config's nextest.toml) stays
// the tool's to write. The control keeps all of it.
TEST_P(ScopeTest, AToolsProjectConfigIsPutBack) {
  const std::string vscode = work_ + "/.vscode";
  ASSERT_EQ(mkdir(vscode.c_str(), 0755), 0);
  WriteFile(vscode + "/settings.json", "{}\n");
  WriteFile(vscode + "/launch.json", "{}\n");
  ChownTree(work_, uid(), gid());
  RunResult r = Shell(
      "cd '" + work_ +
      "'; echo PROBE plant-tool-config; echo '{\"x\":1}' > .vscode/settings.json; "
      "echo '{\"tasks\":[{\"runOptions\":{\"runOn\":\"folderOpen\"}}]}' > .vscode/tasks.json; "
      "echo state > .vscode/launch.json; echo '[hooks]' > mise.toml; "
      "mkdir -p .config sub/.opencode/plugins; echo '[hooks]' > .config/mise.toml; "
      "echo state > .config/nextest.toml; echo evil > sub/.opencode/plugins/p.ts; true");
  std::string planted;
  if (ReadFile(vscode + "/settings.json") != "{}\n") planted += " settings.json";
  for (const char* rel :
       {"/.vscode/tasks.json", "/mise.toml", "/.config/mise.toml", "/sub/.opencode/plugins/p.ts"}) {
    if (Exists(work_ + rel)) planted += rel;
  }
  Verdict(r, !planted.empty(), Control::kAlways, "plant a tool's project config:" + planted);
  if (sandboxed()) {
    EXPECT_EQ(ReadFile(vscode + "/launch.json"), "state\n") << "launch.json stays writable";
    EXPECT_EQ(ReadFile(work_ + "/.config/nextest.toml"), "state\n") << "so does a new .config";
  }
}

// A bare repository in the workdir is a git dir itself (`git -C docs` trusts its config and
// hooks): one that was there and one a tool creates keep no hook a tool plants. So do the git
// dirs git accepts that a strict check would miss: a HEAD of "ref:refs/..." without the blank
// (va), a HEAD that is a link (vb), objects and refs that are links (vc), and a HEAD with a
// commondir naming a directory of objects, refs, config and hooks but no HEAD (vd, whose hook
// is in evil/). A fetch into each from outside runs reference-transaction only in the control,
// and there in every one of them.
TEST_P(ScopeTest, BareRepositorySurfaceRunsNothingOutside) {
  const std::string src = work_ + "/src";
  ASSERT_EQ(mkdir(src.c_str(), 0755), 0);
  ChownTree(work_, uid(), gid());
  ASSERT_EQ(GitOutside(src, {"init", "-q"}).exit_code, 0);
  ASSERT_EQ(GitOutside(src, {"commit", "-q", "--allow-empty", "-m", "one"}).exit_code, 0);
  ASSERT_EQ(GitOutside(work_, {"init", "-q", "--bare", "existing"}).exit_code, 0);
  ChownTree(work_, uid(), gid());
  const std::string mark = outside_ + "/RAN-";
  WriteFile(work_ + "/hook.sh", "#!/bin/sh\ntouch " + mark + "$(basename \"$PWD\")\n", 0755);
  ChownTree(work_, uid(), gid());
  RunResult r =
      Shell("cd '" + work_ +
            "' && echo PROBE bare && git init -q --bare new; for b in existing new; do "
            "cp hook.sh $b/hooks/reference-transaction; done; "
            "plant() { mkdir -p $1/hooks && cp hook.sh $1/hooks/reference-transaction; }; "
            "mkdir -p va/objects va/refs && printf 'ref:refs/heads/main\\n' > va/HEAD && plant va; "
            "mkdir -p vb/objects vb/refs && ln -s refs/heads/main vb/HEAD && plant vb; "
            "mkdir -p vc/o vc/r && ln -s o vc/objects && ln -s r vc/refs && "
            "echo 'ref: refs/heads/main' > vc/HEAD && plant vc; "
            "mkdir -p evil/objects evil/refs vd && echo 'ref: refs/heads/main' > vd/HEAD && "
            "echo ../evil > vd/commondir && plant evil; exit 0");
  std::string ran;
  for (const char* bare : {"existing", "new", "va", "vb", "vc", "vd"}) {
    GitOutside(work_ + "/" + bare, {"fetch", "-q", src, "HEAD:refs/heads/t"});
    if (Exists(mark + bare)) ran += std::string(" ") + bare;
  }
  Verdict(r, !ran.empty(), Control::kAlways, "a hook in a bare repository ran outside:" + ran);
  if (!sandboxed()) {
    EXPECT_EQ(ran, " existing new va vb vc vd") << "the control, git's own view";
  }
}

// A hook planted in .git/hooks, which the command then makes unlistable (chmod 000: the guard,
// as the same user, could no longer see what is in it), or floods with a directory too deep to
// walk: the part of the surface it cannot compare entry by entry is put back whole. Before, the
// chmodded directory only got its mode back, and the hook ran at the next commit. Layer 2 binds
// hooks/ read-only; root lists any directory.
TEST_P(ScopeTest, AHookInAHooksDirectoryTheGuardCannotWalkRunsNothingOutside) {
  ASSERT_EQ(GitOutside(work_, {"init", "-q"}).exit_code, 0);
  ChownTree(work_, uid(), gid());
  const std::string mark = outside_ + "/RAN-";
  WriteFile(work_ + "/hook.sh", "#!/bin/sh\ntouch " + mark + "$(basename $0)\n", 0755);
  ChownTree(work_, uid(), gid());
  RunResult r = Shell("cd '" + work_ +
                      "' && echo PROBE unwalkable-hooks; cp hook.sh .git/hooks/pre-commit; "
                      "cp hook.sh .git/hooks/post-commit; mkdir -p .git/hooks/a/b/c/d/e/f/g/h/i/"
                      "j/k/l/m/n/o/p/q/r && chmod 000 .git/hooks; exit 0");
  ASSERT_EQ(chmod((work_ + "/.git/hooks").c_str(), 0755), 0);  // As the user would, to look.
  GitOutside(work_, {"commit", "-q", "--allow-empty", "-m", "x"});
  std::string ran;
  for (const char* hook : {"pre-commit", "post-commit"}) {
    if (Exists(mark + hook)) ran += std::string(" ") + hook;
  }
  Verdict(r, !ran.empty(), Control::kAlways, "a hook the guard could not see ran outside:" + ran);
}

// A command leaves a chain of processes whose bottom link forks a new one as fast as its top dies
// (at most 200 alive), each link planting .git/hooks/pre-commit whenever it is missing. The kill
// after the command takes the whole tree each round, not a level: before, in layer 1 such a chain
// outlived 10,000 rounds of killing direct children, the guard then put the surface back while it
// ran, and the hook came back for the user's next commit (a red-team find). Layer 2's PID
// namespace takes it down with its init. The control keeps the chain and the hook.
TEST_P(ScopeTest, AForkingChainIsKilledWholeBeforeTheSurfaceIsPutBack) {
  ASSERT_EQ(GitOutside(work_, {"init", "-q"}).exit_code, 0);
  ChownTree(work_, uid(), gid());
  RunResult r =
      Shell("cd '" + work_ + "' && exec " + std::string(ProbePath()) + " fork_chain " + token_);
  const size_t alive = ProcessesWithMarker(token_).size();
  const bool hook = Exists(work_ + "/.git/hooks/pre-commit");
  WriteFile(work_ + "/STOP", "");  // Every link exits once it sees it.
  for (int i = 0; i < 300 && !ProcessesWithMarker(token_).empty(); ++i) {
    usleep(100'000);  // Polls a condition; no timing is assumed.
  }
  KillProcessesWithMarker(token_);
  Verdict(r, alive > 0 || hook, Control::kAlways,
          "a forking chain outlived its command (" + std::to_string(alive) + " links" +
              (hook ? ", the hook planted" : "") + ")");
}

// A submodule's git dir is .git/modules/<name>, and a name may hold slashes: one six levels down
// (a/b/c/d/e/f), and one whose .git/modules entry is a link to a git dir deep in the tree (l),
// each planted with a post-checkout hook, .gitmodules and the gitlink. The user's `git submodule
// update --init` outside reuses both git dirs; a hook runs only in the control, in both.
TEST_P(ScopeTest, PlantedSubmoduleGitDirsRunNothingOutside) {
  const std::string lib = work_ + "/srcrepo";
  ASSERT_EQ(mkdir(lib.c_str(), 0755), 0);
  ChownTree(work_, uid(), gid());
  ASSERT_EQ(GitOutside(work_, {"init", "-q"}).exit_code, 0);
  ASSERT_EQ(GitOutside(work_, {"commit", "-q", "--allow-empty", "-m", "one"}).exit_code, 0);
  ASSERT_EQ(GitOutside(lib, {"init", "-q"}).exit_code, 0);
  ASSERT_EQ(GitOutside(lib, {"commit", "-q", "--allow-empty", "-m", "lib"}).exit_code, 0);
  const std::string mark = outside_ + "/RAN-";
  WriteFile(work_ + "/hook.sh", "#!/bin/sh\ntouch " + mark + "$1\n", 0755);
  ChownTree(work_, uid(), gid());
  RunResult r = Shell(
      "cd '" + work_ +
      "' && echo PROBE submodules && head=$(git -C srcrepo rev-parse HEAD) && "
      "module() { git clone -q --bare \"$PWD/srcrepo\" \"$2\" && git -C \"$2\" config core.bare "
      "false && printf '#!/bin/sh\\nexec %s/hook.sh %s\\n' \"$PWD\" \"$3\" > "
      "\"$2/hooks/post-checkout\" "
      "&& chmod 755 \"$2/hooks/post-checkout\" && printf '[submodule \"%s\"]\\n\\tpath = deps/%s\\n"
      "\\turl = ./srcrepo\\n' \"$1\" \"$3\" >> .gitmodules && git update-index --add --cacheinfo "
      "160000,$head,deps/$3; }; "
      "module a/b/c/d/e/f .git/modules/a/b/c/d/e/f deep && "
      "module l t1/t2/t3/t4/t5/t6/lg linked && ln -s ../../t1/t2/t3/t4/t5/t6/lg .git/modules/l; "
      "exit 0");
  GitOutside(work_, {"submodule", "-q", "update", "--init"});
  std::string ran = MarksLeft(mark, {"deep", "linked"});
  Verdict(r, !ran.empty(), Control::kAlways, "a planted submodule's hook ran outside:" + ran);
  if (!sandboxed()) {
    EXPECT_EQ(ran, " deep linked") << "the control, git's own view";
  }
}

// Two commits on `side` past the one that conflicts with `main` in f: `git rebase main side` and
// `git cherry-pick main..side` stop on the first and have the others still to do.
constexpr const char* kConflictingBranches =
    "git init -q -b main . && echo a > f && git add f && git commit -qm a && git checkout -qb "
    "side && echo b > f && git commit -qam b && echo c > g && git add g && git commit -qm c && "
    "echo d > h && git add h && git commit -qm d && git checkout -q main && echo x > f && git "
    "commit -qam x";

// An operation in progress that a tool left for the user's `--continue` to run a command (git
// 2.39): an exec line in a rebase's todo (the user's, stopped on a conflict, and one the tool
// started in a repository it made: new/), a strategy that is not git's own in rebase-merge/strategy
// and in a cherry-pick's sequencer/opts (`x/../evil`: git runs git-merge-x/../evil, the
// worktree's ./evil). Outside, the user resolves f and continues each. The rebase the tool
// started stays continuable: only what would run is dropped.
TEST_P(ScopeTest, AnOperationInProgressRunsNothingOutside) {
  const std::string mark = outside_ + "/RAN-";
  for (const char* dir : {"/repo", "/pick"}) ASSERT_EQ(mkdir((work_ + dir).c_str(), 0755), 0);
  ChownTree(work_, uid(), gid());
  ShellOutside(work_ + "/repo", std::string(kConflictingBranches) + "; git rebase main side");
  ShellOutside(work_ + "/pick", std::string(kConflictingBranches) + "; git cherry-pick main..side");
  ASSERT_TRUE(Exists(work_ + "/repo/.git/rebase-merge/git-rebase-todo"));
  ASSERT_TRUE(Exists(work_ + "/pick/.git/sequencer/todo"));
  const auto evil = [&mark](const std::string& name) {
    return "mkdir git-merge-x && printf '#!/bin/sh\\ntouch " + mark + name +
           "\\nexit 1\\n' > evil && chmod 755 evil";
  };
  RunResult r = Shell(
      "echo PROBE operations; export GIT_AUTHOR_NAME=u GIT_AUTHOR_EMAIL=u@x GIT_COMMITTER_NAME=u "
      "GIT_COMMITTER_EMAIL=u@x; cd '" +
      work_ + "/repo' && sed -i '1i exec touch " + mark +
      "exec' .git/rebase-merge/git-rebase-todo && echo x/../evil > .git/rebase-merge/strategy && " +
      evil("strategy") + " && cd ../pick && printf '[options]\\n\\tstrategy = x/../evil\\n' > " +
      ".git/sequencer/opts && " + evil("cherry") + " && mkdir ../new && cd ../new && { " +
      kConflictingBranches + "; git rebase main side; } >/dev/null 2>&1; echo 'x touch " + mark +
      "new' >> .git/rebase-merge/git-rebase-todo; exit 0");
  ShellOutside(work_ + "/repo", "echo b > f && git add f && git rebase --continue");
  ShellOutside(work_ + "/pick", "echo b > f && git add f && git cherry-pick --continue");
  const RunResult tools =
      ShellOutside(work_ + "/new", "echo b > f && git add f && git rebase --continue");
  EXPECT_EQ(tools.exit_code, 0) << "the rebase a tool started stays continuable\n"
                                << r.Describe() << tools.Describe();
  std::string ran = MarksLeft(mark, {"exec", "strategy", "cherry", "new"});
  Verdict(r, !ran.empty(), Control::kAlways, "a tool-left operation ran at --continue:" + ran);
  if (!sandboxed()) {
    EXPECT_EQ(ran, " exec strategy cherry new") << "the control, git's own view";
  }
}

// The repository of a worktree that is the workdir, given with --writable so that tools can commit
// (what the start-up warning suggests): only the workdir was walked, so in layer 1 a hook planted
// in the repository ran at the user's next commit, and in both layers an exec line added to the
// worktree's rebase todo (the repository's .git/worktrees/work/) ran at `git rebase --continue`
// and a `.claude/settings.json` made at its top stayed for claude started there (red team). The
// tool's `git add` in the worktree works in every mode, so the user's rebase goes on.
TEST_P(ScopeTest, AWritableRepositoryOfTheWorktreeRunsNothingOutside) {
  const std::string repo = root_ + "/repo";
  const std::string mark = outside_ + "/RAN-";
  ASSERT_EQ(mkdir(repo.c_str(), 0755), 0);
  ChownTree(root_, uid(), gid());
  ShellOutside(repo, std::string(kConflictingBranches) + " && git worktree add -q --detach " +
                         work_ + " main");
  ShellOutside(work_, "git rebase main side");
  ASSERT_TRUE(Exists(repo + "/.git/worktrees/work/rebase-merge/git-rebase-todo"));
  RunResult r = Shell(
      "echo PROBE writable-repo; cd '" + work_ +
          "' && todo=$(git rev-parse --git-path rebase-merge/git-rebase-todo) && sed -i '1i exec "
          "touch " +
          mark + "exec' \"$todo\"; printf '#!/bin/sh\\ntouch " + mark + "hook\\n' > '" + repo +
          "/.git/hooks/pre-commit'; chmod 755 '" + repo + "/.git/hooks/pre-commit'; mkdir -p '" +
          repo + "/.claude' && echo '{}' > '" + repo + "/.claude/settings.json'; cd '" + work_ +
          "' && echo b > f && git add f; exit 0",
      Flags({"--writable", repo}));
  const RunResult rebase = ShellOutside(work_, "git rebase --continue");
  EXPECT_EQ(rebase.exit_code, 0) << "the tool's git add stayed\n"
                                 << r.Describe() << rebase.Describe();
  ShellOutside(repo, "git commit -q --allow-empty -m outside");
  std::string ran = MarksLeft(mark, {"exec", "hook"});
  if (Exists(repo + "/.claude/settings.json")) ran += " claude";
  Verdict(r, !ran.empty(), Control::kAlways, "a plant in the --writable repository stayed:" + ran);
  if (!sandboxed()) {
    EXPECT_EQ(ran, " exec hook claude") << "the control, git's own view";
  }
}

// The worktree's admin dir (REPO/.git/worktrees/work) renamed away by a tool and replaced by a link
// to a copy whose commondir names a planted common dir with a pre-commit hook: the user's next
// commit in the worktree ran it, in every mode (red team). Layer 2 now pins the admin dir (the
// rename fails), and the guard removes a link in its place.
TEST_P(ScopeTest, AWorktreesAdminDirSwappedForALinkRunsNothingOutside) {
  const std::string repo = root_ + "/repo";
  const std::string mark = outside_ + "/RAN-admin-link";
  ASSERT_EQ(mkdir(repo.c_str(), 0755), 0);
  ChownTree(root_, uid(), gid());
  ShellOutside(repo,
               "git init -q && git commit -q --allow-empty -m a && git worktree add -q "
               "--detach " +
                   work_);
  ASSERT_TRUE(Exists(repo + "/.git/worktrees/work/commondir"));
  RunResult r = Shell(
      "echo PROBE admin-link; cd '" + repo +
          "' && mkdir -p node_modules && cp -a .git/worktrees/work node_modules/evil && cp -a .git "
          "node_modules/evilcommon && printf '#!/bin/sh\\ntouch " +
          mark +
          "\\n' > node_modules/evilcommon/hooks/pre-commit && chmod 755 "
          "node_modules/evilcommon/hooks/pre-commit && echo '" +
          repo +
          "/node_modules/evilcommon' > node_modules/evil/commondir && mv .git/worktrees/work "
          ".git/worktrees/work.old && ln -s ../../node_modules/evil .git/worktrees/work; exit 0",
      Flags({"--writable", repo}));
  ShellOutside(work_, "git commit -q --allow-empty -m outside");
  Verdict(r, Exists(mark), Control::kAlways, "a hook behind a swapped admin dir ran outside");
}

// A relative core.hooksPath in the user's global config (~/.gitconfig here; $GIT_CONFIG_GLOBAL,
// $XDG_CONFIG_HOME/git/config and the system's are read too) is a directory in every worktree: a
// tool's .githooks/pre-commit ran at the user's next commit. Only the repository's own config
// was read before.
TEST_P(ScopeTest, AGlobalHooksPathInTheWorktreeRunsNothingOutside) {
  const std::string mark = outside_ + "/RAN-global-hookspath";
  WriteFile(home_ + "/.gitconfig", "[core]\n\thooksPath = .githooks\n", 0644);
  ChownTree(home_, uid(), gid());
  ChownTree(work_, uid(), gid());
  ASSERT_EQ(GitOutside(work_, {"init", "-q"}).exit_code, 0);
  RunResult r = Shell(
      "echo PROBE global-hookspath; mkdir -p .githooks && printf "
      "'#!/bin/sh\\ntouch " +
      mark + "\\n' > .githooks/pre-commit && chmod 755 .githooks/pre-commit");
  GitOutside(work_, {"commit", "-q", "--allow-empty", "-m", "outside"});
  Verdict(r, Exists(mark), Control::kAlways, "a hook in the global hooksPath ran outside");
}

TEST_P(ScopeTest, GitSurfaceRunsNothingOutside) {
  ASSERT_EQ(GitOutside(work_, {"init", "-q"}).exit_code, 0);
  ASSERT_EQ(GitOutside(work_ + "/", {"commit", "-q", "--allow-empty", "-m", "one"}).exit_code, 0);
  ASSERT_EQ(
      system(("mkdir -p '" + work_ + "/nested' '" + work_ + "/new' '" + work_ + "/wt'").c_str()),
      0);
  ChownTree(work_, uid(), gid());
  ASSERT_EQ(GitOutside(work_ + "/nested", {"init", "-q"}).exit_code, 0);
  ChownTree(work_, uid(), gid());
  const std::string mark = outside_ + "/RAN-";
  const std::string hook = "#!/bin/sh\ntouch " + mark + "$(basename $0)\n";
  WriteFile(work_ + "/hook.sh", hook, 0755);
  ChownTree(work_, uid(), gid());
  const std::string plant =
      "cd '" + work_ +
      "'; for h in post-checkout pre-commit post-commit reference-transaction; "
      "do cp hook.sh .git/hooks/$h; cp hook.sh nested/.git/hooks/$h; done; "
      "git config core.fsmonitor 'touch " +
      mark +
      "fsmonitor; false'; "
      "printf '[core]\\n\\thooksPath = " +
      work_ +
      "/evilhooks\\n' > .git/config.worktree; "
      "mkdir -p evilhooks && cp hook.sh evilhooks/pre-commit && cp hook.sh "
      "evilhooks/post-checkout; "
      "mkdir -p .git/x && cp -r .git/objects .git/refs .git/HEAD .git/x/ && "
      "printf '[core]\\n\\tfsmonitor = \"touch " +
      mark +
      "commondir; false\"\\n' > .git/x/config; "
      "echo x > .git/commondir; "
      "git -C new init -q; git -C new config core.fsmonitor 'touch " +
      mark +
      "new; false'; "
      "cp hook.sh new/.git/hooks/pre-commit; "
      "echo 'gitdir: " +
      work_ + "/.git/x' > wt/.git; exit 0";
  RunResult r = Shell(plant);
  ASSERT_FALSE(r.timed_out) << r.Describe();
  for (const std::string& dir : {work_, work_ + "/nested", work_ + "/new", work_ + "/wt"}) {
    GitOutside(dir, {"status"});
    GitOutside(dir, {"commit", "-q", "--allow-empty", "-m", "outside"});
    GitOutside(dir, {"checkout", "-q", "-b", "outside-" + token_});
  }
  std::string ran;
  for (const char* what : {"post-checkout", "pre-commit", "post-commit", "reference-transaction",
                           "fsmonitor", "commondir", "new"}) {
    if (Exists(mark + what)) ran += std::string(" ") + what;
  }
  if (sandboxed()) {
    EXPECT_TRUE(ran.empty()) << "ESCAPE: git outside ran what a tool planted:" << ran << "\n"
                             << r.Describe();
  } else {
    EXPECT_FALSE(ran.empty()) << "CONTROL: unsandboxed, the planted hooks must run\n"
                              << r.Describe();
  }
}

// A stand-in for /run/docker.sock, ssh-agent and D-Bus: bound before the start, outside the
// writable trees, reachable by the mode's user. --allow-net must not open it.
TEST_P(ScopeTest, DaemonSocketUnreachableWithAllowNet) {
  for (const std::string& path : {sock_dir_ + "/docker.sock", "/run/fbx-" + token_ + ".sock"}) {
    Listener listener = Listener::Unix(path);
    chmod(path.c_str(), 0777);
    RunResult r = Probe({"unix_connect", path}, Flags({"--allow-net"}));
    bool contacted = listener.Contacted();
    unlink(path.c_str());
    Verdict(r, contacted, Control::kAlways, "connect to " + path + " with --allow-net");
  }
}

// Issue 13, the unix connect broker (sandbox/unix_broker.h): no network, both layers. The
// daemon's socket appears AFTER the command started (a FIFO handshake, no sleeps), outside the
// writable trees, so layer 2's mounts, made at the start, know nothing of it.
class BrokerScopeTest : public ScopeTest {
 protected:
  // ScopeTest::AfterStart with this suite's sandbox flags.
  RunResult AfterStart(const std::string& tail, const std::function<void()>& outside) {
    return ScopeTest::AfterStart(tail, outside, options_);
  }
  // A daemon's socket in a fresh directory outside, bound after the start.
  void ExpectUnreachable(const std::string& what, const std::string& tail,
                         const std::function<void(const std::string&)>& plant = {}) {
    const std::string dir = sock_dir_ + "/d", path = dir + "/daemon.sock";
    std::optional<Listener> listener;
    RunResult r = AfterStart(tail, [&] {
      mkdir(dir.c_str(), 0755);
      listener.emplace(Listener::Unix(path));
      if (plant) plant(path);
    });
    Verdict(r, listener && listener->Contacted(), Control::kAlways, what);
    if (sandboxed() && what.find("abstract") == std::string::npos) {
      EXPECT_TRUE(Contains(r.err, "forkbox: connect to ")) << "the refusal is reported\n"
                                                           << r.Describe();
    }
  }
  std::string Connect(const std::string& target) {
    return std::string("exec ") + ProbePath() + " unix_connect '" + target + "'";
  }
  void ExpectHardLinkUnreachable();
  void ExpectDatagramsRefused();
  void ExpectRaceLost(const std::string& mode);

  RunOptions options_;  // The sandbox flags of every run (--allow-net in NetBrokerScopeTest).
};

TEST_P(BrokerScopeTest, SocketBoundAfterStartOutside) {
  ExpectUnreachable("connect to a socket bound after the start",
                    Connect(sock_dir_ + "/d/daemon.sock"));
}

TEST_P(BrokerScopeTest, SymlinkInWorkdirToOutsideSocket) {
  ExpectUnreachable("connect through a symlink in the workdir",
                    "ln -s '" + sock_dir_ + "/d/daemon.sock' link.sock && " + Connect("link.sock"));
}

TEST_P(BrokerScopeTest, DotDotPathToOutsideSocket) {
  const std::string rel =
      std::filesystem::path(sock_dir_ + "/d/daemon.sock").lexically_relative(work_).string();
  ASSERT_EQ(rel.rfind("..", 0), 0u) << rel;
  ExpectUnreachable("connect to " + rel, Connect(rel));
}

// A tool's own link() of an outside socket is refused when sandboxed (EXDEV: Landlock's refer
// check in layer 1, the workdir's own bind mount in layer 2), so the hard link is planted from
// outside, as an earlier unconfined run could have; the broker refuses its second link.
void BrokerScopeTest::ExpectHardLinkUnreachable() {
  const std::string hard = work_ + "/hard.sock";
  RunResult r = Shell("ln '" + victim_ + "' '" + work_ + "/tool-link' && echo LINKED", options_);
  if (sandboxed()) {
    EXPECT_FALSE(Contains(r.out, "LINKED")) << "a tool linked an outside file";
  }
  struct stat work_st, sock_st;
  ASSERT_EQ(stat(work_.c_str(), &work_st), 0);
  ASSERT_EQ(stat(sock_dir_.c_str(), &sock_st), 0);
  if (work_st.st_dev != sock_st.st_dev) {
    GTEST_SKIP() << "link() refused here: the workdir and " << sock_dir_
                 << " are on different filesystems";
  }
  ExpectUnreachable("connect to a hard link in the workdir", Connect("hard.sock"),
                    [&](const std::string& path) {
                      ASSERT_EQ(link(path.c_str(), hard.c_str()), 0) << strerror(errno);
                    });
}

TEST_P(BrokerScopeTest, HardLinkInWorkdirToOutsideSocket) { ExpectHardLinkUnreachable(); }

TEST_P(BrokerScopeTest, AbstractSocketOutside) {
  const std::string name = "@fbx-" + token_;
  std::optional<Listener> listener;
  RunResult r = AfterStart(Connect(name), [&] { listener.emplace(Listener::Unix(name)); });
  Verdict(r, listener && listener->Contacted(), Control::kAlways, "connect to " + name);
  if (sandboxed()) {
    EXPECT_TRUE(Contains(r.err, "forkbox: connect to an abstract socket outside the sandbox"))
        << r.Describe();
  }
}

// A datagram receiver outside: socket(AF_UNIX, SOCK_DGRAM) and a datagram socketpair are both
// refused (sendto names its destination in memory seccomp cannot read).
void BrokerScopeTest::ExpectDatagramsRefused() {
  const std::string path = sock_dir_ + "/dgram.sock";
  for (const char* how : {"socket", "socketpair"}) {
    unlink(path.c_str());
    Fd receiver(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path.data(), path.size());
    ASSERT_EQ(bind(receiver.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    chmod(path.c_str(), 0777);
    RunResult r = Probe({"unix_dgram", path, how}, options_);
    char buf[16];
    bool received = recv(receiver.get(), buf, sizeof buf, MSG_DONTWAIT) > 0;
    Verdict(r, received, Control::kAlways, std::string("datagram through ") + how);
  }
}

TEST_P(BrokerScopeTest, DatagramSocketsRefused) { ExpectDatagramsRefused(); }

// One thread connects in a tight loop while another flips the address between an inside socket
// and the outside one and dup2()s sockets over the fd: the broker connects its own dup to the one
// address it read, so no iteration reaches outside; the control reaches it.
// The outside socket is bound after the start, so layer 2's mounts know nothing of it.
// The probe stops after 20000 iterations or 30 s (a loaded, sanitized run is many times slower);
// a sandboxed run that got through fewer than 1000 proves too little and fails.
void BrokerScopeTest::ExpectRaceLost(const std::string& mode) {
  const std::string path = sock_dir_ + "/race.sock";
  std::optional<Listener> listener;
  RunResult r = AfterStart(
      "exec " + std::string(ProbePath()) + " unix_race in.sock '" + path + "' 20000 30 " + mode,
      [&] { listener.emplace(Listener::Unix(path)); });
  Verdict(r, (listener && listener->Contacted()) || ProbeSaysEscaped(r), Control::kAlways,
          "raced connect " + mode);
  if (!sandboxed()) return;
  const size_t at = r.out.find("RACE iterations=");
  ASSERT_NE(at, std::string::npos) << r.Describe();
  EXPECT_GE(std::atol(r.out.c_str() + at + 16), 1000) << "too few raced connects\n" << r.Describe();
}

TEST_P(BrokerScopeTest, RacedConnectNeverReachesOutside) { ExpectRaceLost("unix"); }

// Daemons' sockets bound before the start, outside the writable trees: one in /run (which layer 2
// empties) and one elsewhere (which layer 2 covers with /dev/null). Unreachable in both layers;
// the covered one's refusal says why in layer 2 too. Before, layer 2 printed nothing there: the
// kernel's ECONNREFUSED alone read as "the daemon is down".
TEST_P(BrokerScopeTest, DaemonSocketsBoundBeforeTheStartAreRefusedAndSaySo) {
  const std::string run_dir = "/run/forkbox-" + token_;
  ASSERT_EQ(mkdir(run_dir.c_str(), 0755), 0) << strerror(errno);
  struct Removed {
    std::string dir;
    ~Removed() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } removed{run_dir};
  const std::string in_run = run_dir + "/daemon.sock", elsewhere = sock_dir_ + "/early.sock";
  const std::string why_run = no_userns() ? "outside the writable trees" : "";
  const std::string why_other =
      no_userns() ? "outside the writable trees"
                  : "a socket outside the writable trees (covered in the sandbox)";
  for (const auto& [path, why] : {std::pair{in_run, why_run}, std::pair{elsewhere, why_other}}) {
    Listener listener = Listener::Unix(path);
    RunResult r = Shell("cd '" + work_ + "' && " + Connect(path), options_);
    Verdict(r, listener.Contacted(), Control::kAlways,
            "connect to a daemon's socket bound before the start: " + path);
    // Layer 2's emptied /run has no such path at all: ENOENT, as for any absent daemon, and no
    // note (glibc tries nscd's socket there at every user lookup).
    if (sandboxed()) {
      const std::string note = "forkbox: connect to " + path + " refused: ";
      EXPECT_EQ(Contains(r.err, note + why), !why.empty()) << r.Describe();
      if (why.empty()) {
        EXPECT_FALSE(Contains(r.err, note)) << r.Describe();
      }
    }
  }
}

// Issue 13, --allow-net: the broker stays on (it makes and connects the inet sockets too), so the
// same daemon sockets, bound after the start outside the writable trees and outside /run and /tmp
// (which layer 2 empties at the start), stay unreachable in both layers.
class NetBrokerScopeTest : public BrokerScopeTest {
 protected:
  void SetUp() override {
    BrokerScopeTest::SetUp();
    options_ = Flags({"--allow-net"});
  }
};

TEST_P(NetBrokerScopeTest, SocketBoundAfterStartOutside) {
  ExpectUnreachable("connect to a socket bound after the start with --allow-net",
                    Connect(sock_dir_ + "/d/daemon.sock"));
}

TEST_P(NetBrokerScopeTest, SymlinkInWorkdirToOutsideSocket) {
  ExpectUnreachable("connect through a symlink in the workdir with --allow-net",
                    "ln -s '" + sock_dir_ + "/d/daemon.sock' link.sock && " + Connect("link.sock"));
}

// The symbolic link is made after the start, from outside, next to the socket.
TEST_P(NetBrokerScopeTest, SymlinkMadeLaterOutside) {
  ExpectUnreachable("connect through a symlink made after the start with --allow-net",
                    Connect(sock_dir_ + "/d/alias.sock"), [&](const std::string& path) {
                      ASSERT_EQ(symlink(path.c_str(), (sock_dir_ + "/d/alias.sock").c_str()), 0)
                          << strerror(errno);
                    });
}

TEST_P(NetBrokerScopeTest, HardLinkInWorkdirToOutsideSocket) { ExpectHardLinkUnreachable(); }

TEST_P(NetBrokerScopeTest, DatagramSocketsRefused) { ExpectDatagramsRefused(); }

// --allow-net is TCP and UDP: a raw IP socket (which the broker, root with every capability in
// `forkbox sandbox` as root, must not create for the tool), packet and vsock sockets stay refused.
TEST_P(NetBrokerScopeTest, RawSocketRefused) {
  RunResult r = Probe({"socket", "raw"}, options_);
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "raw IP socket with --allow-net");
}

TEST_P(NetBrokerScopeTest, PacketSocketRefused) {
  RunResult r = Probe({"socket", "packet"}, options_);
  Verdict(r, ProbeSaysEscaped(r), Control::kRootOnly, "AF_PACKET socket with --allow-net");
}

TEST_P(NetBrokerScopeTest, VsockSocketRefused) {
  RunResult r = Probe({"socket", "vsock"}, options_);
  Verdict(r, ProbeSaysEscaped(r), Control::kIfPossible, "AF_VSOCK socket with --allow-net");
}

// One thread connects an inet socket to the outside unix path while another dup2()s unix and inet
// sockets over its fd: continuing the inet connect would let the kernel connect a unix socket
// swapped in meanwhile. The broker connects its own dup of whatever inode it read: never outside.
TEST_P(NetBrokerScopeTest, RacedInetUnixFlipNeverReachesOutside) { ExpectRaceLost("inet"); }

// The same race against the design the broker avoids: the probe's own supervisor checks that the
// fd is an inet socket and continues the call. It loses: the kernel connects the unix socket
// swapped in meanwhile. Unsandboxed only (it installs its own listener).
TEST_P(NetBrokerScopeTest, ContinuingSupervisorLosesTheRace) {
  if (sandboxed()) GTEST_SKIP() << "a control: the probe's own continuing supervisor";
  const std::string path = sock_dir_ + "/race.sock";
  Listener listener = Listener::Unix(path);
  RunResult r = Shell("cd '" + work_ + "' && exec " + std::string(ProbePath()) +
                      " unix_race in.sock '" + path + "' 20000 30 inet-continue");
  EXPECT_TRUE(listener.Contacted() || ProbeSaysEscaped(r))
      << "CONTROL: a continuing supervisor must lose the race\n"
      << r.Describe();
}

class ScopeWorks : public EscapeTest {};

TEST_P(ScopeWorks, GitOperations) {
  RunResult r = Shell(
      "set -e; cd '" + work_ +
      "'; export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=a "
      "GIT_COMMITTER_EMAIL=a@x; git init -q -b main; echo a > f; git add f; git commit -qm one; "
      "git checkout -qb feat; echo b >> f; git commit -qam two; git checkout -q main; "
      "echo c > g; git add g; git commit -qm three; echo d >> f; git stash -q; git stash pop -q; "
      "git checkout -q -- f; git checkout -q feat; git rebase -q main; git worktree list; "
      "echo commits $(git rev-list --count HEAD)");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "commits 3")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "[feat]")) << r.Describe();
  EXPECT_FALSE(Contains(r.err, "git trust surface")) << "git init's files must be kept\n"
                                                     << r.Describe();
  EXPECT_TRUE(Exists(work_ + "/.git/config"));
}

TEST_P(ScopeWorks, MultiprocessingStartMethods) {
  WriteFile(work_ + "/mp.py", kMultiprocessingPy);
  ChownTree(work_, uid(), gid());
  // forkserver in both layers: its AF_UNIX goes through the connect broker. Its socket path must
  // fit in 108 bytes, which the task's TMPDIR below this deep build tree does not: TMPDIR is a
  // short --writable tree instead (which the broker must then accept).
  const std::string tmp = sock_dir_ + "/t";
  ASSERT_EQ(mkdir(tmp.c_str(), 0755), 0) << strerror(errno);
  ChownTree(sock_dir_, uid(), gid());
  RunResult r = Shell(
      "cd '" + work_ + "' && TMPDIR='" + tmp + "' /usr/bin/python3 mp.py fork spawn forkserver",
      Flags({"--writable", tmp}));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "fork ok 14 14")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "spawn ok 14 14")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "forkserver ok 14 14")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "shm ok 7")) << r.Describe();
}

// A server and a client inside talk over a pathname socket in the workdir, an abstract socket and
// socketpairs. `forkbox sandbox` (Sandbox::ForCommand) first enters a Landlock domain of its own
// scoping abstract sockets and spawns the tool from there, so the tool's domain nests in it and
// its broker's thread shares it (the agents' brokers are scoped by their own domains:
// confine_test's BrokerTest).
// The abstract name is unique per test: abstract sockets are per network namespace, which every
// mode shares with the other tests running in parallel (a fixed name flaked with EADDRINUSE).
TEST_P(ScopeWorks, UnixServerAndClientInside) {
  WriteFile(
      work_ + "/talk.py",
      "import socket\n"
      "def talk(addr):\n"
      "    s = socket.socket(socket.AF_UNIX); s.bind(addr); s.listen(1)\n"
      "    c = socket.socket(socket.AF_UNIX); c.connect(addr); a, _ = s.accept()\n"
      "    c.sendall(b'ping'); return a.recv(4).decode()\n"
      "print('pathname', talk('srv.sock'))\n"
      "x, y = socket.socketpair(); x.sendall(b'pair'); print('socketpair', y.recv(4).decode())\n"
      "q, w = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
      "q.send(b'seq'); print('seqpacket', w.recv(4).decode())\n"
      "try: print('abstract', talk('\\0fbx-talk-" +
          token_ +
          "'))\n"
          "except OSError as e: print('abstract refused', e.errno)\n");
  ChownTree(work_, uid(), gid());
  RunResult r = Shell("cd '" + work_ + "' && /usr/bin/python3 talk.py");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "pathname ping")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "socketpair pair")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "seqpacket seq")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "abstract ping")) << r.Describe();
}

// A process-directed signal is taken by the thread that waits for the command and answers its
// broker: `forkbox sandbox` forwards SIGTERM to the command instead of dying of it itself. The
// command takes it and exits 42, and so does `forkbox sandbox` (dying of the signal itself, it
// would not). The command takes it with sigwait, blocked from the start: a Python handler runs
// only between bytecodes, so a SIGTERM just before time.sleep() went unseen for the whole sleep.
TEST_P(ScopeWorks, SigtermIsForwardedWhileTheBrokerRuns) {
  const std::string ready = work_ + "/ready";
  ASSERT_EQ(mkfifo(ready.c_str(), 0666), 0) << strerror(errno);
  ChownTree(work_, uid(), gid());
  std::thread killer([&] {
    Fd in = OpenFifo(ready, O_RDONLY);
    char c;
    if (!in.valid() || read(in.get(), &c, 1) != 1 || c != 'r') return;
    for (pid_t pid : ProcessesWithMarker(token_)) {
      std::string comm;
      Fd fd(open(("/proc/" + std::to_string(pid) + "/comm").c_str(), O_RDONLY | O_CLOEXEC));
      char buf[32] = {};
      if (fd.valid() && read(fd.get(), buf, sizeof buf - 1) > 0) comm = buf;
      if (comm == "forkbox\n") kill(pid, SIGTERM);
    }
  });
  RunResult r = Shell("cd '" + work_ +
                      "' && exec /usr/bin/python3 -c \"import signal, socket, sys\n"
                      "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
                      "s = socket.socket(socket.AF_UNIX)\n"
                      "open('ready', 'w').write('r')\n"
                      "signal.sigwait({signal.SIGTERM})\n"
                      "sys.exit(42)\"");
  // A command that never reached the FIFO must not leave the killer blocked on it (see
  // TheBrokerIsTheLaunchersOwnThread): an O_RDWR open never blocks, and its 'x' kills nothing.
  Fd unblock = OpenFifo(ready, O_RDWR | O_NONBLOCK);
  if (unblock.valid()) (void)!write(unblock.get(), "x", 1);
  killer.join();
  ASSERT_FALSE(r.timed_out) << r.Describe();
  EXPECT_TRUE(WIFEXITED(r.wait_status)) << "forkbox died of the signal\n" << r.Describe();
  EXPECT_EQ(r.exit_code, 42) << "the command's exit, after it took the signal\n" << r.Describe();
}

// `forkbox sandbox` answers its command's connect broker on its one thread
// (BrokerThread::kCallers): while the command, which connected through the broker once already,
// waits on a FIFO, every forkbox process of the run (the launcher, and in layer 2 the namespace
// init) has exactly one thread; then a second connect is still answered.
TEST_P(ScopeWorks, TheBrokerIsTheLaunchersOwnThread) {
  const std::string ready = work_ + "/ready", go = work_ + "/go";
  ASSERT_EQ(mkfifo(ready.c_str(), 0666), 0) << strerror(errno);
  ASSERT_EQ(mkfifo(go.c_str(), 0666), 0) << strerror(errno);
  ChownTree(work_, uid(), gid());
  std::vector<size_t> threads;
  std::thread watcher([&] {
    Fd in = OpenFifo(ready, O_RDONLY);
    char c;
    if (in.valid() && read(in.get(), &c, 1) == 1) {
      for (pid_t pid : ProcessesWithMarker(token_)) {
        const std::string proc = "/proc/" + std::to_string(pid);
        if (ReadFile(proc + "/comm") != "forkbox\n") continue;
        size_t count = 0;
        std::error_code ec;
        for (auto it = std::filesystem::directory_iterator(proc + "/task", ec);
             !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
          ++count;
        }
        threads.push_back(count);
      }
    }
    Fd out = OpenFifo(go, O_WRONLY);
    if (out.valid()) (void)!write(out.get(), "g", 1);
  });
  RunResult r = Shell("cd '" + work_ +
                      "' && exec /usr/bin/python3 -c \"import socket\n"
                      "def talk(n):\n"
                      "    s = socket.socket(socket.AF_UNIX); s.bind(n); s.listen(1)\n"
                      "    c = socket.socket(socket.AF_UNIX); c.connect(n); a, _ = s.accept()\n"
                      "    c.sendall(b'ping'); return a.recv(4).decode()\n"
                      "print('before', talk('a.sock'), flush=True)\n"
                      "open('ready', 'w').write('r')\n"
                      "open('go').read()\n"
                      "print('after', talk('b.sock'))\"");
  // A command that never reached the FIFOs must not leave the watcher blocked on them: O_RDWR
  // opens of a FIFO never block, and a byte in `ready` ends its read. The command can write the
  // workdir: OpenFifo neither follows nor writes into what it put in a FIFO's place.
  Fd unblock_ready = OpenFifo(ready, O_RDWR | O_NONBLOCK);
  if (unblock_ready.valid()) (void)!write(unblock_ready.get(), "x", 1);
  Fd unblock_go = OpenFifo(go, O_RDWR | O_NONBLOCK);
  watcher.join();
  ASSERT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "before ping")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "after ping")) << r.Describe();
  ASSERT_FALSE(threads.empty()) << "no forkbox process found\n" << r.Describe();
  for (size_t count : threads) EXPECT_EQ(count, 1u) << r.Describe();
}

// connect() answered by the broker gives the kernel's errnos: a first connect 0, a file ENOTSOCK,
// a closed fd EBADF, a listening socket EINVAL, a socketpair and a connected socket EISCONN, a
// missing path ENOENT, a regular file ECONNREFUSED. The same script run outside is the reference.
TEST_P(ScopeWorks, ConnectErrnosMatchTheKernel) {
  WriteFile(work_ + "/errnos.py",
            "import ctypes, os, socket\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "def raw_connect(fd, path):\n"
            "    raw = b'\\x01\\x00' + path.encode() + b'\\0'\n"
            "    buf = ctypes.create_string_buffer(raw, len(raw))\n"
            "    return 0 if libc.connect(fd, buf, len(raw)) == 0 else ctypes.get_errno()\n"
            "srv = socket.socket(socket.AF_UNIX); srv.bind('srv.sock'); srv.listen(4)\n"
            "lis = socket.socket(socket.AF_UNIX); lis.bind('lis.sock'); lis.listen(1)\n"
            "x, y = socket.socketpair()\n"
            "c = socket.socket(socket.AF_UNIX); first = raw_connect(c.fileno(), 'srv.sock')\n"
            "open('plain', 'w').close()\n"
            "f = os.open('plain', os.O_RDONLY)\n"
            "u = socket.socket(socket.AF_UNIX)\n"
            "print('errnos', first, raw_connect(f, 'srv.sock'), raw_connect(999, 'srv.sock'),\n"
            "      raw_connect(lis.fileno(), 'srv.sock'), raw_connect(x.fileno(), 'srv.sock'),\n"
            "      raw_connect(c.fileno(), 'srv.sock'), raw_connect(u.fileno(), 'missing.sock'),\n"
            "      raw_connect(u.fileno(), 'plain'), raw_connect(u.fileno(), 'srv.sock'))\n");
  const std::string ref_dir = sock_dir_ + "/ref";
  ASSERT_EQ(mkdir(ref_dir.c_str(), 0755), 0) << strerror(errno);
  ASSERT_EQ(system(("cp '" + work_ + "/errnos.py' '" + ref_dir + "/'").c_str()), 0);
  Command outside;
  outside.argv = {"/usr/bin/python3", "errnos.py"};
  outside.env = {"PATH=/usr/bin:/bin"};
  outside.cwd = ref_dir;
  RunResult reference = RunCommand(outside);
  ASSERT_TRUE(Contains(reference.out, "errnos 0 88 9 22 106 106 2 111 0")) << reference.Describe();
  ChownTree(work_, uid(), gid());
  RunResult r = Shell("cd '" + work_ + "' && /usr/bin/python3 errnos.py");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, reference.out) << r.Describe();
}

TEST_P(ScopeWorks, CheckStatesTheReadScope) {
  const RunResult& check = CheckOutput(GetParam());
  EXPECT_TRUE(Contains(check.out, "read scope")) << check.Describe();
  EXPECT_TRUE(Contains(check.out, "local daemons")) << check.Describe();
  EXPECT_TRUE(Contains(check.out, "credential stores unreadable")) << check.Describe();
}

INSTANTIATE_TEST_SUITE_P(Modes, ScopeTest, ::testing::ValuesIn(AllModes()), ModeName);
INSTANTIATE_TEST_SUITE_P(Modes, BrokerScopeTest, ::testing::ValuesIn(AllModes()), ModeName);
INSTANTIATE_TEST_SUITE_P(Modes, NetBrokerScopeTest, ::testing::ValuesIn(AllModes()), ModeName);
INSTANTIATE_TEST_SUITE_P(Modes, ScopeWorks,
                         ::testing::Values(Mode::kRoot, Mode::kUser, Mode::kRootNoUserns,
                                           Mode::kUserNoUserns),
                         ModeName);

}  // namespace
}  // namespace forkbox::escape
