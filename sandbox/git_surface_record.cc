// GitSurfaceGuard's record as bytes (Serialize) and back (Reload), for GuardJournal: a length-
// prefixed binary form (file contents need not be text) ending in a checksum, so that a record cut
// short by its writer's death is refused, never half applied.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "base/file.h"
#include "sandbox/git_surface.h"

namespace forkbox::sandbox {
namespace {

constexpr std::string_view kMagic = "forkbox-guard 3\n";
// The record before other writable trees were guarded (c727619): the same fields up to the
// operations, then the checksum; the workdir's alone. A forkbox killed before the user upgraded
// left it, so it is still put back.
constexpr std::string_view kMagicV2 = "forkbox-guard 2\n";
static_assert(kMagicV2.size() == kMagic.size());

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutString(std::string& out, std::string_view s) {
  PutU64(out, s.size());
  out.append(s);
}
void PutList(std::string& out, const std::vector<std::string>& list) {
  PutU64(out, list.size());
  for (const std::string& s : list) PutString(out, s);
}

void PutEntries(std::string& out, const std::map<std::string, GitSurfaceGuard::Entry>& entries) {
  PutU64(out, entries.size());
  for (const auto& [path, e] : entries) {
    PutString(out, path);
    PutU64(out, static_cast<uint64_t>(e.kind));
    PutU64(out, e.mode);
    PutString(out, e.data);
  }
}

// FNV-1a, 64 bits: catches a record cut short or garbled, not an adversary (the journal lies
// where tools cannot write: GuardJournal).
uint64_t Checksum(std::string_view bytes) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// Reads the fields back in order; any read past the end fails the whole parse.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}
  bool U64(uint64_t* v) {
    if (rest_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i)
      *v |= static_cast<uint64_t>(static_cast<uint8_t>(rest_[i])) << (8 * i);
    rest_.remove_prefix(8);
    return true;
  }
  bool String(std::string* s) {
    uint64_t n = 0;
    if (!U64(&n) || n > rest_.size()) return false;
    s->assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return true;
  }
  bool List(std::vector<std::string>* list) {
    uint64_t n = 0;
    if (!U64(&n) || n > rest_.size() / 8) return false;
    list->resize(n);
    for (std::string& s : *list) {
      if (!String(&s)) return false;
    }
    return true;
  }
  // A count, then each path and its entry (PutEntries).
  bool Entries(std::map<std::string, GitSurfaceGuard::Entry>* entries) {
    uint64_t count = 0;
    if (!U64(&count) || count > rest_.size() / 8) return false;
    for (uint64_t i = 0; i < count; ++i) {
      std::string path;
      uint64_t kind = 0, mode = 0;
      GitSurfaceGuard::Entry e;
      if (!String(&path) || !U64(&kind) || !U64(&mode) || !String(&e.data) ||
          kind > static_cast<uint64_t>(GitSurfaceGuard::Entry::Kind::kOther) || mode > 07777) {
        return false;
      }
      e.kind = static_cast<GitSurfaceGuard::Entry::Kind>(kind);
      e.mode = static_cast<unsigned>(mode);
      (*entries)[std::move(path)] = std::move(e);
    }
    return true;
  }
  bool done() const { return rest_.empty(); }
  size_t left() const { return rest_.size(); }

 private:
  std::string_view rest_;
};

// A path the record may name: relative, beneath the workdir, no empty, `.` or `..` component.
bool IsPlainRelative(std::string_view rel) {
  if (rel.empty() || rel.front() == '/' || rel.find('\0') != std::string_view::npos) return false;
  while (!rel.empty()) {
    const size_t slash = rel.find('/');
    const std::string_view part = rel.substr(0, slash);
    if (part.empty() || part == "." || part == "..") return false;
    rel = slash == std::string_view::npos ? std::string_view() : rel.substr(slash + 1);
  }
  return true;
}

// The other trees' records (Serialize), each a whole record of one tree: false for one garbled,
// holding trees itself, or in format 2 (never written within one of 3). A tree no longer the
// directory it was taken in is left out: its guard has nothing to put back where it was.
bool ReloadTrees(Reader& in, const UserGitConfig& user, std::vector<GitSurfaceGuard>& trees) {
  uint64_t count = 0;
  if (!in.U64(&count) || count > in.left() / 8) return false;
  for (uint64_t i = 0; i < count; ++i) {
    std::string record;
    if (!in.String(&record) || !record.starts_with(kMagic)) return false;
    Result<GitSurfaceGuard> tree = GitSurfaceGuard::Reload(record, user);
    if (!tree.ok() && tree.status().code() == Status::Code::kInvalidArgument) return false;
    if (tree.ok() && tree->descriptors() != 1) return false;
    if (tree.ok()) trees.push_back(std::move(*tree));
  }
  return true;
}

}  // namespace

std::string GitSurfaceGuard::Serialize() const {
  const FileIdentity id = IdentityOf(root_.get());  // Unknown: inode 0, which no Reload accepts.
  std::string out(kMagic);
  PutU64(out, id.dev);
  PutU64(out, id.ino);
  PutString(out, workdir_);
  PutList(out, writable_);
  PutList(out, roots_);
  PutList(out, git_dirs_);
  PutEntries(out, entries_);
  PutEntries(out, operations_);
  PutU64(out, trees_.size());
  for (const GitSurfaceGuard& tree : trees_) PutString(out, tree.Serialize());
  PutU64(out, Checksum(out));
  return out;
}

Result<GitSurfaceGuard> GitSurfaceGuard::Reload(std::string_view record,
                                                const UserGitConfig& user) {
  const Status garbled = Status::InvalidArgument("not a whole git trust surface record");
  const bool v2 = record.starts_with(kMagicV2);
  if (record.size() < kMagic.size() + 8 || !(v2 || record.starts_with(kMagic))) return garbled;
  uint64_t sum = 0;
  Reader tail(record.substr(record.size() - 8));
  if (!tail.U64(&sum) || sum != Checksum(record.substr(0, record.size() - 8))) return garbled;
  Reader in(record.substr(kMagic.size(), record.size() - kMagic.size() - 8));
  GitSurfaceGuard guard;
  guard.user_ = user;
  uint64_t dev = 0, ino = 0;
  if (!in.U64(&dev) || !in.U64(&ino) || !in.String(&guard.workdir_) || !in.List(&guard.writable_) ||
      !in.List(&guard.roots_) || !in.List(&guard.git_dirs_) || !in.Entries(&guard.entries_) ||
      !in.Entries(&guard.operations_) || !(v2 || ReloadTrees(in, user, guard.trees_))) {
    return garbled;
  }
  if (!in.done() || guard.workdir_.empty() || guard.workdir_.front() != '/') return garbled;
  for (const auto* list : {&guard.roots_, &guard.git_dirs_}) {
    for (const std::string& rel : *list) {
      if (!IsPlainRelative(rel)) return garbled;
    }
  }
  for (const auto* map : {&guard.entries_, &guard.operations_}) {
    for (const auto& [path, e] : *map) {
      if (!IsPlainRelative(path)) return garbled;
    }
  }
  // The very directory the record was taken in: a workdir removed and made again, or swapped for
  // a link, is another project (kNotFound).
  Result<UniqueFd> root =
      ReopenDirectory(guard.workdir_, {dev, ino}, "the directory the record was made in");
  if (root.ok()) {
    guard.root_ = std::move(*root);
    return guard;
  }
  if (guard.trees_.empty()) return root.status();
  // The other trees still go back: a tool that swapped the workdir (`mv sub sub.old; mkdir sub`
  // with the workdir below a --writable tree) made the whole record refused before.
  guard.left_out_ = root.status().message();
  guard.roots_.clear();
  guard.git_dirs_.clear();
  guard.entries_.clear();
  guard.operations_.clear();
  return guard;
}

}  // namespace forkbox::sandbox
