#include "sandbox/check.h"

#include <sys/prctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "sandbox/landlock.h"
#include "sandbox/namespaces.h"
#include "sandbox/seccomp_policy.h"

namespace forkbox::sandbox {
namespace {

const char* kOptOut =
    "forkbox refuses to run tools unsandboxed. To run without any sandbox anyway, pass "
    "--sandbox=off (not recommended; it warns on every run)";

}  // namespace

std::string KernelRelease() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return u.release;
}

Status CheckEnforceable(int* abi) {
  Status why;
  *abi = landlock::QueryAbi(&why);
  if (*abi == 0) {
    return Status::Unavailable("sandbox: Landlock is unavailable on kernel " + KernelRelease() +
                               " (" + why.message() + "). " + kOptOut);
  }
  if (!seccomp::Available(&why)) {
    return Status::Unavailable("sandbox: seccomp filtering is unavailable on kernel " +
                               KernelRelease() + " (" + why.message() + "). " + kOptOut);
  }
  return Status::Ok();
}

namespace {

void Add(Report& r, std::string protection, std::string state, std::string detail) {
  r.lines.push_back({std::move(protection), std::move(state), std::move(detail)});
}

// Landlock and seccomp: what fail-closed needs.
void AddFilters(const Policy& policy, Report& r) {
  Status why;
  r.landlock_abi = landlock::QueryAbi(&why);
  const int abi = r.landlock_abi;
  if (abi == 0) {
    Add(r, "landlock", "unavailable", why.message());
  } else if (abi < 3) {
    Add(r, "landlock", "weaker",
        "ABI " + std::to_string(abi) + ": truncate() outside the workdir is not restricted");
  } else {
    Add(r, "landlock", "active",
        "ABI " + std::to_string(abi) +
            (policy.read_only ? ": read-only: writes only to the command's own temp dir"
                              : ": writes only beneath the workdir") +
            (policy.writable.empty()
                 ? std::string()
                 : " and " + std::to_string(policy.writable.size()) + " --writable path(s)"));
  }
  Status seccomp_why;
  bool seccomp_ok = seccomp::Available(&seccomp_why);
  if (seccomp_ok) {
    Result<std::span<const sock_filter>> base = seccomp::Compiled(seccomp::Program::kBase);
    if (!base.ok()) {
      seccomp_ok = false;
      seccomp_why = base.status();
    }
  }
  Add(r, "seccomp", seccomp_ok ? "active" : "unavailable",
      seccomp_ok ? "native ABI only (i386 and x32 killed); mount, ptrace, bpf, io_uring, "
                   "TIOCSTI, setuid/setgid files... refused"
                 : seccomp_why.message());
  r.enforceable = abi > 0 && seccomp_ok;
}

// Layer 2 and what it adds.
void AddNamespaces(Report& r, bool assume_layer2) {
  std::string userns_why;
  const bool layer2 = assume_layer2 || Layer2Available(&userns_why);
  r.layer = layer2 ? 2 : 1;
  const std::string missing = "unavailable";
  const std::string reason = layer2 ? "" : "layer 1 only: " + userns_why;
  Add(r, "user namespace", layer2 ? "active" : missing, layer2 ? "user+mount+pid" : userns_why);
  Add(r, "read-only root", layer2 ? "active" : missing,
      layer2 ? "closes chmod/utime/xattr outside the workdir"
             : "chmod, utime and xattr outside the workdir are not blocked (" + reason + ")");
  Add(r, "private /tmp and /dev/shm", layer2 ? "active" : "weaker",
      layer2 ? "tmpfs; TMPDIR is /dev/shm/forkbox-*, a short link to the task temp dir in the "
               "workdir (.forkbox-tmp, on disk, removed at the end), for `forkbox sandbox` a "
               "directory on the private /dev/shm; Python multiprocessing works (fork, spawn, "
               "forkserver)"
             : "TMPDIR is /dev/shm/forkbox-*, a short link to the task temp dir in the workdir "
               "(.forkbox-tmp, removed at the end); /dev/shm is writable for SemLock and shared "
               "memory, and shared with your other processes (a container's own in Docker); "
               "multiprocessing fork, spawn and forkserver work (forkserver's socket through the "
               "connect broker, with and without --allow-net)");
  Add(r, ".git/hooks read-only", layer2 ? "active" : missing,
      layer2 ? "git's trust surface in the workdir and each --writable tree is read-only "
               "(hooks, info, config, config.worktree, "
               "commondir, other worktrees, submodules, nested repos), and so are .forkbox/ and "
               ".claude/; a planted commondir, config.worktree or agent config is removed when "
               "the command ends"
             : "a tool could plant a hook that runs at your next commit");
  Add(r, "pid namespace", layer2 ? "active" : "weaker",
      layer2 ? "tools see only the session's processes (a task's only its task's); the tree "
               "dies with the task"
             : "tools can list your processes; descendants are killed via the subreaper");
  // Measured by tests/escape/confine_test.cc (SigkillOfForkbox...): forkbox's pid is the
  // launcher's waiter, whose death the launcher gets as SIGTERM (sandbox::EnterLauncher); and by
  // tests/sandbox/check_test.cc (SandboxCommand.ASigkillOfIt...) for a layer-2 command's init;
  // the kill-all by ConfineTest.KillAll... and SandboxCommand.AKillOfEveryProcessOfIt...
  Add(r, "SIGKILL of forkbox", layer2 ? "active" : "weaker",
      std::string("a session ends as on SIGTERM: forkbox's pid is a waiter whose death the session "
                  "gets as SIGTERM, kills what the tools left and puts back git's trust surface") +
          (layer2 ? "; the PID namespaces take the rest down; `forkbox sandbox`: its command's "
                    "namespace init kills it and puts back git's trust surface"
                  : "; `forkbox sandbox`: its command's keeper kills the command and what it "
                    "detached (setsid) and puts back git's trust surface; a SIGKILL of the "
                    "session process too (pkill -9) leaves a detached daemon " +
                        (PidsCgroup::Hierarchy().empty()
                             ? "for good: no PID namespace and no cgroup to take it down (" +
                                   reason + ")"
                             : std::string("until the next forkbox starts, which kills it in the "
                                           "dead session's pids cgroup"))) +
          "; a SIGKILL of every forkbox process at once (pkill -9, docker kill): what a tool "
          "planted in git's trust surface stays until the next forkbox starts, which puts it "
          "back from the dead one's journal ($XDG_STATE_HOME/forkbox/guards) and says so");
}

// The read scope (Landlock, both layers) and whether the workdir itself would defeat it.
void AddReadScope(const Policy& policy, Report& r) {
  const std::vector<std::string> denied = DeniedReadPaths(policy);
  std::string carved;
  for (const std::string& dir : landlock::CarvedDirs(denied)) {
    if (dir != "/") carved += (carved.empty() ? "" : ", ") + dir;
  }
  std::string readable;
  for (const std::string& path : policy.readable) readable += " " + path;
  if (r.landlock_abi == 0) {
    Add(r, "read scope", "unavailable", "without Landlock, tools can read ~/.ssh, ~/.aws...");
  } else {
    Add(r, "read scope", "active",
        "tools cannot read the credential stores (~/.ssh, ~/.gnupg, ~/.aws, ~/.netrc, "
        "~/.config/gh, shell histories...; " +
            std::string(geteuid() == 0 ? "/etc/shadow, /etc/gshadow, /etc/ssh/*_key; " : "") +
            std::to_string(denied.size()) +
            " paths), now or created later: a Landlock read allow-list of what existed at "
            "start; not listable: / and " +
            carved + (readable.empty() ? "" : "; --readable:" + readable) +
            (r.layer == 2 ? "; layer 2 also hides the existing stores with mounts" : ""));
  }
  Status scope = CheckWorkdirScope(policy);
  if (!scope.ok()) {
    Add(r, "workdir scope", "refused", scope.message());
  } else if (policy.allow_broad_workdir) {
    Add(r, "workdir scope", "weaker",
        "--allow-broad-workdir: a workdir or --writable path containing a credential store "
        "makes it readable and writable in layer 1 (layer 2 still hides it)");
  }
}

// What keeps tools from the user's Docker daemon, ssh-agent and D-Bus (unix_broker.h).
void AddLocalDaemons(const Policy& policy, Report& r) {
  const std::string rules =
      "a pathname socket must lie beneath the writable trees" +
      std::string(r.layer == 2 ? " (or the private /tmp and /dev/shm)" : "") +
      ", one link, no symlink, whenever it was bound; abstract sockets only inside the sandbox "
      "(Landlock scope); no datagram unix sockets";
  if (!policy.allow_net) {
    Add(r, "local daemons", "active",
        "every tool connect() to a unix socket goes through forkbox's connect broker: " + rules);
  } else {
    Add(r, "local daemons", "active",
        "--allow-net: TCP and UDP, not local daemons: pathname unix sockets outside the writable "
        "trees stay unreachable. The connect broker makes every tool unix, inet and inet6 socket "
        "and performs every connect() itself (never continued): " +
            rules);
  }
}

void AddNetwork(const Policy& policy, Report& r) {
  const int abi = r.landlock_abi;
  if (abi >= 6) {
    Add(r, "scopes", "active", "signals and abstract unix sockets stay inside the sandbox");
  } else {
    Add(r, "scopes", abi == 0 ? "unavailable" : "weaker", "needs Landlock ABI 6");
  }
  AddLocalDaemons(policy, r);
  if (policy.allow_net) {
    Add(r, "network", "off",
        "--allow-net: tools may use TCP and UDP (made and connected by the connect broker) and "
        "netlink; other socket families refused");
  } else {
    Add(r, "network", "active",
        std::string("tools: socket() refused for every family but AF_UNIX stream and "
                    "seqpacket (through the connect broker)") +
            (abi >= 4 ? "; TCP bind/connect refused by Landlock; agent TCP limited to the model "
                        "port"
                      : "; Landlock TCP rules need ABI 4"));
  }
}

// Capabilities, rlimits and the fork-bomb limit.
void AddPrivileges(const Policy& policy, Report& r) {
  const bool layer2 = r.layer == 2;
  const bool root = geteuid() == 0;
  // Emptying the bounding set needs CAP_SETPCAP: root has it, and so does the owner of a new user
  // namespace (layer 2). An unprivileged process in layer 1 keeps its bounding set; no_new_privs
  // makes that harmless (execve can gain nothing), but the report must not claim more.
  if (root || layer2) {
    Add(r, "capabilities", "active",
        "all dropped (bounding, effective, permitted, inheritable, ambient)");
  } else {
    Add(r, "capabilities", "weaker",
        "effective, permitted, inheritable and ambient dropped; CapBnd not emptied (needs "
        "CAP_SETPCAP; no_new_privs keeps execve from using it)");
  }
  Add(r, "no_new_privs", "active", "setuid binaries gain nothing");
  Add(r, "rlimits", "active",
      "core 0, fsize " + std::to_string(policy.rlimit_fsize_bytes) + ", as " +
          std::to_string(policy.rlimit_as_bytes) + ", nofile " +
          std::to_string(policy.rlimit_nofile) + ", nproc " + std::to_string(policy.rlimit_nproc));
  const std::string cgroup = PidsCgroup::Hierarchy();
  const int64_t pid_max = RootPidNamespaceMax(layer2, policy.rlimit_nproc);
  if (!root) {
    Add(r, "fork bomb", "active",
        "RLIMIT_NPROC " + std::to_string(policy.rlimit_nproc) + " (non-root)" +
            (layer2 ? ", counted inside the task's user namespace" : ""));
  } else if (pid_max > 0) {
    Add(r, "fork bomb", "active",
        "uid 0: RLIMIT_NPROC does not apply; each task's and each tool command's PID namespace "
        "holds at most " +
            std::to_string(policy.rlimit_nproc) + " processes (pid_max " + std::to_string(pid_max) +
            "), the session's (the parent, its tools and its tasks) that many for each task it "
            "may run at once and for the parent's tools");
  } else if (!cgroup.empty()) {
    Add(r, "fork bomb", "active",
        "uid 0: RLIMIT_NPROC does not apply; held by a pids cgroup (" + cgroup +
            "/forkbox, pids.max " + std::to_string(policy.rlimit_nproc) + ")" +
            (layer2 ? " + the PID namespace dies with the task" : ""));
  } else {
    Add(r, "fork bomb", "weaker",
        std::string("uid 0: RLIMIT_NPROC does not apply and no pids cgroup is writable; held only "
                    "by the task timeout and the kill of the whole tree") +
            (layer2 ? " (PID namespace)" : " (subreaper)"));
  }
}

}  // namespace

namespace {

Report CheckWith(const Policy& policy, bool assume_layer2) {
  Report r;
  r.kernel = KernelRelease();
  if (!policy.enabled) {
    r.layer = 0;
    Add(r, "sandbox", "off", "--sandbox=off: tools run with your full privileges");
    r.enforceable = false;
    return r;
  }
  AddFilters(policy, r);
  AddNamespaces(r, assume_layer2);
  AddReadScope(policy, r);
  AddNetwork(policy, r);
  AddPrivileges(policy, r);
  Add(r, "hygiene", "active",
      "non-dumpable agent, PDEATHSIG (namespace inits too), own session per tool, all "
      "descendants killed at task end");
  Add(r, "environment", "active", "allowlist only; *_API_KEY, *_TOKEN, *_SECRET never passed");
  return r;
}

}  // namespace

Report Check(const Policy& policy) { return CheckWith(policy, /*assume_layer2=*/false); }

Report CheckAssumingLayer2(const Policy& policy) {
  return CheckWith(policy, /*assume_layer2=*/true);
}

std::string Report::Banner() const {
  if (layer == 0) return "sandbox: OFF (--sandbox=off): tools run unsandboxed";
  std::string s = "sandbox: layer " + std::to_string(layer);
  s += landlock_abi > 0 ? ", landlock ABI " + std::to_string(landlock_abi) : ", NO landlock";
  bool seccomp = false, net_off = false;
  std::vector<std::string> missing;
  for (const Line& line : lines) {
    if (line.protection == "seccomp") seccomp = line.state == "active";
    if (line.protection == "network") net_off = line.state == "active";
    if (layer == 1 && line.state != "active" &&
        (line.protection == "read-only root" || line.protection == "private /tmp and /dev/shm" ||
         line.protection == ".git/hooks read-only" || line.protection == "pid namespace")) {
      missing.push_back(line.protection);
    }
  }
  s += seccomp ? ", seccomp" : ", NO seccomp";
  s += net_off ? ", no net" : ", net allowed";
  for (const Line& line : lines) {
    if (line.protection == "read scope") {
      s += line.state == "active" ? ", credential stores unreadable" : ", reads NOT confined";
    }
  }
  if (!missing.empty()) {
    s += " (no namespaces; missing:";
    for (size_t i = 0; i < missing.size(); ++i) s += (i ? ", " : " ") + missing[i];
    s += ")";
  }
  if (!enforceable) s += " — NOT ENFORCEABLE";
  return s;
}

}  // namespace forkbox::sandbox
