// Read-only probes of another process through /proc, for the benchmark helper and the proof tests:
// its memory counters, its children, and a scan of its whole address space for a byte string.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace forkbox::bench {

struct MemStatus {
  int64_t rss_kib = 0;  // VmRSS: resident now.
  int64_t hwm_kib = 0;  // VmHWM: peak resident.
};

// VmRSS and VmHWM from /proc/<pid>/status.
Result<MemStatus> ReadMemStatus(pid_t pid);

// Direct children of `parent` whose comm (truncated to 15 bytes by the kernel) matches `comm`.
std::vector<pid_t> ChildrenNamed(pid_t parent, std::string_view comm);

// The state letter of /proc/<pid>/stat ('T': stopped, 'Z': a zombie), or 0 once it is gone.
char ProcessState(pid_t pid);

// `pid` and every process below it, from /proc's children lists (its own first, each parent
// before its children).
std::vector<pid_t> ProcessTree(pid_t pid);

// Whether every process of `pids` is stopped ('T'; a gone one counts).
bool AllStopped(const std::vector<pid_t>& pids);
// One line per process of `pids`: its pid, state letter and name, for a failure message.
std::string DescribeProcesses(const std::vector<pid_t>& pids);

// The process that runs forkbox's session: sandboxed, its launcher, the child of `forkbox` named
// forkbox (forkbox's pid stays behind as the launcher's waiter, sandbox::EnterLauncher), in layer 2
// pid 1 of a PID namespace of its own; with the sandbox off `forkbox` itself. The launcher exists
// once forkbox has sent its first model request. Waits (at most 30 s) while another child of that
// name is still ending: the layer-2 probe's, also pid 1 of a namespace, a zombie at last.
pid_t SessionProcess(pid_t forkbox);

struct ScanResult {
  int64_t matches = 0;  // Occurrences of the needle, overlapping ones included.
  int64_t regions = 0;  // Readable mappings scanned.
  int64_t bytes_scanned = 0;
  int64_t bytes_unreadable = 0;  // Inside readable mappings, but pread failed (e.g. [vvar]).
  int64_t bytes_skipped = 0;     // Mappings over kMaxScannedMapping, not read.
};

// Larger mappings are address-space reservations (the ASan/UBSan shadow is terabytes), not data a
// parent could hold: reading them would take hours. Their size is reported in bytes_skipped.
inline constexpr uint64_t kMaxScannedMapping = 16ULL << 30;

// Reads every readable mapping of /proc/<pid>/maps through /proc/<pid>/mem with pread and counts
// `needle`, including occurrences that straddle read chunks. Needs ptrace read access to the
// process (root, or its owner while it is dumpable).
Result<ScanResult> ScanAddressSpace(pid_t pid, std::string_view needle);

}  // namespace forkbox::bench
