// The spawner: the one process that starts forkbox-child once the parent has confined itself
// (Chromium's zygote and broker are the model). The parent's seccomp filter refuses namespace
// creation and its Landlock domain would be inherited, yet every task child builds its own
// namespaces and domain; so the parent forks this process before it confines itself and asks it
// over a SOCK_SEQPACKET socketpair.
//
// What it does is fixed when it starts: the program (config.child_path), the environment, the
// workdir descriptor. A request says only "start a task child" and carries the child's pipe ends
// (and a transcript file) as SCM_RIGHTS; no path, argv or environment. Every request is validated
// (size, magic, version, kind, flags, the number and the kind of each descriptor); a malformed one
// gets an error reply and starts nothing. The child is cloned with CLONE_PARENT, so it is the
// parent's own child (waitid, pidfd signals, PDEATHSIG on the parent), and its pidfd comes back
// as SCM_RIGHTS. The spawner confines itself before its first request (sandbox::ConfineSpawner)
// and dies with the parent (PDEATHSIG, and EOF on the socket).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::parent {

struct SpawnerConfig {
  std::string child_path;              // Absolute: the only program the spawner ever runs.
  std::vector<std::string> child_env;  // The children's complete environment (no secrets).
  UniqueFd workdir;      // O_PATH directory: each child's ipc::kChildWorkdirFd and its cwd.
  bool verbose = false;  // Children's stdout and stderr go to ours; else /dev/null.
};

// The wire format, for the tests. One request datagram: this header, plus SCM_RIGHTS with the
// child's control read end, report write end and, with kSpawnFlagTranscript, its transcript.
inline constexpr uint32_t kSpawnMagic = 0x66627370;  // "fbsp"
inline constexpr uint32_t kSpawnVersion = 1;
inline constexpr uint32_t kSpawnLaunchChild = 1;  // The only kind.
inline constexpr uint32_t kSpawnFlagTranscript = 1;
struct SpawnRequest {
  uint32_t magic = kSpawnMagic;
  uint32_t version = kSpawnVersion;
  uint32_t kind = kSpawnLaunchChild;
  uint32_t flags = 0;
};
// The reply: error 0, the pid and its pidfd as SCM_RIGHTS; or an errno value and a message.
struct SpawnReply {
  uint32_t magic = kSpawnMagic;
  int32_t error = 0;
  int32_t pid = -1;
  char message[500] = {};
};

// The most descriptors one spawner datagram carries.
inline constexpr size_t kSpawnerMaxFds = 3;

// Both ends of the spawner socket (and the tests' hostile requests) talk with base/fd_passing.h.

class Spawner {
 public:
  // Forks the spawner. Call it single-threaded, before the parent confines itself.
  static Result<Spawner> Start(SpawnerConfig config);

  Spawner() = default;
  Spawner(Spawner&&) noexcept = default;
  Spawner& operator=(Spawner&&) noexcept = default;
  ~Spawner() = default;  // The socket closes first (members in reverse order), then it is reaped.

  // Starts forkbox-child with `control_read` on fd 3, `report_write` on fd 4, `transcript` (if
  // >= 0) on fd 5 and the workdir on fd 6, in its own session; the returned process is ours.
  Result<ChildProcess> Launch(int control_read, int report_write, int transcript) const;

  pid_t pid() const { return process_.pid(); }
  int socket_fd() const { return socket_.get(); }  // For the tests' raw requests.

 private:
  ChildProcess process_;
  UniqueFd socket_;
};

}  // namespace forkbox::parent
