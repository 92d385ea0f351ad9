#include "tests/bench/proc_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/unique_fd.h"

namespace forkbox::bench {
namespace {

// "VmRSS:\t  1234 kB" -> 1234, or -1 when the key is missing.
int64_t StatusField(const std::string& text, std::string_view key) {
  const size_t at = text.find(std::string(key) + ":");
  if (at == std::string::npos) return -1;
  size_t i = at + key.size() + 1;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  int64_t value = -1;
  std::from_chars(text.data() + i, text.data() + text.size(), value);
  return value;
}

struct Mapping {
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string name;
};

Result<std::vector<Mapping>> ReadableMappings(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno, "open " + path);
  std::vector<Mapping> out;
  std::string line;
  while (std::getline(in, line)) {
    // begin-end perms offset dev inode [name]
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, name;
    fields >> range >> perms >> offset >> dev >> inode;
    std::getline(fields >> std::ws, name);
    const size_t dash = range.find('-');
    if (dash == std::string::npos || perms.empty()) {
      return Status::Internal(path + ": unexpected line: " + line);
    }
    if (perms[0] != 'r') continue;
    Mapping m;
    std::from_chars(range.data(), range.data() + dash, m.begin, 16);
    std::from_chars(range.data() + dash + 1, range.data() + range.size(), m.end, 16);
    m.name = name;
    out.push_back(m);
  }
  return out;
}

int64_t CountIn(std::string_view hay, std::string_view needle) {
  int64_t n = 0;
  for (size_t at = hay.find(needle); at != std::string_view::npos; at = hay.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace

Result<MemStatus> ReadMemStatus(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno, "open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  MemStatus s;
  s.rss_kib = StatusField(text, "VmRSS");
  s.hwm_kib = StatusField(text, "VmHWM");
  if (s.rss_kib < 0 || s.hwm_kib < 0) {
    return Status::Internal(path + " has no VmRSS/VmHWM (a zombie?)");
  }
  return s;
}

std::vector<pid_t> ChildrenNamed(pid_t parent, std::string_view comm) {
  std::vector<pid_t> out;
  const std::string_view want = comm.substr(0, 15);
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    pid_t pid = 0;
    const std::string_view name(e->d_name);
    if (std::from_chars(name.data(), name.data() + name.size(), pid).ec != std::errc() ||
        pid <= 0) {
      continue;
    }
    std::ifstream in("/proc/" + std::string(name) + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;  // Exited meanwhile.
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    const size_t open = stat.find('(');
    const size_t close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && std::string_view(stat).substr(open + 1, close - open - 1) == want) {
      out.push_back(pid);
    }
  }
  closedir(dir);
  return out;
}

namespace {

// "NSpid:\t<outer>\t1": pid 1 of a PID namespace below the caller's.
bool IsNamespaceInit(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("NSpid:", 0) == 0) {
      return line.size() > 2 && line.compare(line.size() - 2, 2, "\t1") == 0;
    }
  }
  return false;
}

}  // namespace

char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  const size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? 0 : stat[close + 2];
}

std::vector<pid_t> ProcessTree(pid_t pid) {
  std::vector<pid_t> tree = {pid};
  for (size_t i = 0; i < tree.size(); ++i) {
    const std::string p = std::to_string(tree[i]);
    std::ifstream children("/proc/" + p + "/task/" + p + "/children");
    for (pid_t child = 0; children >> child;) tree.push_back(child);
  }
  return tree;
}

bool AllStopped(const std::vector<pid_t>& pids) {
  return std::all_of(pids.begin(), pids.end(), [](pid_t pid) {
    const char state = ProcessState(pid);
    return state == 'T' || state == 0;
  });
}

std::string DescribeProcesses(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    const char state = ProcessState(pid);
    out += std::to_string(pid) + " " + (state == 0 ? '-' : state) + " " + name + "\n";
  }
  return out;
}

pid_t SessionProcess(pid_t forkbox) {
  // The layer-2 probe's child (sandbox::ReleaseLayer2ProbeChild), pid 1 of a PID namespace of its
  // own too, may still be ending below forkbox: the launcher is the one that stays.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    std::vector<pid_t> live, inits;
    for (pid_t child : ChildrenNamed(forkbox, "forkbox")) {
      const char state = ProcessState(child);
      if (state == 0 || state == 'Z') continue;
      live.push_back(child);
      if (IsNamespaceInit(child)) inits.push_back(child);
    }
    if (inits.size() == 1) return inits[0];
    if (inits.empty() && live.size() <= 1) return live.empty() ? forkbox : live[0];  // Layer 1.
    if (std::chrono::steady_clock::now() >= until) return inits.empty() ? forkbox : inits[0];
    std::this_thread::yield();
  }
}

Result<ScanResult> ScanAddressSpace(pid_t pid, std::string_view needle) {
  if (needle.empty()) return Status::InvalidArgument("empty needle");
  auto maps = ReadableMappings(pid);
  if (!maps.ok()) return maps.status();
  const std::string path = "/proc/" + std::to_string(pid) + "/mem";
  UniqueFd mem(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!mem) return Status::FromErrno(errno, "open " + path);
  ScanResult result;
  constexpr size_t kChunk = 1 << 20;
  const size_t overlap = needle.size() - 1;
  std::string buf(kChunk + overlap, '\0');
  for (const Mapping& m : *maps) {
    if (m.end - m.begin > kMaxScannedMapping) {
      result.bytes_skipped += static_cast<int64_t>(m.end - m.begin);
      continue;
    }
    ++result.regions;
    size_t carried = 0;  // Tail of the previous chunk, kept for matches across the boundary.
    for (uint64_t at = m.begin; at < m.end;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, m.end - at));
      const ssize_t got = pread(mem.get(), buf.data() + carried, want, static_cast<off_t>(at));
      if (got <= 0) {
        // Unreadable pages (e.g. [vvar], guard pages): skip this page and count it.
        const uint64_t skip = std::min<uint64_t>(4096, m.end - at);
        result.bytes_unreadable += static_cast<int64_t>(skip);
        at += skip;
        carried = 0;
        continue;
      }
      const size_t filled = carried + static_cast<size_t>(got);
      result.matches += CountIn(std::string_view(buf.data(), filled), needle);
      result.bytes_scanned += got;
      at += static_cast<uint64_t>(got);
      // Keep the last `overlap` bytes; a match lying wholly inside them was already counted
      // and cannot be counted again since it is shorter than the needle.
      carried = std::min(overlap, filled);
      std::copy(buf.data() + filled - carried, buf.data() + filled, buf.data());
    }
  }
  return result;
}

}  // namespace forkbox::bench
