// Landlock: the filesystem, TCP and scope policy. Debian 12's linux/landlock.h stops at ABI 2, so
// the newer constants are defined here. The ruleset is built before fork (it opens paths and
// allocates) and only restricted in the child, which makes async-signal-safe calls only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::sandbox::landlock {

// Access rights, by the ABI that introduced them.
inline constexpr uint64_t kExecute = 1ULL << 0;
inline constexpr uint64_t kWriteFile = 1ULL << 1;
inline constexpr uint64_t kReadFile = 1ULL << 2;
inline constexpr uint64_t kReadDir = 1ULL << 3;
inline constexpr uint64_t kRemoveDir = 1ULL << 4;
inline constexpr uint64_t kRemoveFile = 1ULL << 5;
inline constexpr uint64_t kMakeChar = 1ULL << 6;
inline constexpr uint64_t kMakeDir = 1ULL << 7;
inline constexpr uint64_t kMakeReg = 1ULL << 8;
inline constexpr uint64_t kMakeSock = 1ULL << 9;
inline constexpr uint64_t kMakeFifo = 1ULL << 10;
inline constexpr uint64_t kMakeBlock = 1ULL << 11;
inline constexpr uint64_t kMakeSym = 1ULL << 12;
inline constexpr uint64_t kRefer = 1ULL << 13;             // ABI 2
inline constexpr uint64_t kTruncate = 1ULL << 14;          // ABI 3
inline constexpr uint64_t kIoctlDev = 1ULL << 15;          // ABI 5
inline constexpr uint64_t kNetBindTcp = 1ULL << 0;         // ABI 4
inline constexpr uint64_t kNetConnectTcp = 1ULL << 1;      // ABI 4
inline constexpr uint64_t kScopeAbstractUnix = 1ULL << 0;  // ABI 6
inline constexpr uint64_t kScopeSignal = 1ULL << 1;        // ABI 6

inline constexpr uint64_t kReadRights = kExecute | kReadFile | kReadDir;

// Every filesystem right the given ABI knows (what the ruleset handles).
uint64_t FsRightsForAbi(int abi);

// The highest ABI the kernel supports, or 0 when Landlock is unavailable. `error` (optional)
// receives the reason.
int QueryAbi(Status* error = nullptr);

enum class Mode {
  kAgent,  // The forkbox-child process: TCP connect limited to the model port (ABI 4+).
  kTool,   // A tool command: no TCP bind/connect at all unless allow_net (ABI 4+).
};

// A read-scope grant: a path and its type when it was listed (a directory's rule is opened with
// O_DIRECTORY and a file's rule gets the file rights, no fstat each; kUnknown: fstat decides).
struct Grant {
  enum class Type { kUnknown, kDir, kOther };
  std::string path;
  Type type = Type::kUnknown;
};

struct RulesetSpec {
  int abi = 0;
  Mode mode = Mode::kTool;
  std::vector<std::string> writable;  // Workdir plus --writable paths: every right beneath.
  // Trees the process writes and never reads (the parent's transcript directory): every right
  // beneath but kReadRights. Its tools inherit its read scope (read_scope_inherited), and such a
  // tree is one they must not read (Settings::unreadable).
  std::vector<std::string> write_only;
  bool allow_net = false;
  uint16_t model_port = 0;  // kAgent only; 0 = no TCP restriction.
  // ABI 6+: no signal outside the domain. Off only for the parent, which must still kill the
  // task children its spawner started outside its domain (its tools stack a scoped domain).
  bool scope_signals = true;
  // The read scope: read+execute everywhere except beneath these (canonical) paths, whether they
  // exist now or appear later; `readable` paths are granted read+execute whatever their place.
  std::vector<std::string> denied_reads;
  std::vector<std::string> readable;
  // ReadScopeGrants(denied_reads), listed earlier (empty: listed now). A confined agent cannot
  // list the carved directories any more, so its tools' rulesets use the list made at start.
  std::vector<Grant> read_grants;
  // The caller's own domain holds this read scope already, built from the same lists (a tool
  // ruleset inside the agent that confined itself with the policy the tools get), and every
  // command restricted with this ruleset nests in that domain: this layer then handles no read
  // right (kReadRights) and has no read rule. What a command may read is exactly what it was
  // (the caller's layer decides it, as before), but restricting copies ~8 rules into the new
  // layer instead of ~190 (root's carved /etc and /root), and building makes ~8 instead.
  bool read_scope_inherited = false;
};

// Creates the ruleset fd with all rules added (the read scope, full rights beneath each writable
// path, write on /dev/null, /dev/zero, /dev/full). Any failure is an error: a partially built
// ruleset is never enforced.
//
// The read scope is an allow-list (Landlock cannot carve a denied path out of an allowed tree):
// every proper ancestor of a denied path is "carved": it gets no rule itself, and each of its
// entries that exists now gets read+execute, except the denied ones and the symlinks (access is
// checked where a link leads), while carved entries are carved in turn. So a carved directory
// cannot be listed, a denied path is unreadable, and so is anything created later directly in a
// carved directory (a new ~/.netrc, ~/.aws): only what existed at build time was granted.
Result<UniqueFd> BuildRuleset(const RulesetSpec& spec);

// BuildRuleset in two halves, for a spawner that fills the ruleset while its command's namespaces
// are set up: an empty ruleset handling what `spec` handles, and then its rules (only once
// FillRuleset returned OK may a process restrict itself with it; until then it is a subset of
// the allow-list, never more).
Result<UniqueFd> CreateEmptyRuleset(const RulesetSpec& spec);
Status FillRuleset(int ruleset_fd, const RulesetSpec& spec);

// The entries of the carved directories that get read+execute (see BuildRuleset).
std::vector<Grant> ReadScopeGrants(const std::vector<std::string>& denied);

// The directories the read scope carves for `denied` (every proper ancestor), for --check.
std::vector<std::string> CarvedDirs(const std::vector<std::string>& denied);

// The filesystem rights a ruleset built from `spec` handles.
uint64_t HandledFsRights(const RulesetSpec& spec);

// Async-signal-safe: grants every right of `handled` (the ruleset's) beneath `path` (e.g. a fresh
// private /tmp). Returns 0 or an errno value.
int AddWritablePathRaw(int ruleset_fd, uint64_t handled, const char* path);

// Async-signal-safe: grants every right of `handled` beneath the open directory `dir_fd`, which
// may be one no path reaches any more (under a private /tmp mounted since it was opened).
// Returns 0 or an errno value.
int AddWritableDirFdRaw(int ruleset_fd, uint64_t handled, int dir_fd);

// Async-signal-safe: grants read+execute beneath `path` (a fresh mount: /proc, the emptied /run);
// only for a ruleset that handles them. Returns 0 or an errno value.
int AddReadPathRaw(int ruleset_fd, const char* path);

// Async-signal-safe: landlock_restrict_self. no_new_privs must already be set. 0 or errno.
int RestrictSelfRaw(int ruleset_fd);

// Async-signal-safe: puts the calling thread (no_new_privs must be set) in a Landlock domain
// that only scopes abstract unix sockets (ABI 6+): no filesystem or network rule. The unix
// connect broker of an unconfined caller (unix_broker.h) spawns its tools from such a thread.
// Returns 0 or an errno value.
int RestrictAbstractUnixScopeRaw();

}  // namespace forkbox::sandbox::landlock
