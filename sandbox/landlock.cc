#include "sandbox/landlock.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <set>

#include "base/file.h"

namespace forkbox::sandbox::landlock {
namespace {

// The kernel structs, declared here because the system header predates the net and scope fields.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));
struct NetPortAttr {
  uint64_t allowed_access;
  uint64_t port;
};
constexpr int kRulePathBeneath = 1;
constexpr int kRuleNetPort = 2;
constexpr uint32_t kCreateRulesetVersion = 1U << 0;

int CreateRuleset(const RulesetAttr* attr, size_t size, uint32_t flags) {
  return static_cast<int>(syscall(SYS_landlock_create_ruleset, attr, size, flags));
}
int AddRule(int fd, int type, const void* attr) {
  return static_cast<int>(syscall(SYS_landlock_add_rule, fd, type, attr, 0));
}

// O_PATH descriptors closed together: one close_range per run of consecutive numbers instead of a
// close per rule (a carved read scope has ~170 rules). At most kMax stay open. Async-signal-safe.
class FdBatch {
 public:
  FdBatch() = default;
  FdBatch(const FdBatch&) = delete;
  FdBatch& operator=(const FdBatch&) = delete;
  ~FdBatch() { Flush(); }
  void Add(int fd) {
    if (count_ == kMax) Flush();
    fds_[count_++] = fd;
  }
  void Flush() {
    for (size_t i = 1; i < count_; ++i) {  // Insertion sort: they come nearly in order.
      const int fd = fds_[i];
      size_t j = i;
      for (; j > 0 && fds_[j - 1] > fd; --j) fds_[j] = fds_[j - 1];
      fds_[j] = fd;
    }
    for (size_t i = 0; i < count_;) {
      size_t last = i;
      while (last + 1 < count_ && fds_[last + 1] == fds_[last] + 1) ++last;
      if (syscall(SYS_close_range, fds_[i], fds_[last], 0U) != 0) {
        for (size_t k = i; k <= last; ++k) close(fds_[k]);
      }
      i = last + 1;
    }
    count_ = 0;
  }

 private:
  static constexpr size_t kMax = 32;
  int fds_[kMax] = {};
  size_t count_ = 0;
};

// How a rule's path is walked: kFollow for system paths (/dev/shm may be a link), kNoSymlinks
// for a path that was canonical when the policy was resolved (--writable, --readable, the
// workdir): a link in it now was planted since (a task swapped a directory in a writable tree),
// and following it would carry the grant wherever it leads (ELOOP instead).
enum class Walk { kFollow, kNoSymlinks };

int OpenForRule(int dir_fd, const char* name, int flags, Walk walk) {
  if (walk == Walk::kFollow) return openat(dir_fd, name, flags);
  return OpenAt2(dir_fd, name, static_cast<uint64_t>(flags), kResolveNoLinks).release();
}

// Adds a rule for `name` relative to `dir_fd` (AT_FDCWD: a path); masks `access` to what a rule
// on a non-directory may carry. `type` is what a listing said: a directory is opened with
// O_DIRECTORY (no longer one: checked as kUnknown), a non-directory gets the file rights (if it
// became a directory since, fewer rights: fails closed). `open_flags`: O_NOFOLLOW or 0. The
// descriptor goes to `batch` when given, else it is closed here. Async-signal-safe.
int AddPathRuleAt(int ruleset_fd, int dir_fd, const char* name, uint64_t access, Grant::Type type,
                  int open_flags, FdBatch* batch = nullptr, Walk walk = Walk::kFollow) {
  constexpr uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
  int fd = OpenForRule(
      dir_fd, name, O_PATH | O_CLOEXEC | open_flags | (type == Grant::Type::kDir ? O_DIRECTORY : 0),
      walk);
  if (fd < 0 && errno == ENOTDIR && type == Grant::Type::kDir) {
    return AddPathRuleAt(ruleset_fd, dir_fd, name, access, Grant::Type::kUnknown, open_flags, batch,
                         walk);
  }
  if (fd < 0) return errno;
  struct stat st;
  int err = 0;
  if (type == Grant::Type::kUnknown && fstat(fd, &st) != 0) {
    err = errno;
  } else {
    if (type == Grant::Type::kOther || (type == Grant::Type::kUnknown && !S_ISDIR(st.st_mode))) {
      access &= kFileRights;  // Directory-only rights are refused (EINVAL) on files.
    }
    PathBeneathAttr attr{access, fd};
    if (AddRule(ruleset_fd, kRulePathBeneath, &attr) != 0) err = errno;
  }
  if (batch != nullptr) {
    batch->Add(fd);
  } else {
    close(fd);
  }
  return err;
}

int AddPathRule(int ruleset_fd, const char* path, uint64_t access,
                Grant::Type type = Grant::Type::kUnknown, Walk walk = Walk::kFollow) {
  return AddPathRuleAt(ruleset_fd, AT_FDCWD, path, access, type, 0, nullptr, walk);
}

// The failure of a kNoSymlinks rule for `path`.
Status RuleError(int err, const std::string& path, const char* rights) {
  if (err == ELOOP) {
    return Status::PermissionDenied(path +
                                    ": a symbolic link appeared in it since the sandbox "
                                    "policy was resolved; refusing to grant it (" +
                                    rights + ")");
  }
  return Status::FromErrno(err, "landlock_add_rule(" + path + ", " + rights + ")");
}

// Every entry of the carved directory `dir` but the denied ones and symlinks; carved entries
// recurse. An unlistable carved directory (EACCES, or a symlink now: the carved directories are
// canonical) yields nothing beneath it: fails closed. Plain readdir: the listing's d_type, no
// stat where the filesystem gives one.
void ListGrants(const std::string& dir, const std::set<std::string>& carved,
                const std::set<std::string>& denied, std::vector<Grant>& out) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR* listing = fd < 0 ? nullptr : fdopendir(fd);
  if (listing == nullptr) {
    if (fd >= 0) close(fd);
    return;
  }
  const std::string prefix = dir == "/" ? "/" : dir + "/";
  std::vector<std::string> carved_here;  // Listed after this directory is closed.
  while (const dirent* entry = readdir(listing)) {
    const char* name = entry->d_name;
    if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
    std::string child = prefix + name;
    if (denied.count(child) > 0) continue;
    if (carved.count(child) > 0) {
      carved_here.push_back(std::move(child));
      continue;
    }
    unsigned char type = entry->d_type;
    struct stat st;
    if (type == DT_UNKNOWN && fstatat(dirfd(listing), name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      type = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
    }
    if (type == DT_LNK) continue;
    out.push_back({std::move(child), type == DT_UNKNOWN ? Grant::Type::kUnknown
                                     : type == DT_DIR   ? Grant::Type::kDir
                                                        : Grant::Type::kOther});
  }
  closedir(listing);
  for (const std::string& child : carved_here) ListGrants(child, carved, denied, out);
}

// The grants, each opened beneath its directory (one open per carved directory instead of a path
// walk per entry) and never through a symbolic link: an entry that became one since the listing
// gets its rule on the link itself, which grants nothing (access is checked where a link leads),
// and a carved directory that became one fails the ruleset (they are canonical when listed).
// ENOENT: gone since the list was made.
Status AddGrants(int ruleset_fd, const std::vector<Grant>& grants) {
  std::string open_dir;
  UniqueFd dir;
  FdBatch opened;
  for (const Grant& grant : grants) {
    const size_t slash = grant.path.rfind('/');
    if (slash == std::string::npos || slash + 1 == grant.path.size()) {
      if (int err = AddPathRule(ruleset_fd, grant.path.c_str(), kReadRights, grant.type)) {
        if (err != ENOENT)
          return Status::FromErrno(err, "landlock_add_rule(" + grant.path + ", read)");
      }
      continue;
    }
    std::string parent = slash == 0 ? "/" : grant.path.substr(0, slash);
    if (!dir || parent != open_dir) {
      dir.reset(open(parent.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      open_dir = std::move(parent);
      if (!dir && errno != ENOENT) return Status::FromErrno(errno, "open " + open_dir);
    }
    int err = dir ? AddPathRuleAt(ruleset_fd, dir.get(), grant.path.c_str() + slash + 1,
                                  kReadRights, grant.type, O_NOFOLLOW, &opened)
                  : ENOENT;
    if (err != 0 && err != ENOENT) {
      return Status::FromErrno(err, "landlock_add_rule(" + grant.path + ", read)");
    }
  }
  return Status::Ok();
}

Status AddReadScope(int ruleset_fd, const RulesetSpec& spec) {
  if (spec.denied_reads.empty()) {
    if (int err = AddPathRule(ruleset_fd, "/", kReadRights, Grant::Type::kDir)) {
      return Status::FromErrno(err, "landlock_add_rule(/, read)");
    }
  } else {
    FORKBOX_RETURN_IF_ERROR(AddGrants(ruleset_fd, spec.read_grants.empty()
                                                      ? ReadScopeGrants(spec.denied_reads)
                                                      : spec.read_grants));
  }
  // An opted-in path is granted where it led when the policy was resolved (canonical then).
  for (const std::string& path : spec.readable) {
    int err = AddPathRule(ruleset_fd, path.c_str(), kReadRights, Grant::Type::kUnknown,
                          Walk::kNoSymlinks);
    if (err != 0 && err != ENOENT) {  // ENOENT: gone since the list was made.
      return RuleError(err, path, "read");
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<Grant> ReadScopeGrants(const std::vector<std::string>& denied) {
  const std::vector<std::string> carved_list = CarvedDirs(denied);
  const std::set<std::string> carved(carved_list.begin(), carved_list.end());
  const std::set<std::string> denied_set(denied.begin(), denied.end());
  std::vector<Grant> out;
  ListGrants("/", carved, denied_set, out);
  return out;
}

std::vector<std::string> CarvedDirs(const std::vector<std::string>& denied) {
  std::vector<std::string> out;
  for (const std::string& path : denied) {
    if (path.size() < 2 || path[0] != '/') continue;
    for (size_t slash = path.find('/'); slash != std::string::npos && slash < path.size();
         slash = path.find('/', slash + 1)) {
      std::string ancestor = slash == 0 ? "/" : path.substr(0, slash);
      if (std::find(out.begin(), out.end(), ancestor) == out.end()) out.push_back(ancestor);
    }
  }
  return out;
}

uint64_t FsRightsForAbi(int abi) {
  uint64_t rights = (1ULL << 13) - 1;  // ABI 1: bits 0..12.
  if (abi >= 2) rights |= kRefer;
  if (abi >= 3) rights |= kTruncate;
  if (abi >= 5) rights |= kIoctlDev;
  return rights;
}

int QueryAbi(Status* error) {
  int abi = CreateRuleset(nullptr, 0, kCreateRulesetVersion);
  if (abi < 0) {
    if (error) *error = Status::FromErrno(errno, "landlock_create_ruleset(VERSION)");
    return 0;
  }
  return abi;
}

uint64_t HandledFsRights(const RulesetSpec& spec) {
  return FsRightsForAbi(spec.abi) & ~(spec.read_scope_inherited ? kReadRights : 0);
}

namespace {

bool RestrictsNet(const RulesetSpec& spec) {
  if (spec.abi < 4 || spec.allow_net) return false;
  return spec.mode == Mode::kTool || (spec.mode == Mode::kAgent && spec.model_port != 0);
}

}  // namespace

Result<UniqueFd> CreateEmptyRuleset(const RulesetSpec& spec) {
  if (spec.abi < 1) return Status::Unavailable("landlock: no supported ABI");
  RulesetAttr attr{};
  attr.handled_access_fs = HandledFsRights(spec);
  if (RestrictsNet(spec)) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
  if (spec.abi >= 6) attr.scoped = kScopeAbstractUnix | (spec.scope_signals ? kScopeSignal : 0);
  // Older kernels reject a struct larger than they know unless the tail is zero; pass only the
  // fields the ABI has.
  size_t size = spec.abi >= 6   ? sizeof(RulesetAttr)
                : spec.abi >= 4 ? offsetof(RulesetAttr, scoped)
                                : offsetof(RulesetAttr, handled_access_net);
  int raw = CreateRuleset(&attr, size, 0);
  if (raw < 0) return Status::FromErrno(errno, "landlock_create_ruleset");
  return UniqueFd(raw);
}

Status FillRuleset(int ruleset_fd, const RulesetSpec& spec) {
  const uint64_t handled = HandledFsRights(spec);
  if (!spec.read_scope_inherited) FORKBOX_RETURN_IF_ERROR(AddReadScope(ruleset_fd, spec));
  for (const auto& [paths, rights] :
       {std::pair{&spec.writable, handled}, std::pair{&spec.write_only, handled & ~kReadRights}}) {
    for (const std::string& path : *paths) {
      if (int err = AddPathRule(ruleset_fd, path.c_str(), rights, Grant::Type::kUnknown,
                                Walk::kNoSymlinks);
          err != 0) {
        return RuleError(err, path, "write");
      }
    }
  }
  const uint64_t dev_rights = (kWriteFile | kReadFile | kTruncate | kIoctlDev) & handled;
  for (const char* dev : {"/dev/null", "/dev/zero", "/dev/full"}) {
    if (int err = AddPathRule(ruleset_fd, dev, dev_rights); err != 0) {
      return Status::FromErrno(err, std::string("landlock_add_rule(") + dev + ")");
    }
  }
  if (RestrictsNet(spec) && spec.mode == Mode::kAgent) {
    NetPortAttr port{kNetConnectTcp, spec.model_port};
    if (AddRule(ruleset_fd, kRuleNetPort, &port) != 0) {
      return Status::FromErrno(
          errno, "landlock_add_rule(tcp connect " + std::to_string(spec.model_port) + ")");
    }
  }
  return Status::Ok();
}

Result<UniqueFd> BuildRuleset(const RulesetSpec& spec) {
  Result<UniqueFd> ruleset = CreateEmptyRuleset(spec);
  if (!ruleset.ok()) return ruleset;
  FORKBOX_RETURN_IF_ERROR(FillRuleset(ruleset->get(), spec));
  return ruleset;
}

int AddWritablePathRaw(int ruleset_fd, uint64_t handled, const char* path) {
  return AddPathRule(ruleset_fd, path, handled);
}

int AddWritableDirFdRaw(int ruleset_fd, uint64_t handled, int dir_fd) {
  PathBeneathAttr attr{handled, dir_fd};
  return AddRule(ruleset_fd, kRulePathBeneath, &attr) == 0 ? 0 : errno;
}

int AddReadPathRaw(int ruleset_fd, const char* path) {
  return AddPathRule(ruleset_fd, path, kReadRights);
}

int RestrictSelfRaw(int ruleset_fd) {
  if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) != 0) return errno;
  return 0;
}

int RestrictAbstractUnixScopeRaw() {
  RulesetAttr attr{0, 0, kScopeAbstractUnix};
  int fd = CreateRuleset(&attr, sizeof attr, 0);
  if (fd < 0) return errno;
  int err = RestrictSelfRaw(fd);
  close(fd);
  return err;
}

}  // namespace forkbox::sandbox::landlock
