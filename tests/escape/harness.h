// Process, file and socket helpers for the escape suite. Plain POSIX on purpose: the suite drives
// the real forkbox binary and must not depend on any forkbox library.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace forkbox::escape {

// An owned descriptor (the suite links no forkbox library, so it has its own).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(other.Release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct Command {
  // argv[0] is a path. Any "@PID@" in argv is replaced, in the forked child, by the pid of the
  // spawned process (which keeps that pid across the launchers' execs: it is forkbox's pid).
  std::vector<std::string> argv;
  std::vector<std::string> env;  // The complete environment.
  std::string cwd;               // Empty: inherit.
  int stdin_fd = -1;             // -1: /dev/null.
  // Safety net only, never synchronization: past it the whole process group is SIGKILLed and
  // the run is reported as timed out (a test failure).
  int kill_switch_seconds = 120;
};

struct RunResult {
  pid_t pid = -1;
  int wait_status = 0;
  int exit_code = -1;  // Shell style: the exit status, or 128+N for signal N.
  bool timed_out = false;
  std::string out;
  std::string err;
  std::string Describe() const;  // For failure messages: exit code, stdout, stderr.
};

// fork + execve in a new session (so the kill switch can kill the group); stdout and stderr are
// captured until the process exits (descendants that keep them open are not waited for).
RunResult RunCommand(const Command& command);

// A child of the test process, running as uid/gid, that answers pings until destroyed: a target
// for kill(), ptrace() and friends.
class Victim {
 public:
  Victim(uid_t uid, gid_t gid);
  ~Victim();
  Victim(const Victim&) = delete;
  Victim& operator=(const Victim&) = delete;
  pid_t pid() const { return pid_; }
  int held_fd() const { return held_fd_; }  // A descriptor number open in the victim.
  // Pings the victim and blocks for its answer. Deterministic even right after a kill(): a
  // SIGKILL is fatal before the victim can return to user space, so it never answers and the
  // test sees the connection close.
  bool Alive() const;

 private:
  pid_t pid_ = -1;
  Fd socket_;
  int held_fd_ = -1;
};

// What a write or metadata change would alter (everything but atime).
struct FileState {
  bool exists = false;
  std::string content;
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  off_t size = 0;
  nlink_t nlink = 0;
  ino_t ino = 0;
  timespec mtime{};
  timespec ctime{};
  std::string xattrs;  // Names of the xattrs, NUL separated.
  bool operator==(const FileState& other) const;
  std::string Describe() const;
};
FileState Snapshot(const std::string& path);  // Does not follow a final symlink.
bool Exists(const std::string& path);         // lstat() succeeds.

void WriteFile(const std::string& path, const std::string& content, mode_t mode = 0644);
std::string ReadFile(const std::string& path);
void RemoveTree(const std::string& path);  // rm -rf; fails the test on an error other than ENOENT.
void ChownTree(const std::string& path, uid_t uid, gid_t gid);

// A listening socket, and whether anything connected (or sent a datagram) to it.
class Listener {
 public:
  static Listener Tcp(const std::string& ipv4);  // Ephemeral port.
  static Listener Udp(const std::string& ipv4);
  static Listener Unix(const std::string& path);  // "@name": abstract namespace.
  int port() const { return port_; }
  // Non-blocking: a pending connection or datagram proves traffic arrived (loopback delivery is
  // synchronous, so the probe's connect/send has completed by the time it exited).
  bool Contacted() const;

 private:
  Fd fd_;
  int port_ = 0;
  bool datagram_ = false;
};

// The first non-loopback IPv4 address of this host, if any.
std::optional<std::string> HostAddress();

// Pids of live processes whose command line contains `marker`, and SIGKILLing them.
std::vector<pid_t> ProcessesWithMarker(const std::string& marker);
void KillProcessesWithMarker(const std::string& marker);

// Python: for each start method named on its command line, a Pool, a ProcessPoolExecutor and a
// SemLock ("<method> ok 14 14"), then shared_memory ("shm ok 7"); it first prints its temp dir
// ("tmpdir <path>") and leaves a file there.
extern const char kMultiprocessingPy[];

std::string RandomToken();  // 16 hex digits.
std::string ToHex(const unsigned char* data, size_t size);

}  // namespace forkbox::escape
