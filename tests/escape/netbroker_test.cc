// Issue 13, --allow-net: the connect broker (sandbox/unix_broker.h) makes and connects the tools'
// inet sockets too. Real network work must behave as without the sandbox: every script here runs
// unsandboxed first (the reference, which also proves the script's premise) and then in every
// sandboxed mode with --allow-net, and the outputs must be equal. The escapes (daemon sockets,
// the inet/unix race) are in scope_test.cc's NetBrokerScopeTest.
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "tests/escape/fixture.h"

namespace forkbox::escape {
namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Blocking and non-blocking TCP, connect() on a connected, an accepted and a listening socket (the
// broker holds none of them), refused ports and retries, UDP connect, reconnect and AF_UNSPEC
// disconnect, servers that close and bind their port again (no SO_REUSEADDR), a socket bound and
// closed unused, create_connection, and IPv6 where the host has it.
constexpr const char* kTcpUdpScript = R"PY(import ctypes, errno, select, socket
def name(e): return errno.errorcode.get(e, str(e))
out = []
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(8); port = srv.getsockname()[1]
c = socket.socket(); c.connect(('127.0.0.1', port)); a, _ = srv.accept()
c.sendall(b'x'); out.append('blocking ' + a.recv(1).decode())
out.append('again ' + name(c.connect_ex(('127.0.0.1', port))))
out.append('accepted ' + name(a.connect_ex(('127.0.0.1', port))))
out.append('listening ' + name(srv.connect_ex(('127.0.0.1', port)))); a.close(); c.close()
n = socket.socket(); n.setblocking(False)
out.append('nonblocking ' + name(n.connect_ex(('127.0.0.1', port))))
select.select([], [n], [], 30)
out.append('so_error ' + name(n.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)))
again = n.connect_ex(('127.0.0.1', port))  # The kernel: 0 once, then EISCONN; the broker: EISCONN.
out.append('nonblocking again ' + ('connected' if again in (0, errno.EISCONN) else name(again)))
srv.accept()[0].close(); n.close()
gone = socket.socket(); gone.bind(('127.0.0.1', 0)); gport = gone.getsockname()[1]; gone.close()
r = socket.socket()
out.append('refused ' + name(r.connect_ex(('127.0.0.1', gport))))
out.append('retry ' + name(r.connect_ex(('127.0.0.1', gport)))); r.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('127.0.0.1', 0))
w = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); w.bind(('127.0.0.1', 0))
v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
v.connect(u.getsockname()); v.send(b'1'); out.append('udp ' + u.recv(1).decode())
v.connect(w.getsockname()); v.send(b'2'); out.append('udp reconnect ' + w.recv(1).decode())
libc = ctypes.CDLL(None, use_errno=True)
unspec = ctypes.create_string_buffer(16)
rc = libc.connect(v.fileno(), unspec, 16)
out.append('unspec ' + name(0 if rc == 0 else ctypes.get_errno()))
try: v.send(b'3'); out.append('send after disconnect ok')
except OSError as e: out.append('send after disconnect ' + name(e.errno))
v.sendto(b'4', u.getsockname()); out.append('sendto ' + u.recv(1).decode())
for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
    s1 = socket.socket(socket.AF_INET, kind); s1.bind(('127.0.0.1', 0)); p = s1.getsockname()[1]
    if kind == socket.SOCK_STREAM: s1.listen(1)
    s1.close()
    s2 = socket.socket(socket.AF_INET, kind)
    try: s2.bind(('127.0.0.1', p)); out.append('rebind %d ok' % kind)
    except OSError as e: out.append('rebind %d %s' % (kind, name(e.errno)))
    s2.close()
cc = socket.create_connection(('127.0.0.1', port), timeout=30)
srv.accept()[0].close(); out.append('create_connection ok'); cc.close()
try:
    s6 = socket.socket(socket.AF_INET6); s6.bind(('::1', 0)); s6.listen(1)
except OSError: out.append('v6 unavailable')
else:
    c6 = socket.create_connection(('::1', s6.getsockname()[1])); s6.accept()[0].close()
    out.append('v6 ok'); c6.close(); s6.close()
print('\n'.join(out))
)PY";

// A blocking connect the kernel cannot finish yet (the listener's accept queue is full, so its
// SYN is dropped until the queue has room) blocks its thread only: another connect of the same
// process is served meanwhile, signals that restart the call (SA_RESTART) change nothing, and
// the connect completes once the listener accepts.
constexpr const char* kBlockedScript = R"PY(import platform, signal, socket, threading
NR = {'x86_64': '42', 'aarch64': '203'}[platform.machine()]
full = socket.socket(); full.bind(('127.0.0.1', 0)); full.listen(0); port = full.getsockname()[1]
first = socket.create_connection(('127.0.0.1', port))
result = {}
def blocked():
    c = socket.socket()
    try: c.connect(('127.0.0.1', port)); result['r'] = 'connected'
    except OSError as e: result['r'] = 'error %d' % e.errno
t = threading.Thread(target=blocked); t.start()
def in_connect():
    try: return open('/proc/self/task/%d/syscall' % t.native_id).read().split()[0] == NR
    except OSError: return False
def wait_in_connect():
    while t.is_alive() and not in_connect(): pass
wait_in_connect()
other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); other.connect(('127.0.0.1', 9))
print('served while blocked', t.is_alive())
signal.signal(signal.SIGUSR1, lambda *a: None); signal.siginterrupt(signal.SIGUSR1, False)
for _ in range(3):
    if t.is_alive(): signal.pthread_kill(t.ident, signal.SIGUSR1)
    wait_in_connect()
print('still blocked', t.is_alive())
full.accept()[0].close()
t.join(60); print('blocked connect', result.get('r'))
)PY";

// curl, urllib and git (dumb HTTP) against a local http.server the same tool runs, in a fresh
// directory of its own.
constexpr const char* kHttpScript = R"PY(import functools, http.server, os, subprocess, tempfile
import threading, urllib.request
root = tempfile.mkdtemp(dir='.')
open(os.path.join(root, 'page.txt'), 'w').write('hello\n')
git = 'git -c user.name=a -c user.email=a@x -c init.defaultBranch=main'
subprocess.run('cd %s && %s init -q src && %s -C src commit -q --allow-empty -m one && '
               '%s clone -q --bare src srv.git && %s -C srv.git update-server-info'
               % (root, git, git, git, git), shell=True, check=True)
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
base = 'http://127.0.0.1:%d/' % srv.server_address[1]
print('urllib', urllib.request.urlopen(base + 'page.txt', timeout=30).read().decode().strip())
print('curl', subprocess.run(['curl', '-sS', '--max-time', '30', base + 'page.txt'],
                              capture_output=True, text=True).stdout.strip())
clone = subprocess.run(git.split() + ['clone', '-q', base + 'srv.git', os.path.join(root, 'dst')],
                       capture_output=True, text=True)
log = subprocess.run(['git', '-C', os.path.join(root, 'dst'), 'log', '--format=%s'],
                     capture_output=True, text=True).stdout.strip()
print('git clone over http', clone.returncode, log)
srv.shutdown(); srv.server_close()
)PY";

// asyncio (non-blocking connects, SO_ERROR): an echo, a refused port, and a connection the
// client closes, which the server must see end (the broker's dup of a socket it connected for a
// non-blocking caller must go once connected, or the close would never reach the server).
constexpr const char* kAsyncioScript = R"PY(import asyncio, socket
async def echo(r, w):
    w.write(await r.read(5)); await w.drain(); w.close()
async def main():
    srv = await asyncio.start_server(echo, '127.0.0.1', 0)
    r, w = await asyncio.open_connection('127.0.0.1', srv.sockets[0].getsockname()[1])
    w.write(b'hello'); print('echo', (await r.read(5)).decode()); w.close()
    s = socket.socket(); s.bind(('127.0.0.1', 0)); p = s.getsockname()[1]; s.close()
    try: await asyncio.open_connection('127.0.0.1', p)
    except OSError as e: print('refused', e.errno)
    srv.close(); await srv.wait_closed()
    got = asyncio.get_running_loop().create_future()
    async def until_eof(r, w): got.set_result(await r.read())
    srv = await asyncio.start_server(until_eof, '127.0.0.1', 0)
    r, w = await asyncio.open_connection('127.0.0.1', srv.sockets[0].getsockname()[1])
    w.write(b'bye'); await w.drain(); w.close()
    try: print('server saw', await asyncio.wait_for(got, 30))
    except asyncio.TimeoutError: print('server never saw the close')
asyncio.run(main())
)PY";

class NetBrokerWorks : public EscapeTest {
 protected:
  // Runs `script` unsandboxed (the reference) and then in this mode with --allow-net.
  void ExpectSameAsUnsandboxed(const std::string& script) {
    WriteFile(work_ + "/net.py", script, 0644);
    ChownTree(work_, uid(), gid());
    Command outside;
    outside.argv = {"/usr/bin/python3", "net.py"};
    outside.env = {"PATH=/usr/bin:/bin"};
    outside.cwd = work_;
    RunResult reference = RunCommand(outside);
    ASSERT_EQ(reference.exit_code, 0) << reference.Describe();
    RunResult r =
        Shell("cd '" + work_ + "' && exec /usr/bin/python3 net.py", Flags({"--allow-net"}));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_EQ(r.out, reference.out) << "reference:\n" << reference.out << "\n" << r.Describe();
  }
};

TEST_P(NetBrokerWorks, TcpAndUdpBehaveAsTheKernel) { ExpectSameAsUnsandboxed(kTcpUdpScript); }

TEST_P(NetBrokerWorks, AsyncioConnectsAndClosesAsTheKernel) {
  ExpectSameAsUnsandboxed(kAsyncioScript);
}

TEST_P(NetBrokerWorks, BlockingConnectWaitsWithoutBlockingTheBroker) {
  ExpectSameAsUnsandboxed(kBlockedScript);
}

TEST_P(NetBrokerWorks, CurlUrllibAndGitReachALocalServer) { ExpectSameAsUnsandboxed(kHttpScript); }

// forkserver's AF_UNIX socket goes through the broker with --allow-net too, in both layers (layer 1
// refused AF_UNIX with --allow-net before). TMPDIR is a short --writable tree: the socket path
// must fit in 108 bytes.
TEST_P(NetBrokerWorks, ForkserverWithAllowNet) {
  WriteFile(work_ + "/mp.py",
            "import multiprocessing as mp\n"
            "def sq(x): return x * x\n"
            "if __name__ == '__main__':\n"
            "    with mp.get_context('forkserver').Pool(2) as p:\n"
            "        print('forkserver ok', sum(p.map(sq, range(4))))\n",
            0644);
  const std::string tmp = sock_dir_ + "/t";
  ASSERT_EQ(mkdir(tmp.c_str(), 0755), 0) << strerror(errno);
  ChownTree(sock_dir_, uid(), gid());
  ChownTree(work_, uid(), gid());
  RunResult r = Shell("cd '" + work_ + "' && TMPDIR='" + tmp + "' /usr/bin/python3 mp.py",
                      Flags({"--writable", tmp, "--allow-net"}));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "forkserver ok 14")) << r.Describe();
}

// `--check --allow-net` states that the broker stays on.
TEST_P(NetBrokerWorks, CheckStatesTheBrokerWithAllowNet) {
  Command c;
  c.argv = Prefix();
  c.argv.insert(c.argv.end(),
                {ForkboxPath(), "sandbox", "--workdir", work_, "--allow-net", "--check"});
  c.env = Environment({});
  RunResult r = RunCommand(c);
  EXPECT_TRUE(Contains(r.out, "local daemons")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "--allow-net: TCP and UDP")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "pathname unix sockets outside the writable trees stay unreachable"))
      << r.Describe();
}

INSTANTIATE_TEST_SUITE_P(Modes, NetBrokerWorks,
                         ::testing::Values(Mode::kRoot, Mode::kUser, Mode::kRootNoUserns,
                                           Mode::kUserNoUserns),
                         ModeName);

}  // namespace
}  // namespace forkbox::escape
