// The seccomp policy table, tested as data.
#include "sandbox/seccomp_policy.h"

#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

namespace forkbox::sandbox::seccomp {
namespace {

const Program kPrograms[] = {Program::kBase,
                             Program::kAgentNet,
                             Program::kToolNoNet,
                             Program::kAgentNetUnix,
                             Program::kToolBrokered,
                             Program::kToolNetBrokered,
                             Program::kAgentBaseNetUnix};

TEST(SeccompTable, EveryRuleHasAReasonAndAKnownSyscall) {
  for (Program p : kPrograms) {
    for (const RuleSet& set : Table(p)) {
      EXPECT_FALSE(set.name.empty());
      EXPECT_FALSE(set.rules.empty()) << set.name;
      for (const Rule& rule : set.rules) {
        EXPECT_GE(rule.reason.size(), 10u) << rule.syscall << " needs a real reason";
        EXPECT_NE(seccomp_syscall_resolve_name(rule.syscall.c_str()), __NR_SCMP_ERROR)
            << rule.syscall;
        EXPECT_FALSE(!rule.any_of.empty() && !rule.unless_arg0.empty())
            << rule.syscall << ": one kind of condition per rule";
      }
    }
  }
}

TEST(SeccompTable, NoDuplicateSyscalls) {
  std::set<std::string> base;
  for (const RuleSet& set : Table(Program::kBase)) {
    for (const Rule& rule : set.rules) {
      EXPECT_TRUE(base.insert(rule.syscall).second) << "duplicate: " << rule.syscall;
    }
  }
  for (Program p : {Program::kAgentNet, Program::kToolNoNet, Program::kAgentNetUnix}) {
    std::set<std::string> seen;
    for (const RuleSet& set : Table(p)) {
      for (const Rule& rule : set.rules) {
        EXPECT_TRUE(seen.insert(rule.syscall).second) << "duplicate: " << rule.syscall;
        EXPECT_EQ(base.count(rule.syscall), 0u) << rule.syscall << " is also in the base set";
      }
    }
  }
}

TEST(SeccompTable, RequiredSyscallsAreRefusedWithEperm) {
  for (const char* name : {"ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "pidfd_getfd",
                           "process_madvise",
                           "kcmp",
                           "mount",
                           "umount2",
                           "pivot_root",
                           "chroot",
                           "unshare",
                           "setns",
                           "kexec_load",
                           "kexec_file_load",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "bpf",
                           "perf_event_open",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "userfaultfd",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "acct",
                           "swapon",
                           "swapoff",
                           "reboot",
                           "settimeofday",
                           "clock_settime",
                           "clock_adjtime",
                           "adjtimex",
                           "syslog",
                           "quotactl",
                           "iopl",
                           "ioperm",
                           "uselib",
                           "lookup_dcookie"}) {
    const Rule* rule = FindRule(Program::kBase, name);
    ASSERT_NE(rule, nullptr) << name;
    EXPECT_EQ(rule->action, Action::kEperm) << name;
    EXPECT_TRUE(rule->any_of.empty() && rule->unless_arg0.empty()) << name << " is unconditional";
  }
}

TEST(SeccompTable, NewMountApiAndClone3GetEnosys) {
  for (const char* name : {"open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
                           "mount_setattr", "clone3"}) {
    const Rule* rule = FindRule(Program::kBase, name);
    ASSERT_NE(rule, nullptr) << name;
    EXPECT_EQ(rule->action, Action::kEnosys) << name;
  }
}

TEST(SeccompTable, CloneRefusesEveryNamespaceFlag) {
  const Rule* rule = FindRule(Program::kBase, "clone");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->action, Action::kEperm);
  std::set<uint32_t> flags;
  for (const ArgMatch& m : rule->any_of) {
    EXPECT_EQ(m.arg, 0u);
    EXPECT_EQ(m.mask, m.value) << "a flag test is (flags & F) == F";
    flags.insert(m.value);
  }
  for (uint32_t flag : {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                        CLONE_NEWPID, CLONE_NEWNET}) {
    EXPECT_EQ(flags.count(flag), 1u) << std::hex << flag;
  }
}

TEST(SeccompTable, ChmodFamilyRefusesSetuidAndSetgidBitsOnTheModeArgument) {
  for (auto [name, arg] : {std::pair{"chmod", 1u}, std::pair{"fchmod", 1u},
                           std::pair{"fchmodat", 2u}, std::pair{"fchmodat2", 2u}}) {
    const Rule* rule = FindRule(Program::kBase, name);
    ASSERT_NE(rule, nullptr) << name;
    EXPECT_EQ(rule->action, Action::kEperm) << name;
    EXPECT_FALSE(rule->reason.empty()) << name;
    std::set<uint32_t> bits;
    for (const ArgMatch& m : rule->any_of) {
      EXPECT_EQ(m.arg, arg) << name;
      EXPECT_EQ(m.mask, m.value) << name << ": a bit test is (mode & B) == B";
      bits.insert(m.value);
    }
    EXPECT_EQ(bits, (std::set<uint32_t>{S_ISUID, S_ISGID})) << name;
  }
}

// The same bits given at creation, and openat2 (its mode in memory) sent back to openat in tools.
TEST(SeccompTable, CreationCallsRefuseSetuidAndSetgidModes) {
  for (auto [name, arg] : {std::pair{"open", 2u}, std::pair{"openat", 3u}, std::pair{"creat", 1u},
                           std::pair{"mknod", 1u}, std::pair{"mknodat", 2u}}) {
    const Rule* rule = FindRule(Program::kBase, name);
    ASSERT_NE(rule, nullptr) << name;
    EXPECT_EQ(rule->action, Action::kEperm) << name;
    std::set<uint32_t> bits;
    for (const ArgMatch& m : rule->any_of) {
      EXPECT_EQ(m.arg, arg) << name;
      EXPECT_EQ(m.mask, m.value) << name;
      bits.insert(m.value);
    }
    EXPECT_EQ(bits, (std::set<uint32_t>{S_ISUID, S_ISGID})) << name;
  }
  for (Program tool : {Program::kToolNoNet, Program::kToolBrokered, Program::kToolNetBrokered}) {
    const Rule* rule = FindRule(tool, "openat2");
    ASSERT_NE(rule, nullptr);
    EXPECT_EQ(rule->action, Action::kEnosys);
    EXPECT_TRUE(rule->any_of.empty() && rule->unless_arg0.empty());
  }
  // The agents open beneath their workdir with openat2 themselves.
  EXPECT_EQ(FindRule(Program::kAgentBaseNetUnix, "openat2"), nullptr);
}

TEST(SeccompTable, IoctlRefusesTiocstiAndTioclinuxOnTheLow32Bits) {
  const Rule* rule = FindRule(Program::kBase, "ioctl");
  ASSERT_NE(rule, nullptr);
  std::set<uint32_t> requests;
  for (const ArgMatch& m : rule->any_of) {
    EXPECT_EQ(m.arg, 1u);
    EXPECT_EQ(m.mask, 0xffffffffu);
    requests.insert(m.value);
  }
  EXPECT_EQ(requests, (std::set<uint32_t>{TIOCSTI, TIOCLINUX}));
}

TEST(SeccompTable, PersonalityAllowsOnlyTheDefaults) {
  const Rule* rule = FindRule(Program::kBase, "personality");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->action, Action::kEperm);
  std::set<uint32_t> allowed(rule->unless_arg0.begin(), rule->unless_arg0.end());
  EXPECT_EQ(allowed, (std::set<uint32_t>{0u, PER_LINUX32, 0xffffffffu}));
}

TEST(SeccompTable, AgentMayOpenOnlyInetSocketsAndToolsNone) {
  const Rule* agent = FindRule(Program::kAgentNet, "socket");
  ASSERT_NE(agent, nullptr);
  std::set<uint32_t> families(agent->unless_arg0.begin(), agent->unless_arg0.end());
  EXPECT_EQ(families, (std::set<uint32_t>{AF_INET, AF_INET6}));
  const Rule* tool = FindRule(Program::kToolNoNet, "socket");
  ASSERT_NE(tool, nullptr);
  EXPECT_TRUE(tool->any_of.empty() && tool->unless_arg0.empty());
  EXPECT_EQ(FindRule(Program::kToolNoNet, "socketpair"), nullptr);
  EXPECT_EQ(FindRule(Program::kBase, "socketpair"), nullptr);
}

// The rules of one program for `syscall`, in table order.
std::vector<const Rule*> RulesFor(Program program, const std::string& syscall) {
  std::vector<const Rule*> out;
  for (const RuleSet& set : Table(program)) {
    for (const Rule& rule : set.rules) {
      if (rule.syscall == syscall) out.push_back(&rule);
    }
  }
  return out;
}

// The values v with (arg1 & 0xf) == v that a rule matches.
std::set<uint32_t> SocketTypesOf(const Rule& rule) {
  std::set<uint32_t> types;
  for (const ArgMatch& m : rule.any_of) {
    EXPECT_EQ(m.arg, 1u);
    EXPECT_EQ(m.mask, 0xfu);
    types.insert(m.value);
  }
  return types;
}

// The unix connect broker's program: AF_UNIX only; stream and seqpacket sockets and every
// connect() go to the broker; datagrams refused in socket() and socketpair().
TEST(SeccompTable, ToolBrokeredHandsUnixStreamSocketsAndEveryConnectToTheBroker) {
  std::vector<const Rule*> socket_rules = RulesFor(Program::kToolBrokered, "socket");
  ASSERT_EQ(socket_rules.size(), 3u);
  EXPECT_EQ(socket_rules[0]->action, Action::kEperm);
  EXPECT_EQ(
      std::set<uint32_t>(socket_rules[0]->unless_arg0.begin(), socket_rules[0]->unless_arg0.end()),
      std::set<uint32_t>{AF_UNIX});
  EXPECT_EQ(socket_rules[1]->action, Action::kNotify);
  EXPECT_EQ(SocketTypesOf(*socket_rules[1]), (std::set<uint32_t>{SOCK_STREAM, SOCK_SEQPACKET}));
  EXPECT_EQ(socket_rules[2]->action, Action::kEperm);
  std::set<uint32_t> refused = SocketTypesOf(*socket_rules[2]);
  EXPECT_EQ(refused.size(), 14u) << "every other type, including the unknown ones";
  EXPECT_TRUE(refused.count(SOCK_DGRAM) && refused.count(SOCK_RAW));
  EXPECT_FALSE(refused.count(SOCK_STREAM) || refused.count(SOCK_SEQPACKET));

  std::vector<const Rule*> pair = RulesFor(Program::kToolBrokered, "socketpair");
  ASSERT_EQ(pair.size(), 1u);
  EXPECT_EQ(pair[0]->action, Action::kEperm);
  EXPECT_EQ(SocketTypesOf(*pair[0]), (std::set<uint32_t>{SOCK_DGRAM, SOCK_RAW}));

  const Rule* connect = FindRule(Program::kToolBrokered, "connect");
  ASSERT_NE(connect, nullptr);
  EXPECT_EQ(connect->action, Action::kNotify);
  EXPECT_TRUE(connect->any_of.empty() && connect->unless_arg0.empty()) << "always brokered";
  EXPECT_NE(connect->reason.find("never continued"), std::string::npos) << connect->reason;
  const Rule* listen = FindRule(Program::kToolBrokered, "listen");
  ASSERT_NE(listen, nullptr);
  EXPECT_EQ(listen->action, Action::kNotify);
  for (const Rule* rule : {socket_rules[1], socket_rules[2], pair[0], connect}) {
    EXPECT_GE(rule->reason.size(), 40u) << rule->syscall;
  }
}

// --allow-net: unix, inet and inet6 sockets are made by the broker, netlink is allowed, every other
// family refused; every connect(), listen() and bind() goes to the broker.
TEST(SeccompTable, ToolNetBrokeredHandsEverySocketConnectAndListenToTheBroker) {
  std::vector<const Rule*> socket_rules = RulesFor(Program::kToolNetBrokered, "socket");
  ASSERT_EQ(socket_rules.size(), 2u);
  EXPECT_EQ(socket_rules[0]->action, Action::kEperm);
  EXPECT_EQ(
      std::set<uint32_t>(socket_rules[0]->unless_arg0.begin(), socket_rules[0]->unless_arg0.end()),
      (std::set<uint32_t>{AF_UNIX, AF_INET, AF_INET6, AF_NETLINK}));
  EXPECT_EQ(socket_rules[1]->action, Action::kNotify);
  std::set<uint32_t> brokered;
  for (const ArgMatch& m : socket_rules[1]->any_of) {
    EXPECT_EQ(m.arg, 0u);
    EXPECT_EQ(m.mask, 0xffffffffu);
    brokered.insert(m.value);
  }
  EXPECT_EQ(brokered, (std::set<uint32_t>{AF_UNIX, AF_INET, AF_INET6})) << "netlink is not";
  std::vector<const Rule*> pair = RulesFor(Program::kToolNetBrokered, "socketpair");
  ASSERT_EQ(pair.size(), 1u);
  EXPECT_EQ(SocketTypesOf(*pair[0]), (std::set<uint32_t>{SOCK_DGRAM, SOCK_RAW}));
  for (const char* name : {"connect", "listen", "bind"}) {
    const Rule* rule = FindRule(Program::kToolNetBrokered, name);
    ASSERT_NE(rule, nullptr) << name;
    EXPECT_EQ(rule->action, Action::kNotify) << name;
    EXPECT_TRUE(rule->any_of.empty() && rule->unless_arg0.empty()) << name << ": always";
  }
}

// The broker runs in the agent and the launcher, which must create AF_UNIX sockets for it.
TEST(SeccompTable, AgentUnixProgramAllowsTheBrokersSockets) {
  const Rule* agent = FindRule(Program::kAgentNetUnix, "socket");
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(std::set<uint32_t>(agent->unless_arg0.begin(), agent->unless_arg0.end()),
            (std::set<uint32_t>{AF_INET, AF_INET6, AF_UNIX}));
  EXPECT_NE(agent->reason.find("broker"), std::string::npos) << agent->reason;
}

// A kNotify rule compiles to SECCOMP_RET_USER_NOTIF, and nothing else in the other programs does.
TEST(SeccompTable, OnlyTheBrokeredProgramNotifies) {
  for (Program p : kPrograms) {
    Result<std::span<const sock_filter>> prog = Compiled(p);
    ASSERT_TRUE(prog.ok()) << prog.status().ToString();
    bool notifies = std::any_of(prog->begin(), prog->end(), [](const sock_filter& insn) {
      return insn.code == (BPF_RET | BPF_K) && insn.k == SECCOMP_RET_USER_NOTIF;
    });
    EXPECT_EQ(notifies, p == Program::kToolBrokered || p == Program::kToolNetBrokered)
        << static_cast<int>(p);
  }
}

TEST(SeccompTable, CompiledProgramsStartByKillingForeignArchitectures) {
  for (Program p : kPrograms) {
    Result<std::span<const sock_filter>> prog = Compiled(p);
    ASSERT_TRUE(prog.ok()) << prog.status().ToString();
    ASSERT_GE(prog->size(), 3u);
    EXPECT_EQ((*prog)[0].code, BPF_LD | BPF_W | BPF_ABS);
    EXPECT_EQ((*prog)[0].k, offsetof(seccomp_data, arch));
    EXPECT_EQ((*prog)[2].k, static_cast<uint32_t>(SECCOMP_RET_KILL_PROCESS));
    EXPECT_LE(prog->size(), static_cast<size_t>(BPF_MAXINSNS));
    // Generated once: the same program every time.
    EXPECT_EQ(Compiled(p)->data(), prog->data());
  }
}

// The programs generated at build time are exactly the table compiled now, instruction by
// instruction, for every program (the table stays the single source of truth).
TEST(SeccompTable, PrecompiledProgramsAreTheTableCompiled) {
  for (size_t index = 0; index < kProgramCount; ++index) {
    const Program p = static_cast<Program>(index);
    Result<std::span<const sock_filter>> generated = Compiled(p);
    Result<std::vector<sock_filter>> fresh = CompileTable(p);
    ASSERT_TRUE(generated.ok()) << generated.status().ToString();
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    ASSERT_EQ(generated->size(), fresh->size()) << "program " << static_cast<int>(p);
    for (size_t i = 0; i < fresh->size(); ++i) {
      const sock_filter& a = (*generated)[i];
      const sock_filter& b = (*fresh)[i];
      EXPECT_TRUE(a.code == b.code && a.jt == b.jt && a.jf == b.jf && a.k == b.k)
          << "program " << static_cast<int>(p) << ", instruction " << i;
    }
  }
  // Control: two different programs differ, so the comparison can fail.
  EXPECT_NE(Compiled(Program::kBase)->size(), CompileTable(Program::kToolNoNet)->size());
}

// A classic-BPF evaluator for the instructions the programs use (the kernel's semantics for them).
// nullopt: an instruction it does not know.
std::optional<uint32_t> Evaluate(std::span<const sock_filter> prog, const seccomp_data& data) {
  uint32_t a = 0;
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& in = prog[pc];
    switch (in.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (in.k + 4 > sizeof data) return std::nullopt;
        std::memcpy(&a, reinterpret_cast<const char*>(&data) + in.k, 4);
        break;
      case BPF_ALU | BPF_AND | BPF_K:
        a &= in.k;
        break;
      case BPF_JMP | BPF_JA:
        pc += in.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        pc += a == in.k ? in.jt : in.jf;
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
        pc += a > in.k ? in.jt : in.jf;
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
        pc += a >= in.k ? in.jt : in.jf;
        break;
      case BPF_JMP | BPF_JSET | BPF_K:
        pc += (a & in.k) != 0 ? in.jt : in.jf;
        break;
      case BPF_RET | BPF_K:
        return in.k;
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

// What the table says for one call: the first "unless" rule that fires (the prefilter runs them
// first), else the most restrictive of the firing rules (error before notify), else allow.
uint32_t Expected(Program p, int nr, const seccomp_data& data) {
  std::optional<uint32_t> any;
  for (const RuleSet& set : Table(p)) {
    for (const Rule& rule : set.rules) {
      if (seccomp_syscall_resolve_name(rule.syscall.c_str()) != nr) continue;
      const uint32_t ret =
          rule.action == Action::kNotify
              ? SECCOMP_RET_USER_NOTIF
              : SECCOMP_RET_ERRNO | (rule.action == Action::kEnosys ? ENOSYS : EPERM);
      if (!rule.unless_arg0.empty()) {
        const uint32_t arg0 = static_cast<uint32_t>(data.args[0]);
        if (std::find(rule.unless_arg0.begin(), rule.unless_arg0.end(), arg0) ==
            rule.unless_arg0.end()) {
          return ret;
        }
        continue;
      }
      bool fires = rule.any_of.empty();
      for (const ArgMatch& m : rule.any_of) {
        fires = fires || (static_cast<uint32_t>(data.args[m.arg]) & m.mask) == m.value;
      }
      if (fires && (!any || ret > *any)) any = ret;  // SECCOMP_RET_ERRNO > SECCOMP_RET_USER_NOTIF.
    }
  }
  return any.value_or(SECCOMP_RET_ALLOW);
}

// Every compiled program answers every native syscall number (0..1023, also the ones the table
// never names, which the programs allow at once) exactly as its table says, for arguments that
// match and miss each rule's conditions.
TEST(SeccompTable, CompiledProgramsAnswerEverySyscallAsTheTableSays) {
  for (size_t index = 0; index < kProgramCount; ++index) {
    const Program p = static_cast<Program>(index);
    Result<std::span<const sock_filter>> prog = Compiled(p);
    ASSERT_TRUE(prog.ok()) << prog.status().ToString();
    std::vector<uint64_t> values = {0, 1, 0xffffffff};
    for (const RuleSet& set : Table(p)) {
      for (const Rule& rule : set.rules) {
        for (const ArgMatch& m : rule.any_of) values.push_back(m.value);
        values.insert(values.end(), rule.unless_arg0.begin(), rule.unless_arg0.end());
      }
    }
    size_t refused = 0;
    for (int nr = 0; nr < 1024; ++nr) {
      for (uint64_t value : values) {
        seccomp_data data{};
        data.nr = nr;
        data.arch = (*prog)[1].k;  // The native architecture the program checks first.
        for (auto& arg : data.args) arg = value;
        std::optional<uint32_t> got = Evaluate(*prog, data);
        ASSERT_TRUE(got.has_value()) << "program " << index << ", nr " << nr;
        EXPECT_EQ(*got, Expected(p, nr, data)) << "program " << index << ", nr " << nr;
        refused += *got != SECCOMP_RET_ALLOW ? 1 : 0;
      }
    }
    EXPECT_GT(refused, 0u) << "program " << index;  // Control: the programs refuse something.
  }
}

// The agents' one program is the base table and the agent's unix network table, set by set, and
// answers every call as the two stacked do: the more restrictive of the two answers (no syscall
// has rules in both, SeccompTable.NoDuplicateSyscalls). The control: the network table alone
// allows what the base refuses, so a program that lost the base part would fail here.
TEST(SeccompTable, TheAgentsOneProgramIsTheBaseAndTheUnixNetworkStacked) {
  std::vector<std::string> names;
  for (Program p : {Program::kBase, Program::kAgentNetUnix}) {
    for (const RuleSet& set : Table(p)) names.push_back(set.name);
  }
  std::vector<std::string> merged;
  for (const RuleSet& set : Table(Program::kAgentBaseNetUnix)) merged.push_back(set.name);
  EXPECT_EQ(merged, names);
  Result<std::span<const sock_filter>> one = Compiled(Program::kAgentBaseNetUnix);
  Result<std::span<const sock_filter>> base = Compiled(Program::kBase);
  Result<std::span<const sock_filter>> net = Compiled(Program::kAgentNetUnix);
  ASSERT_TRUE(one.ok() && base.ok() && net.ok());
  size_t differs_from_net = 0;
  for (int nr = 0; nr < 1024; ++nr) {
    for (uint64_t value : {uint64_t{0}, uint64_t{AF_UNIX}, uint64_t{AF_INET}, uint64_t{AF_INET6},
                           uint64_t{AF_NETLINK}, uint64_t{AF_PACKET}, uint64_t{0xffffffff}}) {
      seccomp_data data{};
      data.nr = nr;
      data.arch = (*one)[1].k;
      for (auto& arg : data.args) arg = value;
      const std::optional<uint32_t> a = Evaluate(*base, data);
      const std::optional<uint32_t> b = Evaluate(*net, data);
      const std::optional<uint32_t> got = Evaluate(*one, data);
      ASSERT_TRUE(a && b && got) << "nr " << nr;
      // The kernel keeps the lowest action of stacked filters (ERRNO < ALLOW).
      EXPECT_EQ(*got, std::min(*a, *b)) << "nr " << nr << ", args " << value;
      differs_from_net += *got != *b ? 1 : 0;
    }
  }
  EXPECT_GT(differs_from_net, 0u) << "control: the base part refuses something";
}

}  // namespace
}  // namespace forkbox::sandbox::seccomp
