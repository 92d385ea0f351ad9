// The spawner's wire format (parent/spawner.h starts it, child/spawner.h serves it). The spawner
// is forkbox-child run as `forkbox-child --spawner CHILD_PATH [--verbose]`, with its socket (one
// end of a SOCK_SEQPACKET socketpair) on kSpawnerSocketFd and the workdir (O_PATH) on
// kSpawnerWorkdirFd.
//
// One request datagram: SpawnRequest, plus SCM_RIGHTS with the child's control read end, report
// write end and, with kSpawnFlagTranscript, its transcript file. The reply: SpawnReply with error
// 0, the pid and its pidfd as SCM_RIGHTS; or an errno value and a message. Both ends talk with
// base/fd_passing.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace forkbox::ipc {

// argv[1] of a spawner (parent/spawner.cc passes it; child/spawner.h IsSpawner tests it).
inline constexpr char kSpawnerFlag[] = "--spawner";

inline constexpr int kSpawnerSocketFd = 3;
inline constexpr int kSpawnerWorkdirFd = 4;

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

struct SpawnReply {
  uint32_t magic = kSpawnMagic;
  int32_t error = 0;
  int32_t pid = -1;
  char message[500] = {};
};

// The most descriptors one spawner datagram carries.
inline constexpr size_t kSpawnerMaxFds = 3;

}  // namespace forkbox::ipc
