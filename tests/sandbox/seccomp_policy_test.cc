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
#include <set>

namespace forkbox::sandbox::seccomp {
namespace {

const Program kPrograms[] = {Program::kBase, Program::kAgentNet, Program::kToolNoNet};

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
  for (Program p : {Program::kAgentNet, Program::kToolNoNet}) {
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

}  // namespace
}  // namespace forkbox::sandbox::seccomp
