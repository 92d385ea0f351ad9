// Descriptors passed over a unix socket (SCM_RIGHTS), one datagram at a time: the spawner's
// requests and replies, and a tool's seccomp listener handed to its unix connect broker.
#pragma once

#include <cstddef>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox {

inline constexpr size_t kMaxPassedFds = 4;

// Sends `size` bytes and `count` (<= kMaxPassedFds) descriptors in one datagram. No allocation, so
// async-signal-safe (a forked child before execve). 0 or an errno value; EINTR is retried.
int SendWithFdsRaw(int sock, const void* data, size_t size, const int* fds, size_t count);

// The same as a Status ("sendmsg: ..."); more than kMaxPassedFds is kInvalidArgument.
Status SendWithFds(int sock, const void* data, size_t size, const std::vector<int>& fds);

// Receives one datagram into `data` (at most `cap` bytes) and the descriptors it carried (owned,
// close-on-exec) into `fds`; `*size` is the byte count, 0 at EOF. `flags` adds recvmsg flags
// (MSG_DONTWAIT). More than `max_fds` (<= kMaxPassedFds) descriptors, a truncated datagram or a
// control message other than SCM_RIGHTS is kInvalidArgument; whatever arrived is still closed.
Status RecvWithFds(int sock, void* data, size_t cap, size_t max_fds, int flags, size_t* size,
                   std::vector<UniqueFd>* fds);

}  // namespace forkbox
