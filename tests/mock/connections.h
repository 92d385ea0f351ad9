// Finds this process's sockets by local port. cpp-httplib hides its sockets, so the mock scans
// /proc/self/fd and matches getsockname/getpeername to drop one connection without a response,
// cut them all at shutdown, and mark them close-on-exec (httplib's accept() does not).
#pragma once

#include <functional>

namespace forkbox::mock {

// Calls `fn(fd, peer_port)` for every socket of this process bound to `local_port`;
// peer_port is -1 for a socket that is not connected (the listener). `fn` returns false to stop.
void ForEachSocket(int local_port, const std::function<bool(int fd, int peer_port)>& fn);

// Shuts down (both directions) the connection from `peer_port` to `local_port`. Returns false
// when no such socket is open.
bool ShutdownConnection(int local_port, int peer_port);

// Shuts down every connection to `local_port`; returns how many.
int ShutdownAllConnections(int local_port);

// Sets FD_CLOEXEC on every socket bound to `local_port`, so processes the test spawns do not
// hold the mock's connections open. Returns how many it had to change.
int MarkCloseOnExec(int local_port);

}  // namespace forkbox::mock
