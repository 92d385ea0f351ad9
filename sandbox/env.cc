// ToolEnvironment and ResolvePolicy.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "base/path.h"
#include "base/state_dir.h"
#include "sandbox/contain.h"
#include "sandbox/git_config.h"
#include "sandbox/landlock.h"
#include "sandbox/namespaces.h"
#include "sandbox/sandbox.h"

namespace forkbox::sandbox {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool ValidName(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

void ListStores(const Policy& policy, std::vector<std::string>* denied,
                std::vector<std::string>* credentials);
std::vector<std::string> HomesOf(const Policy& policy);

// policy.unreadable made canonical, without the paths that lie in or hold the workdir or a
// --writable tree (canonical already): tools write there, so they cannot be hidden there, and
// hiding one that holds the workdir would hide the workdir.
Status ResolveUnreadable(Policy& policy) {
  std::vector<std::string> trees = {policy.workdir};
  trees.insert(trees.end(), policy.writable.begin(), policy.writable.end());
  std::vector<std::string> kept;
  for (const std::string& path : policy.unreadable) {
    std::error_code ec;
    const std::string c = std::filesystem::weakly_canonical(path, ec).string();
    if (path.empty() || ec || c.empty() || c[0] != '/') {
      return Status::InvalidArgument("unreadable path " + path + ": " +
                                     (ec ? ec.message() : std::string("not a path")));
    }
    const bool overlaps = std::any_of(trees.begin(), trees.end(), [&c](const std::string& t) {
      return PathWithin(c, t) || PathWithin(t, c);
    });
    if (!overlaps && std::find(kept.begin(), kept.end(), c) == kept.end()) kept.push_back(c);
  }
  policy.unreadable = std::move(kept);
  return Status::Ok();
}

Result<std::string> Canonical(const std::string& path, const char* what) {
  if (path.empty()) return Status::InvalidArgument(std::string(what) + ": empty path");
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::canonical(path, ec);
  if (ec) {
    return Status::InvalidArgument(std::string(what) + " " + path + ": " + ec.message());
  }
  if (!std::filesystem::is_directory(canonical, ec) && !std::filesystem::exists(canonical, ec)) {
    return Status::InvalidArgument(std::string(what) + " " + path + ": does not exist");
  }
  return canonical.string();
}

// The variables every tool gets, opted in or not. The XDG directories too: paths, not secrets,
// and a task's child resolves its read scope from them (the stores and forkbox's state they move
// are denied there too).
bool IsBaseName(const std::string& name) {
  static constexpr std::string_view kBase[] = {"PATH",
                                               "HOME",
                                               "LANG",
                                               "TERM",
                                               "USER",
                                               "SHELL",
                                               "XDG_CONFIG_HOME",
                                               "XDG_DATA_HOME",
                                               "XDG_STATE_HOME",
                                               "XDG_RUNTIME_DIR"};
  return StartsWith(name, "LC_") ||
         std::find(std::begin(kBase), std::end(kBase), name) != std::end(kBase);
}

// The value of `name` in `environ`, or nullptr.
const char* FindVariable(char** environ, std::string_view name) {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry = *e;
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=') {
      return *e + name.size() + 1;
    }
  }
  return nullptr;
}

// Where ForkboxProcessEnvironment parks the tools' opted-in variables.
constexpr std::string_view kParkedPrefix = "FORKBOX_TOOL_ENV_";

// The names parked in `environ` (set by ForkboxProcessEnvironment in a forkbox-child's).
std::set<std::string> ParkedNames(char** environ) {
  std::set<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry = *e;
    size_t eq = entry.find('=');
    if (eq != std::string_view::npos && entry.starts_with(kParkedPrefix)) {
      names.emplace(entry.substr(kParkedPrefix.size(), eq - kParkedPrefix.size()));
    }
  }
  return names;
}

}  // namespace

bool IsSecretName(const std::string& raw) {
  std::string name;
  for (char c : raw) name += static_cast<char>((c >= 'a' && c <= 'z') ? c - 32 : c);
  for (const char* suffix : {"_API_KEY", "_APIKEY", "_KEY", "_TOKEN", "_SECRET", "_PASSWORD",
                             "_PASSWD", "_CREDENTIALS"}) {
    if (EndsWith(name, suffix)) return true;
  }
  for (const char* prefix : {"ANTHROPIC_", "OPENAI_", "FORKBOX_"}) {
    if (StartsWith(name, prefix)) return true;
  }
  return name == "API_KEY" || name == "TOKEN" || name == "SECRET";
}

std::vector<std::string> ToolEnvironment(const Policy& policy, char** environ) {
  std::set<std::string> opted(policy.env.begin(), policy.env.end());
  const std::set<std::string> parked = ParkedNames(environ);
  std::vector<std::string> env;
  bool has_path = false;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = entry.substr(0, eq);
    std::string value = entry.substr(eq + 1);
    if (StartsWith(name, std::string(kParkedPrefix))) {  // An opt-in, back in the tools' hands.
      name.erase(0, kParkedPrefix.size());
      if (opted.count(name) == 0) continue;
      entry = name + "=" + value;
    } else if (parked.count(name) > 0) {
      continue;  // forkbox's own copy (SSL_CERT_FILE): the parked one is the tools'.
    }
    if (name == "TMPDIR" || name == "TMP" || name == "TEMP") continue;  // Set below.
    bool wanted = IsBaseName(name) || opted.count(name) > 0;
    if (!wanted || IsSecretName(name)) continue;
    // A value shaped like an API key is never passed, whatever its name.
    if (StartsWith(value, "sk-")) continue;
    if (name == "PATH") has_path = true;
    env.push_back(entry);
  }
  if (!has_path) env.push_back("PATH=/usr/local/bin:/usr/bin:/bin");
  const std::string& tmpdir = policy.tmpdir_short.empty() ? policy.tmpdir : policy.tmpdir_short;
  if (!tmpdir.empty()) {
    for (const char* name : {"TMPDIR", "TMP", "TEMP"})
      env.push_back(std::string(name) + "=" + tmpdir);
  }
  return env;
}

std::vector<std::string> ForkboxProcessEnvironment(const Policy& policy, char** environ) {
  std::vector<std::string> env = ToolEnvironment(policy, environ);
  for (std::string& entry : env) {
    const std::string name = entry.substr(0, entry.find('='));
    if (!IsBaseName(name) && name != "TMPDIR" && name != "TMP" && name != "TEMP") {
      entry.insert(0, kParkedPrefix);
    }
  }
  // The CAs forkbox itself trusts (agent/http_tls.h), so that a task reaches the model the
  // parent reaches; and where the user's git config is (ReadUserGitConfig: HOME and
  // XDG_CONFIG_HOME are kept already), so that a task's policy guards what the parent's does.
  // Not the tools' unless opted in (then parked above as well).
  for (const char* name :
       {"SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"}) {
    if (const char* value = FindVariable(environ, name))
      env.push_back(std::string(name) + "=" + value);
  }
  return env;
}

Result<Policy> ResolvePolicy(const Settings& settings, const std::string& workdir,
                             GrantListing listing) {
  Policy policy;
  static_cast<Settings&>(policy) = settings;
  Result<std::string> wd = Canonical(workdir, "workdir");
  if (!wd.ok()) return wd.status();
  if (!std::filesystem::is_directory(*wd)) {
    return Status::InvalidArgument("workdir " + workdir + ": not a directory");
  }
  policy.workdir = *wd;
  for (std::string& w : policy.writable) {
    Result<std::string> c = Canonical(w, "--writable");
    if (!c.ok()) return c.status();
    w = *c;
  }
  for (std::string& r : policy.readable) {
    std::error_code ec;
    std::filesystem::path c = std::filesystem::weakly_canonical(r, ec);
    if (r.empty() || ec || !c.is_absolute()) {
      return Status::InvalidArgument("--readable " + r + ": " +
                                     (ec ? ec.message() : std::string("not a path")));
    }
    r = c.string();
  }
  FORKBOX_RETURN_IF_ERROR(ResolveUnreadable(policy));
  if (policy.enabled) {
    policy.user_git_config = ReadUserGitConfig([](const char* name) { return std::getenv(name); });
    policy.homes = HomesOf(policy);
    std::vector<std::string> denied, credentials;
    ListStores(policy, &denied, &credentials);
    if (listing == GrantListing::kNow) policy.read_grants = landlock::ReadScopeGrants(denied);
    policy.denied_reads = std::move(denied);
    policy.credential_paths = std::move(credentials);
  }
  for (const std::string& name : policy.env) {
    if (!ValidName(name)) return Status::InvalidArgument("--env " + name + ": not a variable name");
  }
  for (auto [value, what] : {std::pair{policy.rlimit_fsize_bytes, "rlimit_fsize_bytes"},
                             std::pair{policy.rlimit_as_bytes, "rlimit_as_bytes"},
                             std::pair{policy.rlimit_nofile, "rlimit_nofile"},
                             std::pair{policy.rlimit_nproc, "rlimit_nproc"}}) {
    if (value <= 0) return Status::InvalidArgument(std::string(what) + " must be positive");
  }
  return policy;
}

Status CheckPathsUnchanged(const Settings& given, const Policy& resolved) {
  for (auto [sent, now, what] : {std::tuple{&given.writable, &resolved.writable, "--writable "},
                                 std::tuple{&given.readable, &resolved.readable, "--readable "}}) {
    for (size_t i = 0; i < sent->size() && i < now->size(); ++i) {
      if ((*sent)[i] != (*now)[i]) {
        return Status::PermissionDenied(what + (*sent)[i] + " now leads to " + (*now)[i] +
                                        ": a symbolic link appeared in it since the session "
                                        "started; refusing to grant it");
      }
    }
  }
  return Status::Ok();
}

namespace {

// Every home whose credential stores are denied: policy.home (default $HOME, which tools see as
// ~) and the password database's home for this uid (where the user's stores really are under
// sudo -E or a changed $HOME).
std::vector<std::string> HomesOf(const Policy& policy) {
  if (policy.homes) return *policy.homes;
  std::vector<std::string> homes;
  std::string home = policy.home;
  if (home.empty()) {
    const char* env = std::getenv("HOME");
    if (env != nullptr && env[0] == '/') home = env;
  }
  if (!home.empty()) homes.push_back(home);
  const passwd* pw = getpwuid(geteuid());
  if (pw != nullptr && pw->pw_dir != nullptr && pw->pw_dir[0] == '/') homes.push_back(pw->pw_dir);
  std::vector<std::string> out;
  for (const std::string& h : homes) {
    std::error_code ec;
    std::string c = std::filesystem::weakly_canonical(h, ec).string();
    if (ec || c == "/" || c.empty()) continue;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

// Below each home: what holds a key, a token or a password. A directory above a store cannot be
// listed (the read scope is an allow-list), so ~/.cache keeps out (~/.cache/huggingface/token);
// so do files that builds read (~/.m2/settings.xml, ~/.gradle/gradle.properties). Some stores
// are read by builds too (pip.conf, ~/.bundle/config, ~/.yarnrc.yml, Composer's auth.json):
// they hold registry tokens, and a build that needs one opts it back in with --readable.
constexpr const char* kHomeStores[] = {
    ".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".oci",
    // Container registries: Docker's config and its legacy file, podman's.
    ".docker/config.json", ".dockercfg", ".config/containers/auth.json",
    // Git and forges: git-credential-store's two files, gh, hub, glab; Subversion's saved logins.
    ".netrc", ".git-credentials", ".config/git/credentials", ".config/gh", ".config/hub",
    ".config/glab-cli", ".subversion/auth",
    // Package registries: npm, PyPI uploads, Cargo, Composer (its home and XDG place), yarn 2+,
    // bundler, pip (an index URL with a token; its XDG and legacy place), Maven's master password.
    ".npmrc", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml", ".composer/auth.json",
    ".config/composer/auth.json", ".yarnrc.yml", ".bundle/config", ".config/pip/pip.conf",
    ".pip/pip.conf", ".m2/settings-security.xml",
    // Other agents' logins, and llm's API keys.
    ".claude/.credentials.json", ".codex/auth.json", ".gemini/oauth_creds.json",
    ".config/github-copilot", ".config/io.datasette.llm",
    // Tools' logins and tokens: RubyGems, ngrok, Fly.io, Ollama's key, configstore's (firebase
    // and other Node CLIs), and a dotenv file in the home directory.
    ".gem/credentials", ".config/ngrok", ".fly", ".ollama/id_ed25519", ".config/configstore",
    ".env",
    // Databases, secret managers, cloud tools.
    ".pgpass", ".my.cnf", ".vault-token", ".terraform.d/credentials.tfrc.json", ".s3cfg", ".boto",
    ".config/rclone", ".config/doctl", ".huggingface/token", ".password-store",
    ".local/share/keyrings",
    // Cloud, deploy and data platforms' CLIs: Pulumi, Databricks, Kaggle (~/.kaggle, or its XDG
    // place), Hetzner's hcloud, 1Password's op (XDG and legacy), Cloudflare's wrangler (legacy and
    // XDG), Netlify (XDG and legacy), Vercel (legacy and XDG data), Teleport's tsh.
    ".pulumi/credentials.json", ".databrickscfg", ".kaggle", ".config/kaggle", ".config/hcloud",
    ".config/op", ".op", ".wrangler", ".config/.wrangler", ".config/netlify", ".netlify", ".vercel",
    ".local/share/com.vercel.cli", ".tsh",
    // Browser and mail profiles.
    ".mozilla", ".thunderbird", ".config/google-chrome", ".config/chromium",
    ".config/BraveSoftware",
    // Histories: typed passwords and AUTH commands end up there (zsh's under its other usual
    // names too; vim's keeps registers and command lines).
    ".bash_history", ".zsh_history", ".zhistory", ".histfile", ".local/share/zsh/history",
    ".python_history", ".psql_history", ".mysql_history", ".local/share/fish/fish_history",
    ".node_repl_history", ".sqlite_history", ".rediscli_history", ".irb_history", ".viminfo",
    // forkbox's own prompt history and sessions (base/state_dir.h; $XDG_STATE_HOME's below).
    ".local/state/forkbox"};

// An absolute directory the variable names, or "".
std::string XdgDir(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && value[0] == '/' ? std::string(value) : std::string();
}

// The stores the XDG variables move out of the home directory: what kHomeStores has below
// ~/.config ($XDG_CONFIG_HOME: gh, git's credentials) and ~/.local/share ($XDG_DATA_HOME), and
// podman's default auth file ($XDG_RUNTIME_DIR/containers/auth.json).
void AddXdgStores(std::vector<std::string>& candidates) {
  const std::string config = XdgDir("XDG_CONFIG_HOME");
  const std::string data = XdgDir("XDG_DATA_HOME");
  const std::string runtime = XdgDir("XDG_RUNTIME_DIR");
  for (const char* rel : kHomeStores) {
    const std::string_view r = rel;
    if (!config.empty() && r.starts_with(".config/")) {
      candidates.push_back(config + "/" + std::string(r.substr(sizeof(".config/") - 1)));
    }
    if (!data.empty() && r.starts_with(".local/share/")) {
      candidates.push_back(data + "/" + std::string(r.substr(sizeof(".local/share/") - 1)));
    }
  }
  if (!runtime.empty()) candidates.push_back(runtime + "/containers/auth.json");
}

// Every store, existing or not, as spelled (not canonical), and policy.unreadable.
std::vector<std::string> CandidatePaths(const Policy& policy) {
  std::vector<std::string> candidates;
  for (const std::string& home : HomesOf(policy)) {
    for (const char* rel : kHomeStores) candidates.push_back(home + "/" + rel);
  }
  AddXdgStores(candidates);
  candidates.insert(candidates.end(), policy.unreadable.begin(), policy.unreadable.end());
  if (Result<std::string> state = ForkboxStateDir(); state.ok()) candidates.push_back(*state);
  if (geteuid() == 0) {
    for (const char* f : {"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-"}) {
      candidates.push_back(f);
    }
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/etc/ssh", ec)) {
      const std::string name = entry.path().filename().string();
      if (EndsWith(name, "_key")) candidates.push_back(entry.path().string());
    }
  }
  return candidates;
}

bool OptedIn(const Policy& policy, const std::string& path) {
  return std::any_of(policy.readable.begin(), policy.readable.end(),
                     [&path](const std::string& r) { return PathWithin(path, r); });
}

// std::filesystem::weakly_canonical of an absolute `path` without "." or ".." components, with
// one lstat per component not yet in `dirs` (real directories met before) instead of a stat and
// readlink per component: ListStores canonicalises ~30 stores below the same few directories.
// Returns nullopt where a component is a symlink or cannot be examined (weakly_canonical
// decides then). `*exists`: the whole path exists.
std::optional<std::string> FastWeaklyCanonical(const std::string& path, std::set<std::string>& dirs,
                                               bool* exists) {
  if (path.size() < 2 || path[0] != '/' || path.back() == '/' ||
      path.find("/./") != std::string::npos || path.find("/../") != std::string::npos ||
      path.find("//") != std::string::npos || EndsWith(path, "/.") || EndsWith(path, "/..")) {
    return std::nullopt;
  }
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string prefix = path.substr(0, end);
    const bool last = end == std::string::npos;
    if (!last && dirs.count(prefix) > 0) continue;
    struct stat st;
    if (lstat(prefix.c_str(), &st) != 0) {
      if (errno != ENOENT) return std::nullopt;
      *exists = false;  // Nothing below a missing component exists either.
      return path;
    }
    if (S_ISLNK(st.st_mode)) return std::nullopt;
    if (last) {
      *exists = true;
      return path;
    }
    if (!S_ISDIR(st.st_mode)) return std::nullopt;  // ENOTDIR below: weakly_canonical's call.
    dirs.insert(prefix);
  }
}

// DeniedReadPaths and CredentialPaths in one pass, one canonicalisation per store: a store that
// exists is canonical already (weakly_canonical of an existing path is its canonical path).
void ListStores(const Policy& policy, std::vector<std::string>* denied,
                std::vector<std::string>* credentials) {
  auto add = [](std::vector<std::string>* out, const std::string& path) {
    if (std::find(out->begin(), out->end(), path) == out->end()) out->push_back(path);
  };
  std::set<std::string> dirs;
  for (const std::string& candidate : CandidatePaths(policy)) {
    bool exists = false;
    std::optional<std::string> fast = FastWeaklyCanonical(candidate, dirs, &exists);
    std::error_code ec;
    std::string path = fast ? *fast : std::filesystem::weakly_canonical(candidate, ec).string();
    if (ec) path = candidate;
    if (OptedIn(policy, path)) continue;
    if (!OptedIn(policy, candidate)) add(denied, path);
    // A symlinked store is hidden where it really is (a mount follows the link anyway).
    struct stat st;
    if (fast ? exists : !ec && stat(path.c_str(), &st) == 0) add(credentials, path);
  }
}

}  // namespace

std::vector<std::string> DeniedReadPaths(const Policy& policy) {
  if (policy.denied_reads) return *policy.denied_reads;
  std::vector<std::string> denied, credentials;
  ListStores(policy, &denied, &credentials);
  return denied;
}

namespace {

// Why a tree tools may write is too broad to be one ("" when it is not): "/", a system tree, a
// home or above one, or a tree that holds or lies in a credential store. `denied`: the stores.
std::string WhyTooBroad(const Policy& policy, const std::string& tree,
                        const std::vector<std::string>& denied) {
  if (tree == "/") return "it is /";
  // Trees of programs, libraries, devices and kernel state: what a tool wrote there would run, or
  // act, outside the sandbox.
  for (const char* system : {"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                             "/proc", "/run", "/sbin", "/sys", "/usr"}) {
    if (PathWithin(tree, system) && !InDevShm(tree)) {  // /dev/shm: a user's tmpfs.
      return "it is in " + std::string(system) + ", a system tree";
    }
  }
  for (const std::string& home : HomesOf(policy)) {
    if (PathWithin(home, tree)) return "it is your home directory or contains it";
  }
  for (const std::string& store : denied) {
    if (PathWithin(store, tree)) return "it contains " + store + ", a credential store";
    if (PathWithin(tree, store)) return "it is inside " + store + ", a credential store";
  }
  return "";
}

}  // namespace

Status CheckWorkdirScope(const Policy& policy) {
  if (!policy.enabled) return Status::Ok();
  const std::string& wd = policy.workdir;
  if (policy.read_only && InDevShm(wd)) {
    return Status::InvalidArgument(
        "workdir " + wd + ": refused with --sandbox read-only: it is in /dev/shm, which commands " +
        "may write in layer 1 (POSIX semaphores and shared memory live there); choose a workdir " +
        "elsewhere");
  }
  if (policy.allow_broad_workdir) return Status::Ok();
  const std::vector<std::string> denied = DeniedReadPaths(policy);
  // A --writable tree gets the workdir's rights: in layer 1 its write rule also grants reading,
  // which no read rule can take back for a store inside it. Ignored with --sandbox read-only.
  std::vector<std::string> trees = {wd};
  if (!policy.read_only) trees.insert(trees.end(), policy.writable.begin(), policy.writable.end());
  for (const std::string& tree : trees) {
    const std::string why = WhyTooBroad(policy, tree, denied);
    if (why.empty()) continue;
    return Status::InvalidArgument(
        (tree == wd ? "workdir " : "--writable ") + tree + ": refused, " + why +
        "; tools may write anywhere in it, so it would put your credentials, startup files or "
        "the system's programs within their reach. Choose a project directory, or pass "
        "--allow-broad-workdir");
  }
  return Status::Ok();
}

std::string HiddenGitDirWarning(const Policy& policy, int layer) {
  if (!policy.enabled || layer != 2) return "";
  const std::optional<LinkedGitDir> git = LinkedGitDirOf(policy.workdir);
  if (!git) return "";
  const auto brought_back = [&policy](const std::string& path, bool under_tmp) {
    const auto within = [&path](const std::string& tree) { return PathWithin(path, tree); };
    return within(policy.workdir) ||
           std::any_of(policy.writable.begin(), policy.writable.end(), within) ||
           (under_tmp && std::any_of(policy.readable.begin(), policy.readable.end(), within));
  };
  for (const char* root : {"/tmp", "/dev/shm"}) {
    const bool under_tmp = std::string_view(root) == "/tmp";
    for (const std::string* path : {&git->common, &git->gitdir}) {
      if (!PathWithin(*path, root) || brought_back(*path, under_tmp)) continue;
      return "the workdir's repository " + git->common + " is under " + root +
             ", which layer 2 replaces with a private tmpfs: git fails in every tool (\"not a "
             "git repository\"). Add --writable " +
             git->common + " to let tools commit" +
             (under_tmp ? ", or --readable " + git->common + " to let them only read it" : "");
    }
  }
  return "";
}

std::vector<std::string> CredentialPaths(const Policy& policy) {
  if (policy.credential_paths) return *policy.credential_paths;
  std::vector<std::string> denied, credentials;
  ListStores(policy, &denied, &credentials);
  return credentials;
}

}  // namespace forkbox::sandbox
