#include "sandbox/unix_broker.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include "base/fd_passing.h"
#include "base/file.h"
#include "sandbox/landlock.h"

namespace forkbox::sandbox {
namespace {

constexpr size_t kMaxHeld = 1024;      // Unconnected sockets held per tool; beyond: EMFILE.
constexpr size_t kMaxReports = 8;      // Refusal lines per tool.
constexpr int kMaxWalk = 4096;         // ".." steps from a socket's directory.
constexpr int kSoAcceptCon = 0x10000;  // __SO_ACCEPTCON in /proc/net/unix's Flags.
constexpr int kSsConnected = 3;        // SS_CONNECTED in /proc/net/unix's St.

// A connect() the broker started without blocking, watched in its loop until the socket is
// writable: a blocking caller is answered then, by connecting the same address again (as the
// kernel's wait does); a non-blocking one got EINPROGRESS, and its held dup goes once connected.
struct Pending {
  uint64_t id = 0;  // 0: a non-blocking caller, answered already; only watched.
  ino_t ino = 0;
  UniqueFd sock;  // A dup of its own: the held one goes once the socket is connected.
  sockaddr_storage addr{};
  socklen_t len = 0;
};

struct Tool;
// What an event of the epoll set is about: a tool's listener, or the end of its command.
struct Watch {
  enum What { kListener, kCommand } what;
  Tool* tool;
};

// One tool's listener and what the broker holds for it.
struct Tool {
  Tool() = default;
  Tool(const Tool&) = delete;
  Tool& operator=(const Tool&) = delete;
  // Out of the epoll set by hand: a close alone leaves a descriptor there while a fork of another
  // thread still holds a copy, and its next event would point here.
  ~Tool() {
    if (epoll < 0) return;
    if (command) (void)epoll_ctl(epoll, EPOLL_CTL_DEL, command.get(), nullptr);
    if (listener) (void)epoll_ctl(epoll, EPOLL_CTL_DEL, listener.get(), nullptr);
  }
  int epoll = -1;  // The broker's epoll set (borrowed: State destroys its tools before it).
  Watch on_listener{Watch::kListener, this};
  Watch on_command{Watch::kCommand, this};
  UniqueFd listener;
  BrokerPolicy policy;
  UniqueFd report;
  // The spawned process's pidfd while `report` is open, in the epoll set: once it ended, the report
  // goes, so a daemon the command left (it keeps the filter) does not hold the caller's output.
  // A pidfd of its own (pidfd_open, not a dup): its close takes it out of the epoll set.
  UniqueFd command;
  std::map<ino_t, UniqueFd> held;  // Sockets made for the tool, by inode, not yet connected.
  std::vector<Pending> pending;
  std::set<std::string> reported;
};

// The answer to one notification: -errno (or 0), unless it is answered already (ADDFD, the caller
// is gone) or later (a pending connect), or continued in the tool.
struct Answer {
  int error = 0;
  bool sent = false;
  std::string refusal;  // Non-empty: why, for the tool's stderr.
  bool cont = false;    // SECCOMP_USER_NOTIF_FLAG_CONTINUE.
};

Answer Fail(int err) { return Answer{-err, false, {}}; }
Answer Refuse(int err, std::string why) { return Answer{-err, false, std::move(why)}; }
Answer Sent() { return Answer{0, true, {}}; }
Answer Continue() { return Answer{0, false, {}, true}; }

int SocketOption(int sock, int option) {
  int value = -1;
  socklen_t len = sizeof value;
  return getsockopt(sock, SOL_SOCKET, option, &value, &len) == 0 ? value : -1;
}

// The port of an inet or inet6 address (host order), or 0.
int PortOf(const sockaddr_storage& addr, socklen_t len) {
  if (addr.ss_family == AF_INET && len >= sizeof(sockaddr_in)) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  }
  if (addr.ss_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return 0;
}

std::string ProcPath(pid_t pid, const std::string& rest) {
  return "/proc/" + std::to_string(pid) + "/" + rest;
}

// The inode of the socket at `fd` in the tool, from /proc/<pid>/fd/<fd> ("socket:[ino]").
// Fails with the errno the kernel's connect would give: EBADF, ENOTSOCK.
int SocketInode(pid_t pid, int fd, ino_t* ino) {
  if (fd < 0) return EBADF;
  char link[64];
  std::string path = ProcPath(pid, "fd/" + std::to_string(fd));
  ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
  if (n < 0) return errno == ENOENT ? EBADF : errno;
  link[n] = '\0';
  unsigned long long value = 0;
  if (std::sscanf(link, "socket:[%llu]", &value) != 1) return ENOTSOCK;
  *ino = static_cast<ino_t>(value);
  return 0;
}

// Whether `ino` is in one of the tool's /proc/<pid>/net/<table>s (tcp, tcp6: inode is the 10th
// field).
bool InInetTable(pid_t pid, const char* table, ino_t ino) {
  Result<std::string> text = ReadRegularFile(ProcPath(pid, std::string("net/") + table), 64 << 20);
  if (!text.ok()) return false;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    unsigned long long inode = 0;
    if (std::sscanf(line.c_str(), "%*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &inode) == 1 &&
        inode == ino) {
      return true;
    }
  }
  return false;
}

// The errno connect() gives for a socket the broker does not hold, from the tool's
// /proc/<pid>/net/unix: a listening socket EINVAL, a connected one (a socketpair) EISCONN; a TCP
// socket (listening, accepted, or held and dropped once connected) EISCONN; anything else (a
// netlink socket, one not made through the broker) EPERM: never continued.
int UnheldErrno(pid_t pid, ino_t ino) {
  if (InInetTable(pid, "tcp", ino) || InInetTable(pid, "tcp6", ino)) return EISCONN;
  Result<std::string> table = ReadRegularFile(ProcPath(pid, "net/unix"), 16 << 20);
  if (!table.ok()) return EPERM;
  std::istringstream lines(*table);
  std::string line;
  while (std::getline(lines, line)) {
    unsigned refs = 0, protocol = 0, flags = 0, type = 0, state = 0;
    unsigned long long inode = 0;
    if (std::sscanf(line.c_str(), "%*[^:]: %x %x %x %x %x %llu", &refs, &protocol, &flags, &type,
                    &state, &inode) != 6 ||
        inode != ino) {
      continue;
    }
    if (flags & kSoAcceptCon) return EINVAL;
    return state == kSsConnected ? EISCONN : EPERM;
  }
  return EPERM;
}

// A held socket that listens or is connected is no longer the broker's to connect; a datagram
// socket stays (it may connect again, or disconnect with AF_UNSPEC).
int SettledErrno(int sock) {
  if (SocketOption(sock, SO_ACCEPTCONN) == 1) return EINVAL;
  if (SocketOption(sock, SO_TYPE) == SOCK_DGRAM) return 0;
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (getpeername(sock, reinterpret_cast<sockaddr*>(&peer), &len) == 0) return EISCONN;
  return 0;
}

void DropSettled(Tool& tool) {
  std::erase_if(tool.held, [](const auto& entry) { return SettledErrno(entry.second.get()) != 0; });
}

// A held inet socket's local port, or 0. Once the tool closed every fd of it, the broker's dup
// alone would keep that port bound.
int LocalPort(int sock) {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (getsockname(sock, reinterpret_cast<sockaddr*>(&local), &len) != 0) return 0;
  return PortOf(local, len);
}

struct DirCloser {
  void operator()(DIR* dir) const { closedir(dir); }
};
using Dir = std::unique_ptr<DIR, DirCloser>;

// A directory stream on `path` below `at`; null when it cannot be read.
Dir OpenDir(int at, const std::string& path) {
  UniqueFd fd(openat(at, path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return nullptr;
  Dir dir(fdopendir(fd.get()));
  if (dir) (void)fd.release();  // The stream owns it now.
  return dir;
}

// The socket inodes among `wanted` that a process other than this one has open, from
// /proc/<pid>/fd of every process this one may read (the tools run as its user).
std::set<ino_t> Referenced(const std::set<ino_t>& wanted) {
  std::set<ino_t> found;
  UniqueFd proc(open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
  Dir procs = proc ? OpenDir(proc.get(), ".") : nullptr;
  if (!procs) return wanted;  // Unknown: keep everything.
  const std::string self = std::to_string(getpid());
  while (dirent* entry = readdir(procs.get())) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9' || self == entry->d_name) continue;
    Dir fds = OpenDir(proc.get(), std::string(entry->d_name) + "/fd");
    while (dirent* fd = fds ? readdir(fds.get()) : nullptr) {
      char link[64];
      ssize_t n = readlinkat(dirfd(fds.get()), fd->d_name, link, sizeof link - 1);
      unsigned long long ino = 0;
      if (n <= 0) continue;
      link[n] = '\0';
      if (std::sscanf(link, "socket:[%llu]", &ino) == 1 && wanted.count(ino)) found.insert(ino);
    }
    if (found.size() == wanted.size()) break;
  }
  return found;
}

// Lets go of the held sockets `which` picks that no process has open any more: before a bind()
// to their port (a closed UDP or bound TCP socket frees it, as in the kernel), or all of them
// when the tool is at the bound.
void DropUnreferenced(Tool& tool, const std::function<bool(int)>& which) {
  std::set<ino_t> wanted;
  for (const auto& [ino, sock] : tool.held) {
    if (which(sock.get())) wanted.insert(ino);
  }
  if (wanted.empty()) return;
  std::set<ino_t> open = Referenced(wanted);
  std::erase_if(tool.held, [&](const auto& entry) {
    return wanted.count(entry.first) != 0 && open.count(entry.first) == 0;
  });
}

// connect() on the broker's dup, never blocking the broker: the file description is the tool's
// too, so O_NONBLOCK is set only for the call (a full unix backlog answers EAGAIN, a TCP connect
// EINPROGRESS). *blocking: whether the tool's socket is blocking.
int ConnectNow(int sock, const sockaddr* addr, socklen_t len, bool* blocking = nullptr) {
  int flags = fcntl(sock, F_GETFL);
  if (flags < 0) return -errno;
  if (blocking != nullptr) *blocking = !(flags & O_NONBLOCK);
  if (!(flags & O_NONBLOCK) && fcntl(sock, F_SETFL, flags | O_NONBLOCK) != 0) return -errno;
  int rc = connect(sock, addr, len);
  int err = rc == 0 ? 0 : errno;
  if (!(flags & O_NONBLOCK)) (void)fcntl(sock, F_SETFL, flags);
  return -err;
}

using DevIno = std::pair<dev_t, ino_t>;

bool Stat(int fd, DevIno* id) {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  *id = {st.st_dev, st.st_ino};
  return true;
}

// Whether `dir` (an O_PATH directory in the tool's view) is one of the writable trees or beneath
// one: the trees are opened from the tool's root without following any symbolic link, and ".." is
// walked up from `dir` to the top of its mount tree.
bool BeneathTrees(int dir, int root, const std::vector<std::string>& trees) {
  std::vector<DevIno> roots;
  for (const std::string& tree : trees) {
    std::string rel =
        tree.substr(tree.find_first_not_of('/') == std::string::npos ? tree.size()
                                                                     : tree.find_first_not_of('/'));
    UniqueFd fd = OpenAt2(root, rel.empty() ? "." : rel.c_str(), O_PATH | O_DIRECTORY,
                          RESOLVE_IN_ROOT | kResolveNoLinks);
    DevIno id;
    if (fd && Stat(fd.get(), &id)) roots.push_back(id);
  }
  UniqueFd cur(openat(dir, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  DevIno here;
  if (!cur || !Stat(cur.get(), &here)) return false;
  for (int step = 0; step < kMaxWalk; ++step) {
    for (const DevIno& r : roots) {
      if (r == here) return true;
    }
    UniqueFd up(openat(cur.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
    DevIno above;
    if (!up || !Stat(up.get(), &above) || above == here) return false;
    cur = std::move(up);
    here = above;
  }
  return false;
}

// The pathname part of the check: `path` resolved in the tool's view, then the held socket
// connected to exactly the inode that passed.
Answer ConnectPath(const Tool& tool, int sock, int root, int cwd, const std::string& path) {
  const bool absolute = path[0] == '/';
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string last = slash == std::string::npos ? path : path.substr(slash + 1);
  if (absolute) dir = dir.substr(std::min(dir.find_first_not_of('/'), dir.size()));
  if (dir.empty()) dir = ".";
  if (last.empty()) return Fail(ECONNREFUSED);
  // Absolute symbolic links inside a relative path resolve against the broker's root, where the
  // walk below refuses what is not a writable tree of the tool.
  UniqueFd dirfd = OpenAt2(absolute ? root : cwd, dir.c_str(), O_PATH | O_DIRECTORY,
                           (absolute ? RESOLVE_IN_ROOT : 0) | RESOLVE_NO_MAGICLINKS);
  if (!dirfd) return Fail(errno);
  UniqueFd target(openat(dirfd.get(), last.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!target) return Fail(errno);
  struct stat st;
  if (fstat(target.get(), &st) != 0) return Fail(errno);
  if (S_ISLNK(st.st_mode)) return Refuse(ELOOP, "a symbolic link (connect to its target)");
  if (tool.policy.layer2_view && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) {
    return Refuse(ECONNREFUSED, "a socket outside the writable trees (covered in the sandbox)");
  }
  if (!S_ISSOCK(st.st_mode)) return Fail(ECONNREFUSED);
  if (st.st_nlink != 1) return Refuse(EACCES, "a hard link of a socket");
  if (!BeneathTrees(dirfd.get(), root, tool.policy.trees)) {
    return Refuse(EACCES, "outside the writable trees");
  }
  sockaddr_un via{};
  via.sun_family = AF_UNIX;
  int n = std::snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", target.get());
  return Fail(-ConnectNow(sock, reinterpret_cast<const sockaddr*>(&via),
                          static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n)));
}

bool IdValid(int listener, uint64_t id) {
  return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

// Reads the tool's sockaddr from /proc/<pid>/mem, once, with the kernel's limits.
int ReadAddress(int mem, uint64_t at, uint64_t len, sockaddr_storage* addr) {
  if (len > sizeof(sockaddr_storage)) return EINVAL;
  if (at > static_cast<uint64_t>(INT64_MAX)) return EFAULT;
  if (len == 0) return 0;
  ssize_t got = pread(mem, addr, len, static_cast<off_t>(at));
  return got == static_cast<ssize_t>(len) ? 0 : EFAULT;
}

// A unix dup: an abstract name only when scoped, a pathname through the check.
Answer ConnectUnix(const Tool& tool, int sock, const sockaddr_storage& storage, uint64_t len,
                   int root, int cwd) {
  const auto& addr = reinterpret_cast<const sockaddr_un&>(storage);
  if (len <= offsetof(sockaddr_un, sun_path) || len > sizeof(sockaddr_un)) return Fail(EINVAL);
  if (addr.sun_family != AF_UNIX) return Fail(EINVAL);
  const size_t name_len = len - offsetof(sockaddr_un, sun_path);
  if (addr.sun_path[0] == '\0') {
    std::string name = "@" + std::string(addr.sun_path + 1, name_len - 1);
    if (!tool.policy.abstract_scoped) {
      return Refuse(EPERM, "an abstract address (" + name +
                               "): this broker is not Landlock-scoped (forkbox sandbox)");
    }
    int rc =
        ConnectNow(sock, reinterpret_cast<const sockaddr*>(&addr), static_cast<socklen_t>(len));
    return rc == -EPERM ? Refuse(EPERM, "an abstract socket outside the sandbox (" + name + ")")
                        : Fail(-rc);
  }
  std::string path(addr.sun_path, strnlen(addr.sun_path, name_len));
  Answer answer = ConnectPath(tool, sock, root, cwd, path);
  if (!answer.refusal.empty()) answer.refusal = path + " refused: " + answer.refusal;
  return answer;
}

// An inet dup (--allow-net): connected to the address read once. A blocking tool socket waits in
// the kernel's place: the broker's loop answers when the connect finished.
Answer ConnectInet(Tool& tool, const seccomp_notif& req, ino_t ino, int sock,
                   const sockaddr_storage& addr, socklen_t len) {
  bool blocking = false;
  int rc = ConnectNow(sock, reinterpret_cast<const sockaddr*>(&addr), len, &blocking);
  const bool waits = blocking && (rc == -EINPROGRESS || rc == -EALREADY);
  // Pending connects hold a descriptor each: kMaxHeld at most. Beyond, a blocking caller gets
  // EAGAIN and a non-blocking one is not watched (its dup goes in the sweep at the held bound).
  if (tool.pending.size() >= kMaxHeld) return Fail(waits ? EAGAIN : -rc);
  if (!waits && rc != -EINPROGRESS) return Fail(-rc);
  // A non-blocking caller gets EINPROGRESS now; the connect is still watched, so the held dup goes
  // once connected (a connection the tool closes must close).
  Pending wait{waits ? req.id : 0, ino, UniqueFd(fcntl(sock, F_DUPFD_CLOEXEC, 0)), addr, len};
  if (!wait.sock) return Fail(errno);
  tool.pending.push_back(std::move(wait));
  return waits ? Sent() : Fail(EINPROGRESS);
}

Answer Connect(Tool& tool, const seccomp_notif& req) {
  const pid_t pid = static_cast<pid_t>(req.pid);
  ino_t ino = 0;
  if (int err = SocketInode(pid, static_cast<int>(req.data.args[0]), &ino)) return Fail(err);
  auto held = tool.held.find(ino);
  if (held == tool.held.end()) return Fail(UnheldErrno(pid, ino));
  if (int err = SettledErrno(held->second.get())) {
    tool.held.erase(held);
    return Fail(err);
  }
  UniqueFd mem(open(ProcPath(pid, "mem").c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd root(open(ProcPath(pid, "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  UniqueFd cwd(open(ProcPath(pid, "cwd").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!mem || !root || !cwd) return Fail(EPERM);
  sockaddr_storage addr{};
  const uint64_t len = req.data.args[2] & 0xffffffffu;
  if (int err = ReadAddress(mem.get(), req.data.args[1], len, &addr)) return Fail(err);
  // The pid's files were opened and its memory read: only now is it known to be the caller.
  if (!IdValid(tool.listener.get(), req.id)) return Sent();
  const int sock = held->second.get();
  Answer answer = SocketOption(sock, SO_DOMAIN) == AF_UNIX
                      ? ConnectUnix(tool, sock, addr, len, root.get(), cwd.get())
                      : ConnectInet(tool, req, ino, sock, addr, static_cast<socklen_t>(len));
  // Connected: the tool's fd is all it needs (a datagram socket stays held: it may reconnect).
  if (!answer.sent && answer.error == 0 && SettledErrno(sock) != 0) tool.held.erase(held);
  return answer;
}

// listen() on a held socket is done on the broker's dup, which then goes: the listener's port (or
// path) is the tool's alone, freed when the tool closes it. Any other socket is continued: listen()
// reaches nothing outside, whatever a second thread swaps in.
Answer Listen(Tool& tool, const seccomp_notif& req) {
  ino_t ino = 0;
  if (int err =
          SocketInode(static_cast<pid_t>(req.pid), static_cast<int>(req.data.args[0]), &ino)) {
    return Fail(err);
  }
  auto held = tool.held.find(ino);
  if (held == tool.held.end()) return Continue();
  if (listen(held->second.get(), static_cast<int>(req.data.args[1])) != 0) return Fail(errno);
  tool.held.erase(held);
  return Answer{};  // 0.
}

// bind() is continued (it reaches nothing outside, and the kernel checks the port's privilege and
// Landlock's rules as the tool), after a held socket the tool closed that holds the same port was
// let go.
Answer Bind(Tool& tool, const seccomp_notif& req) {
  const pid_t pid = static_cast<pid_t>(req.pid);
  ino_t ino = 0;
  if (SocketInode(pid, static_cast<int>(req.data.args[0]), &ino) != 0) return Continue();
  UniqueFd mem(open(ProcPath(pid, "mem").c_str(), O_RDONLY | O_CLOEXEC));
  sockaddr_storage addr{};
  const uint64_t len = req.data.args[2] & 0xffffffffu;
  if (!mem || ReadAddress(mem.get(), req.data.args[1], len, &addr) != 0) return Continue();
  const int port = PortOf(addr, static_cast<socklen_t>(len));
  if (port == 0) return Continue();
  auto self = tool.held.find(ino);
  const int except = self == tool.held.end() ? -1 : self->second.get();
  DropUnreferenced(tool, [&](int sock) { return sock != except && LocalPort(sock) == port; });
  return Continue();
}

// The types the broker makes: unix stream and seqpacket (datagrams name their destination in
// memory seccomp cannot read), inet stream and datagram (raw needs a capability the tool lacks;
// the broker's own must not lend it one).
bool Brokerable(int family, int type) {
  if (family == AF_UNIX) return type == SOCK_STREAM || type == SOCK_SEQPACKET;
  if (family == AF_INET || family == AF_INET6) return type == SOCK_STREAM || type == SOCK_DGRAM;
  return false;
}

Answer MakeSocket(Tool& tool, const seccomp_notif& req) {
  const int family = static_cast<int>(req.data.args[0]);
  const int type = static_cast<int>(req.data.args[1]);
  if (!Brokerable(family, type & 0xf)) return Fail(EPERM);
  if (tool.held.size() >= kMaxHeld) DropSettled(tool);
  if (tool.held.size() >= kMaxHeld) DropUnreferenced(tool, [](int) { return true; });
  if (tool.held.size() >= kMaxHeld) return Fail(EMFILE);
  UniqueFd sock(
      socket(family, (type & ~SOCK_CLOEXEC) | SOCK_CLOEXEC, static_cast<int>(req.data.args[2])));
  if (!sock) return Fail(errno);
  seccomp_notif_addfd addfd{};
  addfd.id = req.id;
  addfd.flags = SECCOMP_ADDFD_FLAG_SEND;
  addfd.srcfd = static_cast<uint32_t>(sock.get());
  addfd.newfd_flags = (type & SOCK_CLOEXEC) ? O_CLOEXEC : 0;
  if (ioctl(tool.listener.get(), SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) < 0) {
    return errno == ENOENT ? Sent() : Fail(errno);
  }
  struct stat st;
  if (fstat(sock.get(), &st) == 0) tool.held[st.st_ino] = std::move(sock);
  return Sent();
}

void Respond(const Tool& tool, std::vector<char>& resp_buf, uint64_t id, int error, bool cont) {
  std::memset(resp_buf.data(), 0, resp_buf.size());
  auto* resp = reinterpret_cast<seccomp_notif_resp*>(resp_buf.data());
  resp->id = id;
  resp->error = error;
  resp->flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
  (void)ioctl(tool.listener.get(), SECCOMP_IOCTL_NOTIF_SEND, resp);  // ENOENT: caller gone.
}

// A waiting caller that is gone (killed, or interrupted by a signal: a restarted connect() comes
// as a new notification and finds the connect in progress) is not answered; its connect stays
// watched, so the held dup still goes once connected.
void ForgetGoneCallers(Tool& tool) {
  for (Pending& p : tool.pending) {
    if (p.id != 0 && !IdValid(tool.listener.get(), p.id)) p.id = 0;
  }
}

// The socket of a pending connect is writable. Callers that wait get what the kernel's blocking
// connect returns, by connecting again (0 once connected, else the error, which also resets the
// socket for a retry); a watched non-blocking connect is left for the tool to read (SO_ERROR).
void FinishPending(Tool& tool, ino_t ino, std::vector<char>& resp_buf) {
  auto waiter = std::find_if(tool.pending.begin(), tool.pending.end(),
                             [&](const Pending& p) { return p.ino == ino && p.id != 0; });
  if (waiter != tool.pending.end()) {
    int rc = ConnectNow(waiter->sock.get(), reinterpret_cast<const sockaddr*>(&waiter->addr),
                        waiter->len);
    if (rc == -EALREADY || rc == -EINPROGRESS) return;
    if (rc == -EISCONN) rc = 0;
    for (const Pending& p : tool.pending) {
      if (p.ino == ino && p.id != 0) Respond(tool, resp_buf, p.id, rc, false);
    }
  }
  std::erase_if(tool.pending, [&](const Pending& p) { return p.ino == ino; });
  DropSettled(tool);
}

void Report(Tool& tool, const std::string& refusal) {
  if (!tool.report || tool.reported.size() >= kMaxReports) return;
  if (!tool.reported.insert(refusal).second) return;
  std::string line = "forkbox: connect to " + refusal + "\n";
  (void)!write(tool.report.get(), line.data(), line.size());  // Best effort: never blocks.
}

// Receives and answers one notification.
void HandleOne(Tool& tool, std::vector<char>& req_buf, std::vector<char>& resp_buf) {
  std::memset(req_buf.data(), 0, req_buf.size());
  auto* req = reinterpret_cast<seccomp_notif*>(req_buf.data());
  if (ioctl(tool.listener.get(), SECCOMP_IOCTL_NOTIF_RECV, req) != 0) return;  // Caller gone.
  Answer answer = req->data.nr == SYS_socket    ? MakeSocket(tool, *req)
                  : req->data.nr == SYS_connect ? Connect(tool, *req)
                  : req->data.nr == SYS_listen  ? Listen(tool, *req)
                  : req->data.nr == SYS_bind    ? Bind(tool, *req)
                                                : Fail(EPERM);
  if (!answer.sent) Respond(tool, resp_buf, req->id, answer.error, answer.cont);
  if (!answer.refusal.empty()) Report(tool, answer.refusal);
}

}  // namespace

struct UnixBroker::State {
  // The tools go first: each takes its descriptors out of `listeners` (~Tool).
  ~State() {
    tools.clear();
    incoming.clear();
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<Tool>> incoming;  // Guarded by mu.
  const std::function<void()>* task = nullptr;  // Guarded by mu; reset once it ran.
  bool stop = false;                            // Guarded by mu.
  bool started = false;                         // Guarded by mu: `scoped` is final.
  bool scoped = false;                          // Guarded by mu.
  bool scope_self = false;
  BrokerThread serving = BrokerThread::kOwn;
  UniqueFd wake;  // eventfd: task or stop changed.
  // epoll over every served listener and command pidfd (data.ptr: a Watch). Serve adds a new
  // tool's here itself, so the thread is not woken per tool: only once the tool calls, ends (or is
  // gone), and it takes `incoming` before it reads which tool that was.
  UniqueFd listeners;
  std::thread thread;
  std::mutex run_mu;  // One RunOnThread at a time.
  // Touched only by the one serving thread (the broker's own, or the caller's in ServeUntil).
  std::vector<std::unique_ptr<Tool>> tools;
  std::vector<char> req, resp;

  // Serves until stopped; if it ever fails, every listener goes (the tools' socket() and
  // connect() then fail with ENOSYS) and Serve refuses new ones: never a tool left waiting.
  void Run() {
    // no_new_privs and the domain are this thread's own: the caller's other threads keep theirs.
    bool ok = scope_self && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
              landlock::RestrictAbstractUnixScopeRaw() == 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      scoped = ok;
      started = true;
    }
    cv.notify_all();
    Loop();
    Fail();
  }
  // Every listener goes and Serve refuses new ones.
  void Fail() {
    tools.clear();
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      incoming.clear();
    }
    cv.notify_all();
  }
  void Loop();
  bool ServeOnce(std::span<pollfd> until);
  Status OpenFds();
  Status StartLocked();
  Status Wake() {
    uint64_t one = 1;
    if (write(wake.get(), &one, sizeof one) != sizeof one) {
      return Status::FromErrno(errno, "write(unix broker eventfd)");
    }
    return Status::Ok();
  }
};

void UnixBroker::State::Loop() {
  for (;;) {
    const std::function<void()>* run = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) return;
      run = task;
    }
    if (run != nullptr) {
      (*run)();
      {
        std::lock_guard<std::mutex> lock(mu);
        task = nullptr;
      }
      cv.notify_all();
    }
    if (!ServeOnce({})) return;
  }
}

// One poll over the wake eventfd, the listeners' epoll, every pending connect and `until` (whose
// revents it sets); then the new tools, the finished connects, the notifications, and the tools
// no process uses any more. False: poll or epoll_wait failed.
bool UnixBroker::State::ServeOnce(std::span<pollfd> until) {
  std::vector<pollfd> fds{{wake.get(), POLLIN, 0}, {listeners.get(), POLLIN, 0}};
  fds.insert(fds.end(), until.begin(), until.end());
  const size_t first_wait = fds.size();
  std::vector<std::pair<Tool*, ino_t>> waits;
  for (const auto& tool : tools) {
    ForgetGoneCallers(*tool);
    for (const Pending& p : tool->pending) {
      fds.push_back({p.sock.get(), POLLOUT, 0});
      waits.emplace_back(tool.get(), p.ino);
    }
  }
  if (poll(fds.data(), fds.size(), -1) < 0) return errno == EINTR;
  for (size_t i = 0; i < until.size(); ++i) until[i].revents = fds[2 + i].revents;
  if (fds[0].revents & POLLIN) {
    uint64_t count = 0;
    (void)!read(wake.get(), &count, sizeof count);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& tool : incoming) tools.push_back(std::move(tool));
    incoming.clear();
  }
  for (size_t i = 0; i < waits.size(); ++i) {
    if (fds[first_wait + i].revents == 0) continue;
    FinishPending(*waits[i].first, waits[i].second, resp);
  }
  if ((fds[1].revents & POLLIN) == 0) return true;
  epoll_event events[16];
  int n = epoll_wait(listeners.get(), events, 16, 0);
  if (n < 0) return errno == EINTR;
  // Sorted before anything is freed (a listener's hang-up frees its tool, whose command may have
  // an event in this batch too); ended commands first.
  std::vector<std::pair<Tool*, uint32_t>> ready[2];
  for (int i = 0; i < n; ++i) {
    const auto* watch = static_cast<const Watch*>(events[i].data.ptr);
    const uint32_t what = events[i].events;  // epoll_event is packed: copied, not bound.
    ready[watch->what == Watch::kCommand ? 0 : 1].emplace_back(watch->tool, what);
  }
  for (const auto& [tool, _] : ready[0]) {
    (void)epoll_ctl(listeners.get(), EPOLL_CTL_DEL, tool->command.get(), nullptr);
    tool->report.reset();
    tool->command.reset();
  }
  for (const auto& event : ready[1]) {
    Tool* tool = event.first;  // Not a structured binding: clang 14 cannot capture those.
    if (event.second & EPOLLIN) {
      HandleOne(*tool, req, resp);
    } else if (event.second & (EPOLLHUP | EPOLLERR)) {
      // No process uses the filter. ~Tool takes its descriptors out of the epoll set.
      std::erase_if(tools, [tool](const std::unique_ptr<Tool>& t) { return t.get() == tool; });
    }
  }
  return true;
}

// The eventfd, the epoll and the notification buffers, once.
Status UnixBroker::State::OpenFds() {
  if (listeners) return Status::Ok();
  seccomp_notif_sizes sizes{};
  if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) {
    return Status::FromErrno(errno, "seccomp(GET_NOTIF_SIZES)");
  }
  req.resize(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
  resp.resize(std::max<size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)));
  wake.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return Status::FromErrno(errno, "eventfd(unix broker)");
  listeners.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!listeners) return Status::FromErrno(errno, "epoll_create1(unix broker)");
  return Status::Ok();
}

Status UnixBroker::State::StartLocked() {
  if (stop) return Status::Internal("the unix connect broker stopped");
  FORKBOX_RETURN_IF_ERROR(OpenFds());
  if (serving == BrokerThread::kCallers || thread.joinable()) return Status::Ok();
  // Every signal stays blocked on the broker's thread, so a process-directed one (Ctrl-C) is
  // taken by the thread the caller handles signals on (signalfd), never by this one.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    thread = std::thread([this] { Run(); });
  } catch (const std::system_error& e) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return Status::Internal(std::string("unix connect broker thread: ") + e.what());
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return Status::Ok();
}

UnixBroker::UnixBroker(bool scope_self, BrokerThread serving) : state_(std::make_unique<State>()) {
  state_->scope_self = scope_self && serving == BrokerThread::kOwn;
  state_->serving = serving;
}

UnixBroker::~UnixBroker() {
  if (!state_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  (void)state_->Wake();
  state_->thread.join();
}

Status UnixBroker::Serve(UniqueFd listener, BrokerPolicy policy, UniqueFd report,
                         UniqueFd command) {
  auto tool = std::make_unique<Tool>();
  tool->listener = std::move(listener);
  tool->policy = std::move(policy);
  tool->report = std::move(report);
  if (tool->report) tool->command = std::move(command);
  std::lock_guard<std::mutex> lock(state_->mu);
  FORKBOX_RETURN_IF_ERROR(state_->StartLocked());
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = &tool->on_listener;
  tool->epoll = state_->listeners.get();
  if (epoll_ctl(state_->listeners.get(), EPOLL_CTL_ADD, tool->listener.get(), &event) != 0) {
    return Status::FromErrno(errno, "epoll_ctl(unix broker listener)");
  }
  event.data.ptr = &tool->on_command;
  if (tool->command &&
      epoll_ctl(state_->listeners.get(), EPOLL_CTL_ADD, tool->command.get(), &event) != 0) {
    (void)epoll_ctl(state_->listeners.get(), EPOLL_CTL_DEL, tool->listener.get(), nullptr);
    return Status::FromErrno(errno, "epoll_ctl(the command's pidfd)");
  }
  state_->incoming.push_back(std::move(tool));  // Before the thread can read its event (mu).
  return Status::Ok();
}

Status UnixBroker::Start() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->StartLocked();
}

Status UnixBroker::ServeUntil(std::span<pollfd> until) {
  for (pollfd& fd : until) fd.revents = 0;
  const auto woken = [&] {
    return std::any_of(until.begin(), until.end(), [](const pollfd& fd) { return fd.revents; });
  };
  bool serve = false;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    serve = state_->serving == BrokerThread::kCallers && !state_->stop;
    if (serve) FORKBOX_RETURN_IF_ERROR(state_->OpenFds());
  }
  if (!serve) {  // The broker's own thread serves, or nothing is served any more.
    while (poll(until.data(), until.size(), -1) < 0) {
      if (errno != EINTR) return Status::FromErrno(errno, "poll");
    }
    return Status::Ok();
  }
  while (!woken()) {
    if (!state_->ServeOnce(until)) {
      Status failed = Status::FromErrno(errno, "unix connect broker: poll");
      state_->Fail();
      return failed;
    }
  }
  return Status::Ok();
}

Status UnixBroker::RunOnThread(const std::function<void()>& task) {
  std::lock_guard<std::mutex> one(state_->run_mu);
  std::unique_lock<std::mutex> lock(state_->mu);
  if (state_->serving == BrokerThread::kCallers) {
    return Status::Internal("the unix connect broker has no thread of its own");
  }
  FORKBOX_RETURN_IF_ERROR(state_->StartLocked());
  state_->task = &task;
  FORKBOX_RETURN_IF_ERROR(state_->Wake());
  state_->cv.wait(lock, [&] { return state_->task == nullptr || state_->stop; });
  if (state_->task != nullptr) {
    state_->task = nullptr;
    return Status::Internal("the unix connect broker stopped");
  }
  return Status::Ok();
}

bool UnixBroker::self_scoped() const {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock,
                  [&] { return state_->started || state_->stop || !state_->thread.joinable(); });
  return state_->scoped;
}

Result<UniqueFd> ReceiveListener(int socket) {
  char data = 0;
  size_t size = 0;
  std::vector<UniqueFd> fds;
  Status got = RecvWithFds(socket, &data, 1, 1, MSG_DONTWAIT, &size, &fds);
  if (!got.ok()) return got.WithContext("the tool's seccomp listener");
  if (size != 1 || fds.size() != 1) return Status::Internal("the tool sent no seccomp listener");
  return std::move(fds[0]);
}

}  // namespace forkbox::sandbox
