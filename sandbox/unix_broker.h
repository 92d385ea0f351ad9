// The tools' connect broker. A tool's seccomp filter (seccomp::Program::kToolBrokered, or
// kToolNetBrokered with --allow-net) hands every socket(AF_UNIX, STREAM|SEQPACKET) (with
// --allow-net also AF_INET and AF_INET6, STREAM|DGRAM), every connect() and listen() (with
// --allow-net also bind()) to the spawning process through a seccomp user-notification listener.
// The broker creates the socket itself, keeps a dup by inode and injects the socket into the tool
// (SECCOMP_IOCTL_NOTIF_ADDFD, SEND); a connect is performed by the broker on its own dup, never
// continued in the tool (a second thread could swap the fd, even an inet one for a unix one, or
// rewrite the address between a check and the kernel's re-read), and answered with its result.
// An inet dup is connected to the address read once; a blocking tool socket's connect is polled
// in the broker's loop and answered when done (what connecting again returns), never blocking
// the thread. listen() runs on the dup, which then goes (a closed listener frees its port); bind()
// is continued once held dups of closed sockets on that port were let go. A connected stream dup
// goes; a datagram dup stays (it may reconnect or disconnect).
//
// The path check: the address is read from the tool's memory (/proc/<pid>/mem; process_vm_readv
// and pidfd_getfd stay refused), resolved against the tool's root or cwd (/proc/<pid>/root,
// /proc/<pid>/cwd: the tool's own mount namespace), the directory opened O_PATH, the last
// component O_PATH|O_NOFOLLOW; it must be a socket with one link (a hard link of an outside
// daemon's socket has two), a symbolic link is refused (ELOOP), and the directory must lie
// beneath one of the writable trees, opened in the tool's view (walking ".." and comparing
// device and inode). The held dup is then connected to /proc/self/fd/<that O_PATH fd>, so what is
// connected is exactly the inode checked. Abstract addresses are connected only when the broker
// runs inside a Landlock domain scoping abstract sockets in which the tools' domains nest (the
// agent's own, or for an unconfined caller one its thread enters and spawns the tools from);
// otherwise they are refused. Refusals answer EACCES (ELOOP for a symbolic link, EPERM for an
// abstract address) and are written once each on the tool's stderr.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace forkbox::sandbox {

// What one tool may connect to.
struct BrokerPolicy {
  // Absolute paths in the tool's view: the socket's directory must lie beneath one of them.
  std::vector<std::string> trees;
  // The broker's own Landlock domain scopes abstract unix sockets (LANDLOCK_SCOPE_ABSTRACT_UNIX),
  // so connecting an abstract address for the tool reaches only sockets of the tool's domain.
  bool abstract_scoped = false;
  // The tool sees layer 2's mounts: a daemon's socket outside the trees is covered with
  // /dev/null, and a connect that meets one is refused with a note saying so (the kernel's
  // ECONNREFUSED alone reads as "the daemon is down"). Under the emptied /run a path is simply
  // absent (ENOENT, no note): glibc tries nscd's socket there at every user lookup.
  bool layer2_view = false;
};

// Which thread answers the tools' notifications.
enum class BrokerThread {
  kOwn,      // One of the broker's own, started at the first Serve, Start or RunOnThread.
  kCallers,  // The caller's, while it waits in ServeUntil (a process whose only job is its
             // commands: `forkbox sandbox`). No thread, so no second stack, arena or TLB
             // shootdown per command; a tool's connect() waits until the caller is in ServeUntil.
};

// Serves the listeners of every tool a Sandbox spawned. The destructor stops and joins the thread
// (if any) and closes every listener (a tool still running then gets ENOSYS from socket() and
// connect()). Thread-safe, except that only one thread may be in ServeUntil.
class UnixBroker {
 public:
  // `scope_self` (kOwn only): the caller is not inside a scoped Landlock domain, so the thread
  // first enters one of its own that scopes abstract unix sockets (no_new_privs on that thread
  // only); tools spawned through RunOnThread then nest in it.
  UnixBroker(bool scope_self, BrokerThread serving);
  ~UnixBroker();
  UnixBroker(const UnixBroker&) = delete;
  UnixBroker& operator=(const UnixBroker&) = delete;

  // Takes one tool's listener until no process uses its filter any more (POLLHUP). `report` is
  // where refusals are written (the tool's stderr; may be empty) until `command` (a pidfd of the
  // spawned process; may be empty: then until the end) ends. The listener joins the thread's
  // epoll set directly: the thread first wakes when the tool calls or is gone.
  Status Serve(UniqueFd listener, BrokerPolicy policy, UniqueFd report, UniqueFd command);

  // Starts the thread now rather than at the first Serve or RunOnThread, so that its start-up
  // overlaps the caller's work before its first spawn (kCallers: opens the broker's fds only).
  Status Start();

  // Waits until one of `until` has an event (poll(2): their revents are set), answering the
  // tools meanwhile when the broker is kCallers. A failure there ends the broker as a failing
  // thread would (every listener goes) and is returned.
  Status ServeUntil(std::span<pollfd> until);

  // Runs `task` on the broker's thread and returns once it ran (a spawn, so that the tool's
  // Landlock domain nests in the thread's). Fails when the thread cannot run, or with kCallers.
  Status RunOnThread(const std::function<void()>& task);

  // Whether the thread is in its own abstract-unix-scoped domain (scope_self and ABI 6+); known
  // once the thread started.
  bool self_scoped() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Receives the listener a spawned tool sent over `socket` (SCM_RIGHTS), without blocking: the
// tool sends it before execve, and Spawn returns after execve.
Result<UniqueFd> ReceiveListener(int socket);

}  // namespace forkbox::sandbox
