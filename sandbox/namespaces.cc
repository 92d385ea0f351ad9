#include "sandbox/namespaces.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>

#include "base/file.h"
#include "base/path.h"
#include "base/process.h"
#include "base/unique_fd.h"
#include "sandbox/git_config.h"

namespace forkbox::sandbox {
namespace {

namespace fs = std::filesystem;

int WriteFileRaw(const char* path, const char* data) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  size_t len = strlen(data);
  ssize_t n = write(fd, data, len);
  int err = (n == static_cast<ssize_t>(len)) ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return err;
}

// mkdir -p without allocating.
int MakeDirsRaw(const char* path) {
  char buf[4096];
  size_t len = strlen(path);
  if (len == 0 || len >= sizeof(buf)) return ENAMETOOLONG;
  memcpy(buf, path, len + 1);
  for (size_t i = 1; i <= len; ++i) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char saved = buf[i];
      buf[i] = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) return errno;
      buf[i] = saved;
    }
  }
  return 0;
}

// The step whose EPERM the layer-2 probe explains (ProbeFailure).
constexpr char kMountProcStep[] = "mount proc /proc";

// A detached recursive clone of the mount tree at the open `at`: the descriptor, or -1 with errno.
int CloneTreeRaw(int at) {
  return static_cast<int>(syscall(
      SYS_open_tree, at, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH));
}

int SetAttrRaw(int dfd, const char* path, unsigned flags, uint64_t set) {
  mount_attr attr{};
  attr.attr_set = set;
  if (syscall(SYS_mount_setattr, dfd, path, flags, &attr, sizeof(attr)) != 0) return errno;
  return 0;
}

bool IsDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(fs::symlink_status(p, ec));
}
bool Exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

void AddOnce(std::vector<std::string>& list, std::string path) {
  if (std::find(list.begin(), list.end(), path) == list.end()) list.push_back(std::move(path));
}

// `p` is link-free up to its last component (walked, or canonical); a link there (a `.git` link,
// `.git/hooks -> ../githooks`) goes to plan.links, and its target, which is what git reads, is
// bound read-only: the binds stay link-free (BindOntoItselfRaw). A dangling link is planned as
// itself and fails the mounts, as its bind by path did: a tool could create its target.
void AddReadonly(const fs::path& p, MountPlan& plan) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (ec || !fs::exists(st)) return;
  const fs::path target = fs::is_symlink(st) ? fs::canonical(p, ec) : p;
  if (ec || target == p) {
    AddOnce(plan.readonly, p.string());
  } else {
    AddOnce(plan.links, p.string());
    AddOnce(plan.readonly, target.string());
  }
}

void AddAbsent(const fs::path& p, MountPlan& plan) {
  if (!Exists(p) && plan.absent.size() < kMaxAbsentPaths &&
      std::find(plan.absent.begin(), plan.absent.end(), p.string()) == plan.absent.end()) {
    plan.absent.push_back(p.string());
  }
}

// The first line of a small regular file a tool may have planted, or "" for anything else (a
// FIFO or a device never stalls a spawn: base/file.h).
std::string FirstLineOfRegularFile(const fs::path& path) {
  Result<std::string> text = ReadRegularFile(path.string(), 4096);
  if (!text.ok()) return "";
  return text->substr(0, text->find('\n'));
}

// The git dir a `.git` file names ("gitdir: X", X relative to the file's directory), canonical;
// nullopt for any other file, or when X is no directory.
std::optional<fs::path> GitDirNamedBy(const fs::path& dotgit) {
  const std::string line = FirstLineOfRegularFile(dotgit);
  const std::string prefix = "gitdir: ";
  if (line.rfind(prefix, 0) != 0) return std::nullopt;
  fs::path gitdir = line.substr(prefix.size());
  if (gitdir.is_relative()) gitdir = dotgit.parent_path() / gitdir;
  std::error_code ec;
  gitdir = fs::weakly_canonical(gitdir, ec);
  if (ec || !IsDir(gitdir)) return std::nullopt;
  return gitdir;
}

fs::path CommonDirOf(const fs::path& gitdir) {
  const std::string rel = FirstLineOfRegularFile(gitdir / "commondir");
  if (rel.empty()) return gitdir;
  std::error_code ec;
  fs::path c = fs::path(rel).is_absolute() ? fs::path(rel) : gitdir / rel;
  fs::path common = fs::weakly_canonical(c, ec);
  return ec ? gitdir : common;
}

// The files git trusts enough to run code from or to redirect itself by, in one git dir.
// hooks/ and info/ are created when missing so that they can be bound read-only, but only in a
// writable tree (plan.writable): elsewhere tools cannot create them either, and the git dir may
// be whatever a planted `.git` file names, where this process, unconfined while it plans, must
// not write. Files that do not exist and must not appear (commondir, config.worktree) are
// removed after the command.
bool InWritableTree(const MountPlan& plan, const fs::path& path) {
  return std::any_of(plan.writable.begin(), plan.writable.end(),
                     [&path](const std::string& tree) { return PathWithin(path.string(), tree); });
}

void AddTrustedFiles(const fs::path& dir, MountPlan& plan) {
  const bool writable = InWritableTree(plan, dir);
  // Created beneath `dir` opened without following a link (it is link-free when planned): a
  // directory a tool swapped for one since gets nothing created where the link leads.
  const UniqueFd at =
      writable ? OpenAt2(AT_FDCWD, dir.c_str(), O_PATH | O_DIRECTORY, kResolveNoLinks) : UniqueFd();
  for (const char* sub : {"hooks", "info"}) {
    if (at) (void)mkdirat(at.get(), sub, 0777);  // EEXIST: it is there (as a link too).
  }
  for (const char* name : {"hooks", "info", "config", "config.worktree", "commondir"}) {
    AddReadonly(dir / name, plan);
  }
  AddAbsent(dir / "commondir", plan);
  AddAbsent(dir / "config.worktree", plan);
  for (const char* name : {"rebase-merge", "rebase-merge/git-rebase-todo", "rebase-merge/strategy",
                           "sequencer", "sequencer/opts"}) {
    AddOnce(plan.operations, (dir / name).string());
  }
}

// How far below modules/ a submodule's git dir is looked for (a name may hold slashes: "a/b").
constexpr int kModuleLevels = 16;

// Submodule git dirs (modules/**): their config and hooks. A link among them (git follows it to
// a git dir of its choosing) is guarded itself: a new one is removed, never what it leads to. A
// directory kModuleLevels down is guarded whole, since it is not looked into.
void AddModules(const fs::path& modules, MountPlan& plan, int depth) {
  std::error_code ec;
  if (!IsDir(modules)) return;
  for (const auto& entry : fs::directory_iterator(modules, ec)) {
    if (entry.is_symlink(ec)) {
      AddOnce(plan.links, entry.path().string());
    } else if (!entry.is_directory(ec)) {
      continue;
    } else if (depth >= kModuleLevels) {
      AddReadonly(entry.path(), plan);
    } else if (Exists(entry.path() / "HEAD")) {
      AddTrustedFiles(entry.path(), plan);
      AddModules(entry.path() / "modules", plan, depth + 1);
    } else {
      AddModules(entry.path(), plan, depth + 1);  // Nested submodule names ("a/b").
    }
  }
}

// How deep included config files are followed (AddConfiguredPaths).
constexpr int kIncludeLevels = 4;

// What the config file `config` names (GitConfigPaths) in a writable tree is guarded like hooks/:
// a core.hooksPath into the worktree (husky's `.husky/_`, git-ignored: a planted hook there never
// showed in `git status`) and an included file there (its planted fsmonitor ran). One that does
// not exist must not appear. Included files are read in turn, kIncludeLevels deep.
bool GuardConfigured(const fs::path& path, MountPlan& plan) {
  if (!InWritableTree(plan, path)) return false;
  AddReadonly(path, plan);
  AddAbsent(path, plan);
  return true;
}

// `read`: the files read so far for this git dir and the shallowest level each was read at; a
// file is read again only from a shallower level, so at most kIncludeLevels times. Unmarked, a
// config that included itself N times was read N^4 times: a tool's 700 bytes stalled every later
// guard walk for minutes, past every timeout and Ctrl-C. `home`: what `~/` names
// (UserGitConfig::home, resolved with the policy; this process's HOME may differ by now).
void AddConfiguredPaths(const fs::path& config, const fs::path& hooks_cwd, const std::string& home,
                        MountPlan& plan, std::map<std::string, int>& read, int level = 0) {
  const auto [at, first] = read.try_emplace(config.lexically_normal().string(), level);
  if (!first && at->second <= level) return;
  at->second = level;
  Result<std::string> text = ReadRegularFile(config.string(), 1 << 20);
  if (!text.ok()) return;
  for (const GitConfigPath& named :
       GitConfigPaths(*text, config.string(), hooks_cwd.string(), home)) {
    if (!GuardConfigured(named.path, plan)) continue;
    if (named.include && level + 1 < kIncludeLevels) {
      AddConfiguredPaths(named.path, hooks_cwd, home, plan, read, level + 1);
    }
  }
}

// The same for what the user's global and system config name (`user`: Policy::user_git_config):
// a relative core.hooksPath there is a directory in every worktree, this one's at `hooks_cwd`.
void AddUserConfiguredPaths(const fs::path& hooks_cwd, const UserGitConfig& user, MountPlan& plan) {
  for (const std::string& hooks : user.hooks_paths) {
    GuardConfigured((hooks_cwd / hooks).lexically_normal(), plan);  // An absolute one as it is.
  }
  for (const std::string& include : user.includes) GuardConfigured(include, plan);
}

// The `.git` file of the worktree whose admin dir (worktrees/NAME) is `admin`, as its `gitdir`
// names it (relative to `admin` with git's worktree.useRelativePaths), lexically; "" for none.
fs::path WorktreeOf(const fs::path& admin) {
  const fs::path named = FirstLineOfRegularFile(admin / "gitdir");
  if (named.empty()) return named;
  return (named.is_absolute() ? named : admin / named).lexically_normal();
}

// A git directory's trust surface, in the common dir too for a worktree: the trusted files, the
// paths their config names, the other worktrees' admin dirs (wholly read-only) and the
// submodules'. `hooks_cwd`: where git runs this repository's hooks; `user`: the user's own config.
void AddGitDir(const fs::path& gitdir, const fs::path& hooks_cwd, const UserGitConfig& user,
               MountPlan& plan) {
  const fs::path common = CommonDirOf(gitdir);
  AddTrustedFiles(common, plan);
  std::map<std::string, int> read;
  AddConfiguredPaths(common / "config", hooks_cwd, user.home, plan, read);
  AddConfiguredPaths(common / "config.worktree", hooks_cwd, user.home, plan, read);
  AddUserConfiguredPaths(hooks_cwd, user, plan);
  if (gitdir != common) {
    // Pinned, as a .git directory: renamed away for a link to a planted admin dir (its commondir
    // naming a common dir with hooks), git would follow the link at the user's next commit.
    AddOnce(plan.pinned, gitdir.string());
    AddTrustedFiles(gitdir, plan);
    AddConfiguredPaths(gitdir / "config.worktree", hooks_cwd, user.home, plan, read);
    AddReadonly(gitdir / "gitdir", plan);
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(common / "worktrees", ec)) {
    if (entry.path() == gitdir) continue;
    if (entry.is_symlink(ec) || !InWritableTree(plan, WorktreeOf(entry.path()))) {
      AddReadonly(entry.path(), plan);  // A link: itself guarded, a new one removed.
      continue;
    }
    // A worktree in a writable tree too: its tools write its admin dir (HEAD, index), so it is
    // guarded as its own git dir is, pinned.
    AddOnce(plan.pinned, entry.path().string());
    AddTrustedFiles(entry.path(), plan);
    AddReadonly(entry.path() / "gitdir", plan);
  }
  AddModules(common / "modules", plan, 0);
}

// A `.git` below the workdir: a directory is pinned with its surface, a `gitdir:` file is bound
// read-only with the surface of the git dir it names.
void AddDotGit(const fs::path& dotgit, const UserGitConfig& user, MountPlan& plan) {
  if (IsDir(dotgit)) {
    AddOnce(plan.pinned, dotgit.string());
    AddGitDir(dotgit, dotgit.parent_path(), user, plan);
    return;
  }
  if (std::optional<fs::path> gitdir = GitDirNamedBy(dotgit)) {
    AddGitDir(*gitdir, dotgit.parent_path(), user, plan);
  }
  AddReadonly(dotgit, plan);
}

// How far below the workdir a nested repository is looked for (its directory's level; the
// workdir is level 0). Every spawn in layer 2 walks this far, so it bounds the walk's cost.
constexpr int kNestedRepoLevels = 5;

std::string JoinPath(const std::string& dir, std::string_view name) {
  return (dir == "/" ? dir : dir + "/") + std::string(name);
}

// Project agent config: what an agent or a developer tool started in the directory trusts, a
// planted command in it run with the user's full rights (AddProjectConfig). `trusted` empty: the
// entry is guarded whole; else, in a directory, only those names: the others are the tool's state
// (in a workdir of $HOME: transcripts of many MB, which the guard would read at every call).
// `shared`: a directory other programs write too (`.vscode/extensions.json`,
// `.config/nextest.toml`; a kernel tree's `.config` is a file): missing or not a directory, only
// its trusted names must not appear below it, and a new one is not removed whole.
struct AgentConfig {
  const char* name;
  std::span<const char* const> trusted;
  bool shared = false;
};
// Claude Code: agents, commands, skills, output styles; settings' hooks run commands.
constexpr const char* kClaudeTrusts[] = {
    "settings.json", "settings.local.json", "agents", "commands", "hooks",
    "skills",        "output-styles"};
// Codex: a trusted project's config.toml (mcp_servers, notify: commands).
constexpr const char* kCodexTrusts[] = {"config.toml"};
// Gemini CLI: settings' mcpServers and hooks, commands' `!{...}`, workspace extensions; `.env`
// (read before the project's, never filtered), whose GEMINI_SANDBOX names a command it starts.
constexpr const char* kGeminiTrusts[] = {"settings.json", "commands", "extensions", ".env"};
// Cursor: project MCP servers and hooks.
constexpr const char* kCursorTrusts[] = {"mcp.json", "hooks.json"};
// VS Code (Cursor, Windsurf): a task with `"runOn": "folderOpen"` runs when the folder opens, and
// settings name executables (linters, terminal profiles), trusted once per folder. Not mcp.json:
// VS Code asks again when a server's configuration changes.
constexpr const char* kVscodeTrusts[] = {"tasks.json", "settings.json"};
// Zed, trusted once per worktree: settings' language and context servers start at open, a task
// with `"hooks": ["create_worktree"]` runs when Zed makes a git worktree.
constexpr const char* kZedTrusts[] = {"settings.json", "tasks.json"};
// opencode, no trust prompt: plugins and tools are code it loads at start, package.json's
// dependencies it installs then (bun), agents and commands (`!`cmd``) steer its shell.
constexpr const char* kOpencodeTrusts[] = {
    "opencode.json", "opencode.jsonc", "plugin", "plugins", "tool",
    "tools",         "package.json",   "agent",  "agents",  "command",
    "commands",      "mode",           "modes",  "skill",   "skills"};
// mise's config in `mise/` and `.config/` (`.config/mise/` holds conf.d/ and tasks/ too).
constexpr const char* kMiseDirTrusts[] = {"config.toml", "config.local.toml", "conf.d"};
constexpr const char* kDotConfigTrusts[] = {"mise.toml", "mise.local.toml", "mise"};
constexpr AgentConfig kAgentConfigs[] = {
    {".forkbox", {}},   // config.toml, agents/: a task's planted explore.md or model would run it.
    {".mcp.json", {}},  // Project MCP servers: a changed command of an approved one runs unasked.
    {".claude", kClaudeTrusts},
    {".codex", kCodexTrusts},
    {".gemini", kGeminiTrusts},
    {".cursor", kCursorTrusts},
    {".vscode", kVscodeTrusts, true},
    {".zed", kZedTrusts},
    {"opencode.json", {}},  // opencode: MCP servers' commands, plugins (read up to the git root).
    {"opencode.jsonc", {}},
    {".opencode", kOpencodeTrusts},
    // mise: hooks (`enter`, `cd`), env `_.source` scripts, templates' exec() run at the next `cd`
    // (`mise activate`); a file trusted once stays trusted whatever it says (paranoid mode aside).
    {"mise.toml", {}},
    {".mise.toml", {}},
    {"mise.local.toml", {}},
    {".mise.local.toml", {}},
    {".rtx.toml", {}},  // mise still reads its old name.
    {".rtx.local.toml", {}},
    {".mise", {}},  // config.toml, conf.d/, tasks/.
    {"mise", kMiseDirTrusts, true},
    {".config", kDotConfigTrusts, true},
};
// Not guarded: `.tool-versions` (versions only), mise-tasks/ (run when asked: `mise run`),
// `mise.<env>.toml` (named by $MISE_ENV), `.vscode/launch.json` and `.zed/debug.json` (run when
// debugging starts), `.opencode/node_modules` (what its plugins import, like any project code).

// The first letters of kAgentConfigs' names: the walk asks of every name it lists.
constexpr std::array<bool, 256> kAgentConfigInitials = [] {
  std::array<bool, 256> initials{};
  for (const AgentConfig& config : kAgentConfigs) {
    initials[static_cast<unsigned char>(config.name[0])] = true;
  }
  return initials;
}();

const AgentConfig* FindAgentConfig(std::string_view name) {
  if (name.empty() || !kAgentConfigInitials[static_cast<unsigned char>(name[0])]) return nullptr;
  const auto it = std::find_if(std::begin(kAgentConfigs), std::end(kAgentConfigs),
                               [name](const AgentConfig& c) { return name == c.name; });
  return it == std::end(kAgentConfigs) ? nullptr : &*it;
}

// The names in a directory's listing that tell a git dir (IsBareGitDir), each of any kind: git
// follows links, and access(2) on `objects` is all it asks of it.
struct GitMarks {
  bool dot_git = false;  // A `.git`.
  bool head = false;
  bool objects = false;
  bool refs = false;
  bool commondir = false;
  bool agent_config = false;  // One of kAgentConfigs (AddProjectConfig).
};

// The real subdirectories of the open directory `dir` (never a link), without git dirs and big
// dependency trees, and in `*marks` the names among all its entries that tell a git dir. nullopt:
// unlistable (no read permission: an O_PATH descriptor; or an error part way). getdents64 straight
// into `buf`: two calls for most directories, where readdir's fdopendir adds an fcntl and an
// fstat.
std::optional<std::vector<std::string>> ListSubdirs(int dir, std::vector<char>& buf,
                                                    GitMarks* marks) {
  std::vector<std::string> subdirs;
  while (true) {
    const long n = syscall(SYS_getdents64, dir, buf.data(), buf.size());
    if (n < 0) return std::nullopt;
    if (n == 0) return subdirs;
    for (long at = 0; at < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buf.data() + at);
      if (entry->d_reclen == 0) return std::nullopt;  // Never from the kernel; no endless loop.
      at += entry->d_reclen;
      const std::string_view name = entry->d_name;
      marks->dot_git |= name == ".git";
      marks->head |= name == "HEAD";
      marks->objects |= name == "objects";
      marks->refs |= name == "refs";
      marks->commondir |= name == "commondir";
      marks->agent_config |= IsAgentConfigName(name);
      // .forkbox-tmp is walked: git recurses into a repository a tool commits there as well.
      if (name == "." || name == ".." || name == ".git" || name == "node_modules") continue;
      struct stat st;
      if (entry->d_type == DT_DIR ||
          (entry->d_type == DT_UNKNOWN &&
           fstatat(dir, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))) {
        subdirs.emplace_back(name);
      }
    }
  }
}

// The open (O_PATH) directory `dir`, searchable but not readable by this process, which owns it:
// git still finds a repository below it by name (a committed gitlink), so a tool's `chmod 0311 a`
// hid one from the walk. It is listed as its owner may: read permission is added through the
// descriptor's /proc link (that inode, no path walked again) for one open, then taken away.
// Invalid: not ours, not searchable (git cannot look below it either), or no /proc.
UniqueFd OpenOwnUnreadableDir(int dir) {
  struct stat st;
  if (fstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & S_IRUSR) != 0 || (st.st_mode & S_IXUSR) == 0) {
    return UniqueFd();
  }
  const std::string self = "/proc/self/fd/" + std::to_string(dir);
  const mode_t mode = st.st_mode & 07777;
  if (chmod(self.c_str(), mode | S_IRUSR) != 0) return UniqueFd();
  UniqueFd listable(open(self.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  // The listing is kept either way: a mode left readable by its owner (a tool set it) harms
  // nothing, while a walk without the listing would miss what git finds.
  (void)chmod(self.c_str(), mode);
  return listable;
}

// A directory opened to be listed, else (searchable, not readable) only to look beneath it.
// Never through a link (a tool may swap one in after the listing) and never a FIFO (O_DIRECTORY
// fails before it could block); directories have no hard links.
UniqueFd OpenWalkedDir(int at, const char* name) {
  const int flags = O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(openat(at, name, O_RDONLY | flags));
  if (fd || errno != EACCES) return fd;
  fd.reset(openat(at, name, O_PATH | flags));
  if (!fd) return fd;
  UniqueFd listable = OpenOwnUnreadableDir(fd.get());
  return listable ? std::move(listable) : std::move(fd);
}

// Whether `rel`/`name` (`name` for an empty `rel`) exists, as a link too, beneath `dir`; never
// through a link (`rel` swapped for one since the listing counts as absent: the walk follows
// none).
bool HasEntryAt(int dir, const std::string& rel, const char* name) {
  const std::string path = rel.empty() ? std::string(name) : rel + "/" + name;
  // O_NOFOLLOW: a `.git` link is opened itself, not where it leads.
  return OpenAt2(dir, path.c_str(), O_PATH | O_NOFOLLOW, kResolveNoLinks | RESOLVE_BENEATH).valid();
}

bool HasDotGitAt(int dir, const std::string& rel) { return HasEntryAt(dir, rel, ".git"); }

// Whether `rel` beneath `dir` holds agent config (a directory that cannot be listed).
bool HasAgentConfigAt(int dir, const std::string& rel) {
  return std::any_of(std::begin(kAgentConfigs), std::end(kAgentConfigs),
                     [&](const AgentConfig& c) { return HasEntryAt(dir, rel, c.name); });
}

// Whether HEAD in `dir` passes git's check of a git dir's HEAD (validate_headref): a link whose
// target starts with "refs/", or a file holding "ref:", blanks, "refs/...", or an object name.
// Read without following a link and never blocking on a FIFO (git would hang on one, not run it).
bool HeadLooksValid(int dir) {
  struct stat st;
  if (fstatat(dir, "HEAD", &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  char text[256];
  if (S_ISLNK(st.st_mode)) {
    const ssize_t n = readlinkat(dir, "HEAD", text, sizeof text);
    return n >= 5 && std::string_view(text, static_cast<size_t>(n)).rfind("refs/", 0) == 0;
  }
  if (!S_ISREG(st.st_mode)) return false;
  const UniqueFd head(openat(dir, "HEAD", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  const ssize_t n = head ? read(head.get(), text, sizeof text) : -1;
  if (n <= 0) return false;
  std::string_view line(text, static_cast<size_t>(n));
  if (line.rfind("ref:", 0) == 0) {
    line.remove_prefix(4);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) {
      line.remove_prefix(1);
    }
    return line.rfind("refs/", 0) == 0;
  }
  // A detached HEAD: an object name (SHA-1's 40 digits begin SHA-256's 64 too).
  return n >= 40 && line.substr(0, 40).find_first_not_of("0123456789abcdefABCDEF") == line.npos;
}

// Whether the listed directory `dir` is a git dir itself, as git decides (is_git_directory; a
// bare repository: `git init --bare docs`, whose config and hooks `git -C docs` trusts): a valid
// HEAD, and objects and refs, of any kind, or a commondir naming where they are. Loose where git
// is strict (what commondir names is not checked): a false match only guards more.
bool IsBareGitDir(int dir, const GitMarks& marks) {
  if (!marks.head || !(marks.commondir || (marks.objects && marks.refs))) return false;
  return HeadLooksValid(dir);
}

void AddProjectConfig(const std::string& dir, MountPlan& plan);

// The repository at `path` (the open `dir`, `level` below the workdir) and those below it, each
// protected like the workdir's own: one listing per directory, each opened relative to its
// parent and never through a link, and a `.git` found in its directory's listing (a lookup only
// where the listing fails). The deepest level is listed too, not walked below: a lookup of each
// of kAgentConfigs' names there cost more than the listing. A bare repository is
// a git dir of its own, and the walk goes on below it: git still finds a repository in its
// subdirectories (a workdir made to look bare hid every one). Agent config found the same
// way is guarded as the workdir's own: a session started in that directory (`cd sub; forkbox`)
// or a `claude` there would trust it.
void AddReposBelow(const UniqueFd& dir, const std::string& path, int level, std::vector<char>& buf,
                   const UserGitConfig& user, MountPlan& plan) {
  GitMarks marks;
  const std::optional<std::vector<std::string>> subdirs = ListSubdirs(dir.get(), buf, &marks);
  if (subdirs ? marks.dot_git : HasDotGitAt(dir.get(), "")) {
    AddDotGit(JoinPath(path, ".git"), user, plan);
  }
  if (level > 0 && (subdirs ? marks.agent_config : HasAgentConfigAt(dir.get(), ""))) {
    AddProjectConfig(path, plan);
  }
  if (!subdirs) return;
  if (IsBareGitDir(dir.get(), marks)) {
    AddOnce(plan.pinned, path);         // As a .git directory: what was removed stays removed.
    AddGitDir(path, path, user, plan);  // A bare repository's hooks run in its git dir.
  }
  if (level == kNestedRepoLevels) return;
  for (const std::string& name : *subdirs) {
    UniqueFd child = OpenWalkedDir(dir.get(), name.c_str());
    if (child) AddReposBelow(child, JoinPath(path, name), level + 1, buf, user, plan);
  }
}

// The path of every pathname socket bound in this network namespace right now, from the kernel's
// sock_diag dump (binary: 0.09 ms for 1,000 sockets where formatting /proc/net/unix costs 0.3-0.6
// ms). Fails where netlink is refused (the agent's seccomp allows no netlink socket).
Result<std::vector<std::string>> SocketPathsByDiag() {
  UniqueFd fd(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!fd) return Status::FromErrno(errno, "socket(NETLINK_SOCK_DIAG)");
  struct {
    nlmsghdr header;
    unix_diag_req request;
  } query = {};
  query.header.nlmsg_len = sizeof query;
  query.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  query.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  query.request.sdiag_family = AF_UNIX;
  query.request.udiag_states = ~0U;  // Every state: the same sockets as /proc/net/unix.
  query.request.udiag_show = UDIAG_SHOW_NAME;
  if (send(fd.get(), &query, sizeof query, 0) != static_cast<ssize_t>(sizeof query)) {
    return Status::FromErrno(errno, "send(sock_diag)");
  }
  std::vector<std::string> paths;
  alignas(nlmsghdr) char buf[32768];
  for (;;) {
    ssize_t got = recv(fd.get(), buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return Status::FromErrno(got < 0 ? errno : EIO, "recv(sock_diag)");
    size_t left = static_cast<size_t>(got);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_DONE) return paths;
      if (h->nlmsg_type == NLMSG_ERROR) return Status::Internal("sock_diag: an error message");
      auto* msg = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
      int len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *msg));
      for (auto* a = reinterpret_cast<rtattr*>(msg + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        const char* name = static_cast<const char*>(RTA_DATA(a));
        const size_t size = RTA_PAYLOAD(a);
        if (a->rta_type == UNIX_DIAG_NAME && size > 0 && name[0] == '/') {
          paths.emplace_back(name, strnlen(name, size));
        }
      }
    }
  }
}

// The same from /proc/net/unix: where netlink is refused. Empty if unreadable.
std::vector<std::string> SocketPathsFromProc() {
  std::vector<std::string> paths;
  Result<std::string> table = ReadRegularFile("/proc/net/unix", 8 << 20);
  if (!table.ok()) return paths;
  size_t start = table->find('\n');  // The header.
  while (start != std::string::npos) {
    size_t end = table->find('\n', start + 1);
    const std::string_view line = std::string_view(*table).substr(
        start + 1, end == std::string::npos ? end : end - start - 1);
    start = end;
    size_t at = line.find(" /");  // The path, the last field, is absolute for a bound socket.
    if (at != std::string::npos) paths.emplace_back(line.substr(at + 1));
  }
  return paths;
}

// Every pathname socket bound in this network namespace right now, outside the writable trees
// and the emptied directories: /dev/null is bound over each. A writable tree's sockets are its
// project's and stay reachable, except under a tree of "/" (--allow-broad-workdir): that allows
// writes everywhere, not a connect to every daemon on the host.
void AddBoundSockets(MountPlan& plan) {
  Result<std::vector<std::string>> listed = SocketPathsByDiag();
  const std::vector<std::string> paths = listed.ok() ? std::move(*listed) : SocketPathsFromProc();
  std::vector<std::string> skip;
  std::copy_if(plan.writable.begin(), plan.writable.end(), std::back_inserter(skip),
               [](const std::string& tree) { return tree != "/"; });
  skip.insert(skip.end(), plan.socket_dirs.begin(), plan.socket_dirs.end());
  skip.insert(skip.end(), {"/tmp", "/dev/shm"});
  for (const std::string& path : paths) {
    if (plan.hidden_files.size() >= kMaxHiddenSockets) break;
    // A socket is listed once per connection: the cheap checks first, lstat once per path.
    if (std::any_of(skip.begin(), skip.end(),
                    [&path](const std::string& root) { return PathWithin(path, root); }) ||
        std::find(plan.hidden_files.begin(), plan.hidden_files.end(), path) !=
            plan.hidden_files.end()) {
      continue;
    }
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    plan.hidden_files.push_back(path);
  }
}

// /run and a real /var/run are emptied; what /etc/resolv.conf names there stays (DNS with
// --allow-net), one file, read-only. Sockets elsewhere are covered one by one.
void AddSocketDirs(MountPlan& plan) {
  for (const char* dir : {"/run", "/var/run"}) {
    if (IsDir(dir)) plan.socket_dirs.push_back(dir);
  }
  std::error_code ec;
  const std::string resolv = fs::canonical("/etc/resolv.conf", ec).string();
  if (ec) return;
  for (const std::string& dir : plan.socket_dirs) {
    if (PathBelow(resolv, dir)) {
      AddVisible(plan, resolv, resolv);
    }
  }
  AddBoundSockets(plan);
}

// Only git paths in a writable tree are bound: the rest of the tree is read-only already, or
// hidden (a worktree's git dir in a repository under the private /tmp, which its bind could not
// find).
void KeepBindsInWritableTrees(MountPlan& plan) {
  const auto outside = [&plan](const std::string& path) {
    return std::none_of(plan.writable.begin(), plan.writable.end(),
                        [&path](const std::string& tree) { return PathWithin(path, tree); });
  };
  for (std::vector<std::string>* list : {&plan.pinned, &plan.readonly}) {
    list->erase(std::remove_if(list->begin(), list->end(), outside), list->end());
  }
}

// The project's agent configuration in `dir` (the workdir, or a directory below it that has one),
// guarded like git's surface (kAgentConfigs): the next session, agent or tool there trusts it.
// A directory of which only some names are guarded is pinned like a .git directory: it cannot be
// swapped for a link to a planted one. One that is missing, or a link the user made, is guarded
// whole, it and where it leads; a shared one that is missing or a file, by its trusted names.
void AddProjectConfig(const std::string& dir, MountPlan& plan) {
  for (const AgentConfig& config : kAgentConfigs) {
    const fs::path path = fs::path(dir) / config.name;
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(path, ec);
    if (config.shared && !fs::is_directory(st) && !fs::is_symlink(st)) {
      for (const char* name : config.trusted) AddAbsent(path / name, plan);
      continue;
    }
    if (config.trusted.empty() || !IsDir(path)) {
      AddReadonly(path, plan);
      AddAbsent(path, plan);
      continue;
    }
    AddOnce(plan.pinned, path.string());
    for (const char* name : config.trusted) {
      AddReadonly(path / name, plan);
      AddAbsent(path / name, plan);
    }
  }
}

void AddGitSurface(const std::string& workdir, const UserGitConfig& user, MountPlan& plan) {
  UniqueFd dir = OpenWalkedDir(AT_FDCWD, workdir.c_str());
  std::vector<char> buf(32 << 10);
  if (dir) AddReposBelow(dir, workdir, 0, buf, user, plan);
  AddProjectConfig(workdir, plan);
}

// The surface of every writable tree in `plan` (the workdir first).
void AddGitSurfaces(const UserGitConfig& user, MountPlan& plan) {
  const std::vector<std::string> trees = plan.writable;
  AddGitSurface(trees.front(), user, plan);
  for (const std::string& tree :
       OtherSurfaceTrees(trees.front(), {trees.begin() + 1, trees.end()})) {
    AddGitSurface(tree, user, plan);
  }
}

}  // namespace

bool IsAgentConfigName(std::string_view name) { return FindAgentConfig(name) != nullptr; }

bool IsAgentConfigPath(std::string_view rel) {
  for (size_t at = 0; at <= rel.size();) {
    const size_t end = std::min(rel.find('/', at), rel.size());
    const AgentConfig* config = FindAgentConfig(rel.substr(at, end - at));
    at = end + 1;
    if (config == nullptr) continue;
    if (config->trusted.empty() || end == rel.size()) return true;
    const std::string_view next = rel.substr(at, std::min(rel.find('/', at), rel.size()) - at);
    if (std::any_of(config->trusted.begin(), config->trusted.end(),
                    [next](const char* name) { return next == name; })) {
      return true;
    }
  }
  return false;
}

std::optional<LinkedGitDir> LinkedGitDirOf(const std::string& dir) {
  for (fs::path at = dir; at.is_absolute(); at = at.parent_path()) {
    const fs::path dotgit = at / ".git";
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(dotgit, ec);
    if (!ec && fs::is_directory(st)) return std::nullopt;
    if (!ec && fs::is_regular_file(st)) {
      const std::optional<fs::path> gitdir = GitDirNamedBy(dotgit);
      if (!gitdir) return std::nullopt;
      return LinkedGitDir{gitdir->string(), CommonDirOf(*gitdir).string()};
    }
    if (at == at.root_path()) break;
  }
  return std::nullopt;
}

std::vector<std::string> OtherSurfaceTrees(const std::string& workdir,
                                           const std::vector<std::string>& writable) {
  std::vector<std::string> trees;
  for (const std::string& tree : writable) {
    if (PathWithin(tree, workdir) ||
        std::any_of(trees.begin(), trees.end(),
                    [&tree](const std::string& t) { return PathWithin(tree, t); })) {
      continue;
    }
    trees.push_back(tree);
  }
  return trees;
}

MountPlan PlanGitSurface(const std::string& workdir, const UserGitConfig& user,
                         const std::vector<std::string>& writable, SurfaceTrees trees) {
  MountPlan plan;
  plan.writable.push_back(workdir);
  plan.writable.insert(plan.writable.end(), writable.begin(), writable.end());
  if (trees == SurfaceTrees::kEvery) {
    AddGitSurfaces(user, plan);
  } else {
    AddGitSurface(workdir, user, plan);
  }
  return plan;
}

bool AddVisible(MountPlan& plan, const std::string& source, const std::string& at) {
  if (plan.visible.size() >= kMaxWritablePaths ||
      std::find(plan.visible.begin(), plan.visible.end(), at) != plan.visible.end()) {
    return false;
  }
  plan.visible.push_back(at);
  plan.visible_sources.push_back(source);
  plan.visible_dirs.push_back(at.substr(0, at.rfind('/')));
  return true;
}

Result<MountPlan> PlanMounts(const std::string& workdir, const std::vector<std::string>& writable,
                             const UserGitConfig& user, const MountPlan* git_surface) {
  MountPlan plan;
  plan.writable.push_back(workdir);
  for (const std::string& w : writable) plan.writable.push_back(w);
  if (plan.writable.size() > kMaxWritablePaths) {
    return Status::InvalidArgument("sandbox: at most " + std::to_string(kMaxWritablePaths - 1) +
                                   " --writable paths");
  }
  AddSocketDirs(plan);
  if (git_surface == nullptr) {
    AddGitSurfaces(user, plan);
  } else {
    plan.pinned = git_surface->pinned;
    plan.readonly = git_surface->readonly;
    plan.links = git_surface->links;
    plan.absent = git_surface->absent;
  }
  KeepBindsInWritableTrees(plan);
  MountPlan maps = IdMapsOnly();
  plan.uid_map = std::move(maps.uid_map);
  plan.gid_map = std::move(maps.gid_map);
  return plan;
}

MountPlan IdMapsOnly() {
  MountPlan plan;
  std::string uid = std::to_string(geteuid());
  std::string gid = std::to_string(getegid());
  plan.uid_map = uid + " " + uid + " 1\n";
  plan.gid_map = gid + " " + gid + " 1\n";
  return plan;
}

namespace {

int WriteIdMapFilesRaw(const MountPlan& plan, const char** step) {
  *step = "write /proc/self/setgroups";
  if (int err = WriteFileRaw("/proc/self/setgroups", "deny"); err != 0 && err != ENOENT) {
    return err;
  }
  *step = "write /proc/self/uid_map";
  if (int err = WriteFileRaw("/proc/self/uid_map", plan.uid_map.c_str())) return err;
  *step = "write /proc/self/gid_map";
  if (int err = WriteFileRaw("/proc/self/gid_map", plan.gid_map.c_str())) return err;
  return 0;
}

}  // namespace

int WriteIdMapsRaw(const MountPlan& plan, const char** step) {
  // A non-dumpable process's /proc/self files belong to root until its namespace maps a root, so
  // a non-root caller that is non-dumpable (forkbox and its children are) gets EACCES here and
  // would silently lose layer 2. Dumpable only for these three writes, then as before.
  *step = "prctl(PR_GET_DUMPABLE)";
  int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  if (dumpable < 0) return errno;
  *step = "prctl(PR_SET_DUMPABLE, 1) for the id maps";
  if (dumpable != 1 && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) return errno;
  int err = WriteIdMapFilesRaw(plan, step);
  if (dumpable != 1 && prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0) != 0 && err == 0) {
    *step = "prctl(PR_SET_DUMPABLE) after the id maps";
    err = errno;
  }
  return err;
}

namespace {

// Detached clones (open_tree) of `paths`, taken before the mounts change. 0 or errno.
// Detached clones of `paths` (recursive), into fds[0..count). With `no_symlinks` (the writable
// trees, canonical when the policy was resolved) no link is followed (ELOOP): one in them now was
// planted by a task and would carry the writable tree wherever it leads.
int CloneTreesRaw(const std::vector<std::string>& paths, int* fds, size_t count, const char* what,
                  bool no_symlinks, const char** step) {
  for (size_t i = 0; i < count; ++i) {
    *step = what;
    const UniqueFd at =
        OpenAt2(AT_FDCWD, paths[i].c_str(), O_PATH, no_symlinks ? kResolveNoLinks : 0);
    if (!at) return errno;
    fds[i] = CloneTreeRaw(at.get());
    if (fds[i] < 0) return errno;
  }
  return 0;
}

// Attaches a detached tree at `path`, then closes it.
int AttachRaw(int tree, const char* path) {
  int err = 0;
  if (syscall(SYS_move_mount, tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) != 0) err = errno;
  close(tree);
  return err;
}

int MountSocketDirsRaw(const MountPlan& plan, const char** step) {
  for (const std::string& dir : plan.socket_dirs) {
    *step = "mount empty tmpfs over a socket directory";
    if (mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755") != 0) {
      return errno;
    }
  }
  return 0;
}

int SealSocketDirsRaw(const MountPlan& plan, const char** step) {
  for (const std::string& dir : plan.socket_dirs) {
    *step = "mount_setattr(socket directory, RDONLY)";
    if (int err = SetAttrRaw(AT_FDCWD, dir.c_str(), 0, MOUNT_ATTR_RDONLY)) return err;
  }
  return 0;
}

// The temp dir's short link (or, without a target, the temp dir itself) goes on the fresh
// /dev/shm, where nothing else can be yet.
int MountPrivateTmpfsRaw(const MountPlan& plan, const char** step) {
  *step = "mount tmpfs /tmp";
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) return errno;
  struct stat st;
  if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) {
    *step = "mount tmpfs /dev/shm";
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) {
      return errno;
    }
    if (!plan.tmp_link.empty() && !plan.tmp_link_target.empty()) {
      *step = "symlink (the temp dir's short path on /dev/shm)";
      if (symlink(plan.tmp_link_target.c_str(), plan.tmp_link.c_str()) != 0) return errno;
    } else if (!plan.tmp_link.empty()) {
      *step = "mkdir (the temp dir on the private /dev/shm)";
      if (mkdir(plan.tmp_link.c_str(), 0700) != 0) return errno;
    }
  }
  return 0;
}

// A path under /tmp bound back, read-only, onto a fresh mount point on the private tmpfs: a
// directory for a directory (a --readable one), an empty file for a file.
int PlaceVisibleRaw(const MountPlan& plan, size_t i, int tree, const char** step) {
  const char* path = plan.visible[i].c_str();
  *step = "mkdir -p (visible path's directory)";
  int err = MakeDirsRaw(plan.visible_dirs[i].c_str());
  struct stat st;
  *step = "fstat (visible path's tree)";
  if (err == 0 && fstat(tree, &st) != 0) err = errno;
  if (err == 0 && S_ISDIR(st.st_mode)) {
    *step = "mkdir (visible directory's mount point)";
    if (mkdir(path, 0700) != 0 && errno != EEXIST) err = errno;
  } else if (err == 0) {
    // Read-only: the point may be the file itself, in a visible directory bound read-only before;
    // no link followed and no wait on a FIFO there.
    *step = "create (visible file's mount point)";
    int point = open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0700);
    if (point < 0) err = errno;
    if (point >= 0) close(point);
  }
  if (err != 0) {
    close(tree);
    return err;
  }
  *step = "move_mount(visible path)";
  return AttachRaw(tree, path);
}

// Nothing to hide at `errno` after a failed mount: ENOENT, not visible here at all (under the
// private /tmp, or gone); EACCES, a directory on the way this namespace's root may not search
// (another user's 0700 directory: its owner is not mapped here, so our capabilities do not
// apply). The tools have no right this process lacks, so they cannot reach it either.
namespace {
bool Unreachable(int err) { return err == ENOENT || err == EACCES; }
}  // namespace

int HideCredentialsRaw(const MountPlan& plan, const char** step) {
  for (const std::string& p : plan.hidden_dirs) {
    *step = "mount empty tmpfs over a credential store";
    if (mount("tmpfs", p.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,mode=000") != 0 &&
        !Unreachable(errno)) {
      return errno;
    }
  }
  for (const std::string& p : plan.hidden_files) {
    *step = "bind /dev/null over a credential file or a daemon's socket";
    if (mount("/dev/null", p.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      if (Unreachable(errno)) continue;
      return errno;
    }
    if (int err = SetAttrRaw(AT_FDCWD, p.c_str(), 0, MOUNT_ATTR_RDONLY)) return err;
  }
  return 0;
}

// Binds `path` onto itself (read-only with `attr` MOUNT_ATTR_RDONLY) by descriptor: it is opened
// once without following any link, cloned, given its attributes while detached, and attached onto
// that same open inode. The plan's git paths are link-free when planned (a link met there is
// planned as its target), so a link in one now was planted since, by a tool running alongside
// (ELOOP); a bind by path would have followed it and protected the wrong tree.
int BindOntoItselfRaw(const char* path, uint64_t attr) {
  const UniqueFd at = OpenAt2(AT_FDCWD, path, O_PATH, kResolveNoLinks);
  if (!at) return errno;
  const UniqueFd tree(CloneTreeRaw(at.get()));
  if (!tree) return errno;
  if (attr != 0) {
    if (int err = SetAttrRaw(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, attr)) return err;
  }
  if (syscall(SYS_move_mount, tree.get(), "", at.get(), "",
              MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
    return errno;
  }
  return 0;
}

int BindGitRaw(const MountPlan& plan, const char** step) {
  for (const std::string& p : plan.pinned) {
    *step = "bind .git onto itself (no symbolic link)";
    if (int err = BindOntoItselfRaw(p.c_str(), 0)) return err;
  }
  for (const std::string& p : plan.readonly) {
    *step = "bind git's trusted files read-only (no symbolic link)";
    if (int err = BindOntoItselfRaw(p.c_str(), MOUNT_ATTR_RDONLY)) return err;
  }
  return 0;
}

}  // namespace

int SetUpMountsRaw(const MountPlan& plan, const char** step) {
  *step = "mount(/, MS_REC|MS_PRIVATE)";
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  // Detached copies of the writable trees, taken while they are still writable.
  int trees[kMaxWritablePaths];
  size_t count = plan.writable.size() <= kMaxWritablePaths ? plan.writable.size() : 0;
  if (int err = CloneTreesRaw(plan.writable, trees, count,
                              "open_tree(writable path, CLONE|RECURSIVE, no symbolic link)", true,
                              step)) {
    return err;
  }
  *step = "mount_setattr(/, RECURSIVE, RDONLY)";
  if (int err = SetAttrRaw(AT_FDCWD, "/", AT_RECURSIVE, MOUNT_ATTR_RDONLY)) return err;
  // Read-only clones of what must stay visible under /tmp, taken before the tmpfs hides it.
  int visible[kMaxWritablePaths];
  size_t visible_count = plan.visible.size() <= kMaxWritablePaths ? plan.visible.size() : 0;
  if (int err = CloneTreesRaw(plan.visible_sources, visible, visible_count,
                              "open_tree(visible path, CLONE, no symbolic link)", true, step)) {
    return err;
  }
  if (int err = MountPrivateTmpfsRaw(plan, step)) return err;
  if (int err = MountSocketDirsRaw(plan, step)) return err;
  // Programs first: a writable tree may sit above one of their directories.
  for (size_t i = 0; i < visible_count; ++i) {
    if (int err = PlaceVisibleRaw(plan, i, visible[i], step)) return err;
  }
  for (size_t i = 0; i < count; ++i) {
    if (plan.trees_read_only) {
      *step = "mount_setattr(writable tree, RECURSIVE, RDONLY) for --sandbox read-only";
      if (int err = SetAttrRaw(trees[i], "", AT_EMPTY_PATH | AT_RECURSIVE, MOUNT_ATTR_RDONLY)) {
        return err;
      }
    }
    // A writable tree under /tmp needs its mount point on the fresh tmpfs.
    *step = "mkdir -p (writable mount point)";
    if (int err = MakeDirsRaw(plan.writable[i].c_str())) return err;
    *step = "move_mount(writable tree)";
    if (int err = AttachRaw(trees[i], plan.writable[i].c_str())) return err;
  }
  // Writable trees below /run needed their mount points on its tmpfs first.
  if (int err = SealSocketDirsRaw(plan, step)) return err;
  if (int err = BindGitRaw(plan, step)) return err;
  if (int err = HideCredentialsRaw(plan, step)) return err;
  *step = kMountProcStep;
  if (plan.mount_proc &&
      mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return errno;
  }
  return 0;
}

namespace {

// The process's one layer-2 probe. Its child has given its verdict when the probe returns; once its
// namespaces are torn down it is reaped by the next Layer2Available (or by the handle at exit).
struct Layer2Probe {
  std::mutex mu;
  bool done = false;
  bool available = false;
  std::string reason;
  ChildProcess child;
};

Layer2Probe& TheLayer2Probe() {
  static Layer2Probe probe;
  return probe;
}

struct ProbeChild {
  const MountPlan* plan;
  int verdict_fd;  // Gets a ProbeVerdict.
};

// The errno of the failing step (0: none) and the step: a literal of this binary, at the same
// address in the caller whether the child shared its memory or had a copy (sanitizer builds).
struct ProbeVerdict {
  int err = 0;
  const char* step = "";
};

// In the new namespaces, on the caller's memory (CloneProcess): raw calls only.
int RunProbeChild(void* arg) {
  const auto* c = static_cast<const ProbeChild*>(arg);
  ProbeVerdict v;
  v.err = WriteIdMapsRaw(*c->plan, &v.step);
  if (v.err == 0) v.err = SetUpMountsRaw(*c->plan, &v.step);
  (void)!write(c->verdict_fd, &v, sizeof(v));
  _exit(0);
}

// Why the probe's namespaces could not be set up, naming the step; a refused /proc gets the
// usual cause: a container's masked /proc paths (the kernel then refuses a fresh proc mount in a
// user namespace, since it would reveal them).
std::string ProbeFailure(int err, const char* step) {
  std::string why = Status::FromErrno(err, std::string("namespace mount setup: ") + step).message();
  if (err == EPERM && std::strcmp(step, kMountProcStep) == 0) {
    why +=
        "; the kernel refuses a fresh /proc in a user namespace while paths of this /proc are "
        "masked, as a container's are (Docker: --security-opt systempaths=unconfined)";
  }
  return why;
}

// Clones the throwaway child into new namespaces and reads its verdict. With shared memory (no
// page tables copied) the caller resumes once the child is done, without waiting for its
// namespaces to be torn down.
void ProbeLocked(Layer2Probe& probe) {
  probe.done = true;
  const MountPlan plan = IdMapsOnly();  // Probe the mechanics only; "/" stays read-only.
  Result<Pipe> verdict = MakePipe();
  if (!verdict.ok()) {
    probe.reason = verdict.status().WithContext("namespace probe").message();
    return;
  }
  ProbeChild child{&plan, verdict->write.get()};
  // The child's id-map writes make the shared memory dumpable for a moment (WriteIdMapsRaw); the
  // caller's own setting is put back even if the child dies in between.
  const int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // No handler may run on the child's stack.
  int pidfd = -1;
  long pid = CloneProcess(RunProbeChild, &child, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID,
                          /*share_memory=*/true, &pidfd);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (dumpable >= 0) (void)prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
  if (pid < 0) {
    probe.reason =
        Status::FromErrno(clone_errno, "clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)").message();
    return;
  }
  probe.child = ChildProcess(static_cast<pid_t>(pid), UniqueFd(pidfd), /*own_group=*/false);
  verdict->write.reset();
  ProbeVerdict v;
  ssize_t got = -1;
  while ((got = read(verdict->read.get(), &v, sizeof(v))) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof(v))) {
    probe.reason = got < 0 ? Status::FromErrno(errno, "read(namespace probe)").message()
                           : "namespace probe died without a verdict";
  } else if (v.err == 0) {
    probe.available = true;
  } else {
    probe.reason = ProbeFailure(v.err, v.step);
  }
}

}  // namespace

bool Layer2Available(std::string* why) {
  Layer2Probe& probe = TheLayer2Probe();
  std::lock_guard<std::mutex> lock(probe.mu);
  if (!probe.done) {
    ProbeLocked(probe);
  } else if (probe.child.running()) {
    (void)probe.child.TryWait();  // Never waits for a teardown; the handle reaps at exit.
  }
  if (!probe.available && why != nullptr) *why = probe.reason;
  return probe.available;
}

void ReleaseLayer2ProbeChild() {
  Layer2Probe& probe = TheLayer2Probe();
  std::lock_guard<std::mutex> lock(probe.mu);
  if (probe.child.running()) (void)probe.child.TryWait();
  if (probe.child.running()) (void)probe.child.Release();
}

}  // namespace forkbox::sandbox
