#include "child/spawner.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/fd_passing.h"
#include "base/process.h"
#include "ipc/frame.h"
#include "ipc/spawner_wire.h"
#include "sandbox/sandbox.h"

extern char** environ;

namespace forkbox::child {
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

Status Validate(const ipc::SpawnRequest& r, size_t size, const std::vector<UniqueFd>& fds) {
  if (size != sizeof(ipc::SpawnRequest)) {
    return Status::InvalidArgument("request of the wrong size");
  }
  if (r.magic != ipc::kSpawnMagic || r.version != ipc::kSpawnVersion) {
    return Status::InvalidArgument("bad magic or version");
  }
  if (r.kind != ipc::kSpawnLaunchChild) return Status::InvalidArgument("unknown request kind");
  if ((r.flags & ~ipc::kSpawnFlagTranscript) != 0) {
    return Status::InvalidArgument("unknown flags");
  }
  const size_t want = (r.flags & ipc::kSpawnFlagTranscript) != 0 ? 3 : 2;
  if (fds.size() != want) return Status::InvalidArgument("wrong number of descriptors");
  FORKBOX_RETURN_IF_ERROR(CheckFd(fds[0].get(), true, O_RDONLY, "control pipe"));
  FORKBOX_RETURN_IF_ERROR(CheckFd(fds[1].get(), true, O_WRONLY, "report pipe"));
  if (want == 3) FORKBOX_RETURN_IF_ERROR(CheckFd(fds[2].get(), false, O_WRONLY, "transcript"));
  return Status::Ok();
}

// Everything the spawner holds, fixed before it confines itself.
struct SpawnerState {
  std::string child_path;
  std::vector<std::string> env;
  bool verbose = false;
  UniqueFd devnull;
};

Result<ChildProcess> StartChild(const SpawnerState& s, const std::vector<UniqueFd>& fds) {
  const int err_fd = s.verbose ? STDERR_FILENO : s.devnull.get();
  SpawnOptions opts;
  opts.argv = {s.child_path};
  opts.env = s.env;
  // The directory the descriptor names now, whatever its name has become.
  opts.cwd = "/proc/self/fd/" + std::to_string(ipc::kChildWorkdirFd);
  opts.new_session = true;
  opts.clone_flags = CLONE_PARENT;  // The parent's child: it waits for it and kills it.
  opts.fds = {{s.devnull.get(), 0},
              {err_fd, 1},
              {err_fd, 2},
              {fds[0].get(), ipc::kChildControlReadFd},
              {fds[1].get(), ipc::kChildReportWriteFd},
              {ipc::kSpawnerWorkdirFd, ipc::kChildWorkdirFd}};
  if (fds.size() == 3) opts.fds.push_back({fds[2].get(), ipc::kChildTranscriptFd});
  return Spawn(opts);
}

void Reply(const Status& st, pid_t pid, UniqueFd pidfd) {
  ipc::SpawnReply reply;
  reply.pid = pid;
  if (!st.ok()) {
    reply.error = st.code() == Status::Code::kInvalidArgument ? EINVAL : EIO;
    std::string text = st.ToString().substr(0, sizeof(reply.message) - 1);
    std::memcpy(reply.message, text.data(), text.size());
  }
  std::vector<int> fds;
  if (pidfd) fds.push_back(pidfd.get());
  // A gone parent: EOF ends the loop.
  (void)SendWithFds(ipc::kSpawnerSocketFd, &reply, sizeof(reply), fds);
}

int Serve(const SpawnerState& s) {
  for (;;) {
    // One byte more than a request, so that an oversized one is seen as such.
    char buf[sizeof(ipc::SpawnRequest) + 1];
    size_t size = 0;
    std::vector<UniqueFd> fds;
    Status st =
        RecvWithFds(ipc::kSpawnerSocketFd, buf, sizeof(buf), ipc::kSpawnerMaxFds, 0, &size, &fds);
    if (st.ok() && size == 0 && fds.empty()) return 0;  // The parent closed its end.
    if (!st.ok() && st.code() != Status::Code::kInvalidArgument) return 1;
    ipc::SpawnRequest request;
    std::memcpy(&request, buf, std::min(size, sizeof(request)));
    if (st.ok()) st = Validate(request, size, fds);
    if (!st.ok()) {
      Reply(st.WithContext("spawner refused the request"), -1, UniqueFd());
      continue;
    }
    Result<ChildProcess> child = StartChild(s, fds);
    if (!child.ok()) {
      Reply(child.status(), -1, UniqueFd());
      continue;
    }
    pid_t pid = child->pid();
    Reply(Status::Ok(), pid, child->Release());
  }
}

int Refuse(const std::string& why, int code) {
  std::fprintf(stderr, "forkbox-child --spawner: %s\n", why.c_str());
  return code;
}

}  // namespace

bool IsSpawner(int argc, char** argv) {
  return argc >= 2 && std::strcmp(argv[1], ipc::kSpawnerFlag) == 0;
}

int SpawnerMain(int argc, char** argv) {
  const bool verbose = argc == 4 && std::strcmp(argv[3], "--verbose") == 0;
  if ((argc != 3 && !verbose) || argv[2][0] != '/') {
    return Refuse("usage: forkbox-child --spawner /ABSOLUTE/CHILD/PATH [--verbose]", 2);
  }
  for (int fd : {ipc::kSpawnerSocketFd, ipc::kSpawnerWorkdirFd}) {
    if (::fcntl(fd, F_GETFD) < 0) {
      return Refuse("fd " + std::to_string(fd) + " is not open; the spawner is started by forkbox",
                    2);
    }
  }
  SpawnerState state;
  state.child_path = argv[2];
  state.verbose = verbose;
  for (char** e = environ; *e != nullptr; ++e) state.env.emplace_back(*e);
  state.devnull = UniqueFd(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!state.devnull) return Refuse(Status::FromErrno(errno, "open(/dev/null)").ToString(), 1);
  const int keep[] = {ipc::kSpawnerSocketFd, state.devnull.get(), ipc::kSpawnerWorkdirFd};
  if (Status st = sandbox::ConfineSpawner(keep); !st.ok()) return Refuse(st.ToString(), 1);
  return Serve(state);
}

}  // namespace forkbox::child
