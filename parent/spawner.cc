#include "parent/spawner.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/fd_passing.h"
#include "ipc/spawner_wire.h"

namespace forkbox::parent {

Result<Spawner> Spawner::Start(SpawnerConfig config) {
  Result<PendingSpawner> pending = Begin(std::move(config));
  if (!pending.ok()) return pending.status();
  return pending->Finish();
}

Result<Spawner> PendingSpawner::Finish() {
  Result<ChildProcess> process = process_.Finish();
  if (!process.ok()) return process.status().WithContext("spawner");
  Spawner spawner;
  spawner.process_ = std::move(*process);
  spawner.socket_ = std::move(socket_);
  return spawner;
}

Result<PendingSpawner> Spawner::Begin(SpawnerConfig config) {
  if (config.program.empty() || config.program[0] != '/' || config.child_path.empty() ||
      config.child_path[0] != '/') {
    return Status::InvalidArgument("spawner: its program and the child path must be absolute");
  }
  if (!config.workdir) return Status::InvalidArgument("spawner: no workdir descriptor");
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return Status::FromErrno(errno, "socketpair(spawner)");
  }
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  SpawnOptions opts;
  opts.argv = {config.program, ipc::kSpawnerFlag, config.child_path};
  if (config.verbose) opts.argv.push_back("--verbose");
  opts.env = std::move(config.child_env);
  opts.fds = {{theirs.get(), ipc::kSpawnerSocketFd},
              {config.workdir.get(), ipc::kSpawnerWorkdirFd}};
  opts.new_session = true;  // Out of the terminal's process group: Ctrl-C is the parent's.
  const pid_t parent = ::getpid();
  // Kept across its execve; set before it, so that no instant of the spawner outlives us.
  opts.steps.push_back({"prctl(PR_SET_PDEATHSIG)", [parent](const char**) {
                          if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return errno;
                          return ::getppid() == parent ? 0 : ESRCH;
                        }});
  Result<PendingChild> process = StartSpawn(std::move(opts));
  if (!process.ok()) return process.status().WithContext("spawner");
  return PendingSpawner(std::move(*process), std::move(ours));
}

Result<ChildProcess> Spawner::Launch(int control_read, int report_write, int transcript) const {
  ipc::SpawnRequest request;
  std::vector<int> fds = {control_read, report_write};
  if (transcript >= 0) {
    request.flags |= ipc::kSpawnFlagTranscript;
    fds.push_back(transcript);
  }
  if (Status sent = SendWithFds(socket_.get(), &request, sizeof(request), fds); !sent.ok()) {
    return sent.WithContext("spawner");
  }
  ipc::SpawnReply reply;
  size_t size = 0;
  std::vector<UniqueFd> got;
  if (Status got_reply =
          RecvWithFds(socket_.get(), &reply, sizeof(reply), ipc::kSpawnerMaxFds, 0, &size, &got);
      !got_reply.ok()) {
    return got_reply.WithContext("spawner");
  }
  if (size == 0) return Status::Internal("the spawner is gone");
  if (size != sizeof(reply) || reply.magic != ipc::kSpawnMagic) {
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
