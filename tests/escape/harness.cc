#include "tests/escape/harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>

namespace forkbox::escape {
namespace {

std::string ErrnoText(int err) { return std::string(strerror(err)); }

// Async-signal-safe: replaces every "@PID@" in `templ` with `pid` into `out` (sized by caller).
void SubstitutePid(const char* templ, pid_t pid, char* out) {
  char digits[16];
  int n = 0;
  for (unsigned v = static_cast<unsigned>(pid); n == 0 || v != 0; v /= 10) {
    digits[n++] = static_cast<char>('0' + v % 10);
  }
  while (*templ) {
    if (strncmp(templ, "@PID@", 5) == 0) {
      for (int i = n - 1; i >= 0; --i) *out++ = digits[i];
      templ += 5;
    } else {
      *out++ = *templ++;
    }
  }
  *out = 0;
}

// NULL-terminated char* arrays for execve, each string with room for "@PID@" to grow into a pid.
struct CStrings {
  std::vector<std::vector<char>> storage;
  std::vector<char*> ptrs;
  explicit CStrings(const std::vector<std::string>& strings) {
    for (const auto& s : strings) {
      std::vector<char> buf(s.begin(), s.end());
      buf.resize(s.size() + 1 + 16 * (1 + s.size() / 5), 0);
      storage.push_back(std::move(buf));
    }
    for (auto& buf : storage) ptrs.push_back(buf.data());
    ptrs.push_back(nullptr);
  }
};

void Drain(int fd, std::string& into, bool* eof) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      into.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) *eof = true;
    if (n < 0 && errno == EINTR) continue;
    return;  // EOF or EAGAIN.
  }
}

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

// What the command gets as its fds 0, 1 and 2.
struct Stdio {
  int in;
  int out;
  int err;
};

// The forked child of RunCommand: puts its pid where the argv `templates` say, takes `stdio` and
// `command`'s cwd, and execs.
[[noreturn]] void ExecCommand(const Command& command, const std::vector<std::string>& templates,
                              CStrings& argv, const CStrings& env, Stdio stdio) {
  // Only async-signal-safe calls from here on.
  setsid();
  pid_t self = getpid();
  for (size_t i = 0; i < templates.size(); ++i) {
    if (strstr(templates[i].c_str(), "@PID@"))
      SubstitutePid(templates[i].c_str(), self, argv.ptrs[i]);
  }
  if (dup2(stdio.in, 0) < 0 || dup2(stdio.out, 1) < 0 || dup2(stdio.err, 2) < 0) {
    _exit(126);
  }
  if (!command.cwd.empty() && chdir(command.cwd.c_str()) != 0) {
    static const char kMsg[] = "escape harness: chdir failed\n";
    (void)!write(2, kMsg, sizeof(kMsg) - 1);
    _exit(126);
  }
  execve(argv.ptrs[0], argv.ptrs.data(), env.ptrs.data());
  static const char kMsg[] = "escape harness: execve failed\n";
  (void)!write(2, kMsg, sizeof(kMsg) - 1);
  _exit(127);
}

// The command's session (it called setsid) and the command itself.
void KillCommand(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

// Reads the command's stdout and stderr (the non-blocking `out_fd` and `err_fd`) into `result`
// until it exits (`pidfd` is readable) or, at `deadline`, the kill switch fires; then reaps it.
// Its wait status.
int CollectUntilReaped(pid_t pid, int pidfd, int out_fd, int err_fd, int64_t deadline,
                       RunResult& result) {
  bool out_eof = false, err_eof = false, exited = false;
  while (!exited) {
    pollfd fds[3] = {
        {pidfd, POLLIN, 0}, {out_eof ? -1 : out_fd, POLLIN, 0}, {err_eof ? -1 : err_fd, POLLIN, 0}};
    int64_t left = deadline - NowMs();
    if (left <= 0) {
      result.timed_out = true;
      KillCommand(pid);
      break;
    }
    int n = poll(fds, 3, static_cast<int>(left));
    if (n < 0 && errno != EINTR) {
      ADD_FAILURE() << "poll: " << ErrnoText(errno);
      KillCommand(pid);
      break;
    }
    if (fds[1].revents) Drain(out_fd, result.out, &out_eof);
    if (fds[2].revents) Drain(err_fd, result.err, &err_eof);
    if (fds[0].revents & POLLIN) exited = true;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Whatever the exited process wrote is in the pipes now; do not wait for descendants.
  Drain(out_fd, result.out, &out_eof);
  Drain(err_fd, result.err, &err_eof);
  return status;
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) Reset(other.Release());
  return *this;
}

int Fd::Release() { return std::exchange(fd_, -1); }

void Fd::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

std::string RunResult::Describe() const {
  std::ostringstream s;
  s << "exit code " << exit_code << (timed_out ? " (KILL SWITCH: timed out)" : "")
    << "\n--- stdout ---\n"
    << out.substr(0, 8000) << "\n--- stderr ---\n"
    << err.substr(0, 8000);
  return s.str();
}

RunResult RunCommand(const Command& command) {
  RunResult result;
  if (command.argv.empty()) {
    ADD_FAILURE() << "Run: empty argv";
    return result;
  }
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << ErrnoText(errno);
    return result;
  }
  Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  Fd err_read(err_pipe[0]), err_write(err_pipe[1]);
  Fd dev_null(open("/dev/null", O_RDONLY | O_CLOEXEC));
  int stdin_fd = command.stdin_fd >= 0 ? command.stdin_fd : dev_null.get();
  CStrings argv(command.argv);
  CStrings env(command.env);
  std::vector<std::string> templates(command.argv);

  pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << ErrnoText(errno);
    return result;
  }
  if (pid == 0) {
    ExecCommand(command, templates, argv, env, {stdin_fd, out_write.get(), err_write.get()});
  }
  result.pid = pid;
  out_write.Reset();
  err_write.Reset();
  fcntl(out_read.get(), F_SETFL, O_NONBLOCK);
  fcntl(err_read.get(), F_SETFL, O_NONBLOCK);
  Fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) ADD_FAILURE() << "pidfd_open: " << ErrnoText(errno);

  const int64_t deadline = NowMs() + int64_t{command.kill_switch_seconds} * 1000;
  int status =
      CollectUntilReaped(pid, pidfd.get(), out_read.get(), err_read.get(), deadline, result);
  result.wait_status = status;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Victim::Victim(uid_t uid, gid_t gid) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    ADD_FAILURE() << "socketpair: " << ErrnoText(errno);
    return;
  }
  pid_ = fork();
  if (pid_ == 0) {
    close(sv[0]);
    if (getuid() != uid && (setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)) {
      _exit(1);
    }
    prctl(PR_SET_DUMPABLE, 1);  // setuid cleared it; a real process of the user is dumpable.
    char c = 'r';
    if (send(sv[1], &c, 1, MSG_NOSIGNAL) != 1) _exit(1);  // Ready: credentials are final.
    for (;;) {
      ssize_t n = recv(sv[1], &c, 1, 0);
      if (n == 0 || (n < 0 && errno != EINTR)) _exit(0);
      if (n == 1 && send(sv[1], &c, 1, MSG_NOSIGNAL) != 1) _exit(0);
    }
  }
  close(sv[1]);
  socket_.Reset(sv[0]);
  held_fd_ = sv[1];  // The number stays valid in the victim.
  if (pid_ < 0) {
    ADD_FAILURE() << "fork: " << ErrnoText(errno);
    return;
  }
  char ready = 0;
  if (recv(socket_.get(), &ready, 1, 0) != 1 || ready != 'r') {
    ADD_FAILURE() << "the victim process did not start";
  }
}

Victim::~Victim() {
  socket_.Reset();  // EOF: the victim exits.
  if (pid_ > 0) {
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

bool Victim::Alive() const {
  char c = 'p';
  if (send(socket_.get(), &c, 1, MSG_NOSIGNAL) != 1) return false;
  ssize_t n;
  while ((n = recv(socket_.get(), &c, 1, 0)) < 0 && errno == EINTR) {
  }
  return n == 1;
}

bool FileState::operator==(const FileState& o) const {
  return exists == o.exists && content == o.content && mode == o.mode && uid == o.uid &&
         gid == o.gid && size == o.size && nlink == o.nlink && ino == o.ino &&
         mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec &&
         ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec && xattrs == o.xattrs;
}

std::string FileState::Describe() const {
  if (!exists) return "(absent)";
  std::ostringstream s;
  s << "mode " << std::oct << mode << std::dec << " uid " << uid << " gid " << gid << " size "
    << size << " nlink " << nlink << " ino " << ino << " mtime " << mtime.tv_sec << "."
    << mtime.tv_nsec << " ctime " << ctime.tv_sec << "." << ctime.tv_nsec << " xattrs '" << xattrs
    << "' content '" << content.substr(0, 200) << "'";
  return s.str();
}

FileState Snapshot(const std::string& path) {
  FileState state;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return state;
  state.exists = true;
  state.mode = st.st_mode;
  state.uid = st.st_uid;
  state.gid = st.st_gid;
  state.size = st.st_size;
  state.nlink = st.st_nlink;
  state.ino = st.st_ino;
  state.mtime = st.st_mtim;
  state.ctime = st.st_ctim;
  if (S_ISREG(st.st_mode)) state.content = ReadFile(path);
  char names[4096];
  ssize_t n = llistxattr(path.c_str(), names, sizeof(names));
  if (n > 0) state.xattrs.assign(names, static_cast<size_t>(n));
  return state;
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

void WriteFile(const std::string& path, const std::string& content, mode_t mode) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!fd.valid()) {
    ADD_FAILURE() << "open " << path << ": " << ErrnoText(errno);
    return;
  }
  if (write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    ADD_FAILURE() << "write " << path << ": " << ErrnoText(errno);
  }
  fchmod(fd.get(), mode);
}

std::string ReadFile(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  std::string data;
  if (!fd.valid()) return data;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd.get(), buf, sizeof(buf))) > 0) data.append(buf, static_cast<size_t>(n));
  return data;
}

void RemoveTree(const std::string& path) {
  auto remove = [](const char* p, const struct stat*, int, FTW*) -> int {
    if (::remove(p) != 0 && errno != ENOENT) {
      ADD_FAILURE() << "remove " << p << ": " << strerror(errno);
    }
    return 0;
  };
  if (nftw(path.c_str(), remove, 32, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
    ADD_FAILURE() << "nftw " << path << ": " << ErrnoText(errno);
  }
}

void ChownTree(const std::string& path, uid_t uid, gid_t gid) {
  static uid_t s_uid;
  static gid_t s_gid;
  s_uid = uid;
  s_gid = gid;
  auto chown_one = [](const char* p, const struct stat*, int, FTW*) -> int {
    if (lchown(p, s_uid, s_gid) != 0) ADD_FAILURE() << "lchown " << p << ": " << strerror(errno);
    return 0;
  };
  nftw(path.c_str(), chown_one, 32, FTW_PHYS);
}

Listener Listener::Tcp(const std::string& ipv4) {
  Listener l;
  l.fd_.Reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, ipv4.c_str(), &addr.sin_addr);
  if (bind(l.fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(l.fd_.get(), 16) != 0) {
    ADD_FAILURE() << "tcp listen on " << ipv4 << ": " << ErrnoText(errno);
    return l;
  }
  socklen_t len = sizeof(addr);
  getsockname(l.fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  l.port_ = ntohs(addr.sin_port);
  return l;
}

Listener Listener::Udp(const std::string& ipv4) {
  Listener l;
  l.datagram_ = true;
  l.fd_.Reset(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, ipv4.c_str(), &addr.sin_addr);
  if (bind(l.fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ADD_FAILURE() << "udp bind on " << ipv4 << ": " << ErrnoText(errno);
    return l;
  }
  socklen_t len = sizeof(addr);
  getsockname(l.fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  l.port_ = ntohs(addr.sin_port);
  return l;
}

Listener Listener::Unix(const std::string& path) {
  Listener l;
  l.fd_.Reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    ADD_FAILURE() << "unix socket path too long: " << path;
    return l;
  }
  memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') addr.sun_path[0] = 0;
  socklen_t size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  if (bind(l.fd_.get(), reinterpret_cast<sockaddr*>(&addr), size) != 0 ||
      listen(l.fd_.get(), 16) != 0) {
    ADD_FAILURE() << "unix listen on " << path << ": " << ErrnoText(errno);
    return l;
  }
  if (path[0] != '@') chmod(path.c_str(), 0777);  // Reachable by the unprivileged user too.
  return l;
}

bool Listener::Contacted() const {
  pollfd pfd{fd_.get(), POLLIN, 0};
  return poll(&pfd, 1, 0) == 1;
}

std::optional<std::string> HostAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (ifaddrs* a = list; a && !found; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    found = text;
  }
  freeifaddrs(list);
  return found;
}

std::vector<pid_t> ProcessesWithMarker(const std::string& marker) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (!proc) return pids;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = strtol(entry->d_name, &end, 10);
    if (*end != 0 || pid <= 0) continue;
    std::string cmdline = ReadFile("/proc/" + std::string(entry->d_name) + "/cmdline");
    if (cmdline.find(marker) != std::string::npos) pids.push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return pids;
}

void KillProcessesWithMarker(const std::string& marker) {
  for (pid_t pid : ProcessesWithMarker(marker)) {
    Fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    if (pidfd.valid()) syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
  }
}

const char kMultiprocessingPy[] =
    "import multiprocessing as mp, os, sys, tempfile\n"
    "from concurrent.futures import ProcessPoolExecutor\n"
    "from multiprocessing import shared_memory\n"
    "def sq(x): return x * x\n"
    "if __name__ == '__main__':\n"
    "    print('tmpdir', tempfile.gettempdir())\n"
    "    open(os.path.join(tempfile.gettempdir(), 'left-behind'), 'w').write('x')\n"
    "    for m in sys.argv[1:]:\n"
    "        ctx = mp.get_context(m)\n"
    "        with ctx.Pool(2) as p: a = sum(p.map(sq, range(4)))\n"
    "        with ProcessPoolExecutor(2, mp_context=ctx) as ex: b = sum(ex.map(sq, range(4)))\n"
    "        l = ctx.Lock(); l.acquire(); l.release()\n"
    "        print(m, 'ok', a, b)\n"
    "    s = shared_memory.SharedMemory(create=True, size=64); s.buf[0] = 7\n"
    "    print('shm ok', s.buf[0]); s.close(); s.unlink()\n";

std::string RandomToken() {
  std::random_device rd;
  unsigned char bytes[8];
  for (auto& b : bytes) b = static_cast<unsigned char>(rd());
  return ToHex(bytes, sizeof(bytes));
}

std::string ToHex(const unsigned char* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < size; ++i) {
    hex += kDigits[data[i] >> 4];
    hex += kDigits[data[i] & 15];
  }
  return hex;
}

}  // namespace forkbox::escape
