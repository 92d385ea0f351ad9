// The prompt history file (parent/line_editor.h): entries round-trip (multi-line ones included),
// the file is 0600, a long file is cut when opened, and a planted link or FIFO is refused.
#include "parent/line_editor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace forkbox::parent {
namespace {

namespace fs = std::filesystem;

class HistoryFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/forkbox-history-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = (dir_ / "history").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  // The history's directory, as MakeSessionEditor hands it over (forkbox's own, open).
  OwnedDir Dir() const {
    return OwnedDir{UniqueFd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)), dir_};
  }
  fs::path dir_;
  std::string path_;
};

TEST_F(HistoryFileTest, EntriesRoundTripInA0600File) {
  {
    std::vector<std::string> entries;
    auto file = HistoryFile::Open(Dir(), "history", true, &entries);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    EXPECT_TRUE(entries.empty());
    ASSERT_TRUE(file->Append("first").ok());
    ASSERT_TRUE(file->Append("two\nlines \"quoted\"").ok());
  }
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::vector<std::string> entries;
  ASSERT_TRUE(HistoryFile::Open(Dir(), "history", true, &entries).ok());
  EXPECT_EQ(entries, (std::vector<std::string>{"first", "two\nlines \"quoted\""}));
}

TEST_F(HistoryFileTest, ALongFileIsCutToTheNewestEntries) {
  {
    std::ofstream out(path_);
    for (size_t i = 0; i < 2 * HistoryFile::kMaxEntries + 5; ++i) out << "\"e" << i << "\"\n";
  }
  std::vector<std::string> entries;
  ASSERT_TRUE(HistoryFile::Open(Dir(), "history", true, &entries).ok());
  ASSERT_EQ(entries.size(), HistoryFile::kMaxEntries);
  EXPECT_EQ(entries.back(), "e" + std::to_string(2 * HistoryFile::kMaxEntries + 4));
  std::vector<std::string> again;
  ASSERT_TRUE(HistoryFile::Open(Dir(), "history", true, &again).ok());
  EXPECT_EQ(again, entries);  // The file itself was cut.
}

TEST_F(HistoryFileTest, ReadOnlyCreatesNothing) {
  std::vector<std::string> entries;
  ASSERT_TRUE(HistoryFile::Open(Dir(), "history", false, &entries).ok());
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(HistoryFileTest, APlantedLinkOrFifoIsRefusedNotFollowed) {
  const fs::path target = dir_ / "target";
  { std::ofstream(target) << "keep\n"; }
  fs::create_symlink(target, path_);
  std::vector<std::string> entries;
  EXPECT_FALSE(HistoryFile::Open(Dir(), "history", true, &entries).ok());
  std::ifstream in(target);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "keep\n");
  // Control: the same path as a plain file is used.
  fs::remove(path_);
  EXPECT_TRUE(HistoryFile::Open(Dir(), "history", true, &entries).ok());
  fs::remove(path_);
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
  EXPECT_FALSE(
      HistoryFile::Open(Dir(), "history", true, &entries).ok());  // Returns: no reader blocks it.
}

}  // namespace
}  // namespace forkbox::parent
