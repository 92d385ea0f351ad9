// The seccomp policy as ONE readable table (after Chromium's baseline_policy.cc): named syscall
// sets, each rule with its action and a one-line reason. Programs are compiled to BPF at build
// time (libseccomp, forkbox-seccomp-gen) and installed in forked children with one raw syscall.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace forkbox::sandbox::seccomp {

enum class Action {
  kEperm,   // Refused: errno EPERM.
  kEnosys,  // "Not implemented", so libc falls back to a call the table can filter.
  // Handed to the spawning process (SECCOMP_RET_USER_NOTIF): its unix connect broker
  // (sandbox/unix_broker.h) performs the call itself. A program with such a rule must be installed
  // with InstallWithListenerRaw.
  kNotify,
};

// A masked compare on the low 32 bits of one argument: (arg & mask) == value.
struct ArgMatch {
  unsigned arg = 0;
  uint32_t mask = 0xffffffff;
  uint32_t value = 0;
};

struct Rule {
  std::string syscall;  // libseccomp name, native architecture.
  Action action = Action::kEperm;
  // Empty (and `unless_arg0` empty): always. Otherwise the rule fires when ANY of these match.
  std::vector<ArgMatch> any_of;
  // Non-empty: fires unless the low 32 bits of arg0 are one of these values.
  std::vector<uint32_t> unless_arg0;
  std::string reason;
};

struct RuleSet {
  std::string name;
  std::vector<Rule> rules;
};

// Which program: the base set every sandboxed process gets, the agent's network set (inet
// sockets only; kAgentNetUnix: and AF_UNIX, for the tools' connect broker and layer 2) and the
// tool network sets, stacked on top: kToolNoNet (no socket() at all), kToolBrokered (the default
// in both layers: stream and seqpacket AF_UNIX sockets are made and connected by the spawning
// process's broker, which checks the path; no datagrams), kToolNetBrokered (--allow-net, both
// layers: inet and inet6 sockets too are made and connected by the broker, so no connect() is
// ever continued and a pathname unix socket outside the writable trees stays unreachable).
// kSpawner is the parent's spawner (parent/spawner.h): a filter is inherited across execve, so it
// can refuse only what no task child ever needs: the base set without the namespace and mount rules
// a layer-2 child's own set-up uses. kAgentBaseNetUnix is kBase and kAgentNetUnix in one program,
// what every agent and the launcher install: one filter for the kernel to JIT instead of two (a
// second one costs ~50 us here, whatever its length). No syscall has rules in both tables, so the
// one program answers as the two stacked.
enum class Program {
  kBase,
  kAgentNet,
  kToolNoNet,
  kAgentNetUnix,
  kToolBrokered,
  kToolNetBrokered,
  kSpawner,
  kAgentBaseNetUnix
};
inline constexpr size_t kProgramCount = 8;

// The table for one program. Stable data, for the tests and `--check`.
const std::vector<RuleSet>& Table(Program program);

// Finds the rule for `syscall` in a program's table, or nullptr.
const Rule* FindRule(Program program, const std::string& syscall);

// The compiled BPF of one program, generated from the table at build time (forkbox-seccomp-gen
// runs CompileTable for every Program): no libseccomp work at run time. kBase also kills any
// non-native architecture (i386 int 0x80) and the x32 ABI (nr | 0x40000000).
Result<std::span<const sock_filter>> Compiled(Program program);

// Compiles one program from its table (a prefilter plus libseccomp), at every call: for the
// build-time generator and the tests that hold Compiled() to it.
Result<std::vector<sock_filter>> CompileTable(Program program);

// Async-signal-safe: installs a compiled program. no_new_privs must be set (or CAP_SYS_ADMIN).
// `all_threads` uses SECCOMP_FILTER_FLAG_TSYNC. Returns 0 or an errno value.
int InstallRaw(std::span<const sock_filter> program, bool all_threads);

// Async-signal-safe: installs a program with SECCOMP_FILTER_FLAG_NEW_LISTENER and stores the
// listener (close-on-exec) in *listener. Only one filter of a process's stack may have one.
// Returns 0 or an errno value.
int InstallWithListenerRaw(std::span<const sock_filter> program, int* listener);

// Whether the kernel supports seccomp filters (SECCOMP_RET_KILL_PROCESS). `error` gets the reason.
bool Available(Status* error = nullptr);

}  // namespace forkbox::sandbox::seccomp
