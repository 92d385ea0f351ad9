#include "parent/spawner.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/fd_passing.h"
#include "ipc/frame.h"
#include "parent/child_launcher.h"
#include "sandbox/sandbox.h"

namespace forkbox::parent {
namespace {

// A pipe end of the right direction, or a regular file open for writing.
Status CheckFd(int fd, bool pipe, int access, const char* what) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, what);
  if (pipe ? !S_ISFIFO(st.st_mode) : !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(std::string(what) + ": wrong kind of file");
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) != access) {
    return Status::InvalidArgument(std::string(what) + ": wrong access mode");
  }
  return Status::Ok();
}

Status Validate(const SpawnRequest& r, size_t size, const std::vector<UniqueFd>& fds) {
  if (size != sizeof(SpawnRequest)) return Status::InvalidArgument("request of the wrong size");
  if (r.magic != kSpawnMagic || r.version != kSpawnVersion) {
    return Status::InvalidArgument("bad magic or version");
  }
  if (r.kind != kSpawnLaunchChild) return Status::InvalidArgument("unknown request kind");
  if ((r.flags & ~kSpawnFlagTranscript) != 0) return Status::InvalidArgument("unknown flags");
  const size_t want = (r.flags & kSpawnFlagTranscript) != 0 ? 3 : 2;
  if (fds.size() != want) return Status::InvalidArgument("wrong number of descriptors");
  FORKBOX_RETURN_IF_ERROR(CheckFd(fds[0].get(), true, O_RDONLY, "control pipe"));
  FORKBOX_RETURN_IF_ERROR(CheckFd(fds[1].get(), true, O_WRONLY, "report pipe"));
  if (want == 3) FORKBOX_RETURN_IF_ERROR(CheckFd(fds[2].get(), false, O_WRONLY, "transcript"));
  return Status::Ok();
}

// Everything the spawner holds, opened before it confines itself.
struct SpawnerState {
  const SpawnerConfig& config;
  int sock;
  int devnull;
};

Result<ChildProcess> StartChild(const SpawnerState& s, const std::vector<UniqueFd>& fds) {
  const int err_fd = s.config.verbose ? STDERR_FILENO : s.devnull;
  SpawnOptions opts;
  opts.argv = {s.config.child_path};
  opts.env = s.config.child_env;
  // The directory the descriptor names now, whatever its name has become.
  opts.cwd = "/proc/self/fd/" + std::to_string(ipc::kChildWorkdirFd);
  opts.new_session = true;
  opts.clone_flags = CLONE_PARENT;  // The parent's child: it waits for it and kills it.
  opts.fds = {{s.devnull, 0},
              {err_fd, 1},
              {err_fd, 2},
              {fds[0].get(), ipc::kChildControlReadFd},
              {fds[1].get(), ipc::kChildReportWriteFd},
              {s.config.workdir.get(), ipc::kChildWorkdirFd}};
  if (fds.size() == 3) opts.fds.push_back({fds[2].get(), kTranscriptChildFd});
  return Spawn(opts);
}

void Reply(int sock, const Status& st, pid_t pid, UniqueFd pidfd) {
  SpawnReply reply;
  reply.pid = pid;
  if (!st.ok()) {
    reply.error = st.code() == Status::Code::kInvalidArgument ? EINVAL : EIO;
    std::string text = st.ToString().substr(0, sizeof(reply.message) - 1);
    std::memcpy(reply.message, text.data(), text.size());
  }
  std::vector<int> fds;
  if (pidfd) fds.push_back(pidfd.get());
  (void)SendWithFds(sock, &reply, sizeof(reply), fds);  // A gone parent: EOF ends the loop.
}

[[noreturn]] void Serve(const SpawnerState& s) {
  for (;;) {
    // One byte more than a request, so that an oversized one is seen as such.
    char buf[sizeof(SpawnRequest) + 1];
    size_t size = 0;
    std::vector<UniqueFd> fds;
    Status st = RecvWithFds(s.sock, buf, sizeof(buf), kSpawnerMaxFds, 0, &size, &fds);
    if (st.ok() && size == 0 && fds.empty()) ::_exit(0);  // The parent closed its end.
    if (!st.ok() && st.code() != Status::Code::kInvalidArgument) ::_exit(1);
    SpawnRequest request;
    std::memcpy(&request, buf, std::min(size, sizeof(request)));
    if (st.ok()) st = Validate(request, size, fds);
    if (!st.ok()) {
      Reply(s.sock, st.WithContext("spawner refused the request"), -1, UniqueFd());
      continue;
    }
    Result<ChildProcess> child = StartChild(s, fds);
    if (!child.ok()) {
      Reply(s.sock, child.status(), -1, UniqueFd());
      continue;
    }
    pid_t pid = child->pid();
    Reply(s.sock, Status::Ok(), pid, child->Release());
  }
}

[[noreturn]] void RunSpawner(const SpawnerConfig& config, int sock, pid_t parent) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != parent) ::_exit(1);
  ::setsid();  // Out of the terminal's process group: Ctrl-C is the parent's to handle.
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) ::_exit(1);
  const int keep[] = {sock, devnull.get(), config.workdir.get()};
  if (Status st = sandbox::ConfineSpawner(keep); !st.ok()) {
    std::string text = "forkbox: spawner: " + st.ToString() + "\n";
    (void)!::write(STDERR_FILENO, text.data(), text.size());
    ::_exit(1);
  }
  Serve(SpawnerState{config, sock, devnull.get()});
}

}  // namespace

Result<Spawner> Spawner::Start(SpawnerConfig config) {
  if (config.child_path.empty() || config.child_path[0] != '/') {
    return Status::InvalidArgument("spawner: the child path must be absolute");
  }
  if (!config.workdir) return Status::InvalidArgument("spawner: no workdir descriptor");
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return Status::FromErrno(errno, "socketpair(spawner)");
  }
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  const pid_t parent = ::getpid();
  int pidfd = -1;
  long pid = ::syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, nullptr, &pidfd, nullptr, nullptr);
  if (pid < 0) return Status::FromErrno(errno, "clone(spawner)");
  if (pid == 0) {
    ours.reset();
    RunSpawner(config, theirs.get(), parent);
  }
  Spawner spawner;
  spawner.process_ = ChildProcess(static_cast<pid_t>(pid), UniqueFd(pidfd), false);
  spawner.socket_ = std::move(ours);
  return spawner;
}

Result<ChildProcess> Spawner::Launch(int control_read, int report_write, int transcript) const {
  SpawnRequest request;
  std::vector<int> fds = {control_read, report_write};
  if (transcript >= 0) {
    request.flags |= kSpawnFlagTranscript;
    fds.push_back(transcript);
  }
  if (Status sent = SendWithFds(socket_.get(), &request, sizeof(request), fds); !sent.ok()) {
    return sent.WithContext("spawner");
  }
  SpawnReply reply;
  size_t size = 0;
  std::vector<UniqueFd> got;
  if (Status got_reply =
          RecvWithFds(socket_.get(), &reply, sizeof(reply), kSpawnerMaxFds, 0, &size, &got);
      !got_reply.ok()) {
    return got_reply.WithContext("spawner");
  }
  if (size == 0) return Status::Internal("the spawner is gone");
  if (size != sizeof(reply) || reply.magic != kSpawnMagic) {
    return Status::Internal("malformed reply from the spawner");
  }
  if (reply.error != 0) {
    reply.message[sizeof(reply.message) - 1] = '\0';
    return Status::Internal(reply.message);
  }
  if (got.size() != 1 || reply.pid <= 0) return Status::Internal("spawner reply without a pidfd");
  return ChildProcess(reply.pid, std::move(got[0]), /*own_group=*/true);
}

}  // namespace forkbox::parent
