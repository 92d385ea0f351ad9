#include "sandbox/git_surface.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <optional>
#include <set>
#include <span>
#include <string_view>

#include "base/file.h"
#include "base/path.h"
#include "sandbox/git_config.h"
#include "sandbox/namespaces.h"

namespace forkbox::sandbox {
namespace {

using Entry = GitSurfaceGuard::Entry;
using Kind = Entry::Kind;

// What a guard's name must lead to (ReopenDirectory).
constexpr char kStartedIn[] = "the workdir the session started in";
constexpr char kGuarded[] = "the directory whose git surface is guarded";

constexpr size_t kMaxFileBytes = 16 << 20;
// What one walk of the surface may hold. A record past it is refused; a surface that grew past it
// since is put back whole (WalkBudget).
constexpr size_t kMaxEntries = 100000;
constexpr size_t kMaxSurfaceBytes = size_t{256} << 20;
constexpr int kMaxDepth = 16;

std::string DirOf(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash);
}
std::string NameOf(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? rel : rel.substr(slash + 1);
}
Entry ReadEntryAt(int parent, const std::string& name) {
  Entry e;
  struct stat st;
  if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return e;
  e.mode = st.st_mode & 07777;
  if (S_ISDIR(st.st_mode)) {
    e.kind = Kind::kDir;
  } else if (S_ISLNK(st.st_mode)) {
    e.kind = Kind::kSymlink;
    char buf[4096];
    ssize_t n = readlinkat(parent, name.c_str(), buf, sizeof(buf));
    e.data.assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
  } else if (S_ISREG(st.st_mode)) {
    e.kind = Kind::kFile;
    int fd = openat(parent, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      e.kind = Kind::kOther;  // Unreadable: differs from anything recorded, so it is replaced.
      return e;
    }
    UniqueFd owned(fd);
    Result<std::string> text = ReadToEnd(fd, kMaxFileBytes, name);
    if (text.ok()) e.data = std::move(*text);
    if (!text.ok()) e.kind = Kind::kOther;
  } else {
    e.kind = Kind::kOther;
  }
  return e;
}

Entry ReadEntry(int root, const std::string& rel) {
  Result<UniqueFd> parent = OpenDirBeneath(root, DirOf(rel), O_PATH);
  if (!parent.ok()) return Entry{};
  return ReadEntryAt(parent->get(), NameOf(rel));
}

// What a walk may still read. `why` says what stopped one that is not whole; `unlisted` holds
// the directories it could not list (another user's, or chmodded), walked as their entry alone.
struct WalkBudget {
  size_t entries = kMaxEntries;
  size_t bytes = kMaxSurfaceBytes;
  std::string why;
  std::vector<std::string> unlisted;
};

// Every name in the directory `rel`; nullopt when it cannot be opened and listed.
std::optional<std::vector<std::string>> ListWhole(int root, const std::string& rel) {
  Result<UniqueFd> dir = OpenDirBeneath(root, rel, O_RDONLY);
  if (!dir.ok()) return std::nullopt;
  return ListDirNames(dir->get());
}

// Records `rel` and, for a directory, everything below it (one it cannot list as itself alone,
// in `budget.unlisted`). False when the walk is not whole, as `budget.why` says: the budget ran
// out, or a directory kMaxDepth down is not empty. What it did not see cannot be compared entry
// by entry.
bool Walk(int root, const std::string& rel, int depth, WalkBudget& budget,
          std::map<std::string, Entry>& out) {
  if (budget.entries == 0) {
    budget.why = "more than " + std::to_string(kMaxEntries) + " entries";
    return false;
  }
  Entry e = ReadEntry(root, rel);
  --budget.entries;
  if (e.data.size() > budget.bytes) {
    budget.why = "more than " + std::to_string(kMaxSurfaceBytes >> 20) + " MiB";
    return false;
  }
  budget.bytes -= e.data.size();
  const bool dir = e.kind == Kind::kDir;
  out[rel] = std::move(e);
  if (!dir) return true;
  const std::optional<std::vector<std::string>> names = ListWhole(root, rel);
  if (!names) {
    budget.unlisted.push_back(rel);
    return true;
  }
  if (depth >= kMaxDepth && !names->empty()) {
    budget.why = rel + " goes more than " + std::to_string(kMaxDepth) + " levels down";
    return false;
  }
  for (const std::string& name : *names) {
    if (!Walk(root, rel + "/" + name, depth + 1, budget, out)) return false;
  }
  return true;
}

// Whether a directory the walk could not list (`budget.unlisted`) has entries in the record
// `recorded`: it was listed then, so what is in it now cannot be compared. Says so in `why`.
bool ListedOnce(const std::map<std::string, Entry>& recorded, WalkBudget& budget) {
  for (const std::string& dir : budget.unlisted) {
    const auto below = recorded.lower_bound(dir + "/");
    if (below != recorded.end() && below->first.rfind(dir + "/", 0) == 0) {
      budget.why = dir + " cannot be listed any more";
      return true;
    }
  }
  return false;
}

// chmod of `name` in `dir` itself, never where a link there leads (one a tool swapped in since
// the walk would otherwise get the mode, wherever it points). 0 or errno (EOPNOTSUPP: a link).
int ChmodNoFollow(int dir, const char* name, unsigned mode) {
  return fchmodat(dir, name, mode, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
}

// rm -rf beneath the root, never through a symlink. 0 or errno.
int RemoveAt(int root, const std::string& rel) {
  Result<UniqueFd> parent = OpenDirBeneath(root, DirOf(rel), O_PATH);
  if (!parent.ok()) return ENOENT;
  return RemoveTreeAt(parent->get(), NameOf(rel).c_str());
}

// Puts `e` at `rel` (whatever is there goes first). 0 or errno.
int WriteAt(int root, const std::string& rel, const Entry& e) {
  if (int err = RemoveAt(root, rel)) return err;
  if (e.kind == Kind::kAbsent) return 0;
  Result<UniqueFd> parent = OpenDirBeneath(root, DirOf(rel), O_PATH);
  if (!parent.ok()) return ENOENT;
  const int p = parent->get();
  const std::string owned_name = NameOf(rel);
  const char* name = owned_name.c_str();
  switch (e.kind) {
    case Kind::kDir:
      if (mkdirat(p, name, 0700) != 0) return errno;
      return ChmodNoFollow(p, name, e.mode);
    case Kind::kSymlink:
      return symlinkat(e.data.c_str(), p, name) == 0 ? 0 : errno;
    case Kind::kFile: {
      int fd = openat(p, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0) return errno;
      UniqueFd file(fd);
      size_t done = 0;
      while (done < e.data.size()) {
        ssize_t n = write(fd, e.data.data() + done, e.data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno;
        done += static_cast<size_t>(n);
      }
      return fchmod(fd, e.mode) == 0 ? 0 : errno;
    }
    default:
      return 0;  // Sockets, FIFOs, devices are never recreated.
  }
}

// The keys a fresh `git init` or `git clone` writes, none of which runs a program or reads
// config from elsewhere (no core.fsmonitor, core.hooksPath, core.pager, include.path, ...).
constexpr std::string_view kSafeKeys[] = {"core.repositoryformatversion",
                                          "core.filemode",
                                          "core.bare",
                                          "core.logallrefupdates",
                                          "core.ignorecase",
                                          "core.precomposeunicode",
                                          "core.symlinks",
                                          "core.worktree",
                                          "extensions.objectformat",
                                          "user.name",
                                          "user.email",
                                          "init.defaultbranch",
                                          "branch.*.remote",
                                          "branch.*.merge",
                                          "remote.*.url",
                                          "remote.*.fetch"};

// Whether `table` (a constant one) holds `s`.
bool InTable(std::span<const std::string_view> table, std::string_view s) {
  return std::find(table.begin(), table.end(), s) != table.end();
}

}  // namespace

bool GitSurfaceGuard::ConfigIsSafe(const std::string& text, std::string* why) {
  std::string section;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = Trim(text.substr(start, end - start));
    start = end + 1;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    bool ok = true;
    if (line[0] == '[') {
      section = SectionOf(line);
      ok = !section.empty();
    } else {
      const std::string key = Lower(Trim(line.substr(0, line.find('='))));
      ok = !section.empty() && line.back() != '\\' && InTable(kSafeKeys, section + "." + key) &&
           line.find("ext::") == std::string::npos;
    }
    if (!ok) {
      if (why != nullptr) *why = line;
      return false;
    }
  }
  return true;
}

namespace {

// The writable trees but `tree`, for its guard: the workdir and the --writable paths.
std::vector<std::string> TreesBeside(const std::string& tree, const std::string& workdir,
                                     const std::vector<std::string>& writable) {
  std::vector<std::string> others = {workdir};
  std::copy_if(writable.begin(), writable.end(), std::back_inserter(others),
               [&tree](const std::string& w) { return w != tree; });
  return others;
}

}  // namespace

Result<GitSurfaceGuard> GitSurfaceGuard::Take(const std::string& workdir, const UserGitConfig& user,
                                              MountPlan* surface,
                                              const std::vector<std::string>& writable,
                                              std::optional<FileIdentity> workdir_id) {
  // The walk goes by name: checked before it and again by Record after it.
  if (workdir_id) {
    Result<UniqueFd> named = ReopenDirectory(workdir, *workdir_id, kStartedIn);
    if (!named.ok()) return named.status();
  }
  MountPlan plan = PlanGitSurface(workdir, user, writable, SurfaceTrees::kEvery);
  Result<GitSurfaceGuard> guard = Record(workdir, writable, user, plan, workdir_id);
  if (!guard.ok()) return guard;
  for (const std::string& tree : OtherSurfaceTrees(workdir, writable)) {
    Result<GitSurfaceGuard> other = Record(tree, TreesBeside(tree, workdir, writable), user, plan);
    if (!other.ok()) return other.status().WithContext("--writable " + tree);
    guard->trees_.push_back(std::move(*other));
  }
  if (surface != nullptr) *surface = std::move(plan);
  return guard;
}

Result<GitSurfaceGuard> GitSurfaceGuard::TakeTree(const std::string& workdir,
                                                  const std::vector<std::string>& writable,
                                                  const UserGitConfig& user,
                                                  FileIdentity expected) {
  return Record(workdir, writable, user,
                PlanGitSurface(workdir, user, writable, SurfaceTrees::kWorkdirOnly), expected);
}

bool GitSurfaceGuard::empty() const {
  return roots_.empty() && git_dirs_.empty() &&
         std::all_of(trees_.begin(), trees_.end(),
                     [](const GitSurfaceGuard& tree) { return tree.empty(); });
}

Result<GitSurfaceGuard> GitSurfaceGuard::Record(const std::string& workdir,
                                                const std::vector<std::string>& writable,
                                                const UserGitConfig& user, const MountPlan& plan,
                                                std::optional<FileIdentity> expected) {
  GitSurfaceGuard guard;
  guard.workdir_ = workdir;
  guard.writable_ = writable;
  guard.user_ = user;
  if (expected) {
    Result<UniqueFd> named = ReopenDirectory(workdir, *expected, kStartedIn);
    if (!named.ok()) return named.status();
    guard.root_ = std::move(*named);
  } else {
    // A canonical path has no link on its way: one there now was put there since.
    guard.root_ = OpenAt2(AT_FDCWD, workdir.c_str(), O_PATH | O_DIRECTORY, kResolveNoLinks);
    if (!guard.root_) return Status::FromErrno(errno, "open(" + workdir + ") through no link");
  }
  // Only what lies below the workdir is writable by tools.
  for (const std::string& p : plan.pinned) {
    if (std::optional<std::string> rel = PathBelow(p, workdir)) guard.git_dirs_.push_back(*rel);
  }
  for (const auto* list : {&plan.readonly, &plan.links, &plan.absent}) {
    for (const std::string& p : *list) {
      if (std::optional<std::string> rel = PathBelow(p, workdir)) guard.roots_.push_back(*rel);
    }
  }
  for (const std::string& g : guard.git_dirs_) {
    guard.entries_[g] = ReadEntry(guard.root_.get(), g);
  }
  for (const std::string& p : plan.operations) {
    const std::optional<std::string> rel = PathBelow(p, workdir);
    if (!rel) continue;
    Entry e = ReadEntry(guard.root_.get(), *rel);
    if (e.kind != Kind::kAbsent) guard.operations_[*rel] = std::move(e);
  }
  WalkBudget budget;
  for (const std::string& r : guard.roots_) {
    if (!Walk(guard.root_.get(), r, 0, budget, guard.entries_)) {
      return Status::ResourceExhausted("git trust surface: " + r + " cannot be recorded whole (" +
                                       budget.why + ")");
    }
  }
  return guard;
}

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A trust-surface path of a repository that appeared after the record: keeps only what git init
// makes (safe config, *.sample hooks, info/), removes the rest. Agent config that appeared (a
// nested `sub/.forkbox`) is removed whole: nothing a tool makes there is the user's.
void CleanNewPath(int root, const std::string& rel, std::vector<std::string>& lines) {
  const Entry e = ReadEntry(root, rel);
  const std::string name = NameOf(rel);
  if (e.kind == Kind::kAbsent) return;
  if (IsAgentConfigPath(rel)) {
    int err = RemoveAt(root, rel);
    lines.push_back((err == 0 ? "removed " : "could NOT remove ") + rel +
                    " (agent config a tool created: an agent or tool started there trusts it)");
    return;
  }
  if (name == "info" && e.kind == Kind::kDir) return;
  std::string why = "not made by git init";
  if (name == "config" && e.kind == Kind::kFile) {
    if (GitSurfaceGuard::ConfigIsSafe(e.data, &why)) return;
    why = "config line \"" + why + "\"";
  }
  if (name == "hooks" && e.kind == Kind::kDir) {
    const std::optional<std::vector<std::string>> hooks = ListWhole(root, rel);
    if (!hooks) {  // Chmodded by a tool: what it hides cannot be told from a sample.
      int err = RemoveAt(root, rel);
      lines.push_back((err == 0 ? "removed " : "could NOT remove ") + rel +
                      " (in a repository created by a tool: it cannot be listed)");
      return;
    }
    for (const std::string& hook : *hooks) {
      const std::string path = rel + "/" + hook;
      if (EndsWith(hook, ".sample") && ReadEntry(root, path).kind == Kind::kFile) continue;
      int err = RemoveAt(root, path);
      lines.push_back((err == 0 ? "removed " : "could NOT remove ") + path +
                      " (a hook in a repository created by a tool)");
    }
    return;
  }
  int err = RemoveAt(root, rel);
  lines.push_back((err == 0 ? "removed " : "could NOT remove ") + rel +
                  " (in a repository created by a tool: " + why + ")");
}

}  // namespace

namespace {

void Note(std::vector<std::string>& lines, int err, const std::string& what,
          const std::string& path) {
  lines.push_back((err == 0 ? what + " " : "could NOT " + what + " ") + path);
}

bool InAny(const std::vector<std::string>& roots, const std::string& path) {
  return std::any_of(roots.begin(), roots.end(),
                     [&path](const std::string& r) { return PathWithin(path, r); });
}

}  // namespace

std::vector<std::string> GitSurfaceGuard::ForgetGoneRepos(std::vector<std::string>& lines) const {
  std::vector<std::string> gone;
  for (const std::string& g : git_dirs_) {
    const Entry now = ReadEntry(root_.get(), g);
    if (now.kind == Kind::kDir) continue;
    gone.push_back(g);
    if (now.kind != Kind::kAbsent) {
      Note(lines, RemoveAt(root_.get(), g), "remove", g + " (it replaced a guarded directory)");
    }
  }
  return gone;
}

std::map<std::string, Entry> GitSurfaceGuard::WalkCurrent(const std::vector<std::string>& gone,
                                                          std::vector<std::string>& whole,
                                                          std::vector<std::string>& lines) const {
  std::map<std::string, Entry> current;
  WalkBudget budget;
  for (const std::string& r : roots_) {
    if (InAny(gone, r)) continue;
    WalkBudget mine = budget;
    std::map<std::string, Entry> walked;
    if (Walk(root_.get(), r, 0, mine, walked) && !ListedOnce(entries_, mine)) {
      budget = std::move(mine);
      current.merge(walked);
      continue;
    }
    // Not seen whole, so not compared: everything there goes, and the record comes back.
    whole.push_back(r);
    int err = RemoveAt(root_.get(), r);
    for (const auto& [path, recorded] : entries_) {
      if (!PathWithin(path, r)) continue;
      const int put = WriteAt(root_.get(), path, recorded);
      if (err == 0) err = put;
    }
    lines.push_back((err == 0 ? "restored " : "could NOT restore ") + r + " whole (" + mine.why +
                    ")");
  }
  return current;
}

void GitSurfaceGuard::RestoreRecorded(const std::vector<std::string>& gone,
                                      std::vector<std::string>& lines) const {
  const int root = root_.get();
  std::vector<std::string> whole;
  const std::map<std::string, Entry> current = WalkCurrent(gone, whole, lines);
  for (auto it = current.rbegin(); it != current.rend(); ++it) {
    if (entries_.count(it->first) == 0) Note(lines, RemoveAt(root, it->first), "remove", it->first);
  }
  for (const auto& [path, recorded] : entries_) {
    if (InAny(gone, path) || InAny(whole, path) ||
        std::find(git_dirs_.begin(), git_dirs_.end(), path) != git_dirs_.end()) {
      continue;
    }
    auto it = current.find(path);
    const Entry now = it == current.end() ? ReadEntry(root, path) : it->second;
    if (now == recorded) continue;
    if (recorded.kind == Kind::kDir && now.kind == Kind::kDir) {
      Result<UniqueFd> parent = OpenDirBeneath(root, DirOf(path), O_PATH);
      const int err =
          parent.ok() ? ChmodNoFollow(parent->get(), NameOf(path).c_str(), recorded.mode) : ENOENT;
      Note(lines, err, "restore the mode of", path);
      continue;
    }
    Note(lines, WriteAt(root, path, recorded),
         recorded.kind == Kind::kAbsent ? "remove" : "restore", path);
  }
}

void GitSurfaceGuard::CleanNewPaths(const std::vector<std::string>& paths,
                                    const std::vector<std::string>& gone,
                                    std::vector<std::string>& lines) const {
  for (const std::string& p : paths) {
    const std::optional<std::string> rel = PathBelow(p, workdir_);
    if (!rel) continue;
    const bool recorded = std::any_of(roots_.begin(), roots_.end(), [&](const std::string& r) {
      return PathWithin(*rel, r) && !InAny(gone, r);
    });
    if (!recorded) CleanNewPath(root_.get(), *rel, lines);
  }
}

MountPlan GitSurfaceGuard::CleanNewSurface(const std::vector<std::string>& gone,
                                           std::vector<std::string>& lines) const {
  MountPlan plan = PlanGitSurface(workdir_, user_, writable_, SurfaceTrees::kWorkdirOnly);
  // New links first, then the surface walked again without them: what a new link leads to is
  // not a surface of its own (a tool's `sub/.git -> ../src` removed the user's src/ before).
  const size_t before = lines.size();
  CleanNewPaths(plan.links, gone, lines);
  if (lines.size() != before)
    plan = PlanGitSurface(workdir_, user_, writable_, SurfaceTrees::kWorkdirOnly);
  for (const auto* list : {&plan.readonly, &plan.links, &plan.absent}) {
    CleanNewPaths(*list, gone, lines);
  }
  return plan;
}

namespace {

// The merge strategies git carries itself; any other is `git-merge-NAME`, found on $PATH, or in
// the worktree when NAME holds a slash (`x/../evil` ran ./evil beside a `git-merge-x/`).
constexpr std::string_view kGitsOwnStrategies[] = {"ort",     "recursive", "resolve",
                                                   "octopus", "ours",      "subtree"};
bool IsGitsOwnStrategy(std::string_view name) {
  return name.empty() || InTable(kGitsOwnStrategies, name);
}

// A rebase todo line git runs as a shell command: `exec` or `x` first (any case, any blank
// after it: looser than git's parser, so a false match only drops more).
bool IsExecLine(std::string_view line) {
  const size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) return false;
  line.remove_prefix(start);
  const std::string word(line.substr(0, line.find_first_of(std::string_view(" \t\r\v\f\0", 6))));
  return Lower(word) == "x" || Lower(word) == "exec";
}

std::vector<std::string> LinesOf(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The strategy a rebase's `strategy` file or a cherry-pick's `opts` (config: options.strategy)
// names that is not git's own, or "".
std::string ForeignStrategy(const std::string& name, const std::string& data) {
  if (name == "strategy") {
    const std::string value = data.substr(0, data.find_last_not_of("\r\n") + 1);
    return IsGitsOwnStrategy(value) ? "" : value;
  }
  // Any section's: loose where git is strict (a key read in another section than git reads it
  // in only undoes more).
  for (const GitConfigEntry& e : GitConfigEntries(data)) {
    if (e.key == "strategy" && !IsGitsOwnStrategy(e.value)) return e.value;
  }
  return "";
}

// The todo `now` without the exec lines that `was` (the record) did not hold.
void DropNewExecLines(int root, const std::string& rel, const Entry& now, const Entry& was,
                      std::vector<std::string>& lines) {
  std::set<std::string> recorded;
  for (const std::string& line : LinesOf(was.kind == Kind::kFile ? was.data : "")) {
    if (IsExecLine(line)) recorded.insert(line);
  }
  Entry kept = now;
  kept.data.clear();
  std::vector<std::string> dropped;
  for (const std::string& line : LinesOf(now.data)) {
    if (IsExecLine(line) && recorded.count(line) == 0) {
      dropped.push_back(line);
    } else {
      kept.data += line + "\n";
    }
  }
  if (dropped.empty()) return;
  Note(lines, WriteAt(root, rel, kept),
       "remove " + std::to_string(dropped.size()) + " exec line(s) from",
       rel + " (a tool's: `git rebase --continue` would run \"" + dropped.front() + "\")");
}

// Undoes what the operation file `rel`, now `now` and recorded as `was`, would make git run.
void UndoOperation(int root, const std::string& rel, const Entry& now, const Entry& was,
                   std::vector<std::string>& lines) {
  const std::string name = NameOf(rel);
  if (name == "rebase-merge" || name == "sequencer") {
    if (now.kind == Kind::kDir) return;
    Note(lines, RemoveAt(root, rel), "remove",
         rel + " (not a directory: git would read the operation's todo where it leads)");
    return;
  }
  const std::string continues = rel.find("/sequencer/") != std::string::npos
                                    ? "`git cherry-pick --continue`"
                                    : "`git rebase --continue`";
  std::string runs;
  if (now.kind != Kind::kFile) {
    runs = "what it leads to";
  } else if (name == "git-rebase-todo") {
    DropNewExecLines(root, rel, now, was, lines);
    return;
  } else if (const std::string strategy = ForeignStrategy(name, now.data); !strategy.empty()) {
    runs = "git-merge-" + strategy;
  } else {
    return;
  }
  Note(lines, WriteAt(root, rel, was), was.kind == Kind::kAbsent ? "remove" : "restore",
       rel + " (a tool's: " + continues + " would run " + runs + ")");
}

}  // namespace

void GitSurfaceGuard::UndoOperations(const MountPlan& plan, std::vector<std::string>& lines) const {
  for (const std::string& path : plan.operations) {
    const std::optional<std::string> rel = PathBelow(path, workdir_);
    if (!rel) continue;
    const Entry now = ReadEntry(root_.get(), *rel);
    const auto it = operations_.find(*rel);
    const Entry was = it == operations_.end() ? Entry{} : it->second;
    if (now.kind != Kind::kAbsent && !(now == was))
      UndoOperation(root_.get(), *rel, now, was, lines);
  }
}

std::vector<std::string> GitSurfaceGuard::Restore(After after) {
  std::vector<std::string> lines;
  if (left_out_.empty()) {
    lines = RestoreTree(after);
  } else {
    lines.push_back("not put back: " + left_out_);
  }
  for (GitSurfaceGuard& tree : trees_) {
    for (const std::string& line : tree.RestoreTree(after)) {
      lines.push_back(tree.workdir_ + ": " + line);
    }
  }
  return lines;
}

Status GitSurfaceGuard::TreeInPlace() const {
  if (!left_out_.empty()) return Status::Ok();  // Nothing of its own is guarded.
  Result<UniqueFd> named = ReopenDirectory(workdir_, IdentityOf(root_.get()), kGuarded);
  return named.ok() ? Status::Ok() : named.status();
}

Status GitSurfaceGuard::InPlace() const {
  if (Status st = TreeInPlace(); !st.ok()) return st;
  for (const GitSurfaceGuard& tree : trees_) {
    if (Status st = tree.TreeInPlace(); !st.ok()) return st;
  }
  return Status::Ok();
}

std::vector<std::string> GitSurfaceGuard::RestoreTree(After after) {
  std::vector<std::string> lines;
  const std::vector<std::string> gone = ForgetGoneRepos(lines);
  RestoreRecorded(gone, lines);
  // Only the record goes through the descriptor: the walks below go by name, and a name that
  // leads elsewhere now would have them clean, and record, another tree.
  if (Status st = TreeInPlace(); !st.ok()) {
    lines.push_back("could NOT look for new git surface (git init, .git files): " + st.message());
    return lines;
  }
  // What appeared since: new repositories (git init), submodules, worktrees, `.git` files.
  const size_t before_cleaning = lines.size();
  const MountPlan surface = CleanNewSurface(gone, lines);
  UndoOperations(surface, lines);
  if (after == After::kDone) return lines;
  // The new record takes that walk's surface, unless cleaning changed it: then it walks again.
  const FileIdentity self = IdentityOf(root_.get());
  Result<GitSurfaceGuard> fresh = lines.size() == before_cleaning
                                      ? Record(workdir_, writable_, user_, surface, self)
                                      : TakeTree(workdir_, writable_, user_, self);
  if (fresh.ok()) {
    fresh->trees_ = std::move(trees_);
    *this = std::move(*fresh);
  }
  return lines;
}

}  // namespace forkbox::sandbox
