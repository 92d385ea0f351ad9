// Proves that no descriptor leaks across exec: the test binary re-execs itself with
// kReportFdsFlag, and the new image lists /proc/self/fd on stdout. Also holds this binary's main().
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "base/process.h"
#include "ipc/frame.h"
#include "tests/base/test_util.h"

extern char** environ;

namespace forkbox {
namespace {

constexpr char kReportFdsFlag[] = "--forkbox-report-open-fds";

// In the re-exec'ed image: one "fd target" line per open descriptor.
int ReportOpenFds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 2;
  int self = ::dirfd(dir);
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    int fd = std::atoi(e->d_name);
    if (fd == self) continue;
    char target[512] = {};
    std::string link = std::string("/proc/self/fd/") + e->d_name;
    ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    std::printf("%d %s\n", fd, n > 0 ? target : "?");
  }
  ::closedir(dir);
  return std::fflush(stdout) == 0 ? 0 : 3;
}

std::map<int, std::string> ParseReport(const std::string& text) {
  std::map<int, std::string> fds;
  std::istringstream in(text);
  int fd;
  std::string target;
  while (in >> fd >> target) fds[fd] = target;
  return fds;
}

std::string LinkOf(int fd) {
  char target[512] = {};
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  return n > 0 ? target : "";
}

std::vector<std::string> CurrentEnv() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

// Descriptors of this process that would survive a plain exec (no FD_CLOEXEC), e.g. inherited
// from the test runner.
std::set<int> InheritableFds() {
  std::set<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  int self = ::dirfd(dir);
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    int fd = std::atoi(e->d_name);
    if (fd == self) continue;
    int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) fds.insert(fd);
  }
  ::closedir(dir);
  return fds;
}

// A realistic mix of what forkbox holds open while it spawns a child.
struct OpenResources {
  Result<Pipe> a = MakePipe();
  Result<Pipe> b = MakePipe();
  Result<Pipe> c = MakePipe(O_NONBLOCK);
  Result<Pipe> d = MakePipe();
  UniqueFd file{::open("/etc/passwd", O_RDONLY | O_CLOEXEC)};
  Result<ChildProcess> cat = [this] {
    SpawnOptions o;
    o.argv = {"/bin/cat"};
    o.fds = {{d->read.get(), 0}};
    return Spawn(o);
  }();
  std::set<int> Fds() const {
    return {a->read.get(),  a->write.get(), b->read.get(),  b->write.get(), c->read.get(),
            c->write.get(), d->read.get(),  d->write.get(), file.get(),     cat->pidfd()};
  }
  bool ok() const { return a.ok() && b.ok() && c.ok() && d.ok() && file.valid() && cat.ok(); }
};

TEST(FdLeakTest, SpawnedChildSeesOnlyStdioAndTheMappedFds) {
  OpenResources held;
  ASSERT_TRUE(held.ok());
  Result<Pipe> out = MakePipe();
  ASSERT_TRUE(out.ok());
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(devnull.valid());
  // Deliberately inheritable (like a descriptor some library opened carelessly): Spawn's
  // close_range must drop it anyway.
  UniqueFd careless(::open("/dev/null", O_RDONLY));  // NOLINT(android-cloexec-open)
  ASSERT_TRUE(careless.valid());
  SpawnOptions o;
  o.argv = {"/proc/self/exe", kReportFdsFlag};
  o.env = CurrentEnv();
  o.fds = {{devnull.get(), 0},
           {out->write.get(), 1},
           {devnull.get(), 2},
           {held.a->read.get(), ipc::kChildControlReadFd},
           {held.b->write.get(), ipc::kChildReportWriteFd}};
  Result<ChildProcess> child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  out->write.reset();
  std::string report = forkbox::testing::ReadAllFromFd(out->read.get());
  Result<int> status = child->Wait();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(ExitCodeFromWaitStatus(*status), 0) << DescribeWaitStatus(*status);

  std::map<int, std::string> fds = ParseReport(report);
  std::set<int> numbers;
  for (const auto& [fd, target] : fds) numbers.insert(fd);
  EXPECT_EQ(numbers, (std::set<int>{0, 1, 2, 3, 4})) << report;
  EXPECT_EQ(fds[3], LinkOf(held.a->read.get()));
  EXPECT_EQ(fds[4], LinkOf(held.b->write.get()));
  EXPECT_EQ(fds[1], LinkOf(out->read.get()));
}

TEST(FdLeakTest, PlainExecInheritsNothingWeCreated) {
  const std::set<int> inheritable_before = InheritableFds();
  OpenResources held;
  ASSERT_TRUE(held.ok());
  ipc::FrameReader reader(held.a->read.get());
  Result<Pipe> out = MakePipe();
  ASSERT_TRUE(out.ok());
  // A bare fork+execve, without Spawn's close_range: only O_CLOEXEC protects us here.
  const char* argv[] = {"/proc/self/exe", kReportFdsFlag, nullptr};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out->write.get(), 1);
    ::execve(argv[0], const_cast<char**>(argv), environ);
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  out->write.reset();
  std::string report = forkbox::testing::ReadAllFromFd(out->read.get());
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(ExitCodeFromWaitStatus(status), 0) << DescribeWaitStatus(status);

  const std::set<int> ours = held.Fds();
  for (const auto& [fd, target] : ParseReport(report)) {
    EXPECT_FALSE(ours.count(fd)) << "fd " << fd << " (" << target << ") leaked across exec";
    EXPECT_TRUE(fd <= 2 || inheritable_before.count(fd))
        << "unexpected fd " << fd << " (" << target << ") after exec";
  }
}

}  // namespace
}  // namespace forkbox

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], forkbox::kReportFdsFlag) == 0) {
    return forkbox::ReportOpenFds();
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
