// GuardJournal: a guard's record outlives its owner, and the next forkbox puts the surface back
// (the escape suite checks the same with a SIGKILL of every forkbox process).
#include "sandbox/guard_journal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "tests/sandbox/probe_util.h"

namespace forkbox::sandbox {
namespace {

namespace fs = std::filesystem;
using testing::FileExists;
using testing::kNoUserGitConfig;
using testing::MakeTempDir;
using testing::ReadFile;

struct Project {
  std::string work;     // A git repository.
  std::string journal;  // The journal's directory.
};

Project MakeProject(const char* name) {
  const std::string root = fs::canonical(MakeTempDir(name)).string();
  Project p{root + "/work", root + "/state/forkbox/guards"};
  fs::create_directories(p.work);
  EXPECT_EQ(std::system(("git init -q '" + p.work + "'").c_str()), 0);
  return p;
}

void Plant(const Project& p) {
  std::ofstream(p.work + "/.git/hooks/pre-commit") << "#!/bin/sh\necho planted\n";
  std::ofstream(p.work + "/.git/commondir") << "../elsewhere\n";
}

bool Planted(const Project& p) {
  return FileExists(p.work + "/.git/hooks/pre-commit") || FileExists(p.work + "/.git/commondir");
}

// A process that records the surface in a journal and dies by SIGKILL without putting anything
// back; `write_record` false: it dies before its first Write (the control).
void RecordAndDie(const Project& p, bool write_record) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Result<GuardJournal> journal = GuardJournal::Create(p.journal);
    Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(p.work, kNoUserGitConfig);
    if (!journal.ok() || !guard.ok()) _exit(1);
    if (write_record && !journal->Write(*guard).ok()) _exit(2);
    kill(getpid(), SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
}

// The record formats, as git_surface_record.cc writes (3) and wrote them (2, before c727619).
constexpr std::string_view kFormat2 = "forkbox-guard 2\n", kFormat3 = "forkbox-guard 3\n";

std::string U64(uint64_t v) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return bytes;
}

// `bytes` and the checksum a record ends in: FNV-1a, 64 bits.
std::string Checksummed(std::string bytes) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return bytes + U64(h);
}

// A record's fields, between its format line and its checksum.
std::string Fields(std::string_view record) {
  return std::string(record.substr(kFormat3.size(), record.size() - kFormat3.size() - 8));
}

// The record (Serialize) of a guard of the workdir alone as forkbox wrote it before other trees
// were guarded (format 2): the same fields without the other trees' count (0, last).
std::string AsFormat2(std::string_view record) {
  const std::string fields = Fields(record);
  EXPECT_TRUE(record.starts_with(kFormat3) && fields.ends_with(U64(0))) << "the workdir's alone";
  return Checksummed(std::string(kFormat2) + fields.substr(0, fields.size() - 8));
}

TEST(GuardJournal, TheNextStartPutsBackWhatADeadOwnersToolsPlanted) {
  const Project p = MakeProject("journal-dead");
  RecordAndDie(p, true);
  Plant(p);
  const std::vector<std::string> lines = GuardJournal::Recover(p.journal, kNoUserGitConfig);
  EXPECT_FALSE(Planted(p));
  EXPECT_EQ(lines, (std::vector<std::string>{p.work + ": remove .git/hooks/pre-commit",
                                             p.work + ": remove .git/commondir"}));
  EXPECT_TRUE(fs::is_empty(p.journal)) << "the record is removed once used";
  // Control: an owner that died before its record was written leaves nothing to put back.
  RecordAndDie(p, false);
  Plant(p);
  EXPECT_TRUE(GuardJournal::Recover(p.journal, kNoUserGitConfig).empty());
  EXPECT_TRUE(Planted(p));
  EXPECT_TRUE(fs::is_empty(p.journal)) << "an empty record is removed too";
}

TEST(GuardJournal, ALiveOwnersRecordIsLeftAloneAndAnEndedOnePutsNothingBack) {
  const Project p = MakeProject("journal-live");
  {
    Result<GuardJournal> journal = GuardJournal::Create(p.journal);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(p.work, kNoUserGitConfig);
    ASSERT_TRUE(guard.ok());
    ASSERT_TRUE(journal->Write(*guard).ok());
    Plant(p);
    EXPECT_TRUE(GuardJournal::Recover(p.journal, kNoUserGitConfig).empty())
        << "its owner still guards it";
    EXPECT_TRUE(Planted(p));
    EXPECT_FALSE(fs::is_empty(p.journal));
    guard->Restore(GitSurfaceGuard::After::kDone);  // The owner's own end.
    EXPECT_FALSE(Planted(p));
  }
  Plant(p);  // After the owner ended: not its business any more.
  EXPECT_TRUE(GuardJournal::Recover(p.journal, kNoUserGitConfig).empty());
  EXPECT_TRUE(Planted(p));
  EXPECT_TRUE(fs::is_empty(p.journal));
}

TEST(GuardJournal, RefusesARecordCutShortGarbledOrForAnotherDirectory) {
  const Project p = MakeProject("journal-bad");
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(p.work, kNoUserGitConfig);
  ASSERT_TRUE(guard.ok());
  const std::string record = guard->Serialize();
  ASSERT_TRUE(GitSurfaceGuard::Reload(record, kNoUserGitConfig).ok())
      << "control: the whole record";
  EXPECT_FALSE(GitSurfaceGuard::Reload(record.substr(0, record.size() - 1), kNoUserGitConfig).ok());
  std::string flipped = record;
  flipped[record.size() / 2] ^= 1;
  EXPECT_FALSE(GitSurfaceGuard::Reload(flipped, kNoUserGitConfig).ok());
  EXPECT_FALSE(GitSurfaceGuard::Reload("", kNoUserGitConfig).ok());
  EXPECT_FALSE(GitSurfaceGuard::Reload("garbage", kNoUserGitConfig).ok());
  // The workdir removed and made again at the same path: another project now.
  RecordAndDie(p, true);
  fs::rename(p.work, p.work + ".old");
  fs::create_directories(p.work);
  ASSERT_EQ(std::system(("git init -q '" + p.work + "'").c_str()), 0);
  Plant(p);
  const std::vector<std::string> lines = GuardJournal::Recover(p.journal, kNoUserGitConfig);
  ASSERT_EQ(lines.size(), 1U) << ::testing::PrintToString(lines);
  EXPECT_NE(lines[0].find("no longer leads to the directory the record was made in"),
            std::string::npos)
      << lines[0];
  EXPECT_TRUE(Planted(p)) << "nothing written into the other directory";
  // A garbled record on disk is reported and removed, and nothing changes.
  fs::create_directories(p.journal);
  std::ofstream(p.journal + "/guard-0000000000000000") << record.substr(0, 40);
  const std::vector<std::string> garbled = GuardJournal::Recover(p.journal, kNoUserGitConfig);
  ASSERT_EQ(garbled.size(), 1U);
  EXPECT_NE(garbled[0].find("not a whole git trust surface record"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(p.journal));
}

// A record an older forkbox left (format 2, the workdir's alone: it was killed, then the user
// upgraded) was refused as "not a whole git trust surface record", so what its tools planted
// stayed. It is put back as that forkbox put it back. The control: the same record cut short is
// refused and the plant stays.
TEST(GuardJournal, ARecordAnOlderForkboxLeftIsPutBack) {
  const Project p = MakeProject("journal-format-2");
  for (const bool whole : {true, false}) {
    SCOPED_TRACE(whole ? "a format 2 record" : "control: cut short");
    RecordAndDie(p, true);
    const std::string file = fs::directory_iterator(p.journal)->path().string();
    const std::string record = AsFormat2(ReadFile(file));
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        << (whole ? record : record.substr(0, record.size() - 1));
    Plant(p);
    const std::vector<std::string> expected =
        whole ? std::vector<std::string>{p.work + ": remove .git/hooks/pre-commit",
                                         p.work + ": remove .git/commondir"}
              : std::vector<std::string>{"a record not used: not a whole git trust surface record"};
    EXPECT_EQ(GuardJournal::Recover(p.journal, kNoUserGitConfig), expected);
    EXPECT_EQ(Planted(p), !whole);
    EXPECT_TRUE(fs::is_empty(p.journal));
  }
}

// Each format's record is whole only as that format's: one of 2 with the other trees' count, one
// of 3 without it, one of 2 with its last field cut off, and one of 3 holding a tree's record of
// 2 are refused, each checksummed. The controls: each made by the rules is reloaded.
TEST(GuardJournal, RefusesARecordOfEitherFormatGarbledForTheOther) {
  const Project p = MakeProject("journal-formats");
  const std::string repo = fs::path(p.work).parent_path().string() + "/repo";
  fs::create_directories(repo);
  ASSERT_EQ(std::system(("git init -q '" + repo + "'").c_str()), 0);
  Result<GitSurfaceGuard> alone = GitSurfaceGuard::Take(p.work, kNoUserGitConfig);
  Result<GitSurfaceGuard> both = GitSurfaceGuard::Take(p.work, kNoUserGitConfig, nullptr, {repo});
  ASSERT_TRUE(alone.ok() && both.ok());
  const std::string format3 = alone->Serialize(), format2 = AsFormat2(format3);
  ASSERT_TRUE(GitSurfaceGuard::Reload(format2, kNoUserGitConfig).ok()) << "control: format 2";
  const auto refused = [](const std::string& record) {
    return GitSurfaceGuard::Reload(record, kNoUserGitConfig).status().code() ==
           Status::Code::kInvalidArgument;
  };
  EXPECT_TRUE(refused(Checksummed(std::string(kFormat2) + Fields(format3))));
  EXPECT_TRUE(refused(Checksummed(std::string(kFormat3) + Fields(format2))));
  const std::string fields2 = Fields(format2);
  EXPECT_TRUE(refused(Checksummed(std::string(kFormat2) + fields2.substr(0, fields2.size() - 8))));
  // The tree's record is the last field: its length, then itself.
  const std::string record = both->Serialize();
  const size_t tree_at = record.rfind(kFormat3);
  const std::string tree = record.substr(tree_at, record.size() - 8 - tree_at);
  const auto with_tree = [&](const std::string& t) {
    return Checksummed(record.substr(0, tree_at - 8) + U64(t.size()) + t);
  };
  ASSERT_EQ(with_tree(tree), record) << "control: the tree's record found";
  EXPECT_TRUE(GitSurfaceGuard::Reload(with_tree(tree), kNoUserGitConfig).ok());
  EXPECT_TRUE(refused(with_tree(AsFormat2(tree))));
}

TEST(GuardJournal, RecoverNeverBlocksOnAFifoNorFollowsALink) {
  const Project p = MakeProject("journal-fifo");
  fs::create_directories(p.journal);
  ASSERT_EQ(mkfifo((p.journal + "/guard-fifo").c_str(), 0600), 0);
  RecordAndDie(p, true);
  // Its record, reached through a link: a link is never a record.
  for (const auto& entry : fs::directory_iterator(p.journal)) {
    const std::string name = entry.path().filename().string();
    if (name == "guard-fifo") continue;
    fs::rename(entry.path(), p.journal + "/../moved");
    fs::create_symlink(p.journal + "/../moved", p.journal + "/" + name);
  }
  Plant(p);
  EXPECT_TRUE(GuardJournal::Recover(p.journal, kNoUserGitConfig).empty());
  EXPECT_TRUE(Planted(p));
  // Nor is a journal directory reached through a link on the way.
  const fs::path state = fs::path(p.journal).parent_path().parent_path();
  fs::create_directory_symlink(state, state.string() + "-link");
  fs::rename(p.journal + "/../moved", p.journal + "/guard-linkeddir");
  EXPECT_TRUE(
      GuardJournal::Recover(state.string() + "-link/forkbox/guards", kNoUserGitConfig).empty());
  EXPECT_TRUE(Planted(p));
  fs::rename(p.journal + "/guard-linkeddir", p.journal + "/../moved");
  // Control: the same record under its own name is used.
  for (const auto& entry : fs::directory_iterator(p.journal)) {
    if (entry.path().filename() != "guard-fifo") fs::remove(entry.path());
  }
  fs::rename(p.journal + "/../moved", p.journal + "/guard-moved");
  EXPECT_EQ(GuardJournal::Recover(p.journal, kNoUserGitConfig).size(), 2U);
  EXPECT_FALSE(Planted(p));
  EXPECT_TRUE(fs::exists(p.journal + "/guard-fifo"));
}

// A record is read up to a bound (64 MiB, far above any real surface), so a garbled or planted
// giant is refused without being read whole. The control: a record under the bound is parsed (and
// refused only as garbled).
TEST(GuardJournal, ARecordAboveTheBoundIsNotRead) {
  const Project p = MakeProject("journal-huge");
  fs::create_directories(p.journal);
  for (const off_t size : {off_t{64} << 20, (off_t{64} << 20) + 1}) {
    const std::string path = p.journal + "/guard-huge";
    std::ofstream(path).flush();
    ASSERT_EQ(truncate(path.c_str(), size), 0);
    const std::vector<std::string> lines = GuardJournal::Recover(p.journal, kNoUserGitConfig);
    ASSERT_EQ(lines.size(), 1U) << ::testing::PrintToString(lines);
    const bool refused_unread = lines[0].find("larger than 67108864 bytes") != std::string::npos;
    EXPECT_EQ(refused_unread, size > (off_t{64} << 20)) << lines[0];
    EXPECT_FALSE(fs::exists(path));
  }
}

// A journal assigned over another empties the file it replaces: no record outlives its owner's
// use of it (else the next start would undo what was changed since).
TEST(GuardJournal, AJournalReplacedByAnotherLeavesNoRecordBehind) {
  const Project p = MakeProject("journal-assign");
  Result<GuardJournal> first = GuardJournal::Create(p.journal);
  Result<GuardJournal> second = GuardJournal::Create(p.journal);
  Result<GitSurfaceGuard> guard = GitSurfaceGuard::Take(p.work, kNoUserGitConfig);
  ASSERT_TRUE(first.ok() && second.ok() && guard.ok());
  ASSERT_TRUE(first->Write(*guard).ok());
  *first = std::move(*second);
  Plant(p);
  EXPECT_TRUE(GuardJournal::Recover(p.journal, kNoUserGitConfig).empty());
  EXPECT_TRUE(Planted(p));
  // Control: the record written through the journal it now holds is a live owner's.
  ASSERT_TRUE(first->Write(*guard).ok());
  EXPECT_TRUE(GuardJournal::Recover(p.journal, kNoUserGitConfig).empty());
  EXPECT_TRUE(Planted(p));
}

// A record being made has a name of its own until it is locked (GuardJournal::Create), so that no
// Recover takes a live one for a dead one; a creator that died before the rename leaves that
// name, which the next Recover removes. The control: a live journal's file is kept.
TEST(GuardJournal, ARecordOnlyGetsItsNameOnceLocked) {
  const Project p = MakeProject("journal-new");
  Result<GuardJournal> live = GuardJournal::Create(p.journal);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(p.journal)) {
    names.push_back(entry.path().filename().string());
  }
  ASSERT_EQ(names.size(), 1U);
  EXPECT_EQ(names[0].rfind("guard-", 0), 0U) << names[0];
  std::ofstream(p.journal + "/new-0123456789abcdef").flush();
  EXPECT_TRUE(GuardJournal::Recover(p.journal, kNoUserGitConfig).empty());
  EXPECT_FALSE(fs::exists(p.journal + "/new-0123456789abcdef"));
  EXPECT_TRUE(fs::exists(p.journal + "/" + names[0])) << "a live journal is kept";
}

// Records tools could write are forged records: a session whose writable trees hold the journal
// neither uses it nor keeps one. The control: the same records with the trees elsewhere.
TEST(GuardJournal, StartRefusesAJournalToolsCouldWrite) {
  const Project p = MakeProject("journal-start");
  const std::string state = fs::path(p.journal).parent_path().parent_path().string();
  const char* before = std::getenv("XDG_STATE_HOME");
  const std::string saved = before != nullptr ? before : "";
  ASSERT_EQ(setenv("XDG_STATE_HOME", state.c_str(), 1), 0);
  RecordAndDie(p, true);
  Plant(p);
  JournalStart refused = StartGuardJournal({p.work, state}, kNoUserGitConfig);
  EXPECT_FALSE(refused.journal.has_value());
  EXPECT_TRUE(refused.put_back.empty());
  EXPECT_NE(refused.warning.find("lies in " + state + ", which tools can write"), std::string::npos)
      << refused.warning;
  EXPECT_TRUE(Planted(p));
  JournalStart used = StartGuardJournal({p.work}, kNoUserGitConfig);
  EXPECT_TRUE(used.journal.has_value()) << used.warning;
  EXPECT_TRUE(used.warning.empty()) << used.warning;
  ASSERT_EQ(used.put_back.size(), 2U) << ::testing::PrintToString(used.put_back);
  EXPECT_EQ(used.put_back[0], "git trust surface left changed by a killed forkbox, put back: " +
                                  p.work + ": remove .git/hooks/pre-commit");
  EXPECT_FALSE(Planted(p));
  if (before != nullptr) setenv("XDG_STATE_HOME", saved.c_str(), 1);
  if (before == nullptr) unsetenv("XDG_STATE_HOME");
}

}  // namespace
}  // namespace forkbox::sandbox
