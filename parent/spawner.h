// The spawner: the one process that starts forkbox-child once the parent has confined itself
// (Chromium's zygote and broker are the model). The parent's seccomp filter refuses namespace
// creation and its Landlock domain would be inherited, yet every task child builds its own
// namespaces and domain; so the parent starts this process before it confines itself and asks it
// over a SOCK_SEQPACKET socketpair. It is forkbox-child in its spawner mode (child/spawner.h, the
// wire format in ipc/spawner_wire.h), exec'ed through the memory-sharing clone (forkbox::Spawn):
// the parent's page tables are neither copied nor write-protected, and the spawner holds none of
// the parent's memory.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/process.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::parent {

struct SpawnerConfig {
  std::string program;     // Absolute: forkbox-child, run as the spawner.
  std::string child_path;  // Absolute: the only program the spawner ever runs.
  std::vector<std::string>
      child_env;         // The spawner's and the children's (ForkboxProcessEnvironment).
  UniqueFd workdir;      // O_PATH directory: each child's ipc::kChildWorkdirFd and its cwd.
  bool verbose = false;  // Children's stdout and stderr go to ours; else /dev/null.
};

class PendingSpawner;

class Spawner {
 public:
  // Starts the spawner, before the parent confines itself. It dies with the calling thread.
  static Result<Spawner> Start(SpawnerConfig config);
  // Start for a caller with other work meanwhile: the spawner's execve overlaps it (StartSpawn).
  static Result<PendingSpawner> Begin(SpawnerConfig config);

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
  friend class PendingSpawner;
  ChildProcess process_;
  UniqueFd socket_;
};

// A spawner whose execve may still be under way. Until Finish() it shares this process's memory,
// so the parent calls Finish() before it confines itself (unshare would fail). Destroyed
// unfinished, it kills and reaps the spawner.
class PendingSpawner {
 public:
  // The spawner once it has exec'ed, or why it could not start. Once.
  Result<Spawner> Finish();

 private:
  friend class Spawner;
  PendingSpawner(PendingChild process, UniqueFd socket)
      : process_(std::move(process)), socket_(std::move(socket)) {}
  PendingChild process_;
  UniqueFd socket_;
};

}  // namespace forkbox::parent
