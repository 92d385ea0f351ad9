// Finds the server side of TCP connections by port so the mock can drop one without a
// response, or cut them all at shutdown. cpp-httplib hides its sockets, so this scans
// /proc/self/fd and matches getsockname/getpeername.
#pragma once

namespace forkbox::mock {

// Shuts down (both directions) the socket whose local port is `local_port` and whose peer
// port is `peer_port`. Returns false when no such socket is open.
bool ShutdownConnection(int local_port, int peer_port);

// Shuts down every connected socket whose local port is `local_port`; returns how many.
int ShutdownAllConnections(int local_port);

}  // namespace forkbox::mock
