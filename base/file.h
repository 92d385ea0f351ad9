// Reading files a tool may have planted: a FIFO must not block the reader, a device or a huge file
// must not be read without end, and only regular files count.
#pragma once

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox {

// Opens `path` with O_RDONLY (or the access mode in `extra_flags`, e.g. O_WRONLY | O_APPEND) plus
// O_NONBLOCK | O_NOCTTY | O_CLOEXEC and `extra_flags` (O_NOFOLLOW where a symlink must not be
// followed), then checks with fstat that it is a regular file ("<path>: not a regular file"
// otherwise). The stat is returned through `st` when given.
Result<UniqueFd> OpenRegularFile(const std::string& path, int extra_flags = 0,
                                 struct stat* st = nullptr);

// Reads `fd` to its end; more than `max_bytes` is kResourceExhausted ("<what>: larger than N
// bytes"). Retries EINTR.
Result<std::string> ReadToEnd(int fd, size_t max_bytes, const std::string& what);

// openat2(2) of `path` relative to `dir` (AT_FDCWD: the current directory) with `flags` |
// O_CLOEXEC, `resolve` (RESOLVE_*), and `mode` when `flags` creates a file. Retried on EINTR and
// on EAGAIN (a rename or mount raced the walk), at most kOpenAt2Attempts times in all, so a tool
// renaming in a loop cannot hold the caller. The descriptor, or an empty one with errno set.
// Async-signal-safe (no allocation): the spawn pipeline calls it between clone and exec.
inline constexpr int kOpenAt2Attempts = 64;
// The `resolve` of a walk that follows no link of any kind (a tool may have planted one).
inline constexpr uint64_t kResolveNoLinks = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
UniqueFd OpenAt2(int dir, const char* path, uint64_t flags, uint64_t resolve, mode_t mode = 0);

// A directory beneath the directory `root` ("" names `root` itself) opened with `flags` |
// O_DIRECTORY | O_CLOEXEC, resolved by openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS: never through a symbolic link or "..", so a name a tool swapped for a
// link cannot lead out. Retries EAGAIN (a concurrent rename) and EINTR.
Result<UniqueFd> OpenDirBeneath(int root, const std::string& rel, int flags);

// Creates or opens `path` (relative to the current directory) for writing, as open(O_WRONLY |
// O_CREAT, `mode`) would, but through no symbolic link anywhere on the way (openat2
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: ELOOP names it), and only as a regular file
// ("<path>: not a regular file"; a FIFO fails at once, O_NONBLOCK) with one name: a hard link is
// refused too, since its other name may be anywhere. Nothing is truncated. For a file forkbox
// writes with the user's rights where a tool may have planted a link. Retries EAGAIN and EINTR.
// `dir`: the directory a relative `path` starts from (AT_FDCWD: the current one).
Result<UniqueFd> CreateRegularFileNoLinks(const std::string& path, mode_t mode, int dir = AT_FDCWD);

// `mkdir -p path` (mode `mode`, relative to the current directory or absolute) through no
// symbolic link anywhere (each name opened with openat2 RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS, made with mkdirat where missing): the last directory, opened O_RDONLY |
// O_DIRECTORY | O_CLOEXEC. A link on the way fails as in CreateRegularFileNoLinks, naming the path
// up to it, and nothing is made beyond it. For a directory forkbox writes into with the user's
// rights where a tool may have planted a link.
Result<UniqueFd> CreateDirectoriesNoLinks(const std::string& path, mode_t mode);

// The same checks as CreateRegularFileNoLinks (no symbolic link on the way, a regular file of one
// name, no wait on a FIFO), for reading: a file forkbox reads with the user's rights, before the
// sandbox, and sends to the model, where a tool may have planted `prompt.md -> ~/.aws/credentials`.
Result<std::string> ReadRegularFileNoLinks(const std::string& path, size_t max_bytes);

// The file `rel` beneath the directory `dir`, read as ReadRegularFileNoLinks reads (no symbolic
// link anywhere on `rel`'s way, a regular file, no wait on a FIFO), resolved with RESOLVE_BENEATH
// too (no ".."); a hard link is taken. Errors name `shown` (the path for the user). For a file a
// cloned project holds: `.forkbox -> ~/elsewhere` must not make forkbox read what it leads to as
// the project's.
Result<std::string> ReadRegularFileBeneath(int dir, const std::string& rel, size_t max_bytes,
                                           const std::string& shown);

// OpenRegularFile + ReadToEnd.
Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes, int extra_flags = 0);

// The names in the open directory `dir` ("." and ".." left out), read through a descriptor of
// their own (`dir` stays the caller's, its offset untouched). Empty when it cannot be listed.
std::vector<std::string> ListDirNames(int dir);

// What a name must still lead to: the device and inode of an open file. ino 0 is unknown, and
// no file matches it.
struct FileIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
};
// The identity of the open file `fd`; an unknown one when fstat fails.
FileIdentity IdentityOf(int fd);

// The directory `path` (absolute; canonical: no link on its way) opened O_PATH | O_DIRECTORY |
// O_CLOEXEC through no symbolic link anywhere (openat2, kResolveNoLinks), when it is still the
// directory `id`. kNotFound ("<path> no longer leads to <what> (moved, removed or replaced)")
// otherwise, also when the name is gone or a link; another failed open keeps its errno's code. For
// a directory held since start-up, whose name something outside the sandbox can move or swap for a
// link meanwhile.
Result<UniqueFd> ReopenDirectory(const std::string& path, FileIdentity id, const std::string& what);

// rm -rf of the entry `name` of the directory `parent`, never following a symbolic link: a tool may
// swap any name for one meanwhile, and the removal then goes no further than that link.
// Directories made read-only (or unlistable) get their owner's rights first. Returns 0 (also when
// nothing was there) or the errno of the entry's own removal; what stays below it goes unreported.
int RemoveTreeAt(int parent, const char* name);

}  // namespace forkbox
