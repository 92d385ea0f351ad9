// Network escapes. Only loopback and this host's own addresses are ever targeted.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

static int InetAddress(const char* host, const char* port, struct sockaddr_in* out) {
  memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons((unsigned short)atoi(port));
  return inet_pton(AF_INET, host, &out->sin_addr) == 1 ? 0 : -1;
}

static int ProbeTcp(int argc, char** argv) {
  (void)argc;
  struct sockaddr_in addr;
  if (InetAddress(argv[1], argv[2], &addr) != 0) return ProbeError("bad address %s", argv[1]);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Blocked("socket(AF_INET, SOCK_STREAM): %s (errno %d)", strerror(errno), errno);
  if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) {
    return Blocked("connect %s:%s: %s", argv[1], argv[2], strerror(errno));
  }
  (void)!write(fd, "ESCAPED\n", 8);
  close(fd);
  return Escaped("connected to %s:%s", argv[1], argv[2]);
}

static int ProbeUdp(int argc, char** argv) {
  (void)argc;
  struct sockaddr_in addr;
  if (InetAddress(argv[1], argv[2], &addr) != 0) return ProbeError("bad address %s", argv[1]);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Blocked("socket(AF_INET, SOCK_DGRAM): %s (errno %d)", strerror(errno), errno);
  ssize_t n = sendto(fd, "ESCAPED\n", 8, 0, (struct sockaddr*)&addr, sizeof(addr));
  close(fd);
  if (n < 0) return Blocked("sendto: %s", strerror(errno));
  return Escaped("sent a datagram to %s:%s", argv[1], argv[2]);
}

// FAMILY: socket() of a family that reaches past the workdir (raw IP, packet, netlink, vsock...).
static int ProbeSocket(int argc, char** argv) {
  (void)argc;
  static const struct {
    const char* name;
    int domain, type, protocol;
  } kKinds[] = {
      {"raw", AF_INET, SOCK_RAW, IPPROTO_ICMP},    {"packet", AF_PACKET, SOCK_RAW, 0},
      {"ping", AF_INET, SOCK_DGRAM, IPPROTO_ICMP}, {"netlink", AF_NETLINK, SOCK_RAW, NETLINK_ROUTE},
      {"vsock", AF_VSOCK, SOCK_STREAM, 0},         {"inet6", AF_INET6, SOCK_STREAM, 0},
      {"unix", AF_UNIX, SOCK_STREAM, 0},
  };
  for (size_t i = 0; i < sizeof(kKinds) / sizeof(kKinds[0]); ++i) {
    if (strcmp(kKinds[i].name, argv[1]) != 0) continue;
    int fd = socket(kKinds[i].domain, kKinds[i].type | SOCK_CLOEXEC, kKinds[i].protocol);
    if (fd < 0) return Blocked("socket(%s): %s (errno %d)", argv[1], strerror(errno), errno);
    if (kKinds[i].domain == AF_NETLINK) {
      struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
      if (bind(fd, (struct sockaddr*)&nl, sizeof(nl)) != 0) {
        return Blocked("netlink bind: %s", strerror(errno));
      }
    }
    close(fd);
    return Escaped("socket(%s) succeeded", argv[1]);
  }
  return ProbeError("unknown socket kind %s", argv[1]);
}

static int ProbeVsockConnect(int argc, char** argv) {
  (void)argc;
  (void)argv;
  int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Blocked("socket(AF_VSOCK): %s (errno %d)", strerror(errno), errno);
  struct sockaddr_vm addr = {.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = 22};
  if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) {
    return Blocked("vsock connect to the host: %s", strerror(errno));
  }
  close(fd);
  return Escaped("vsock connected to the host");
}

// PATH, or @NAME for the abstract namespace.
static int ProbeUnixConnect(int argc, char** argv) {
  (void)argc;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Blocked("socket(AF_UNIX): %s (errno %d)", strerror(errno), errno);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  size_t len = strlen(argv[1]);
  if (len >= sizeof(addr.sun_path)) return ProbeError("path too long");
  memcpy(addr.sun_path, argv[1], len);
  if (argv[1][0] == '@') addr.sun_path[0] = 0;
  socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
  if (connect(fd, (struct sockaddr*)&addr, size) != 0) {
    return Blocked("connect %s: %s (errno %d)", argv[1], strerror(errno), errno);
  }
  (void)!write(fd, "ESCAPED\n", 8);
  close(fd);
  return Escaped("connected to unix socket %s", argv[1]);
}

// Must work in the sandbox: pipes between helper processes use it.
static int ProbeSocketpair(int argc, char** argv) {
  (void)argc;
  (void)argv;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return ProbeError("socketpair: %s", strerror(errno));
  }
  char c = 0;
  if (write(sv[0], "k", 1) != 1 || read(sv[1], &c, 1) != 1 || c != 'k') {
    return ProbeError("socketpair round trip failed");
  }
  printf("SOCKETPAIR ok\n");
  return 0;
}

static socklen_t UnixAddress(const char* path, struct sockaddr_un* addr) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  size_t len = strlen(path);
  if (len >= sizeof(addr->sun_path)) return 0;
  memcpy(addr->sun_path, path, len);
  if (path[0] == '@') addr->sun_path[0] = 0;
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

// PATH socket|socketpair: a datagram to a unix socket outside. An unconnected datagram socket
// names its destination in sendto's memory; a datagram socketpair can sendto() elsewhere too.
static int ProbeUnixDgram(int argc, char** argv) {
  (void)argc;
  struct sockaddr_un addr;
  socklen_t size = UnixAddress(argv[1], &addr);
  if (size == 0) return ProbeError("path too long");
  int fd = -1;
  if (strcmp(argv[2], "socketpair") == 0) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return Blocked("socketpair(AF_UNIX, SOCK_DGRAM): %s (errno %d)", strerror(errno), errno);
    }
    fd = sv[0];
  } else {
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return Blocked("socket(AF_UNIX, SOCK_DGRAM): %s (errno %d)", strerror(errno), errno);
  }
  if (sendto(fd, "ESCAPED\n", 8, 0, (struct sockaddr*)&addr, size) != 8) {
    return Blocked("sendto %s: %s (errno %d)", argv[1], strerror(errno), errno);
  }
  return Escaped("sent a datagram to %s", argv[1]);
}

// The race: one thread connects in a tight loop while another rewrites the address between an
// inside socket and the outside one and dup2()s fresh sockets over the connecting fd. A
// connect-then-continue supervisor would check one and let the kernel re-read the other.
// With "inet", the connecting fd starts as an inet socket and the flipper alternates inet and
// unix sockets over it: a supervisor that continues an inet connect would let the kernel connect
// the unix socket dup2()ed in meanwhile (--allow-net).
struct Race {
  struct sockaddr_un addr;
  struct sockaddr_un inside, outside;
  volatile int stop;
  volatile int fd;
  int inet;
};

static void* RaceFlipper(void* arg) {
  struct Race* r = arg;
  for (unsigned i = 0; !r->stop; ++i) {
    memcpy(&r->addr, (i & 1) ? &r->outside : &r->inside, sizeof(r->addr));
    if ((i & (r->inet ? 7 : 63)) == 0) {
      int family = r->inet && (i & 8) ? AF_INET : AF_UNIX;
      int spare = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (spare >= 0) {
        dup2(spare, r->fd);
        close(spare);
      }
    }
  }
  return NULL;
}

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct Race* race_under_supervisor;

// What the flipper does at its luckiest moment: a unix socket over the connecting fd and the
// outside address in the buffer.
static void SwapInUnixOutside(struct Race* r) {
  int spare = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (spare >= 0) {
    dup2(spare, r->fd);
    close(spare);
  }
  memcpy(&r->addr, &r->outside, sizeof(r->addr));
}

// The supervisor a broker must not be: it checks that connect()'s fd is an inet socket and lets
// the kernel continue the call, which then re-reads the fd (and the address). Unix connects are
// refused outright. Between its check and the continue it makes the flipper's swap itself: the
// interleaving the scheduler may give the flipper at any time, forced, so that the control proves
// the window every run instead of winning a race most runs.
static void* ContinueSupervisor(void* arg) {
  int listener = *(int*)arg;
  struct seccomp_notif req;
  struct seccomp_notif_resp resp;
  for (;;) {
    memset(&req, 0, sizeof(req));
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    int domain = -1;
    socklen_t len = sizeof(domain);
    int fd = (int)req.data.args[0];
    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len);
    memset(&resp, 0, sizeof(resp));
    resp.id = req.id;
    if (domain == AF_INET) {
      SwapInUnixOutside(race_under_supervisor);
      resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    } else {
      resp.error = -EACCES;
    }
    (void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  }
}

// Installs, on this thread (and the threads it creates later), a filter handing connect() to
// ContinueSupervisor on a thread of its own.
static int StartContinueSupervisor(void) {
  static int listener = -1;
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  listener =
      (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (listener < 0) return -1;
  pthread_t supervisor;
  return pthread_create(&supervisor, NULL, ContinueSupervisor, &listener) == 0 ? 0 : -1;
}

// INSIDE_PATH OUTSIDE_PATH ITERATIONS [inet|inet-continue]: binds INSIDE itself; escaped when a
// connection's peer is OUTSIDE (getpeername names the listener's address). Stops at the first
// escape.
static int ProbeUnixRace(int argc, char** argv) {
  static struct Race r;
  r.inet = argc > 5 && strncmp(argv[5], "inet", 4) == 0;
  race_under_supervisor = &r;
  // Against the continuing supervisor the supervisor itself makes the swap: no flipper, no luck.
  const int continuing = argc > 5 && strcmp(argv[5], "inet-continue") == 0;
  if (continuing && StartContinueSupervisor() != 0) {
    return ProbeError("the continuing supervisor: %s", strerror(errno));
  }
  if (UnixAddress(argv[1], &r.inside) == 0 || UnixAddress(argv[2], &r.outside) == 0) {
    return ProbeError("path too long");
  }
  int server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (server < 0) return ProbeError("socket: %s", strerror(errno));
  unlink(argv[1]);
  if (bind(server, (struct sockaddr*)&r.inside, sizeof(r.inside)) != 0 || listen(server, 64) != 0) {
    return ProbeError("bind/listen %s: %s", argv[1], strerror(errno));
  }
  r.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memcpy(&r.addr, &r.inside, sizeof(r.addr));
  pthread_t flipper;
  if (!continuing && pthread_create(&flipper, NULL, RaceFlipper, &r) != 0) {
    return ProbeError("pthread_create");
  }
  // Bounded by count and by time: a loaded or sanitized machine runs fewer iterations, and says
  // how many, rather than outlasting the test's kill switch.
  const long iterations = atol(argv[3]);
  const double deadline = Now() + atof(argv[4]);
  long i = 0, connected = 0, escaped = 0;
  for (; i < iterations && !escaped && Now() < deadline; ++i) {
    int fd = socket(r.inet ? AF_INET : AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    r.fd = fd;
    // Each iteration starts from one of the two (so a connect that is not raced reaches the
    // outside one too: the control's proof), and the flipper changes it under the call.
    memcpy(&r.addr, (i & 1) ? &r.outside : &r.inside, sizeof(r.addr));
    // Every 64th inet connect makes the flipper's luckiest swap itself, so the unsandboxed control
    // reaches the outside socket even when the flipper is not scheduled (a loaded machine); in the
    // sandbox that connect meets the broker's path check.
    if (r.inet && !continuing && (i & 63) == 63) SwapInUnixOutside(&r);
    if (connect(fd, (struct sockaddr*)&r.addr, sizeof(r.addr)) == 0) {
      ++connected;
      struct sockaddr_un peer;
      socklen_t len = sizeof(peer);
      memset(&peer, 0, sizeof(peer));
      if (getpeername(fd, (struct sockaddr*)&peer, &len) == 0 &&
          strcmp(peer.sun_path, r.outside.sun_path) == 0) {
        ++escaped;
      }
    }
    close(fd);
    for (int c; (c = accept4(server, NULL, NULL, SOCK_CLOEXEC)) >= 0;) close(c);
  }
  r.stop = 1;
  if (!continuing) pthread_join(flipper, NULL);
  printf("RACE iterations=%ld connected=%ld\n", i, connected);
  if (escaped) return Escaped("a raced connect reached %s", argv[2]);
  return Blocked("%ld iterations, %ld inside connections, none reached outside", i, connected);
}

const struct Probe kNetProbes[] = {
    {"tcp", "HOST PORT", 2, ProbeTcp},
    {"udp", "HOST PORT", 2, ProbeUdp},
    {"socket", "raw|packet|ping|netlink|vsock|inet6|unix", 1, ProbeSocket},
    {"vsock_connect", "", 0, ProbeVsockConnect},
    {"unix_connect", "PATH|@ABSTRACT", 1, ProbeUnixConnect},
    {"socketpair", "", 0, ProbeSocketpair},
    {"unix_dgram", "PATH|@ABSTRACT socket|socketpair", 2, ProbeUnixDgram},
    {"unix_race", "INSIDE OUTSIDE ITERATIONS SECONDS [unix|inet|inet-continue]", 4, ProbeUnixRace},
    {0, 0, 0, 0},
};
