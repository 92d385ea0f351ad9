#include "sandbox/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <set>

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

// Adds a path rule; masks `access` to what a rule on a non-directory may carry. `type` is what
// a listing said: a directory is opened with O_DIRECTORY (no longer one: checked as kUnknown), a
// non-directory gets the file rights (if it became a directory since, fewer rights: fails
// closed). Async-signal-safe.
int AddPathRule(int ruleset_fd, const char* path, uint64_t access,
                Grant::Type type = Grant::Type::kUnknown) {
  constexpr uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
  int fd = open(path, O_PATH | O_CLOEXEC | (type == Grant::Type::kDir ? O_DIRECTORY : 0));
  if (fd < 0 && errno == ENOTDIR && type == Grant::Type::kDir) {
    return AddPathRule(ruleset_fd, path, access);
  }
  if (fd < 0) return errno;
  struct stat st;
  if (type == Grant::Type::kUnknown && fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return err;
  }
  if (type == Grant::Type::kOther || (type == Grant::Type::kUnknown && !S_ISDIR(st.st_mode))) {
    access &= kFileRights;  // Directory-only rights are refused (EINVAL) on files.
  }
  PathBeneathAttr attr{access, fd};
  int rc = AddRule(ruleset_fd, kRulePathBeneath, &attr);
  int err = rc == 0 ? 0 : errno;
  close(fd);
  return err;
}

// Every entry of the carved directory `dir` but the denied ones and symlinks; carved entries
// recurse. An unlistable carved directory (EACCES) yields nothing beneath it: fails closed.
void ListGrants(const std::string& dir, const std::set<std::string>& carved,
                const std::set<std::string>& denied, std::vector<Grant>& out) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return;
  for (const auto& entry : it) {
    const std::string child = (dir == "/" ? "/" : dir + "/") + entry.path().filename().string();
    std::error_code lec;
    if (denied.count(child) > 0) continue;
    if (carved.count(child) > 0) {
      ListGrants(child, carved, denied, out);
    } else if (!entry.is_symlink(lec)) {
      // The listing's d_type: no stat for either call below.
      const bool dir = entry.is_directory(lec);
      out.push_back(
          {child, lec ? Grant::Type::kUnknown : (dir ? Grant::Type::kDir : Grant::Type::kOther)});
    }
  }
}

Status AddReadScope(int ruleset_fd, const RulesetSpec& spec) {
  std::vector<Grant> grants = {{"/", Grant::Type::kDir}};
  if (!spec.denied_reads.empty()) {
    grants = spec.read_grants.empty() ? ReadScopeGrants(spec.denied_reads) : spec.read_grants;
  }
  for (const std::string& path : spec.readable) grants.push_back({path});
  for (const Grant& grant : grants) {
    int err = AddPathRule(ruleset_fd, grant.path.c_str(), kReadRights, grant.type);
    if (err != 0 && err != ENOENT) {  // ENOENT: gone since the list was made.
      return Status::FromErrno(err, "landlock_add_rule(" + grant.path + ", read)");
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

Result<UniqueFd> BuildRuleset(const RulesetSpec& spec) {
  if (spec.abi < 1) return Status::Unavailable("landlock: no supported ABI");
  RulesetAttr attr{};
  attr.handled_access_fs = HandledFsRights(spec);
  bool restrict_net = false;
  if (spec.abi >= 4) {
    if (spec.mode == Mode::kTool && !spec.allow_net) restrict_net = true;
    if (spec.mode == Mode::kAgent && !spec.allow_net && spec.model_port != 0) restrict_net = true;
  }
  if (restrict_net) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
  if (spec.abi >= 6) attr.scoped = kScopeAbstractUnix | (spec.scope_signals ? kScopeSignal : 0);
  // Older kernels reject a struct larger than they know unless the tail is zero; pass only the
  // fields the ABI has.
  size_t size = spec.abi >= 6   ? sizeof(RulesetAttr)
                : spec.abi >= 4 ? offsetof(RulesetAttr, scoped)
                                : offsetof(RulesetAttr, handled_access_net);
  int raw = CreateRuleset(&attr, size, 0);
  if (raw < 0) return Status::FromErrno(errno, "landlock_create_ruleset");
  UniqueFd ruleset(raw);

  if (!spec.read_scope_inherited) FORKBOX_RETURN_IF_ERROR(AddReadScope(ruleset.get(), spec));
  for (const std::string& path : spec.writable) {
    if (int err = AddPathRule(ruleset.get(), path.c_str(), attr.handled_access_fs); err != 0) {
      return Status::FromErrno(err, "landlock_add_rule(" + path + ", write)");
    }
  }
  const uint64_t dev_rights =
      (kWriteFile | kReadFile | kTruncate | kIoctlDev) & attr.handled_access_fs;
  for (const char* dev : {"/dev/null", "/dev/zero", "/dev/full"}) {
    if (int err = AddPathRule(ruleset.get(), dev, dev_rights); err != 0) {
      return Status::FromErrno(err, std::string("landlock_add_rule(") + dev + ")");
    }
  }
  if (restrict_net && spec.mode == Mode::kAgent) {
    NetPortAttr port{kNetConnectTcp, spec.model_port};
    if (AddRule(ruleset.get(), kRuleNetPort, &port) != 0) {
      return Status::FromErrno(
          errno, "landlock_add_rule(tcp connect " + std::to_string(spec.model_port) + ")");
    }
  }
  return ruleset;
}

int AddWritablePathRaw(int ruleset_fd, uint64_t handled, const char* path) {
  return AddPathRule(ruleset_fd, path, handled);
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
